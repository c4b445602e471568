//! Link-layer header types: the LINKTYPE_* numbers files carry, and the
//! one table that maps them to the DLT_* numbers libpcap's filter compiler
//! takes (`linktype_to_dlt` in libpcap's pcap-common.c, as on Linux).
//!
//! Files never hold DLT_* values because some differ between systems; for
//! most link types the two numbers are equal. Every filter compiled for a
//! file goes through [`to_dlt`] (`tcpdump -r` does the same when it opens a
//! savefile), so a raw-IP capture (LINKTYPE_RAW, 101) is filtered as DLT_RAW.

/// Ethernet (LINKTYPE_ETHERNET = DLT_EN10MB).
pub const ETHERNET: u32 = 1;
/// Raw IPv4/IPv6, no link-layer header (tun interfaces, some tunnels).
pub const RAW: u32 = 101;
/// Linux "cooked" capture, version 1.
pub const LINUX_SLL: u32 = 113;
/// Raw IPv4, no link-layer header.
pub const IPV4: u32 = 228;
/// Raw IPv6, no link-layer header.
pub const IPV6: u32 = 229;
/// D-Bus messages (records up to 128 MiB).
pub const DBUS: u32 = 231;
/// USB packets as USBPcap captures them (records up to 1 MiB).
pub const USBPCAP: u32 = 249;
/// Automotive bus traffic, EBHSCR (records up to 8 MiB).
pub const EBHSCR: u32 = 279;

/// Largest caplen libpcap accepts for a link type (`max_snaplen_for_dlt`).
pub fn max_snaplen(linktype: u32) -> u32 {
    match linktype {
        DBUS => 128 << 20,
        EBHSCR => 8 << 20,
        USBPCAP => 1 << 20,
        _ => crate::MAX_SNAPLEN,
    }
}

/// The snapshot length libpcap uses for a file or interface
/// (`pcap_adjust_snapshot`): zero or oversized means the link type's maximum.
pub fn effective_snaplen(linktype: u32, snaplen: u32) -> u32 {
    let max = max_snaplen(linktype);
    if snaplen == 0 || snaplen > max {
        max
    } else {
        snaplen
    }
}

/// Classical IP over ATM: in the matching range, but DLT_ATM_CLIP is 19
/// (libpcap excludes it from the identity range and maps it in `map[]`).
pub const ATM_CLIP: u32 = 106;

/// Lowest and highest LINKTYPE_* values whose DLT_* value is the same number
/// (`LINKTYPE_MATCHING_MIN`/`MAX`; the upper end is open here, as libpcap
/// passes unknown values through unchanged anyway), except [`ATM_CLIP`].
const MATCHING_MIN: u32 = 104;

/// LINKTYPE_* → DLT_* for the values that differ on Linux (libpcap's
/// `map[]`; the identical pairs below 104 are omitted). libpcap's other
/// exceptions in the matching range, LINKTYPE_PFSYNC (246) and
/// LINKTYPE_PKTAP (258), map to DLTs that are the same numbers on Linux.
const MAP: &[(u32, i32)] = &[
    (100, 11), // LINKTYPE_ATM_RFC1483 → DLT_ATM_RFC1483
    (101, 12), // LINKTYPE_RAW → DLT_RAW
    (102, 15), // LINKTYPE_SLIP_BSDOS → DLT_SLIP_BSDOS
    (103, 16), // LINKTYPE_PPP_BSDOS → DLT_PPP_BSDOS
    (106, 19), // LINKTYPE_ATM_CLIP → DLT_ATM_CLIP
];

/// The libpcap DLT_* value for a file's LINKTYPE_* value, on Linux.
/// Values in the matching range (104 and up, including LINKTYPE_PFSYNC 246
/// and LINKTYPE_PKTAP 258, whose DLTs are the same numbers on Linux) and
/// unknown values come back unchanged, as libpcap returns them.
pub fn to_dlt(linktype: u32) -> i32 {
    // libpcap masks the class bits of the header's link-type field (LT_LINKTYPE).
    let lt = linktype & 0x03ff_ffff;
    if lt >= MATCHING_MIN && lt != ATM_CLIP {
        return lt as i32;
    }
    MAP.iter().find(|(l, _)| *l == lt).map_or(lt as i32, |(_, d)| *d)
}

/// The name of a LINKTYPE_* value as tcpdump's `link-type` line and
/// capinfos say it in words, for the common ones (`None` for the rest).
pub fn name(linktype: u32) -> Option<&'static str> {
    Some(match linktype {
        0 => "BSD loopback",
        ETHERNET => "Ethernet",
        9 => "PPP",
        RAW => "raw IP",
        105 => "IEEE 802.11",
        LINUX_SLL => "Linux cooked (SLL)",
        127 => "IEEE 802.11 radiotap",
        IPV4 => "raw IPv4",
        IPV6 => "raw IPv6",
        276 => "Linux cooked v2 (SLL2)",
        _ => return None,
    })
}

/// A link type for a sentence: `101 (raw IP)`, or the number alone.
pub fn describe(linktype: u32) -> String {
    match name(linktype) {
        Some(n) => format!("{linktype} ({n})"),
        None => linktype.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(describe(RAW), "101 (raw IP)");
        assert_eq!(describe(LINUX_SLL), "113 (Linux cooked (SLL))");
        assert_eq!(describe(147), "147");
    }

    #[test]
    fn atm_rfc1483() {
        assert_eq!(to_dlt(100), 11);
    }

    #[test]
    fn raw() {
        assert_eq!(to_dlt(RAW), 12);
    }

    #[test]
    fn slip_bsdos() {
        assert_eq!(to_dlt(102), 15);
    }

    #[test]
    fn ppp_bsdos() {
        assert_eq!(to_dlt(103), 16);
    }

    #[test]
    fn atm_clip() {
        // In the matching range, but libpcap maps it: "DLT 106 ... not implemented" otherwise.
        assert_eq!(to_dlt(ATM_CLIP), 19);
        assert_eq!(to_dlt(ATM_CLIP | 0x0400_0000), 19);
    }

    #[test]
    fn pfsync_and_pktap_are_identity_on_linux() {
        assert_eq!(to_dlt(246), 246);
        assert_eq!(to_dlt(258), 258);
    }

    #[test]
    fn libpcap_mapping_on_linux() {
        assert_eq!(to_dlt(ETHERNET), 1);
        assert_eq!(to_dlt(0), 0); // LINKTYPE_NULL
        assert_eq!(to_dlt(RAW), 12);
        assert_eq!(to_dlt(100), 11);
        assert_eq!(to_dlt(102), 15);
        assert_eq!(to_dlt(103), 16);
        assert_eq!(to_dlt(104), 104);
        assert_eq!(to_dlt(LINUX_SLL), 113);
        assert_eq!(to_dlt(IPV4), 228);
        assert_eq!((effective_snaplen(ETHERNET, 0), effective_snaplen(DBUS, 0)), (262_144, 128 << 20));
        assert_eq!((effective_snaplen(ETHERNET, 300_000), effective_snaplen(RAW, 96)), (262_144, 96));
        assert_eq!(to_dlt(50), 50); // LINKTYPE_PPP_HDLC
        assert_eq!(to_dlt(RAW | 0x0400_0000), 12);
    }
}
