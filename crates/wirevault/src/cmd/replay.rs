//! `wirevault replay -i IFACE SOURCE... [--from T] [--to T] [EXPRESSION...]`:
//! send stored packets out of an interface.
//!
//! Flags -> plan -> wiring: the pacing flags, the sources and the interface
//! are checked before anything is sent (an interface that is missing, down,
//! or carries the default route without `--force` is refused with one
//! sentence). Every source, a store or a capture file, is read through
//! `wv_query` (`Sink::Packets`), so a store replays exactly the packets
//! `wirevault query` selects for the same arguments; files are sent one
//! after the other, in the order given, as tcpreplay does.

use crate::log::Level;
use crate::{exit, fail};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_replay::{Pacing, Replayer, Summary};

/// A packet that went out more than this after its target counts as late.
const LATE_NS: u64 = 100_000;
/// The progress bar is redrawn every this many packets (indicatif limits
/// the drawing rate itself).
const PROGRESS_EVERY: u64 = 1024;

/// Arguments of `wirevault replay`.
#[derive(clap::Args)]
pub struct Args {
    /// The interface to send on.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: String,
    /// Earliest packet time, inclusive (as `query --from`).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// End of the time range, exclusive (as `query --to`).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Send at most N packets (per loop; 1 or more).
    #[arg(long, value_name = "N", value_parser = super::packet_limit)]
    pub limit: Option<u64>,
    /// Send at the recorded timing divided by X (2: twice as fast).
    #[arg(long, value_name = "X", group = "pace")]
    pub speed: Option<f64>,
    /// Send N packets per second.
    #[arg(long, value_name = "N", group = "pace")]
    pub pps: Option<f64>,
    #[arg(long, value_name = "RATE", group = "pace",
        help = format!("Send at this many bits of frames per second: {}", wv_units::RATE_FORMS))]
    pub rate: Option<String>,
    /// Send as fast as the interface takes the packets.
    #[arg(long, group = "pace")]
    pub topspeed: bool,
    /// Send the whole selection N times.
    #[arg(long = "loop", value_name = "N", default_value_t = 1)]
    pub loops: u64,
    /// Send even on an interface that carries the default route.
    #[arg(long)]
    pub force: bool,
    /// Print the summary as JSON on standard output.
    #[arg(long)]
    pub json: bool,
    /// Stores or capture files (sent in this order), then an optional tcpdump
    /// filter expression: the leading words that name existing paths are the
    /// sources, the rest is the filter. With --store or --fleet, every word is the
    /// filter's, and the sources' packets are sent merged by time.
    #[arg(value_name = "SOURCE... [EXPRESSION]", required_unless_present_any = ["stores", "fleet"])]
    pub words: Vec<String>,
    #[command(flatten)]
    pub sources: super::fleet::Sources,
}

/// The validated arguments.
struct Plan {
    pacing: Pacing,
    /// Local sources, sent one after the other (empty with `fleet`).
    sources: Vec<PathBuf>,
    /// With --store or --fleet: the nodes whose packets are sent merged by time.
    fleet: Option<Vec<wv_fleet::Node>>,
    expr: String,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
}

impl Plan {
    /// The query of source `src` with `limit`.
    fn query(&self, src: &std::path::Path, limit: Option<u64>) -> wv_query::Query {
        wv_query::Query {
            store: src.to_path_buf(),
            from_ns: self.from_ns,
            to_ns: self.to_ns,
            expr: self.expr.clone(),
            limit,
        }
    }
}

/// A number as a message shows it: in e-notation when long.
fn shown(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e9).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

