//! clap's errors, and tcpdump's habits met with a sentence.
//!
//! An option a subcommand does not have is clap's error (exit 2), less its tip "to pass '-r'
//! as a value, use '-- -r'": after `--` every word is filter text, so following it would turn
//! the mistake into a filter that matches nothing or fails to compile. Where the option is one
//! a tcpdump user reaches for, the error is one sentence saying what this subcommand takes
//! instead, as `record` does for `-w`: `-r FILE` (the store or file is the first argument) and
//! `-c N` (`--limit N`) in `query`, `analyze` and `replay`. A time that begins with `-`
//! (`--from -5`) reaches [`super::time_range`], which shows the forms a time takes.

use crate::{exit, fail};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::CommandFactory;
use std::ffi::OsString;

/// The subcommands whose first arguments are the stores or files they read.
const READERS: [&str; 3] = ["query", "analyze", "replay"];

/// What clap's error `e` on `argv` becomes: a sentence for a tcpdump habit (returned, exit
/// 2), else clap's own message without the `-- -x` tip (printed; the process exits as clap's
/// errors do). Help and version requests print and exit 0 as before.
pub fn clap_error(e: clap::Error, argv: &[OsString]) -> anyhow::Error {
    // A value parser of ours that wrote the whole sentence, option named first (the counts:
    // `wv_units::count_error`), is that sentence alone, as every unit's refusal is.
    if let Some(said) = value_sentence(&e) {
        return fail(exit::USAGE, said);
    }
    if e.kind() != ErrorKind::UnknownArgument {
        e.exit()
    }
    let arg = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a.clone(),
        _ => e.exit(),
    };
    if let Some(sentence) = subcommand(argv).and_then(|sub| habit(&sub, &arg, argv)) {
        return fail(exit::USAGE, sentence);
    }
    // Without the tip; the error's other lines (a similar option, the usage) stay.
    let text = e.render().to_string();
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("tip: to pass '")).collect();
    let mut out = kept.join("\n").replace("\n\n\n", "\n\n");
    out.push('\n');
    eprint!("{out}");
    std::process::exit(i32::from(exit::USAGE))
}

/// The sentence of a value parser of ours that wrote the whole of it, option named first (the
/// counts: `wv_units::count_error`; record's sizes and durations: `wv_record::checks`).
pub fn value_sentence(e: &clap::Error) -> Option<String> {
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let name = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => a.split([' ', '=']).next().unwrap_or_default().to_string(),
        _ => return None,
    };
    let said = std::error::Error::source(e).map(ToString::to_string)?;
    (!name.is_empty() && said.starts_with(&format!("{name} "))).then_some(said)
}

/// The subcommand named on `argv`: the first word that is one.
fn subcommand(argv: &[OsString]) -> Option<String> {
    let root = crate::Cli::command();
    let names: Vec<&str> = root.get_subcommands().map(|c| c.get_name()).collect();
    argv.iter().skip(1).filter_map(|a| a.to_str()).find(|a| names.contains(a)).map(str::to_owned)
}

/// The sentence for tcpdump's `-r` or `-c` given to a reader subcommand, if `arg` is one.
fn habit(sub: &str, arg: &str, argv: &[OsString]) -> Option<String> {
    if !READERS.contains(&sub) || arg.starts_with("--") {
        return None;
    }
    match arg.strip_prefix('-')?.chars().next()? {
        'r' if sub == "replay" => Some(
            "replay has no -r: give the stores or capture files as its first arguments, as in \
             `wirevault replay -i IF FILE... [EXPRESSION]`"
                .into(),
        ),
        'r' => Some(format!(
            "{sub} has no -r: give the store or capture file as its first argument, as in `wirevault {sub} FILE [EXPRESSION]`"
        )),
        'c' => {
            // `-c 5` or `-c5`: the count, when it is there.
            let words: Vec<&str> = argv.iter().filter_map(|a| a.to_str()).collect();
            let at = words.iter().position(|w| w.starts_with("-c") && !w.starts_with("--"));
            let n = at
                .and_then(|i| if words[i].len() > 2 { Some(&words[i][2..]) } else { words.get(i + 1).copied() })
                .filter(|n| super::packet_limit(n).is_ok())
                .unwrap_or("N");
            let what = match sub {
                "query" => "to stop after N matching packets (--count prints how many match)",
                "analyze" => "to analyze the first N matching packets",
                _ => "to send at most N packets",
            };
            Some(format!("{sub} has no -c: give --limit {n} {}", what.replacen(" N ", &format!(" {n} "), 1)))
        }
        _ => None,
    }
}

