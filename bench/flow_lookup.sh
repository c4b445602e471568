#!/usr/bin/env bash
# One host's flows over a day of records (issue 47: "`flows` over a day of records (synthetic:
# 100 M flows) in ClickHouse 18.16 and in the local Parquet files: one host's flows in < 1 s").
# crates/flows/examples/gen_flows.rs writes N synthetic records ending over one day as a store's
# flow files (STORE/flows/stream-000/*.parquet, PER_FILE records each, through the recorder's
# own writer: footer statistics and bloom filters as recorded) and inserts each file into a
# ClickHouse 18.16 of this script's own (tables from packaging/clickhouse/flows.sql and
# flows_hosts.sql, as the recorder's spool makes and fills them). Then, RUNS times each, for a host of 10.1.0.0/16 with few
# flows (about QUIET; the generator names it and its count):
#   wirevault flows STORE 'host X'                 (Parquet; files skipped by footer and bloom filters)
#   wirevault flows --clickhouse URL 'host X'      (the same question as a WHERE clause, the
#                                                  host's first_ns asked of the hosts table first)
#   DuckDB over the same Parquet files             (SELECT * ... WHERE client = X OR server = X, and
#                                                  the same as a UNION ALL of one side each)
#   clickhouse-client, the raw SELECT              (the same WHERE, on the flows table alone)
# Every answer's record count must equal the generator's count for the host (exit 1 if not).
#
#   bench/flow_lookup.sh [WORKDIR]      (default ./bench-flowlookup.PID; removed afterwards)
#
# Environment: WIREVAULT (binary), GEN_FLOWS (the generator; default: built here),
# N (records, default 100000000), PER_FILE (records a flow file, default 500000), RUNS
# (default 3), QUIET (flows of the host asked for, default 10), JOBS (generator threads,
# default 2), MERGE_WAIT (seconds to wait for ClickHouse's background merges before the
# timed queries, default 900), BY_HOST=1 also copies the whole table into one ordered by
# address (an experiment beside the hosts table, not what the recorder makes) and times the
# raw SELECT there.
#
# All timings are warm (the files and the table were just written; 24 GiB of RAM hold them)
# and wall clock of the whole command (process start included); DuckDB's is the query alone,
# inside one python3 (its import is not counted). ClickHouse listens on 127.0.0.1 only, with
# data, config and logs beneath WORKDIR, and is stopped at the end.
# `--markdown` as the first argument also writes the table into this script's section of
# bench/RESULTS.md (markdown_mode, lib/common.sh).
# shellcheck source=bench/lib/common.sh
source "$(dirname "$0")/lib/common.sh"
markdown_mode "$@"
need_tools python3 curl clickhouse-server clickhouse-client
python3 -c 'import duckdb' 2>/dev/null || { echo "duckdb is missing: pip install duckdb" >&2; exit 1; }
wv_binary
N=${N:-100000000}
PER_FILE=${PER_FILE:-500000}
RUNS=${RUNS:-3}
QUIET=${QUIET:-10}
JOBS=${JOBS:-2}
MERGE_WAIT=${MERGE_WAIT:-900}
BY_HOST=${BY_HOST:-0}
if [ -n "${GEN_FLOWS:-}" ]; then
  GEN=$GEN_FLOWS
else
  if have cargo; then
    echo "building the generator (release) ..." >&2
    cargo build --release -q -p wv-flows --example gen_flows
  fi
  GEN=${CARGO_TARGET_DIR:-target}/release/examples/gen_flows
