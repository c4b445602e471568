//! The NIC settings `wirevault tune` inspects and changes, through the `SIOCETHTOOL` ioctl:
//! driver and bus (`ETHTOOL_GDRVINFO`), RX/TX queues (`ETHTOOL_GCHANNELS`/`SCHANNELS`), ring
//! sizes (`ETHTOOL_GRINGPARAM`/`SRINGPARAM`), interrupt coalescing (`ETHTOOL_GCOALESCE`) and the
//! offload features by their kernel names (`ETHTOOL_GSSET_INFO` + `GSTRINGS` for the names of
//! `ETH_SS_FEATURES`, `ETHTOOL_GFEATURES`/`SFEATURES` for their state).
//!
//! Why ioctls and not the ethtool generic netlink family: every request here exists as an ioctl
//! on every kernel wirevault runs on, needs a few fixed-size structs and no socket protocol, and
//! answers for the calling thread's network namespace (as [`crate::netif`] does). The netlink
//! crates pull an async runtime into a tool that runs a dozen requests once.
//!
//! Reading needs no privilege; changing needs `CAP_NET_ADMIN`. A driver that does not implement
//! a request answers `EOPNOTSUPP` ([`is_unsupported`]).

use std::io;

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_SRINGPARAM: u32 = 0x11;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
/// The string set of the feature names (`enum ethtool_stringset`).
const ETH_SS_FEATURES: u32 = 4;
/// Bytes per name in a string set.
const ETH_GSTRING_LEN: usize = 32;
/// More feature names than any kernel has (6.x: about 70): bounds the buffers.
const MAX_FEATURES: u32 = 1024;

/// Driver facts (`struct ethtool_drvinfo`).
#[repr(C)]
struct RawDrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `struct ethtool_sset_info` asking for one string set: its count comes back in `data[0]`.
#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: [u32; 2],
}

/// The driver of an interface and where its device sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrvInfo {
    /// Driver name (`ixgbe`, `mlx5_core`, `virtio_net`, `veth`).
    pub driver: String,
    /// Bus address (`0000:03:00.0` for PCI), empty for virtual devices.
    pub bus_info: String,
}

/// RX/TX queue counts and their maxima (`struct ethtool_channels`). A count the driver does not
/// have is 0 (ethtool prints `n/a`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Channels {
    /// The ethtool command word: the functions of this module set it.
    pub cmd: u32,
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_other: u32,
    pub max_combined: u32,
    pub rx: u32,
    pub tx: u32,
    pub other: u32,
    pub combined: u32,
}

impl Channels {
    /// Queues that receive: RX-only plus combined ones.
    pub fn rx_queues(&self) -> u32 {
        self.rx + self.combined
    }
}

/// Ring sizes in descriptors and their maxima (`struct ethtool_ringparam`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rings {
    /// The ethtool command word: the functions of this module set it.
    pub cmd: u32,
    pub rx_max: u32,
    pub rx_mini_max: u32,
    pub rx_jumbo_max: u32,
    pub tx_max: u32,
    pub rx: u32,
    pub rx_mini: u32,
    pub rx_jumbo: u32,
    pub tx: u32,
}

/// Interrupt coalescing (`struct ethtool_coalesce`, all of it; the RX fields are the ones
/// `tune` reads).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coalesce {
    /// The ethtool command word: the functions of this module set it.
    pub cmd: u32,
    pub rx_usecs: u32,
    pub rx_frames: u32,
    pub rx_usecs_irq: u32,
    pub rx_frames_irq: u32,
    pub tx_usecs: u32,
    pub tx_frames: u32,
    pub tx_usecs_irq: u32,
    pub tx_frames_irq: u32,
    pub stats_block_usecs: u32,
    pub adaptive_rx: u32,
    pub adaptive_tx: u32,
    pub pkt_rate_low: u32,
    pub rx_usecs_low: u32,
    pub rx_frames_low: u32,
    pub tx_usecs_low: u32,
    pub tx_frames_low: u32,
    pub pkt_rate_high: u32,
    pub rx_usecs_high: u32,
    pub rx_frames_high: u32,
    pub tx_usecs_high: u32,
    pub tx_frames_high: u32,
    pub rate_sample_interval: u32,
}

