//! The container format of a capture file: the one `Format` every crate
//! uses (the reader reports it, the store writes it, the catalog and the
//! index name it).

use core::fmt;

/// The container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// pcap; wirevault writes little-endian nanosecond files (magic a1b23c4d).
    Pcap,
    /// pcapng; wirevault writes one SHB, one IDB (if_tsresol 9) and EPBs.
    Pcapng,
}

impl Format {
    /// Every format, in the order the command line lists them.
    pub const ALL: [Format; 2] = [Format::Pcap, Format::Pcapng];

    /// The name used on the command line and in the catalog.
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap => "pcap",
            Format::Pcapng => "pcapng",
        }
    }

    /// The format named `name` ([`Format::name`]).
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The format of a capture file from its first four bytes: pcapng when
    /// they are a Section Header Block's type, else pcap (whose magic the
    /// pcap parser then checks).
    pub fn sniff(first: [u8; 4]) -> Format {
        if u32::from_le_bytes(first) == crate::pcapng::BT_SHB {
            Format::Pcapng
        } else {
            Format::Pcap
        }
    }

    /// The format of a capture file whose first four bytes are `first`, or
    /// None when they start no capture file: a pcap magic (µs, ns or
    /// Kuznetzov's modified pcap, either byte order; what libpcap reads) or
    /// a Section Header Block's type.
    pub fn of_magic(first: [u8; 4]) -> Option<Format> {
        if u32::from_le_bytes(first) == crate::pcapng::BT_SHB {
            Some(Format::Pcapng)
        } else {
            crate::pcap::Magic::parse(first).map(|_| Format::Pcap)
        }
    }

    /// File name extension of the files wirevault writes.
    pub fn extension(self) -> &'static str {
        self.name()
    }

    /// Bytes before the first record in a file wirevault writes.
    pub fn preamble_len(self) -> usize {
        match self {
            Format::Pcap => crate::pcap::FILE_HEADER_LEN,
            Format::Pcapng => crate::pcapng::PREAMBLE_LEN,
        }
    }

    /// Bytes a record of `caplen` captured bytes takes in a file wirevault writes.
    #[inline]
    pub fn record_len(self, caplen: u32) -> u64 {
        match self {
            Format::Pcap => (crate::pcap::RECORD_HEADER_LEN + caplen as usize) as u64,
            Format::Pcapng => crate::pcapng::epb_len(caplen) as u64,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Format::from_name(s).ok_or_else(|| format!("unknown capture file format \"{s}\" (pcap or pcapng)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(f));
            assert_eq!(f.to_string().parse::<Format>(), Ok(f));
        }
        assert_eq!(Format::from_name("PCAP"), None);
        assert_eq!(Format::Pcapng.record_len(61), 96);
        assert_eq!(Format::Pcap.record_len(61), 77);
    }

    #[test]
    fn magics_of_every_capture_kind() {
        for m in [0xa1b2_c3d4u32, 0xa1b2_3c4d, 0xa1b2_cd34] {
            assert_eq!(Format::of_magic(m.to_le_bytes()), Some(Format::Pcap), "{m:x}");
            assert_eq!(Format::of_magic(m.to_be_bytes()), Some(Format::Pcap), "{m:x}");
        }
        assert_eq!(Format::of_magic([0x0a, 0x0d, 0x0d, 0x0a]), Some(Format::Pcapng));
        assert_eq!(Format::of_magic(*b"GIF8"), None);
        assert_eq!(Format::of_magic([0x1f, 0x8b, 8, 0]), None);
    }
}