fn plan(args: &Args) -> anyhow::Result<Plan> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    let pacing = if let Some(x) = args.speed {
        if !positive(x) || x > 1e9 {
            return Err(fail(
                exit::USAGE,
                format!(
                    "invalid --speed {}: give a multiplier above 0 and at most 1e9, such as 0.5, 1 or 10",
                    shown(x)
                ),
            ));
        }
        Pacing::Recorded { speed: x }
    } else if let Some(n) = args.pps {
        if !positive(n) || n > 1e9 {
            return Err(fail(
                exit::USAGE,
                format!("invalid --pps {}: give packets per second above 0 and at most 1e9", shown(n)),
            ));
        }
        Pacing::Pps(n)
    } else if let Some(r) = &args.rate {
        Pacing::Rate(
            wv_units::parse_bit_rate(r).map_err(|e| fail(exit::USAGE, wv_units::rate_error("--rate", r, e, false)))?,
        )
    } else if args.topspeed {
        Pacing::TopSpeed
    } else {
        Pacing::Recorded { speed: 1.0 }
    };
    if args.loops == 0 {
        return Err(fail(exit::USAGE, "--loop 0 sends nothing: give 1 or more"));
    }
    let (from_ns, to_ns) = super::time_range(&args.from, &args.to, ("--from", "--to"))?;
    if args.sources.given() {
        if let Some(w) = args.words.first().filter(|w| std::path::Path::new(w).exists()) {
            return Err(fail(
                exit::USAGE,
                format!("{w} is a path: with --store or --fleet give every source as --store SRC"),
            ));
        }
        let fleet = Some(args.sources.nodes(None)?);
        return Ok(Plan { pacing, sources: Vec::new(), fleet, expr: args.words.join(" "), from_ns, to_ns });
    }
    let n = args.words.iter().take_while(|w| std::path::Path::new(w).exists()).count();
    if n == 0 {
        return Err(fail(
            exit::ERROR,
            format!("{} does not exist: give a store directory or capture files first, then the filter", args.words[0]),
        ));
    }
    let sources = args.words[..n].iter().map(PathBuf::from).collect();
    let expr = args.words[n..].join(" ");
    Ok(Plan { pacing, sources, fleet: None, expr, from_ns, to_ns })
}

/// The interface checks, in order: it exists, it is up and has a carrier,
/// it does not reach a default route (unless `--force`), its link type can be sent.
fn check_interface(ifname: &str, force: bool) -> anyhow::Result<wv_replay::Config> {
    use wv_sys::afpacket::Error;
    wv_sys::netif::ifindex(ifname).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    if !wv_sys::netif::is_up(ifname).map_err(|e| fail(exit::ERROR, e.to_string()))? {
        return Err(fail(exit::ERROR, Error::InterfaceDown(ifname.to_owned()).to_string()));
    }
    if !wv_sys::netif::has_carrier(ifname).map_err(|e| fail(exit::ERROR, e.to_string()))? {
        return Err(fail(
            exit::ERROR,
            format!("cannot send on {ifname}: it has no carrier (the link is down: a cable, or a veth's peer); bring the link up first"),
        ));
    }
    if !force {
        let via = wv_replay::route::default_route_reach(ifname)
            .map_err(|e| fail(exit::ERROR, format!("cannot read the routing table to check {ifname}: {e}")))?;
        if let Some(d) = via {
            let how = if d == ifname {
                "it carries the default route".to_string()
            } else {
                format!("it is bridged, bonded or stacked with {d}, which carries the default route")
            };
            return Err(fail(
                exit::USAGE,
                format!(
                    "refusing to send on {ifname}: {how}, so replayed packets would reach the real network; give --force to send anyway"
                ),
            ));
        }
    }
    let linktype =
        wv_sys::netif::linktype_of(ifname).map_err(|e| fail(exit::ERROR, e.to_string()))?.ok_or_else(|| {
            fail(exit::ERROR, format!("cannot send on {ifname}: its link type is neither Ethernet nor raw IP"))
        })?;
    let mtu = wv_sys::netif::mtu(ifname).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    Ok(wv_replay::Config { ifname: ifname.to_owned(), linktype, mtu, late_ns: LATE_NS })
}