fi
[ -x "$GEN" ] || { echo "no generator at $GEN: cargo build --release -p wv-flows --example gen_flows, or set GEN_FLOWS" >&2; exit 1; }
WORK=$(work_dir "${1:-$BENCH_ROOT/bench-flowlookup.$$}")
CH=$WORK/clickhouse
STORE=$WORK/store
CH_PID=
cleanup() {
  if [ -n "$CH_PID" ]; then
    kill "$CH_PID" 2>/dev/null || true
    wait "$CH_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "[flow_lookup] $*" >&2; }

# About 60 bytes a record in Parquet and 70 in ClickHouse (more while it merges).
need=$(calc "$N * 200 + 2e9" .0f)
free=$(python3 -c "import os,sys; s=os.statvfs(sys.argv[1]); print(s.f_bavail*s.f_frsize)" "$WORK")
[ "$free" -gt "$need" ] || { echo "$WORK has $(calc "$free/1e9" .1f) GB free; N=$N needs about $(calc "$need/1e9" .1f) GB" >&2; exit 1; }

# A clickhouse-server of our own, as tests/flows_clickhouse.rs starts one: loopback only, its
# own ports, everything beneath $CH.
mkdir -p "$CH"
read -r HTTP TCP < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
cat >"$CH/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>$CH/server.log</log><errorlog>$CH/server.err.log</errorlog></logger>
    <http_port>$HTTP</http_port>
    <tcp_port>$TCP</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <path>$CH/data/</path>
    <tmp_path>$CH/tmp/</tmp_path>
    <user_files_path>$CH/user_files/</user_files_path>
    <format_schema_path>$CH/format_schemas/</format_schema_path>
    <users_config>$CH/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>268435456</mark_cache_size>
</yandex>
EOF
cat >"$CH/users.xml" <<EOF
<?xml version="1.0"?>
<yandex><profiles><default></default></profiles><users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users><quotas><default></default></quotas></yandex>
EOF
clickhouse-server --config-file="$CH/config.xml" >/dev/null 2>"$CH/stderr" &
CH_PID=$!
chq() { clickhouse-client --host 127.0.0.1 --port "$TCP" "$@"; }
for _ in $(seq 150); do
  [ "$(curl -s "http://127.0.0.1:$HTTP/" --data-binary 'SELECT 1' 2>/dev/null)" = 1 ] && break
  kill -0 "$CH_PID" 2>/dev/null || { echo "clickhouse-server ended: $(tail -3 "$CH/server.err.log" "$CH/stderr" 2>/dev/null)" >&2; exit 1; }
  sleep 0.2
done
[ "$(chq --query 'SELECT 1')" = 1 ] || { echo "clickhouse-server did not answer within 30 s" >&2; exit 1; }
CH_VERSION=$(chq --query 'SELECT version()')
URL=http://127.0.0.1:$HTTP/wirevault
log "ClickHouse $CH_VERSION on 127.0.0.1:$HTTP (http), $TCP (native)"

log "generating $N records ($PER_FILE a file) into $STORE and $URL"
t=$(now)
GEN_OUT=$("$GEN" "$STORE" "$N" --per-file "$PER_FILE" --jobs "$JOBS" --quiet "$QUIET" --clickhouse "$URL")
GEN_S=$(since "$t")
read -r FILES HOST WANT < <(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["files"], d["quiet_host"], d["quiet_flows"])' "$GEN_OUT")
log "$GEN_OUT (${GEN_S} s with the inserts)"
# The inserts' parts are merged in the background: wait for that, so no merge runs beside
# the timed queries (at most MERGE_WAIT seconds).
t=$(now)
for _ in $(seq "$MERGE_WAIT"); do
  [ "$(chq --query 'SELECT count() FROM system.merges')" = 0 ] && break
  sleep 1
done
MERGE_S=$(since "$t")
PARTS=$(chq --query "SELECT count() FROM system.parts WHERE active AND database = 'wirevault' AND table = 'flows'")
ROWS=$(chq --query 'SELECT count() FROM wirevault.flows')
[ "$ROWS" = "$N" ] || { echo "ClickHouse holds $ROWS rows, not $N" >&2; exit 1; }
MERGING=$(chq --query 'SELECT count() FROM system.merges')
log "after $MERGE_S s: $PARTS active parts, $MERGING merges running"

PQ_BYTES=$(find "$STORE/flows" -name '*.parquet' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
CH_BYTES=$(chq --query "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'wirevault' AND table = 'flows'")
HOSTS_BYTES=$(chq --query "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'wirevault' AND table = 'flows_hosts'")
HOSTS_ROWS=$(chq --query 'SELECT count() FROM wirevault.flows_hosts')
HEX=$(python3 -c 'import ipaddress,sys; print((b"\0"*10 + b"\xff\xff" + ipaddress.IPv4Address(sys.argv[1]).packed).hex())' "$HOST")
ADDR="toFixedString(unhex('$HEX'), 16)"
WHERE="(client = $ADDR OR server = $ADDR)"

# Each tool's seconds (min-max over RUNS) and its answer's record count, checked.
ROWS_TSV=$WORK/rows.tsv
: >"$ROWS_TSV"
BAD=0
# time_count NAME BYTES CMD...: runs CMD RUNS times (its standard output into a file), records
# the range of its seconds and the count `count_of` gives for its last output.
time_count() {
  local name=$1 bytes=$2 out=$WORK/out secs=() s n
  shift 2
  for _ in $(seq "$RUNS"); do
    s=$(now)
    "$@" >"$out" 2>"$WORK/err" || { echo "$name failed: $(tail -2 "$WORK/err")" >&2; exit 1; }
    secs+=("$(since "$s")")
  done
  n=$(count_of "$out")
  record "$name" "$bytes" "$n" "${secs[@]}"
}
record() {
  local name=$1 bytes=$2 n=$3 lo hi
  shift 3
  lo=$(calc "min([$(IFS=,; echo "$*")])" .3f)
  hi=$(calc "max([$(IFS=,; echo "$*")])" .3f)
  [ "$n" = "$WANT" ] || { log "$name answered $n records, the generator made $WANT"; BAD=1; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$bytes" "$n" "$lo" "$hi" >>"$ROWS_TSV"
  log "$name: $n records, $lo-$hi s (runs: $*)"
}

count_of() { echo $(($(wc -l <"$1") - 1)); } # --csv: a header line
time_count "\`wirevault flows STORE 'host $HOST'\` (Parquet)" "$PQ_BYTES" "$BIN" flows "$STORE" --csv host "$HOST"
time_count "\`wirevault flows --clickhouse URL 'host $HOST'\`" "$CH_BYTES" "$BIN" flows --clickhouse "$URL" --csv host "$HOST"
count_of() { wc -l <"$1"; } # TabSeparated: a line a row
time_count "clickhouse-client: \`SELECT * ... WHERE client = X OR server = X\`" "$CH_BYTES" \
  chq --query "SELECT * FROM wirevault.flows WHERE $WHERE FORMAT TabSeparated"

# DuckDB: RUNS queries in one process, each timed alone; the OR as it is, and as a UNION ALL of
# one equality a side, which DuckDB can check against each file's statistics and bloom filters
# (an OR of two columns it reads whole).
DUCK_VERSION=$(python3 -c 'import duckdb; print(duckdb.__version__)')
duck() {
  python3 - "$STORE/flows" "$HEX" "$RUNS" "$1" <<'PY'
import duckdb, sys, time
root, hexaddr, runs, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
con = duckdb.connect()
files, a = f"read_parquet('{root}/**/*.parquet')", f"unhex('{hexaddr}')"
if how == "or":
    q = f"SELECT * FROM {files} WHERE client = {a} OR server = {a}"
else:
    q = f"SELECT * FROM {files} WHERE client = {a} UNION ALL SELECT * FROM {files} WHERE server = {a} AND client <> {a}"
secs = []
for _ in range(runs):
    t = time.time()
    rows = con.execute(q).fetchall()
    secs.append(time.time() - t)
print(len(rows), ",".join(f"{s:.3f}" for s in secs))
PY
}
read -r n secs < <(duck or)
# shellcheck disable=SC2086
record "DuckDB $DUCK_VERSION over the same Parquet files: \`client = X OR server = X\` (query alone)" "$PQ_BYTES" "$n" ${secs//,/ }
read -r n secs < <(duck union)
# shellcheck disable=SC2086
record "DuckDB $DUCK_VERSION, the same as \`client = X UNION ALL server = X AND client <> X\` (query alone)" "$PQ_BYTES" "$n" ${secs//,/ }

# Data-skipping indexes came with ClickHouse 19.3 (minmax and set, behind this setting until
# 19.17): what this server says of it goes below the table.
SKIP_INDEX=$(chq --multiquery --query 'SET allow_experimental_data_skipping_indices = 1; SELECT 1' 2>&1 | grep -m1 -o 'Code: .*' | cut -c1-120) || true


if [ "$BY_HOST" = 1 ]; then
  # An experiment, not flows.sql: a second table of the same rows ordered by address, each
  # record once per side (arrayJoin), so that a host's rows are a range of its primary key.
  log "copying the table into flows_by_host, ORDER BY (host, first_ns)"
  t=$(now)
  chq --query "CREATE TABLE wirevault.flows_by_host ENGINE = MergeTree() PARTITION BY toYYYYMM(batch_date) ORDER BY (host, first_ns) AS SELECT arrayJoin(if(client = server, [client], [client, server])) AS host, * FROM wirevault.flows"
  COPY_S=$(since "$t")
  for _ in $(seq "$MERGE_WAIT"); do
    [ "$(chq --query 'SELECT count() FROM system.merges')" = 0 ] && break
    sleep 1
  done
  BH_BYTES=$(chq --query "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'wirevault' AND table = 'flows_by_host'")
  log "copied in $COPY_S s: $BH_BYTES bytes"
  time_count "clickhouse-client: \`SELECT * ... WHERE host = X\` on a copy ordered by (host, first_ns) (experiment, copied in $COPY_S s)" "$BH_BYTES" \
    chq --query "SELECT * FROM wirevault.flows_by_host WHERE host = $ADDR FORMAT TabSeparated"
fi

echo "### One host's flows over $(calc "$N" ,) records of a day ($(stamp))"
echo
table_header question "records answered" "seconds ($RUNS runs)" "data bytes" "bytes a record"
while IFS=$'\t' read -r name bytes n lo hi; do
  table_row "$name" "$n" "$lo-$hi" "$(calc "$bytes" ,)" "$(calc "$bytes/$N" .1f)"
done <"$ROWS_TSV"
echo
echo "$(calc "$N" ,) records in $FILES flow files of $(calc "$PER_FILE" ,), generated and inserted in $GEN_S s;"
echo "ClickHouse $CH_VERSION, $PARTS active parts after waiting $MERGE_S s for its merges ($MERGING still running"
echo "during the queries). Beside the flows table, its hosts table (flows_hosts.sql, filled by its view):"
echo "$(calc "$HOSTS_ROWS" ,) rows, $(calc "$HOSTS_BYTES" ,) bytes ($(calc "$HOSTS_BYTES/$N" .1f) a record, $(calc "100*$HOSTS_BYTES/$CH_BYTES" .0f)% of the flows table)."
echo "The host, $HOST, is in $WANT records (client or server). Data-skipping indexes"
echo "(ClickHouse 19.3 on) to try beside the table's ORDER BY (first_ns, node): this server answers"
echo "\`SET allow_experimental_data_skipping_indices = 1\` with \`$SKIP_INDEX\`."
echo
echo "<!-- command: bench/flow_lookup.sh (N=$N PER_FILE=$PER_FILE RUNS=$RUNS QUIET=$QUIET BY_HOST=$BY_HOST); records:"
echo "     crates/flows/examples/gen_flows.rs (10.1.0.0/16 clients with log-normal shares, 20 hot servers,"
echo "     Internet peers, 4% IPv6, files rotating by size over 2026-12-01); warm cache; wirevault and"
echo "     clickhouse-client timed as whole commands, DuckDB as the query alone -->"
[ "$BAD" = 0 ] || { echo "the answers' record counts differ (above)" >&2; exit 1; }
