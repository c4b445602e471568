//! AF_PACKET rings against the real kernel. Needs root (CAP_NET_ADMIN for namespaces, CAP_NET_RAW
//! for packet sockets); skips with a message otherwise.
//!
//! Every test runs on its own thread inside a fresh network namespace (`unshare(CLONE_NEWNET)`
//! affects only the calling thread), so no other traffic reaches the interfaces and nothing
//! outlives the test: the namespace and its veth devices vanish with the thread and its sockets.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wv_sys::afpacket::{Error, Fanout, FanoutMode, FilteredCounter, Ring, RingConfig, Vlan};
use wv_sys::{bpf, netif};

/// `tcpdump -dd 'udp port 5555'` (Ethernet).
const UDP_5555: [(u16, u8, u8, u32); 20] = [
    (0x28, 0, 0, 0x0000000c),
    (0x15, 0, 6, 0x000086dd),
    (0x30, 0, 0, 0x00000014),
    (0x15, 0, 15, 0x00000011),
    (0x28, 0, 0, 0x00000036),
    (0x15, 12, 0, 0x000015b3),
    (0x28, 0, 0, 0x00000038),
    (0x15, 10, 11, 0x000015b3),
    (0x15, 0, 10, 0x00000800),
    (0x30, 0, 0, 0x00000017),
    (0x15, 0, 8, 0x00000011),
    (0x28, 0, 0, 0x00000014),
    (0x45, 6, 0, 0x00001fff),
    (0xb1, 0, 0, 0x0000000e),
    (0x48, 0, 0, 0x0000000e),
    (0x15, 2, 0, 0x000015b3),
    (0x48, 0, 0, 0x00000010),
    (0x15, 0, 1, 0x000015b3),
    (0x6, 0, 0, 0x00040000),
    (0x6, 0, 0, 0x00000000),
];

fn udp_5555() -> Vec<libc::sock_filter> {
    UDP_5555.iter().map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k }).collect()
}

fn cfg() -> RingConfig {
    RingConfig { block_size: 1 << 20, block_count: 4, retire_tov_ms: 10, promisc: false, fanout: None, filter: None }
}

