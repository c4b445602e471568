//! Where packet timestamps come from: the kernel's clock source and what a
//! NIC offers for stamping (`ETHTOOL_GET_TS_INFO`, as `ethtool -T` shows).
//!
//! The ioctl answers for the network namespace of the calling thread (as
//! [`crate::netif`]); the clock source is the system's.

use std::io;

use crate::error::Error;

/// `ETHTOOL_GET_TS_INFO` (include/uapi/linux/ethtool.h).
const ETHTOOL_GET_TS_INFO: u32 = 0x0000_0041;

/// `struct ethtool_ts_info` (include/uapi/linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// What a NIC's driver says about timestamping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsInfo {
    /// `SOF_TIMESTAMPING_*` capability bits.
    pub so_timestamping: u32,
    /// The PTP hardware clock's index (`/dev/ptpN`), if it has one.
    pub phc_index: Option<u32>,
    /// `HWTSTAMP_TX_*` modes, as a bit set (bit n = mode n).
    pub tx_types: u32,
    /// `HWTSTAMP_FILTER_*` receive filters, as a bit set.
    pub rx_filters: u32,
}

/// Names of the `SOF_TIMESTAMPING_*` capability bits (as `ethtool -T` prints them).
const CAPABILITIES: [(u32, &str); 7] = [
    (libc::SOF_TIMESTAMPING_TX_HARDWARE, "hardware-transmit"),
    (libc::SOF_TIMESTAMPING_TX_SOFTWARE, "software-transmit"),
    (libc::SOF_TIMESTAMPING_RX_HARDWARE, "hardware-receive"),
    (libc::SOF_TIMESTAMPING_RX_SOFTWARE, "software-receive"),
    (libc::SOF_TIMESTAMPING_SOFTWARE, "software-system-clock"),
    (libc::SOF_TIMESTAMPING_SYS_HARDWARE, "hardware-legacy-clock"),
    (libc::SOF_TIMESTAMPING_RAW_HARDWARE, "hardware-raw-clock"),
];

/// Names of the `HWTSTAMP_FILTER_*` receive filters, by number.
const RX_FILTERS: [&str; 16] = [
    "none",
    "all",
    "some",
    "ptpv1-l4-event",
    "ptpv1-l4-sync",
    "ptpv1-l4-delay-req",
    "ptpv2-l4-event",
    "ptpv2-l4-sync",
    "ptpv2-l4-delay-req",
    "ptpv2-l2-event",
    "ptpv2-l2-sync",
    "ptpv2-l2-delay-req",
    "ptpv2-event",
    "ptpv2-sync",
    "ptpv2-delay-req",
    "ntp-all",
];

impl TsInfo {
    /// The capability names, in `ethtool -T`'s order.
    pub fn capabilities(&self) -> Vec<&'static str> {
        CAPABILITIES.iter().filter(|(bit, _)| self.so_timestamping & bit != 0).map(|(_, n)| *n).collect()
    }

    /// The receive filter names.
    pub fn rx_filter_names(&self) -> Vec<String> {
        (0..32)
            .filter(|i| self.rx_filters & (1 << i) != 0)
            .map(|i| RX_FILTERS.get(i).map_or_else(|| format!("filter-{i}"), |s| s.to_string()))
            .collect()
    }

    /// The NIC stamps received packets in hardware.
    pub fn hardware_receive(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_RX_HARDWARE != 0
            && self.so_timestamping & libc::SOF_TIMESTAMPING_RAW_HARDWARE != 0
            && self.rx_filters & !1 != 0
    }
}

/// Asks the driver of interface `name` what timestamping it offers.
pub fn ts_info(name: &str) -> Result<TsInfo, Error> {
    let mut info = EthtoolTsInfo { cmd: ETHTOOL_GET_TS_INFO, ..Default::default() };
    let mut ifr = crate::netif::ifreq_for(name)?;
    ifr.ifr_ifru.ifru_data = (&mut info as *mut EthtoolTsInfo).cast();
    // SAFETY: SIOCETHTOOL with ETHTOOL_GET_TS_INFO reads the name from the `ifreq` and writes a
    // `struct ethtool_ts_info` through `ifru_data`, which points at `info`: a live, exclusive,
    // correctly laid out (repr(C), size checked by a test) value that outlives the call.
    unsafe {
        crate::netif::ioctl_on(
            name,
            libc::SIOCETHTOOL,
            "asking the driver for its timestamping capabilities (ETHTOOL_GET_TS_INFO)",
            &mut ifr,
        )?
    };
    Ok(TsInfo {
        so_timestamping: info.so_timestamping,
        phc_index: u32::try_from(info.phc_index).ok(),
        tx_types: info.tx_types,
        rx_filters: info.rx_filters,
    })
}

