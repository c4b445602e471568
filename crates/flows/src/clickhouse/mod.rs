//! Flow records in ClickHouse (docs/clickhouse.md): the table of
//! `packaging/clickhouse/flows.sql`, written and read over the HTTP interface in RowBinary,
//! and the inserter that sends a store's flow files to it ([`spool`]).

pub mod http;
pub mod spool;

use crate::filter::Expr;
use crate::record::{Direction, EndReason, FlowRecord, IpAddr16};
use http::{Endpoint, Failure};
use std::time::Duration;

/// The table's `CREATE TABLE`, with `wirevault.flows` for its name.
pub const CREATE_TABLE: &str = include_str!("../../../../packaging/clickhouse/flows.sql");

/// The statement in [`CREATE_TABLE`] that names the table (replaced by the URL's).
pub const MADE: &str = "CREATE TABLE IF NOT EXISTS wirevault.flows";

/// The hosts table and the view that fills it (`packaging/clickhouse/flows_hosts.sql`),
/// with `wirevault.flows` for the flows table's name.
pub const CREATE_HOSTS: &str = include_str!("../../../../packaging/clickhouse/flows_hosts.sql");

/// The table's columns and their types, as flows.sql makes them (checked before inserting:
/// RowBinary carries no types, so a table of other types would take wrong values).
pub const COLUMNS: [(&str, &str); 25] = [
    ("batch", "String"),
    ("batch_date", "Date"),
    ("node", "String"),
    ("stream", "UInt32"),
    ("vlans", "Array(UInt16)"),
    ("ip_version", "UInt8"),
    ("client", "FixedString(16)"),
    ("server", "FixedString(16)"),
    ("protocol", "UInt8"),
    ("client_port", "UInt16"),
    ("server_port", "UInt16"),
    ("icmp_type", "UInt8"),
    ("icmp_code", "UInt8"),
    ("first_ns", "UInt64"),
    ("last_ns", "UInt64"),
    ("to_server_packets", "UInt64"),
    ("to_server_bytes", "UInt64"),
    ("to_server_ip_bytes", "UInt64"),
    ("to_server_tcp_flags", "UInt16"),
    ("to_client_packets", "UInt64"),
    ("to_client_bytes", "UInt64"),
    ("to_client_ip_bytes", "UInt64"),
    ("to_client_tcp_flags", "UInt16"),
    ("end_reason", "String"),
    ("files", "Array(String)"),
];

/// A ClickHouse table of flow records: `http://[USER:PASSWORD@]HOST[:PORT]/DB[/TABLE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub endpoint: Endpoint,
    pub database: String,
    pub table: String,
}

/// What went wrong with a ClickHouse, as one sentence (`Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Http(Failure),
    /// The table is there but not as flows.sql makes it.
    Table(String),
    /// An answer that is not what was asked.
    Answer(String),
}

impl Error {
    /// Whether a request that failed so may have been carried out.
    pub fn unsure(&self) -> bool {
        !matches!(self, Error::Http(Failure::Down(_)))
    }
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Error {
        Error::Http(f)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Http(h) => h.fmt(f),
            Error::Table(s) | Error::Answer(s) => f.write_str(s),
        }
    }
}

