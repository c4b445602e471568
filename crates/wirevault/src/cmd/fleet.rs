//! `query --store SRC --store SRC ...` and `query --fleet FILE`: one
//! answer over many stores and recorders (`wv_fleet`), and the honest
//! account of the nodes that did not give theirs.

use super::query::{Args, OutFormat};
use crate::log::Level;
use crate::{exit, fail};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The help's heading of these options.
const FLEET: &str = "Several stores or recorders (docs/fleet.md)";

/// The sources of a query over several stores.
#[derive(clap::Args, Default)]
pub struct Sources {
    /// A source of the answer, repeated: a store directory, or a recorder's
    /// URL (http://127.0.0.1:PORT on loopback, https://HOST:PORT elsewhere).
    /// The answers are merged by timestamp; equal timestamps go out in the
    /// order the sources are given.
    #[arg(long = "store", value_name = "SRC", help_heading = FLEET)]
    pub stores: Vec<String>,
    /// A fleet file (TOML) naming the nodes to query, in merge order (see docs/fleet.md).
    #[arg(long, value_name = "FILE", conflicts_with = "stores", help_heading = FLEET)]
    pub fleet: Option<PathBuf>,
    /// Only these nodes of the fleet file (repeated or comma-separated).
    #[arg(long = "node", value_name = "NAME", requires = "fleet", value_delimiter = ',', help_heading = FLEET)]
    pub nodes: Vec<String>,
    /// Exit 0 with the answer of the nodes that gave theirs when some did
    /// not (each left-out node is still named on standard error); without
    /// it such an answer exits with code 1, and so does one from no node.
    #[arg(long, help_heading = FLEET)]
    pub allow_partial: bool,
    /// How long connecting to a recorder may take (default 3s; fleet key connect_timeout).
    #[arg(long, value_name = "DURATION", help_heading = FLEET)]
    pub connect_timeout: Option<String>,
    /// A recorder that sends nothing for this long is left out of the answer
    /// (default 30s; fleet key node_timeout).
    #[arg(long, value_name = "DURATION", help_heading = FLEET)]
    pub node_timeout: Option<String>,
    /// Attempts after the first when a recorder cannot be reached or is busy,
    /// before it sent any packet (default 1; fleet key retries).
    #[arg(long, value_name = "N", help_heading = FLEET)]
    pub retries: Option<u32>,
    /// The bearer token for --store URLs: a file in `serve --token-file`'s
    /// format (its first token is used).
    #[arg(long, value_name = "FILE", help_heading = FLEET)]
    pub token_file: Option<PathBuf>,
    /// The CA certificate (PEM) that signed the recorders' certificates (https --store URLs).
    #[arg(long, value_name = "FILE", help_heading = FLEET)]
    pub ca: Option<PathBuf>,
    /// A client certificate (PEM) for https --store URLs, with --key.
    #[arg(long, value_name = "FILE", requires = "key", help_heading = FLEET)]
    pub cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert", help_heading = FLEET)]
    pub key: Option<PathBuf>,
}

impl Sources {
    /// Several sources (or a fleet file) were given.
    pub fn given(&self) -> bool {
        !self.stores.is_empty() || self.fleet.is_some()
    }

    fn overrides(&self) -> anyhow::Result<wv_fleet::Overrides> {
        let d = |name: &str, v: &Option<String>| -> anyhow::Result<Option<std::time::Duration>> {
            v.as_deref()
                .map(|s| match wv_units::parse_duration(s) {
                    Ok(d) if !d.is_zero() => Ok(d),
                    Ok(_) => {
                        Err(fail(exit::USAGE, format!("{name} 0 would give up at once; give a duration above zero")))
                    }
                    Err(e) => Err(fail(exit::USAGE, wv_units::duration_error(name, s, &e))),
                })
                .transpose()
        };
        Ok(wv_fleet::Overrides {
            connect: d("--connect-timeout", &self.connect_timeout)?,
            node: d("--node-timeout", &self.node_timeout)?,
            retries: self.retries,
        })
    }

