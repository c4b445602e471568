#!/usr/bin/env python3
"""Writes one bench script's output into its own section of bench/RESULTS.md.

    results.py RESULTS_MD SCRIPT STAMP REVISION [ARG...] < output

`markdown_mode` (common.sh) calls it after a `bench/X.sh --markdown` run that
succeeded. The section is everything between `<!-- bench/X.sh -->` and
`<!-- /bench/X.sh -->`: it is replaced whole, so a rerun leaves one current
table per script and no dated sittings (git keeps the old ones); a script
without a section yet gets one at the end of the file. The section opens
with the command that reran it (the environment variables the script reads
that were set, and its arguments), the date and the commit, and the
script's own headings move one level down below `## bench/X.sh`.
"""
import os
import re
import shlex
import sys


def knobs(script):
    """The environment variables SCRIPT reads with a default (`${NAME:-...}`)."""
    with open(script) as f:
        found = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):?[-=]", f.read()))
    # common.sh reads WIREVAULT for every script.
    return sorted(found | {"WIREVAULT"})


def command(script, args):
    words = []
    for k in knobs(script):
        if k in os.environ:
            # A binary's path names this machine's directories: say which
            # binary it was, not where it lay.
            v = "BIN" if k == "WIREVAULT" else shlex.quote(os.environ[k])
            words.append(f"{k}={v}")
    words += ["bench/" + os.path.basename(script), "--markdown"]
    return " ".join(words + [shlex.quote(a) for a in args])


def demote(body):
    """The body with every Markdown heading outside a code fence one level down."""
    out, fenced = [], False
    for line in body.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,5} ", line):
            line = "#" + line
        out.append(line)
    return "\n".join(out)


def section(script, stamp, revision, args, body):
    name = "bench/" + os.path.basename(script)
    built = ", the binary `WIREVAULT` named" if "WIREVAULT" in os.environ else ""
    return (
        f"<!-- {name} -->\n## {name}\n\n"
        f"`{command(script, args)}`, {stamp}, tree at `{revision}`{built}.\n\n"
        f"{demote(body.strip())}\n<!-- /{name} -->"
    )


def splice(text, name, new):
    """TEXT with NAME's section replaced by NEW (or NEW appended)."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    i = text.find(start)
    j = text.find(end, i)
    if i < 0 or j < 0:
        return text.rstrip("\n") + "\n\n" + new + "\n"
    return text[:i] + new + text[j + len(end):]


def main():
    path, script, stamp, revision, *args = sys.argv[1:]
    body = sys.stdin.read()
    if not body.strip():
        sys.exit(f"{script} printed nothing: {path} left as it was")
    with open(path) as f:
        text = f.read()
    name = "bench/" + os.path.basename(script)
    out = splice(text, name, section(script, stamp, revision, args, body))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(out)
    os.replace(tmp, path)
    print(f"{path}: section {name} rewritten", file=sys.stderr)
    # The scoreboard is kept by hand: say which of its rows quote this script.
    rows = [l for l in out.split("\n<!-- bench/")[0].splitlines() if l.startswith("| ") and name in l]
    if rows:
        print(f"{path}: {len(rows)} scoreboard row(s) quote {name}; bring them to the new figures", file=sys.stderr)


if __name__ == "__main__":
    main()
