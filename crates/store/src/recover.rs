//! Finding the valid part of a capture file that was not closed cleanly
//! (a write error, a crash): the longest prefix made of complete records.

use crate::catalog::WritePath;
use crate::Format;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use wv_wire::octets::{Endian, Octets};
use wv_wire::{pcap, pcapng};

/// The valid prefix of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidPrefix {
    /// Bytes from the start of the file up to the end of the last complete record.
    pub len: u64,
    /// Bytes before the file's first hole (its length when it has none, or
    /// when the file is not partial). Records are looked for only there.
    pub data_len: u64,
    pub packets: u64,
    /// Min and max timestamp of the complete records.
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub linktype: u32,
    pub snaplen: u32,
    /// How the file was written, as far as the file says: every pcap file
    /// and a pcapng file whose first block after the header is a record
    /// came from the copy path; a zero-copy file says so in the local-use
    /// block that fills its first page ([`WritePath::mark`]). `None` for a
    /// zero-copy file written before that mark existed (its bytes are the
    /// same whether the blocks went out from the ring or, after the kernel
    /// refused that, from a copy) and for a file with no record.
    pub path: Option<WritePath>,
}

/// Options a zero-copy EPB may carry (`epb_flags`: 8 bytes).
const MAX_EPB_OPTIONS: usize = 8;
/// The largest local-use block a zero-copy file holds: a ring block (the
/// ring's block size is at most 1 GiB; kept generous).
const MAX_SKIP_BLOCK: u64 = 1 << 30;

/// Walks a file wirevault wrote (LE ns pcap or its pcapng layout) and returns
/// its valid prefix. A record is complete when all its bytes are present and
/// its header is plausible (caplen within the snaplen bound, not an all-zero
/// header). With `partial` (a file whose writing was interrupted) its bytes
/// must also lie before the file's first hole: holes are what preallocated
/// but unwritten extents and writes that never completed leave; they read as
/// zeros, so a record reaching into one would otherwise be kept with a zeroed
/// tail. (A file system that stores written all-zero blocks as holes, such as
/// ZFS with compression, makes this cut a partial file at a block of zeros
/// inside a frame: records after it are lost, none is corrupted.)
pub fn valid_prefix(path: &Path, format: Format, partial: bool) -> io::Result<ValidPrefix> {
    valid_prefix_of(File::open(path)?, format, partial)
}

