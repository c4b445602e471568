//! The docs a user reaches from the shell (issue 44, items 7 and 8): the
//! examples of `--help`, the man pages and the README are one table's, the
//! man pages carry EXAMPLES, EXIT STATUS, FILES and SEE ALSO, and each
//! default is stated once: `record --help`, wirevault-record(1), the README
//! and packaging/wirevault.toml agree with the binary.
//!
//! Every check reads what the real binary prints (`--help`, `generate-docs`)
//! and renders the man pages with groff, as man(1) does.

use crate::util::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn help(args: &[&str]) -> String {
    let o = run_wirevault(args);
    o.expect(0, &format!("{args:?}"));
    o.stdout
}

/// The subcommands `wirevault --help` lists (without `help`).
fn subcommands() -> Vec<String> {
    let top = help(&["--help"]);
    let list = top.split("Commands:\n").nth(1).unwrap().split("\n\n").next().unwrap();
    let v: Vec<String> =
        list.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| *n != "help").map(String::from).collect();
    assert!(v.len() >= 10 && v.contains(&"record".to_string()), "{v:?}");
    v
}

/// The lines of a titled block of a help text (`Examples:`, `Exit status`):
/// from the line after the title to the first empty line, unindented.
fn block(text: &str, title: &str) -> Vec<String> {
    let at = text.find(&format!("\n{title}")).unwrap_or_else(|| panic!("no {title} in:\n{text}"));
    text[at + 1..].lines().skip(1).take_while(|l| !l.is_empty()).map(|l| l.trim_start().to_string()).collect()
}

/// (sentence, command line) pairs of a block of `# sentence:` and command
/// lines; a command that runs wirevault needs the sentence right before it.
fn pairs(lines: &[String], what: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut says: Option<String> = None;
    for l in lines {
        if let Some(c) = l.strip_prefix("# ") {
            says = Some(c.to_string());
            continue;
        }
        if l.starts_with("wirevault ") || l.contains("| wirevault ") {
            let s = says.take().unwrap_or_else(|| panic!("{what}: no '# sentence:' line before {l}"));
            out.push((s, l.clone()));
        } else {
            says = None;
        }
    }
    out
}

/// Every subcommand's examples as `SUB --help` shows them.
fn help_examples() -> BTreeMap<String, Vec<(String, String)>> {
    subcommands()
        .into_iter()
        .map(|sub| {
            let text = help(&[&sub, "--help"]);
            let p = pairs(&block(&text, "Examples:"), &sub);
            assert!(!p.is_empty(), "{sub} --help shows no example");
            (sub, p)
        })
        .collect()
}

