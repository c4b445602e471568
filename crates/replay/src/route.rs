//! The interfaces that carry a default route, from `/proc/net/route` (IPv4)
//! and `/proc/net/ipv6_route` (IPv6), as the calling process's network
//! namespace sees them. Sending test traffic out of such an interface
//! reaches the real network, so `replay` refuses it without `--force`.
//!
//! A default route is one to 0.0.0.0/0 or ::/0 that is up and not a reject
//! route (the kernel's "unreachable" defaults on `lo` are reject routes).
//! `/proc/net/route` shows the first next hop of a multipath IPv4 route
//! only; routes in other tables than main are not listed there.

use std::io;

const RTF_UP: u32 = 0x0001;
const RTF_REJECT: u32 = 0x0200;

/// Interface names with a default route (sorted, no repeats). A missing
/// file (IPv6 disabled) counts as no routes.
pub fn default_route_interfaces() -> io::Result<Vec<String>> {
    let read = |p: &str| match std::fs::read_to_string(p) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e),
    };
    let mut v = ipv4_defaults(&read("/proc/net/route")?);
    v.extend(ipv6_defaults(&read("/proc/net/ipv6_route")?));
    v.sort();
    v.dedup();
    Ok(v)
}

/// Default routes in `/proc/net/route` text: `Iface Destination Gateway
/// Flags RefCnt Use Metric Mask ...` (hex fields), after a header line.
pub fn ipv4_defaults(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            let default = *f.get(1)? == "00000000" && *f.get(7)? == "00000000";
            (default && flags & RTF_UP != 0 && flags & RTF_REJECT == 0).then(|| f[0].to_owned())
        })
        .collect()
}

/// Default routes in `/proc/net/ipv6_route` text: `dest plen src plen
/// nexthop metric refcnt use flags device`, no header.
pub fn ipv6_defaults(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            let flags = u32::from_str_radix(f[8], 16).ok()?;
            let default = f[0].bytes().all(|b| b == b'0') && f[1] == "00";
            (default && flags & RTF_UP != 0 && flags & RTF_REJECT == 0 && f[9] != "lo").then(|| f[9].to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_default_found() {
        let t = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                 eth0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                 eth0\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n\
                 wg0\t00000000\t00000000\t0201\t0\t0\t0\t00000000\t0\t0\t0\n\
                 dock\t00000000\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n";
        assert_eq!(ipv4_defaults(t), ["eth0"]);
        assert!(ipv4_defaults("Iface\tDestination\n").is_empty());
    }

    #[test]
    fn ipv6_default_found_reject_on_lo_ignored() {
        let t = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth1\n\
                 fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth1\n\
                 00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert_eq!(ipv6_defaults(t), ["eth1"]);
    }
}
