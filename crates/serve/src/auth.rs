//! Bearer tokens and who a request comes from.
//!
//! The token file holds one token per line, `NAME:TOKEN` or just `TOKEN`
//! (named `token-N` by its line), blank lines and `#` comments ignored.
//! It must not be readable by other users, and each token is at least 16
//! characters. Revoking a key is deleting its line and reloading (SIGHUP):
//! the next request with it gets 401. A request presents its token as
//! `Authorization: Bearer TOKEN`, or (the console's downloads) in the
//! cookie `wv_token`.

use std::path::{Path, PathBuf};

/// The shortest token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why a token file was refused, as one sentence.
#[derive(thiserror::Error, Debug)]
pub enum TokenError {
    #[error("cannot read the token file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {} is readable or writable by other users; chmod 600 it (or 640 for a group) and retry", path.display())]
    Exposed { path: PathBuf },
    #[error("the token file {} line {line}: a token must be at least {MIN_TOKEN_LEN} characters (e.g. `openssl rand -hex 32`)", path.display())]
    Short { path: PathBuf, line: usize },
    #[error("the token file {} line {line}: a token is one word of printable characters without spaces", path.display())]
    Malformed { path: PathBuf, line: usize },
    #[error("the token file {} holds no token; add a line NAME:TOKEN", path.display())]
    Empty { path: PathBuf },
}

/// The accepted tokens, with their names.
#[derive(Default, Clone)]
pub struct Tokens {
    list: Vec<(String, Vec<u8>)>,
}