/// [`valid_prefix`] of a file already open (opened beneath the store).
pub fn valid_prefix_of(file: File, format: Format, partial: bool) -> io::Result<ValidPrefix> {
    let data_len = if partial { wv_sys::fs::data_end(&file)? } else { file.metadata()?.len() };
    let mut r = BufReader::with_capacity(1 << 20, file.take(data_len));
    let mut v = ValidPrefix {
        len: 0,
        data_len,
        packets: 0,
        first_ns: None,
        last_ns: None,
        linktype: 0,
        snaplen: 0,
        path: None,
    };
    let mut data = vec![0u8; wv_wire::MAX_SNAPLEN as usize + 8 + MAX_EPB_OPTIONS];
    match format {
        Format::Pcap => {
            let mut h = [0u8; pcap::FILE_HEADER_LEN];
            if !read_full(&mut r, &mut h)? {
                return Ok(v);
            }
            let Some(fh) = pcap::FileHeader::parse(&h) else {
                return Ok(v);
            };
            if fh.magic.endian != Endian::Little || fh.magic.precision != pcap::Precision::Nano || fh.magic.patched {
                return Ok(v);
            }
            v.len = h.len() as u64;
            v.path = Some(WritePath::Copy);
            v.linktype = fh.linktype();
            v.snaplen = fh.snaplen;
            // wirevault never stores a record longer than this, whatever the link type.
            let bound = wv_wire::MAX_SNAPLEN;
            loop {
                let mut rh = [0u8; pcap::RECORD_HEADER_LEN];
                if !read_full(&mut r, &mut rh)? || rh == [0u8; 16] {
                    break;
                }
                let Some(rec) = pcap::RecordHeader::parse_wirevault(&rh).filter(|rec| rec.caplen <= bound) else {
                    break;
                };
                if !read_full(&mut r, &mut data[..rec.caplen as usize])? {
                    break;
                }
                v.record(rec.ts_ns, (pcap::RECORD_HEADER_LEN + rec.caplen as usize) as u64);
            }
        }
        Format::Pcapng => {
            let mut h = [0u8; pcapng::PREAMBLE_LEN];
            if !read_full(&mut r, &mut h)? {
                return Ok(v);
            }
            if Octets::le(&h).peek_u32() != Some(pcapng::BT_SHB) {
                return Ok(v);
            }
            let idb = &h[pcapng::SHB_LEN + pcapng::BLOCK_HEADER_LEN..];
            let Some(idb) = pcapng::InterfaceDescription::parse(&mut Octets::le(idb)) else {
                return Ok(v);
            };
            v.len = h.len() as u64;
            v.linktype = u32::from(idb.linktype);
            v.snaplen = idb.snaplen;
            loop {
                let mut bh = [0u8; pcapng::EPB_HEADER_LEN];
                if !read_full(&mut r, &mut bh[..pcapng::BLOCK_HEADER_LEN])? {
                    break;
                }
                let Some(head) = pcapng::BlockHeader::parse(&mut Octets::le(&bh)) else {
                    break;
                };
                if head.block_type == pcapng::BT_LOCAL_SKIP {
                    // What a zero-copy file covers its gaps with (at most a ring block).
                    let total = u64::from(head.total_len);
                    if total < u64::from(pcapng::MIN_BLOCK_LEN) || !total.is_multiple_of(4) || total > MAX_SKIP_BLOCK {
                        break;
                    }
                    let mut body = total - u64::from(pcapng::MIN_BLOCK_LEN);
                    if v.len == pcapng::PREAMBLE_LEN as u64 {
                        // The block filling the first page: the zero-copy writer's mark.
                        let mut m = [0u8; WritePath::MARK_MAX];
                        let n = m.len().min(body as usize);
                        if !read_full(&mut r, &mut m[..n])? {
                            break;
                        }
                        v.path = WritePath::from_mark(&m[..n]);
                        body -= n as u64;
                    }
                    if io::copy(&mut (&mut r).take(body), &mut io::sink())? != body {
                        break;
                    }
                    let mut t = [0u8; 4];
                    if !read_full(&mut r, &mut t)? || u32::from_le_bytes(t) != head.total_len {
                        break;
                    }
                    v.len += total;
                    continue;
                }
                if !read_full(&mut r, &mut bh[pcapng::BLOCK_HEADER_LEN..])? {
                    break;
                }
                let Some((bh, epb)) = pcapng::EnhancedPacket::parse_block(&bh) else {
                    break;
                };
                let (total, caplen) = (bh.total_len as usize, epb.caplen);
                // Zero-copy files may end an EPB with up to 8 bytes of options.
                let plain = pcapng::epb_len(caplen);
                if bh.block_type != pcapng::BT_EPB
                    || caplen > wv_wire::MAX_SNAPLEN
                    || total < plain
                    || total > plain + MAX_EPB_OPTIONS
                    || !total.is_multiple_of(4)
                {
                    break;
                }
                let rest = total - pcapng::EPB_HEADER_LEN;
                if !read_full(&mut r, &mut data[..rest])? {
                    break;
                }
                let trailer = Octets::le(&data[rest - pcapng::BLOCK_TRAILER_LEN..rest]).peek_u32();
                if trailer != Some(bh.total_len) {
                    break;
                }
                if v.len == pcapng::PREAMBLE_LEN as u64 {
                    // A record right after the header: the copy path's layout.
                    v.path = Some(WritePath::Copy);
                }
                v.record(epb.ts, total as u64);
            }
        }
    }
    Ok(v)
}

