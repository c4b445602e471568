//! Facts about a network interface: index, state, MTU, link type, NUMA node.
//!
//! Everything except [`numa_node`] asks the kernel with `SIOCGIF*` ioctls, which answer for the
//! network namespace of the calling thread. `/sys/class/net` would answer for the namespace that
//! mounted sysfs, which is not the same thing inside containers and in tests that `unshare` a
//! namespace.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::Error;

/// pcap/pcapng link types of interfaces (one table: [`wv_wire::linktype`]).
use wv_wire::linktype;

/// The interface index of `name` (what `if_nametoindex` returns).
pub fn ifindex(name: &str) -> Result<u32, Error> {
    let ifr = ioctl(name, libc::SIOCGIFINDEX, "looking up the interface index")?;
    // SAFETY: SIOCGIFINDEX succeeded, so the kernel filled `ifru_ifindex` (a plain c_int).
    let idx = unsafe { ifr.ifr_ifru.ifru_ifindex };
    Ok(idx as u32)
}

/// Whether the interface is administratively up (`IFF_UP`, what `ip link set X up` sets).
/// Carrier (cable, peer) is not checked: a capture on an up interface without carrier is valid.
pub fn is_up(name: &str) -> Result<bool, Error> {
    Ok(flags(name)? & libc::IFF_UP != 0)
}

/// Whether the interface's link is up (`IFF_RUNNING`: operationally up, a
/// carrier: a cable, or a veth whose peer is up). Frames sent on an
/// interface without one are refused by the driver's queue (ENOBUFS).
pub fn has_carrier(name: &str) -> Result<bool, Error> {
    Ok(flags(name)? & libc::IFF_RUNNING != 0)
}

/// The interface's `IFF_*` flags (the 16 that `SIOCGIFFLAGS` reports).
fn flags(name: &str) -> Result<libc::c_int, Error> {
    let ifr = ioctl(name, libc::SIOCGIFFLAGS, "reading the interface flags")?;
    // SAFETY: SIOCGIFFLAGS succeeded, so the kernel filled `ifru_flags` (a plain c_short).
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    Ok(flags as u16 as libc::c_int)
}

/// The interface MTU in bytes (layer-3 payload; the largest frame is MTU + link header, more with
/// GRO/GSO, which a capture sees as one large packet).
pub fn mtu(name: &str) -> Result<u32, Error> {
    let ifr = ioctl(name, libc::SIOCGIFMTU, "reading the interface MTU")?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel filled `ifru_mtu` (a plain c_int).
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    Ok(mtu as u32)
}

/// The interface hardware type (`ARPHRD_*`, `dev->type`; `/sys/class/net/X/type`).
pub fn arphrd(name: &str) -> Result<u16, Error> {
    let ifr = ioctl(name, libc::SIOCGIFHWADDR, "reading the interface hardware type")?;
    // SAFETY: SIOCGIFHWADDR succeeded, so the kernel filled `ifru_hwaddr` (a plain sockaddr).
    let family = unsafe { ifr.ifr_ifru.ifru_hwaddr.sa_family };
    Ok(family)
}

/// The pcap link type a `SOCK_RAW` capture on `name` produces, or `Ok(None)` when the interface
/// type needs libpcap's "cooked" (`LINKTYPE_LINUX_SLL`) mode, which wirevault does not record.
pub fn linktype_of(name: &str) -> Result<Option<u32>, Error> {
    Ok(linktype_for_arphrd(arphrd(name)?))
}

/// libpcap's `map_arphrd_to_dlt` (pcap-linux.c) for the interface types wirevault records.
pub fn linktype_for_arphrd(arphrd: u16) -> Option<u32> {
    const ARPHRD_ADAPT: u16 = 264;
    const ARPHRD_RAWHDLC: u16 = 518;
    const ARPHRD_DLCI: u16 = 15;
    match arphrd {
        // libpcap captures lo as Ethernet: the loopback device carries a (zero) Ethernet header.
        libc::ARPHRD_ETHER | libc::ARPHRD_LOOPBACK => Some(linktype::ETHERNET),
        // tun (IFF_TUN), wireguard and other header-less devices: packets start at the IP header.
        libc::ARPHRD_NONE => Some(linktype::RAW),
        // ipip/sit tunnels and serial lines: libpcap maps these to DLT_RAW too.
        libc::ARPHRD_TUNNEL
        | libc::ARPHRD_SIT
        | libc::ARPHRD_SLIP
        | libc::ARPHRD_CSLIP
        | libc::ARPHRD_SLIP6
        | libc::ARPHRD_CSLIP6
        | ARPHRD_ADAPT
        | ARPHRD_RAWHDLC
        | ARPHRD_DLCI => Some(linktype::RAW),
        _ => None,
    }
}