/// Runs `f` on a new thread in a new network namespace with `lo` up; `None` when not root.
fn in_netns<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    // SAFETY: plain libc call.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: AF_PACKET tests need root");
        return None;
    }
    let t = std::thread::spawn(move || {
        // SAFETY: unshare of the network namespace affects only this thread.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error());
        ip("link set lo up");
        f()
    });
    match t.join() {
        Ok(r) => Some(r),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Runs `ip ARGS` in the calling thread's network namespace.
fn ip(args: &str) {
    let st = Command::new("ip").args(args.split_whitespace()).status().expect("running ip");
    assert!(st.success(), "ip {args}");
}

#[derive(Debug, Clone)]
struct Captured {
    data: Vec<u8>,
    wire_len: u32,
    ts_ns: u64,
    vlan: Option<Vlan>,
}

/// Reads `rings` until they hold at least `min` frames in all and none delivered a block for
/// `quiet` (the wait for late duplicates), or 10 s passed (a loaded machine can delay the
/// kernel's block retire timer).
fn drain(rings: &mut [&mut Ring], min: usize, quiet: Duration) -> Vec<Vec<Captured>> {
    let mut out: Vec<Vec<Captured>> = vec![Vec::new(); rings.len()];
    let start = Instant::now();
    let mut last = Instant::now();
    while (out.iter().map(Vec::len).sum::<usize>() < min || last.elapsed() < quiet)
        && start.elapsed() < Duration::from_secs(10)
    {
        for (i, ring) in rings.iter_mut().enumerate() {
            if let Some(block) = ring.next_block(20).expect("next_block") {
                last = Instant::now();
                assert_eq!(block.frames().count() as u32, block.num_frames());
                out[i].extend(block.frames().map(|f| Captured {
                    data: f.data.to_vec(),
                    wire_len: f.wire_len,
                    ts_ns: f.ts_ns,
                    vlan: f.vlan,
                }));
            }
        }
    }
    out
}

/// How often each payload `tag-NNNN` occurs in the frames.
fn payload_counts(frames: &[Captured], tag: &str) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for f in frames {
        if let Some(pos) = find(&f.data, tag.as_bytes()) {
            let p = String::from_utf8_lossy(&f.data[pos..]).into_owned();
            *m.entry(p).or_insert(0) += 1;
        }
    }
    m
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// A packet socket for injecting raw frames on `ifname`.
fn raw_sender(ifname: &str) -> (OwnedFd, libc::sockaddr_ll) {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    // SAFETY: fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: all-zero sockaddr_ll is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = netif::ifindex(ifname).unwrap() as i32;
    sll.sll_halen = 6;
    sll.sll_addr[..6].copy_from_slice(&[0xff; 6]);
    (fd, sll)
}

fn send_raw(fd: &OwnedFd, sll: &libc::sockaddr_ll, frame: &[u8]) {
    // SAFETY: valid buffer and address of the given sizes.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    assert_eq!(n, frame.len() as isize, "{}", std::io::Error::last_os_error());
}

#[test]
fn lo_shows_each_datagram_once_like_tcpdump() {
    in_netns(|| {
        let mut ring = Ring::open("lo", &cfg()).unwrap();
        // tcpdump in the same namespace, for comparison.
        let pcap = std::env::temp_dir().join(format!("wv-afpacket-{}.pcap", std::process::id()));
        let mut td = Command::new("tcpdump")
            .args(["-i", "lo", "-n", "-U", "-w"])
            .arg(&pcap)
            .arg("udp port 5555")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok();
        if let Some(td) = td.as_mut() {
            use std::io::{BufRead, BufReader};
            let mut line = String::new();
            BufReader::new(td.stderr.as_mut().unwrap()).read_line(&mut line).unwrap();
            assert!(line.contains("listening on lo"), "tcpdump: {line}");
        }

        let rx = UdpSocket::bind("127.0.0.1:5555").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = now_ns();
        for i in 0..100 {
            tx.send_to(format!("wv-lo-{i:04}").as_bytes(), "127.0.0.1:5555").unwrap();
        }
        let frames = drain(&mut [&mut ring], 100, Duration::from_millis(300)).remove(0);
        drop(rx);

        let counts = payload_counts(&frames, "wv-lo-");
        assert_eq!(counts.len(), 100);
        assert!(counts.values().all(|&n| n == 1), "{counts:?}");
        for f in frames.iter().filter(|f| find(&f.data, b"wv-lo-").is_some()) {
            // lo frames carry an all-zero Ethernet header, then IPv4/UDP; 14+20+8+11 bytes.
            assert_eq!(&f.data[..14], &[0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0]);
            assert_eq!(f.data.len(), 52);
            assert_eq!(f.wire_len, 52);
            assert_eq!(f.vlan, None);
            assert!(f.ts_ns >= before - 1_000_000_000 && f.ts_ns <= now_ns());
        }
        let stats = ring.take_stats().unwrap();
        assert_eq!(stats.drops, 0);
        assert_eq!(stats.packets as usize, frames.len());

        if let Some(mut td) = td {
            // tcpdump reads a TPACKET_V3 block when its 1 s timeout retires it and exits on
            // SIGINT without reading the block in progress: give it that second.
            std::thread::sleep(Duration::from_millis(1300));
            // SAFETY: signalling the child we started.
            unsafe { libc::kill(td.id() as i32, libc::SIGINT) };
            td.wait().unwrap();
            let out = Command::new("tcpdump").args(["-r"]).arg(&pcap).arg("-n").stderr(Stdio::null()).output().unwrap();
            let _ = std::fs::remove_file(&pcap);
            let lines = String::from_utf8_lossy(&out.stdout).lines().count();
            assert_eq!(lines, 100, "tcpdump -i lo saw {lines} packets");
        } else {
            eprintln!("tcpdump not found; comparison skipped");
        }
    });
}

#[test]
fn filter_and_filtered_counter_are_exact() {
    in_netns(|| {
        let filter = udp_5555();
        let counter = FilteredCounter::open("lo", &bpf::invert(&filter).unwrap()).unwrap();
        let mut ring = Ring::open("lo", &RingConfig { filter: Some(filter), ..cfg() }).unwrap();

        // Listeners on both ports, so that no ICMP port-unreachable adds packets.
        let _rx1 = UdpSocket::bind("127.0.0.1:5555").unwrap();
        let _rx2 = UdpSocket::bind("127.0.0.1:6666").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..50 {
            tx.send_to(format!("wv-in-{i:04}").as_bytes(), "127.0.0.1:5555").unwrap();
        }
        for i in 0..30 {
            tx.send_to(format!("wv-out-{i:04}").as_bytes(), "127.0.0.1:6666").unwrap();
        }
        // Truncated IPv4/UDP frames: the filter's port load runs past their end, which makes the
        // kernel reject them implicitly. The counter must still count them.
        let (raw, sll) = raw_sender("lo");
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 21, 0, 0, 0, 0, 64, 17]);
        frame.resize(35, 0);
        for _ in 0..7 {
            send_raw(&raw, &sll, &frame);
        }

        let frames = drain(&mut [&mut ring], 50, Duration::from_millis(300)).remove(0);
        ring.stop_intake().unwrap();
        counter.stop_intake().unwrap();

        let counts = payload_counts(&frames, "wv-");
        assert_eq!(frames.len(), 50, "only port 5555 passes the filter");
        assert_eq!(counts.len(), 50);
        assert!(counts.keys().all(|k| k.starts_with("wv-in-")));
        assert_eq!(ring.take_stats().unwrap().packets, 50);
        assert_eq!(counter.take_count().unwrap(), 30 + 7);
        assert_eq!(counter.take_count().unwrap(), 0, "reading resets");
    });
}

