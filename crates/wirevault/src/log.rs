//! Log lines on standard error, in a form journald and log shippers take.
//!
//! Every message the binary prints as a log line goes through [`emit`]: it
//! is dropped below `--log-level`, and written as
//! - `text` (the default): `wirevault: `, the word of the macro that wrote
//!   it (`warning: `, `note: `, ...) and the message; when standard error is
//!   the journal (systemd sets `JOURNAL_STREAM` to the device and inode of
//!   the stream it connected, which must be the one on fd 2 still), each line
//!   starts with sd-daemon's `<N>` priority prefix, so `journalctl -p warning`
//!   finds the warnings;
//! - `json`: one object per line, `{"ts","level","msg","fields"}`, `ts` in
//!   RFC 3339 UTC, `msg` the message alone.
//!
//! The macro sets the level and writes the word; nothing reads a level back
//! from a line's words (ripgrep's `message!`/`err_message!` in its
//! `crates/core` are the model). Libraries hand the binary plain sentences,
//! in fields named for what they are (`warnings`, `problems`) or with a
//! level of their own (`wv_serve::LogLevel`, `wv_tune::State`):
//!
//! | macro                           | level       | text                      |
//! |---------------------------------|-------------|---------------------------|
//! | `info!(...)`                    | info        | `wirevault: ...`          |
//! | `note!(...)`                    | info        | `wirevault: note: ...`    |
//! | `warn!(...)`                    | warn        | `wirevault: warning: ...` |
//! | `error!(...)`                   | error       | `wirevault: error: ...`   |
//! | `message!(LEVEL, ...)`          | LEVEL       | `wirevault: ...`          |
//!
//! A note says what was done instead of what was asked, and why.
//! `message!` is for a level that comes from data (a tune finding's state)
//! and for lines whose form says what they are: the error before a
//! non-zero exit (as tcpdump's `tcpdump: ...`), a reader's `FILE: why`
//! warning. In JSON, `msg` is the sentence without the prefix. Every macro
//! takes JSON fields first:
//! `warn!(["file" => path], "{path}: ...")`.
//!
//! The level and format are process-wide atomics: `record` changes the
//! level when SIGHUP re-reads its config. What is not a log line (the status
//! line of `record`, tables on standard output) does not come here.

/// What every macro below comes to: `$crate::log::$f($head..., message,
/// fields)`, the message formatted and the fields (`["key" => value]`,
/// optional) made JSON.
macro_rules! log_line {
    ($f:ident($($head:expr),*), [$($k:literal => $v:expr),* $(,)?], $($arg:tt)*) => {
        $crate::log::$f($($head,)* &format!($($arg)*), &[$(($k, serde_json::json!($v))),*])
    };
    ($f:ident($($head:expr),*), $($arg:tt)*) => {
        log_line!($f($($head),*), [], $($arg)*)
    };
}

/// A log line of `level`, `wirevault: ` and the message, with optional
/// JSON fields: `message!(Level::Warn, ["file" => f], "{f}: not indexed")`.
macro_rules! message {
    ($level:expr, $($arg:tt)*) => { log_line!(emit($level, ""), $($arg)*) };
}

/// An info line: `wirevault: ...`.
macro_rules! info {
    ($($arg:tt)*) => { log_line!(emit($crate::log::Level::Info, ""), $($arg)*) };
}

/// An info line that says what was done instead of what was asked, and
/// why: `wirevault: note: ...`.
macro_rules! note {
    ($($arg:tt)*) => { log_line!(emit($crate::log::Level::Info, "note: "), $($arg)*) };
}

/// A warning: `wirevault: warning: ...`.
macro_rules! warn {
    ($($arg:tt)*) => { log_line!(emit($crate::log::Level::Warn, "warning: "), $($arg)*) };
}

