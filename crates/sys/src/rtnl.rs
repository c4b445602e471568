//! Two dumps over rtnetlink, for the calling thread's network namespace:
//! the interfaces with their master and lower device ([`links`]), and the
//! interfaces a default route leaves by, in every routing table, multipath
//! next hops included ([`default_route_ifindexes`]). `/proc/net/route`
//! shows the main table and the first next hop of a multipath route only.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One interface as [`links`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// The bridge, bond or team it is a port of (`IFLA_MASTER`).
    pub master: Option<u32>,
    /// The device it sits on (`IFLA_LINK`: a VLAN's or macvlan's lower
    /// device), in this namespace; None for a veth (whose link is its peer)
    /// and where the link is itself.
    pub lower: Option<u32>,
}

const NLMSG_HDR: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINK: u16 = 5;
const IFLA_MASTER: u16 = 10;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_LINK_NETNSID: u16 = 37;
const RTA_OIF: u16 = 4;
const RTA_MULTIPATH: u16 = 9;
const RTN_UNICAST: u8 = 1;
/// `struct ifinfomsg` and `struct rtmsg`.
const IFINFOMSG_LEN: usize = 16;
const RTMSG_LEN: usize = 12;

/// Every interface of the namespace.
pub fn links() -> io::Result<Vec<Link>> {
    let mut out = Vec::new();
    dump(RTM_GETLINK, &[0u8; IFINFOMSG_LEN], |ty, body| {
        if ty != RTM_NEWLINK || body.len() < IFINFOMSG_LEN {
            return;
        }
        let index = u32::from_ne_bytes(body[4..8].try_into().expect("4 bytes"));
        let mut l = Link { index, name: String::new(), master: None, lower: None };
        let (mut link, mut other_ns, mut veth) = (None, false, false);
        for (t, v) in attrs(&body[IFINFOMSG_LEN..]) {
            match t {
                IFLA_IFNAME => l.name = String::from_utf8_lossy(v.split(|&b| b == 0).next().unwrap_or(v)).into_owned(),
                IFLA_MASTER => l.master = u32_of(v),
                IFLA_LINK => link = u32_of(v),
                IFLA_LINK_NETNSID => other_ns = true,
                IFLA_LINKINFO => {
                    veth = attrs(v).any(|(t, k)| t == IFLA_INFO_KIND && k.split(|&b| b == 0).next() == Some(b"veth"))
                }
                _ => {}
            }
        }
        l.lower = link.filter(|&k| k != index && k != 0 && !other_ns && !veth);
        out.push(l);
    })?;
    Ok(out)
}

/// Interface indexes that a usable default route (to 0.0.0.0/0 or ::/0,
/// or half the address space, a /1, as VPNs route it; of type unicast: not
/// unreachable, blackhole or prohibit) leaves by, in any table (sorted, no
/// repeats).
pub fn default_route_ifindexes() -> io::Result<Vec<u32>> {
    let mut out = Vec::new();
    dump(RTM_GETROUTE, &[0u8; RTMSG_LEN], |ty, body| {
        if ty != RTM_NEWROUTE || body.len() < RTMSG_LEN {
            return;
        }
        // rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
        // A /1 counts as a default: VPNs (OpenVPN's def1) route the whole
        // address space as 0.0.0.0/1 and 128.0.0.0/1 (::/1 and 8000::/1).
        if body[1] > 1 || body[7] != RTN_UNICAST {
            return;
        }
        for (t, v) in attrs(&body[RTMSG_LEN..]) {
            match t {
                RTA_OIF => out.extend(u32_of(v)),
                RTA_MULTIPATH => {
                    // struct rtnexthop: len u16, flags u8, hops u8, ifindex i32, then attributes.
                    let mut rest = v;
                    while rest.len() >= 8 {
                        let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
                        out.extend(u32_of(&rest[4..8]));
                        if len < 8 {
                            break;
                        }
                        rest = rest.get(align(len)..).unwrap_or(&[]);
                    }
                }
                _ => {}
            }
        }
    })?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

const fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// The `(type, value)` attributes (`struct rtattr`) in `b`; stops at the
/// first malformed one.
fn attrs(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut rest = b;
    std::iter::from_fn(move || {
        if rest.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        let ty = u16::from_ne_bytes([rest[2], rest[3]]) & 0x3fff; // without NLA_F_NESTED / NET_BYTEORDER
        if len < 4 || len > rest.len() {
            return None;
        }
        let v = &rest[4..len];
        rest = rest.get(align(len)..).unwrap_or(&[]);
        Some((ty, v))
    })
}

/// Sends a dump request of type `ty` with `payload` (an all-zero header:
/// every family, every interface) and hands each answer's type and body
/// to `each` until the kernel says it is done.
fn dump(ty: u16, payload: &[u8], mut each: impl FnMut(u16, &[u8])) -> io::Result<()> {
    // SAFETY: plain socket(2); the descriptor is owned right after.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = Vec::with_capacity(NLMSG_HDR + payload.len());
    req.extend_from_slice(&((NLMSG_HDR + payload.len()) as u32).to_ne_bytes());
    req.extend_from_slice(&ty.to_ne_bytes());
    req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    req.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel's
    req.extend_from_slice(payload);
    // SAFETY: `req` is a valid buffer of its length; the socket is ours.
    let n = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut rest = &buf[..n as usize];
        if rest.is_empty() {
            return Ok(());
        }
        while rest.len() >= NLMSG_HDR {
            let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
            let mty = u16::from_ne_bytes([rest[4], rest[5]]);
            if len < NLMSG_HDR || len > rest.len() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed netlink answer"));
            }
            let body = &rest[NLMSG_HDR..len];
            match mty {
                NLMSG_DONE => return Ok(()),
                NLMSG_ERROR => {
                    let code = body.get(..4).map_or(0, |c| i32::from_ne_bytes(c.try_into().expect("4 bytes")));
                    if code != 0 {
                        return Err(io::Error::from_raw_os_error(-code));
                    }
                }
                _ => each(mty, body),
            }
            rest = rest.get(align(len)..).unwrap_or(&[]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed_without_master_or_lower() {
        let l = links().unwrap();
        let lo = l.iter().find(|l| l.name == "lo").expect("lo in the dump");
        assert_eq!((lo.index, lo.master, lo.lower), (1, None, None));
    }

    #[test]
    fn default_routes_match_proc_net_route() {
        // Every IPv4 default of the main table (/proc/net/route) is in the dump.
        let dump = default_route_ifindexes().unwrap();
        let names: std::collections::HashMap<u32, String> =
            links().unwrap().into_iter().map(|l| (l.index, l.name)).collect();
        let text = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let flags = u32::from_str_radix(f[3], 16).unwrap();
            if f[1] == "00000000" && f[7] == "00000000" && flags & 0x0001 != 0 && flags & 0x0200 == 0 {
                assert!(
                    dump.iter().any(|i| names.get(i).map(String::as_str) == Some(f[0])),
                    "{} not in {dump:?}",
                    f[0]
                );
            }
        }
    }

    #[test]
    fn attributes_stop_at_a_bad_length() {
        let b = [8u8, 0, 3, 0, b'e', b't', b'h', 0, 200, 0, 5, 0];
        let v: Vec<_> = attrs(&b).collect();
        assert_eq!(v, vec![(3u16, &b"eth\0"[..])]);
    }
}
