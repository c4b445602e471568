//! Fixtures shared by the integration tests, one module per concern: the real
//! binary and its processes ([`process`]), what the machine offers
//! ([`env`]), temp directories ([`temp`]), a pair of network namespaces
//! joined by a veth pair ([`netns`]), test frames and the pcap files that
//! carry them ([`frames`]), reading captures back ([`captures`]), the checks
//! every store must pass ([`store`]), a recorder process handle
//! ([`recorder`]), HTTP through curl ([`http`]), loop-mounted file systems
//! ([`loopfs`]) and the fleet lab of `scripts/fleet-lab.sh` ([`fleet_lab`]). Everything public is re-exported here, so that a test names
//! a helper `crate::util::NAME` wherever it lives.
//!
//! The tests compare what wirevault stored with what was sent by reading the
//! stored files with the project's own reader (`wv_wire::reader`) *and* by
//! having tcpdump/capinfos open them: a file that our reader accepts but
//! Wireshark's or libpcap's rejects is a bug too.
//!
//! Tests that need root or outside tools skip with a printed `SKIP` line when
//! those are missing, except under CI (`CI=true`), where `scripts/install-deps.sh`
//! has installed every tool and a missing one is a failure.
#![allow(dead_code)]

mod captures;
mod env;
mod fleet_lab;
mod frames;
mod http;
mod loopfs;
mod netns;
mod process;
mod recorder;
mod store;
mod temp;

pub use self::captures::*;
pub use self::env::*;
pub use self::fleet_lab::*;
pub use self::frames::*;
pub use self::http::*;
pub use self::loopfs::*;
pub use self::netns::*;
pub use self::process::*;
pub use self::recorder::*;
pub use self::store::*;
pub use self::temp::*;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A time in ns as `--from`/`--to` take it: epoch seconds with nine decimals.
pub fn time_arg(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Wall clock in nanoseconds since the epoch.
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

static UNIQUE: AtomicU32 = AtomicU32::new(0);

/// A per-process unique number for names of temp dirs and namespaces.
pub fn unique() -> u32 {
    UNIQUE.fetch_add(1, Ordering::Relaxed)
}

/// SplitMix64: a fixed sequence of pseudo-random numbers for a seed, so that
/// a failing random test can be replayed from the seed it prints.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// In `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}
