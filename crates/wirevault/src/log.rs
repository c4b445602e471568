//! Log lines on standard error, in a form journald and log shippers take.
//!
//! Every message the binary prints as a log line goes through [`emit`]
//! (`say!` does so): it is dropped below `--log-level`, and written as
//! - `text` (the default): the line as it always was, `wirevault: ...`;
//!   when standard error is the journal (systemd sets `JOURNAL_STREAM` to
//!   the device and inode of the stream it connected, which must be the one
//!   on fd 2 still), each line starts with sd-daemon's `<N>` priority prefix,
//!   so `journalctl -p warning` finds the warnings;
//! - `json`: one object per line, `{"ts","level","msg","fields"}`, `ts` in
//!   RFC 3339 UTC.
//!
//! The level and format are process-wide atomics: `record` changes the
//! level when SIGHUP re-reads its config. What is not a log line (the status
//! line of `record`, tables on standard output) does not come here.

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

/// The level of a line `say!` prints, from how the binary words it:
/// `wirevault: warning: ...`, `wirevault: error: ...`, else info.
pub fn level_of(line: &str) -> Level {
    let rest = line.strip_prefix("wirevault: ").unwrap_or(line);
    if rest.starts_with("warning: ") {
        Level::Warn
    } else if rest.starts_with("error: ") {
        Level::Error
    } else {
        Level::Info
    }
}

/// Writes one log line (it may span several lines of text) with structured
/// `fields` (shown in JSON only; text lines carry their facts in `msg`).
/// Never panics: what standard error does not take is dropped.
pub fn emit(level: Level, msg: &str, fields: &[(&str, serde_json::Value)]) {
    if !enabled(level) {
        return;
    }
    let line = if JSON.load(Ordering::Relaxed) {
        let ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        // The text's own "wirevault: " and level words are the object's fields here.
        let rest = msg.strip_prefix("wirevault: ").unwrap_or(msg);
        let rest = ["warning: ", "error: ", "note: "].iter().find_map(|p| rest.strip_prefix(p)).unwrap_or(rest);
        let f: serde_json::Map<String, serde_json::Value> =
            fields.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect();
        serde_json::json!({
            "ts": wv_store::layout::utc_rfc3339(ns),
            "level": level.name(),
            "msg": rest,
            "fields": f,
        })
        .to_string()
    } else if JOURNAL.load(Ordering::Relaxed) {
        format!("<{}>{msg}", level as u8)
    } else {
        msg.to_string()
    };
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_wording() {
        assert_eq!(level_of("wirevault: warning: x"), Level::Warn);
        assert_eq!(level_of("wirevault: error: x"), Level::Error);
        assert_eq!(level_of("wirevault: note: x"), Level::Info);
        assert_eq!(level_of("1 packets received"), Level::Info);
        assert!(Level::Error < Level::Warn && Level::Info < Level::Debug);
    }
}