impl ValidPrefix {
    fn record(&mut self, ts_ns: u64, len: u64) {
        self.len += len;
        self.packets += 1;
        // The min and max time (what the catalog holds), not the first and
        // last record's: times may go back (inputs out of order, clock steps).
        self.first_ns = Some(self.first_ns.map_or(ts_ns, |t| t.min(ts_ns)));
        self.last_ns = Some(self.last_ns.map_or(ts_ns, |t| t.max(ts_ns)));
    }
}

/// Fills `buf` completely; false at (a possibly partial) end of file.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => return Ok(false),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// What [`repair`] found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// Partial files (`.part`) kept, cut at their last complete record.
    pub recovered_files: u64,
    pub recovered_packets: u64,
    /// Bytes cut off recovered files (incomplete last records, aligned tails).
    pub cut_bytes: u64,
    /// Partial files without one complete packet, deleted.
    pub deleted_empty: u64,
    /// Closed files missing from the catalog (a crash between rename and append), added.
    pub cataloged: u64,
    /// Catalog entries whose file is gone (a crash during retention), removed.
    pub removed_entries: u64,
    /// Catalogued files whose size differed from their entry (truncated,
    /// grown, or a damaged `bytes`), walked again and their entry fixed.
    pub resized: u64,
    /// Catalogued packets no longer in their file (a file cut short), each file said in
    /// [`RepairReport::problems`].
    pub lost_packets: u64,
    /// Indexes rebuilt.
    pub reindexed: u64,
    /// Catalog entries whose first_ns/last_ns were not their file's min
    /// and max timestamps, corrected.
    pub retimed: u64,
    /// Of those, indexes that existed but were unusable (damaged, of an
    /// older format, built from another file).
    pub unusable_indexes: u64,
    /// One sentence per index rebuilt because it was unusable.
    pub notes: Vec<String>,
    /// Damaged catalog lines dropped.
    pub bad_catalog_lines: u64,
    /// Catalog entries dropped because a path in them could leave the store.
    pub rejected_entries: u64,
    /// Catalog lines naming a file an earlier line named, dropped.
    pub duplicate_entries: u64,
    /// One sentence per thing that could not be repaired.
    pub problems: Vec<String>,
}

impl RepairReport {
    /// True if the store needed no change.
    pub fn is_clean(&self) -> bool {
        *self == RepairReport::default()
    }
}

/// What an index says about its capture: its packet count and the min and
/// max timestamps of its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Indexed {
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// Builds the index of the capture `rel` beneath the store's directory (the
/// binary passes the index crate's builder; the store does not depend on the
/// index format). Both files are opened, created and renamed through the
/// [`Dir`](wv_sys::fs::Dir), never through a symlink.
pub type IndexFn<'a> = &'a dyn Fn(&wv_sys::fs::Dir, &str) -> io::Result<Indexed>;

/// Why the existing index (first path) of a capture (second path), both
/// beneath the store's directory, cannot be used (damaged, of an older
/// format version, built from another file), or what it says when it can.
/// Given to [`repair`] by `wirevault repair`, which checks every index
/// whole; `record`'s start-up repair passes none (it would read every index
/// of the store before capture starts).
pub type CheckFn<'a> = &'a dyn Fn(&wv_sys::fs::Dir, &str, &str) -> Result<Indexed, String>;

fn format_of(name: &str) -> Option<Format> {
    if name.ends_with(".pcap") {
        Some(Format::Pcap)
    } else if name.ends_with(".pcapng") {
        Some(Format::Pcapng)
    } else {
        None
    }
}