/// One offload feature by its kernel name (`rx-gro`, `rx-lro`, `rx-vlan-hw-parse`,
/// `tx-generic-segmentation`, ...; `ethtool -k` shows a few under older names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feature {
    pub name: String,
    /// On now.
    pub active: bool,
    /// Asked for (differs from `active` when a dependency keeps it off).
    pub requested: bool,
    /// The driver lets it be changed (ethtool prints `[fixed]` otherwise).
    pub changeable: bool,
}

/// True for the error a driver gives for a request it does not implement.
pub fn is_unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::EINVAL))
}

/// The driver and bus address of `ifname`.
pub fn drvinfo(ifname: &str) -> io::Result<DrvInfo> {
    // SAFETY: plain C struct of integers and byte arrays; all-zero is valid.
    let mut d: RawDrvInfo = unsafe { std::mem::zeroed() };
    d.cmd = ETHTOOL_GDRVINFO;
    call(ifname, (&mut d as *mut RawDrvInfo).cast())?;
    Ok(DrvInfo { driver: c_string(&d.driver), bus_info: c_string(&d.bus_info) })
}

/// RX/TX queue counts of `ifname`.
pub fn channels(ifname: &str) -> io::Result<Channels> {
    let mut c = Channels { cmd: ETHTOOL_GCHANNELS, ..Channels::default() };
    call(ifname, (&mut c as *mut Channels).cast())?;
    Ok(c)
}

/// Ring sizes of `ifname`.
pub fn rings(ifname: &str) -> io::Result<Rings> {
    let mut r = Rings { cmd: ETHTOOL_GRINGPARAM, ..Rings::default() };
    call(ifname, (&mut r as *mut Rings).cast())?;
    Ok(r)
}

/// Sets the ring sizes of `ifname` (the fields `rx`, `rx_mini`, `rx_jumbo`, `tx` of `want`).
pub fn set_rings(ifname: &str, want: &Rings) -> io::Result<()> {
    let mut r = Rings { cmd: ETHTOOL_SRINGPARAM, ..*want };
    call(ifname, (&mut r as *mut Rings).cast()).map(drop)
}

/// Interrupt coalescing of `ifname`.
pub fn coalesce(ifname: &str) -> io::Result<Coalesce> {
    let mut c = Coalesce { cmd: ETHTOOL_GCOALESCE, ..Coalesce::default() };
    call(ifname, (&mut c as *mut Coalesce).cast())?;
    Ok(c)
}

/// Every named offload feature of `ifname` with its state, in the kernel's order.
pub fn features(ifname: &str) -> io::Result<Vec<Feature>> {
    let names = feature_names(ifname)?;
    let blocks = names.len().div_ceil(32);
    // struct ethtool_gfeatures { u32 cmd; u32 size; struct { u32 available, requested, active,
    // never_changed; } features[size]; }
    let mut buf = vec![0u32; 2 + 4 * blocks];
    buf[0] = ETHTOOL_GFEATURES;
    buf[1] = blocks as u32;
    call(ifname, buf.as_mut_ptr().cast())?;
    Ok(names
        .into_iter()
        .enumerate()
        // Bits the kernel has no name for (unused) are left out.
        .filter(|(_, name)| !name.is_empty())
        .map(|(i, name)| {
            let b = &buf[2 + 4 * (i / 32)..][..4];
            let bit = 1u32 << (i % 32);
            Feature {
                name,
                changeable: b[0] & bit != 0 && b[3] & bit == 0,
                requested: b[1] & bit != 0,
                active: b[2] & bit != 0,
            }
        })
        .collect())
}

/// Asks for each named feature to be on or off (`ethtool -K`). Names the kernel does not have
/// are an `InvalidInput` error naming them; whether the change took is for the caller to read
/// back with [`features`] (the kernel may keep a feature as its dependencies require).
pub fn set_features(ifname: &str, want: &[(&str, bool)]) -> io::Result<()> {
    let names = feature_names(ifname)?;
    let blocks = names.len().div_ceil(32);
    // struct ethtool_sfeatures { u32 cmd; u32 size; struct { u32 valid, requested; } features[size]; }
    let mut buf = vec![0u32; 2 + 2 * blocks];
    buf[0] = ETHTOOL_SFEATURES;
    buf[1] = blocks as u32;
    for (name, on) in want {
        let i = names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no feature named {name}")))?;
        let bit = 1u32 << (i % 32);
        buf[2 + 2 * (i / 32)] |= bit;
        if *on {
            buf[2 + 2 * (i / 32) + 1] |= bit;
        }
    }
    call(ifname, buf.as_mut_ptr().cast()).map(drop)
}

