//! pcapng interfaces: an Interface Description Block's options parsed the
//! way libpcap's `add_interface` does, and the timestamp conversion they
//! imply.

use crate::linktype::effective_snaplen;
use crate::octets::Octets;
use crate::pcapng::{self, InterfaceDescription};

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// How to turn an interface's timestamp fraction into nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    Nanos,
    /// Power-of-ten resolution coarser than ns: multiply.
    Mul(u64),
    /// Power-of-ten resolution finer than ns: divide (truncating, as libpcap).
    Div(u64),
    /// Power-of-two resolution: `frac * 1e9 / tsresol`.
    Binary,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Interface {
    pub(super) linktype: u32,
    pub(super) snaplen: u32,
    /// Timestamp units per second.
    pub(super) tsresol: u64,
    pub(super) scale: Scale,
    pub(super) tsoffset: i64,
}

impl Interface {
    /// The declared resolution: `if_tsresol` as given (10^-n or 2^-n s).
    pub(super) fn resolution(&self) -> super::TsResolution {
        match self.scale {
            Scale::Binary => super::TsResolution::Binary(self.tsresol.trailing_zeros() as u8),
            _ => super::TsResolution::Decimal(self.tsresol.max(1).ilog10() as u8),
        }
    }

    /// libpcap's conversion (seconds = t / tsresol + tsoffset, fraction
    /// scaled), done in 128 bits so that no input overflows.
    pub(super) fn ts_ns(&self, t: u64) -> u64 {
        // tsresol is never 0: it is 10^n or 2^n.
        let sec = t / self.tsresol.max(1);
        let frac = t % self.tsresol.max(1);
        let frac_ns = match self.scale {
            Scale::Nanos => frac as u128,
            Scale::Mul(m) => frac as u128 * m as u128,
            Scale::Div(d) => (frac / d.max(1)) as u128,
            Scale::Binary => frac as u128 * NANOS_PER_SEC as u128 / self.tsresol.max(1) as u128,
        };
        let ns = (sec as i128 + self.tsoffset as i128) * NANOS_PER_SEC as i128 + frac_ns as i128;
        ns.clamp(0, u64::MAX as i128) as u64
    }
}

/// Parses an IDB body (after the block header) the way libpcap's
/// `add_interface` does; errors are the problem in words.
pub(super) fn parse_idb(fixed: InterfaceDescription, mut opts: Octets<'_>) -> Result<Interface, String> {
    let linktype = u32::from(fixed.linktype);
    let snaplen = fixed.snaplen;
    let mut tsresol: u64 = 1_000_000;
    let mut binary = false;
    let mut tsoffset: i64 = 0;
    let (mut saw_tsresol, mut saw_tsoffset) = (false, false);
    let endian = opts.endian();
    while opts.cap() > 0 {
        let (Some(code), Some(len)) = (opts.get_u16(), opts.get_u16()) else {
            return Err("an option header is cut short by the end of the block".into());
        };
        let pad = pcapng::pad4(usize::from(len)) - usize::from(len);
        let (Some(value), Some(())) = (opts.get_bytes(usize::from(len)), opts.skip(pad)) else {
            return Err(format!("option {code} of {len} bytes is cut short by the end of the block"));
        };
        match code {
            pcapng::OPT_ENDOFOPT => {
                if len != 0 {
                    return Err(format!("opt_endofopt option has length {len} != 0"));
                }
                break;
            }
            pcapng::IF_TSRESOL => {
                if len != 1 {
                    return Err(format!("if_tsresol option has length {len} != 1"));
                }
                if saw_tsresol {
                    return Err("more than one if_tsresol option".into());
                }
                saw_tsresol = true;
                let v = value.first().copied().unwrap_or(6);
                if v & 0x80 != 0 {
                    let shift = v & 0x7f;
                    if shift > 63 {
                        return Err(format!("if_tsresol 2^-{shift} is too fine"));
                    }
                    binary = true;
                    tsresol = 1u64 << shift;
                } else {
                    if v > 19 {
                        return Err(format!("if_tsresol 10^-{v} is too fine"));
                    }
                    binary = false;
                    tsresol = 10u64.pow(u32::from(v));
                }
            }
            pcapng::IF_TSOFFSET => {
                if len != 8 {
                    return Err(format!("if_tsoffset option has length {len} != 8"));
                }
                if saw_tsoffset {
                    return Err("more than one if_tsoffset option".into());
                }
                saw_tsoffset = true;
                let Some(v) = Octets::new(value, endian).get_u64() else {
                    return Err(format!("if_tsoffset option has length {len} != 8"));
                };
                tsoffset = v as i64;
            }
            _ => {}
        }
    }
    let scale = if binary {
        Scale::Binary
    } else if tsresol == NANOS_PER_SEC {
        Scale::Nanos
    } else if tsresol < NANOS_PER_SEC {
        Scale::Mul(NANOS_PER_SEC / tsresol)
    } else {
        Scale::Div(tsresol / NANOS_PER_SEC)
    };
    Ok(Interface { linktype, snaplen: effective_snaplen(linktype, snaplen), tsresol, scale, tsoffset })
}
