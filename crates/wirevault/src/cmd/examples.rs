//! The examples of every subcommand: one table, rendered into `--help`
//! (`cmd::docs::command`), the man pages' EXAMPLES and, as a checked copy,
//! the README's blocks (`tests/docs.rs`: every example the README shows is
//! one of these, word for word, and every headline one is in it). Each is a
//! command line a user can paste and one sentence saying what it does.
//! The headline ones (a dozen across the subcommands) are what `wirevault
//! --help` and wirevault(1) show, and what a short README keeps.

/// One example: what it does, and the line.
pub struct Example {
    /// One sentence, without the closing colon (the renderers add it).
    pub says: &'static str,
    /// The command line, as typed at a shell prompt.
    pub line: &'static str,
    /// Shown by `wirevault --help`, wirevault(1) and the README.
    pub headline: bool,
}

const fn ex(says: &'static str, line: &'static str) -> Example {
    Example { says, line, headline: false }
}

const fn top(says: &'static str, line: &'static str) -> Example {
    Example { says, line, headline: true }
}

/// Every subcommand's examples, in the order `wirevault --help` lists them.
pub const ALL: &[(&str, &[Example])] = &[
    ("record", RECORD),
    ("index", INDEX),
    ("query", QUERY),
    ("flows", FLOWS),
    ("analyze", ANALYZE),
    ("repair", REPAIR),
    ("disk-bench", DISK_BENCH),
    ("replay", REPLAY),
    ("serve", SERVE),
    ("tune", TUNE),
    ("plan", PLAN),
    ("timestamps", TIMESTAMPS),
];

const FLOWS: &[Example] = &[
    ex(
        "Which connections touched a host in an hour, biggest first",
        "wirevault flows /data/store --from 2026-11-22T02:00:00Z --to 2026-11-22T03:00:00Z --sort bytes 'host 10.0.0.7'",
    ),
    ex("DNS flows of VLAN 10 as CSV", "wirevault flows /data/store --csv 'vlan 10 and udp port 53'"),
    ex("Make the flow files of a store recorded without them", "wirevault flows /data/store --rebuild --json"),
    ex("The same question to ClickHouse", "wirevault flows --clickhouse http://10.0.0.8:8123/wv 'host 10.0.0.7'"),
    ex(
        "The packets of that host's flows from every recorder of a fleet, merged by time",
        "wirevault flows --fleet fleet.toml --packets -w host.pcap 'host 10.0.0.7'",
    ),
];

const RECORD: &[Example] = &[
    top(
        "Record everything eth1 receives into a store: lossless, indexed, 1 GiB pcap files",
        "wirevault record -i eth1 -o /data/store",
    ),
    ex(
        "Record with flow records, also sent to nfcapd (IPFIX) and to a ClickHouse table",
        "wirevault record -i eth1 -o /data/store --flows-to ipfix=udp://10.0.0.9:4739 --flows-to clickhouse=http://10.0.0.8:8123/wv",
    ),
    ex(
        "Live, 2 workers in a fanout group, pinned, only DNS, 1 GiB files and a new file every hour",
        "wirevault record -i eth1 --workers 2 --cpus 2-5 -o /data/store --file-time 1h udp port 53",
    ),
    top(
        "Ingest existing captures (keeps their timestamps), filtered",
        "wirevault record --read old1.pcap old2.pcapng -o /data/store 'host 10.0.0.7'",
    ),
    ex(
        "From a pipe: standard input (-), a FIFO or process substitution",
        "zcat old.pcap.gz | wirevault record -r - -o /data/store",
    ),
    ex(
        "The storage test bench: 10 million 64-byte frames as fast as the store takes them",
        "wirevault record --synthetic size=64,count=10M -o ./bench-store",
    ),
    top(
        "Keep at most 80% of the volume; delete the oldest files first (or --on-full stop)",
        "wirevault record -i eth1 -o /data/store --max-size 80%",
    ),
    ex(
        "Zero-copy: write the kernel's capture ring blocks as pcapng, no frame copied (Ethernet)",
        "wirevault record -i eth1 -o /data/store --format pcapng --zero-copy",
    ),
    ex(
        "A SPAN port that copies both directions: store one copy of each frame, and only the first \
         100 KB of every connection (the Time Machine's cutoff)",
        "wirevault record -i span0 -o /data/store --dedup 1ms --flow-cutoff 100K",
    ),
    ex(
        "AF_XDP instead of AF_PACKET, on a capture-only port (one worker per receive queue)",
        "wirevault record -i span0 --source xdp --workers 4 -o /data/store",
    ),
    ex(
        "A volume that falls behind for long: past a half-full arena, write through the page cache",
        "wirevault record -i eth1 -o /data/store --spill-above 50",
    ),
    ex(
        "Two workers, each writing to its own disk",
        "wirevault record -i eth1 --workers 2 -o /data/a/store --volume /data/b/wv",
    ),
    ex(
        "With the HTTP API, metrics and web console inside the recorder, which then also shows its live counters",
        "wirevault record -i eth1 -o /data/store --listen 127.0.0.1:8080",
    ),
    ex(
        "As the service runs it: the options from a TOML file (the command line still wins)",
        "wirevault record --config /etc/wirevault/wirevault.toml",
    ),
];