/// Brings a store back to a consistent state after a crash (kill -9, power
/// loss): every `.part` capture file is cut at its last complete record,
/// renamed, indexed and cataloged; stray `.part` indexes are removed; closed
/// files missing from the catalog are added; catalog entries without a file
/// are dropped; missing indexes (and, given `check`, unusable ones) are rebuilt. Every record of the written
/// prefix of a partial file (up to its first hole: writes complete out of
/// order, and records after a gap cannot be found again) is kept. Must not
/// run while a recorder writes to the store.
pub fn repair(store: &Path, index: Option<IndexFn<'_>>, check: Option<CheckFn<'_>>) -> io::Result<RepairReport> {
    use crate::catalog::{self, Entry};
    use crate::layout;
    use wv_sys::fs::{Kind, Open};
    let mut rep = RepairReport::default();
    // Every path below resolves beneath the store (or one of its volumes)
    // and follows no symlink: the store may belong to the unprivileged user
    // a recorder ran as.
    let dir = crate::volume::Volumes::open(store)?;
    // What a killed recorder said of its open files: those are cut and
    // catalogued below (readers ignore the live files already: no recorder
    // of theirs holds the lock).
    crate::live::remove_stale(dir.root())?;
    // A volume not mounted now keeps its entries: its files are not lost.
    for w in dir.warnings() {
        rep.problems.push(format!("{w}; its files were left in the catalog as they are"));
    }
    let cat = catalog::read_checked(store)?;
    rep.bad_catalog_lines = cat.bad_lines.len() as u64;
    rep.rejected_entries = cat.rejected.len() as u64;
    rep.duplicate_entries = cat.duplicates.len() as u64;
    rep.problems.extend(cat.rejected.iter().cloned());
    let mut entries = cat.entries;
    let before = entries.len();
    entries.retain(|e| {
        let there = dir.unreadable_volume(&e.file) || dir.lstat(&e.file).is_ok_and(|s| s.kind == Kind::File);
        if !there {
            // Named: its packets are gone, and after this repair nothing else says so.
            rep.notes.push(format!(
                "{}: catalogued with {} packets but no longer a file there; its entry was removed",
                dir.display(&e.file).display(),
                e.packets
            ));
        }
        there
    });
    rep.removed_entries = (before - entries.len()) as u64;
    // Catalogued files whose size is not the catalogued one (cut by a full
    // disk or by hand, grown, or a damaged line's absurd `bytes`): walked
    // again, cut at their last complete record when they shrank or end in
    // an incomplete record, and their entry (and index) made to match.
    for e in entries.iter_mut().filter(|e| !dir.unreadable_volume(&e.file)) {
        match resize_entry(&dir, e) {
            Ok(None) => {}
            Ok(Some((sentence, lost))) => {
                rep.resized += 1;
                rep.lost_packets += lost;
                // Packets the catalog counted that are no longer there: repair cannot bring
                // them back, and after it the catalog no longer knows of them (exit 1).
                if lost > 0 {
                    rep.problems.push(sentence);
                } else {
                    rep.notes.push(sentence);
                }
            }
            Err(why) => rep.problems.push(why),
        }
    }
    let resized = rep.resized > 0;
    let mut changed = resized
        || rep.removed_entries > 0
        || rep.bad_catalog_lines > 0
        || rep.rejected_entries > 0
        || rep.duplicate_entries > 0;

    let (dirs, odd) = dir.stream_dirs();
    for name in odd {
        rep.problems.push(format!("{}: not a directory (a symlink?); left alone", dir.display(&name).display()))
    }
    for (stream, sdir) in dirs {
        for (name, kind) in dir.list(&sdir)? {
            let rel_here = format!("{sdir}/{name}");
            let shown = dir.display(&rel_here);
            let capture_like =
                catalog::is_capture_name(&name) || name.ends_with(layout::INDEX) || name.ends_with(layout::PART);
            if kind != Kind::File {
                if capture_like {
                    rep.problems.push(format!("{}: not a regular file (a symlink?); left alone", shown.display()));
                }
                continue;
            }
            if name.ends_with(&format!("{}{}", layout::INDEX, layout::PART)) {
                dir.unlink(&rel_here)?;
                continue;
            }
            let (final_name, partial) = match name.strip_suffix(layout::PART) {
                Some(f) => (f.to_string(), true),
                None => (name.clone(), false),
            };
            let Some(format) = format_of(&final_name) else {
                continue;
            };
            let rel = format!("{sdir}/{final_name}");
            if !partial && entries.iter().any(|e| e.file == rel) {
                continue;
            }
            let f = match dir.open_file(&rel_here, if partial { Open::ReadWrite } else { Open::Read }, 0) {
                Ok(f) => f,
                Err(e) => {
                    rep.problems.push(format!("{}: cannot open ({e}); left alone", shown.display()));
                    continue;
                }
            };
            let v = valid_prefix_of(f.try_clone()?, format, partial)?;
            if v.packets == 0 {
                if partial {
                    drop(f);
                    dir.unlink(&rel_here)?;
                    rep.deleted_empty += 1;
                } else {
                    rep.problems.push(format!("{}: no complete packet; left as it is, not cataloged", shown.display()));
                }
                continue;
            }
            // What follows the first hole is not counted as cut: most of it
            // is the preallocated tail, which never held data.
            let len = v.data_len;
            if partial {
                f.set_len(v.len)?;
                f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(wv_sys::fs::FILE_MODE))?;
                dir.persist(&f, &rel_here, &rel)?;
                drop(f);
                rep.recovered_files += 1;
                rep.recovered_packets += v.packets;
                rep.cut_bytes += len - v.len;
            } else {
                if len > v.len {
                    rep.problems.push(format!(
                        "{}: {} bytes after the last complete record are not cataloged",
                        dir.display(&rel).display(),
                        len - v.len
                    ));
                }
                rep.cataloged += 1;
            }
            entries.push(Entry {
                stream,
                file: rel,
                index: None,
                format: Some(format),
                linktype: v.linktype,
                snaplen: v.snaplen,
                first_ns: v.first_ns.unwrap_or(0),
                last_ns: v.last_ns.unwrap_or(0),
                packets: v.packets,
                bytes: v.len,
                timestamps: None,
                path: v.path,
            });
            changed = true;
        }
    }
    if let Some(index) = index {
        for e in entries.iter_mut() {
            let capture = dir.display(&e.file);
            let irel = layout::index_rel(&e.file);
            let Ok((vdir, inner)) = dir.resolve(&e.file) else { continue };
            let inner_irel = layout::index_rel(inner);
            let is_file = |rel: &str| dir.lstat(rel).is_ok_and(|s| s.kind == Kind::File);
            if e.index.is_some() && is_file(&irel) {
                let Some(check) = check else {
                    continue;
                };
                match check(vdir, &inner_irel, inner) {
                    Ok(ix) => {
                        rep.problems.extend(damaged(&capture, e, &ix));
                        if fix_times(e, &ix) {
                            rep.retimed += 1;
                            changed = true;
                        }
                        continue;
                    }
                    Err(why) => {
                        rep.unusable_indexes += 1;
                        rep.notes.push(format!("{}: index rebuilt: {why}", dir.display(&irel).display()));
                    }
                }
            }
            if dir.lstat(&irel).is_ok_and(|s| s.kind != Kind::File) {
                rep.problems.push(format!(
                    "{}: not a regular file (a symlink?); index not rebuilt",
                    dir.display(&irel).display()
                ));
                continue;
            }
            // (The capture was checked above: a regular file beneath the store.)
            match index(vdir, inner) {
                Ok(ix) if is_file(&irel) => {
                    rep.problems.extend(damaged(&capture, e, &ix));
                    e.index = Some(irel);
                    rep.reindexed += 1;
                    if fix_times(e, &ix) {
                        rep.retimed += 1;
                    }
                    changed = true;
                }
                Ok(_) => {}
                Err(err) => rep.problems.push(format!("{}: index not rebuilt: {err}", capture.display())),
            }
        }
    }
    if changed {
        entries.sort_by_key(|e| (e.first_ns, e.stream));
        catalog::rewrite_in(dir.root(), &entries)?;
    }
    Ok(rep)
}