/// An error the command goes on after (the one that ends it is the
/// `message!(Level::Error, ...)` before the exit): `wirevault: error: ...`.
macro_rules! error {
    ($($arg:tt)*) => { log_line!(emit($crate::log::Level::Error, "error: "), $($arg)*) };
}

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Severity, in syslog's numbering (the sd-daemon prefix is `<N>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
#[repr(u8)]
pub enum Level {
    Error = 3,
    Warn = 4,
    Info = 6,
    Debug = 7,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    fn from_u8(v: u8) -> Level {
        match v {
            3 => Level::Error,
            4 => Level::Warn,
            7 => Level::Debug,
            _ => Level::Info,
        }
    }
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// `--log-format` and `--log-level`, accepted by every subcommand.
#[derive(clap::Args, Clone, Debug)]
pub struct LogArgs {
    /// Log lines on standard error as text (with journald priority prefixes when it is the journal) or as JSON lines.
    #[arg(long, global = true, value_enum, default_value_t = Format::Text, value_name = "FORMAT")]
    pub log_format: Format,
    /// Least severe log lines shown.
    #[arg(long, global = true, value_enum, default_value_t = Level::Info, value_name = "LEVEL")]
    pub log_level: Level,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static JSON: AtomicBool = AtomicBool::new(false);
static JOURNAL: AtomicBool = AtomicBool::new(false);

/// Sets the format and level from the flags, and finds out whether standard
/// error is the journal.
pub fn init(a: &LogArgs) {
    set(a);
    JOURNAL.store(stderr_is_journal(), Ordering::Relaxed);
}

/// Sets the format and level (at start and on reload).
pub fn set(a: &LogArgs) {
    LEVEL.store(a.log_level as u8, Ordering::Relaxed);
    JSON.store(a.log_format == Format::Json, Ordering::Relaxed);
}

/// The level in force.
pub fn level() -> Level {
    Level::from_u8(LEVEL.load(Ordering::Relaxed))
}

/// The format in force.
pub fn format() -> Format {
    if JSON.load(Ordering::Relaxed) {
        Format::Json
    } else {
        Format::Text
    }
}

pub fn format_name(f: Format) -> &'static str {
    match f {
        Format::Text => "text",
        Format::Json => "json",
    }
}

/// True if a line of `level` is written.
pub fn enabled(level: Level) -> bool {
    level <= self::level()
}

/// systemd connects a service's standard error to the journal and says so
/// in `JOURNAL_STREAM=DEV:INODE`; a child whose stderr was redirected
/// inherits the variable, hence the check of fd 2 itself.
fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = std::env::var("JOURNAL_STREAM").ok().and_then(|v| {
        let (d, i) = v.split_once(':')?;
        Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?))
    }) else {
        return false;
    };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd).metadata().is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

/// The program's name before every message: its text starts with it.
const PREFIX: &str = "wirevault: ";

/// Writes one log line (it may span several lines of text) of `level`:
/// [`PREFIX`], `word` (what the macro says the line is: `warning: `,
/// `note: ` or nothing) and `msg`, with structured `fields` (shown in JSON
/// only; text lines carry their facts in `msg`). Never panics: what
/// standard error does not take is dropped.
pub fn emit(level: Level, word: &str, msg: &str, fields: &[(&str, serde_json::Value)]) {
    if enabled(level) {
        write(level, &format!("{PREFIX}{word}{msg}"), msg, fields);
    }
}

