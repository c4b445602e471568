//! `/metrics`: the Prometheus exposition, with the `prometheus-client`
//! crate and no global registry. The recording's counters are read from
//! the snapshot the recorder published last (the one in `stats.json`), per
//! stream with a `stream` label, drops with a `cause` label; the store's
//! size and time horizon from its catalog; the API's own requests and
//! query durations are counted here.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// A counter family of the recording: name, help, the value of one stream.
type Field = (&'static str, &'static str, fn(&crate::Counters) -> u64);

/// The API's own metrics, updated as requests are served.
pub(crate) struct ApiMetrics {
    queries: Family<Labels, Counter>,
    durations: Family<Labels, Histogram>,
    requests: Family<Labels, Counter>,
}

impl ApiMetrics {
    pub fn new() -> ApiMetrics {
        ApiMetrics {
            queries: Family::default(),
            durations: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 4.0, 10))),
            requests: Family::default(),
        }
    }

    pub fn query_done(&self, endpoint: &'static str, took: Duration) {
        let l = vec![("endpoint", endpoint.to_string())];
        self.queries.get_or_create(&l).inc();
        self.durations.get_or_create(&l).observe(took.as_secs_f64());
    }

    pub fn request(&self, code: u16) {
        self.requests.get_or_create(&vec![("code", code.to_string())]).inc();
    }
}

/// What one scrape shows besides the API's metrics.
#[derive(Debug, Default)]
pub(crate) struct Scrape {
    pub recording: Option<Arc<crate::Recording>>,
    /// Bytes and files of the catalog (`None`: the store cannot be read).
    pub store: Option<(u64, u64)>,
    pub oldest_ns: Option<u64>,
    pub newest_ns: Option<u64>,
    pub volume: Option<(u64, u64)>,
    pub started_unix: f64,
}

/// The text exposition: OpenMetrics (what Prometheus asks for first), or
/// with `classic` Prometheus' own text format 0.0.4 (what `promtool check
/// metrics`, curl and older scrapers read).
pub(crate) fn render(api: &ApiMetrics, scrape: Box<dyn Collector>, classic: bool) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::with_prefix("wirevault");
    reg.register("api_queries", "Queries the API ran (pcap, count, histogram)", api.queries.clone());
    reg.register_with_unit(
        "api_query_duration",
        "Time from a query's start to its last byte",
        Unit::Seconds,
        api.durations.clone(),
    );
    reg.register("http_requests", "HTTP requests answered, by status code", api.requests.clone());
    reg.register_collector(scrape);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg)?;
    Ok(if classic { to_classic(&out) } else { out })
}

