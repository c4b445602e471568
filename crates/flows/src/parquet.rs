//! Flow records as Parquet files: `STORE/flows/<the pcap file's path>.parquet`, one per closed
//! pcap file, holding the records that ended while it was the stream's open file. The columns
//! are in docs/flows.md; [`schema`] is their one definition.

use crate::record::{Direction, EndReason, FlowRecord, IpAddr16};
use arrow_array::builder::{FixedSizeBinaryBuilder, ListBuilder, StringBuilder, UInt16Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{
    ArrayRef, RecordBatch, StringArray, TimestampNanosecondArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::sync::Arc;

/// The flow file of the pcap file `file` (its path relative to the store, as the catalog
/// names it): `flows/<file>.parquet`.
pub fn rel_of(file: &str) -> String {
    wv_store::layout::flows_rel(file)
}

/// Errors of the Parquet files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("{0}")]
    Schema(String),
}

/// The columns of a flow file.
pub fn schema() -> SchemaRef {
    let u8c = |n: &str| Field::new(n, DataType::UInt8, false);
    let u16c = |n: &str| Field::new(n, DataType::UInt16, false);
    let u64c = |n: &str| Field::new(n, DataType::UInt64, false);
    let time = |n: &str| Field::new(n, DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), false);
    let mut f = vec![
        Field::new_list("vlans", Field::new_list_field(DataType::UInt16, true), false),
        u8c("ip_version"),
        Field::new("client", DataType::FixedSizeBinary(16), false),
        Field::new("server", DataType::FixedSizeBinary(16), false),
        u8c("protocol"),
        u16c("client_port"),
        u16c("server_port"),
        u8c("icmp_type"),
        u8c("icmp_code"),
        u64c("first_ns"),
        u64c("last_ns"),
        time("first_time"),
        time("last_time"),
    ];
    for side in ["to_server", "to_client"] {
        f.push(u64c(&format!("{side}_packets")));
        f.push(u64c(&format!("{side}_bytes")));
        f.push(u64c(&format!("{side}_ip_bytes")));
        f.push(u16c(&format!("{side}_tcp_flags")));
    }
    f.extend([
        Field::new("end_reason", DataType::Utf8, false),
        Field::new("node", DataType::Utf8, false),
        Field::new("stream", DataType::UInt32, false),
        Field::new_list("files", Field::new_list_field(DataType::Utf8, true), false),
    ]);
    Arc::new(Schema::new(f))
}

/// The records as one Arrow batch of [`schema`].
pub fn to_batch(records: &[FlowRecord]) -> Result<RecordBatch, Error> {
    let n = records.len();
    let col =
        |f: &dyn Fn(&FlowRecord) -> u64| -> ArrayRef { Arc::new(UInt64Array::from_iter_values(records.iter().map(f))) };
    let col8 =
        |f: &dyn Fn(&FlowRecord) -> u8| -> ArrayRef { Arc::new(UInt8Array::from_iter_values(records.iter().map(f))) };
    let col16 =
        |f: &dyn Fn(&FlowRecord) -> u16| -> ArrayRef { Arc::new(UInt16Array::from_iter_values(records.iter().map(f))) };
    let time = |f: &dyn Fn(&FlowRecord) -> u64| -> ArrayRef {
        Arc::new(
            TimestampNanosecondArray::from_iter_values(records.iter().map(|r| f(r).min(i64::MAX as u64) as i64))
                .with_timezone("UTC"),
        )
    };
    let addr = |f: &dyn Fn(&FlowRecord) -> IpAddr16| -> Result<ArrayRef, Error> {
        let mut b = FixedSizeBinaryBuilder::with_capacity(n, 16);
        for r in records {
            b.append_value(f(r).0)?;
        }
        Ok(Arc::new(b.finish()))
    };
    let mut vlans = ListBuilder::new(UInt16Builder::new());
    let mut files = ListBuilder::new(StringBuilder::new());
    for r in records {
        vlans.values().append_slice(&r.vlans);
        vlans.append(true);
        for f in &r.files {
            files.values().append_value(f);
        }
        files.append(true);
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(vlans.finish()),
        col8(&|r| r.client.version()),
        addr(&|r| r.client)?,
        addr(&|r| r.server)?,
        col8(&|r| r.protocol),
        col16(&|r| r.client_port),
        col16(&|r| r.server_port),
        col8(&|r| r.icmp_type),
        col8(&|r| r.icmp_code),
        col(&|r| r.first_ns),
        col(&|r| r.last_ns),
        time(&|r| r.first_ns),
        time(&|r| r.last_ns),
    ];
    for side in [|r: &FlowRecord| r.to_server, |r: &FlowRecord| r.to_client] {
        cols.push(col(&|r| side(r).packets));
        cols.push(col(&|r| side(r).frame_bytes));
        cols.push(col(&|r| side(r).ip_bytes));
        cols.push(col16(&|r| side(r).tcp_flags));
    }
    cols.push(Arc::new(StringArray::from_iter_values(records.iter().map(|r| r.end.name()))));
    cols.push(Arc::new(StringArray::from_iter_values(records.iter().map(|r| r.node.as_str()))));
    cols.push(Arc::new(UInt32Array::from_iter_values(records.iter().map(|r| r.stream))));
    cols.push(Arc::new(files.finish()));
    // The builders' list items are nullable like the schema's; the lists themselves never null.
    Ok(RecordBatch::try_new(schema(), cols)?)
}