/// A source none of whose selected packets has the interface's link type
/// is refused before anything is sent, with both link types and what to do
/// (until 2026-11-27 every packet was counted as failed, "wrong link type",
/// naming neither). A source that mixes link types sends the packets of
/// the interface's and counts the others as failed, naming their link
/// types once after the summary ([`not_sent_for_linktype`]).
fn check_linktypes(src: &std::path::Path, linktypes: &[u32], cfg: &wv_replay::Config) -> anyhow::Result<()> {
    use wv_wire::linktype::{describe, ETHERNET, IPV4, IPV6, LINUX_SLL, RAW};
    if linktypes.is_empty() || linktypes.contains(&cfg.linktype) {
        return Ok(());
    }
    let theirs = linktypes.iter().map(|l| describe(*l)).collect::<Vec<_>>().join(", ");
    let what = match (linktypes, cfg.linktype) {
        ([IPV4 | IPV6], _) => "its packets are raw IP: `editcap -T rawip FILE OUT` relabels them as link type 101, which replays on a raw-IP interface (a tun device: `ip tuntap add dev tun0 mode tun`); on Ethernet they need Ethernet headers first (`tcprewrite --dlt=enet --enet-smac=MAC --enet-dmac=MAC` on the relabelled file)".to_string(),
        ([RAW], ETHERNET) => "replay it on a raw-IP interface (a tun device: `ip tuntap add dev tun0 mode tun`), or give its packets Ethernet headers first (`tcprewrite --dlt=enet --enet-smac=MAC --enet-dmac=MAC`)".to_string(),
        ([LINUX_SLL], ETHERNET) => "Linux cooked headers cannot be sent on any interface: give its packets Ethernet headers first (`tcprewrite --dlt=enet --enet-smac=MAC --enet-dmac=MAC`)".to_string(),
        _ => format!(
            "replay it on an interface of link type {theirs}, or rewrite its link-layer headers to {} first",
            describe(cfg.linktype)
        ),
    };
    Err(fail(
        exit::USAGE,
        format!(
            "cannot replay {} on {}: its packets are of link type {theirs} and {} is of link type {}; {what}",
            src.display(),
            cfg.ifname,
            cfg.ifname,
            describe(cfg.linktype)
        ),
    ))
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let p = plan(&args)?;
    let cfg = check_interface(&args.interface, args.force)?;
    // Every source opens and its filter compiles before anything is sent.
    let mut first: Vec<Option<wv_query::Prepared>> = Vec::new();
    for s in &p.sources {
        let prepared = wv_query::prepare(p.query(s, args.limit)).map_err(super::query::prepare_error)?;
        check_linktypes(s, &prepared.linktypes(), &cfg)?;
        first.push(Some(prepared));
    }
    let tx = wv_sys::afpacket::tx::TxSocket::open(&args.interface).map_err(|e| match e {
        wv_sys::afpacket::Error::PermissionDenied => {
            fail(exit::ERROR, "sending packets needs root or CAP_NET_RAW (setcap cap_net_raw+ep on the binary)")
        }
        e => fail(exit::ERROR, e.to_string()),
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::cmd::catch_signals([libc::SIGINT, libc::SIGTERM, libc::SIGHUP], |_| Arc::clone(&stop))?;
    let own_linktype = cfg.linktype;
    let mut replayer = Replayer::new(tx, cfg, p.pacing);
    replayer.set_stop(Arc::clone(&stop));
    let bar = std::io::stderr().is_terminal().then(progress_bar);
    let preload = Preload::for_sources(&p, &first, args.loops);
    let mut s = Sending {
        args: &args,
        plan: &p,
        r: replayer,
        own_linktype,
        other_linktypes: Vec::new(),
        fatal: None,
        warnings: Vec::new(),
        preload,
        progress: Progress { bar: bar.as_ref(), drawn: std::time::Instant::now(), loops: args.loops },
        laps_done: 0,
        lost: None,
    };
    for lap in 0..args.loops {
        let sent = match (s.preload.as_ref().filter(|_| lap > 0), &p.fleet) {
            (Some(_), _) => s.send_preloaded(lap),
            (None, Some(nodes)) => s.send_fleet(nodes, lap)?,
            (None, None) => s.send_sources(lap, &mut first)?,
        };
        if !sent {
            break;
        }
        if !stop.load(Ordering::Relaxed) {
            s.laps_done += 1;
        }
    }
    let Sending { r, fatal, warnings, other_linktypes, preload, laps_done, lost, .. } = s;
    if let Some(k) = preload.as_ref().filter(|_| laps_done > 1) {
        message!(
            Level::Debug,
            "the first loop's {} packets ({} bytes) were kept in memory; the later loops sent them from there",
            k.packets,
            k.bytes.len()
        );
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    super::query::say_warnings(&warnings);
    // Nothing sent because a node did not answer is said as that, not as an empty selection.
    let refused = lost.as_ref().is_some_and(|l| l.before_sending);
    let code = conclude(&args, r, (fatal, refused), laps_done, (&other_linktypes, own_linktype))?;
    Ok(code.max(lost.map_or(exit::OK, |l| say_lost(&l, &args, p.fleet.as_ref().map_or(0, Vec::len)))))
}

/// The nodes left out of a replay over several sources, each named; the exit code they make.
fn say_lost(l: &LeftOut, args: &Args, nodes: usize) -> u8 {
    if !l.before_sending {
        return super::fleet::say_lost(&l.nodes, &[], args.sources.allow_partial, nodes);
    }
    // Known before the first packet: nothing went out (packets sent cannot be taken back).
    super::fleet::say_lost(&l.nodes, &[], true, nodes);
    message!(
        Level::Error,
        "nothing was sent: {} of {nodes} node(s) did not answer (named above); --allow-partial sends the others' packets",
        l.nodes.len()
    );
    exit::ERROR
}

/// The nodes a replay over several sources went without.
struct LeftOut {
    nodes: Vec<wv_fleet::Lost>,
    /// Known before anything was sent (and without --allow-partial, nothing was).
    before_sending: bool,
}

/// A replay under way: the replayer and what it has met so far.
struct Sending<'a, T: wv_replay::Transmit> {
    args: &'a Args,
    plan: &'a Plan,
    r: Replayer<T>,
    own_linktype: u32,
    /// The link types of the packets not sent for theirs (a pcapng file or a
    /// store may mix them), in the order met: said once, after the summary.
    other_linktypes: Vec<u32>,
    fatal: Option<wv_replay::ReplayError>,
    warnings: Vec<String>,
    preload: Option<Preload>,
    progress: Progress<'a>,
    laps_done: u64,
    /// With --store or --fleet: the nodes left out of the first loop.
    lost: Option<LeftOut>,
}

impl<T: wv_replay::Transmit> Sending<'_, T> {
    /// Loop `lap` (> 0) from the packets the first loop kept; false on a fatal error.
    fn send_preloaded(&mut self, lap: u64) -> bool {
        let Some(k) = &self.preload else { return true };
        for seg in &k.segments {
            self.r.new_segment();
            for (n, &(ts_ns, linktype, at, len)) in seg.iter().enumerate() {
                if let Err(e) = self.r.packet(ts_ns, linktype, &k.bytes[at..at + len as usize]) {
                    self.fatal = Some(e);
                    return false;
                }
                self.progress.show(&self.r, n as u64 + 1, lap);
            }
        }
        true
    }

    /// Loop `lap` from the sources (the first loop's queries are `first`, prepared up front);
    /// false on a fatal error.
    fn send_sources(&mut self, lap: u64, first: &mut [Option<wv_query::Prepared>]) -> anyhow::Result<bool> {
        let mut taken = 0u64;
        for (i, src) in self.plan.sources.iter().enumerate() {
            let limit = self.args.limit.map(|l| l - taken);
            if limit == Some(0) {
                break;
            }
            let prepared = match first[i].take() {
                Some(pr) => pr,
                None => wv_query::prepare(self.plan.query(src, limit)).map_err(super::query::prepare_error)?,
            };
            self.r.new_segment();
            if let Some(k) = self.preload.as_mut() {
                k.segments.push(Vec::new());
            }
            let (n, full) = self.send_one(prepared, taken, lap)?;
            taken += n;
            if self.fatal.is_some() {
                return Ok(false);
            }
            if full {
                break;
            }
        }
        Ok(true)
    }

    /// Sends the `n`-th packet (from 1) of a source in loop `lap`; an error (kept in `fatal`)
    /// stops the source.
    fn send_packet(&mut self, ts_ns: u64, linktype: u32, data: &[u8], n: u64, lap: u64) -> std::io::Result<()> {
        if linktype != self.own_linktype && !self.other_linktypes.contains(&linktype) {
            self.other_linktypes.push(linktype);
        }
        if let Err(e) = self.r.packet(ts_ns, linktype, data) {
            self.fatal = Some(e);
            return Err(std::io::Error::from(std::io::ErrorKind::Interrupted));
        }
        if self.preload.as_mut().is_some_and(|k| !k.keep(ts_ns, linktype, data)) {
            self.preload = None;
        }
        self.progress.show(&self.r, n, lap);
        Ok(())
    }

    /// Loop `lap` from the nodes of --store or --fleet, merged by time as `query` merges them;
    /// false when it stopped (a fatal error, or a node down before the first packet without
    /// --allow-partial: nothing is sent then).
    fn send_fleet(&mut self, nodes: &[wv_fleet::Node], lap: u64) -> anyhow::Result<bool> {
        self.r.new_segment();
        if let Some(k) = self.preload.as_mut() {
            k.segments.push(Vec::new());
        }
        let p = self.plan;
        let sel =
            wv_fleet::Selection { from_ns: p.from_ns, to_ns: p.to_ns, expr: p.expr.clone(), limit: self.args.limit };
        let partial = self.args.sources.allow_partial;
        let mut wire = Wire { s: self, n: 0, lap, partial, refused: Vec::new() };
        let res = wv_fleet::merge(nodes, &sel, &mut wire);
        let refused = std::mem::take(&mut wire.refused);
        match res {
            Ok(o) => {
                if lap == 0 {
                    self.warnings.extend(o.warnings);
                    self.lost = (!o.lost.is_empty()).then_some(LeftOut { nodes: o.lost, before_sending: false });
                }
                Ok(self.fatal.is_none())
            }
            Err(wv_fleet::MergeError::Usage(m)) => Err(fail(exit::USAGE, m)),
            Err(_) if self.fatal.is_some() => Ok(false),
            Err(_) if !refused.is_empty() => {
                self.lost = Some(LeftOut { nodes: refused, before_sending: true });
                Ok(false)
            }
            Err(e) => Err(fail(exit::ERROR, e.to_string())),
        }
    }

    /// Sends one source's selection; the packets sent and whether the limit was reached.
    fn send_one(&mut self, prepared: wv_query::Prepared, taken: u64, lap: u64) -> anyhow::Result<(u64, bool)> {
        let (mut n, mut full) = (0u64, false);
        let limit = self.args.limit;
        let mut each = |pk: wv_query::PacketRef<'_>| -> std::io::Result<()> {
            // The limit counts over all sources of a loop (each query
            // was prepared with the whole limit).
            if limit.is_some_and(|l| taken + n >= l) {
                full = true;
                return Err(std::io::Error::from(std::io::ErrorKind::Interrupted));
            }
            n += 1;
            self.send_packet(pk.ts_ns, pk.linktype, pk.data, n, lap)
        };
        let report = match wv_query::run(prepared, wv_query::Sink::Packets(&mut each)) {
            Ok(rep) => Some(rep),
            Err(_) if self.fatal.is_some() || full => None,
            Err(e) => return Err(fail(exit::ERROR, e.to_string())),
        };
        if let Some(rep) = report.filter(|_| lap == 0) {
            self.warnings.extend(rep.warnings);
        }
        Ok((n, full))
    }
}

