//! The fleet file and the sources it names.
//!
//! ```toml
//! node_timeout = "10s"          # defaults for every node
//! [[node]]
//! name = "rec-a"
//! url = "https://rec-a.example:8443"
//! token_file = "/etc/wirevault/fleet.token"
//! ca = "/etc/wirevault/ca.pem"
//! [[node]]
//! name = "here"
//! url = "/srv/wirevault"        # a local store
//! ```
//!
//! A node's order in the file is its rank in the merge (ties of equal
//! timestamps go to the earlier node). Unknown keys are refused: a typo
//! would otherwise quietly drop a token or a timeout.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long to wait for a node, and how often to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The TCP connect of one attempt.
    pub connect: Duration,
    /// The longest a node may send nothing (head or body) before it is
    /// dropped from the merge as stalled.
    pub node: Duration,
    /// Attempts after the first when connecting fails or the node answers
    /// 503 (busy), before any packet came: a packet already merged cannot
    /// be asked for again, and a node that stalled has had its timeout.
    pub retries: u32,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts { connect: Duration::from_secs(3), node: Duration::from_secs(30), retries: 1 }
    }
}

/// Where a node's packets are.
#[derive(Debug, Clone)]
pub enum Source {
    /// A store directory (or capture file) on this machine, read through wv-query.
    Local(PathBuf),
    /// A recorder's API.
    Remote(crate::http::Remote),
}

/// One source of the merge, with its name (the pcapng interface's name,
/// the warnings' subject).
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub source: Source,
    pub timeouts: Timeouts,
}

impl Node {
    /// The URL or path, as the user gave it.
    pub fn location(&self) -> String {
        match &self.source {
            Source::Local(p) => p.display().to_string(),
            Source::Remote(r) => r.url.clone(),
        }
    }
}

/// Why the fleet file or a source was refused, as one sentence.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read the fleet file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the fleet file {} line {line}: {message}; fix it (docs/fleet.md shows the keys)", path.display())]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("the fleet file {} {what}", path.display())]
    Invalid { path: PathBuf, what: String },
    /// A file the fleet file names (token, CA, certificate, key) cannot be used.
    #[error("the fleet file {} {what}", path.display())]
    Unreadable { path: PathBuf, what: String },
    #[error("no node is named {name:?} in {}; its nodes are {known}", path.display())]
    UnknownNode { path: PathBuf, name: String, known: String },
    /// A `--store SRC` that cannot be used.
    #[error("--store {src}: {error}")]
    Source { src: String, error: crate::http::SourceError },
}

impl ConfigError {
    /// The command line or the fleet file must change (else a file it
    /// names is missing or unreadable: the host is not as it says).
    pub fn is_usage(&self) -> bool {
        match self {
            ConfigError::Read { .. } | ConfigError::Unreadable { .. } => false,
            ConfigError::Source { error, .. } => error.usage,
            _ => true,
        }
    }
}

/// The TLS and token files of a remote node.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    pub token_file: Option<PathBuf>,
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    connect_timeout: Option<String>,
    node_timeout: Option<String>,
    retries: Option<u32>,
    #[serde(default)]
    node: Vec<NodeToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeToml {
    name: String,
    url: String,
    token_file: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
    connect_timeout: Option<String>,
    node_timeout: Option<String>,
    retries: Option<u32>,
}

/// A parsed fleet file: its nodes in order.
#[derive(Debug, Clone)]
pub struct FleetFile {
    pub path: PathBuf,
    pub nodes: Vec<Node>,
}

/// A duration key of the fleet file.
fn duration(path: &Path, key: &str, v: &Option<String>) -> Result<Option<Duration>, ConfigError> {
    v.as_deref()
        .map(|s| {
            wv_units::parse_duration(s).ok().filter(|d| !d.is_zero()).ok_or_else(|| ConfigError::Invalid {
                path: path.to_path_buf(),
                what: format!(
                    "gives {key} = {s:?}, which is not a duration above zero: give {}",
                    wv_units::DURATION_FORMS
                ),
            })
        })
        .transpose()
}