#[test]
fn stop_intake_then_drain_returns_the_last_partial_block() {
    in_netns(|| {
        let mut ring = Ring::open("lo", &cfg()).unwrap();
        let ctl = ring.control().unwrap();
        let _rx = UdpSocket::bind("127.0.0.1:5555").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..5 {
            tx.send_to(format!("wv-a-{i:04}").as_bytes(), "127.0.0.1:5555").unwrap();
        }
        std::thread::sleep(Duration::from_millis(2)); // let loopback deliver them
        ctl.stop_intake().unwrap();
        for i in 0..5 {
            tx.send_to(format!("wv-b-{i:04}").as_bytes(), "127.0.0.1:5555").unwrap();
        }
        let frames = drain(&mut [&mut ring], 5, Duration::from_millis(100)).remove(0);
        assert_eq!(payload_counts(&frames, "wv-a-").len(), 5);
        assert_eq!(payload_counts(&frames, "wv-b-").len(), 0);
        assert!(ring.next_block(50).unwrap().is_none());
    });
}

#[test]
fn fanout_delivers_each_packet_to_exactly_one_ring() {
    for mode in [FanoutMode::Hash, FanoutMode::Lb, FanoutMode::Cpu] {
        in_netns(move || {
            let c = RingConfig { fanout: Some(Fanout { group_id: 4242, mode }), filter: Some(udp_5555()), ..cfg() };
            let mut a = Ring::open("lo", &c).unwrap();
            let mut b = Ring::open("lo", &c).unwrap();
            let _rx = UdpSocket::bind("127.0.0.1:5555").unwrap();
            // 40 flows (source ports) of 5 datagrams each.
            let senders: Vec<_> = (0..40).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
            for (s, tx) in senders.iter().enumerate() {
                for i in 0..5 {
                    tx.send_to(format!("wv-f-{s:02}-{i}").as_bytes(), "127.0.0.1:5555").unwrap();
                }
            }
            let got = drain(&mut [&mut a, &mut b], 200, Duration::from_millis(300));
            let all: Vec<Captured> = got.concat();
            let counts = payload_counts(&all, "wv-f-");
            assert_eq!(
                counts.len(),
                200,
                "{mode:?}: a {} b {} stats a {:?} b {:?}",
                got[0].len(),
                got[1].len(),
                a.take_stats(),
                b.take_stats()
            );
            assert!(counts.values().all(|&n| n == 1), "{mode:?}: duplicates");
            assert_eq!(all.len(), 200, "{mode:?}: the filter applies to members");
            let (na, nb) = (got[0].len(), got[1].len());
            eprintln!("{mode:?}: ring a {na}, ring b {nb}");
            if mode != FanoutMode::Cpu {
                assert!(na > 0 && nb > 0, "{mode:?}: {na} / {nb}");
            }
            if mode == FanoutMode::Hash {
                // A flow stays on one ring.
                for s in 0..40 {
                    let tag = format!("wv-f-{s:02}-");
                    let on_a = payload_counts(&got[0], &tag).len();
                    assert!(on_a == 0 || on_a == 5, "flow {s} split: {on_a} on a");
                }
            }
        });
    }
}

