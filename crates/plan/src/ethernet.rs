//! Ethernet framing on the wire (IEEE 802.3 clause 4 and 35): what one frame
//! costs a link, and link rates as users write them.
//!
//! A frame of `L` bytes as a capture stores it (destination MAC to the end of
//! the payload, no FCS: pcap's lengths, e.g. 1514) occupies on the wire
//! `max(L, 60) + 4` (FCS) `+ 8` (preamble and start-of-frame delimiter)
//! `+ 12` (minimum inter-frame gap) bytes. Frames shorter than 60 bytes (64
//! with FCS) are padded by the sender; a receiving NIC hands the padded
//! frame up, so a capture on the receiving side stores 60 bytes.
//!
//! Check numbers: 10 Gb/s of 64-byte frames with FCS is 10^10 / 8 / 84 =
//! 14,880,952 frames/s; of 1514-byte frames without FCS 10^10 / 8 / 1538 =
//! 812,744 frames/s.

/// Preamble (7) and start-of-frame delimiter (1).
pub const PREAMBLE_SFD: u64 = 8;
/// Minimum inter-frame gap (96 bit times).
pub const IFG: u64 = 12;
/// Frame check sequence (CRC-32).
pub const FCS: u64 = 4;
/// What a frame costs on the wire besides its bytes and FCS.
pub const PER_FRAME_GAP: u64 = PREAMBLE_SFD + IFG;
/// The shortest frame without its FCS (64 with it): shorter ones are padded.
pub const MIN_FRAME: u64 = 60;
/// The shortest size accepted: an Ethernet header (without FCS).
pub const MIN_SIZE: u64 = 14;
/// The largest size accepted (without FCS): beyond any jumbo frame.
pub const MAX_SIZE: u64 = 65_535;

/// Whether a frame size counts the 4-byte FCS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeConvention {
    /// pcap's lengths (1514, 60): the frame as captured, without FCS. The default.
    WithoutFcs,
    /// Traffic generators' and RFC 2544's lengths (1518, 64): FCS included.
    WithFcs,
}

impl SizeConvention {
    /// The frame without FCS (as captured) that `size` names, not yet padded.
    /// `None` below an Ethernet header or above [`MAX_SIZE`].
    pub fn frame_len(self, size: u64) -> Option<u64> {
        let frame = match self {
            SizeConvention::WithoutFcs => size,
            SizeConvention::WithFcs => size.checked_sub(FCS)?,
        };
        (MIN_SIZE..=MAX_SIZE).contains(&frame).then_some(frame)
    }

    /// The size that names `frame` (a frame without FCS) in this convention.
    pub fn size_of(self, frame: u64) -> u64 {
        match self {
            SizeConvention::WithoutFcs => frame,
            SizeConvention::WithFcs => frame + FCS,
        }
    }

    /// The range of sizes accepted, for messages.
    pub fn range(self) -> (u64, u64) {
        (self.size_of(MIN_SIZE), self.size_of(MAX_SIZE))
    }
}

/// A frame as a receiving capture stores it: padded to [`MIN_FRAME`].
pub fn padded(frame: u64) -> u64 {
    frame.max(MIN_FRAME)
}

/// Bytes one frame of `frame` bytes (without FCS) occupies on the wire:
/// padding, FCS, preamble + SFD and the inter-frame gap.
pub fn wire_len(frame: u64) -> u64 {
    padded(frame) + FCS + PER_FRAME_GAP
}

/// Frames per second of `frame`-byte frames (without FCS) on a saturated
/// link of `link_bps` bits/s.
pub fn line_rate_pps(link_bps: f64, frame: u64) -> f64 {
    link_bps / 8.0 / wire_len(frame) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_check_numbers() {
        // 64 bytes with FCS: 60 without; 60 + 4 + 20 = 84 bytes on the wire.
        let f = SizeConvention::WithFcs.frame_len(64).unwrap();
        assert_eq!(f, 60);
        assert_eq!(wire_len(f), 84);
        assert_eq!(line_rate_pps(10e9, f).round(), 14_880_952.0);
        // 1514 without FCS: 1514 + 4 + 20 = 1538.
        assert_eq!(wire_len(1514), 1538);
        assert_eq!(line_rate_pps(10e9, 1514).round(), 812_744.0);
        // 100 GbE, 64-byte frames: the papers' 148.8 Mpps.
        assert_eq!(line_rate_pps(100e9, 60).round(), 148_809_524.0);
    }

    #[test]
    fn every_link_speed_by_hand() {
        // 10^r / 8 / 84 and / 1538, computed by hand (rounded to the frame).
        for (bps, p64, p1514) in [
            (1e9, 1_488_095.0, 81_274.0),
            (10e9, 14_880_952.0, 812_744.0),
            (25e9, 37_202_381.0, 2_031_860.0),
            (40e9, 59_523_810.0, 3_250_975.0),
            (100e9, 148_809_524.0, 8_127_438.0),
        ] {
            assert_eq!(line_rate_pps(bps, 60).round(), p64, "{bps}");
            assert_eq!(line_rate_pps(bps, 1514).round(), p1514, "{bps}");
        }
    }

    #[test]
    fn short_frames_are_padded() {
        assert_eq!(wire_len(14), 84);
        assert_eq!(wire_len(42), 84);
        assert_eq!(wire_len(61), 85);
        assert_eq!(padded(42), 60);
        assert_eq!(SizeConvention::WithFcs.frame_len(17), None);
        assert_eq!(SizeConvention::WithFcs.frame_len(18), Some(14));
        assert_eq!(SizeConvention::WithoutFcs.frame_len(13), None);
        assert_eq!(SizeConvention::WithoutFcs.frame_len(65_536), None);
    }
}
