//! The send loop. The caller hands packets one at a time ([`Replayer::packet`]);
//! the replayer gives each a target time ([`Schedule`]), waits for it, and
//! gathers the packets that are already due into a batch sent with one
//! system call.
//!
//! Waiting: a target more than [`SPIN_NS`] ahead is slept for with an
//! absolute deadline on `CLOCK_MONOTONIC` (`clock_nanosleep(TIMER_ABSTIME)`,
//! waking [`SPIN_NS`] early), the rest is spun on the clock: wake-up latency
//! is tens of microseconds, a relative sleep per packet would add them up.
//! The thread's timer slack (50 us by default, added to every sleep) is set
//! to 1 ns, so that a wake-up later than [`SPIN_NS`] is rare. (A margin that
//! widened after late wake-ups was tried and made things worse on a loaded
//! machine: a thread that spins longer is preempted more.) A packet that had
//! to be waited for is sent at once; packets that are already due when they
//! arrive (a burst, or a sender behind schedule) join the batch until it is
//! full or a packet arrives that is not due yet. At top speed every batch is
//! full.
//!
//! Lateness is the clock read after the send call returned minus the
//! packet's target (an upper bound of when the driver had it).

use crate::pacing::Schedule;
use crate::stats::{Cause, Stats, Summary};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_sys::afpacket::tx::{monotonic_ns, sleep_until_ns, TxSocket};

/// Targets closer than this are spun for, not slept for.
pub const SPIN_NS: u64 = 100_000;
/// Packets per send call.
pub const BATCH: usize = 64;
/// How long a send that finds the driver full (ENOBUFS/EAGAIN) is retried
/// before its packet counts as failed.
const RETRY_FOR_NS: u64 = 1_000_000_000;
/// After this long of a full driver queue, the link's carrier is asked for
/// (once per spell of a full queue: one ioctl).
const CARRIER_CHECK_NS: u64 = 10_000_000;

/// Something that sends frames: the real socket, or a test double.
pub trait Transmit {
    /// Sends frames `buf[s..e]` for each span, in order: `Ok(n)` the first
    /// `n` (≥ 1) went out; `Err` the first was refused (see [`TxSocket::send`]).
    fn send(&mut self, buf: &[u8], spans: &[(usize, usize)]) -> io::Result<usize>;

    /// False when the link has lost its carrier (asked while the driver
    /// keeps refusing frames: then no retry can succeed).
    fn carrier(&self) -> bool {
        true
    }
}

impl Transmit for TxSocket {
    fn send(&mut self, buf: &[u8], spans: &[(usize, usize)]) -> io::Result<usize> {
        TxSocket::send(self, buf, spans)
    }

    fn carrier(&self) -> bool {
        wv_sys::netif::has_carrier(self.ifname()).unwrap_or(true)
    }
}

/// What stops a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("network interface {0} went down or away while sending")]
    InterfaceDown(String),
    #[error("network interface {0} lost its carrier while sending (the link is down: a cable, or a veth's peer); bring the link up and replay again")]
    NoCarrier(String),
    /// The stop flag was raised (a signal) while waiting or between packets.
    #[error("stopped")]
    Stopped,
}

/// The interface's facts the replayer checks each packet against.
#[derive(Debug, Clone)]
pub struct Config {
    pub ifname: String,
    /// The interface's pcap link type; packets of another are not sent.
    pub linktype: u32,
    /// The interface MTU (layer-3 bytes).
    pub mtu: u32,
    /// A packet later than this counts as late.
    pub late_ns: u64,
}

/// The longest frame of link type `linktype` that an interface with `mtu`
/// takes, as the kernel's AF_PACKET send checks it (`packet_snd`): the MTU
/// plus the Ethernet header, plus 4 bytes when the frame carries an 802.1Q
/// tag (`packet_extra_vlan_len_allowed`); the MTU for raw IP.
pub fn frame_limit(linktype: u32, mtu: u32, frame: &[u8]) -> usize {
    if linktype == wv_wire::linktype::ETHERNET {
        let tagged = frame.get(12..14) == Some(&[0x81, 0x00][..]);
        mtu as usize + 14 + if tagged { 4 } else { 0 }
    } else {
        mtu as usize
    }
}