/// False-positive rate of the address columns' bloom filters: about 1.2 bytes per record
/// and column, so that a host's lookup reads only the files that may hold it.
const BLOOM_FPP: f64 = 0.01;

/// Writes `records` as a Parquet file to `out` (Snappy, one row group, bloom filters on
/// `client` and `server` sized to the records).
pub fn write<W: std::io::Write + Send>(out: W, records: &[FlowRecord]) -> Result<(), Error> {
    let mut props = WriterProperties::builder().set_compression(Compression::SNAPPY);
    for c in ["client", "server"] {
        let c = parquet::schema::types::ColumnPath::from(c);
        props = props
            .set_column_bloom_filter_enabled(c.clone(), true)
            .set_column_bloom_filter_fpp(c.clone(), BLOOM_FPP)
            .set_column_bloom_filter_max_ndv(c, records.len().max(1) as u64);
    }
    let props = props.build();
    let batch = to_batch(records)?;
    let mut w = ArrowWriter::try_new(out, batch.schema(), Some(props))?;
    w.write(&batch)?;
    // Closed, then flushed here: a buffered writer dropped unflushed would lose its error.
    w.into_inner()?.flush()?;
    Ok(())
}

/// Writes the flow file of the pcap file `file` beneath the store `dir`, durably and whole
/// (a `.part` renamed, as the store writes its other files), making its directories.
pub fn write_in(dir: &wv_sys::fs::Dir, file: &str, records: &[FlowRecord]) -> Result<String, Error> {
    let rel = rel_of(file);
    let mut at = String::new();
    for part in rel.split('/').collect::<Vec<_>>().split_last().map_or(&[][..], |(_, d)| d) {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(part);
        dir.mkdir(&at)?;
    }
    dir.replace(&rel, |f| write(std::io::BufWriter::new(f), records))?;
    Ok(rel)
}

/// A flow file opened for reading: its footer parsed once, for the pruning and the read.
type Reader = ParquetRecordBatchReaderBuilder<std::fs::File>;

fn open(file: std::fs::File) -> Result<Reader, Error> {
    use parquet::arrow::arrow_reader::ArrowReaderOptions;
    use parquet::file::metadata::PageIndexPolicy;
    Ok(ParquetRecordBatchReaderBuilder::try_new_with_options(
        file,
        ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional),
    )?)
}