/// Every different value the command line gives subcommand `sub`'s option `id`, in order, as
/// clap's own tokenizer reads them (`-o DIR`, `-oDIR`, `-o=DIR`, `--output[=]DIR`, combined
/// short flags such as `-qoDIR`; nothing after `--`). The parse a command runs on keeps only
/// the last one (`args_override_self`, for `--config`), so a second value would be taken
/// without a word: `record` refuses a second store with this.
pub fn values_given(argv: &[String], sub: &str, id: &'static str) -> Vec<String> {
    use clap::CommandFactory;
    // The option appended: it keeps every value (the other flags still override themselves,
    // so a repeated `-q` does not stop the parse).
    let cmd = crate::Cli::command()
        .ignore_errors(true)
        .mut_subcommand(sub, |s| s.mut_arg(id, |a| a.action(clap::ArgAction::Append)));
    let Ok(m) = cmd.try_get_matches_from(argv) else { return Vec::new() };
    let Some(given) = m.subcommand_matches(sub).and_then(|r| r.get_raw(id)) else { return Vec::new() };
    let mut found: Vec<String> = Vec::new();
    for v in given.map(|v| v.to_string_lossy().into_owned()) {
        if !found.contains(&v) {
            found.push(v);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn habits() {
        let a = argv("wirevault query s -c 5");
        assert_eq!(
            habit("query", "-c", &a).as_deref(),
            Some("query has no -c: give --limit 5 to stop after 5 matching packets (--count prints how many match)")
        );
        assert!(habit("replay", "-c", &argv("wirevault replay -i lo s -c")).unwrap().contains("--limit N to send"));
        assert!(habit("analyze", "-c10", &argv("wirevault analyze s -c10")).unwrap().contains("--limit 10 "));
        assert!(habit("analyze", "-r", &a).unwrap().contains("`wirevault analyze FILE [EXPRESSION]`"));
        assert!(habit("replay", "-r", &a).unwrap().contains("FILE..."));
        assert_eq!(habit("record", "-r", &a), None);
        assert_eq!(habit("query", "-x", &a), None);
        assert_eq!(habit("query", "--c", &a), None);
        assert_eq!(subcommand(&argv("wirevault --log-level debug replay -i x")).as_deref(), Some("replay"));
    }
}

#[cfg(test)]
mod values_given_tests {
    use super::values_given;

    fn outputs_given(argv: &[String]) -> Vec<String> {
        values_given(argv, "record", "store")
    }

    #[test]
    fn a_second_output_is_found_in_every_spelling() {
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(outputs_given(&argv("wirevault record -i eth0 -o /a")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a -i eth0 --output /a")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a --output=/b")), ["/a", "/b"]);
        assert_eq!(outputs_given(&argv("wirevault record -o/a -o /b")), ["/a", "/b"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a -o=/a")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a -- -o /b")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -qo/b -o /a")), ["/b", "/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -i eth0 -o /a -q -q -c 1 -c 2 -o /b")), ["/a", "/b"]);
        assert_eq!(outputs_given(&argv("wirevault --log-level debug record -qo /b --output /a")), ["/b", "/a"]);
        // A value that looks like the flag is another option's value.
        assert_eq!(outputs_given(&argv("wirevault record -w -o -o /a")), ["/a"]);
        assert!(outputs_given(&argv("wirevault query -o /a -o /b")).is_empty());
    }
}