/// Turns on hardware stamping of every received packet on interface `name`
/// (`SIOCSHWTSTAMP` with `HWTSTAMP_FILTER_ALL`; transmit stamping off), as
/// `hwstamp_ctl -r 1` or tcpdump's `-j adapter_unsynced` do. Returns the
/// receive filter the driver put in place (it may widen the request, never
/// narrow it without failing). The setting is the NIC's, for every program,
/// and stays after the recording ends (as with tcpdump); it only adds stamps.
/// Needs `CAP_NET_ADMIN`; a driver without hardware stamping fails with
/// `Os` (`EOPNOTSUPP`, `EINVAL` or `ERANGE`).
pub fn enable_hw_rx(name: &str) -> Result<u32, Error> {
    let mut cfg = libc::hwtstamp_config {
        flags: 0,
        tx_type: libc::HWTSTAMP_TX_OFF as libc::c_int,
        rx_filter: libc::HWTSTAMP_FILTER_ALL as libc::c_int,
    };
    let mut ifr = crate::netif::ifreq_for(name)?;
    ifr.ifr_ifru.ifru_data = (&mut cfg as *mut libc::hwtstamp_config).cast();
    // SAFETY: SIOCSHWTSTAMP reads the name from the `ifreq` and reads and writes back a
    // `struct hwtstamp_config` through `ifru_data`, which points at `cfg`: a live, exclusive,
    // correctly laid out value (libc's definition, three ints) that outlives the call.
    unsafe {
        crate::netif::ioctl_on(
            name,
            libc::SIOCSHWTSTAMP,
            "turning on hardware receive timestamps (SIOCSHWTSTAMP)",
            &mut ifr,
        )?
    };
    Ok(cfg.rx_filter as u32)
}

/// The kernel's clock sources: the current one and the available ones
/// (`/sys/devices/system/clocksource/clocksource0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockSource {
    pub current: String,
    pub available: Vec<String>,
}

/// Reads the clock source from sysfs.
pub fn clock_source() -> io::Result<ClockSource> {
    let dir = std::path::Path::new("/sys/devices/system/clocksource/clocksource0");
    let current = std::fs::read_to_string(dir.join("current_clocksource"))?.trim().to_string();
    let available =
        std::fs::read_to_string(dir.join("available_clocksource"))?.split_whitespace().map(str::to_string).collect();
    Ok(ClockSource { current, available })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_kernel() {
        // struct ethtool_ts_info: 11 u32-sized fields.
        assert_eq!(std::mem::size_of::<EthtoolTsInfo>(), 44);
        assert_eq!(std::mem::offset_of!(EthtoolTsInfo, rx_filters), 28);
    }

    #[test]
    fn loopback_stamps_in_software() {
        // Every Linux interface reports software stamping (the core adds it).
        let info = ts_info("lo").expect("ETHTOOL_GET_TS_INFO on lo");
        assert!(info.capabilities().contains(&"software-receive"), "{info:?}");
        assert!(!info.hardware_receive());
        assert!(matches!(ts_info("no-such-if0"), Err(Error::NoSuchInterface(_))));
        assert!(matches!(ts_info("a/b"), Err(Error::NoSuchInterface(_))));
    }

    #[test]
    fn loopback_refuses_hardware_stamping() {
        // lo has no hardware clock: the driver has no SIOCSHWTSTAMP (or it is not root).
        assert!(matches!(enable_hw_rx("lo"), Err(Error::Os { .. })));
        assert!(matches!(enable_hw_rx("no-such-if0"), Err(Error::NoSuchInterface(_))));
    }

    #[test]
    fn clock_source_is_one_of_the_available() {
        let c = clock_source().expect("sysfs clocksource");
        assert!(c.available.contains(&c.current), "{c:?}");
    }

    #[test]
    fn names() {
        let i = TsInfo { so_timestamping: 0b101_1000, phc_index: None, tx_types: 0, rx_filters: 0b11 };
        assert_eq!(i.capabilities(), vec!["software-receive", "software-system-clock", "hardware-raw-clock"]);
        assert_eq!(i.rx_filter_names(), vec!["none", "all"]);
    }
}