const INDEX: &[Example] = &[
    ex("Index one capture file (writes old-capture.pcap.idx)", "wirevault index old-capture.pcap"),
    ex("Index every capture in a directory (any name) and create its catalog.jsonl", "wirevault index /srv/captures/"),
    ex("Then query the directory as a store", "wirevault query /srv/captures/ 'port 53'"),
];

const QUERY: &[Example] = &[
    top(
        "The last ten minutes of one host's HTTPS, read by tcpdump",
        "wirevault query /data/store --from '10m ago' 'host 10.0.0.7 and tcp port 443' | tcpdump -nr -",
    ),
    top(
        "Five minutes of an incident, without SSH, into a file",
        "wirevault query /data/store --from 2026-11-22T10:00:00Z --to 2026-11-22T10:05:00Z -w incident.pcap 'not port 22'",
    ),
    ex("Count the matching packets", "wirevault query /data/store --count 'vlan 10 and udp'"),
    ex("Straight into Wireshark", "wirevault query /data/store 'icmp' | wireshark -k -i -"),
    ex(
        "One answer from the recorders of a fleet file, each node its own pcapng interface",
        "wirevault query --fleet /etc/wirevault/fleet.toml --from '1h ago' --format pcapng -w host.pcapng 'host 10.0.0.7'",
    ),
    ex(
        "Count over a store here and a recorder on loopback, exact across both",
        "wirevault query --store /data/store --store http://127.0.0.1:8080 --count 'tcp port 443'",
    ),
    ex(
        "The fleet lab's three recorders as one (scripts/fleet-lab.sh up prints the file)",
        "wirevault query --fleet /var/tmp/wirevault-fleet-lab/fleet.toml --count 'tcp'",
    ),
];

const ANALYZE: &[Example] = &[
    top(
        "Duplicates, malformed frames, mix, throughput, TCP and RTP of the last hour, as a table",
        "wirevault analyze /data/store --from '1h ago' 'tcp or udp'",
    ),
    ex("Everything, as JSON", "wirevault analyze capture.pcapng --json > report.json"),
    ex(
        "Charts: charts/throughput.svg, sizes.svg and jitter.svg (RTP, then plain UDP streams)",
        "wirevault analyze /data/store --step 100ms --plot charts/",
    ),
    ex("One-way delay from tap A to tap B", "wirevault analyze tap-a.pcap --against tap-b.pcap"),
    ex(
        "At most 5,000 throughput rows (the step doubles to fit)",
        "wirevault analyze month.pcap --json --max-intervals 5000",
    ),
    ex(
        "A SPAN session mirrored over ERSPAN: the mirrored conversations and mix",
        "wirevault analyze /data/erspan-store 'ip proto 47'",
    ),
];

const REPAIR: &[Example] = &[top(
    "After a crash (record also does it when it starts): keep every complete packet, rebuild indexes and catalog",
    "wirevault repair /data/store",
)];