/// The kernel moves a received VLAN tag out of the frame into `tp_vlan_tci` (`skb_vlan_untag` in
/// `__netif_receive_skb_core`, before the packet taps), whatever the driver does; on transmit the
/// tag stays where the sender put it. The frames are injected already tagged because this
/// kernel may lack the 8021q module (`ip link add ... type vlan`).
#[test]
fn vlan_tag_is_reported_not_inline() {
    in_netns(|| {
        ip("link add va type veth peer name vb");
        ip("link set va up");
        ip("link set vb up");
        let mut rx_side = Ring::open("vb", &cfg()).unwrap();
        let mut tx_side = Ring::open("va", &cfg()).unwrap();

        let (raw, sll) = raw_sender("va");
        let tags = [(0x8100u16, 10u16, "wv-vlan10-"), (0x88a8, 0x2014, "wv-vlan20-")];
        for (tpid, tci, tag) in tags {
            for i in 0..3 {
                // dst broadcast, src, tag, ethertype 0x88b5 (local experimental), payload
                let mut f = vec![0xff; 6];
                f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&tci.to_be_bytes());
                f.extend_from_slice(&[0x88, 0xb5]);
                f.extend_from_slice(format!("{tag}{i}").as_bytes());
                f.resize(64, 0);
                send_raw(&raw, &sll, &f);
            }
        }
        let got = drain(&mut [&mut rx_side, &mut tx_side], 12, Duration::from_millis(300));
        for (tpid, tci, tag) in tags {
            let pick = |frames: &[Captured]| -> Vec<Captured> {
                frames.iter().filter(|f| find(&f.data, tag.as_bytes()).is_some()).cloned().collect()
            };
            let rx = pick(&got[0]);
            assert_eq!(rx.len(), 3, "vb {tag}");
            for f in &rx {
                assert_eq!(f.vlan, Some(Vlan { tpid, tci }), "vb {tag}");
                // The tag is gone from the data: the ethertype follows the MAC addresses.
                assert_eq!(&f.data[12..14], &[0x88, 0xb5], "vb {tag}");
                assert_eq!((f.data.len(), f.wire_len), (60, 60), "vb {tag}");
            }
            let tx = pick(&got[1]);
            assert_eq!(tx.len(), 3, "va {tag}");
            for f in &tx {
                assert_eq!(f.vlan, None, "va {tag}");
                assert_eq!(&f.data[12..14], &tpid.to_be_bytes(), "va {tag}");
                assert_eq!((f.data.len(), f.wire_len), (64, 64), "va {tag}");
            }
        }
    });
}

#[test]
fn errors_name_the_problem() {
    in_netns(|| {
        match Ring::open("wv-nope0", &cfg()) {
            Err(Error::NoSuchInterface(n)) => assert_eq!(n, "wv-nope0"),
            other => panic!("{other:?}"),
        }
        ip("link add vc type veth peer name vd");
        match Ring::open("vc", &cfg()) {
            Err(Error::InterfaceDown(n)) => assert_eq!(n, "vc"),
            other => panic!("{other:?}"),
        }
        match FilteredCounter::open("vc", &bpf::drop_all()) {
            Err(Error::InterfaceDown(n)) => assert_eq!(n, "vc"),
            other => panic!("{other:?}"),
        }
        // An interface that goes away while the ring reads is reported once.
        ip("link set vc up");
        let mut ring = Ring::open("vc", &cfg()).unwrap();
        ip("link del vc");
        match ring.next_block(200) {
            Err(Error::InterfaceDown(n)) => assert_eq!(n, "vc"),
            other => panic!("{:?}", other.map(|b| b.is_some())),
        }
        assert!(ring.next_block(10).unwrap().is_none());

        // Without CAP_NET_RAW. setresuid(2) as a raw syscall changes only this thread.
        // SAFETY: plain syscall; drops this thread's privileges for good.
        let rc = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!(rc, 0);
        match Ring::open("lo", &cfg()) {
            Err(Error::PermissionDenied) => {}
            other => panic!("{other:?}"),
        }
    });
}

/// With `PACKET_FANOUT_FLAG_DEFRAG` the kernel hands the group one reassembled datagram instead
/// of the fragments on the wire (checked: 4042 bytes instead of 1514 + 1514 + 1082); the ring
/// must record the fragments.
#[test]
fn fanout_hash_keeps_ip_fragments() {
    in_netns(|| {
        ip("link set lo mtu 1500");
        let c = RingConfig { fanout: Some(Fanout { group_id: 7, mode: FanoutMode::Hash }), ..cfg() };
        let mut a = Ring::open("lo", &c).unwrap();
        let mut b = Ring::open("lo", &c).unwrap();
        let _rx = UdpSocket::bind("127.0.0.1:5555").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[b'x'; 4000], "127.0.0.1:5555").unwrap();
        let got = drain(&mut [&mut a, &mut b], 3, Duration::from_millis(300)).concat();
        let mut lens: Vec<_> = got.iter().map(|f| f.wire_len).collect();
        lens.sort_unstable();
        assert_eq!(lens, [1082, 1514, 1514]);
    });
}
