//! The report as a terminal table (the default output).

use crate::conv::{ConvRow, Table};
use crate::Report;
use std::fmt::Write;
use wv_wire::time::utc_rfc3339;

/// One listed frame: its number, time (UTC, as `query --from` takes it), size, flow and detail.
fn example(o: &mut String, indent: &str, e: &crate::Example) {
    let (t, f) = (utc_rfc3339(e.time_ns), &e.flow);
    let _ = writeln!(o, "{indent}frame {} at {t}, {} bytes, {f} ({})", e.frame, e.size, e.detail);
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// A duration in the largest unit that keeps it at 1 or more, without
/// trailing zeros: `1 s`, `65.536 s`, `250 ms`, `1.5 us`, `800 ns`.
pub fn duration_text(ns: u64) -> String {
    let (div, unit) = match ns {
        1_000_000_000.. => (1_000_000_000, "s"),
        1_000_000.. => (1_000_000, "ms"),
        1_000.. => (1_000, "us"),
        _ => (1, "ns"),
    };
    let (whole, frac) = (ns / div, ns % div);
    if frac == 0 {
        return format!("{whole} {unit}");
    }
    let digits = div.ilog10() as usize;
    let frac = format!("{frac:0digits$}");
    format!("{whole}.{} {unit}", frac.trim_end_matches('0'))
}

/// `ns` in seconds with `digits` decimals: `0.000008 s`.
fn seconds(ns: u64, digits: usize) -> String {
    let frac = format!("{:09}", ns % 1_000_000_000);
    match digits.min(9) {
        0 => format!("{} s", ns / 1_000_000_000),
        d => format!("{}.{} s", ns / 1_000_000_000, &frac[..d]),
    }
}

/// How the throughput step differs from the one asked for, if it does: raised to the
/// shortest step, doubled to fit `--max-intervals`, or both (`--step 1ns` on 43 µs of
/// frames with `--max-intervals 10`: raised to 1 us and doubled to 8 us).
pub fn step_change(t: &crate::qos::io::IoReport) -> Option<String> {
    use crate::qos::io::MIN_STEP_NS;
    let raised = t.requested_step_ns < MIN_STEP_NS;
    let doubled = t.step_ns > t.requested_step_ns.max(MIN_STEP_NS);
    let raise = format!(
        "raised to {}: frame times count in whole microseconds, as tshark's io,stat counts them",
        duration_text(MIN_STEP_NS)
    );
    let double = format!("doubled to fit the capture into {} intervals, --max-intervals", t.max_intervals);
    match (raised, doubled) {
        (false, false) => None,
        (true, false) => Some(raise),
        (false, true) => Some(double),
        (true, true) => Some(format!("{raise}, then {double}")),
    }
}

fn rate(bits: f64) -> String {
    wv_units::format_bit_rate(bits)
}

/// EtherTypes, IP protocols, VLANs and MPLS labels, each line indented by `pad`.
fn layers(o: &mut String, pad: &str, x: &crate::mix::LayersReport, top: usize) {
    let _ = writeln!(o, "{pad}EtherTypes:");
    for e in x.ethertypes.iter().take(top) {
        let _ = writeln!(o, "{pad}  0x{:04x} {:<28} {:>10} pkts {:>14} bytes", e.key, e.name, e.packets, e.bytes);
    }
    if !x.ip_protocols.is_empty() {
        let _ = writeln!(o, "{pad}IP protocols:");
        for e in x.ip_protocols.iter().take(top) {
            let _ = writeln!(o, "{pad}  {:>6} {:<28} {:>10} pkts {:>14} bytes", e.key, e.name, e.packets, e.bytes);
        }
    }
    if !x.vlans.is_empty() {
        let _ = writeln!(o, "{pad}VLANs:");
        for e in x.vlans.iter().take(top) {
            let _ = writeln!(o, "{pad}  {:>6} {:>10} pkts {:>14} bytes", e.key, e.packets, e.bytes);
        }
    }
    if !x.mpls_labels.is_empty() {
        let _ = writeln!(o, "{pad}MPLS labels:");
        for e in x.mpls_labels.iter().take(top) {
            let _ = writeln!(o, "{pad}  {:>7} {:>10} pkts {:>14} bytes", e.key, e.packets, e.bytes);
        }
    }
}

fn conv_rows(out: &mut String, title: &str, t: &Table<ConvRow>, top: usize) {
    if t.count == 0 {
        return;
    }
    let _ = writeln!(out, "\n{title} ({} conversations, top {}):", t.count, top.min(t.count));
    let _ = writeln!(
        out,
        "  {:<44} {:>10} {:>12} {:>10} {:>12}",
        "A <-> B", "A->B pkts", "A->B bytes", "B->A pkts", "B->A bytes"
    );
    for r in t.rows.iter().take(top) {
        let a = match r.port_a {
            Some(p) => format!("{}:{p}", r.a),
            None => r.a.clone(),
        };
        let b = match r.port_b {
            Some(p) => format!("{}:{p}", r.b),
            None => r.b.clone(),
        };
        let _ = writeln!(
            out,
            "  {:<44} {:>10} {:>12} {:>10} {:>12}",
            format!("{a} <-> {b}"),
            r.a_to_b.packets,
            r.a_to_b.bytes,
            r.b_to_a.packets,
            r.b_to_a.bytes
        );
    }
    if t.untracked.packets > 0 {
        let _ = writeln!(out, "  (table full: {} packets not attributed)", t.untracked.packets);
    }
}

/// Renders `r` for a terminal, lists cut to `top` rows.
pub fn table(r: &Report, top: usize) -> String {
    let mut o = String::new();
    // In µs, as tshark's io,stat gives it: a capture shorter than a millisecond is not 0.000 s.
    let _ = writeln!(
        o,
        "Frames: {}  bytes: {}  duration: {}",
        r.frames,
        r.bytes,
        seconds(r.last_ns.saturating_sub(r.first_ns), 6)
    );
    if r.unsupported_linktype > 0 {
        let _ = writeln!(
            o,
            "  {} frames of a link type not dissected (counted in totals and throughput only)",
            r.unsupported_linktype
        );
    }
    if r.tunnelled > 0 {
        let _ = writeln!(
            o,
            "  {} frames carry a tunnel (GRE, ERSPAN, VXLAN, Geneve, IP in IP, ...): their inner flows are counted too",
            r.tunnelled
        );
    }
    if r.reassembled > 0 || r.fragments_untracked > 0 {
        let _ = writeln!(
            o,
            "  {} IP datagrams reassembled from fragments (each a TCP or UDP packet at its last fragment){}",
            r.reassembled,
            if r.fragments_untracked > 0 {
                format!("; {} fragments not reassembled (too many datagrams in progress)", r.fragments_untracked)
            } else {
                String::new()
            }
        );
    }
    let d = &r.duplicates;
    let _ = writeln!(
        o,
        "\nDuplicates (identical within {} and {} frames): {} packets, {} bytes",
        ms(d.window_ns),
        d.window_frames,
        d.packets,
        d.bytes
    );
    for e in &d.first {
        example(&mut o, "  ", e);
    }
    let m = &r.malformed;
    let _ = writeln!(o, "\nMalformed or unexpected frames: {}", m.packets);
    for k in &m.kinds {
        let _ = writeln!(o, "  {:<32} {:>10}  {}", k.kind, k.packets, k.description);
        if let Some(h) = &k.hint {
            let _ = writeln!(o, "      hint: {h}");
        }
        for e in &k.first {
            example(&mut o, "      ", e);
        }
    }
    let x = &r.mix;
    let _ = writeln!(o);
    layers(&mut o, "", &x.outer, top);
    let _ = writeln!(o, "Frame sizes (min {}, max {}):", x.min_size, x.max_size);
    for b in x.sizes.iter().filter(|b| b.packets > 0) {
        let range = match b.max {
            Some(m) => format!("{}-{m}", b.min),
            None => format!("{}+", b.min),
        };
        let _ = writeln!(o, "  {:>10} {:>10} pkts {:>14} bytes", range, b.packets, b.bytes);
    }
    if !x.inner.ethertypes.is_empty() {
        let _ = writeln!(o, "\nInside tunnels (the innermost packet of each frame that carries one):");
        layers(&mut o, "  ", &x.inner, top);
    }
    let c = &r.conversations;
    if c.endpoints.count > 0 {
        let _ = writeln!(o, "\nTop talkers ({} endpoints):", c.endpoints.count);
        for e in c.endpoints.rows.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:<40} tx {:>10} pkts {:>12} bytes  rx {:>10} pkts {:>12} bytes",
                e.address, e.tx.packets, e.tx.bytes, e.rx.packets, e.rx.bytes
            );
        }
    }
    conv_rows(&mut o, "TCP flows", &r.tcp.conversations, top);
    conv_rows(&mut o, "UDP flows", &c.udp, top);
    conv_rows(&mut o, "IPv4 conversations", &c.ipv4, top);
    conv_rows(&mut o, "IPv6 conversations", &c.ipv6, top);
    let t = &r.throughput;
    let _ = writeln!(
        o,
        "\nThroughput per {}{}: {} intervals, peak {} and {:.0} pkt/s",
        duration_text(t.step_ns),
        step_change(t).map(|why| format!(" (--step {} {why})", duration_text(t.requested_step_ns))).unwrap_or_default(),
        t.intervals.len(),
        rate(t.peak_bits_per_second),
        t.peak_packets_per_second
    );
    let shown = t.intervals.len().min(top.max(1) * 3);
    // As many decimals as the step has (at least ms): 8 us steps are 0.000008 s apart.
    let digits = (9 - t.step_ns.to_string().bytes().rev().take_while(|&b| b == b'0').count().min(9)).max(3);
    for i in &t.intervals[..shown] {
        let _ = writeln!(
            o,
            "  {:>14} {:>10} pkts {:>12} bytes {:>16} {:>12.0} pkt/s",
            seconds(i.start_ns, digits),
            i.packets,
            i.bytes,
            rate(i.bits_per_second),
            i.packets_per_second
        );
    }
    if shown < t.intervals.len() {
        let _ = writeln!(o, "  ... {} more (--json lists all)", t.intervals.len() - shown);
    }
    if t.beyond.packets > 0 {
        let _ = writeln!(
            o,
            "  {} packets ({} bytes) lie past the only interval (no step fits this span into one): give --max-intervals 2 or more",
            t.beyond.packets, t.beyond.bytes
        );
    }
    let tc = &r.tcp.counts;
    let _ = writeln!(o, "\nTCP: {} segments", tc.segments);
    let _ = writeln!(
        o,
        "  retransmissions {} (fast {}, spurious {}), out of order {}, duplicate ACKs {}",
        tc.retransmissions, tc.fast_retransmissions, tc.spurious_retransmissions, tc.out_of_order, tc.duplicate_acks
    );
    let _ = writeln!(
        o,
        "  previous segment not captured {}, ACKed unseen {}, keep-alives {}, zero windows {}, window updates {}",
        tc.lost_segments, tc.acked_unseen, tc.keep_alives, tc.zero_windows, tc.window_updates
    );
    let h = &r.tcp.handshake_rtt;
    if h.count > 0 {
        let _ = writeln!(
            o,
            "  handshake RTT over {} connections: min {} p50 {} p99 {} max {}",
            h.count,
            ms(h.min_ns),
            ms(h.p50_ns),
            ms(h.p99_ns),
            ms(h.max_ns)
        );
        for s in &r.tcp.slowest_handshakes {
            let _ = writeln!(o, "    {} -> {}: {}", s.client, s.server, ms(s.rtt_ns));
        }
    }
    if !r.rtp.streams.is_empty() {
        let _ = writeln!(o, "\nRTP streams: {}", r.rtp.streams.len());
        for s in r.rtp.streams.iter().take(top) {
            let _ = writeln!(
                o,
                "  {}:{} > {}:{} ssrc 0x{:08x} pt {}: {} pkts, lost {} ({:.1}%), delta min/mean/max {}, jitter min/mean/max {}",
                s.src,
                s.src_port,
                s.dst,
                s.dst_port,
                s.ssrc,
                s.payload_type,
                s.packets,
                s.lost,
                s.lost_percent,
                figures(s.regular_packets > 0, &[Some(s.min_delta_ms), Some(s.mean_delta_ms), Some(s.max_delta_ms)]),
                figures(s.regular_packets > 0, &[s.min_jitter_ms, s.mean_jitter_ms, s.max_jitter_ms]),
            );
        }
    }
    let u = &r.udp_streams;
    if !u.streams.is_empty() {
        let _ =
            writeln!(o, "\nUDP streams, not RTP: {} (inter-arrival jitter against the mean delta)", u.streams.len());
        for s in u.streams.iter().take(top) {
            let _ = writeln!(
                o,
                "  {}:{} > {}:{}: {} pkts, delta min/mean/max {}, jitter mean/max {}",
                s.src.text(),
                s.src_port,
                s.dst.text(),
                s.dst_port,
                s.packets,
                figures(s.packets > 1, &[Some(s.min_delta_ms), Some(s.mean_delta_ms), Some(s.max_delta_ms)]),
                figures(true, &[s.mean_jitter_ms, s.max_jitter_ms]),
            );
        }
    }
    if let Some(d) = r.delay.as_ref().filter(|d| d.matched == 0) {
        let _ = writeln!(
            o,
            "\nOne-way delay: 0 matched of {} here ({} reference packets): no packet was seen at both points",
            d.unmatched, d.reference_packets
        );
    } else if let Some(d) = &r.delay {
        let _ = writeln!(
            o,
            "\nOne-way delay: {} matched of {} here ({} reference packets): min {} p50 {} p90 {} p99 {} max {}",
            d.matched,
            d.matched + d.unmatched,
            d.reference_packets,
            sms(d.min_ns),
            sms(d.p50_ns),
            sms(d.p90_ns),
            sms(d.p99_ns),
            sms(d.max_ns)
        );
    }
    o
}

