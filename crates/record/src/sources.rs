//! The sources of a recording, opened before anything is created: a live interface checked
//! and its filter compiled (its rings open later, in `start`), the file reader, the
//! generator.

use crate::config::{RecorderConfig as Plan, Source as SourcePlan, Stamping};
use crate::{Error, Result};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use wv_capture::file::FileSource;
use wv_capture::synthetic::Synthetic;
use wv_capture::xdp::XdpSource;
use wv_capture::Source;
use wv_filter::{self as filter, Filter};
use wv_store::catalog::Stamps;

/// The sources of a recording, opened (a live interface: checked, its rings
/// opened later by `start`).
pub struct Sources {
    /// One per stream.
    pub list: Vec<Box<dyn Source>>,
    /// A live interface whose rings are not open yet.
    pub live: Option<Live>,
    /// The stream that reads files (`--read`), whose input problems are reported at the end.
    pub file_source: Option<usize>,
    /// Notes to print once the streams run.
    pub notes: Vec<String>,
    /// Where the packets' timestamps come from.
    pub stamps: Stamps,
}

impl Sources {
    /// How many streams the recording has: one per worker of a live
    /// interface, otherwise one per source.
    pub fn streams(&self, p: &Plan) -> usize {
        if self.live.is_some() {
            p.workers
        } else {
            self.list.len()
        }
    }
}

/// A live interface, checked: its link type and the kernel filter program.
pub struct Live {
    pub ifname: String,
    pub promisc: bool,
    pub linktype: u32,
    /// The capture filter as the kernel runs it (also cuts at the snap length).
    pub prog: Option<Vec<libc::sock_filter>>,
    /// A user filter was given (so filtered packets are counted).
    pub filtered: bool,
    /// The rings ask for the NIC's hardware stamps.
    pub hw_stamps: bool,
    /// `--source xdp`: AF_XDP sockets, with the filter they run in user space.
    pub xdp: Option<Option<Filter>>,
}

/// Opens the sources: checks a live interface and compiles its filter (its
/// rings open later, in `start`), opens the file reader or the generator.
pub(crate) fn open_sources(p: &Plan, stop: &Arc<AtomicBool>) -> Result<Sources> {
    let mut list: Vec<Box<dyn Source>> = Vec::new();
    let mut file_source = None;
    let mut notes = Vec::new();
    let mut live = None;
    let mut stamps = Stamps::Software;
    match &p.source {
        SourcePlan::Live { interface: ifname, promisc, xdp } => {
            let linktype =
                wv_sys::netif::linktype_of(ifname).map_err(|e| Error::failed(e.to_string()))?.ok_or_else(|| {
                    Error::failed(format!("interface {ifname} has a link type wirevault cannot store yet"))
                })?;
            if *xdp {
                live = Some(xdp_live(p, ifname, *promisc, linktype)?);
                return Ok(Sources { list, live, file_source, notes, stamps });
            }
            let filt: Option<Filter> = match &p.expression {
                Some(e) => Some(filter::compile_live(e, ifname, p.snaplen).map_err(|e| Error::config(e.to_string()))?),
                None => None,
            };
            if let Some(f) = filt.as_ref().filter(|f| f.jumps_back()) {
                return Err(Error::config(format!(
                        "the kernel cannot run the filter \"{}\" (libpcap compiles `protochain` into a loop, which socket filters cannot hold); record with --source xdp, which filters in user space, or record without it and select with `wirevault query`",
                        filter::shown(&f.expression)
                    ),
                ));
            }
            let mut prog = filt.as_ref().map(Filter::sock_filter);
            if prog.is_none() && p.snaplen < wv_wire::MAX_SNAPLEN {
                // Let the kernel cut packets at the snap length, as libpcap does.
                prog = Some(vec![libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: p.snaplen }]);
            }
            if filt.is_some() && prog.as_deref().is_some_and(|pr| wv_sys::bpf::invert(pr).is_none()) {
                notes.push("this filter returns a computed length, so filtered packets are not counted".to_string());
            }
            let hw_stamps = live_stamps(ifname, p.timestamps, &mut notes)?;
            if hw_stamps {
                stamps = Stamps::Hardware;
            }
            let filtered = filt.is_some();
            live = Some(Live {
                ifname: ifname.clone(),
                promisc: *promisc,
                linktype,
                prog,
                filtered,
                hw_stamps,
                xdp: None,
            });
        }
        SourcePlan::Read { files } => {
            if let Some(e) = &p.expression {
                // Validate once for Ethernet so a typo fails before anything is written.
                filter::compile(e, wv_wire::linktype::ETHERNET, p.snaplen).map_err(|e| Error::config(e.to_string()))?;
            }
            file_source = Some(0);
            stamps = Stamps::File;
            // Interleaved link types go out grouped (fewer files), unless the input's order
            // decides what is stored: `-c`, `--dedup`, `--flow-cutoff`.
            let group = p.count.is_none() && p.reduce.dedup_window_ns.is_none() && p.reduce.flow_cutoff.is_none();
            list.push(Box::new(
                FileSource::new(files.clone(), p.expression.clone()).stop_on(stop.clone()).group_link_types(group),
            ));
        }
        SourcePlan::Synthetic(spec) => {
            let filt = match &p.expression {
                Some(e) => Some(
                    filter::compile(e, wv_wire::linktype::ETHERNET, p.snaplen)
                        .map_err(|e| Error::config(e.to_string()))?,
                ),
                None => None,
            };
            for _ in 0..p.workers {
                list.push(Box::new(Synthetic::new(spec.clone(), filt.clone())));
            }
        }
    }
    Ok(Sources { list, live, file_source, notes, stamps })
}