/// Frames due together, copied from the caller's buffers.
struct Batch {
    buf: Vec<u8>,
    spans: Vec<(usize, usize)>,
    targets: Vec<Option<u64>>,
}

impl Batch {
    fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
        self.targets.clear();
    }
}

/// The send loop. See the module documentation.
pub struct Replayer<T: Transmit> {
    tx: T,
    cfg: Config,
    sched: Schedule,
    batch: Batch,
    stats: Stats,
    first_ns: Option<u64>,
    last_ns: u64,
    stop: Option<Arc<AtomicBool>>,
}

impl<T: Transmit> Replayer<T> {
    /// A replayer whose schedule starts when its first packet arrives. It
    /// runs on the calling thread, whose timer slack it sets to 1 ns.
    pub fn new(tx: T, cfg: Config, pacing: crate::Pacing) -> Replayer<T> {
        wv_sys::cpu::set_timer_slack_ns(1);
        Replayer {
            tx,
            cfg,
            sched: Schedule::new(pacing, 0),
            batch: Batch {
                buf: Vec::with_capacity(BATCH * 2048),
                spans: Vec::with_capacity(BATCH),
                targets: Vec::with_capacity(BATCH),
            },
            stats: Stats::default(),
            first_ns: None,
            last_ns: 0,
            stop: None,
        }
    }

