//! The pcap output of a query: records gathered in 1 MiB chunks, written
//! inline (files, `/dev/null`) or by a writer thread (pipes, sockets).

use super::*;
use std::sync::Arc;
/// Bytes handed to the output thread at a time (fewer hand-offs, fewer
/// wake-ups: each costs a futex call and a context switch).
pub(super) const OUT_CHUNK: usize = 1 << 20;
/// Room for one more record of the largest snapshot length beyond a chunk
/// (a record of an odd file beyond that grows a buffer once).
pub(super) const OUT_CAP: usize = OUT_CHUNK + wv_wire::MAX_SNAPLEN as usize + wv_wire::pcap::RECORD_HEADER_LEN;

/// Output buffers passed to a writer thread: the query fills one while the
/// thread writes another, so the copy into a pipe (or the page cache)
/// overlaps with reading and filtering instead of adding to it. Three
/// buffers circulate; none is allocated after the start.
pub(super) struct Chunks {
    pub(super) cur: Vec<u8>,
    pub(super) tx: Option<SyncSender<Msg>>,
    /// The output is a pipe the writer thread can splice a file into.
    pub(super) pipe: bool,
    pub(super) back: Receiver<Vec<u8>>,
}

/// What the writer thread sends, in order: bytes, or a byte range of a
/// file to splice into the pipe.
pub(super) enum Msg {
    Bytes(Vec<u8>),
    Splice(Arc<File>, u64, u64),
}

/// Where the writer thread writes: any writer, or a pipe it may splice into.
pub(super) enum Dest<'a> {
    Any(&'a mut (dyn Write + Send)),
    Pipe(&'a mut File),
}

impl Dest<'_> {
    fn w(&mut self) -> &mut dyn Write {
        match self {
            Dest::Any(w) => *w,
            Dest::Pipe(f) => *f,
        }
    }
}

/// The writer thread: writes what `rx` brings, returns buffers on `back`.
pub(super) fn writer(mut dest: Dest<'_>, rx: Receiver<Msg>, back: SyncSender<Vec<u8>>) -> io::Result<()> {
    for m in rx {
        match m {
            Msg::Bytes(mut buf) => {
                dest.w().write_all(&buf)?;
                buf.clear();
                let _ = back.send(buf);
            }
            Msg::Splice(file, off, len) => {
                let mut moved = 0;
                if let Dest::Pipe(p) = &dest {
                    match wv_sys::pipe::splice_file(&file, off, len, *p, &mut moved) {
                        Ok(()) => {}
                        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {}
                        Err(e) => return Err(e),
                    }
                }
                // Not a pipe, or splice refused: copy the rest.
                let mut buf = vec![0u8; OUT_CHUNK];
                while moved < len {
                    let want = (len - moved).min(OUT_CHUNK as u64) as usize;
                    let n = file.read_at(&mut buf[..want], off + moved)?;
                    if n == 0 {
                        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a stored file shrank while read"));
                    }
                    dest.w().write_all(&buf[..n])?;
                    moved += n as u64;
                }
            }
        }
    }
    dest.w().flush()
}

/// The writer thread went away: its own error is reported after the join.
pub(super) fn writer_gone() -> io::Error {
    io::Error::other("the output thread stopped")
}

impl Chunks {
    pub(super) fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        if self.cur.len() + b.len() > self.cur.capacity() {
            self.hand_off()?;
        }
        self.cur.extend_from_slice(b);
        if self.cur.len() >= OUT_CHUNK {
            self.hand_off()?;
        }
        Ok(())
    }

    pub(super) fn hand_off(&mut self) -> io::Result<()> {
        if self.cur.is_empty() {
            return Ok(());
        }
        let next = self.back.recv().map_err(|_| writer_gone())?;
        let full = std::mem::replace(&mut self.cur, next);
        self.tx.as_ref().ok_or_else(writer_gone)?.send(Msg::Bytes(full)).map_err(|_| writer_gone())
    }

    /// Sends `len` bytes of `file` at `off` after the bytes queued so far.
    pub(super) fn splice(&mut self, file: &Arc<File>, off: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.hand_off()?;
        self.tx.as_ref().ok_or_else(writer_gone)?.send(Msg::Splice(file.clone(), off, len)).map_err(|_| writer_gone())
    }

    /// Hands off the last bytes and ends the thread's input.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        let r = self.hand_off();
        self.tx = None;
        r
    }
}