/// See the loop in [`repair`]: `Ok(Some((sentence, lost)))` when `e` was changed, `lost` the
/// catalogued packets its file no longer holds.
fn resize_entry(dir: &crate::volume::Volumes, e: &mut crate::catalog::Entry) -> Result<Option<(String, u64)>, String> {
    use wv_sys::fs::Open;
    let shown = dir.display(&e.file);
    let size = match dir.lstat(&e.file) {
        Ok(st) => st.len,
        Err(err) => return Err(format!("{}: {err}; left alone", shown.display())),
    };
    if size == e.bytes {
        return Ok(None);
    }
    let name = e.file.rsplit('/').next().unwrap_or(&e.file);
    let Some(format) = e.format.or_else(|| format_of(name)) else {
        return Err(format!(
            "{}: {size} bytes, {} catalogued, and not a capture wirevault wrote; left alone",
            shown.display(),
            e.bytes
        ));
    };
    let f = dir
        .open_file(&e.file, Open::ReadWrite, 0)
        .map_err(|err| format!("{}: cannot open ({err}); left alone", shown.display()))?;
    let v = valid_prefix_of(f.try_clone().map_err(|err| err.to_string())?, format, false)
        .map_err(|err| format!("{}: cannot read ({err}); left alone", shown.display()))?;
    if v.packets == 0 {
        return Err(format!(
            "{}: {size} bytes, {} catalogued, and no complete packet a wirevault store holds; left alone",
            shown.display(),
            e.bytes
        ));
    }
    let cut = size - v.len;
    if v.len < size {
        f.set_len(v.len)
            .and_then(|()| f.sync_all())
            .map_err(|err| format!("{}: cannot cut ({err})", shown.display()))?;
    }
    let incomplete = if cut > 0 { format!(" ({cut} bytes of an incomplete last record cut)") } else { String::new() };
    let lost = e.packets.saturating_sub(v.packets);
    let sentence = if lost > 0 {
        format!(
            "{}: cut short to {size} bytes ({} catalogued): {lost} of its {} catalogued packets are gone, {} remain{incomplete}; its entry was corrected (restore the file from a backup to get them back)",
            shown.display(),
            e.bytes,
            e.packets,
            v.packets
        )
    } else {
        format!(
            "{}: {size} bytes, {} catalogued: walked again, {} packets in {} bytes{incomplete}; its entry was corrected",
            shown.display(),
            e.bytes,
            v.packets,
            v.len
        )
    };
    (e.bytes, e.packets) = (v.len, v.packets);
    (e.first_ns, e.last_ns) = (v.first_ns.unwrap_or(0), v.last_ns.unwrap_or(0));
    (e.linktype, e.snaplen, e.format) = (v.linktype, v.snaplen, Some(format));
    // Its index describes the old file: rebuilt by the index step.
    if let Some(ix) = e.index.take() {
        let _ = dir.unlink(&ix);
    }
    Ok(Some((sentence, lost)))
}

