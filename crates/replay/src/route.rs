//! Whether sending on an interface would reach the real network: it, or
//! a device it is bridged, bonded or stacked with (a port's bridge or bond,
//! a VLAN's or macvlan's lower device, their other ports and upper
//! devices), carries a default route, as the calling process's network
//! namespace sees it. `replay` refuses such an interface without `--force`.
//!
//! A default route is one to 0.0.0.0/0 or ::/0, or to a /1 (VPNs route
//! everything as two halves), of type unicast (the kernel's "unreachable"
//! defaults on `lo` are not), in any routing table,
//! every next hop of a multipath route (rtnetlink, [`wv_sys::rtnl`]). Where
//! rtnetlink cannot be read, `/proc/net/route` and `/proc/net/ipv6_route`
//! answer for the interface alone: they list the main table only, and the
//! first next hop of a multipath IPv4 route.

use std::io;

const RTF_UP: u32 = 0x0001;
const RTF_REJECT: u32 = 0x0200;

/// The device whose default route sending on `ifname` would follow onto
/// the real network (`ifname` itself, or one it is bridged, bonded or
/// stacked with), or None.
pub fn default_route_reach(ifname: &str) -> io::Result<Option<String>> {
    let (links, defaults) = match (wv_sys::rtnl::links(), wv_sys::rtnl::default_route_ifindexes()) {
        (Ok(l), Ok(d)) => (l, d),
        _ => return Ok(default_route_interfaces()?.into_iter().find(|d| d == ifname)),
    };
    // By index: the kernel resolves alternative names (`ip link property
    // add ... altname`, which udev gives many NICs) that the links' names
    // do not list; a name it cannot resolve is refused, never let through.
    let start = wv_sys::netif::ifindex(ifname).map_err(|e| io::Error::other(e.to_string()))?;
    // The interface itself is named as the user named it.
    let own = |n: &String| links.iter().any(|l| l.index == start && l.name == *n);
    Ok(reach(&links, &defaults, start).map(|n| if own(&n) { ifname.to_string() } else { n }))
}

/// The first device (by breadth from `start`: itself first) in `start`'s
/// group of linked devices that carries a default route. Two devices are
/// linked when one is the other's master or lower device.
pub fn reach(links: &[wv_sys::rtnl::Link], defaults: &[u32], start: u32) -> Option<String> {
    let name = |i: u32| links.iter().find(|l| l.index == i).map(|l| l.name.clone());
    let mut seen = vec![start];
    let mut at = 0;
    while let Some(&i) = seen.get(at) {
        if defaults.contains(&i) {
            return name(i).or_else(|| Some(format!("interface {i}")));
        }
        for l in links {
            let next = if l.index == i {
                [l.master, l.lower]
            } else if l.master == Some(i) || l.lower == Some(i) {
                [Some(l.index), None]
            } else {
                continue;
            };
            for n in next.into_iter().flatten() {
                if !seen.contains(&n) {
                    seen.push(n);
                }
            }
        }
        at += 1;
    }
    None
}

/// Interface names with a default route in the main table, from `/proc`
/// (sorted, no repeats). A missing file (IPv6 disabled) counts as no routes.
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
    fn bridge_ports_vlans_and_bonds_reach_their_group_s_default_route() {
        use wv_sys::rtnl::Link;
        let l = |index, name: &str, master, lower| Link { index, name: name.into(), master, lower };
        // eth0 and veth1 are ports of br0 (default route); eth0.7 sits on eth0;
        // eth1 is a port of bond0, whose VLAN bond0.9 carries a default route;
        // veth2 is alone.
        let links = [
            l(2, "eth0", Some(10), None),
            l(3, "veth1", Some(10), None),
            l(10, "br0", None, None),
            l(4, "eth0.7", None, Some(2)),
            l(5, "eth1", Some(11), None),
            l(11, "bond0", None, None),
            l(12, "bond0.9", None, Some(11)),
            l(6, "veth2", None, None),
        ];
        let defaults = [10, 12];
        for (dev, via) in
            [(2, Some("br0")), (3, Some("br0")), (10, Some("br0")), (4, Some("br0")), (5, Some("bond0.9")), (6, None)]
        {
            assert_eq!(reach(&links, &defaults, dev).as_deref(), via, "{dev}");
        }
        assert_eq!(reach(&links, &[6], 6).as_deref(), Some("veth2"));
    }

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
