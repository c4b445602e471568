//! A classic BPF interpreter with libpcap's semantics (`bpf_filter`).
//!
//! Used to apply a compiled tcpdump expression in user space (to packets of
//! `--read` files, the synthetic source, and query candidates) with the real
//! wire length, which `greater`, `less` and `len` need. Out-of-bounds loads
//! and division by zero reject the packet, as in libpcap.

/// One cBPF instruction (`struct bpf_insn` / `struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl Insn {
    /// Parses libpcap's textual form "code jt jf k" (as `tcpdump -ddd` and
    /// the pcap crate's `Display` print it).
    pub fn parse(s: &str) -> Option<Insn> {
        let mut it = s.split_whitespace().map(|x| x.parse::<u64>().ok());
        let (code, jt, jf, k) = (it.next()??, it.next()??, it.next()??, it.next()??);
        Some(Insn {
            code: u16::try_from(code).ok()?,
            jt: u8::try_from(jt).ok()?,
            jf: u8::try_from(jf).ok()?,
            k: u32::try_from(k).ok()?,
        })
    }
}

/// Instruction classes and fields (`linux/bpf_common.h`, `pcap/bpf.h`).
pub mod code {
    pub const LD: u16 = 0x00;
    pub const LDX: u16 = 0x01;
    pub const ST: u16 = 0x02;
    pub const STX: u16 = 0x03;
    pub const ALU: u16 = 0x04;
    pub const JMP: u16 = 0x05;
    pub const RET: u16 = 0x06;
    pub const MISC: u16 = 0x07;
    pub const W: u16 = 0x00;
    pub const H: u16 = 0x08;
    pub const B: u16 = 0x10;
    pub const IMM: u16 = 0x00;
    pub const ABS: u16 = 0x20;
    pub const IND: u16 = 0x40;
    pub const MEM: u16 = 0x60;
    pub const LEN: u16 = 0x80;
    pub const MSH: u16 = 0xa0;
    pub const ADD: u16 = 0x00;
    pub const SUB: u16 = 0x10;
    pub const MUL: u16 = 0x20;
    pub const DIV: u16 = 0x30;
    pub const MOD: u16 = 0x90;
    pub const JA: u16 = 0x00;
    pub const JEQ: u16 = 0x10;
    pub const JGT: u16 = 0x20;
    pub const JGE: u16 = 0x30;
    pub const JSET: u16 = 0x40;
    /// Source operand K (immediate) / return value K.
    pub const K: u16 = 0x00;
    /// Source operand X.
    pub const X: u16 = 0x08;
    /// Return value A.
    pub const A: u16 = 0x10;
    pub const TAX: u16 = 0x00;
    pub const TXA: u16 = 0x80;
}

use code::*;

/// Backward jumps one run may take. libpcap's `protochain` takes one per
/// IPv6 extension header walked, each at least 8 bytes: more than the
/// largest snapshot (262,144 bytes) can hold.
const MAX_BACK_JUMPS: u32 = 1 << 17;

