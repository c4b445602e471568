//! `--config FILE`: a TOML file that says what a subcommand's flags say.
//!
//! Its keys are the subcommand's long flag names (`output = "/data/store"`,
//! `workers = 2`, `max-size = "80%"`, `no-promisc = true`,
//! `read = ["a.pcap", "b.pcap"]`), plus `filter = "udp port 53"` for the
//! expression where the subcommand takes one. The file is turned into
//! arguments placed right after the subcommand's name, *before* the command
//! line's own, and clap parses the whole: the subcommand overrides itself
//! (`args_override_self`), so a flag the command line also gives wins, and
//! every flag, present or future, is a config key by construction. The valid
//! keys are read from the clap `Command` itself, so they never drift.
//! `filter` applies only when the command line gives no expression; a list
//! (`read`) the command line also gives is taken from the command line alone.
//!
//! An unknown key, a value of the wrong type or one the flag refuses, or a
//! file that cannot be parsed: one sentence naming the file and the key,
//! exit code 2 (what the file says is command line); a file that is missing,
//! unreadable or not a file: exit code 1, as for any file the command line names.

use crate::{exit, fail};
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory, FromArgMatches};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;

/// The key of the capture filter expression (the positional words).
const FILTER: &str = "filter";

/// What a config file contributed to a parse, kept to tell what a later
/// re-read changed.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The file's keys and values as read.
    pub table: toml::Table,
    /// Keys the command line gives too (so the file's value is not used).
    pub cmdline: BTreeSet<String>,
}

/// The most a config file may hold: a few hundred lines are a few KiB.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of a config file: a regular file or a pipe (`--config <(...)`),
/// not a device (/dev/zero was read until memory ran out), a socket or a
/// directory, and at most [`MAX_CONFIG_BYTES`] of it.
fn read_config(file: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let shown = file.display();
    // A file that is missing or not a file is the host's matter (exit 1); what it says is
    // the command line's (exit 2).
    let cannot = |e: std::io::Error| fail(exit::ERROR, format!("cannot read the config file {shown}: {e}"));
    let kind = std::fs::metadata(file).map_err(cannot)?.file_type();
    if !(kind.is_file() || kind.is_fifo()) {
        return Err(fail(
            exit::ERROR,
            format!("the config file {shown} is not a regular file (a device, socket or directory); give a TOML file"),
        ));
    }
    let mut text = String::new();
    std::fs::File::open(file).map_err(cannot)?.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text).map_err(cannot)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(fail(
            exit::ERROR,
            format!("the config file {shown} is larger than {} KiB; is it the right file?", MAX_CONFIG_BYTES >> 10),
        ));
    }
    Ok(text)
}

