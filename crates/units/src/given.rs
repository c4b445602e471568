//! A value as an option gave it and as parsed.

use std::fmt;

/// Sizes from this (1 EiB) on are out of range for every option of `record`: no store, file
/// or arena comes near it, and larger values would overflow.
pub const MAX_SIZE: u64 = 1 << 60;

/// A quantity with the text it was parsed from: a refusal quotes what was typed
/// (`--file-size 1G`), the program uses the number.
#[derive(Clone, Debug, PartialEq)]
pub struct Given<T> {
    pub value: T,
    pub text: String,
}

impl<T> Given<T> {
    /// `value`, parsed from `text`.
    pub fn new(value: T, text: &str) -> Given<T> {
        Given { value, text: text.to_string() }
    }
}

impl<T> fmt::Display for Given<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Option `name`'s size `s` in the one grammar of sizes, below [`MAX_SIZE`]; the refusal is
/// one sentence that starts with `name`.
pub fn given_size(name: &str, s: &str) -> Result<Given<u64>, String> {
    match crate::parse_size(s) {
        None => Err(crate::size_error(name, s)),
        Some(v) if v >= MAX_SIZE => Err(format!("{name} {s} is out of range (sizes go up to 1023P)")),
        Some(v) => Ok(Given::new(v, s)),
    }
}

/// Option `name`'s duration `s` in the one grammar of durations; the refusal is one sentence
/// that starts with `name`.
pub fn given_duration(name: &str, s: &str) -> Result<Given<std::time::Duration>, String> {
    crate::parse_duration(s).map(|d| Given::new(d, s)).map_err(|e| crate::duration_error(name, s, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_keep_their_text_and_stop_below_an_exbibyte() {
        let g = given_size("--x", "1.5G").unwrap();
        assert_eq!((g.value, g.to_string()), (3 << 29, "1.5G".to_string()));
        // The largest unit is T: 2^20 T is 2^60, the first size out of range.
        assert_eq!(given_size("--x", "1048576T").unwrap_err(), "--x 1048576T is out of range (sizes go up to 1023P)");
        assert_eq!(given_size("--x", "1048575T").unwrap().value, 1048575 << 40);
        assert!(given_size("--x", "ten").unwrap_err().starts_with("--x \"ten\" is not a size"));
    }

    #[test]
    fn durations_keep_their_text() {
        let g = given_duration("--d", "90s").unwrap();
        assert_eq!((g.value.as_secs(), g.text.as_str()), (90, "90s"));
        // A bare number is seconds; a unit it does not know is refused.
        assert_eq!(given_duration("--d", "5").unwrap().value.as_secs(), 5);
        assert!(given_duration("--d", "5y").unwrap_err().starts_with("--d \"5y\" is not a duration"));
    }
}
