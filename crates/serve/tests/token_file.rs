//! `auth::Tokens::load` on real files: the permission check, and refusals
//! that name the file and the line. The parser's rules are unit-tested in
//! `auth.rs`; the server's answers to tokens are the binary's tests.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use wv_serve::auth::{TokenError, Tokens};

/// A token file holding `text` with mode `mode`, removed on drop.
struct TokenFile(PathBuf);

impl TokenFile {
    fn new(tag: &str, text: &str, mode: u32) -> TokenFile {
        let p = std::env::temp_dir().join(format!("wv-serve-tokens-{}-{tag}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        TokenFile(p)
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const GOOD: &str = "# the operators\nalice:0123456789abcdef0123\n\nfedcba9876543210fedc\n";

#[test]
fn a_private_file_loads_and_a_group_readable_one_too() {
    for mode in [0o600, 0o640] {
        let f = TokenFile::new(&format!("ok-{mode:o}"), GOOD, mode);
        let t = Tokens::load(&f.0).unwrap_or_else(|e| panic!("mode {mode:o}: {e}"));
        assert_eq!(t.len(), 2);
        assert_eq!(t.check(b"0123456789abcdef0123"), Some("alice"));
        assert_eq!(t.check(b"fedcba9876543210fedc"), Some("token-4"));
        assert_eq!(t.check(b"0123456789abcdef012"), None);
    }
}

#[test]
fn a_file_other_users_can_read_or_write_is_refused_before_it_is_read() {
    for mode in [0o644, 0o602, 0o666] {
        let f = TokenFile::new(&format!("exposed-{mode:o}"), GOOD, mode);
        let e = Tokens::load(&f.0).err().unwrap_or_else(|| panic!("mode {mode:o} accepted"));
        assert!(matches!(&e, TokenError::Exposed { path } if *path == f.0), "mode {mode:o}: {e}");
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }
}

#[test]
fn refusals_name_the_file_and_the_line() {
    let f = TokenFile::new("short", "# ops\nalice:0123456789abcdef0123\nbob:short\n", 0o600);
    let e = Tokens::load(&f.0).err().expect("a short token is refused");
    assert!(matches!(&e, TokenError::Short { line: 3, .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains(&f.0.display().to_string()) && text.contains("line 3"), "{text}");

    let f = TokenFile::new("spaced", "bob:0123456789abcdef 0123\n", 0o600);
    let e = Tokens::load(&f.0).err().expect("a token with a space is refused");
    assert!(matches!(&e, TokenError::Malformed { line: 1, .. }), "{e}");

    let f = TokenFile::new("empty", "# nobody yet\n\n", 0o600);
    let e = Tokens::load(&f.0).err().expect("a file without a token is refused");
    assert!(matches!(&e, TokenError::Empty { .. }), "{e}");
}

#[test]
fn a_missing_file_is_a_read_error_naming_it() {
    let p = std::env::temp_dir().join(format!("wv-serve-tokens-{}-missing", std::process::id()));
    let e = Tokens::load(&p).err().expect("a missing file is refused");
    assert!(matches!(&e, TokenError::Read { path, .. } if *path == p), "{e}");
    assert!(e.to_string().contains(&p.display().to_string()), "{e}");
}