    /// Stops the replay (with [`ReplayError::Stopped`]) when `flag` is set:
    /// checked before each packet and while waiting.
    pub fn set_stop(&mut self, flag: Arc<AtomicBool>) {
        self.stop = Some(flag);
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The next packet begins a new file or loop (see [`Schedule::new_segment`]).
    pub fn new_segment(&mut self) {
        self.sched.new_segment();
    }

    /// Takes one packet: counts it as failed (too long, wrong link type) or
    /// waits for its target and sends it (now or with the next batch).
    pub fn packet(&mut self, ts_ns: u64, linktype: u32, data: &[u8]) -> Result<(), ReplayError> {
        let stopped = || self.stop.as_ref().is_some_and(|f| f.load(Ordering::Relaxed));
        if stopped() {
            return Err(ReplayError::Stopped);
        }
        if linktype != self.cfg.linktype {
            self.stats.fail(Cause::LinkType);
            return Ok(());
        }
        if data.len() > frame_limit(linktype, self.cfg.mtu, data) {
            self.stats.fail(Cause::TooLong);
            return Ok(());
        }
        if self.first_ns.is_none() {
            let now = monotonic_ns();
            self.first_ns = Some(now);
            self.sched = Schedule::new(self.sched.pacing(), now);
        }
        let target = self.sched.target(ts_ns, data.len());
        let mut waited = false;
        if let Some(t) = target {
            if monotonic_ns() < t {
                self.flush()?;
                if !wait_until(t, self.stop.as_deref()) {
                    return Err(ReplayError::Stopped);
                }
                waited = true;
            }
        }
        let s = self.batch.buf.len();
        self.batch.buf.extend_from_slice(data);
        self.batch.spans.push((s, self.batch.buf.len()));
        self.batch.targets.push(target);
        if waited || self.batch.spans.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Sends what is pending and returns the summary.
    pub fn finish(&mut self) -> Result<Summary, ReplayError> {
        self.flush()?;
        let paced = !matches!(self.sched.pacing(), crate::Pacing::TopSpeed);
        // From the first packet to now: the whole run, sends that failed included.
        let elapsed = self.first_ns.map_or(0, |f| monotonic_ns().max(self.last_ns).saturating_sub(f));
        Ok(Summary::from_stats(&self.stats, self.cfg.late_ns, paced, elapsed))
    }

    fn flush(&mut self) -> Result<(), ReplayError> {
        let Batch { buf, spans, targets } = &mut self.batch;
        let mut i = 0;
        let mut busy_since: Option<u64> = None;
        // Asked once per busy spell.
        let mut carrier_asked = false;
        while i < spans.len() {
            match self.tx.send(buf, &spans[i..]) {
                Ok(n) if n > 0 => {
                    let now = monotonic_ns();
                    self.last_ns = now;
                    for k in i..i + n {
                        self.stats.sent += 1;
                        self.stats.bytes += (spans[k].1 - spans[k].0) as u64;
                        if let Some(t) = targets[k] {
                            let late = now.saturating_sub(t);
                            self.stats.lateness.add(late);
                            if late > self.cfg.late_ns {
                                self.stats.late += 1;
                            }
                        }
                    }
                    i += n;
                    busy_since = None;
                    carrier_asked = false;
                }
                Ok(_) => i += 1, // cannot happen (n ≥ 1 for a non-empty batch); never loop
                Err(e) => match e.raw_os_error().unwrap_or(0) {
                    libc_errno::ENOBUFS | libc_errno::EAGAIN => {
                        let now = monotonic_ns();
                        let since = *busy_since.get_or_insert(now);
                        // A full queue drains within microseconds; one that stays
                        // full for long may sit on a link without carrier.
                        if now - since > CARRIER_CHECK_NS
                            && !std::mem::replace(&mut carrier_asked, true)
                            && !self.tx.carrier()
                        {
                            let unsent = spans.len() - i;
                            self.batch.clear();
                            return Err(self.abort(unsent, ReplayError::NoCarrier(self.cfg.ifname.clone())));
                        }
                        if now - since > RETRY_FOR_NS {
                            self.stats.fail(Cause::NoBuffers);
                            i += 1;
                            busy_since = None;
                            carrier_asked = false;
                        } else {
                            self.stats.retries += 1;
                            std::thread::yield_now();
                        }
                    }
                    libc_errno::EMSGSIZE => {
                        self.stats.fail(Cause::TooLong);
                        i += 1;
                    }
                    libc_errno::ENETDOWN | libc_errno::ENXIO | libc_errno::ENODEV => {
                        let unsent = spans.len() - i;
                        self.batch.clear();
                        return Err(self.abort(unsent, ReplayError::InterfaceDown(self.cfg.ifname.clone())));
                    }
                    errno => {
                        self.stats.fail(Cause::Os(errno));
                        i += 1;
                    }
                },
            }
        }
        self.batch.clear();
        Ok(())
    }

    /// Counts the `unsent` packets of the batch as failed (the interface is
    /// down or gone) and returns `e`, which stops the replay.
    fn abort(&mut self, unsent: usize, e: ReplayError) -> ReplayError {
        for _ in 0..unsent {
            self.stats.fail(Cause::Os(libc_errno::ENETDOWN));
        }
        e
    }
}

/// Errno values this module tells apart (Linux, all architectures).
mod libc_errno {
    pub const EAGAIN: i32 = 11;
    pub const ENXIO: i32 = 6;
    pub const ENODEV: i32 = 19;
    pub const EMSGSIZE: i32 = 90;
    pub const ENETDOWN: i32 = 100;
    pub const ENOBUFS: i32 = 105;
}

/// Waits until the monotonic clock reaches `t`: sleeps to `t - SPIN_NS`
/// with an absolute deadline (in steps of at most [`STOP_CHECK_NS`], so
/// that a stop is seen), then spins. False if `stop` was raised.
fn wait_until(t: u64, stop: Option<&AtomicBool>) -> bool {
    loop {
        if stop.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return false;
        }
        let now = monotonic_ns();
        if now >= t {
            return true;
        }
        if t - now > SPIN_NS {
            sleep_until_ns((t - SPIN_NS).min(now + STOP_CHECK_NS));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The longest single sleep: a signal that stops the replay is seen within it.
const STOP_CHECK_NS: u64 = 100_000_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pacing;

    /// Records what was sent and when; refuses frames per a rule.
    struct Fake {
        sent: Vec<(u64, Vec<u8>)>,
        calls: usize,
        refuse: fn(&[u8]) -> Option<i32>,
    }

    impl Transmit for Fake {
        fn send(&mut self, buf: &[u8], spans: &[(usize, usize)]) -> io::Result<usize> {
            self.calls += 1;
            let now = monotonic_ns();
            for (k, &(s, e)) in spans.iter().enumerate() {
                if let Some(errno) = (self.refuse)(&buf[s..e]) {
                    return if k == 0 { Err(io::Error::from_raw_os_error(errno)) } else { Ok(k) };
                }
                self.sent.push((now, buf[s..e].to_vec()));
            }
            Ok(spans.len())
        }
    }

    fn cfg() -> Config {
        Config { ifname: "test0".into(), linktype: 1, mtu: 1500, late_ns: 1_000_000 }
    }

    fn frame(n: u8, len: usize) -> Vec<u8> {
        let mut f = vec![n; len];
        f[12] = 0x08;
        f[13] = 0x00;
        f
    }

    #[test]
    fn topspeed_batches_and_counts_exactly() {
        let fake = Fake { sent: vec![], calls: 0, refuse: |f| (f[0] == 7).then_some(libc_errno::ENETDOWN - 1) };
        let mut r = Replayer::new(fake, cfg(), Pacing::TopSpeed);
        for i in 0..200u32 {
            let len = if i == 5 { 1515 } else { 60 + i as usize };
            r.packet(i as u64, if i == 9 { 101 } else { 1 }, &frame(i as u8, len)).unwrap();
        }
        let s = r.finish().unwrap();
        // 1 too long, 1 wrong link type, frame 7 refused by the fake (errno 99).
        assert_eq!((s.sent, s.failed), (197, 3));
        assert_eq!(s.failures["too long"], 1);
        assert_eq!(s.failures["wrong link type"], 1);
        assert!(s.lateness_ns.is_none());
        let order: Vec<u8> = r.tx.sent.iter().map(|(_, f)| f[0]).collect();
        let want: Vec<u8> = (0..200u32).filter(|i| ![5, 7, 9].contains(i)).map(|i| i as u8).collect();
        assert_eq!(order, want);
        // Full batches: a handful of calls, not one per packet.
        assert!(r.tx.calls <= 200 / BATCH + 4, "{} calls", r.tx.calls);
    }

    #[test]
    fn vlan_tagged_frames_get_four_more_bytes() {
        let mut f = frame(1, 1518);
        assert_eq!(frame_limit(1, 1500, &f), 1514);
        f[12] = 0x81;
        assert_eq!(frame_limit(1, 1500, &f), 1518);
        assert_eq!(frame_limit(101, 1500, &f), 1500);
    }

    #[test]
    fn recorded_timing_is_held() {
        let fake = Fake { sent: vec![], calls: 0, refuse: |_| None };
        let mut r = Replayer::new(fake, cfg(), Pacing::Recorded { speed: 1.0 });
        // 20 packets 2 ms apart, then a burst of 10 at the same time.
        let mut ts: Vec<u64> = (0..20).map(|i| 1_000_000_000 + i * 2_000_000).collect();
        ts.extend(std::iter::repeat_n(1_000_000_000 + 40_000_000, 10));
        // The schedule starts when the first packet is handed over, not before:
        // no packet may leave before this moment plus its recorded offset. (The
        // first packet's own send time is no anchor: a preemption between the
        // start of the schedule and that send makes it late, and every later
        // packet would then look early.)
        let before = monotonic_ns();
        for (i, t) in ts.iter().enumerate() {
            r.packet(*t, 1, &frame(i as u8, 100)).unwrap();
        }
        let s = r.finish().unwrap();
        assert_eq!(s.sent, 30);
        for (i, (at, _)) in r.tx.sent.iter().enumerate() {
            let want = before + (ts[i] - ts[0]);
            assert!(*at >= want, "packet {i} sent {} ns early", want - at);
        }
        let l = s.lateness_ns.expect("paced");
        assert!(l.max >= l.p99 && l.p99 >= l.p50);
        // The whole run lasts the recorded 40 ms at least.
        assert!(s.elapsed_ns >= 40_000_000, "elapsed {}", s.elapsed_ns);
    }
}
