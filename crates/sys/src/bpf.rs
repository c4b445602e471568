//! Classic BPF (cBPF) programs as the kernel's socket filter runs them.
//!
//! Two programs are built here from the capture filter: `drop_all` (used to shut a socket's
//! intake without closing it) and the *inverse* of the capture filter, which the filtered-packet
//! counter (`afpacket::FilteredCounter`) attaches so that it sees exactly the packets the capture
//! rings reject.
//!
//! A cBPF program rejects a packet in two ways: explicitly, by returning 0, and implicitly, by a
//! packet load past the end of the packet (or a division by a zero `X`), which makes the kernel
//! abort the program with result 0. Flipping the `ret` instructions only inverts the first way; a
//! truncated or malformed packet would then be rejected by *both* programs and never counted. So
//! [`invert`] also puts a guard before every instruction that can abort: the guard checks the
//! condition itself and returns "accept" (the original would have rejected) instead of aborting.

pub use libc::sock_filter;

/// Largest program the kernel accepts (`BPF_MAXINSNS` in `linux/bpf_common.h`).
pub const MAX_INSNS: usize = 4096;

/// Number of scratch memory slots `M[]` (`BPF_MEMWORDS`).
const MEMWORDS: u32 = 16;

/// What the inverted program returns for a packet it accepts. The counter socket never reads the
/// packets, so it asks the kernel to keep a single byte.
const INVERTED_ACCEPT: u32 = 1;

use wv_wire::bpf::code::*;

/// `SKF_AD_OFF`: absolute loads at or above this (negative) offset read skb metadata
/// ("ancillary data", e.g. the VLAN tag) and cannot fail.
const SKF_AD_OFF: i32 = -0x1000;

const fn class(code: u16) -> u16 {
    code & 0x07
}
const fn size(code: u16) -> u16 {
    code & 0x18
}
const fn mode(code: u16) -> u16 {
    code & 0xe0
}
const fn op(code: u16) -> u16 {
    code & 0xf0
}
const fn src(code: u16) -> u16 {
    code & 0x08
}
const fn rval(code: u16) -> u16 {
    code & 0x18
}

const fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter { code, jt: 0, jf: 0, k }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// A one-instruction program that rejects every packet (`ret #0`).
pub fn drop_all() -> [sock_filter; 1] {
    [stmt(RET | K, 0)]
}