/// The row groups of a flow file its footer and bloom filters do not rule out: those that
/// may hold a record in `from_ns..to_ns` (by their `first_ns` and `last_ns` statistics) with
/// one of `hosts` as client or server (by their bloom filters). A group they cannot tell of
/// (no statistics, no bloom filter) is kept.
fn groups_that_may_hold(
    r: &Reader,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
    hosts: Option<&[IpAddr16]>,
) -> Vec<usize> {
    use parquet::file::statistics::Statistics;
    let meta = r.metadata();
    let col = |name: &str| meta.file_metadata().schema_descr().columns().iter().position(|c| c.name() == name);
    let (first, last, client, server) = (col("first_ns"), col("last_ns"), col("client"), col("server"));
    let may = |g: usize| {
        let rg = meta.row_group(g);
        let stat = |c: Option<usize>, max: bool| match c.and_then(|c| rg.column(c).statistics()) {
            Some(Statistics::Int64(s)) => if max { s.max_opt() } else { s.min_opt() }.map(|v| *v as u64),
            _ => None,
        };
        let before = to_ns.zip(stat(first, false)).is_some_and(|(to, min_first)| min_first >= to);
        let after = from_ns.zip(stat(last, true)).is_some_and(|(from, max_last)| max_last < from);
        if before || after || rg.num_rows() == 0 {
            return false;
        }
        let Some(hosts) = hosts else { return true };
        let has = |c: Option<usize>, a: &IpAddr16| {
            c.and_then(|c| r.get_row_group_column_bloom_filter(g, c).ok().flatten()).is_none_or(|b| b.check(&a.0[..]))
        };
        hosts.iter().any(|a| has(client, a) || has(server, a))
    };
    (0..meta.num_row_groups()).filter(|&g| may(g)).collect()
}

/// Reads a flow file's records.
pub fn read(file: std::fs::File) -> Result<Vec<FlowRecord>, Error> {
    read_matching(file, None, None, None)
}

/// Reads what a search of `from_ns..to_ns` for flows with one of `hosts` as client or server
/// needs of a flow file: the records of its row groups that the footer and bloom filters do
/// not rule out (with `hosts`, of those only the records that have one). The caller checks
/// each record it gets. The `client` and `server` columns are decoded first and the other
/// columns only for the rows that have a host (pages with none are not read: the page index):
/// a host's few records of a file of 500,000 decode in a fraction of the whole file's time.
pub fn read_matching(
    file: std::fs::File,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
    hosts: Option<&[IpAddr16]>,
) -> Result<Vec<FlowRecord>, Error> {
    use parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter};
    let mut out = Vec::new();
    let mut b = open(file)?;
    let groups = groups_that_may_hold(&b, from_ns, to_ns, hosts);
    if groups.is_empty() {
        return Ok(out);
    }
    b = b.with_row_groups(groups);
    if let Some(hosts) = hosts {
        let leaves = b.parquet_schema().columns().iter().enumerate();
        let cols: Vec<usize> =
            leaves.filter(|(_, c)| matches!(c.name(), "client" | "server")).map(|(i, _)| i).collect();
        if cols.len() != 2 {
            return Err(Error::Schema("no client and server columns".into()));
        }
        let mask = parquet::arrow::ProjectionMask::leaves(b.parquet_schema(), cols);
        let hosts: Vec<[u8; 16]> = hosts.iter().map(|h| h.0).collect();
        let pred = ArrowPredicateFn::new(mask, move |batch: RecordBatch| {
            let (c, s) = (batch.column(0).as_fixed_size_binary(), batch.column(1).as_fixed_size_binary());
            let has = |a: &[u8]| hosts.iter().any(|h| h[..] == *a);
            Ok((0..batch.num_rows()).map(|i| Some(has(c.value(i)) || has(s.value(i)))).collect())
        });
        b = b.with_row_filter(RowFilter::new(vec![Box::new(pred)]));
    }
    for batch in b.build()? {
        from_batch(&batch?, &mut out)?;
    }
    Ok(out)
}