    /// The nodes, in merge order: the fleet file's, or one per `--store`
    /// (with the positional store, when given, first).
    pub fn nodes(&self, store: Option<&Path>) -> anyhow::Result<Vec<wv_fleet::Node>> {
        let over = self.overrides()?;
        if let Some(file) = &self.fleet {
            let f = wv_fleet::FleetFile::load(file, &over).and_then(|f| f.select(&self.nodes)).map_err(config_error)?;
            return Ok(f.nodes);
        }
        let creds = wv_fleet::Credentials {
            token_file: self.token_file.clone(),
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
        };
        let mut srcs: Vec<String> = store.map(|p| p.display().to_string()).into_iter().collect();
        srcs.extend(self.stores.iter().cloned());
        let mut nodes = wv_fleet::config::nodes_of(&srcs, &over, &creds).map_err(config_error)?;
        // Named after what they are (host:port, the store's directory name),
        // each name once.
        for i in 0..nodes.len() {
            let loc = nodes[i].location();
            let base = match loc.split_once("://") {
                Some((_, rest)) => rest.trim_end_matches('/').to_string(),
                None => Path::new(&loc).file_name().map_or(loc.clone(), |n| n.to_string_lossy().into_owned()),
            };
            let taken = |n: &str| nodes[..i].iter().any(|o| o.name == n);
            let mut name = base.clone();
            let mut k = 2;
            while taken(&name) {
                name = format!("{base}#{k}");
                k += 1;
            }
            nodes[i].name = name;
        }
        Ok(nodes)
    }
}

/// A fleet file or source refused: 2 when what it says must change, 1 when a
/// file it names cannot be read (the `exit` module's rule).
pub(crate) fn config_error(e: wv_fleet::ConfigError) -> anyhow::Error {
    fail(if e.is_usage() { exit::USAGE } else { exit::ERROR }, e.to_string())
}

/// The nodes of `sel` and what to ask them (`limit`: `--limit`).
pub fn selection(
    sel: &super::query::Selection,
    limit: Option<u64>,
) -> anyhow::Result<(Vec<wv_fleet::Node>, wv_fleet::Selection)> {
    let (from_ns, to_ns) = super::time_range(&sel.from, &sel.to, ("--from", "--to"))?;
    // With --store or --fleet, the first word (taken as STORE by the parser)
    // is the expression's; a word that names a path is a store given the
    // old way, which would be read as a filter.
    let mut words = sel.expression.clone();
    let mut store = None;
    if let Some(first) = &sel.store {
        if sel.sources.given() {
            if first.exists() {
                return Err(fail(
                    exit::USAGE,
                    format!("{} is a path: with --store or --fleet give every store as --store SRC", first.display()),
                ));
            }
            words.insert(0, first.display().to_string());
        } else {
            store = Some(first.as_path());
        }
    }
    let nodes = sel.sources.nodes(store)?;
    Ok((nodes, wv_fleet::Selection { from_ns, to_ns, expr: words.join(" "), limit }))
}

/// The nodes left out, one warning each; the exit code they make.
pub fn say_lost(lost: &[wv_fleet::Lost], warnings: &[String], allow_partial: bool, nodes: usize) -> u8 {
    super::query::say_warnings(warnings);
    for l in lost {
        warn!(["node" => l.name.as_str()], "{l}");
    }
    if lost.is_empty() {
        return exit::OK;
    }
    // An answer from no node at all is no partial answer: --allow-partial
    // does not make it a success.
    if lost.len() == nodes && lost.iter().all(|l| l.merged == 0) {
        message!(Level::Error, "no node answered (each is named above): the answer is empty");
        return exit::ERROR;
    }
    if allow_partial {
        return exit::OK;
    }
    message!(
        Level::Error,
        "the answer lacks {} of {nodes} node(s) (named above); --allow-partial accepts such an answer with exit 0",
        lost.len()
    );
    exit::ERROR
}