/// The merged stream of --store or --fleet, onto the wire.
struct Wire<'s, 'a, T: wv_replay::Transmit> {
    s: &'s mut Sending<'a, T>,
    n: u64,
    lap: u64,
    partial: bool,
    /// The nodes down before the first packet, without --allow-partial: nothing is sent.
    refused: Vec<wv_fleet::Lost>,
}

impl<T: wv_replay::Transmit> wv_fleet::Output for Wire<'_, '_, T> {
    fn begin(&mut self, _: &[wv_fleet::Node], _: &[wv_fleet::Head], lost: &[wv_fleet::Lost]) -> std::io::Result<()> {
        if !lost.is_empty() && !self.partial {
            self.refused = lost.to_vec();
            return Err(std::io::Error::from(std::io::ErrorKind::Interrupted));
        }
        Ok(())
    }

    fn packet(&mut self, p: wv_fleet::MergedPacket<'_>) -> std::io::Result<()> {
        self.n += 1;
        self.s.send_packet(p.ts_ns, p.linktype, p.data, self.n, self.lap)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Finishes the replay, prints its report and sentences, and words the exit code.
fn conclude<T: wv_replay::Transmit>(
    args: &Args,
    mut r: Replayer<T>,
    (mut fatal, refused): (Option<wv_replay::ReplayError>, bool),
    laps_done: u64,
    (other_linktypes, own_linktype): (&[u32], u32),
) -> anyhow::Result<u8> {
    let summary = match r.finish() {
        Ok(s) => s,
        Err(e) => {
            fatal.get_or_insert(e);
            r.finish().unwrap_or_else(|_| Summary::from_stats(r.stats(), LATE_NS, false, 0))
        }
    };
    let stopped = match &fatal {
        Some(wv_replay::ReplayError::Stopped) => Some("signal".to_string()),
        Some(e) => Some(e.to_string()),
        None => None,
    };
    report(args, &summary, laps_done, stopped);
    let wrong = summary.failures.get(&wv_replay::Cause::LinkType.name()).copied().unwrap_or(0);
    if wrong > 0 {
        message!(Level::Warn, "{}", not_sent_for_linktype(wrong, other_linktypes, &args.interface, own_linktype));
    }
    if summary.sent + summary.failed == 0 && fatal.is_none() && !refused {
        info!("the selection is empty: no packet of the sources is in the time range and passes the filter");
    }
    match fatal {
        Some(wv_replay::ReplayError::Stopped) => info!("replay stopped by a signal"),
        Some(e) => {
            message!(Level::Error, "{e}");
            return Ok(exit::ERROR);
        }
        None => {}
    }
    Ok(if summary.failed > 0 { exit::ERROR } else { exit::OK })
}

/// The sentence for the `n` packets not sent because their link types
/// (`theirs`) are not the interface's (`ours`), as a source that mixes link
/// types has them (those of another link type only are refused up front,
/// see [`check_linktypes`]).
fn not_sent_for_linktype(n: u64, theirs: &[u32], ifname: &str, ours: u32) -> String {
    use wv_wire::linktype::describe;
    let theirs = theirs.iter().map(|l| describe(*l)).collect::<Vec<_>>().join(" and ");
    let ours = describe(ours);
    format!(
        "{n} packet(s) of link type {theirs} were not sent: {ifname} is of link type {ours}, and only packets of that link type are sent; to send the others, replay the source on an interface of their link type, or rewrite their link-layer headers first"
    )
}

/// The first loop's packets, kept in memory to send again.
#[derive(Default)]
struct Preload {
    bytes: Vec<u8>,
    /// Per source: (time, link type, offset in `bytes`, length).
    segments: Vec<Vec<(u64, u32, usize, u32)>>,
    packets: usize,
}

impl Preload {
    /// Kept when the sources are small enough and looped: the later loops send the first loop's
    /// packets from memory (tcpreplay's --preload-pcap, here without asking), so a small
    /// selection looped many times is not prepared and read again on every loop. Decided before
    /// the first loop from what the sources can hold at most (a catalog's bytes in the range; a
    /// file's length), so a large selection is not copied only to be dropped.
    fn for_sources(p: &Plan, first: &[Option<wv_query::Prepared>], loops: u64) -> Option<Preload> {
        if p.fleet.is_some() {
            // The nodes' answers are not known in size: kept until they pass AT_MOST.
            return (loops > 1).then(Preload::default);
        }
        let at_most: u64 = p
            .sources
            .iter()
            .zip(first)
            .map(|(src, pr)| {
                let bytes = pr.as_ref().and_then(wv_query::Prepared::bytes_upper_bound);
                bytes.unwrap_or_else(|| std::fs::metadata(src).map_or(u64::MAX, |m| m.len()))
            })
            .fold(0u64, u64::saturating_add);
        (loops > 1 && at_most <= Self::AT_MOST as u64)
            .then(|| Preload { bytes: Vec::with_capacity(at_most as usize), ..Preload::default() })
    }

    /// The most kept: larger sources are read again on every loop.
    const AT_MOST: usize = 256 << 20;

    /// Keeps a packet of the current source; false once the selection is
    /// larger than [`Preload::AT_MOST`] (the caller then drops what it kept).
    fn keep(&mut self, ts_ns: u64, linktype: u32, data: &[u8]) -> bool {
        let per_packet = std::mem::size_of::<(u64, u32, usize, u32)>();
        if self.bytes.len() + data.len() + (self.packets + 1) * per_packet > Self::AT_MOST {
            return false;
        }
        self.packets += 1;
        let at = self.bytes.len();
        self.bytes.extend_from_slice(data);
        if let Some(seg) = self.segments.last_mut() {
            seg.push((ts_ns, linktype, at, data.len() as u32));
        }
        true
    }
}

/// The progress bar on a terminal, redrawn every [`PROGRESS_EVERY`]
/// packets and at slow rates every quarter second (a vDSO clock read:
/// tens of ns).
struct Progress<'a> {
    bar: Option<&'a indicatif::ProgressBar>,
    drawn: std::time::Instant,
    loops: u64,
}

impl Progress<'_> {
    /// After the `n`-th packet of a source in loop `lap` (from 0).
    fn show<T: wv_replay::Transmit>(&mut self, r: &Replayer<T>, n: u64, lap: u64) {
        let Some(b) = self.bar else { return };
        if !n.is_multiple_of(PROGRESS_EVERY) && self.drawn.elapsed() < std::time::Duration::from_millis(250) {
            return;
        }
        self.drawn = std::time::Instant::now();
        let s = r.stats();
        b.set_position(s.sent);
        let rate = s.sent as f64 / b.elapsed().as_secs_f64().max(1e-3);
        b.set_message(format!("({rate:.0}/s), {} failed, {} late, loop {}/{}", s.failed, s.late, lap + 1, self.loops));
    }
}