impl Tokens {
    /// Reads and checks a token file.
    pub fn load(path: &Path) -> Result<Tokens, TokenError> {
        use std::os::unix::fs::PermissionsExt;
        let read = |source| TokenError::Read { path: path.to_path_buf(), source };
        let meta = std::fs::metadata(path).map_err(read)?;
        if meta.permissions().mode() & 0o007 != 0 {
            return Err(TokenError::Exposed { path: path.to_path_buf() });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Tokens::parse(&text).map_err(|e| match e {
            Bad::Short(line) => TokenError::Short { path: path.to_path_buf(), line },
            Bad::Malformed(line) => TokenError::Malformed { path: path.to_path_buf(), line },
            Bad::Empty => TokenError::Empty { path: path.to_path_buf() },
        })
    }

    fn parse(text: &str) -> Result<Tokens, Bad> {
        let mut list = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, token) = match line.split_once(':') {
                Some((n, t)) => (n.trim().to_string(), t.trim()),
                None => (format!("token-{}", i + 1), line),
            };
            if token.chars().any(|c| c.is_whitespace() || c.is_control()) || name.is_empty() {
                return Err(Bad::Malformed(i + 1));
            }
            if token.len() < MIN_TOKEN_LEN {
                return Err(Bad::Short(i + 1));
            }
            list.push((name, token.as_bytes().to_vec()));
        }
        if list.is_empty() {
            return Err(Bad::Empty);
        }
        Ok(Tokens { list })
    }

    /// The name of the token `given`, comparing in time independent of
    /// where a wrong token first differs.
    pub fn check(&self, given: &[u8]) -> Option<&str> {
        let mut found = None;
        for (name, t) in &self.list {
            if ct_eq(t, given) {
                found = Some(name.as_str());
            }
        }
        found
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

enum Bad {
    Short(usize),
    Malformed(usize),
    Empty,
}

/// Equality whose time depends only on the lengths.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token a request presents: the bearer token, else the `wv_token` cookie. Another
/// scheme (a proxy's `Basic` in front of the console) does not hide the cookie.
pub(crate) fn presented(headers: &axum::http::HeaderMap) -> Option<&[u8]> {
    use axum::http::header::{AUTHORIZATION, COOKIE};
    let bearer = headers.get_all(AUTHORIZATION).iter().find_map(|v| {
        let v = v.as_bytes();
        // The scheme is case-insensitive (RFC 9110, 11.1).
        (v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ")).then(|| &v[7..])
    });
    if bearer.is_some() {
        return bearer;
    }
    headers.get_all(COOKIE).iter().flat_map(|v| v.as_bytes().split(|b| *b == b';')).find_map(|kv| {
        let kv = kv.trim_ascii();
        kv.strip_prefix(b"wv_token=")
    })
}

/// Who a request comes from, for the log: its address, the client
/// certificate's subject, the token's name.
#[derive(Clone, Debug, Default)]
pub struct Peer {
    pub addr: Option<std::net::SocketAddr>,
    pub cert: Option<String>,
    pub token: Option<String>,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.addr {
            Some(a) => write!(f, "{a}")?,
            None => f.write_str("-")?,
        }
        if let Some(c) = &self.cert {
            write!(f, " cert={c:?}")?;
        }
        if let Some(t) = &self.token {
            write!(f, " token={t:?}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_comments_and_refuses_short_or_spaced_tokens() {
        let t = Tokens::parse("# ops\nalice:0123456789abcdef0123\n\n0123456789abcdefXYZ\n").ok().unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.check(b"0123456789abcdef0123"), Some("alice"));
        assert_eq!(t.check(b"0123456789abcdefXYZ"), Some("token-4"));
        assert_eq!(t.check(b"0123456789abcdef012"), None);
        assert_eq!(t.check(b""), None);
        assert!(matches!(Tokens::parse("bob:short"), Err(Bad::Short(1))));
        assert!(matches!(Tokens::parse("x\n bob:0123456789abcdef 0123"), Err(Bad::Short(1))));
        assert!(matches!(Tokens::parse("bob:0123456789abcdef 0123"), Err(Bad::Malformed(1))));
        assert!(matches!(Tokens::parse("# nothing\n"), Err(Bad::Empty)));
    }

    #[test]
    fn token_from_header_or_cookie() {
        let mut h = axum::http::HeaderMap::new();
        assert_eq!(presented(&h), None);
        h.insert("cookie", "a=b; wv_token=sesame".parse().unwrap());
        assert_eq!(presented(&h), Some(&b"sesame"[..]));
        h.insert("authorization", "Bearer abc".parse().unwrap());
        assert_eq!(presented(&h), Some(&b"abc"[..]));
    }

    #[test]
    fn a_token_of_exactly_the_minimum_length_is_accepted() {
        let t = Tokens::parse("a:0123456789abcdef").ok().unwrap();
        assert_eq!(t.check(b"0123456789abcdef"), Some("a"));
        assert!(matches!(Tokens::parse("a:0123456789abcde"), Err(Bad::Short(1))));
    }

    #[test]
    fn a_name_is_before_the_first_colon_and_must_not_be_empty() {
        let t = Tokens::parse("  ops team : b:0123456789abcdef  ").ok().unwrap();
        assert_eq!(t.check(b"b:0123456789abcdef"), Some("ops team"));
        assert!(matches!(Tokens::parse("\n:0123456789abcdef"), Err(Bad::Malformed(2))));
        assert!(matches!(Tokens::parse("x:0123456789abcdef\u{7f}"), Err(Bad::Malformed(1))));
        assert_eq!(Tokens::default().check(b""), None);
        assert!(Tokens::default().is_empty());
    }

    #[test]
    fn ct_eq_compares_every_byte_and_the_length() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"xbc", b"abc"));
        assert!(!ct_eq(b"abc", b"abcd") && !ct_eq(b"abcd", b"abc"));
        assert!(ct_eq(b"", b""));
    }

    #[test]
    fn a_bearer_token_in_either_case_or_the_cookie_among_others() {
        let mut h = axum::http::HeaderMap::new();
        h.insert("authorization", "bearer lower".parse().unwrap());
        assert_eq!(presented(&h), Some(&b"lower"[..]));
        h.insert("authorization", "Basic dXNlcjpwdw==".parse().unwrap());
        assert_eq!(presented(&h), None);
        h.insert("authorization", "BEARER upper".parse().unwrap());
        assert_eq!(presented(&h), Some(&b"upper"[..]));
        // A proxy's Basic credentials beside the console's session cookie: the cookie counts.
        h.insert("authorization", "Basic dXNlcjpwdw==".parse().unwrap());
        h.insert("cookie", "wv_token=session".parse().unwrap());
        assert_eq!(presented(&h), Some(&b"session"[..]));
        // Cookies in several headers, the token in the second.
        let mut h = axum::http::HeaderMap::new();
        h.append("cookie", "a=1".parse().unwrap());
        h.append("cookie", "b=2;wv_token=open".parse().unwrap());
        assert_eq!(presented(&h), Some(&b"open"[..]));
        let mut h = axum::http::HeaderMap::new();
        h.insert("cookie", "xwv_token=no".parse().unwrap());
        assert_eq!(presented(&h), None);
    }

    #[test]
    fn a_peer_shows_what_is_known_of_it() {
        assert_eq!(Peer::default().to_string(), "-");
        let p =
            Peer { addr: Some("10.0.0.1:5000".parse().unwrap()), cert: Some("CN=a".into()), token: Some("ops".into()) };
        assert_eq!(p.to_string(), "10.0.0.1:5000 cert=\"CN=a\" token=\"ops\"");
    }

    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("wv-auth-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, "a:0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let exposed = Tokens::load(&path).err().map(|e| e.to_string());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let loaded = Tokens::load(&path).map(|t| t.len()).ok();
        std::fs::remove_dir_all(&dir).unwrap();
        let want = format!(
            "the token file {} is readable or writable by other users; chmod 600 it (or 640 for a group) and retry",
            path.display()
        );
        assert_eq!((exposed, loaded), (Some(want), Some(1)));
    }
}
