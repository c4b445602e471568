//! Other user and on-disk text: the synthetic source spec and its count /
//! duration parsers, `record`'s size, percentage and CPU-list parsers, catalog lines, and the cBPF interpreter (programs come
//! from libpcap or `tcpdump -ddd` text, packets from the wire).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wv_wire::bpf::{self, Insn};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let _ = wv_capture::synthetic::parse_spec(&s);
    let _ = wv_units::parse_count(&s);
    let _ = wv_units::parse_duration(&s);
    for line in s.lines() {
        let _ = wv_capture::synthetic::parse_spec(line);
        let _ = wv_units::parse_count(line);
        let _ = wv_units::parse_duration(line);
        let _ = wv_units::parse_size(line);
        let _ = wv_units::parse_percent(line);
        if let Some(cpus) = wv_units::parse_cpu_list(line) {
            assert!(cpus.len() <= wv_units::MAX_CPUS + 1);
            assert!(cpus.iter().all(|&c| c < wv_units::MAX_CPUS));
        }
        let _ = Insn::parse(line);
    }
    for line in data.split(|&b| b == b'\n') {
        if let Ok(e) = serde_json::from_slice::<wv_store::catalog::Entry>(line) {
            let _ = serde_json::to_string(&e);
        }
    }

    // cBPF: the first byte splits the input into a program (8 bytes per
    // instruction, as in struct sock_filter) and a packet.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let prog_len = (usize::from(n) * 8).min(rest.len() / 8 * 8);
    let (p, pkt) = rest.split_at(prog_len);
    let prog: Vec<Insn> = p
        .chunks_exact(8)
        .map(|c| Insn {
            code: u16::from_le_bytes([c[0], c[1]]),
            jt: c[2],
            jf: c[3],
            k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
        .collect();
    for wirelen in [pkt.len() as u32, 0, u32::MAX] {
        let _ = bpf::run(&prog, pkt, wirelen);
    }
    // The text form, one instruction per line, run on the remaining bytes.
    let text: Vec<Insn> = s.lines().filter_map(Insn::parse).collect();
    if !text.is_empty() {
        let _ = bpf::run(&text, data, data.len() as u32);
    }
});