/// `--timestamps` on a live interface: whether its rings ask for the NIC's
/// stamps. The NIC's capabilities come from `ETHTOOL_GET_TS_INFO` (as
/// `wirevault timestamps -i IF` shows them); with them, its receive stamping
/// is turned on for every packet. `hw` on an interface without them is a
/// usage error; `auto` falls back to the kernel's clock with a note.
fn live_stamps(ifname: &str, choice: Stamping, notes: &mut Vec<String>) -> Result<bool> {
    if choice == Stamping::Software {
        return Ok(false);
    }
    let info = wv_sys::tsinfo::ts_info(ifname);
    if !info.as_ref().is_ok_and(|i| i.hardware_receive()) {
        if choice == Stamping::Hardware {
            let offers = match &info {
                Ok(i) if i.capabilities().is_empty() => "no timestamping at all".to_string(),
                Ok(i) => i.capabilities().join(", "),
                Err(e) => format!("no answer: {e}"),
            };
            return Err(Error::config(format!("--timestamps hw: interface {ifname} cannot stamp received packets in hardware (its driver offers {offers}); record with --timestamps sw or auto"),
            ));
        }
        notes.push(format!(
            "{ifname} has no hardware receive timestamps; packets carry the kernel's software stamps (--timestamps sw chooses them without this note)"
        ));
        return Ok(false);
    }
    match wv_sys::tsinfo::enable_hw_rx(ifname) {
        Ok(_) => Ok(true),
        Err(e) if choice == Stamping::Hardware => Err(Error::failed(format!("--timestamps hw: cannot turn on hardware receive stamping on {ifname} ({e}); record with --timestamps sw or auto"),
        )),
        Err(e) => {
            notes.push(format!(
                "cannot turn on hardware receive stamping on {ifname} ({e}); packets carry the kernel's software stamps"
            ));
            Ok(false)
        }
    }
}

/// `--source xdp` on a live interface: the filter compiled for the frames as they are on the
/// wire (XDP sees VLAN tags in place, as a file holds them), run in user space.
fn xdp_live(p: &Plan, ifname: &str, promisc: bool, linktype: u32) -> Result<Live> {
    // Checked before the store exists (the sockets open after it).
    workers_per_queue(p, ifname)?;
    let filt = match &p.expression {
        Some(e) => Some(filter::compile(e, linktype, p.snaplen).map_err(|e| Error::config(e.to_string()))?),
        None => None,
    };
    let filtered = filt.is_some();
    Ok(Live { ifname: ifname.to_string(), promisc, linktype, prog: None, filtered, hw_stamps: false, xdp: Some(filt) })
}

/// The interface's receive queues, when `--workers` is that many (AF_XDP
/// reads each queue with its own worker); a usage error otherwise.
fn workers_per_queue(p: &Plan, ifname: &str) -> Result<u32> {
    let queues = wv_sys::xdp::rx_queues(ifname);
    if queues as usize != p.workers {
        return Err(Error::config(format!(
                "interface {ifname} has {queues} receive queue(s) and --source xdp reads each with its own worker: give --workers {queues}"
            ),
        ));
    }
    Ok(queues)
}

/// Opens one AF_XDP socket per receive queue (one per worker), puts them in the XDP program's
/// map and attaches the program: natively where the driver can, else generic, with a note.
pub fn open_xsks(p: &Plan, live: Live, filt: Option<Filter>, notes: &mut Vec<String>) -> Result<Vec<Box<dyn Source>>> {
    use wv_sys::xdp::{AttachMode, XdpProgram, XskSocket, CHUNK};
    let err = |e: wv_sys::xdp::Error| Error::failed(e.to_string());
    let ifname = &live.ifname;
    let queues = workers_per_queue(p, ifname)?;
    // The UMEM of each socket holds as many bytes as its ring would (--ring-size), in whole
    // chunks, a power of two of them.
    let ring = (p.tuning.ring_block_size * p.tuning.ring_blocks / CHUNK).clamp(2048, 1 << 18);
    let frames = 1u32 << (usize::BITS - 1 - ring.leading_zeros());
    let mut prog = XdpProgram::load(queues).map_err(err)?;
    // Attached first (a queue without a socket passes its frames to the host), so that an
    // interface with another XDP program is refused before any socket binds.
    let mode = prog.attach(ifname).map_err(err)?;
    let mut socks = Vec::new();
    for q in 0..queues {
        let sock = XskSocket::open(ifname, q, frames).map_err(err)?;
        prog.insert(q, &sock).map_err(err)?;
        socks.push(sock);
    }
    if mode == AttachMode::Generic {
        notes.push(format!("{ifname}'s driver has no native XDP: the program runs in generic mode (slower)"));
    }
    if socks.iter().any(|s| !s.zerocopy()) {
        notes.push(format!(
            "{ifname}'s driver has no zero-copy AF_XDP: the kernel copies each frame into the socket's memory (copy mode)"
        ));
    }
    notes.push(format!(
        "--source xdp: {ifname}'s frames go to wirevault only, not to the host's network stack, while it records{}",
        if live.promisc { " (promiscuous mode is not set on this path: `ip link set IF promisc on`)" } else { "" }
    ));
    let prog = Arc::new(prog);
    Ok(socks
        .into_iter()
        .map(|s| Box::new(XdpSource::new(s, prog.clone(), live.linktype, p.snaplen, filt.clone())) as Box<dyn Source>)
        .collect())
}