impl FleetFile {
    /// Reads and checks a fleet file; relative paths in it are taken from
    /// its directory. `over` (the command line's options) win over the
    /// file's defaults, a node's own keys over both.
    pub fn load(path: &Path, over: &Overrides) -> Result<FleetFile, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        FleetFile::parse(&text, path, over)
    }

    /// As [`FleetFile::load`], of text already read.
    pub fn parse(text: &str, path: &Path, over: &Overrides) -> Result<FleetFile, ConfigError> {
        let f: FileToml = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            line: e.span().map_or(1, |s| text[..s.start.min(text.len())].matches('\n').count() + 1),
            message: e.message().trim_end_matches('.').replace('\n', " "),
        })?;
        let invalid = |what: String| ConfigError::Invalid { path: path.to_path_buf(), what };
        if f.node.is_empty() {
            return Err(invalid("lists no node; add a [[node]] table with a name and a url".into()));
        }
        let base = Timeouts {
            connect: over
                .connect
                .or(duration(path, "connect_timeout", &f.connect_timeout)?)
                .unwrap_or(Timeouts::default().connect),
            node: over.node.or(duration(path, "node_timeout", &f.node_timeout)?).unwrap_or(Timeouts::default().node),
            retries: over.retries.or(f.retries).unwrap_or(Timeouts::default().retries),
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let rel = |p: &Option<PathBuf>| p.as_ref().map(|p| dir.join(p));
        let mut nodes: Vec<Node> = Vec::new();
        for n in f.node {
            if n.name.is_empty() || n.name.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',') {
                return Err(invalid(format!("names a node {:?}: a name is one word without commas", n.name)));
            }
            if nodes.iter().any(|o| o.name == n.name) {
                return Err(invalid(format!("names two nodes {:?}; give each its own name", n.name)));
            }
            let timeouts = Timeouts {
                connect: duration(path, "connect_timeout", &n.connect_timeout)?.unwrap_or(base.connect),
                node: duration(path, "node_timeout", &n.node_timeout)?.unwrap_or(base.node),
                retries: n.retries.unwrap_or(base.retries),
            };
            let creds =
                Credentials { token_file: rel(&n.token_file), ca: rel(&n.ca), cert: rel(&n.cert), key: rel(&n.key) };
            let source = source(&n.url, Some(dir), &creds).map_err(|e| {
                let what = format!("node {:?}: {e}", n.name);
                match e.usage {
                    true => invalid(what),
                    false => ConfigError::Unreadable { path: path.to_path_buf(), what },
                }
            })?;
            nodes.push(Node { name: n.name, source, timeouts });
        }
        Ok(FleetFile { path: path.to_path_buf(), nodes })
    }

    /// Keeps only the nodes named in `names` (in the file's order); a name
    /// the file does not have is refused.
    pub fn select(mut self, names: &[String]) -> Result<FleetFile, ConfigError> {
        if names.is_empty() {
            return Ok(self);
        }
        for name in names {
            if !self.nodes.iter().any(|n| &n.name == name) {
                let known: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
                return Err(ConfigError::UnknownNode { path: self.path, name: name.clone(), known: known.join(", ") });
            }
        }
        self.nodes.retain(|n| names.contains(&n.name));
        Ok(self)
    }
}

/// The command line's timeouts, over the fleet file's defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    pub connect: Option<Duration>,
    pub node: Option<Duration>,
    pub retries: Option<u32>,
}

/// A source as given (`--store SRC`, a node's `url`): `http://` or
/// `https://` is a recorder, anything else a local path (relative to `dir`
/// when given).
pub fn source(src: &str, dir: Option<&Path>, creds: &Credentials) -> Result<Source, crate::http::SourceError> {
    if src.starts_with("http://") || src.starts_with("https://") {
        return crate::http::Remote::new(src, creds).map(Source::Remote);
    }
    if let Some((scheme, _)) = src.split_once("://") {
        return Err(crate::http::SourceError::usage(format!(
            "{src:?} is neither a store path nor an http:// or https:// URL (scheme {scheme:?})"
        )));
    }
    Ok(Source::Local(dir.map_or_else(|| PathBuf::from(src), |d| d.join(src))))
}

/// The nodes of `--store SRC` given one by one: named by their place
/// (`node-1`, ...), with the command line's timeouts and credentials.
pub fn nodes_of(srcs: &[String], over: &Overrides, creds: &Credentials) -> Result<Vec<Node>, ConfigError> {
    let d = Timeouts::default();
    let timeouts = Timeouts {
        connect: over.connect.unwrap_or(d.connect),
        node: over.node.unwrap_or(d.node),
        retries: over.retries.unwrap_or(d.retries),
    };
    srcs.iter()
        .enumerate()
        .map(|(i, s)| {
            let source = source(s, None, creds).map_err(|error| ConfigError::Source { src: s.clone(), error })?;
            Ok(Node { name: format!("node-{}", i + 1), source, timeouts })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FleetFile, ConfigError> {
        FleetFile::parse(text, Path::new("/etc/wv/fleet.toml"), &Overrides::default())
    }

    #[test]
    fn nodes_keep_their_order_and_defaults() {
        let f = parse(
            "node_timeout = \"5s\"\nretries = 3\n[[node]]\nname = \"b\"\nurl = \"http://127.0.0.1:9000\"\n\
             [[node]]\nname = \"a\"\nurl = \"store-a\"\nnode_timeout = \"1s\"\n",
        )
        .unwrap();
        let names: Vec<&str> = f.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(f.nodes[0].timeouts.node, Duration::from_secs(5));
        assert_eq!(f.nodes[1].timeouts, Timeouts { node: Duration::from_secs(1), retries: 3, ..Timeouts::default() });
        assert!(matches!(&f.nodes[1].source, Source::Local(p) if p == Path::new("/etc/wv/store-a")));
    }

    #[test]
    fn unknown_keys_and_names_are_one_sentence() {
        let e = parse("[[node]]\nname = \"a\"\nurl = \"x\"\ntoken = \"t\"\n").unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("unknown field `token`") && !e.contains('\n'), "{e}");
        let f = parse("[[node]]\nname = \"a\"\nurl = \"x\"\n").unwrap();
        let e = f.select(&["z".into()]).unwrap_err().to_string();
        assert_eq!(e, "no node is named \"z\" in /etc/wv/fleet.toml; its nodes are a");
        assert!(parse("").unwrap_err().to_string().contains("lists no node"));
        assert!(parse("[[node]]\nname = \"a\"\nurl = \"x\"\n[[node]]\nname = \"a\"\nurl = \"y\"\n").is_err());
        assert!(parse("node_timeout = \"soon\"\n[[node]]\nname = \"a\"\nurl = \"x\"\n").is_err());
    }
}