/// OpenMetrics text to Prometheus text 0.0.4: a counter's family is named
/// as its samples (`X_total`) in its HELP and TYPE lines, and the UNIT and
/// EOF lines, which 0.0.4 does not have, go.
fn to_classic(open: &str) -> String {
    let lines: Vec<&str> = open.lines().collect();
    let counters: std::collections::HashSet<&str> =
        lines.iter().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(open.len() + 64);
    for l in lines {
        if l.starts_with("# UNIT ") || l == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = l.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters.contains(name).then(|| format!("{p}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(l));
        out.push('\n');
    }
    out
}

/// Encodes one family: its descriptor, then one sample per label set.
fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: Vec<(Labels, M)>,
) -> Result<(), std::fmt::Error> {
    let Some(first) = samples.first() else { return Ok(()) };
    let mut fam = enc.encode_descriptor(name, help, unit, first.1.metric_type())?;
    if samples.len() == 1 && first.0.is_empty() {
        return first.1.encode(fam);
    }
    for (labels, m) in &samples {
        m.encode(fam.encode_family(labels)?)?;
    }
    Ok(())
}

/// A family of one unlabeled gauge.
fn gauge<N>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    v: N,
) -> Result<(), std::fmt::Error>
where
    ConstGauge<N>: EncodeMetric,
{
    family(enc, name, help, unit, vec![(vec![], ConstGauge::new(v))])
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

impl Collector for crate::fleet::FleetScrape {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let e = &mut enc;
        let node = |n: &String| vec![("node", n.clone())];
        family(
            e,
            "fleet_node_up",
            "1 when the node answered its status at this scrape, 0 when not (/api/v1/fleet says why)",
            None,
            self.up.iter().map(|(n, up)| (node(n), ConstGauge::new(i64::from(*up)))).collect(),
        )?;
        let answers = self.answered.iter().flat_map(|(n, whole, left)| {
            let l = |outcome: &str| vec![("node", n.clone()), ("outcome", outcome.to_string())];
            [(l("whole"), counter(*whole)), (l("left_out"), counter(*left))]
        });
        family(
            e,
            "fleet_node_answers",
            "Fleet queries and counts the node gave its whole answer to, or was left out of (in part or whole)",
            None,
            answers.collect(),
        )
    }
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let e = &mut enc;
        family(
            e,
            "build_info",
            "The wirevault version serving",
            None,
            vec![(vec![("version", env!("CARGO_PKG_VERSION").to_string())], ConstGauge::new(1i64))],
        )?;
        gauge(e, "start_time", "When the server started, Unix time", Some(&Unit::Seconds), self.started_unix)?;
        gauge(
            e,
            "recording",
            "1 while this process records into the store",
            None,
            i64::from(self.recording.as_ref().is_some_and(|r| r.state == crate::RecordingState::Capturing)),
        )?;
        gauge(
            e,
            "store_up",
            "1 when the store's catalog could be read, 0 when not (deleted, moved, unreadable; the API says why)",
            None,
            i64::from(self.store.is_some()),
        )?;
        if let Some((bytes, files)) = self.store {
            gauge(e, "store_size", "Bytes of the catalogued capture files", Some(&Unit::Bytes), bytes as i64)?;
            gauge(e, "store_files", "Catalogued capture files", None, files as i64)?;
        }
        if let Some((free, total)) = self.volume {
            gauge(
                e,
                "volume_free",
                "Free bytes of the file systems the store writes to (its directory and extra volumes)",
                Some(&Unit::Bytes),
                free as i64,
            )?;
            gauge(
                e,
                "volume_size",
                "Size of the file systems the store writes to (its directory and extra volumes)",
                Some(&Unit::Bytes),
                total as i64,
            )?;
        }
        let secs = |ns: u64| ns as f64 / 1e9;
        if let Some(ns) = self.oldest_ns {
            gauge(
                e,
                "oldest_packet_timestamp",
                "Time of the oldest packet on disk, Unix time",
                Some(&Unit::Seconds),
                secs(ns),
            )?;
        }
        if let Some(ns) = self.newest_ns {
            gauge(
                e,
                "newest_packet_timestamp",
                "Time of the newest packet on disk (files being written included), Unix time",
                Some(&Unit::Seconds),
                secs(ns),
            )?;
        }
        let Some(r) = &self.recording else { return Ok(()) };
        let per = |f: fn(&crate::Counters) -> u64| -> Vec<(Labels, ConstCounter<u64>)> {
            r.streams.iter().enumerate().map(|(i, c)| (vec![("stream", i.to_string())], counter(f(c)))).collect()
        };
        let packets: [Field; 5] = [
            (
                "packets_received",
                "Packets the source offered (written + filtered + deduplicated + cut + dropped)",
                |c| c.received,
            ),
            ("packets_written", "Packets written to capture files", |c| c.written),
            ("packets_filtered", "Packets the capture filter rejected", |c| c.filtered),
            ("packets_deduplicated", "Packets not stored as duplicates (--dedup)", |c| c.deduplicated),
            ("packets_cut", "Packets not stored past a connection's --flow-cutoff", |c| c.cut),
        ];
        for (name, help, f) in packets {
            family(e, name, help, None, per(f))?;
        }
        let drops: Vec<(Labels, ConstCounter<u64>)> = r
            .streams
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                c.dropped
                    .iter()
                    .map(move |(cause, n)| (vec![("stream", i.to_string()), ("cause", cause.clone())], counter(*n)))
            })
            .collect();
        family(e, "packets_dropped", "Packets lost, by cause", None, drops)?;
        let bytes: [Field; 4] = [
            ("received", "Bytes of the received frames as on the wire", |c| c.wire_bytes),
            ("written", "Bytes written to capture files", |c| c.file_bytes),
            ("disk_written", "Bytes written to disk (with alignment padding)", |c| c.disk_bytes),
            ("retention_deleted", "Bytes retention deleted to stay within --max-size", |c| c.bytes_deleted),
        ];
        for (name, help, f) in bytes {
            family(e, name, help, Some(&Unit::Bytes), per(f))?;
        }
        family(e, "files_written", "Capture files closed", None, per(|c| c.files))?;
        family(e, "files_deleted", "Capture files retention deleted", None, per(|c| c.files_deleted))?;
        family(
            e,
            "flows_evicted",
            "Flows --flow-cutoff forgot because its table was full",
            None,
            per(|c| c.flows_evicted),
        )?;
        family(e, "flows_written", "Flow records written to the store's flow files", None, per(|c| c.flows_written))?;
        family(
            e,
            "flow_records_evicted",
            "Flow records ended because the flow table was full",
            None,
            per(|c| c.flow_records_evicted),
        )?;
        family(
            e,
            "ipfix_records_dropped",
            "Flow records not exported because an IPFIX exporter's queue was full",
            None,
            per(|c| c.ipfix_records_dropped),
        )?;
        let pending: Vec<(Labels, ConstGauge<i64>)> = r
            .streams
            .iter()
            .enumerate()
            .map(|(i, c)| (vec![("stream", i.to_string())], ConstGauge::new(c.pending as i64)))
            .collect();
        family(e, "packets_pending", "Packets in the arena, not written yet", None, pending)?;
        let fill: Vec<(Labels, ConstGauge<f64>)> = r
            .streams
            .iter()
            .enumerate()
            .map(|(i, c)| (vec![("stream", i.to_string())], ConstGauge::new(c.arena_fill)))
            .collect();
        family(e, "arena_fill_ratio", "Fill of the stream's arena, 0 to 1", None, fill)?;
        let cpu: Vec<(Labels, ConstCounter<f64>)> = r
            .streams
            .iter()
            .enumerate()
            .map(|(i, c)| (vec![("stream", i.to_string())], ConstCounter::new(c.capture_cpu_s)))
            .collect();
        family(e, "capture_cpu", "CPU time of the stream's capture thread", Some(&Unit::Seconds), cpu)?;
        if let Some(c) = &r.clickhouse {
            let one = |v: u64| vec![(Labels::new(), counter(v))];
            family(
                e,
                "clickhouse_batches_sent",
                "Flow files ClickHouse has (sent, or found there)",
                None,
                one(c.clickhouse_batches_sent),
            )?;
            family(e, "clickhouse_records_sent", "Flow records ClickHouse has", None, one(c.clickhouse_records_sent))?;
            gauge(
                e,
                "clickhouse_batches_pending",
                "Flow files waiting in the store to be sent to ClickHouse",
                None,
                c.clickhouse_batches_pending as i64,
            )?;
            gauge(
                e,
                "clickhouse_records_pending",
                "Flow records waiting in the store to be sent to ClickHouse",
                None,
                c.clickhouse_records_pending as i64,
            )?;
            family(
                e,
                "clickhouse_batches_lost",
                "Flow files retention deleted before they were sent to ClickHouse",
                None,
                one(c.clickhouse_batches_lost),
            )?;
            family(
                e,
                "clickhouse_records_lost",
                "Flow records retention deleted before they were sent to ClickHouse",
                None,
                one(c.clickhouse_records_lost),
            )?;
            family(
                e,
                "clickhouse_failures",
                "Tries to send flow records to ClickHouse that failed",
                None,
                one(c.clickhouse_failures),
            )?;
        }
        if let Some(b) = r.budget_bytes {
            gauge(e, "budget", "The store's byte budget (--max-size)", Some(&Unit::Bytes), b as i64)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
    }

    #[test]
    fn an_unreadable_store_and_no_recording_are_said_as_zeros() {
        let out = render(&ApiMetrics::new(), Box::new(Scrape::default()), false).unwrap();
        let l = lines(&out);
        assert!(l.contains(&"wirevault_store_up 0") && l.contains(&"wirevault_recording 0"), "{out}");
        assert!(!out.contains("wirevault_store_size") && !out.contains("packets_written"), "{out}");
        assert!(out.ends_with("# EOF\n"));
        assert!(!render(&ApiMetrics::new(), Box::new(Scrape::default()), true).unwrap().contains("# EOF"));
    }

    #[test]
    fn the_store_and_its_horizon_are_gauges_in_their_units() {
        let scrape = Scrape {
            store: Some((4096, 3)),
            oldest_ns: Some(1_500_000_000),
            newest_ns: Some(2_000_000_000),
            volume: Some((10, 20)),
            ..Scrape::default()
        };
        let out = render(&ApiMetrics::new(), Box::new(scrape), false).unwrap();
        let l = lines(&out);
        for want in [
            "wirevault_store_up 1",
            "wirevault_store_size_bytes 4096",
            "wirevault_store_files 3",
            "wirevault_oldest_packet_timestamp_seconds 1.5",
            "wirevault_newest_packet_timestamp_seconds 2.0",
            "wirevault_volume_free_bytes 10",
            "wirevault_volume_size_bytes 20",
        ] {
            assert!(l.contains(&want), "{want} not in\n{out}");
        }
    }

    #[test]
    fn requests_count_by_code_and_streams_by_index() {
        let api = ApiMetrics::new();
        api.request(200);
        api.request(200);
        api.request(404);
        let mut rec = crate::Recording { state: crate::RecordingState::Capturing, ..Default::default() };
        rec.streams = vec![
            crate::Counters { written: 5, ..Default::default() },
            crate::Counters { written: 7, ..Default::default() },
        ];
        let out = render(&api, Box::new(Scrape { recording: Some(Arc::new(rec)), ..Scrape::default() }), true).unwrap();
        let l = lines(&out);
        for want in [
            "wirevault_http_requests_total{code=\"200\"} 2",
            "wirevault_http_requests_total{code=\"404\"} 1",
            "# TYPE wirevault_http_requests_total counter",
            "wirevault_packets_written_total{stream=\"0\"} 5",
            "wirevault_packets_written_total{stream=\"1\"} 7",
            "wirevault_recording 1",
        ] {
            assert!(l.contains(&want), "{want} not in\n{out}");
        }
    }

    #[test]
    fn classic_names_counters_as_their_samples_and_drops_unit_and_eof() {
        let open = "# HELP a_bytes Bytes.\n# TYPE a_bytes counter\n# UNIT a_bytes bytes\na_bytes_total 3\n# HELP g A gauge.\n# TYPE g gauge\ng 1\n# EOF\n";
        assert_eq!(
            super::to_classic(open),
            "# HELP a_bytes_total Bytes.\n# TYPE a_bytes_total counter\na_bytes_total 3\n# HELP g A gauge.\n# TYPE g gauge\ng 1\n"
        );
    }
}