/// The names of the feature bits (`ETH_SS_FEATURES`), index = bit number.
fn feature_names(ifname: &str) -> io::Result<Vec<String>> {
    let mut info = SsetInfo { cmd: ETHTOOL_GSSET_INFO, reserved: 0, sset_mask: 1 << ETH_SS_FEATURES, data: [0; 2] };
    call(ifname, (&mut info as *mut SsetInfo).cast())?;
    // The kernel clears the mask bits of sets it does not have.
    if info.sset_mask & (1 << ETH_SS_FEATURES) == 0 {
        return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
    }
    let count = info.data[0];
    if count == 0 || count > MAX_FEATURES {
        return Err(io::Error::other(format!("the kernel reports {count} feature names")));
    }
    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[len * 32]; }
    let mut buf = vec![0u32; 3 + count as usize * ETH_GSTRING_LEN / 4];
    buf[0] = ETHTOOL_GSTRINGS;
    buf[1] = ETH_SS_FEATURES;
    buf[2] = count;
    call(ifname, buf.as_mut_ptr().cast())?;
    let n = buf[2].min(count) as usize;
    let bytes: Vec<u8> = buf[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
    Ok(bytes.chunks(ETH_GSTRING_LEN).take(n).map(c_string).collect())
}

/// A NUL-terminated (or full) byte array as text.
fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Runs one `SIOCETHTOOL` request for `ifname`; `data` points at the request's struct, whose
/// first `u32` is the command. The `ifreq` and the throw-away socket are netif's
/// ([`crate::netif::ifreq_for`], [`crate::netif::ioctl_on`]); the error keeps its errno
/// (ENODEV for an interface that does not exist, EOPNOTSUPP for a driver that does not say).
fn call(ifname: &str, data: *mut libc::c_void) -> io::Result<()> {
    let errno = |e: crate::error::Error| match e {
        crate::error::Error::Os { source, .. } => source,
        _ => io::Error::from_raw_os_error(libc::ENODEV),
    };
    let mut ifr = crate::netif::ifreq_for(ifname).map_err(errno)?;
    ifr.ifr_ifru.ifru_data = data.cast();
    // SAFETY: SIOCETHTOOL reads the name from the `ifreq` and follows its `ifru_data` to the
    // caller's request struct, which every caller in this module sizes for its command (a fixed
    // struct, or a buffer with the header's count of entries), live and exclusive for the call.
    unsafe { crate::netif::ioctl_on(ifname, libc::SIOCETHTOOL, "an ethtool request (SIOCETHTOOL)", &mut ifr) }
        .map_err(errno)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn layouts_match_the_kernel() {
        assert_eq!(size_of::<RawDrvInfo>(), 196);
        assert_eq!(size_of::<Channels>(), 36);
        assert_eq!(size_of::<Rings>(), 36);
        assert_eq!(size_of::<Coalesce>(), 92);
        assert_eq!(std::mem::offset_of!(SsetInfo, data), 16);
        assert_eq!(std::mem::offset_of!(RawDrvInfo, bus_info), 100);
        assert_eq!(std::mem::offset_of!(Coalesce, adaptive_rx), 40);
    }

    #[test]
    fn loopback_has_features_and_a_driver_name() {
        let f = features("lo").unwrap();
        assert!(f.iter().any(|f| f.name == "rx-gro"), "{f:?}");
        assert!(f.iter().all(|f| !f.name.is_empty()));
        // lo has no driver info, and says so as every driver without a request does.
        if let Err(e) = drvinfo("lo") {
            assert!(is_unsupported(&e), "{e}");
        }
    }

    #[test]
    fn missing_interface_is_enodev() {
        for name in ["wv-no-such-if0", "", "a/b"] {
            let e = features(name).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{name}: {e}");
        }
    }

    #[test]
    fn c_strings() {
        assert_eq!(c_string(b"veth\0\0\0"), "veth");
        assert_eq!(c_string(b"abc"), "abc");
        assert_eq!(c_string(b""), "");
    }
}