/// The README's ```sh blocks, `\` continuations joined, each with the
/// heading it is under.
fn readme_blocks() -> Vec<(String, Vec<String>)> {
    let text = fs::read_to_string(repo().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut heading = String::new();
    // Inside a fence: Some(lines) for a sh block, None for another kind.
    let mut fence: Option<Option<Vec<String>>> = None;
    for line in text.lines() {
        match fence.as_mut() {
            None if line.starts_with("```") => fence = Some((line == "```sh").then(Vec::new)),
            None if line.starts_with('#') => heading = line.to_string(),
            None => {}
            Some(_) if line == "```" => {
                if let Some(Some(b)) = fence.take() {
                    out.push((heading.clone(), b));
                }
            }
            Some(None) => {}
            Some(Some(b)) => match b.last_mut() {
                Some(prev) if prev.ends_with('\\') => {
                    prev.pop();
                    prev.push_str(line.trim_start());
                }
                _ => b.push(line.to_string()),
            },
        }
    }
    out
}

/// Every example the README shows is one of the binary's, sentence and
/// line word for word; every headline example (`wirevault --help`) is in
/// the README; the subcommands' man pages show them too.
#[test]
fn readme_examples_are_the_binarys() {
    let all = help_examples();
    let known: Vec<&(String, String)> = all.values().flatten().collect();
    let mut shown = Vec::new();
    for (heading, lines) in readme_blocks() {
        shown.extend(pairs(&lines, &heading));
    }
    assert!(shown.len() >= 30, "{} README examples", shown.len());
    for p in &shown {
        assert!(known.contains(&p), "the README's example is not the binary's (cmd/examples.rs):\n# {}:\n{}", p.0, p.1);
    }
    let headline = pairs(&block(&help(&["--help"]), "Examples:"), "wirevault --help");
    assert!((10..=14).contains(&headline.len()), "{headline:?}");
    for p in &headline {
        assert!(shown.contains(p), "headline example missing from the README:\n# {}:\n{}", p.0, p.1);
        assert!(known.contains(&p));
    }
}

/// A man page as man(1) shows it, in ASCII and without hyphenation or
/// line breaks inside a paragraph's words (so a sentence is found whole).
fn render_man(page: &Path) -> String {
    let o = Command::new("groff")
        .args(["-k", "-man", "-Tascii", "-ww", "-rHY=0", "-rLL=2000n", "-P-cbou"])
        .arg(page)
        .output()
        .expect("groff");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.is_empty(), "groff {}: {err}", page.display());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The man pages `generate-docs` writes carry EXAMPLES (the subcommand's
/// examples of `--help`; the headline ones in wirevault(1)), EXIT STATUS
/// (the codes of `wirevault --help`), FILES (the store's layout, the config
/// and unit where install.sh puts them) and SEE ALSO (the other pages and
/// the peers).
wvtest!(man_pages_carry_examples_exit_status_files_see_also, needs = ["groff"], |t| {
    let tmp = TempDir::new("docs-man");
    let out = tmp.join("out");
    let unit = "/opt/wv/lib/systemd/system/wirevault.service";
    run_wirevault(&["generate-docs", out.to_str().unwrap(), "--unit-file", unit]).expect(0, "generate-docs");
    let exits = block(&help(&["--help"]), "Exit status");
    assert_eq!(exits.len(), 4, "{exits:?}");
    let mut examples = help_examples();
    examples.insert(String::new(), pairs(&block(&help(&["--help"]), "Examples:"), "wirevault --help"));
    let pages: Vec<String> =
        examples.keys().map(|s| if s.is_empty() { "wirevault".into() } else { format!("wirevault-{s}") }).collect();
    for (sub, list) in &examples {
        let name = if sub.is_empty() { "wirevault".to_string() } else { format!("wirevault-{sub}") };
        let text = render_man(&out.join(format!("man/{name}.1")));
        let flat = squeeze(&text);
        // A section: its indented lines, up to the next heading (a line at column 0).
        let section = |title: &str| {
            let at = text.find(&format!("\n{title}\n")).unwrap_or_else(|| panic!("{name}(1) has no {title}:\n{text}"));
            let body = text[at + title.len() + 2..].lines().take_while(|l| l.is_empty() || l.starts_with(' '));
            squeeze(&body.collect::<Vec<_>>().join("\n"))
        };
        let ex = section("EXAMPLES");
        for (says, line) in list {
            assert!(ex.contains(&squeeze(&format!("{says} {line}"))), "{name}(1) EXAMPLES lacks {line}:\n{ex}");
        }
        for l in &exits {
            let (code, means) = l.split_once("  ").unwrap();
            assert!(section("EXIT STATUS").contains(&squeeze(&format!("{code} {means}"))), "{name}(1): {l}");
        }
        let files = section("FILES");
        for f in ["STORE/catalog.jsonl", "STORE/stream-NNN/", "STORE/stats.json", "/etc/wirevault/wirevault.toml", unit]
        {
            assert!(files.contains(f), "{name}(1) FILES lacks {f}: {files}");
        }
        let see = section("SEE ALSO");
        for p in pages.iter().filter(|p| **p != name) {
            assert!(see.contains(&format!("{p}(1)")), "{name}(1) SEE ALSO lacks {p}(1): {see}");
        }
        for peer in ["tcpdump(8)", "pcap-filter(7)", "tshark(1)"] {
            assert!(see.contains(peer), "{name}(1) SEE ALSO lacks {peer}");
        }
        assert!(flat.contains("OPTIONS") || sub.is_empty(), "{name}(1) lists no option");
    }
    // The peers of a subcommand's own trade.
    let see = |page: &str| squeeze(&render_man(&out.join(format!("man/{page}.1"))));
    assert!(see("wirevault-replay").contains("tcpreplay(1)"));
    assert!(see("wirevault-tune").contains("ethtool(8)"));
});

/// The default of each long option in a help text: what its `[default: X]`
/// says, or else the word after "default " in its help.
fn help_defaults(text: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with('-')) {
        let Some(at) = line.find("--") else { continue };
        let name: String = line[at + 2..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        let v = match line.find("[default: ") {
            Some(d) => line[d + 10..].split(']').next().unwrap().to_string(),
            None => match line.find("default ") {
                Some(d) => value(&line[d + 8..]),
                None => continue,
            },
        };
        m.insert(name, v);
    }
    m
}

/// The value a text starts with: up to a space, `;`, `:`, `)` or a comma that
/// does not group digits (`1,048,576` is 1048576).
fn value(text: &str) -> String {
    let b = text.as_bytes();
    let end = (0..b.len())
        .find(|&i| {
            matches!(b[i], b' ' | b';' | b':' | b')') || (b[i] == b',' && !b.get(i + 1).is_some_and(u8::is_ascii_digit))
        })
        .unwrap_or(b.len());
    text[..end].replace(',', "")
}

/// record's defaults: `--help` gives each (--buffer's and --ring-size's
/// rules from the plan's numbers), wirevault-record(1) the same, the
/// packaged config's `# default` lines equal them (and every option it
/// names that has a default is given so), and the README's
/// "`--opt` (default X)" statements equal the help of the subcommand whose
/// section they are in; --buffer's rule is stated in all four word for word.
#[test]
fn one_statement_of_each_default() {
    let rec = help_defaults(&help(&["record", "--help"]));
    let rule = rec.get("buffer").expect("record --help states --buffer's default").clone();
    assert!(rule.contains("1/8 of the memory") && rule.contains("disk-bench.json"), "{rule}");
    assert!(rec.contains_key("ring-size") && rec["block-size"] == "4M" && rec["file-size"] == "1G", "{rec:?}");

    // packaging/wirevault.toml.
    let toml = fs::read_to_string(repo().join("packaging/wirevault.toml")).unwrap();
    let mut stated = Vec::new();
    for line in toml.lines() {
        let l = line.strip_prefix("# ").unwrap_or(line);
        let Some((key, rest)) = l.split_once(" = ") else { continue };
        if !key.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
            continue;
        }
        let (value, comment) = rest.split_once('#').map_or((rest, ""), |(v, c)| (v, c));
        let value = value.trim().trim_matches('"');
        if comment.trim() == "default" {
            assert_eq!(rec.get(key).map(String::as_str), Some(value), "packaging/wirevault.toml: {line}");
            stated.push(key.to_string());
        } else if let Some(d) = rec.get(key).filter(|_| key != "buffer") {
            assert!(stated.contains(&key.to_string()) || d != value, "{line}: the default, not marked '# default'");
        }
    }
    for key in toml.lines().filter_map(|l| l.trim_start_matches("# ").split_once(" = ").map(|(k, _)| k)) {
        if rec.contains_key(key) && key != "buffer" {
            assert!(stated.iter().any(|s| s == key), "packaging/wirevault.toml names {key} but not its default");
        }
    }
    assert!(stated.len() >= 8, "{stated:?}");
    let comments: String =
        toml.lines().filter_map(|l| l.strip_prefix('#')).map(|l| l.trim()).collect::<Vec<_>>().join(" ");
    assert!(
        squeeze(&comments).contains(&format!("Default: {rule}.")),
        "packaging/wirevault.toml states another arena default"
    );

    // The README: --buffer's rule, and every "`--opt ...` (default X" under a subcommand's heading.
    let readme = fs::read_to_string(repo().join("README.md")).unwrap().replace('`', "\u{1}");
    assert!(
        squeeze(&readme.replace('\u{1}', "")).contains(&format!("default: {rule}")),
        "README: another arena default"
    );
    let mut sections: Vec<(String, String)> = vec![(String::new(), String::new())];
    for line in readme.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            let sub = line.strip_prefix("### \u{1}wirevault ").map_or("", |h| h.split('\u{1}').next().unwrap());
            sections.push((sub.to_string(), String::new()));
        }
        let text = &mut sections.last_mut().unwrap().1;
        text.push_str(line);
        text.push(' ');
    }
    let mut checked = 0;
    for (sub, text) in sections {
        let text = squeeze(&text);
        let defaults =
            help_defaults(&help(&if sub.is_empty() { vec!["--help"] } else { vec![sub.as_str(), "--help"] }));
        for (i, _) in text.match_indices("\u{1}--") {
            let rest = &text[i + 3..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            let after = &rest[rest.find('\u{1}').map_or(rest.len(), |e| e + 1)..];
            let Some(v) = after.strip_prefix(" (default ").or_else(|| after.strip_prefix(", default ")) else {
                continue;
            };
            let v = value(v);
            let want =
                defaults.get(&name).unwrap_or_else(|| panic!("README ({sub}): --{name} has no default in --help"));
            assert_eq!(v, *want, "README ({sub}): --{name}'s default");
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} README defaults checked");

    // wirevault-record(1): the same rule (the page is rendered from the same help).
    if have("groff") {
        let tmp = TempDir::new("docs-defaults");
        run_wirevault(&["generate-docs", tmp.join("out").to_str().unwrap()]).expect(0, "generate-docs");
        let page = squeeze(&render_man(&tmp.join("out/man/wirevault-record.1")));
        assert!(page.contains(&format!("[default: {rule}]")), "wirevault-record(1) states another arena default");
    }
}

/// The README's exit codes are the binary's (`wirevault --help`, rendered
/// from the one definition in main.rs's `exit` module).
#[test]
fn readme_exit_codes_are_the_binarys() {
    let exits: Vec<String> = block(&help(&["--help"]), "Exit status").iter().map(|l| squeeze(l)).collect();
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    let table = readme.split("## Exit codes").nth(1).unwrap();
    let rows: Vec<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| squeeze(&l.trim_end_matches(" |").replacen(" | ", " ", 1).replace('`', "")))
        .collect();
    assert_eq!(rows, exits, "README's exit codes");
}