/// Runs `prog` on a packet whose captured bytes are `pkt` and whose original
/// length is `wirelen`; returns the program's result (0 = reject). An empty
/// program accepts everything, as libpcap's does.
pub fn run(prog: &[Insn], pkt: &[u8], wirelen: u32) -> u32 {
    if prog.is_empty() {
        return u32::MAX;
    }
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; 16];
    let mut pc = 0usize;
    let mut back_jumps = 0u32;
    let load = |off: u32, size: u16| -> Option<u32> {
        let off = off as usize;
        match size {
            W => pkt.get(off..off.checked_add(4)?).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            H => pkt.get(off..off.checked_add(2)?).map(|b| u16::from_be_bytes([b[0], b[1]]) as u32),
            B => pkt.get(off).map(|&b| b as u32),
            _ => None,
        }
    };
    while let Some(i) = prog.get(pc) {
        pc += 1;
        let class = i.code & 0x07;
        match class {
            RET => {
                return match i.code & 0x18 {
                    K => i.k,
                    A => a,
                    _ => 0,
                }
            }
            LD => {
                let size = i.code & 0x18;
                a = match i.code & 0xe0 {
                    IMM => i.k,
                    LEN => wirelen,
                    MEM => match mem.get(i.k as usize) {
                        Some(&v) => v,
                        None => return 0,
                    },
                    ABS => match load(i.k, size) {
                        Some(v) => v,
                        None => return 0,
                    },
                    IND => match x.checked_add(i.k).and_then(|o| load(o, size)) {
                        Some(v) => v,
                        None => return 0,
                    },
                    _ => return 0,
                };
            }
            LDX => {
                x = match i.code & 0xe0 {
                    IMM => i.k,
                    LEN => wirelen,
                    MEM => match mem.get(i.k as usize) {
                        Some(&v) => v,
                        None => return 0,
                    },
                    MSH => match pkt.get(i.k as usize) {
                        Some(&b) => ((b & 0x0f) as u32) << 2,
                        None => return 0,
                    },
                    _ => return 0,
                };
            }
            ST | STX => {
                let v = if class == ST { a } else { x };
                match mem.get_mut(i.k as usize) {
                    Some(m) => *m = v,
                    None => return 0,
                }
            }
            ALU => {
                let src = if i.code & 0x08 != 0 { x } else { i.k };
                a = match i.code & 0xf0 {
                    0x00 => a.wrapping_add(src),
                    0x10 => a.wrapping_sub(src),
                    0x20 => a.wrapping_mul(src),
                    0x30 => match a.checked_div(src) {
                        Some(v) => v,
                        None => return 0,
                    },
                    0x40 => a | src,
                    0x50 => a & src,
                    0x60 => a.checked_shl(src).unwrap_or(0),
                    0x70 => a.checked_shr(src).unwrap_or(0),
                    0x80 => a.wrapping_neg(),
                    0x90 => match a.checked_rem(src) {
                        Some(v) => v,
                        None => return 0,
                    },
                    0xa0 => a ^ src,
                    _ => return 0,
                };
            }
            JMP => {
                let src = if i.code & 0x08 != 0 { x } else { i.k };
                let taken = match i.code & 0xf0 {
                    0x00 => {
                        // JA: unconditional, offset in k, signed as libpcap's
                        // bpf_filter reads it: `ip6 protochain` jumps back
                        // (a program the kernel refuses, so libpcap filters it
                        // in user space). Back jumps are counted: a program
                        // looping on a packet rejects it, never hangs.
                        let k = i.k as i32;
                        if k < 0 {
                            back_jumps += 1;
                            if back_jumps > MAX_BACK_JUMPS {
                                return 0;
                            }
                        }
                        pc = match pc.checked_add_signed(k as isize) {
                            Some(p) => p,
                            None => return 0,
                        };
                        continue;
                    }
                    0x10 => a == src,
                    0x20 => a > src,
                    0x30 => a >= src,
                    0x40 => a & src != 0,
                    _ => return 0,
                };
                pc += if taken { i.jt as usize } else { i.jf as usize };
            }
            MISC => {
                if i.code & 0xf8 == 0 {
                    x = a; // TAX
                } else {
                    a = x; // TXA
                }
            }
            _ => return 0,
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(s: &str) -> Vec<Insn> {
        s.lines().filter_map(Insn::parse).collect()
    }

    // `tcpdump -ddd 'udp port 53'` (Ethernet), minus the count line.
    const UDP53: &str = "40 0 0 12\n21 0 6 34525\n48 0 0 20\n21 0 15 17\n40 0 0 54\n21 12 0 53\n40 0 0 56\n21 10 11 53\n21 0 10 2048\n48 0 0 23\n21 0 8 17\n40 0 0 20\n69 6 0 8191\n177 0 0 14\n72 0 0 14\n21 2 0 53\n72 0 0 16\n21 0 1 53\n6 0 0 262144\n6 0 0 0";

    fn udp_frame(dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[23] = 17;
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn udp_port_53() {
        let p = prog(UDP53);
        assert_eq!(p.len(), 20);
        assert_eq!(run(&p, &udp_frame(53), 60), 262_144);
        assert_eq!(run(&p, &udp_frame(54), 60), 0);
        // Truncated packet: the load fails, so reject.
        assert_eq!(run(&p, &udp_frame(53)[..30], 60), 0);
    }

    #[test]
    fn greater_uses_wire_length() {
        // `tcpdump -ddd greater 100`: ld len; jge 100; ret 262144; ret 0
        let p = prog("128 0 0 0\n53 0 1 100\n6 0 0 262144\n6 0 0 0");
        assert_eq!(run(&p, &[0u8; 60], 1514), 262_144);
        assert_eq!(run(&p, &[0u8; 60], 60), 0);
    }

    // `tcpdump -ddd -y EN10MB 'ip6 protochain 17'`: its loop over the
    // extension headers jumps back (k = -15 and -28 as u32).
    const PROTOCHAIN17: &str = "40 0 0 12|21 0 33 34525|48 0 0 20|1 0 0 40|21 27 0 17|21 26 0 59|21 3 0 0|21 2 0 60|21 1 0 43|21 0 9 44|80 0 0 14|2 0 0 0|80 0 0 15|4 0 0 1|36 0 0 8|12 0 0 0|7 0 0 0|96 0 0 0|5 0 0 4294967281|21 0 12 51|135 0 0 0|80 0 0 14|2 0 0 0|135 0 0 0|4 0 0 1|7 0 0 0|80 0 0 14|4 0 0 2|36 0 0 4|7 0 0 0|96 0 0 0|5 0 0 4294967268|4 0 0 0|21 0 1 17|6 0 0 262144|6 0 0 0";

    /// An IPv6 frame whose next header is `nh`, then the extension headers
    /// `ext` (each 8 bytes: next header, length 0), then `payload`.
    fn ip6_frame(nh: u8, ext: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40];
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        f[14] = 0x60;
        f[20] = nh;
        for &next in ext {
            f.extend([next, 0, 0, 0, 0, 0, 0, 0]);
        }
        f.extend([0u8; 8]);
        f
    }

    #[test]
    fn protochain_jumps_back_through_extension_headers() {
        let p = prog(&PROTOCHAIN17.replace('|', "\n"));
        assert_eq!(p.len(), 36);
        // UDP right after the IPv6 header, and behind hop-by-hop and
        // destination options (as tcpdump matches both).
        assert_eq!(run(&p, &ip6_frame(17, &[]), 70), 262_144);
        assert_eq!(run(&p, &ip6_frame(0, &[17]), 78), 262_144);
        assert_eq!(run(&p, &ip6_frame(0, &[60, 17]), 86), 262_144);
        assert_eq!(run(&p, &ip6_frame(0, &[60, 6]), 86), 0);
        // A chain cut short rejects, and so does a long one that never
        // reaches UDP; a long one that does matches.
        assert_eq!(run(&p, &ip6_frame(0, &[60, 60])[..70], 86), 0);
        let long = ip6_frame(0, &[0; 6000]);
        assert_eq!(run(&p, &long, long.len() as u32), 0);
        let mut chain = vec![0u8; 5999];
        chain.push(17);
        let long = ip6_frame(0, &chain);
        assert_eq!(run(&p, &long, long.len() as u32), 262_144);
    }

    #[test]
    fn a_program_looping_for_ever_rejects() {
        // ja -1: a jump onto itself.
        let p = vec![Insn { code: JMP | JA, jt: 0, jf: 0, k: u32::MAX }];
        assert_eq!(run(&p, &[0u8; 60], 60), 0);
        // A jump back before the first instruction.
        let p = vec![Insn { code: JMP | JA, jt: 0, jf: 0, k: (-5i32) as u32 }];
        assert_eq!(run(&p, &[0u8; 60], 60), 0);
    }
}
