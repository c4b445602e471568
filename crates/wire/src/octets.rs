//! The one bounds-checked byte reader (and writer) every parser in
//! wirevault uses, after quiche's `Octets`: a cursor over a slice whose
//! `get_*` calls advance it and return `None` instead of reading past the
//! end. The byte order is chosen once, when the cursor is made for a file
//! or a section, not passed to every call.
//!
//! A format type parses its fixed part from one cursor (`?` on each field)
//! and is the only place that knows its field order; callers never index
//! the bytes themselves.

/// Byte order of a file or a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Endian {
    #[default]
    Little,
    Big,
}

impl Endian {
    /// The byte order of this machine (kernel structs shared in memory).
    pub const NATIVE: Endian = if cfg!(target_endian = "big") { Endian::Big } else { Endian::Little };

    /// The byte order in which the 4 bytes `b` read as `want`, if either does.
    pub fn detect(b: [u8; 4], want: u32) -> Option<Endian> {
        if u32::from_le_bytes(b) == want {
            Some(Endian::Little)
        } else if u32::from_be_bytes(b) == want {
            Some(Endian::Big)
        } else {
            None
        }
    }
}

macro_rules! get {
    ($name:ident, $peek:ident, $t:ty) => {
        /// Reads the next value in the cursor's byte order and advances.
        #[inline]
        pub fn $name(&mut self) -> Option<$t> {
            let v = self.$peek()?;
            self.off += size_of::<$t>();
            Some(v)
        }

        /// Reads the next value without advancing.
        #[inline]
        pub fn $peek(&self) -> Option<$t> {
            let a = *self.buf.get(self.off..)?.first_chunk::<{ size_of::<$t>() }>()?;
            Some(match self.endian {
                Endian::Little => <$t>::from_le_bytes(a),
                Endian::Big => <$t>::from_be_bytes(a),
            })
        }
    };
}

/// A read cursor over a byte slice (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Octets<'a> {
    buf: &'a [u8],
    off: usize,
    endian: Endian,
}

impl<'a> Octets<'a> {
    /// A cursor at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8], endian: Endian) -> Self {
        Octets { buf, off: 0, endian }
    }

    /// A little-endian cursor.
    #[inline]
    pub fn le(buf: &'a [u8]) -> Self {
        Self::new(buf, Endian::Little)
    }

    /// A big-endian (network order) cursor.
    #[inline]
    pub fn be(buf: &'a [u8]) -> Self {
        Self::new(buf, Endian::Big)
    }

    /// The byte order of this cursor.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Bytes read so far.
    #[inline]
    pub fn off(&self) -> usize {
        self.off
    }

    /// Bytes left.
    #[inline]
    pub fn cap(&self) -> usize {
        self.buf.len().saturating_sub(self.off)
    }

    /// A cursor at byte `off` of the same slice (for structs read by their
    /// fields' offsets); `None` past the end.
    #[inline]
    pub fn at(&self, off: usize) -> Option<Octets<'a>> {
        (off <= self.buf.len()).then_some(Octets { buf: self.buf, off, endian: self.endian })
    }

    /// Reads one byte.
    #[inline]
    pub fn get_u8(&mut self) -> Option<u8> {
        let v = *self.buf.get(self.off)?;
        self.off += 1;
        Some(v)
    }

    get!(get_u16, peek_u16, u16);
    get!(get_u32, peek_u32, u32);
    get!(get_u64, peek_u64, u64);

    /// Reads `n` bytes.
    #[inline]
    pub fn get_bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.buf.get(self.off..self.off.checked_add(n)?)?;
        self.off += n;
        Some(b)
    }

    /// Reads a fixed-size array.
    #[inline]
    pub fn get_array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let a = *self.buf.get(self.off..)?.first_chunk::<N>()?;
        self.off += N;
        Some(a)
    }

    /// Skips `n` bytes.
    #[inline]
    pub fn skip(&mut self, n: usize) -> Option<()> {
        self.get_bytes(n).map(|_| ())
    }

    /// The bytes not read yet.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.off..).unwrap_or(&[])
    }
}

macro_rules! put {
    ($name:ident, $t:ty) => {
        /// Writes a value in the cursor's byte order and advances.
        #[inline]
        pub fn $name(&mut self, v: $t) -> Option<()> {
            self.put_bytes(&match self.endian {
                Endian::Little => v.to_le_bytes(),
                Endian::Big => v.to_be_bytes(),
            })
        }
    };
}

/// A write cursor over a mutable byte slice; `put_*` return `None` when the
/// slice is too short (nothing is written then).
#[derive(Debug)]
pub struct OctetsMut<'a> {
    buf: &'a mut [u8],
    off: usize,
    endian: Endian,
}

impl<'a> OctetsMut<'a> {
    /// A cursor at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a mut [u8], endian: Endian) -> Self {
        OctetsMut { buf, off: 0, endian }
    }

    /// A little-endian cursor.
    #[inline]
    pub fn le(buf: &'a mut [u8]) -> Self {
        Self::new(buf, Endian::Little)
    }

    /// Bytes written so far.
    #[inline]
    pub fn off(&self) -> usize {
        self.off
    }

    /// Writes bytes.
    #[inline]
    pub fn put_bytes(&mut self, b: &[u8]) -> Option<()> {
        self.buf.get_mut(self.off..self.off.checked_add(b.len())?)?.copy_from_slice(b);
        self.off += b.len();
        Some(())
    }

    /// Writes one byte.
    #[inline]
    pub fn put_u8(&mut self, v: u8) -> Option<()> {
        self.put_bytes(&[v])
    }

    put!(put_u16, u16);
    put!(put_u32, u32);
    put!(put_u64, u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_the_chosen_order_and_stops_at_the_end() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        let mut o = Octets::le(&b);
        assert_eq!(o.get_u8(), Some(1));
        assert_eq!(o.get_u16(), Some(0x0302));
        assert_eq!(o.peek_u32(), Some(0x0706_0504));
        assert_eq!(o.get_u32(), Some(0x0706_0504));
        assert_eq!(o.get_u32(), None, "only 2 bytes left");
        assert_eq!(o.off(), 7);
        assert_eq!(o.get_bytes(2), Some(&[8, 9][..]));
        assert_eq!(o.get_u8(), None);
        let mut o = Octets::be(&b);
        assert_eq!(o.get_u64(), Some(0x0102_0304_0506_0708));
        assert_eq!(o.cap(), 1);
        assert_eq!(o.get_bytes(usize::MAX), None);
    }

    #[test]
    fn writes_round_trip() {
        for endian in [Endian::Little, Endian::Big] {
            let mut b = [0xffu8; 15];
            let mut w = OctetsMut::new(&mut b, endian);
            w.put_u8(7).unwrap();
            w.put_u16(0x1234).unwrap();
            w.put_u32(0xdead_beef).unwrap();
            w.put_u64(0x0102_0304_0506_0708).unwrap();
            assert_eq!(w.put_u8(0), None);
            let mut r = Octets::new(&b, endian);
            assert_eq!(
                (r.get_u8(), r.get_u16(), r.get_u32(), r.get_u64()),
                (Some(7), Some(0x1234), Some(0xdead_beef), Some(0x0102_0304_0506_0708))
            );
        }
        assert_eq!(Endian::detect(0x1a2b_3c4du32.to_be_bytes(), 0x1a2b_3c4d), Some(Endian::Big));
        assert_eq!(Endian::detect(0x1a2b_3c4du32.to_le_bytes(), 0x1a2b_3c4d), Some(Endian::Little));
        assert_eq!(Endian::detect([0; 4], 0x1a2b_3c4d), None);
    }
}