/// Where [`PcapOut`] puts its bytes.
pub(super) enum OutBytes<'a> {
    Inline(io::BufWriter<&'a mut dyn Write>),
    Chunks(Chunks),
    /// No bytes: each record goes to the callback of [`Sink::Packets`].
    Each(&'a mut PacketFn<'a>),
    /// Chunks of about [`OUT_CHUNK`] bytes handed over whole to the
    /// callback of [`Sink::Chunks`] (no copy on the way out).
    Owned(Vec<u8>, &'a mut ChunkFn<'a>),
}

impl OutBytes<'_> {
    #[inline]
    pub(super) fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            OutBytes::Inline(w) => w.write_all(b),
            OutBytes::Chunks(c) => c.write_all(b),
            OutBytes::Each(_) => Ok(()),
            OutBytes::Owned(cur, give) => {
                cur.extend_from_slice(b);
                if cur.len() >= OUT_CHUNK {
                    let mut next = give(std::mem::take(cur))?;
                    next.clear();
                    next.reserve(OUT_CAP);
                    *cur = next;
                }
                Ok(())
            }
        }
    }
    /// Sends the pending run of `sp` (a file, its start and end) and
    /// leaves it empty at its end.
    pub(super) fn splice_run(&mut self, sp: &mut Option<(Arc<File>, u64, u64)>) -> io::Result<()> {
        if let (OutBytes::Chunks(c), Some((f, s, e))) = (self, sp.as_mut()) {
            c.splice(f, *s, *e - *s)?;
            *s = *e;
        }
        Ok(())
    }
    pub(super) fn finish(&mut self) -> io::Result<()> {
        match self {
            OutBytes::Inline(w) => w.flush(),
            OutBytes::Chunks(c) => c.finish(),
            OutBytes::Each(_) => Ok(()),
            OutBytes::Owned(cur, give) if !cur.is_empty() => give(std::mem::take(cur)).map(drop),
            OutBytes::Owned(..) => Ok(()),
        }
    }
}

/// Writes a little-endian nanosecond pcap stream.
pub(super) struct PcapOut<'a> {
    pub(super) w: OutBytes<'a>,
    pub(super) linktype: Option<u32>,
    pub(super) snaplen: u32,
    /// Records written dated after 2106-02-07T06:28:15Z, whose seconds a
    /// pcap record header holds modulo 2^32 (as libpcap writes them too).
    pub(super) wrapped: u64,
}

/// The first nanosecond a pcap record's 32-bit seconds cannot hold.
const PCAP_SECONDS_END_NS: u64 = (u32::MAX as u64 + 1) * 1_000_000_000;

impl PcapOut<'_> {
    pub(super) fn header(&mut self, linktype: u32) -> io::Result<()> {
        let mut h = [0u8; wv_wire::pcap::FILE_HEADER_LEN];
        wv_wire::pcap::emit_file_header(&mut h, self.snaplen, linktype);
        self.linktype = Some(linktype);
        self.w.write_all(&h)
    }
    pub(super) fn packet(&mut self, h: &Head) -> Result<(), QueryError> {
        self.record(h.ts_ns, h.origlen, h.linktype, &h.data)
    }
    #[inline]
    pub(super) fn record(&mut self, ts_ns: u64, origlen: u32, linktype: u32, data: &[u8]) -> Result<(), QueryError> {
        if let OutBytes::Each(f) = &mut self.w {
            return f(PacketRef { ts_ns, origlen, linktype, data }).map_err(QueryError::Output);
        }
        match self.linktype {
            None => self.header(linktype).map_err(QueryError::Output)?,
            Some(lt) if lt != linktype => {
                return Err(QueryError::MixedLinktypes { first: lt, other: linktype });
            }
            Some(_) => {}
        }
        self.wrapped += u64::from(ts_ns >= PCAP_SECONDS_END_NS);
        let mut rh = [0u8; wv_wire::pcap::RECORD_HEADER_LEN];
        wv_wire::pcap::emit_record_header(&mut rh, ts_ns, data.len() as u32, origlen);
        self.w.write_all(&rh).map_err(QueryError::Output)?;
        self.w.write_all(data).map_err(QueryError::Output)
    }
}