/// Parses the command line `argv` of subcommand `sub` again with `file`'s
/// arguments placed right after the subcommand's name. Returns the parsed
/// command and what the file contributed. A clap error (a conflict between
/// file and command line, a missing source) is returned as the clap error.
pub fn apply<P: CommandFactory + FromArgMatches>(
    argv: &[OsString],
    sub: &str,
    file: &Path,
) -> anyhow::Result<(P, Loaded)> {
    let shown = file.display();
    let text = read_config(file)?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let what = e.message().trim_end_matches('.');
        let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
        fail(exit::USAGE, format!("the config file {shown} is not valid TOML{at}: {what}"))
    })?;
    let mut root = P::command();
    root.build();
    let cmd =
        root.find_subcommand(sub).ok_or_else(|| fail(exit::ERROR, format!("no subcommand {sub} (a bug)")))?.clone();
    // Keys the command line gives itself (clap tells where a value came from).
    let given = P::command()
        .ignore_errors(true)
        .try_get_matches_from(argv)
        .ok()
        .and_then(|m| m.subcommand_matches(sub).cloned())
        .unwrap_or_default();
    // Validates every key first.
    to_args(&table, &cmd, sub, file, &BTreeSet::new())?;
    let cmdline: BTreeSet<String> = table
        .keys()
        .filter(|k| {
            let id = if k.as_str() == FILTER { Some(FILTER.to_string()) } else { id_of(&cmd, k) };
            id.is_some_and(|id| {
                given.try_get_raw(&id).is_ok() && given.value_source(&id) == Some(ValueSource::CommandLine)
            })
        })
        .cloned()
        .collect();
    // Lists append rather than override: the file's is left out where the command line gives one.
    let lists: BTreeSet<String> = cmdline
        .iter()
        .filter(|k| cmd.get_arguments().any(|a| a.get_long() == Some(k.as_str()) && is_list(a)))
        .cloned()
        .collect();
    let (args, filter) = to_args(&table, &cmd, sub, file, &lists)?;
    // Right after the subcommand's name: the global options before it take enum values only.
    let at = argv.iter().skip(1).position(|a| a == sub).map_or(argv.len(), |i| i + 2);
    let mut v: Vec<OsString> = argv[..at].to_vec();
    v.extend(args);
    let rest = &argv[at..];
    v.extend_from_slice(rest);
    if let (Some(f), false) = (filter, cmdline.contains(FILTER)) {
        // After `--` every word is filter text (`--` also ends a list such as --read).
        if !rest.iter().any(|a| a == "--") {
            v.push("--".into());
        }
        v.push(f.into());
    }
    // With the examples in its help, as without a config (`record --config FILE --help`).
    let m = super::docs::with_help(P::command()).try_get_matches_from(&v)?;
    let p = P::from_arg_matches(&m).map_err(anyhow::Error::new)?;
    Ok((p, Loaded { table, cmdline }))
}

/// The clap id of the long flag `key` of `cmd`.
fn id_of(cmd: &clap::Command, key: &str) -> Option<String> {
    cmd.get_arguments().find(|a| a.get_long() == Some(key)).map(|a| a.get_id().to_string())
}

/// True if the flag takes a list (appends its values).
fn is_list(a: &clap::Arg) -> bool {
    matches!(a.get_action(), ArgAction::Append)
}

/// The keys a config file for `cmd` may hold: its long flag names (less
/// `config`, `help` and `version`) and `filter` where it takes an expression.
pub fn keys(cmd: &clap::Command) -> Vec<String> {
    let mut k: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| !["config", "help", "version"].contains(l))
        .map(str::to_string)
        .collect();
    if cmd.get_positionals().any(|a| a.get_id() == FILTER) {
        k.push(FILTER.to_string());
    }
    k
}

/// The arguments `table` stands for, and its `filter`. Keys in `skip` are
/// left out.
fn to_args(
    table: &toml::Table,
    cmd: &clap::Command,
    sub: &str,
    file: &Path,
    skip: &BTreeSet<String>,
) -> anyhow::Result<(Vec<OsString>, Option<String>)> {
    let shown = file.display();
    let keys = keys(cmd);
    let bad = |key: &str, what: String| fail(exit::USAGE, format!("the config file {shown}: key {key}: {what}"));
    let mut out: Vec<OsString> = Vec::new();
    let mut filter = None;
    for (key, value) in table {
        if !keys.contains(key) {
            return Err(bad(
                key,
                format!(
                    "unknown key; the keys are the long option names of `wirevault {sub} --help` (without --){}",
                    if keys.iter().any(|k| k == FILTER) { " and filter" } else { "" }
                ),
            ));
        }
        if skip.contains(key) {
            continue;
        }
        if key == FILTER {
            filter = Some(match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Array(a) => {
                    strings(a).ok_or_else(|| bad(key, "must be a string or a list of strings".into()))?.join(" ")
                }
                _ => return Err(bad(key, "must be a string (a tcpdump expression)".into())),
            });
            continue;
        }
        let arg = cmd.get_arguments().find(|a| a.get_long() == Some(key.as_str())).expect("a key is a long flag");
        let flag = format!("--{key}");
        match arg.get_action() {
            ArgAction::SetTrue => match value {
                toml::Value::Boolean(true) => out.push(flag.into()),
                toml::Value::Boolean(false) => {}
                _ => return Err(bad(key, "must be true or false".into())),
            },
            ArgAction::Set | ArgAction::Append => {
                let values: Vec<String> = match value {
                    toml::Value::Array(a) if is_list(arg) => {
                        strings(a).ok_or_else(|| bad(key, "must be a list of strings or numbers".into()))?
                    }
                    toml::Value::Array(_) => return Err(bad(key, "takes one value, not a list".into())),
                    v => vec![scalar(v).ok_or_else(|| bad(key, "must be a string or a number".into()))?],
                };
                if values.is_empty() {
                    continue;
                }
                for v in &values {
                    check_value(arg, v).map_err(|why| bad(key, why))?;
                }
                // `--read=a --read=b`: an attached value ends its occurrence, so no later word joins it.
                out.extend(values.iter().map(|v| OsString::from(format!("{flag}={v}"))));
            }
            _ => return Err(bad(key, "cannot be set in a config file".into())),
        }
    }
    Ok((out, filter))
}