fn from_batch(b: &RecordBatch, out: &mut Vec<FlowRecord>) -> Result<(), Error> {
    let get = |n: &str| b.column_by_name(n).ok_or_else(|| Error::Schema(format!("no column {n}")));
    let check = |n: &str, t: &DataType| -> Result<(), Error> {
        let c = get(n)?;
        if c.data_type() == t {
            Ok(())
        } else {
            Err(Error::Schema(format!("column {n} is {}, not {t}", c.data_type())))
        }
    };
    for (n, t) in [("first_ns", DataType::UInt64), ("client", DataType::FixedSizeBinary(16))] {
        check(n, &t)?;
    }
    let u64s = |n: &str| get(n).and_then(|c| c.as_primitive_opt::<UInt64Type>().cloned().ok_or_else(|| bad(n)));
    let u16s = |n: &str| get(n).and_then(|c| c.as_primitive_opt::<UInt16Type>().cloned().ok_or_else(|| bad(n)));
    let u8s = |n: &str| get(n).and_then(|c| c.as_primitive_opt::<UInt8Type>().cloned().ok_or_else(|| bad(n)));
    let strs = |n: &str| get(n).and_then(|c| c.as_string_opt::<i32>().cloned().ok_or_else(|| bad(n)));
    let (client, server) =
        (get("client")?.as_fixed_size_binary().clone(), get("server")?.as_fixed_size_binary().clone());
    let vlans = get("vlans")?.as_list_opt::<i32>().cloned().ok_or_else(|| bad("vlans"))?;
    let files = get("files")?.as_list_opt::<i32>().cloned().ok_or_else(|| bad("files"))?;
    let (protocol, icmp_type, icmp_code) = (u8s("protocol")?, u8s("icmp_type")?, u8s("icmp_code")?);
    let (client_port, server_port) = (u16s("client_port")?, u16s("server_port")?);
    let (first_ns, last_ns) = (u64s("first_ns")?, u64s("last_ns")?);
    let dir = |side: &str| -> Result<_, Error> {
        Ok((
            u64s(&format!("{side}_packets"))?,
            u64s(&format!("{side}_bytes"))?,
            u64s(&format!("{side}_ip_bytes"))?,
            u16s(&format!("{side}_tcp_flags"))?,
        ))
    };
    let (ts, tc) = (dir("to_server")?, dir("to_client")?);
    let (end, node) = (strs("end_reason")?, strs("node")?);
    let stream = get("stream")?.as_primitive_opt::<UInt32Type>().cloned().ok_or_else(|| bad("stream"))?;
    let addr = |a: &[u8]| IpAddr16(a.try_into().unwrap_or([0; 16]));
    for i in 0..b.num_rows() {
        let d = |t: &(UInt64Array, UInt64Array, UInt64Array, UInt16Array)| Direction {
            packets: t.0.value(i),
            frame_bytes: t.1.value(i),
            ip_bytes: t.2.value(i),
            tcp_flags: t.3.value(i),
        };
        let v = vlans.value(i);
        let f = files.value(i);
        out.push(FlowRecord {
            vlans: v.as_primitive_opt::<UInt16Type>().map(|a| a.values().to_vec()).unwrap_or_default(),
            client: addr(client.value(i)),
            server: addr(server.value(i)),
            protocol: protocol.value(i),
            client_port: client_port.value(i),
            server_port: server_port.value(i),
            icmp_type: icmp_type.value(i),
            icmp_code: icmp_code.value(i),
            first_ns: first_ns.value(i),
            last_ns: last_ns.value(i),
            to_server: d(&ts),
            to_client: d(&tc),
            end: EndReason::from_name(end.value(i)).ok_or_else(|| bad("end_reason"))?,
            node: node.value(i).to_string(),
            stream: stream.value(i),
            files: f
                .as_string_opt::<i32>()
                .map(|a| a.iter().map(|s| s.unwrap_or("").to_string()).collect())
                .unwrap_or_default(),
        });
    }
    Ok(())
}