impl Target {
    /// Parses the URL; `auth` (user, password) is used when the URL has none.
    pub fn parse(url: &str, given: Option<(String, String)>) -> Result<Target, String> {
        let usage = || format!("{url:?} is not a ClickHouse URL like http://HOST:8123/DB (or /DB/TABLE)");
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            if url.starts_with("https://") {
                format!("{url:?}: only http:// is spoken to ClickHouse (its HTTP port, 8123); put a TLS proxy on the recorder's side for https")
            } else {
                usage()
            }
        })?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, p.parse::<u16>().map_err(|_| usage())?),
            _ => (hostport, 8123),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(usage());
        }
        let mut parts = path.trim_end_matches('/').split('/');
        let database = parts.next().filter(|d| !d.is_empty()).unwrap_or("wirevault").to_string();
        let table = parts.next().unwrap_or("flows").to_string();
        if parts.next().is_some() {
            return Err(usage());
        }
        for n in [&database, &table] {
            if !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') || n.is_empty() {
                return Err(format!("{url:?}: database and table names are letters, digits and _ only, not {n:?}"));
            }
        }
        let auth = userinfo.map(|u| {
            let (u, p) = u.split_once(':').unwrap_or((u, ""));
            (u.to_string(), p.to_string())
        });
        Ok(Target {
            endpoint: Endpoint {
                host: host.to_string(),
                port,
                auth: auth.or(given),
                connect_timeout: Duration::from_secs(3),
                timeout: Duration::from_secs(30),
            },
            database,
            table,
        })
    }

    /// `db`.`table`.
    pub fn name(&self) -> String {
        format!("`{}`.`{}`", self.database, self.table)
    }

    /// `http://HOST:PORT/DB/TABLE`, without credentials (for messages).
    pub fn url(&self) -> String {
        format!("http://{}:{}/{}/{}", self.endpoint.host, self.endpoint.port, self.database, self.table)
    }

    /// The hosts table beside the flows table (`TABLE_hosts`).
    pub fn hosts_name(&self) -> String {
        format!("`{}`.`{}_hosts`", self.database, self.table)
    }

    /// The statements of [`CREATE_HOSTS`] for this table, in order.
    fn hosts_statements(&self) -> Vec<String> {
        let sql: String = CREATE_HOSTS.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n");
        let view = format!("`{}`.`{}_hosts_mv`", self.database, self.table);
        sql.split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.replace("wirevault.flows_hosts_mv", &view)
                    .replace("wirevault.flows_hosts", &self.hosts_name())
                    .replace("wirevault.flows", &self.name())
            })
            .collect()
    }

    /// Whether the table `name` (`db`.`table`) exists.
    fn exists(&self, name: &str) -> Result<bool, Error> {
        let a = self.query(&format!("EXISTS TABLE {name} FORMAT TabSeparated"))?;
        match String::from_utf8_lossy(&a).trim() {
            "1" => Ok(true),
            "0" => Ok(false),
            other => Err(Error::Answer(format!("answered {other:?} to EXISTS TABLE"))),
        }
    }

    fn query(&self, sql: &str) -> Result<Vec<u8>, Error> {
        Ok(self.endpoint.post(&[], sql.as_bytes())?)
    }

    /// Makes the database and table if missing, then checks the table's columns.
    pub fn ensure_table(&self) -> Result<(), Error> {
        // Refused where the user may not create databases: the table's creation says more.
        let _ = self.query(&format!("CREATE DATABASE IF NOT EXISTS `{}`", self.database));
        let sql = CREATE_TABLE.replacen(MADE, &format!("CREATE TABLE IF NOT EXISTS {}", self.name()), 1);
        self.query(&sql)?;
        let got = self.query(&format!(
            "SELECT name, type FROM system.columns WHERE database = '{}' AND table = '{}' FORMAT TabSeparated",
            self.database, self.table
        ))?;
        let got = String::from_utf8_lossy(&got);
        let have: std::collections::HashMap<&str, &str> = got.lines().filter_map(|l| l.split_once('\t')).collect();
        for (name, ty) in COLUMNS {
            match have.get(name) {
                Some(t) if *t == ty => {}
                Some(t) => {
                    return Err(Error::Table(format!(
                        "table {} has column {name} as {t}, not {ty}: make it as packaging/clickhouse/flows.sql does (or name another table in the URL)",
                        self.name()
                    )))
                }
                None => {
                    return Err(Error::Table(format!(
                        "table {} has no column {name} ({ty}): make it as packaging/clickhouse/flows.sql does (or name another table in the URL)",
                        self.name()
                    )))
                }
            }
        }
        if !self.exists(&self.hosts_name())? {
            for sql in self.hosts_statements() {
                self.query(&sql)?;
            }
            // The rows from before the view: a row inserted between the view and this copy is
            // in the hosts table twice, which a set of first_ns does not mind.
            self.query(&format!(
                "INSERT INTO {} SELECT host, first_ns, last_ns, batch_date FROM {} ARRAY JOIN [client, server] AS host",
                self.hosts_name(),
                self.name()
            ))?;
        }
        Ok(())
    }

    /// How many rows of `batch` the table has. Asked under the batch's query id, so that
    /// while an insert of it still runs (sent by a recorder since killed) the question is
    /// refused rather than answered too early.
    pub fn batch_rows(&self, batch: &str, date: u16) -> Result<u64, Error> {
        let sql = format!(
            "SELECT count() FROM {} WHERE batch_date = toDate({date}) AND batch = '{}' FORMAT TabSeparated",
            self.name(),
            escape(batch)
        );
        let a = self.endpoint.post(&[("query_id", &query_id(batch))], sql.as_bytes())?;
        String::from_utf8_lossy(&a)
            .trim()
            .parse()
            .map_err(|_| Error::Answer(format!("answered {:?} to a count", String::from_utf8_lossy(&a))))
    }

    /// Inserts `records` as one block tagged `batch` (atomic: all rows or none); `date` is
    /// [`batch_date`] of the whole batch (also when only its tail is sent).
    pub fn insert(&self, batch: &str, date: u16, records: &[FlowRecord]) -> Result<(), Error> {
        let mut body = Vec::with_capacity(records.len() * 160);
        for r in records {
            write_row(&mut body, batch, date, r);
        }
        let cols: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
        let sql = format!("INSERT INTO {} ({}) FORMAT RowBinary", self.name(), cols.join(", "));
        // One block however many rows (ClickHouse cuts an insert at this many), and the query
        // id the batch's: a second insert of it while the first still runs is refused.
        let block = (records.len() + 1).max(1_048_576).to_string();
        self.endpoint
            .post(&[("query", &sql), ("max_insert_block_size", &block), ("query_id", &query_id(batch))], &body)?;
        Ok(())
    }

    /// The records `filter` and the time range choose.
    ///
    /// An expression that names hosts every match has ([`hosts_of`]) is asked of the hosts
    /// table first, when there is one, for the first_ns of those hosts' records: the flows
    /// table then reads only the granules that hold them.
    pub fn select(&self, filter: &Expr, from_ns: Option<u64>, to_ns: Option<u64>) -> Result<Vec<FlowRecord>, Error> {
        let cols: Vec<&str> = COLUMNS.iter().skip(2).map(|c| c.0).collect();
        let mut w = where_clause(filter, from_ns, to_ns);
        if let Some(hosts) = hosts_of(filter) {
            if self.exists(&self.hosts_name())? {
                let mut sub = vec![format!("host IN ({})", hosts.iter().map(sql_addr).collect::<Vec<_>>().join(", "))];
                sub.extend(from_ns.map(|t| format!("last_ns >= {t}")));
                sub.extend(to_ns.map(|t| format!("first_ns < {t}")));
                w = format!(
                    "first_ns IN (SELECT first_ns FROM {} WHERE {}) AND {w}",
                    self.hosts_name(),
                    sub.join(" AND ")
                );
            }
        }
        let sql = format!("SELECT {} FROM {} WHERE {w} FORMAT RowBinary", cols.join(", "), self.name());
        let body = self.query(&sql)?;
        let mut rd = Reader { b: &body, at: 0 };
        let mut out = Vec::new();
        while rd.at < body.len() {
            out.push(read_row(&mut rd).ok_or_else(|| {
                Error::Answer(format!("{}'s rows ended inside a record: is it as flows.sql makes it?", self.name()))
            })?);
        }
        Ok(out)
    }
}

