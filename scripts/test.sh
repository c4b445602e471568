#!/usr/bin/env bash
# The whole test suite: dependencies, formatting, build of every target,
# clippy, the docs (rustdoc warnings are errors), every test, and the fuzz
# targets (built, seeds replayed).
# Integration tests that need root (network namespaces, AF_PACKET) skip with a
# message when not run as root; under CI=true a missing tool fails them.
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
step() { echo "== $* ($(( $(date +%s) - start ))s)"; }

step "install dependencies"
bash scripts/install-deps.sh

step "format"
cargo fmt --all --check
cargo fmt --manifest-path fuzz/Cargo.toml --check   # the fuzz crate is not a workspace member

step "build"
cargo build --workspace --all-targets

step "lint"
cargo clippy --workspace --all-targets -- -D warnings
# Into the root's target directory, as fuzz/check.sh builds: the workspace's checked
# dependencies are reused.
CARGO_TARGET_DIR="$PWD/target" cargo clippy --manifest-path fuzz/Cargo.toml --bins -- -D warnings

step "docs"
# Broken or private intra-doc links fail the run as a lint does.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "test"
cargo test --workspace --no-fail-fast

step "fuzz targets: build, replay the seeds"
bash fuzz/check.sh

step "done"
