-- wirevault's flow records in ClickHouse (docs/clickhouse.md). `record --flows-to
-- clickhouse=URL` runs this when the table is missing, with `wirevault.flows` replaced by
-- the URL's database and table; the columns are those of docs/flows.md, plus `batch`.
--
-- Written for Debian's clickhouse-server 18.16 as well as a current ClickHouse, so only its
-- types: no IPv4/IPv6 (addresses are FixedString(16), IPv4 mapped as ::ffff:a.b.c.d, with
-- ip_version beside them), no DateTime64 (times are UInt64 nanoseconds since the epoch), no
-- JSON or LowCardinality. The MergeTree is in the PARTITION BY/ORDER BY syntax 18.16 has.
--
-- `batch` names the spool file (one flow file of the store) a record came in: the inserter
-- sends each file as one INSERT of one block (atomic in a MergeTree) and asks for the batch
-- before it sends a file again, so each record is here once. `batch_date` is the same for
-- every row of a batch (its first record's day), so a batch never spans partitions (one
-- part, still atomic) and the question for a batch reads one partition.
CREATE TABLE IF NOT EXISTS wirevault.flows
(
    batch String,
    batch_date Date,
    node String,
    stream UInt32,
    vlans Array(UInt16),
    ip_version UInt8,
    client FixedString(16),
    server FixedString(16),
    protocol UInt8,
    client_port UInt16,
    server_port UInt16,
    icmp_type UInt8,
    icmp_code UInt8,
    first_ns UInt64,
    last_ns UInt64,
    to_server_packets UInt64,
    to_server_bytes UInt64,
    to_server_ip_bytes UInt64,
    to_server_tcp_flags UInt16,
    to_client_packets UInt64,
    to_client_bytes UInt64,
    to_client_ip_bytes UInt64,
    to_client_tcp_flags UInt16,
    end_reason String,
    files Array(String)
)
ENGINE = MergeTree()
PARTITION BY toYYYYMM(batch_date)
ORDER BY (first_ns, node)