/// Reads a credentials file: `USER:PASSWORD` on its first line (`USER` alone: no password).
pub fn read_auth(path: &std::path::Path) -> Result<(String, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(format!("{} is empty: write USER:PASSWORD on its first line", path.display()));
    }
    let (u, p) = line.split_once(':').unwrap_or((line, ""));
    Ok((u.to_string(), p.to_string()))
}

/// The day (since the epoch) a batch is filed under: its earliest record's.
pub fn batch_date(records: &[FlowRecord]) -> u16 {
    let first = records.iter().map(|r| r.first_ns).min().unwrap_or(0);
    (first / 86_400_000_000_000).min(u64::from(u16::MAX)) as u16
}

/// The query id of a batch's insert and of the question for it.
fn query_id(batch: &str) -> String {
    format!("wirevault-{:016x}", fnv(batch.as_bytes()))
}

/// FNV-1a, 64 bits: a stable short name of a batch id.
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3))
}

/// A string in single quotes, escaped as ClickHouse reads it.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\'', "\\'")
}

fn hex(a: &[u8]) -> String {
    a.iter().map(|b| format!("{b:02x}")).collect()
}

/// The WHERE clause of a flow expression and a time range: the same choice as
/// [`Expr::matches`] and `flows STORE`'s range.
pub fn where_clause(e: &Expr, from_ns: Option<u64>, to_ns: Option<u64>) -> String {
    let mut w = vec![sql_of(e)];
    if let Some(t) = from_ns {
        w.push(format!("last_ns >= {t}"));
    }
    if let Some(t) = to_ns {
        w.push(format!("first_ns < {t}"));
    }
    w.join(" AND ")
}

