//! The docs a user reaches from the shell, from one source each: `--help`
//! and the man pages come from the clap definitions, their examples from
//! [`super::examples`], the exit status from [`crate::exit::MEANINGS`] and
//! the store's file names from `wv_store`'s constants.
//!
//! [`command`] is the parser with the examples (and, at the top, the exit
//! status) appended to each command's after-help; `wirevault generate-docs
//! DIR` (hidden) writes the man pages, with EXAMPLES, EXIT STATUS, FILES and
//! SEE ALSO, and the shell completions. `scripts/install.sh` runs it and
//! installs the results.

use super::examples::{self, Example};
use crate::{exit, fail};
use clap::builder::StyledStr;
use clap::{Command, CommandFactory, FromArgMatches};
use roff::{bold, italic, roman, Roff};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `wirevault generate-docs`.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory: writes DIR/man/*.1 and DIR/completions/{wirevault.bash,_wirevault,wirevault.fish}.
    pub dir: PathBuf,
    /// The service's config file, as FILES names it (where `install.sh --service` puts it).
    #[arg(long, value_name = "FILE", default_value = "/etc/wirevault/wirevault.toml")]
    pub config_file: String,
    /// The systemd unit, as FILES names it (where `install.sh --service` puts it).
    #[arg(long, value_name = "FILE", default_value = "/usr/local/lib/systemd/system/wirevault.service")]
    pub unit_file: String,
}

/// The parser of the command line: the clap definitions with each
/// subcommand's examples, and at the top the headline examples and the exit
/// status, after its help.
pub fn command() -> Command {
    with_help(crate::Cli::command())
}

/// `cmd` (the `wirevault` command, or one parsed with a config file's
/// arguments) with the examples and exit status appended to its help: after
/// what the definitions give, which stays.
pub fn with_help(cmd: Command) -> Command {
    let header = *cmd.get_styles().get_header();
    let mut top = examples_help(examples::headline(), header);
    let _ = write!(top, "\n{header}Exit status{header:#} (every subcommand):\n");
    for (code, means) in exit::MEANINGS {
        let _ = writeln!(top, "  {code}  {means}");
    }
    let mut cmd = append_help(cmd, top);
    for (name, list) in examples::ALL {
        cmd = cmd.mut_subcommand(name, |c| append_help(c, examples_help(list.iter(), header)));
    }
    cmd
}

/// Parses `argv` as [`clap::Parser::try_parse_from`] does, with [`command`]'s help.
pub fn try_parse_from(argv: &[std::ffi::OsString]) -> Result<crate::Cli, clap::Error> {
    let mut m = command().try_get_matches_from(argv)?;
    crate::Cli::from_arg_matches_mut(&mut m).map_err(|e| e.format(&mut command()))
}

/// `Examples:` and one `# sentence:` line and command line each, as a
/// shell would take them (the README's blocks are the same text).
fn examples_help<'a>(list: impl Iterator<Item = &'a Example>, header: clap::builder::styling::Style) -> StyledStr {
    let mut s = StyledStr::new();
    let _ = writeln!(s, "{header}Examples:{header:#}");
    for e in list {
        let _ = writeln!(s, "  # {}:\n  {}", e.says, e.line);
    }
    s
}

/// `c` with `more` after its after-help (and after its long after-help, if
/// it has one: `--help` shows that one instead).
fn append_help(c: Command, more: StyledStr) -> Command {
    let join = |prev: Option<&StyledStr>| {
        let mut s = StyledStr::new();
        if let Some(p) = prev {
            let _ = write!(s, "{}\n\n", p.ansi());
        }
        let _ = write!(s, "{}", more.ansi());
        s
    };
    let long = c.get_after_long_help().map(|l| join(Some(l)));
    let short = join(c.get_after_help());
    let c = c.after_help(short);
    match long {
        Some(l) => c.after_long_help(l),
        None => c,
    }
}

/// Peers every page names in SEE ALSO, then each subcommand's own.
const PEERS: &[&str] = &["tcpdump(8)", "pcap-filter(7)", "tshark(1)", "wireshark(1)"];
const PEERS_OF: &[(&str, &[&str])] = &[
    ("", &["capinfos(1)", "systemd.service(5)"]),
    ("record", &["pcap-savefile(5)", "capinfos(1)", "systemd.service(5)", "journalctl(1)"]),
    ("index", &["capinfos(1)"]),
    ("query", &["editcap(1)", "mergecap(1)"]),
    ("disk-bench", &["fio(1)"]),
    ("replay", &["tcpreplay(1)"]),
    ("serve", &["curl(1)"]),
    ("tune", &["ethtool(8)"]),
    ("timestamps", &["ethtool(8)", "capinfos(1)"]),
];

/// FILES: the store's layout, by the names `wv_store` uses, and the service's files.
fn files(a: &Args) -> Vec<(String, String)> {
    use wv_store::layout;
    let stream = layout::stream_dir(0).replace("000", "NNN");
    let store = [
        (
            layout::CATALOG,
            "One JSON line per closed capture file: its stream, file and index paths, format, link type, first \
             and last packet time, packets and bytes. Written by record, repair and index; read by every command \
             that reads a store.",
        ),
        (
            &*format!("{stream}/"),
            "One directory per capture worker (stream): the capture files, named by their first packet's UTC \
             time and a sequence number (20261122T101500.123456789Z-000001.pcap), each with its index beside it \
             (FILE.idx). FILE.part is a file being written, or one a crash left: repair cuts it at its last \
             complete packet.",
        ),
        (
            layout::STATS,
            "The counters of the running or the last recording (received = written + filtered + deduplicated + \
             cut + dropped by cause), rewritten every second.",
        ),
        (
            layout::DISK_BENCH,
            "A disk-bench --rate R --json result: when present, record takes its default --buffer from it.",
        ),
        (wv_store::volume::REGISTRY, "The store's other volumes (record --volume)."),
        (wv_store::lock::LOCK_FILE, "Locked by the process that writes the store, so that no other one does."),
    ]
    .map(|(name, what)| (format!("STORE/{name}"), what.to_string()));
    let mut v = store.to_vec();
    v.push((
        a.config_file.clone(),
        "The service's config (record --config), installed by install.sh --service.".into(),
    ));
    v.push((a.unit_file.clone(), "The systemd unit (Type=notify), installed by install.sh --service.".into()));
    v
}

/// A page's EXAMPLES, EXIT STATUS, FILES and SEE ALSO. `sub` is the
/// subcommand ("" for wirevault(1)); `pages` every page's name.
fn sections(sub: &str, a: &Args, pages: &[String]) -> Roff {
    let mut r = Roff::new();
    let list: Vec<&Example> =
        if sub.is_empty() { examples::headline().collect() } else { examples::of(sub).iter().collect() };
    if !list.is_empty() {
        r.control("SH", ["EXAMPLES"]);
        for e in list {
            r.control("PP", []).text([roman(format!("{}:", e.says))]);
            r.control("RS", ["4"]).control("nf", []).text([bold(e.line)]).control("fi", []).control("RE", []);
        }
    }
    r.control("SH", ["EXIT STATUS"]);
    r.text([roman("The same in every subcommand:")]);
    for (code, means) in exit::MEANINGS {
        r.control("TP", []).text([bold(code.to_string())]).text([roman(means)]);
    }
    r.control("SH", ["FILES"]);
    for (path, what) in files(a) {
        let shown = match path.strip_prefix("STORE/") {
            Some(rest) => vec![italic("STORE"), bold(format!("/{rest}"))],
            None => vec![bold(path)],
        };
        r.control("TP", []).text(shown).text([roman(what)]);
    }
    // Names are not hyphenated across lines.
    r.control("SH", ["SEE ALSO"]).control("nh", []);
    let own = format!("wirevault-{sub}");
    let mut refs: Vec<String> = pages
        .iter()
        .filter(|p| **p != own && !(sub.is_empty() && *p == "wirevault"))
        .map(|p| format!("{p}(1)"))
        .collect();
    let extra = PEERS_OF.iter().find(|(s, _)| *s == sub).map_or(&[][..], |(_, p)| p);
    refs.extend(PEERS.iter().chain(extra).map(|p| p.to_string()));
    let mut inl = Vec::new();
    for (i, p) in refs.iter().enumerate() {
        let (name, section) = p.split_once('(').unwrap_or((p, ""));
        let sep = if i + 1 < refs.len() { ", " } else { "" };
        inl.push(bold(name));
        inl.push(roman(format!("({section}{sep}")));
    }
    r.text(inl);
    r
}

/// One man page: clap_mangen's sections (without its EXTRA, whose place the
/// after-help takes as NOTES), then [`sections`].
fn man_page(c: Command, sub: &str, a: &Args, pages: &[String]) -> Result<Vec<u8>, std::io::Error> {
    let notes = c.get_after_long_help().or_else(|| c.get_after_help()).map(|h| h.to_string());
    let has_args = c.get_arguments().any(|x| !x.is_hide_set());
    let has_subs = c.get_subcommands().any(|s| !s.is_hide_set());
    let has_version = c.get_version().or_else(|| c.get_long_version()).is_some();
    let man = clap_mangen::Man::new(c);
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    if has_args {
        man.render_options_section(&mut buf)?;
    }
    if has_subs {
        man.render_subcommands_section(&mut buf)?;
    }
    if let Some(text) = notes {
        let mut r = Roff::new();
        r.control("SH", ["NOTES"]);
        for line in text.lines() {
            r.text([roman(line)]);
        }
        r.to_writer(&mut buf)?;
    }
    sections(sub, a, pages).to_writer(&mut buf)?;
    if has_version {
        man.render_version_section(&mut buf)?;
    }
    Ok(buf)
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).map_err(|e| fail(exit::ERROR, format!("cannot write {}: {e}", path.display())))
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    let man = a.dir.join("man");
    let comp = a.dir.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).map_err(|e| fail(exit::ERROR, format!("cannot create {}: {e}", d.display())))?;
    }
    // The pages take the definitions' own help; the examples go to EXAMPLES.
    let mut cmd = crate::Cli::command();
    cmd.build();
    // wirevault.1, then wirevault-record.1 etc. for every visible subcommand.
    let mut pages = vec![(String::new(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        // clap names are &'static str; this runs once per page of a short-lived process.
        let name: &'static str = Box::leak(format!("wirevault-{}", sub.get_name()).into_boxed_str());
        pages.push((sub.get_name().to_string(), sub.clone().name(name)));
    }
    let names: Vec<String> = pages.iter().map(|(_, c)| c.get_name().to_string()).collect();
    for (sub, c) in pages {
        let name = c.get_name().to_string();
        let buf = man_page(c, &sub, &a, &names).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        write(&man.join(format!("{name}.1")), &buf)?;
    }
    use clap_complete::Shell;
    for (shell, file) in [(Shell::Bash, "wirevault.bash"), (Shell::Zsh, "_wirevault"), (Shell::Fish, "wirevault.fish")]
    {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, "wirevault", &mut buf);
        write(&comp.join(file), &buf)?;
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// The words of a shell line, quotes removed; `|`, `>` and `<` are words
    /// of their own when they stand outside quotes.
    fn words(line: &str) -> Vec<String> {
        let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
        for ch in line.chars() {
            match (quote, ch) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => cur.push(c),
                (None, '\'' | '"') => {
                    quote = Some(ch);
                    any = true;
                }
                (None, ' ') => {
                    if any || !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    any = false;
                }
                (None, c) => cur.push(c),
            }
        }
        assert!(quote.is_none(), "unbalanced quotes: {line}");
        if any || !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    /// The arguments of the `wirevault` command in a shell line: its words
    /// up to a pipe or a redirection.
    fn argv(line: &str) -> Vec<String> {
        let w = words(line);
        let start = w.iter().position(|x| x == "wirevault").unwrap_or_else(|| panic!("no wirevault in {line}"));
        w[start..].iter().take_while(|x| !matches!(x.as_str(), "|" | ">" | "<")).cloned().collect()
    }

    #[test]
    fn words_of_a_shell_line() {
        assert_eq!(
            argv("zcat a.gz | wirevault query /s --from '10m ago' \"a b\" | tcpdump -nr -"),
            ["wirevault", "query", "/s", "--from", "10m ago", "a b"]
        );
        assert_eq!(
            argv("wirevault tune eth1 --json | jq '.[] | select(.x != \"ok\")'"),
            ["wirevault", "tune", "eth1", "--json"]
        );
        assert_eq!(argv("wirevault plan --json > plan.json"), ["wirevault", "plan", "--json"]);
        assert_eq!(words("a '' b"), ["a", "", "b"]);
    }

    /// Every example parses with the real command line: clap takes its
    /// flags (no usage error), and the one that reads the service's config
    /// parses with the packaged config as `--config` reads it.
    #[test]
    fn every_example_parses() {
        let packaged = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/wirevault.toml");
        let mut n = 0;
        for (sub, list) in examples::ALL {
            assert!(command().find_subcommand(sub).is_some(), "examples of an unknown subcommand {sub}");
            for e in *list {
                n += 1;
                let v: Vec<OsString> = argv(e.line).into_iter().map(OsString::from).collect();
                if let Some(i) = v.iter().position(|x| x == "--config") {
                    if v[i + 1] == "/etc/wirevault/wirevault.toml" {
                        let r = crate::cmd::config::apply::<crate::Cli>(&v, "record", &packaged);
                        assert!(r.is_ok(), "{}: {:?}", e.line, r.err().map(|e| e.to_string()));
                        continue;
                    }
                }
                if let Err(err) = command().try_get_matches_from(&v) {
                    panic!("the example of {sub} does not parse: {}\n{err}", e.line);
                }
                assert!(!e.says.ends_with(['.', ':']) && e.says.len() > 10, "{sub}: {:?}", e.says);
            }
        }
        assert!(n >= 40, "{n} examples");
        let headline = examples::headline().count();
        assert!((10..=14).contains(&headline), "a dozen headline examples, not {headline}");
    }

    /// `--help` of every subcommand with examples ends with them; the top
    /// shows the headline ones and every exit code; a subcommand's own
    /// after-help stays before the examples.
    #[test]
    fn help_carries_examples_and_exit_status() {
        let mut cmd = command();
        let top = cmd.render_help().to_string();
        for e in examples::headline() {
            assert!(top.contains(&format!("  # {}:\n  {}\n", e.says, e.line)), "{top}");
        }
        for (code, means) in exit::MEANINGS {
            assert!(top.contains(&format!("  {code}  {means}\n")), "{top}");
        }
        let db = cmd.find_subcommand_mut("disk-bench").unwrap().render_help().to_string();
        let (note, ex) = (db.find("Throughputs are in bytes").unwrap(), db.find("Examples:").unwrap());
        assert!(note < ex, "{db}");
    }
}