/// `query` over several sources: `--count`, or the merged pcap/pcapng.
pub fn query(args: &Args, write: Option<&Path>) -> anyhow::Result<u8> {
    let (nodes, sel) = selection(&args.sel, args.limit)?;
    let partial = args.sel.sources.allow_partial;
    let usage = |e: wv_fleet::MergeError| match e {
        wv_fleet::MergeError::Usage(m) => fail(exit::USAGE, m),
        e => fail(exit::ERROR, e.to_string()),
    };
    if args.count {
        let c = wv_fleet::count(&nodes, &sel).map_err(usage)?;
        let code = say_lost(&c.lost, &c.warnings, partial, nodes.len());
        if let Err(e) = writeln!(std::io::stdout(), "{}", c.matched) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(fail(exit::ERROR, format!("cannot write the count: {e}")));
            }
        }
        return Ok(code);
    }
    let format = match args.format {
        OutFormat::Pcap => wv_fleet::Format::Pcap,
        OutFormat::Pcapng => wv_fleet::Format::Pcapng,
    };
    let Some(outcome) = write_merged(&nodes, &sel, format, write, &mut |_| true)? else {
        return Ok(exit::OK);
    };
    if args.stats {
        let per: Vec<String> = nodes.iter().zip(&outcome.packets).map(|(n, p)| format!("{} {p}", n.name)).collect();
        info!("{} matched; by node: {}", outcome.matched, per.join(", "));
    }
    Ok(say_lost(&outcome.lost, &outcome.warnings, partial, nodes.len()))
}

/// The merge of `sel` over `nodes`, the packets `keep` accepts, into `write` (standard
/// output when `None`) in `format`; `None` when the reader of standard output went away.
/// A merge that fails as a whole leaves no file behind to pass for its answer.
pub fn write_merged(
    nodes: &[wv_fleet::Node],
    sel: &wv_fleet::Selection,
    format: wv_fleet::Format,
    write: Option<&Path>,
    keep: &mut dyn FnMut(&wv_fleet::MergedPacket<'_>) -> bool,
) -> anyhow::Result<Option<wv_fleet::Outcome>> {
    let result = match write {
        Some(path) => {
            // Never into a local source or one of its files (checked before anything is
            // created, as `query STORE -w` checks; a source that cannot be read is named by
            // the merge).
            for n in nodes {
                if let wv_fleet::Source::Local(store) = &n.source {
                    let q = wv_query::Query {
                        store: store.clone(),
                        from_ns: None,
                        to_ns: None,
                        expr: String::new(),
                        limit: None,
                    };
                    if let Ok(p) = wv_query::prepare(q) {
                        wv_query::check_output(&p, path).map_err(|e| fail(exit::USAGE, e.to_string()))?;
                    }
                }
            }
            let mut f = std::fs::File::create(path)
                .map_err(|e| fail(exit::ERROR, format!("cannot create {}: {e}", path.display())))?;
            let r = wv_fleet::write_where(nodes, sel, format, &mut f, keep);
            if let Err(e) = &r {
                if !e.is_broken_pipe() && std::fs::remove_file(path).is_ok() {
                    return Err(fail(exit::ERROR, format!("{e}; {} removed", path.display())));
                }
            }
            r
        }
        None => {
            let (mut out, _, _) = super::query::stdout_file()?;
            wv_fleet::write_where(nodes, sel, format, &mut out, keep)
        }
    };
    match result {
        Ok(o) => Ok(Some(o)),
        Err(e) if e.is_broken_pipe() => Ok(None),
        Err(wv_fleet::MergeError::Usage(m)) => Err(fail(exit::USAGE, m)),
        Err(e) => Err(fail(exit::ERROR, e.to_string())),
    }
}