/// The NUMA node the interface's device is attached to, from
/// `/sys/class/net/NAME/device/numa_node`; `None` for virtual devices, single-node machines
/// (`-1`) or when sysfs is unavailable. sysfs shows the network namespace that mounted it, so
/// inside another namespace this can describe a different (or no) interface.
pub fn numa_node(name: &str) -> Option<i32> {
    if !valid_name(name) {
        return None;
    }
    let s = std::fs::read_to_string(format!("/sys/class/net/{name}/device/numa_node")).ok()?;
    match s.trim().parse::<i32>() {
        Ok(n) if n >= 0 => Some(n),
        _ => None,
    }
}

/// Whether `name` can be an interface name at all (`dev_valid_name` in the kernel).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < libc::IFNAMSIZ
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace())
}

/// Runs a `SIOCGIF*` ioctl for `name` on a throw-away socket.
fn ioctl(name: &str, req: libc::c_ulong, what: &'static str) -> Result<libc::ifreq, Error> {
    let mut ifr = ifreq_for(name)?;
    // SAFETY: `req` is a SIOCGIF* request, which reads the name from and writes its answer into
    // the `ifreq` itself; it follows no pointer in it.
    unsafe { ioctl_on(name, req, what, &mut ifr)? };
    Ok(ifr)
}

/// An `ifreq` naming interface `name`, everything else zero.
pub(crate) fn ifreq_for(name: &str) -> Result<libc::ifreq, Error> {
    if !valid_name(name) {
        return Err(Error::NoSuchInterface(name.to_owned()));
    }
    // SAFETY: `ifreq` is a plain C struct/union; all-zero bytes are a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &b) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = b as libc::c_char; // NUL-terminated: name.len() < IFNAMSIZ and the rest is zero
    }
    Ok(ifr)
}

/// Runs the interface ioctl `req` with `ifr` (made by [`ifreq_for`] for
/// `name`) on a throw-away socket.
///
/// # Safety
///
/// `req` must be an interface request that reads and writes only the
/// `ifreq`, or whose pointer in it (`ifru_data` for `SIOCETHTOOL`) points at
/// a live, exclusive buffer of the layout the request expects.
pub(crate) unsafe fn ioctl_on(
    name: &str,
    req: libc::c_ulong,
    what: &'static str,
    ifr: &mut libc::ifreq,
) -> Result<(), Error> {
    // Any socket family serves SIOCGIF* and SIOCETHTOOL (the kernel falls back to dev_ioctl);
    // AF_UNIX needs no privilege and exists even when IPv4 is disabled.
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::os("creating a socket for interface ioctls"));
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the `ifreq` is valid and exclusively borrowed; what the request does with it
    // and any buffer it points at is the caller's contract (see # Safety).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, ifr as *mut libc::ifreq) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => Error::NoSuchInterface(name.to_owned()),
            _ => Error::Os { what, source: e },
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_facts() {
        assert_eq!(ifindex("lo").unwrap(), 1);
        assert_eq!(arphrd("lo").unwrap(), libc::ARPHRD_LOOPBACK);
        assert_eq!(linktype_of("lo").unwrap(), Some(linktype::ETHERNET));
        assert!(mtu("lo").unwrap() >= 1280);
        assert_eq!(numa_node("lo"), None);
    }

    #[test]
    fn missing_interface_is_named() {
        for name in ["wv-no-such-if0", "", "a/b", "..", "0123456789abcdefg"] {
            match ifindex(name) {
                Err(Error::NoSuchInterface(n)) => assert_eq!(n, name),
                other => panic!("{name:?}: {other:?}"),
            }
        }
        let msg = ifindex("wv-no-such-if0").unwrap_err().to_string();
        assert_eq!(msg, "no network interface named wv-no-such-if0; `ip link` lists them");
    }

    #[test]
    fn linktype_map() {
        assert_eq!(linktype_for_arphrd(libc::ARPHRD_ETHER), Some(1));
        assert_eq!(linktype_for_arphrd(libc::ARPHRD_LOOPBACK), Some(1));
        assert_eq!(linktype_for_arphrd(libc::ARPHRD_NONE), Some(101));
        assert_eq!(linktype_for_arphrd(libc::ARPHRD_SIT), Some(101));
        assert_eq!(linktype_for_arphrd(libc::ARPHRD_TUNNEL), Some(101));
        assert_eq!(linktype_for_arphrd(libc::ARPHRD_IEEE80211_RADIOTAP), None);
        assert_eq!(linktype_for_arphrd(libc::ARPHRD_PPP), None);
    }
}