/// The sentence for a catalogued file whose index (built by reading it
/// whole) found fewer packets than its entry counts: its bytes were damaged
/// after it was written (same length, so the size check passed), and the
/// packets past the damage cannot be read. Repair cannot bring them back;
/// it says so (exit 1) every time until the file is restored or removed.
fn damaged(capture: &Path, e: &crate::catalog::Entry, ix: &Indexed) -> Option<String> {
    (ix.packets < e.packets).then(|| {
        format!(
            "{}: damaged: {} of its {} catalogued packets can be read, the rest lie past a record that is not valid; restore the file from a backup, or delete it and run repair again",
            capture.display(),
            ix.packets,
            e.packets
        )
    })
}

/// Sets an entry's times to the min and max its index found (catalogs of
/// older versions held the first and last record's, which are not the
/// bounds of a file whose times go back). True if they changed.
fn fix_times(e: &mut crate::catalog::Entry, ix: &Indexed) -> bool {
    if ix.packets == 0 || ix.packets != e.packets || (e.first_ns, e.last_ns) == (ix.first_ns, ix.last_ns) {
        return false;
    }
    (e.first_ns, e.last_ns) = (ix.first_ns, ix.last_ns);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pcap_header() -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&[0; 8]);
        h.extend_from_slice(&262_144u32.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes());
        h
    }

    fn record(sec: u32, caplen: u32) -> Vec<u8> {
        let mut r = Vec::new();
        for v in [sec, 5, caplen, caplen] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend((0..caplen).map(|i| (i % 251 + 1) as u8));
        r
    }

    /// A crash with preallocation on: the last record's header was written,
    /// its body reaches into preallocated blocks that were never written
    /// (they read as zeros). That record is cut, not kept with a zero tail.
    #[test]
    fn a_record_reaching_into_unwritten_blocks_is_cut() {
        let dir = std::env::temp_dir().join(format!("wv-recover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcap.part");
        let mut bytes = pcap_header();
        bytes.extend(record(1, 1000));
        bytes.extend(record(2, 1000));
        let two = bytes.len() as u64;
        bytes.extend(record(3, 3000));
        assert!(two < 4096 && bytes.len() > 4096);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&bytes[..4096]).unwrap();
        if let Err(e) = wv_sys::fs::fallocate_extend(&f, 0, 64 << 10) {
            eprintln!("skipped: {} cannot preallocate ({e})", dir.display());
            return;
        }
        f.sync_all().unwrap();
        drop(f);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 64 << 10);
        if wv_sys::fs::data_end(&std::fs::File::open(&path).unwrap()).unwrap() == 64 << 10 {
            eprintln!("skipped: {} does not report unwritten extents as holes", dir.display());
            return;
        }
        let v = valid_prefix(&path, Format::Pcap, true).unwrap();
        assert_eq!((v.packets, v.len, v.data_len), (2, two, 4096));
        // Read whole first (a backup, `tcpdump -r`): the page cache then
        // holds pages of zeros over the unwritten blocks, which SEEK_HOLE
        // counts as data on ext4. The extent map still tells.
        assert_eq!(std::fs::read(&path).unwrap().len(), 64 << 10);
        let v = valid_prefix(&path, Format::Pcap, true).unwrap();
        assert_eq!((v.packets, v.len, v.data_len), (2, two, 4096), "after the file was read");
        let _ = std::fs::remove_dir_all(&dir);
    }
    /// A zero-copy file: local-use skip blocks are walked over, an EPB with options (as the
    /// zero-copy path writes for small gaps) is complete, and the prefix ends before a block
    /// cut short (a ring block whose write a crash interrupted).
    #[test]
    fn zero_copy_layout_skip_blocks_and_options() {
        let block = |t: u32, body: &[u8]| {
            let len = (12 + body.len()) as u32;
            let mut b = Vec::new();
            b.extend_from_slice(&t.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(body);
            b.extend_from_slice(&len.to_le_bytes());
            b
        };
        let epb = |ts: u64, n: usize, opts: &[u8]| {
            let mut body = Vec::new();
            for v in [0, (ts >> 32) as u32, ts as u32, n as u32, n as u32] {
                body.extend_from_slice(&v.to_le_bytes());
            }
            body.extend((0..n).map(|i| i as u8));
            body.resize(body.len().next_multiple_of(4), 0);
            body.extend_from_slice(opts);
            block(pcapng::BT_EPB, &body)
        };
        let mut pre = [0u8; pcapng::PREAMBLE_LEN];
        pcapng::emit_preamble(&mut pre, 65535, 1);
        let mut bytes = pre.to_vec();
        bytes.extend(block(pcapng::BT_LOCAL_SKIP, &[7; 100]));
        bytes.extend(epb(10, 61, &[]));
        bytes.extend(epb(20, 64, &[0, 0, 0, 0]));
        bytes.extend(epb(30, 60, &[2, 0, 4, 0, 0, 0, 0, 0]));
        bytes.extend(block(pcapng::BT_LOCAL_SKIP, &[]));
        let whole = bytes.len() as u64;
        let cut = epb(40, 1000, &[]);
        bytes.extend(&cut[..500]);
        let dir = std::env::temp_dir().join(format!("wv-recover-zc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcapng.part");
        std::fs::write(&path, &bytes).unwrap();
        let v = valid_prefix(&path, Format::Pcapng, false).unwrap();
        assert_eq!((v.packets, v.len, v.first_ns, v.last_ns), (3, whole, Some(10), Some(30)));
        assert_eq!(v.path, None, "a first-page block without a mark");
        // The first page's block names the write path; a record right after the header is the copy path's.
        let at = pcapng::PREAMBLE_LEN + 8;
        for p in [WritePath::ZeroCopy, WritePath::Copy] {
            let mut b = bytes.clone();
            b[at..at + 100].fill(0);
            b[at..at + p.mark().len()].copy_from_slice(p.mark());
            std::fs::write(&path, &b).unwrap();
            assert_eq!(valid_prefix(&path, Format::Pcapng, false).unwrap().path, Some(p));
        }
        assert!([WritePath::ZeroCopy, WritePath::Copy].iter().all(|p| p.mark().len() <= WritePath::MARK_MAX));
        let mut b = pre.to_vec();
        b.extend(epb(10, 61, &[]));
        std::fs::write(&path, &b).unwrap();
        assert_eq!(valid_prefix(&path, Format::Pcapng, false).unwrap().path, Some(WritePath::Copy));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Zero-copy writes complete in any order: after a kill -9 a file can hold a later ring
    /// block while an earlier one never reached the disk (a page of zeros, or a hole). The valid
    /// prefix ends at that gap: the records before it are kept, none after it is (they would
    /// follow a gap no reader can walk over).
    #[test]
    fn zero_copy_gap_left_by_an_unfinished_write_ends_the_prefix() {
        let page = 4096usize;
        let put = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        // A page of `n` EPBs of 100 bytes, the rest a skip block: what one ring block becomes.
        let ring_block = |ts: u64, n: usize| {
            let mut b = Vec::new();
            for k in 0..n {
                let t = ts + k as u64;
                for v in [pcapng::BT_EPB, 132, 0, (t >> 32) as u32, t as u32, 100, 100] {
                    put(&mut b, v);
                }
                b.extend((0..100).map(|i| i as u8 + 1));
                put(&mut b, 132);
            }
            let gap = (page - b.len()) as u32;
            for v in [pcapng::BT_LOCAL_SKIP, gap] {
                put(&mut b, v);
            }
            b.resize(page - 4, 0);
            put(&mut b, gap);
            b
        };
        let mut pre = [0u8; pcapng::PREAMBLE_LEN];
        pcapng::emit_preamble(&mut pre, 65535, 1);
        let mut head = pre.to_vec();
        let gap = (page - head.len()) as u32;
        for v in [pcapng::BT_LOCAL_SKIP, gap] {
            put(&mut head, v);
        }
        head.resize(page - 4, 0);
        put(&mut head, gap);
        let dir = std::env::temp_dir().join(format!("wv-recover-gap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Zeros written (what a file system that allocated the range shows) and a hole.
        for hole in [false, true] {
            let path = dir.join(format!("gap-{hole}.pcapng.part"));
            let mut f = std::fs::File::create(&path).unwrap();
            f.write_all(&head).unwrap();
            f.write_all(&ring_block(100, 3)).unwrap();
            if hole {
                use std::io::{Seek, SeekFrom};
                f.seek(SeekFrom::Current(page as i64)).unwrap();
            } else {
                f.write_all(&vec![0u8; page]).unwrap();
            }
            f.write_all(&ring_block(300, 5)).unwrap();
            drop(f);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 * page as u64);
            for partial in [false, true] {
                let v = valid_prefix(&path, Format::Pcapng, partial).unwrap();
                assert_eq!(
                    (v.packets, v.len, v.first_ns, v.last_ns),
                    (3, 2 * page as u64, Some(100), Some(102)),
                    "hole {hole}, partial {partial}"
                );
                assert!(v.data_len >= 2 * page as u64);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
