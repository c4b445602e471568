//! The flags of `wirevault record`, as clap parses them: each value through the recorder's
//! own parser (`wv_record::checks`); the rules between them are [`super::plan`]'s.

use std::path::PathBuf;
use std::time::Duration;
use wv_record::checks::{self, MaxSize, Spill};
use wv_record::defaults;
use wv_units::Given;

/// Arguments of `wirevault record`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["interface", "read", "synthetic"])))]
// A later value wins: `--config`'s arguments come first, the command line's after them.
#[command(args_override_self = true)]
pub struct Args {
    /// Store directory (created if missing).
    #[arg(short = 'o', long = "output", value_name = "STORE_DIR", required_unless_present = "tcpdump_write")]
    pub store: Option<PathBuf>,
    /// One more volume (a directory on another disk) for capture files,
    /// besides the store directory; repeat it for more. Stream i writes to
    /// the (i mod n)-th of the n volumes (the store directory first); one
    /// that fails or fills is taken out and its streams move on.
    #[arg(long = "volume", value_name = "DIR", action = clap::ArgAction::Append)]
    pub volumes: Vec<PathBuf>,
    /// Capture live from this network interface (AF_PACKET, TPACKET_V3).
    #[arg(short = 'i', long, value_name = "IF")]
    pub interface: Option<String>,
    /// Live capture path: afpacket (a TPACKET_V3 ring per worker) or xdp (an XDP program and an
    /// AF_XDP socket per receive queue; the frames no longer reach the host's network stack).
    #[arg(long = "source", value_enum, default_value_t = LiveSourceArg::Afpacket, value_name = "PATH")]
    pub capture_source: LiveSourceArg,
    /// Ingest existing pcap/pcapng files, keeping their timestamps (`-` or a pipe: standard input).
    #[arg(short = 'r', long, value_name = "FILE", num_args = 1.., value_terminator = "--")]
    pub read: Vec<PathBuf>,
    /// Generate traffic in memory: e.g. size=64,count=10M or size=imix,duration=10s,rate=1M.
    #[arg(long, value_name = "SPEC")]
    pub synthetic: Option<String>,
    /// Capture workers (fanout members, one stream directory each).
    #[arg(long, default_value_t = defaults::WORKERS, value_name = "N")]
    pub workers: usize,
    /// tcpdump's -w: refused with a sentence (a store is a directory: -o; workers: --workers).
    #[arg(short = 'w', hide = true, value_name = "FILE", allow_hyphen_values = true)]
    pub tcpdump_write: Option<String>,
    /// Bytes stored per packet at most (0: the most, 262144, as tcpdump's -s 0).
    #[arg(short = 's', long, default_value_t = wv_wire::MAX_SNAPLEN, value_name = "BYTES", value_parser = checks::snaplen)]
    pub snaplen: u32,
    // The help of --buffer and --ring-size states their defaults from the numbers the plan uses.
    #[arg(long, value_name = "SIZE", value_parser = checks::buffer, help = format!(
        "Arena between capture and disk, split between the workers; {} [default: {}]",
        wv_units::SIZE_FORMS,
        defaults::buffer_default()
    ))]
    pub buffer: Option<Given<u64>>,
    #[arg(long, value_name = "SIZE", value_parser = checks::ring_size, help = format!(
        "Kernel ring per capture worker (8M..=4G, a multiple of 4M); {} [default: {}]",
        wv_units::SIZE_FORMS,
        defaults::ring_default()
    ))]
    pub ring_size: Option<Given<u64>>,
    #[arg(long, default_value = defaults::BLOCK_SIZE, value_name = "SIZE", value_parser = checks::block_size,
        help = format!("Write block size (multiple of 4K); {}", wv_units::SIZE_FORMS))]
    pub block_size: Given<u64>,
    #[arg(long, default_value = defaults::FILE_SIZE, value_name = "SIZE", value_parser = checks::file_size,
        help = format!("Close a file before it exceeds this size; {}", wv_units::SIZE_FORMS))]
    pub file_size: Given<u64>,
    #[arg(long, value_name = "DURATION", value_parser = checks::file_time,
        help = format!("Also close files at clock-aligned multiples of this duration (e.g. 1m, 1h); {}", wv_units::DURATION_FORMS))]
    pub file_time: Option<Duration>,
    /// File format.
    #[arg(long, value_enum, default_value_t = FormatArg::Pcap)]
    pub format: FormatArg,
    /// With `-i` and `--format pcapng`: write the kernel's capture ring blocks to disk as they
    /// are, rewritten in place into pcapng, without copying frames (the ring, sized like
    /// --buffer unless --ring-size is given, is the only buffer).
    #[arg(long)]
    pub zero_copy: bool,
    /// CPUs to pin to: capture workers take the first N, writers the next N (e.g. 0,1 or 2-5).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Do not put the interface into promiscuous mode.
    #[arg(short = 'p', long)]
    pub no_promisc: bool,
    #[arg(long, value_name = "DURATION", value_parser = checks::duration, help = format!("Stop after this long; {}", wv_units::DURATION_FORMS))]
    pub duration: Option<Duration>,
    #[arg(short = 'c', long, value_name = "N", value_parser = crate::cmd::record_count, help = format!(
        "Stop after storing this many packets (the workers together, as one count); {}",
        wv_units::COUNT_FORMS
    ))]
    pub count: Option<u64>,
    #[arg(long, value_name = "WINDOW", value_parser = checks::dedup, help = format!(
        "Do not store a frame identical (bytes and length) to one stored less than WINDOW before (e.g. 1ms): \
         the second copy a SPAN port makes; WINDOW is {}",
        wv_units::DURATION_FORMS
    ))]
    pub dedup: Option<Duration>,
    #[arg(long, value_name = "BYTES", value_parser = checks::flow_cutoff, help = format!(
        "Store only the frames that start within the first BYTES of each TCP/UDP/SCTP connection, both directions \
         (e.g. 10K, 1M); BYTES is {}",
        wv_units::SIZE_FORMS
    ))]
    pub flow_cutoff: Option<u64>,
    /// Connections --flow-cutoff tracks per worker (at least; 64-byte buckets of 3, a power of two of them); when a bucket is full, its least recently seen one is forgotten.
    #[arg(long, default_value_t = wv_capture::reduce::Cutoff::DEFAULT_ENTRIES, value_name = "N")]
    pub flow_table: usize,
    #[arg(long, default_value = defaults::FLOW_IDLE, value_name = "DURATION", value_parser = checks::flow_idle, help = format!(
        "A connection without packets for this long starts again from zero (--flow-cutoff); {}",
        wv_units::DURATION_FORMS
    ))]
    pub flow_idle: Duration,
    #[arg(long, value_name = "SIZE|PERCENT", value_parser = checks::max_size, help = format!(
        "Store budget: bytes (e.g. 500G) or a share of the volume (e.g. 80%); SIZE is {}",
        wv_units::SIZE_FORMS
    ))]
    pub max_size: Option<Given<MaxSize>>,
    /// At the budget: delete the oldest files (delete) or stop recording (stop, exit code 3).
    #[arg(long, value_enum, default_value_t = OnFullArg::Delete)]
    pub on_full: OnFullArg,
    /// After opening the capture sockets, switch to this user (and its group); the store is chowned to it.
    #[arg(short = 'Z', long, value_name = "USER")]
    pub user: Option<String>,
    /// Write buffered instead of O_DIRECT.
    #[arg(long)]
    pub no_direct: bool,
    /// When the disk falls behind for long: while the arena is more than PERCENT full, writes
    /// go through the page cache (as tcpdump's do) until it is half that (e.g. 50); `off`:
    /// never. Off by default: on a disk that keeps up, a short burst that fills the arena
    /// would move writes to the slower page-cache path
    #[arg(long, value_name = "PERCENT", default_value = "off", value_parser = checks::spill)]
    pub spill_above: Spill,
    /// Do not build index files.
    #[arg(long)]
    pub no_index: bool,
    /// Write flow records (STORE/flows/, one Parquet file per pcap file; docs/flows.md). Off by
    /// default while they cost more than a tenth of a stored packet's CPU.
    #[arg(long)]
    pub flows: bool,
    /// A flow record ends when its flow has had no packet for this long.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = checks::flow_idle_timeout)]
    pub flow_idle_timeout: Duration,
    /// A flow open this long is reported, and goes on in a new record (as NetFlow/IPFIX exporters do).
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = checks::flow_active_timeout)]
    pub flow_active_timeout: Duration,
    /// Flows each stream's flow-record table (--flows) holds at once before it ends the least
    /// recently seen one early (end reason evicted); 195 bytes a flow per stream (12.2 MiB at
    /// the default). Not --flow-table, which is --flow-cutoff's.
    #[arg(long, default_value_t = wv_flows::FlowConfig::default().max_flows, value_name = "N", value_parser = checks::max_flows)]
    pub max_flows: usize,
    /// Also export the flow records as they end (implies --flows): `ipfix=udp://HOST:PORT` or
    /// `ipfix=tcp://HOST:PORT` sends IPFIX (RFC 7011, biflows of RFC 5103) to a collector such
    /// as nfcapd (docs/ipfix.md); repeat for several. Never slows recording: a collector that
    /// is down or slow loses records (counted, ipfix_records_dropped), recording goes on.
    /// `clickhouse=http://HOST:8123/DB[/TABLE]` inserts each flow file into that table (made
    /// from packaging/clickhouse/flows.sql if missing); files wait in the store while
    /// ClickHouse is down and are sent once each (docs/clickhouse.md)
    #[arg(long = "flows-to", value_name = "SINK=URL")]
    pub flows_to: Vec<String>,
    /// The ClickHouse user and password for --flows-to clickhouse=URL: a file with
    /// USER:PASSWORD on its first line (keep it mode 0600).
    #[arg(long, value_name = "FILE")]
    pub clickhouse_auth: Option<std::path::PathBuf>,
    /// Print the status and the summary as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
    /// No status line (the summary is still printed).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Do not print the host's tuning warnings at start-up (see `wirevault tune`).
    #[arg(long)]
    pub no_tune_warnings: bool,
    /// Also write the counters, every second, to this file (always written to STORE/stats.json).
    #[arg(long, value_name = "FILE")]
    pub stats_file: Option<PathBuf>,
    /// The HTTP API, metrics and console over the store being recorded (see `wirevault serve`).
    #[command(flatten, next_help_heading = "HTTP server")]
    pub listen: crate::cmd::serve::Listen,
    /// Read the options from this TOML file (keys: the long option names, and filter); the command line overrides it; SIGHUP re-reads it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What `--config` contributed (set by `cmd::config::with_config`).
    #[arg(skip)]
    pub loaded: Option<crate::cmd::config::Loaded>,
    /// Timestamp source of a live interface: hw (the NIC's clock; refused
    /// when the NIC has none), sw (the kernel's clock), auto (hw when the NIC
    /// has it, else sw).
    #[arg(long, value_enum, default_value_t = TimestampsArg::Auto)]
    pub timestamps: TimestampsArg,
    /// Capture filter, in tcpdump's expression language. Options may come
    /// before or after it; after `--` every word is filter text.
    #[arg(value_name = "FILTER")]
    pub filter: Vec<String>,
}

// The variants carry no doc comments on purpose: clap would print them as a
// per-value list and change `--help`.

/// `--format`: the file format of the capture files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Pcap,
    Pcapng,
}

impl From<FormatArg> for wv_store::Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Pcap => wv_store::Format::Pcap,
            FormatArg::Pcapng => wv_store::Format::Pcapng,
        }
    }
}

/// `--source`: how a live interface is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LiveSourceArg {
    Afpacket,
    Xdp,
}

/// `--timestamps`: where a live capture's packet times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TimestampsArg {
    Hw,
    Sw,
    Auto,
}

/// `--on-full`: what happens when the store reaches `--max-size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnFullArg {
    Delete,
    Stop,
}

impl From<OnFullArg> for wv_store::catalog::OnFull {
    fn from(o: OnFullArg) -> Self {
        match o {
            OnFullArg::Delete => wv_store::catalog::OnFull::DeleteOldest,
            OnFullArg::Stop => wv_store::catalog::OnFull::Stop,
        }
    }
}