/// Runs the flag's own value parser over `v` (alone, so that the error
/// names the config key rather than an argument of the whole parse).
fn check_value(arg: &clap::Arg, v: &str) -> Result<(), String> {
    let one = clap::Command::new("config").no_binary_name(true).arg(
        clap::Arg::new("v").value_name("V").allow_hyphen_values(true).value_parser(arg.get_value_parser().clone()),
    );
    one.try_get_matches_from([v]).map(|_| ()).map_err(|e| {
        let text = e.to_string();
        let mut lines = text.lines();
        let first = lines.next().unwrap_or_default().trim_start_matches("error: ").replace(" for '[V]'", "");
        match lines.find(|l| l.contains("[possible values:")) {
            Some(p) => format!("{first} {}", p.trim()),
            None => first,
        }
    })
}

/// A string or number as the flag's text.
fn scalar(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

fn strings(a: &[toml::Value]) -> Option<Vec<String>> {
    a.iter().map(scalar).collect()
}

/// Keys whose values differ between two readings of a file (added,
/// removed or changed), in key order.
pub fn changed(old: &toml::Table, new: &toml::Table) -> Vec<String> {
    let all: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    all.into_iter().filter(|k| old.get(*k) != new.get(*k)).cloned().collect()
}

/// Parses the command line; for `record --config FILE` (and `serve`), with the file's
/// arguments (see [`apply`]; the command line alone may lack what the file
/// gives, as the store or the source). A usage error is returned, a tcpdump
/// habit's sentence too ([`super::habits`]); clap's other errors exit as clap
/// does, without its `-- -x` tip.
pub fn parse_cli() -> anyhow::Result<crate::Cli> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    // Most runs give no config: parse once, at once (the stop signals are
    // held meanwhile, see `cmd::hold_signals`; a second pass over every
    // subcommand's definition would delay their handlers).
    let parse = |argv: &[OsString]| super::docs::try_parse_from(argv).map_err(|e| super::habits::clap_error(e, argv));
    if !argv.iter().any(|a| a.to_str().is_some_and(|a| a == "--config" || a.starts_with("--config="))) {
        return parse(&argv);
    }
    // `record --config FILE` and `serve --config FILE`.
    let found = crate::Cli::command().ignore_errors(true).try_get_matches_from(&argv).ok().and_then(|m| {
        ["record", "serve"].into_iter().find_map(|sub| {
            m.subcommand_matches(sub).and_then(|r| r.get_one::<std::path::PathBuf>("config").cloned()).map(|f| (sub, f))
        })
    });
    let Some((sub, file)) = found else {
        return parse(&argv);
    };
    match apply::<crate::Cli>(&argv, sub, &file) {
        Ok((mut c, loaded)) => {
            if let crate::Command::Record(a) = &mut c.command {
                a.loaded = Some(loaded);
            }
            Ok(c)
        }
        Err(e) => match e.downcast::<clap::Error>() {
            Ok(ce) => Err(super::habits::clap_error(ce, &argv)),
            Err(e) => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys() {
        let a: toml::Table = "x = 1\ny = \"a\"\nz = true".parse().unwrap();
        let b: toml::Table = "x = 1\ny = \"b\"\nw = 2".parse().unwrap();
        assert_eq!(changed(&a, &b), ["w", "y", "z"]);
    }
}