/// Hosts one of which every record `e` matches has as client or server, when `e` says so
/// (`host X`, `host X and ...`, `host X or host Y`); `None` when it does not.
pub fn hosts_of(e: &Expr) -> Option<Vec<IpAddr16>> {
    match e {
        Expr::Host(a) => Some(vec![*a]),
        Expr::And(a, b) => match (hosts_of(a), hosts_of(b)) {
            (Some(x), Some(y)) => Some(if x.len() <= y.len() { x } else { y }),
            (x, y) => x.or(y),
        },
        Expr::Or(a, b) => {
            let (mut x, y) = (hosts_of(a)?, hosts_of(b)?);
            x.extend(y);
            Some(x)
        }
        _ => None,
    }
}

/// A 16-byte address as ClickHouse takes it.
fn sql_addr(a: &IpAddr16) -> String {
    format!("toFixedString(unhex('{}'), 16)", hex(&a.0))
}

fn sql_of(e: &Expr) -> String {
    let addr = sql_addr;
    match e {
        Expr::All => "1".into(),
        Expr::Host(a) => format!("(client = {0} OR server = {0})", addr(a)),
        Expr::Net(a, len) => {
            // The addresses of a prefix are a range of 16-byte strings (compared as bytes).
            let (mut lo, mut hi) = (a.0, a.0);
            for bit in usize::from(*len)..128 {
                lo[bit / 8] &= !(0x80 >> (bit % 8));
                hi[bit / 8] |= 0x80 >> (bit % 8);
            }
            let (lo, hi) = (addr(&IpAddr16(lo)), addr(&IpAddr16(hi)));
            format!("((client >= {lo} AND client <= {hi}) OR (server >= {lo} AND server <= {hi}))")
        }
        Expr::Port(p) => format!("(protocol IN (6, 17, 132) AND (client_port = {p} OR server_port = {p}))"),
        Expr::Proto(p) => format!("protocol = {p}"),
        Expr::Version(v) => format!("ip_version = {v}"),
        Expr::Vlan(None) => "notEmpty(vlans)".into(),
        Expr::Vlan(Some(v)) => format!("has(vlans, {v})"),
        Expr::Not(e) => format!("NOT ({})", sql_of(e)),
        Expr::And(a, b) => format!("({} AND {})", sql_of(a), sql_of(b)),
        Expr::Or(a, b) => format!("({} OR {})", sql_of(a), sql_of(b)),
    }
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn string(out: &mut Vec<u8>, s: &[u8]) {
    varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// One row in RowBinary, in [`COLUMNS`]' order.
fn write_row(o: &mut Vec<u8>, batch: &str, date: u16, r: &FlowRecord) {
    string(o, batch.as_bytes());
    o.extend_from_slice(&date.to_le_bytes());
    string(o, r.node.as_bytes());
    o.extend_from_slice(&r.stream.to_le_bytes());
    varint(o, r.vlans.len() as u64);
    for v in &r.vlans {
        o.extend_from_slice(&v.to_le_bytes());
    }
    o.push(r.client.version());
    o.extend_from_slice(&r.client.0);
    o.extend_from_slice(&r.server.0);
    o.push(r.protocol);
    o.extend_from_slice(&r.client_port.to_le_bytes());
    o.extend_from_slice(&r.server_port.to_le_bytes());
    o.extend_from_slice(&[r.icmp_type, r.icmp_code]);
    o.extend_from_slice(&r.first_ns.to_le_bytes());
    o.extend_from_slice(&r.last_ns.to_le_bytes());
    for d in [&r.to_server, &r.to_client] {
        for n in [d.packets, d.frame_bytes, d.ip_bytes] {
            o.extend_from_slice(&n.to_le_bytes());
        }
        o.extend_from_slice(&d.tcp_flags.to_le_bytes());
    }
    string(o, r.end.name().as_bytes());
    varint(o, r.files.len() as u64);
    for f in &r.files {
        string(o, f.as_bytes());
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|s| u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes)
    }
    fn varint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }
    fn string(&mut self) -> Option<String> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n).map(|s| String::from_utf8_lossy(s).into_owned())
    }
    fn addr(&mut self) -> Option<IpAddr16> {
        self.take(16).and_then(|s| s.try_into().ok()).map(IpAddr16)
    }
}