/// Figures in ms to three decimals (`20.000/20.000/20.000 ms`), or `n/a` when they were
/// not `measured` or one is missing (no second packet, no clock rate): `n/a` means nothing
/// was measured, `0.000` a measured zero, never the one for the other.
fn figures(measured: bool, v: &[Option<f64>]) -> String {
    match v.iter().copied().collect::<Option<Vec<f64>>>() {
        Some(v) if measured => {
            format!("{} ms", v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join("/"))
        }
        _ => "n/a".to_string(),
    }
}

fn sms(ns: i64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_in_their_largest_unit() {
        for (ns, want) in [
            (1_000_000_000, "1 s"),
            (65_536_000_000, "65.536 s"),
            (2_000_000_001, "2.000000001 s"),
            (250_000_000, "250 ms"),
            (1_500, "1.5 us"),
            (800, "800 ns"),
            (0, "0 ns"),
        ] {
            assert_eq!(super::duration_text(ns), want);
        }
    }

    #[test]
    fn seconds_keep_the_digits_asked_for_without_rounding() {
        assert_eq!(super::seconds(8_000, 6), "0.000008 s");
        assert_eq!(super::seconds(1_999_999_999, 3), "1.999 s");
        assert_eq!(super::seconds(1_500_000_000, 0), "1 s");
        assert_eq!(super::seconds(1, 12), "0.000000001 s");
    }

    #[test]
    fn rates_take_the_largest_unit_they_reach() {
        let r = super::rate;
        assert_eq!(
            [r(1.5e9), r(2.5e6), r(1e6), r(1e3), r(999.4), r(999_995.0), r(999.6), r(994_999.0), r(2e12)],
            [
                "1.50 Gbit/s",
                "2.50 Mbit/s",
                "1.00 Mbit/s",
                "1.00 kbit/s",
                "999 bit/s",
                "1.00 Mbit/s",
                "1.00 kbit/s",
                "995.00 kbit/s",
                "2000.00 Gbit/s"
            ]
        );
    }

    #[test]
    fn the_step_change_says_raised_doubled_or_both() {
        let io = |requested_step_ns, step_ns| crate::qos::io::IoReport {
            step_ns,
            requested_step_ns,
            first_ns: 0,
            intervals: Vec::new(),
            beyond: crate::Count::default(),
            max_intervals: 10,
            peak_bits_per_second: 0.0,
            peak_packets_per_second: 0.0,
        };
        assert_eq!(super::step_change(&io(1_000_000, 1_000_000)), None);
        let raised = super::step_change(&io(1, 1_000)).unwrap();
        assert_eq!(raised, "raised to 1 us: frame times count in whole microseconds, as tshark's io,stat counts them");
        let doubled = super::step_change(&io(1_000_000, 4_000_000)).unwrap();
        assert_eq!(doubled, "doubled to fit the capture into 10 intervals, --max-intervals");
        assert_eq!(super::step_change(&io(1, 8_000)).unwrap(), format!("{raised}, then {doubled}"));
    }
}