/// Returns a program that accepts exactly the packets `prog` rejects (and rejects the ones it
/// accepts), or `None` when that cannot be expressed statically:
///
/// * `prog` is empty or is not a program the kernel would run (a jump out of range);
/// * it loads relative to the link-layer or network header (`SKF_LL_OFF`/`SKF_NET_OFF`), whose
///   bounds a cBPF program cannot check;
/// * it needs a guard that must save `A` but uses all 16 scratch slots;
/// * the result would exceed [`MAX_INSNS`] or a conditional jump grows beyond 255 instructions.
///
/// `ret #k` with k ≠ 0 becomes `ret #0`, `ret #0` becomes `ret #1`; `ret a` / `ret x` become a
/// test of the register. Packet loads, `ldxb 4*([k]&0xf)` and `div x` / `mod x` get guards (see the
/// module documentation). The accepted packets are truncated to 1 byte: the program is meant for
/// a socket that counts packets and never reads them.
pub fn invert(prog: &[sock_filter]) -> Option<Vec<sock_filter>> {
    if prog.is_empty() || prog.len() > MAX_INSNS {
        return None;
    }
    let scratch = free_scratch_slot(prog);

    // First pass: the replacement sequence of every instruction, with its jumps still in old
    // indices (patched in the second pass). `jump_at` is the index, inside the sequence, of the
    // original instruction when it is a jump.
    let mut seqs: Vec<(Vec<sock_filter>, Option<usize>)> = Vec::with_capacity(prog.len());
    for ins in prog {
        let code = ins.code;
        let mut seq = Vec::new();
        let mut jump_at = None;
        match class(code) {
            RET => match rval(code) {
                K => {
                    let k = if ins.k == 0 { INVERTED_ACCEPT } else { 0 };
                    seq.push(stmt(RET | K, k));
                }
                A => {
                    // A == 0 means the original rejected.
                    seq.push(jump(JMP | JEQ | K, 0, 0, 1));
                    seq.push(stmt(RET | K, INVERTED_ACCEPT));
                    seq.push(stmt(RET | K, 0));
                }
                X => {
                    seq.push(stmt(MISC | TXA, 0));
                    seq.push(jump(JMP | JEQ | K, 0, 0, 1));
                    seq.push(stmt(RET | K, INVERTED_ACCEPT));
                    seq.push(stmt(RET | K, 0));
                }
                _ => return None,
            },
            LD if mode(code) == ABS => {
                let k = ins.k as i32;
                if k < 0 {
                    if k < SKF_AD_OFF {
                        return None; // SKF_NET_OFF / SKF_LL_OFF relative load
                    }
                } else {
                    // A is overwritten by the load, so the guard may use it.
                    let end = ins.k.checked_add(load_size(code)?)?;
                    seq.push(stmt(LD | W | LEN, 0));
                    seq.push(jump(JMP | JGE | K, end, 1, 0));
                    seq.push(stmt(RET | K, INVERTED_ACCEPT));
                }
                seq.push(*ins);
            }
            LD if mode(code) == IND => {
                // Needs len >= X + k + size; A is overwritten by the load.
                let end = ins.k.checked_add(load_size(code)?)?;
                seq.push(stmt(LD | W | LEN, 0));
                seq.push(jump(JMP | JGE | K, end, 1, 0));
                seq.push(stmt(RET | K, INVERTED_ACCEPT));
                seq.push(stmt(ALU | SUB | K, end));
                seq.push(jump(JMP | JGE | X, 0, 1, 0));
                seq.push(stmt(RET | K, INVERTED_ACCEPT));
                seq.push(*ins);
            }
            LDX if mode(code) == MSH => {
                // `ldxb 4*([k]&0xf)` loads into X and must keep A.
                let m = scratch?;
                let end = ins.k.checked_add(1)?;
                seq.push(stmt(ST, m));
                seq.push(stmt(LD | W | LEN, 0));
                seq.push(jump(JMP | JGE | K, end, 1, 0));
                seq.push(stmt(RET | K, INVERTED_ACCEPT));
                seq.push(stmt(LD | MEM, m));
                seq.push(*ins);
            }
            ALU if src(code) == X && (op(code) == DIV || op(code) == MOD) => {
                let m = scratch?;
                seq.push(stmt(ST, m));
                seq.push(stmt(MISC | TXA, 0));
                seq.push(jump(JMP | JEQ | K, 0, 0, 1));
                seq.push(stmt(RET | K, INVERTED_ACCEPT));
                seq.push(stmt(LD | MEM, m));
                seq.push(*ins);
            }
            JMP => {
                jump_at = Some(seq.len());
                seq.push(*ins);
            }
            _ => seq.push(*ins),
        }
        seqs.push((seq, jump_at));
    }

    // New index of the first instruction of every old instruction's sequence (+ the end).
    let mut start = Vec::with_capacity(prog.len() + 1);
    let mut n = 0usize;
    for (seq, _) in &seqs {
        start.push(n);
        n += seq.len();
    }
    start.push(n);
    if n > MAX_INSNS {
        return None;
    }

    let mut out = Vec::with_capacity(n);
    for (old, (seq, jump_at)) in seqs.into_iter().enumerate() {
        for (j, mut ins) in seq.into_iter().enumerate() {
            if Some(j) == jump_at {
                let here = out.len(); // new index of this jump
                let target = |off: usize| -> Option<usize> {
                    let t = old.checked_add(1)?.checked_add(off)?;
                    // A jump must land on an instruction of the program.
                    (t < prog.len()).then(|| start[t] - (here + 1))
                };
                if op(ins.code) == JA {
                    ins.k = u32::try_from(target(ins.k as usize)?).ok()?;
                } else {
                    ins.jt = u8::try_from(target(ins.jt as usize)?).ok()?;
                    ins.jf = u8::try_from(target(ins.jf as usize)?).ok()?;
                }
            }
            out.push(ins);
        }
    }
    Some(out)
}

/// Bytes read by a `ld` of this size.
fn load_size(code: u16) -> Option<u32> {
    match size(code) {
        W => Some(4),
        H => Some(2),
        B => Some(1),
        _ => None,
    }
}