fn progress_bar() -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {elapsed_precise} {human_pos} sent {msg}") {
        b.set_style(style);
    }
    b.enable_steady_tick(std::time::Duration::from_millis(200));
    b
}

/// The summary line on standard error; with `--json`, the summary on
/// standard output, with the loops asked for and done, and what stopped
/// the replay before its end (`stopped`: "signal" or the error; null when
/// every selected packet was handed to the interface).
fn report(args: &Args, s: &Summary, laps_done: u64, stopped: Option<String>) {
    let secs = s.elapsed_ns as f64 / 1e9;
    let per = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    if args.json {
        let mut v = serde_json::to_value(s).unwrap_or_default();
        v["interface"] = args.interface.clone().into();
        v["loops"] = args.loops.into();
        v["loops_done"] = laps_done.into();
        v["stopped"] = stopped.into();
        v["pps"] = per(s.sent as f64).round().into();
        v["bits_per_s"] = per(s.bytes as f64 * 8.0).round().into();
        println!("{v}");
    }
    let mut line = format!(
        "replay on {}: {} sent ({} bytes) in {secs:.3} s ({:.0} pps, {:.1} Mbit/s), {} failed",
        args.interface,
        s.sent,
        s.bytes,
        per(s.sent as f64),
        per(s.bytes as f64 * 8.0) / 1e6,
        s.failed
    );
    if !s.failures.is_empty() {
        let causes: Vec<String> = s.failures.iter().map(|(c, n)| format!("{n} {c}")).collect();
        line.push_str(&format!(" ({})", causes.join(", ")));
    }
    if let Some(l) = s.lateness_ns {
        line.push_str(&format!(
            ", {} late (> {} µs); lateness p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            s.late,
            s.late_threshold_ns / 1000,
            l.p50 as f64 / 1e3,
            l.p99 as f64 / 1e3,
            l.max as f64 / 1e3
        ));
    }
    if s.retries > 0 {
        line.push_str(&format!(", {} retried sends (driver full)", s.retries));
    }
    info!("{line}");
}
