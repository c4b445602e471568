#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for SECONDS each, one after the other.
#   fuzz/run.sh [SECONDS] [TARGET...]        SECONDS defaults to 600
# Corpora live in fuzz/corpus/TARGET (gitignored): they start from the committed
# seeds in fuzz/seeds/TARGET and, when ../shared/corpus/tcpdump-tests exists,
# from seeds generated out of those captures (examples/mkseeds.rs).
# Findings land in fuzz/artifacts/TARGET; logs in fuzz/logs/TARGET.log.
# Needs cargo-fuzz (cargo install cargo-fuzz); works on stable via RUSTC_BOOTSTRAP=1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(reader packet_index query_expr config recover)
export RUSTC_BOOTSTRAP=1
# Sanitizer: address by default; FUZZ_SANITIZER=none if ASan does not work.
san=${FUZZ_SANITIZER:-address}

max_len() {
    case $1 in
        reader | recover) echo 1048576 ;;
        packet_index) echo 65536 ;;
        *) echo 4096 ;;
    esac
}

shared="$root/../shared/corpus/tcpdump-tests"
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/logs"
    cp -n "fuzz/seeds/$t/"* "fuzz/corpus/$t/" 2>/dev/null || true
done
if [ -d "$shared" ] && [ ! -e fuzz/corpus/.generated ]; then
    echo "generating seed corpora from $shared"
    cargo run --release -q --manifest-path fuzz/Cargo.toml --example mkseeds -- "$shared" fuzz/corpus
    touch fuzz/corpus/.generated
fi

cargo fuzz build -O -s "$san"
for t in "${targets[@]}"; do
    echo "== $t: ${secs}s"
    nice -n 19 cargo fuzz run -O -s "$san" "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 \
        -max_len="$(max_len "$t")" -print_final_stats=1 \
        >"fuzz/logs/$t.log" 2>&1 || { echo "$t: FAILED, see fuzz/logs/$t.log"; tail -40 "fuzz/logs/$t.log"; exit 1; }
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^Done" "fuzz/logs/$t.log" || true
    echo "corpus: $(ls "fuzz/corpus/$t" | wc -l) files"
done