fn bad(n: &str) -> Error {
    Error::Schema(format!("column {n} has another type than docs/flows.md gives it"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_footer_and_bloom_filters_rule_a_file_out_by_time_and_host() {
        let recs = sample();
        let mut bytes = Vec::new();
        write(&mut bytes, &recs).unwrap();
        let dir = std::env::temp_dir().join(format!("wv-flows-bloom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.parquet");
        std::fs::write(&path, &bytes).unwrap();
        let may = |from, to, hosts: Option<&[IpAddr16]>| {
            !groups_that_may_hold(&open(std::fs::File::open(&path).unwrap()).unwrap(), from, to, hosts).is_empty()
        };
        let (first, last) =
            (recs.iter().map(|r| r.first_ns).min().unwrap(), recs.iter().map(|r| r.last_ns).max().unwrap());
        assert!(may(None, None, None));
        assert!(may(Some(last), Some(last + 1), None), "the last record's last packet is in");
        assert!(!may(Some(last + 1), None, None), "after the file");
        assert!(!may(None, Some(first), None), "before the file (to is not included)");
        assert!(may(None, Some(first + 1), None));
        let (client, server) = (recs[0].client, recs[0].server);
        assert!(may(None, None, Some(&[client])) && may(None, None, Some(&[server])));
        // A thousand absent addresses: at 1% false positives, most are ruled out.
        let out = (0..1000u32)
            .filter(|i| !may(None, None, Some(&[IpAddr16::v4([192, 168, (i >> 8) as u8, *i as u8])])))
            .count();
        assert!(out > 950, "{out} of 1000 absent hosts ruled out");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    pub(crate) fn sample() -> Vec<FlowRecord> {
        let d = |p| Direction { packets: p, frame_bytes: p * 100, ip_bytes: p * 86, tcp_flags: 0x12 };
        vec![
            FlowRecord {
                vlans: vec![10, 20],
                client: IpAddr16::v4([10, 0, 0, 1]),
                server: IpAddr16::v4([10, 0, 0, 2]),
                protocol: 6,
                client_port: 40000,
                server_port: 443,
                icmp_type: 0,
                icmp_code: 0,
                first_ns: 1_700_000_000_000_000_001,
                last_ns: 1_700_000_001_000_000_000,
                to_server: d(3),
                to_client: d(4),
                end: EndReason::Fin,
                node: "n1".into(),
                stream: 2,
                files: vec!["stream-002/a.pcap".into(), "stream-002/b.pcap".into()],
            },
            FlowRecord {
                vlans: vec![],
                client: IpAddr16([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
                server: IpAddr16([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]),
                protocol: 58,
                icmp_type: 128,
                end: EndReason::Stop,
                files: vec![],
                ..FlowRecord::default()
            },
        ]
    }

    #[test]
    fn a_hosts_records_are_read_alone() {
        // Enough records for several batches and pages, one host in a few of them.
        let base = sample().remove(0);
        let (host, other) = (IpAddr16::v4([10, 9, 9, 9]), IpAddr16::v4([10, 8, 8, 8]));
        let recs: Vec<FlowRecord> = (0..50_000u32)
            .map(|i| {
                let mut r = base.clone();
                r.client = IpAddr16::v4([10, 1, (i >> 8) as u8, i as u8]);
                r.first_ns += u64::from(i);
                match i % 9_973 {
                    17 => r.client = host,
                    4_000 => r.server = host,
                    5_000 => r.server = other,
                    _ => {}
                }
                r
            })
            .collect();
        let p = std::env::temp_dir().join(format!("wv-flows-host-{}.parquet", std::process::id()));
        write(std::io::BufWriter::new(std::fs::File::create(&p).unwrap()), &recs).unwrap();
        let read =
            |hosts: Option<&[IpAddr16]>| read_matching(std::fs::File::open(&p).unwrap(), None, None, hosts).unwrap();
        let with = |hs: &[IpAddr16]| -> Vec<FlowRecord> {
            recs.iter().filter(|r| hs.contains(&r.client) || hs.contains(&r.server)).cloned().collect()
        };
        assert_eq!(read(Some(&[host])), with(&[host]));
        assert_eq!(read(Some(&[host])).len(), 11, "as client 6 times, as server 5");
        assert_eq!(read(Some(&[host, other])), with(&[host, other]));
        assert!(read(Some(&[IpAddr16::v4([192, 0, 2, 1])])).is_empty());
        assert_eq!(read(None), recs);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn records_round_trip() {
        let recs = sample();
        let mut buf = Vec::new();
        write(&mut buf, &recs).unwrap();
        let p = std::env::temp_dir().join(format!("wv-flows-rt-{}.parquet", std::process::id()));
        std::fs::write(&p, &buf).unwrap();
        let back = read(std::fs::File::open(&p).unwrap()).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(back, recs);
    }

    #[test]
    fn an_empty_file_reads_as_no_records() {
        let mut buf = Vec::new();
        write(&mut buf, &[]).unwrap();
        let p = std::env::temp_dir().join(format!("wv-flows-empty-{}.parquet", std::process::id()));
        std::fs::write(&p, &buf).unwrap();
        assert!(read(std::fs::File::open(&p).unwrap()).unwrap().is_empty());
        std::fs::remove_file(&p).unwrap();
    }
}