/// A scratch slot `M[i]` the program neither reads nor writes, for guards that must save `A`.
fn free_scratch_slot(prog: &[sock_filter]) -> Option<u32> {
    let mut used = 0u32;
    for ins in prog {
        let c = ins.code;
        let mem = match class(c) {
            ST | STX => true,
            LD | LDX => mode(c) == MEM,
            _ => false,
        };
        if mem && ins.k < MEMWORDS {
            used |= 1 << ins.k;
        }
    }
    (0..MEMWORDS).rev().find(|i| used & (1 << i) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

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

    fn prog(p: &[(u16, u8, u8, u32)]) -> Vec<sock_filter> {
        p.iter().map(|&(code, jt, jf, k)| jump(code, k, jt, jf)).collect()
    }

    /// Runs a program with the project's cBPF interpreter (libpcap's and the kernel's semantics
    /// agree where it matters here: a load past the end or a division by zero returns 0).
    fn run(prog: &[sock_filter], pkt: &[u8]) -> u32 {
        let p: Vec<wv_wire::bpf::Insn> =
            prog.iter().map(|f| wv_wire::bpf::Insn { code: f.code, jt: f.jt, jf: f.jf, k: f.k }).collect();
        wv_wire::bpf::run(&p, pkt, pkt.len() as u32)
    }

    fn frame(ethertype: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn ipv4(proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 0, 0, 0];
        h.extend_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        h.extend_from_slice(l4);
        h
    }

    fn udp(sport: u16, dport: u16) -> Vec<u8> {
        let mut u = sport.to_be_bytes().to_vec();
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&[0, 12, 0, 0, b'h', b'i', b'!', b'!']);
        u
    }

    fn packets() -> Vec<Vec<u8>> {
        let mut v = vec![
            frame(0x0800, &ipv4(17, 0, &udp(1234, 5555))),
            frame(0x0800, &ipv4(17, 0, &udp(5555, 1))),
            frame(0x0800, &ipv4(17, 0, &udp(1234, 5556))),
            frame(0x0800, &ipv4(6, 0, &udp(1234, 5555))),
            frame(0x0800, &ipv4(17, 0x0010, &udp(1234, 5555))), // non-first fragment
            frame(0x0806, &[0u8; 28]),                          // ARP
            vec![],
            vec![0u8; 5],
        ];
        let mut v6 = vec![0x60, 0, 0, 0, 0, 12, 17, 64];
        v6.extend_from_slice(&[0u8; 32]);
        v6.extend_from_slice(&udp(9, 5555));
        v.push(frame(0x86dd, &v6));
        // Every prefix of the matching frames: truncated packets make loads fail.
        let full = frame(0x0800, &ipv4(17, 0, &udp(1234, 5555)));
        for n in 0..full.len() {
            v.push(full[..n].to_vec());
        }
        let full6 = frame(0x86dd, &v6);
        for n in 0..full6.len() {
            v.push(full6[..n].to_vec());
        }
        v
    }

    #[test]
    fn inverted_udp_port_filter_accepts_exactly_the_rejected_packets() {
        let p = prog(&UDP_5555);
        let inv = invert(&p).expect("invertible");
        let mut accepted = 0;
        for pkt in packets() {
            let orig = run(&p, &pkt);
            let flipped = run(&inv, &pkt);
            assert_eq!(orig == 0, flipped != 0, "packet {pkt:02x?}: orig {orig}, inverted {flipped}");
            accepted += usize::from(orig != 0);
        }
        // v4 dport, v4 sport, v6 dport, and the 8 prefixes of each matching frame that still
        // hold the destination port.
        assert_eq!(accepted, 3 + 8 + 8);
    }

    #[test]
    fn plain_flip_would_miss_truncated_packets() {
        // The reason for the guards: with only the rets flipped, a 35-byte IPv4/UDP frame (the
        // port load at offset 34 runs past the end) is rejected by both programs.
        let p = prog(&UDP_5555);
        let flipped: Vec<_> = p
            .iter()
            .map(|i| match i.code {
                0x06 => stmt(RET | K, u32::from(i.k == 0)),
                _ => *i,
            })
            .collect();
        let pkt = &frame(0x0800, &ipv4(17, 0, &udp(1234, 5555)))[..35];
        assert_eq!(run(&p, pkt), 0);
        assert_eq!(run(&flipped, pkt), 0);
        assert_ne!(run(&invert(&p).unwrap(), pkt), 0);
    }

    #[test]
    fn ret_k_values_flip() {
        let inv = invert(&[stmt(RET | K, 262144)]).unwrap();
        assert_eq!(inv.len(), 1);
        assert_eq!((inv[0].code, inv[0].k), (RET | K, 0));
        let inv = invert(&drop_all()).unwrap();
        assert_eq!((inv[0].code, inv[0].k), (RET | K, INVERTED_ACCEPT));
    }

    #[test]
    fn ret_a_and_ret_x_are_tested_at_run_time() {
        // ld [len]; ret a  — accepts every non-empty packet.
        let p = [stmt(LD | W | LEN, 0), stmt(RET | A, 0)];
        let inv = invert(&p).unwrap();
        assert_ne!(run(&inv, &[]), 0);
        assert_eq!(run(&inv, &[1]), 0);
        // ldx #0; ret x  — rejects everything.
        let p = [stmt(LDX | IMM, 0), stmt(RET | X, 0)];
        let inv = invert(&p).unwrap();
        assert_ne!(run(&inv, &[1, 2, 3]), 0);
    }

    #[test]
    fn division_by_zero_x_counts_as_rejected() {
        // ld #10; ldx len; div x; ret a — rejects the empty packet only.
        let p = [stmt(LD | IMM, 10), stmt(LDX | W | LEN, 0), stmt(ALU | DIV | X, 0), stmt(RET | A, 0)];
        let inv = invert(&p).unwrap();
        for pkt in [&[][..], &[0u8; 3][..], &[0u8; 20][..]] {
            assert_eq!(run(&p, pkt) == 0, run(&inv, pkt) != 0, "len {}", pkt.len());
        }
    }

    #[test]
    fn jumps_are_retargeted_over_guards() {
        // ja over a load; the load's guard must not break the jump target.
        let p = [
            stmt(JMP | JA, 1),
            stmt(LD | B | ABS, 100),
            stmt(LD | B | ABS, 0),
            jump(JMP | JEQ | K, 7, 0, 1),
            stmt(RET | K, 0xffff),
            stmt(RET | K, 0),
        ];
        let inv = invert(&p).unwrap();
        for pkt in [&[7u8][..], &[8u8][..], &[][..]] {
            assert_eq!(run(&p, pkt) == 0, run(&inv, pkt) != 0, "{pkt:?}");
        }
    }

    #[test]
    fn not_invertible() {
        assert!(invert(&[]).is_none());
        // ld [SKF_NET_OFF + 9] — network-header relative, unbounded
        let p = [stmt(LD | B | ABS, (-0x100000i32 + 9) as u32), stmt(RET | A, 0)];
        assert!(invert(&p).is_none());
        // jump past the end
        assert!(invert(&[jump(JMP | JEQ | K, 0, 5, 0), stmt(RET | K, 0)]).is_none());
        // all scratch slots in use and a guard needs one
        let mut p: Vec<_> = (0..16).map(|i| stmt(ST, i)).collect();
        p.push(stmt(LDX | B | MSH, 14));
        p.push(stmt(RET | K, 1));
        assert!(invert(&p).is_none());
    }

    #[test]
    fn ancillary_loads_need_no_guard() {
        // ld vlan_avail (SKF_AD_OFF + 48)
        let p = [stmt(LD | W | ABS, (-0x1000i32 + 48) as u32), stmt(RET | A, 0)];
        let inv = invert(&p).unwrap();
        assert_eq!(inv[0].code, p[0].code);
    }

    #[test]
    fn drop_all_is_ret_zero() {
        let d = drop_all();
        assert_eq!((d[0].code, d[0].k), (0x06, 0));
    }

    /// Kernel values from `linux/filter.h` (x86_64).
    #[test]
    fn layout_matches_kernel() {
        assert_eq!(size_of::<libc::sock_filter>(), 8);
        assert_eq!(offset_of!(libc::sock_filter, code), 0);
        assert_eq!(offset_of!(libc::sock_filter, jt), 2);
        assert_eq!(offset_of!(libc::sock_filter, jf), 3);
        assert_eq!(offset_of!(libc::sock_filter, k), 4);
        assert_eq!(size_of::<libc::sock_fprog>(), 16);
        assert_eq!(offset_of!(libc::sock_fprog, len), 0);
        assert_eq!(offset_of!(libc::sock_fprog, filter), 8);
    }
}
