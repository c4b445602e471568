-- The addresses of wirevault's flow records (docs/clickhouse.md): one row for each record's
-- client and one for its server, ordered by address. The flows table is ordered by
-- (first_ns, node), so a question about one host would read every address in it;
-- `flows --clickhouse` asks this table for the host's records' first_ns instead, then reads
-- only the flows table's granules that hold them (its primary key). About 40 bytes a
-- record, a fifth of the flows table's.
--
-- `record --flows-to clickhouse=URL` runs this after flows.sql when this table is missing,
-- `wirevault.flows` replaced by the URL's table as there (and `_hosts`, `_hosts_mv` after
-- its name), then copies the rows the flows table already holds. The materialized view fills
-- it on every insert into the flows table. Deleting from the flows table (dropping a
-- partition) is to be done here too: both are partitioned by toYYYYMM(batch_date).
CREATE TABLE IF NOT EXISTS wirevault.flows_hosts
(
    host FixedString(16),
    first_ns UInt64,
    last_ns UInt64,
    batch_date Date
)
ENGINE = MergeTree()
PARTITION BY toYYYYMM(batch_date)
ORDER BY (host, first_ns);

CREATE MATERIALIZED VIEW IF NOT EXISTS wirevault.flows_hosts_mv TO wirevault.flows_hosts
AS SELECT host, first_ns, last_ns, batch_date FROM wirevault.flows ARRAY JOIN [client, server] AS host