const DISK_BENCH: &[Example] = &[
    top(
        "The paper's method (100 files of 2 GiB) with record's writer, and the buffer 10 GbE needs",
        "wirevault disk-bench /data --rate 9.95gbps --plot disk.svg",
    ),
    ex(
        "About a minute on a 1 GB/s disk (60 x 1 GiB); JSON for plan --bench",
        "wirevault disk-bench /data --quick --rate 10gbps --json > disk.json",
    ),
    ex(
        "As dd conv=fsync does (page cache, one fsync per file), to compare",
        "wirevault disk-bench /data --quick --buffered",
    ),
    ex("A plan as JSON, for disk-bench --rate", "wirevault plan --link 10gbps --mix imix --json > plan.json"),
    ex(
        "The rate a plan asks for (its largest store rate, format and index included)",
        "wirevault disk-bench /data --quick --rate plan.json",
    ),
];

const REPLAY: &[Example] = &[
    top(
        "The last ten minutes' DNS out of eth1, at recorded timing",
        "wirevault replay -i eth1 /data/store --from '10m ago' udp port 53",
    ),
    ex("Files in order, 4 times faster, 3 times over", "wirevault replay -i eth1 a.pcap b.pcapng --speed 4 --loop 3"),
    ex("A million packets at 100,000 packets/s", "wirevault replay -i eth1 /data/store --pps 100000 --limit 1M"),
    ex("At 5 Gb/s, the summary as JSON", "wirevault replay -i eth1 /data/store --rate 5gbps --json"),
    ex("As fast as the interface takes them", "wirevault replay -i eth1 /data/store --topspeed"),
];

const SERVE: &[Example] = &[
    top(
        "Over a store at rest (or one another process records), on loopback",
        "wirevault serve /data/store --listen 127.0.0.1:8080",
    ),
    ex(
        "From a TOML file whose keys are the long option names, and store (flags still win)",
        "wirevault serve --config /etc/wirevault/serve.toml",
    ),
    ex(
        "The API over the fleet lab's three recorders, merged, each node's state said",
        "wirevault serve --fleet /var/tmp/wirevault-fleet-lab/fleet.toml",
    ),
    ex(
        "On the network: TLS, and bearer tokens",
        "wirevault serve /data/store --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem --token-file tokens",
    ),
    ex(
        "On the network: TLS, and client certificates (with a CRL to revoke one)",
        "wirevault serve /data/store --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem --client-ca clients-ca.pem --client-crl clients.crl",
    ),
];

const TUNE: &[Example] = &[
    top(
        "Check this host for recording eth1 into /data/store with these CPUs, arena and budget",
        "wirevault tune eth1 --store /data/store --cpus 2-5 --buffer 4G --max-size 80%",
    ),
    ex("Only what is not ok", "wirevault tune eth1 --json | jq '.[] | select(.state != \"ok\")'"),
    ex(
        "Make the safe changes of these checks, then check again",
        "wirevault tune eth1 --apply --only gro,lro,vlan-strip,tso-gso,rings",
    ),
];

const PLAN: &[Example] = &[
    top("The paper's Table 1: 60..1514-byte frames on 10 GbE", "wirevault plan"),
    ex("64-byte frames (FCS included) on 100 GbE", "wirevault plan --link 100g --size 64 --size-includes-fcs"),
    ex("How long an 8 TiB volume lasts with IMIX at line rate", "wirevault plan --mix imix --disk 8T"),
    ex(
        "A mix of frame sizes and weights, as JSON",
        "wirevault plan --mix 64:7,576:4,1518:1 --size-includes-fcs --json",
    ),
    ex(
        "This traffic, these disks: the last hour of a store against a disk-bench result",
        "wirevault plan --from /data/store --from-time '1h ago' --bench disk.json",
    ),
];

const TIMESTAMPS: &[Example] = &[
    ex("Per stream of a store", "wirevault timestamps /data/store"),
    ex("Two files, and what eth1's NIC offers, as JSON", "wirevault timestamps old.pcap other.pcapng -i eth1 --json"),
];

/// The examples of subcommand `name` (none for one without a table).
pub fn of(name: &str) -> &'static [Example] {
    ALL.iter().find(|(n, _)| *n == name).map_or(&[], |(_, e)| e)
}

/// The headline examples, in subcommand order.
pub fn headline() -> impl Iterator<Item = &'static Example> {
    ALL.iter().flat_map(|(_, e)| e.iter()).filter(|e| e.headline)
}
