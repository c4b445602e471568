#!/usr/bin/env bash
# Builds every fuzz target and replays the committed seeds (fuzz/seeds/TARGET,
# which include the inputs of every bug found so far) through it. CI calls this
# to keep the targets building; it needs only crates.io and a stable toolchain.
#
# With cargo-fuzz installed it builds the instrumented targets exactly as
# fuzz/run.sh does (RUSTC_BOOTSTRAP=1, ASan); without it (or with
# FUZZ_PLAIN=1) it builds them as ordinary binaries in the root's dev
# profile, still linked with libFuzzer, which can replay inputs but not fuzz.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$here")"
targets=(reader packet_index query_expr config recover catalog dissect analyze)

if [ -z "${FUZZ_PLAIN:-}" ] && cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/check.sh: cargo fuzz build (instrumented)"
    RUSTC_BOOTSTRAP=1 cargo fuzz build -O -s "${FUZZ_SANITIZER:-address}"
    target_dir=$(cargo metadata --format-version 1 --no-deps --manifest-path fuzz/Cargo.toml |
        grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)
    bindir="$target_dir/$(rustc -vV | sed -n 's/^host: //p')/release"
else
    # The root workspace's dev profile and target directory (fuzz/Cargo.toml repeats the
    # profile): the dependencies `cargo build --workspace` compiled are reused, and overflow
    # and debug assertions are on while the seeds replay.
    echo "fuzz/check.sh: plain cargo build (no cargo-fuzz, or FUZZ_PLAIN set)"
    CARGO_TARGET_DIR="$PWD/target" cargo build --manifest-path fuzz/Cargo.toml --bins --examples
    bindir="$PWD/target/debug"
fi

artifacts=$(mktemp -d)
trap 'rm -rf "$artifacts"' EXIT
pass=0
fail=0
for t in "${targets[@]}"; do
    if "$bindir/$t" -artifact_prefix="$artifacts/" -rss_limit_mb=2048 -timeout=30 \
        "fuzz/seeds/$t"/* >"$artifacts/$t.log" 2>&1; then
        pass=$((pass + 1))
        echo "ok   $t ($(ls "fuzz/seeds/$t" | wc -l) seeds)"
    else
        fail=$((fail + 1))
        echo "FAIL $t"
        grep -E -A20 "panicked|ERROR|SUMMARY" "$artifacts/$t.log" | head -40 || tail -40 "$artifacts/$t.log"
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