/// One row of [`COLUMNS`] after `batch` and `batch_date`.
fn read_row(rd: &mut Reader<'_>) -> Option<FlowRecord> {
    let node = rd.string()?;
    let stream = rd.u32()?;
    let nv = rd.varint()?;
    let vlans = (0..nv).map(|_| rd.u16()).collect::<Option<Vec<_>>>()?;
    let _version = rd.u8()?;
    let (client, server) = (rd.addr()?, rd.addr()?);
    let protocol = rd.u8()?;
    let (client_port, server_port) = (rd.u16()?, rd.u16()?);
    let (icmp_type, icmp_code) = (rd.u8()?, rd.u8()?);
    let (first_ns, last_ns) = (rd.u64()?, rd.u64()?);
    let mut dir = || -> Option<Direction> {
        Some(Direction { packets: rd.u64()?, frame_bytes: rd.u64()?, ip_bytes: rd.u64()?, tcp_flags: rd.u16()? })
    };
    let (to_server, to_client) = (dir()?, dir()?);
    let end = EndReason::from_name(&rd.string()?)?;
    let nf = rd.varint()?;
    let files = (0..nf).map(|_| rd.string()).collect::<Option<Vec<_>>>()?;
    Some(FlowRecord {
        vlans,
        client,
        server,
        protocol,
        client_port,
        server_port,
        icmp_type,
        icmp_code,
        first_ns,
        last_ns,
        to_server,
        to_client,
        end,
        node,
        stream,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_as_written() {
        let r = FlowRecord {
            vlans: vec![10, 20],
            client: IpAddr16::v4([10, 0, 0, 1]),
            server: IpAddr16::v4([10, 0, 0, 2]),
            protocol: 6,
            client_port: 40000,
            server_port: 443,
            first_ns: 1_700_000_000_000_000_001,
            last_ns: 1_700_000_001_000_000_000,
            to_server: Direction { packets: 3, frame_bytes: 300, ip_bytes: 258, tcp_flags: 0x1b },
            end: EndReason::Fin,
            node: "n1".into(),
            stream: 2,
            files: vec!["stream-002/a.pcap".into()],
            ..FlowRecord::default()
        };
        let mut b = Vec::new();
        write_row(&mut b, "id/x", 19675, &r);
        let mut rd = Reader { b: &b, at: 0 };
        assert_eq!(rd.string().as_deref(), Some("id/x"));
        assert_eq!(rd.u16(), Some(19675));
        assert_eq!(read_row(&mut rd), Some(r));
        assert_eq!(rd.at, b.len());
    }

    #[test]
    fn flows_sql_makes_the_columns_checked() {
        assert_eq!(CREATE_TABLE.matches(MADE).count(), 1, "one statement names the table");
        let body = &CREATE_TABLE[CREATE_TABLE.find(MADE).unwrap()..];
        let cols: Vec<(&str, &str)> = body
            .lines()
            .filter_map(|l| l.trim().trim_end_matches(',').split_once(' '))
            .filter(|(n, _)| COLUMNS.iter().any(|c| c.0 == *n))
            .collect();
        assert_eq!(cols, COLUMNS.to_vec());
    }

    #[test]
    fn urls_name_a_host_a_database_and_a_table() {
        let t = Target::parse("http://127.0.0.1:18123/db1", None).unwrap();
        assert_eq!((t.endpoint.port, t.database.as_str(), t.table.as_str()), (18123, "db1", "flows"));
        let t = Target::parse("http://u:p@h/db/t2", Some(("x".into(), "y".into()))).unwrap();
        assert_eq!((t.endpoint.auth, t.endpoint.port, t.table.as_str()), (Some(("u".into(), "p".into())), 8123, "t2"));
        assert!(Target::parse("ftp://h/db", None).is_err());
        assert!(Target::parse("http://h/d;b", None).is_err());
    }

    #[test]
    fn a_net_is_a_range_of_addresses() {
        let e = Expr::parse("net 10.1.0.0/16").unwrap();
        let w = where_clause(&e, Some(5), None);
        assert!(
            w.contains("00000000000000000000ffff0a010000") && w.contains("00000000000000000000ffff0a01ffff"),
            "{w}"
        );
        assert!(w.ends_with("AND last_ns >= 5"));
    }

    #[test]
    fn the_hosts_table_is_asked_only_when_every_match_has_a_named_host() {
        let hosts = |s: &str| hosts_of(&Expr::parse(s).unwrap()).map(|h| h.len());
        assert_eq!(hosts("host 10.0.0.7"), Some(1));
        assert_eq!(hosts("host 10.0.0.7 and port 53"), Some(1));
        assert_eq!(hosts("port 53 and (host 10.0.0.7 or host 10.0.0.8)"), Some(2));
        assert_eq!(hosts("host 10.0.0.7 or port 53"), None);
        assert_eq!(hosts("not host 10.0.0.7"), None);
        assert_eq!(hosts("net 10.0.0.0/8"), None);
    }

    #[test]
    fn flows_hosts_sql_names_the_urls_tables() {
        let t = Target::parse("http://h/db1/t2", None).unwrap();
        let s = t.hosts_statements();
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].starts_with("CREATE TABLE IF NOT EXISTS `db1`.`t2_hosts`"), "{}", s[0]);
        assert!(
            s[1].contains("`db1`.`t2_hosts_mv` TO `db1`.`t2_hosts`") && s[1].contains("FROM `db1`.`t2` ARRAY JOIN")
        );
        assert!(!s.iter().any(|x| x.contains("wirevault.") || x.contains("--")), "{s:?}");
    }
}