/// Writes `text`, or in JSON `msg`, on standard error (in unit tests, to
/// the lines a test collects).
fn write(level: Level, text: &str, msg: &str, fields: &[(&str, serde_json::Value)]) {
    #[cfg(test)]
    if tests::captured(level, text, msg, fields) {
        return;
    }
    let line = render(level, text, msg, fields, format(), JOURNAL.load(Ordering::Relaxed));
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// What [`write()`] puts on standard error: `text` (with the journal's
/// priority prefix), or in JSON `msg` and the fields.
fn render(
    level: Level,
    text: &str,
    msg: &str,
    fields: &[(&str, serde_json::Value)],
    format: Format,
    journal: bool,
) -> String {
    match format {
        Format::Json => {
            let ns =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            let f: serde_json::Map<String, serde_json::Value> =
                fields.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect();
            serde_json::json!({
                "ts": wv_store::layout::utc_rfc3339(ns),
                "level": level.name(),
                "msg": msg,
                "fields": f,
            })
            .to_string()
        }
        Format::Text if journal => format!("<{}>{text}", level as u8),
        Format::Text => text.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::cell::RefCell;

    /// A line as a macro wrote it: level, text, JSON `msg`, fields.
    pub(crate) type Line = (Level, String, String, Value);

    thread_local! {
        /// The lines written on this thread while [`lines_of`] runs.
        static CAPTURE: RefCell<Option<Vec<Line>>> = const { RefCell::new(None) };
    }

    /// Keeps the line for [`lines_of`] instead of writing it, if it runs.
    pub(super) fn captured(level: Level, text: &str, msg: &str, fields: &[(&str, Value)]) -> bool {
        let fields: serde_json::Map<String, Value> =
            fields.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect();
        CAPTURE.with(|c| match c.borrow_mut().as_mut() {
            Some(lines) => {
                lines.push((level, text.to_string(), msg.to_string(), Value::Object(fields)));
                true
            }
            None => false,
        })
    }

    /// The lines `f` writes on this thread (at the default level, info),
    /// kept from standard error.
    pub(crate) fn lines_of(f: impl FnOnce()) -> Vec<Line> {
        CAPTURE.with(|c| *c.borrow_mut() = Some(Vec::new()));
        f();
        CAPTURE.with(|c| c.borrow_mut().take().unwrap())
    }

    fn line(level: Level, text: &str, msg: &str) -> Line {
        (level, text.into(), msg.into(), json!({}))
    }

    #[test]
    fn each_macro_writes_the_prefix_its_word_and_its_level() {
        let (n, path) = (3, "/s/a.pcap");
        let got = lines_of(|| {
            info!("indexed {n} file(s)");
            note!("throughput is given per {n} s");
            warn!("{path} is on tmpfs");
            error!("api: cannot listen");
            message!(Level::Warn, "{path}: not indexed: short");
            message!(Level::Error, "cannot open {path}");
        });
        assert_eq!(
            got,
            [
                line(Level::Info, "wirevault: indexed 3 file(s)", "indexed 3 file(s)"),
                line(Level::Info, "wirevault: note: throughput is given per 3 s", "throughput is given per 3 s"),
                line(Level::Warn, "wirevault: warning: /s/a.pcap is on tmpfs", "/s/a.pcap is on tmpfs"),
                line(Level::Error, "wirevault: error: api: cannot listen", "api: cannot listen"),
                line(Level::Warn, "wirevault: /s/a.pcap: not indexed: short", "/s/a.pcap: not indexed: short"),
                line(Level::Error, "wirevault: cannot open /s/a.pcap", "cannot open /s/a.pcap"),
            ]
        );
    }

    #[test]
    fn fields_go_with_every_macro() {
        let keys = vec!["interface", "workers"];
        let got = lines_of(|| {
            warn!(["file" => "a.toml", "keys" => keys], "a.toml: {} changed", keys.join(", "));
            note!(["n" => 2], "two");
            info!(["n" => 1,], "one");
            message!(Level::Error, ["file" => "a.toml"], "a.toml: refused");
        });
        let fields: Vec<&Value> = got.iter().map(|l| &l.3).collect();
        assert_eq!(
            fields,
            [
                &json!({"file": "a.toml", "keys": ["interface", "workers"]}),
                &json!({"n": 2}),
                &json!({"n": 1}),
                &json!({"file": "a.toml"}),
            ]
        );
        assert_eq!(got[0].1, "wirevault: warning: a.toml: interface, workers changed");
    }

    /// Below the level in force, nothing is written (the default: info).
    #[test]
    fn debug_lines_are_dropped_at_info() {
        assert_eq!(level(), Level::Info);
        assert!(lines_of(|| message!(Level::Debug, "kept in memory")).is_empty());
        assert!(enabled(Level::Error) && enabled(Level::Warn) && !enabled(Level::Debug));
    }

    #[test]
    fn levels_are_syslogs() {
        let all = [Level::Error, Level::Warn, Level::Info, Level::Debug];
        let got: Vec<(u8, &str)> = all.iter().map(|&l| (l as u8, l.name())).collect();
        assert_eq!(got, [(3, "error"), (4, "warn"), (6, "info"), (7, "debug")]);
        assert!(all.windows(2).all(|w| w[0] < w[1]), "more severe is less");
        assert!(all.iter().all(|&l| Level::from_u8(l as u8) == l));
    }

    #[test]
    fn text_json_and_journal_forms() {
        let fields = [("file", json!("a.toml"))];
        let text = "wirevault: warning: a.toml: x";
        assert_eq!(render(Level::Warn, text, "a.toml: x", &fields, Format::Text, false), text);
        assert_eq!(render(Level::Warn, text, "a.toml: x", &fields, Format::Text, true), format!("<4>{text}"));
        let v: Value =
            serde_json::from_str(&render(Level::Warn, text, "a.toml: x", &fields, Format::Json, true)).unwrap();
        assert_eq!(
            (&v["level"], &v["msg"], &v["fields"]),
            (&json!("warn"), &json!("a.toml: x"), &json!({"file": "a.toml"}))
        );
        assert!(v["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{v}");
    }
}
