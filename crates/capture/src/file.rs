//! The file source (`record --read`): packets of existing pcap/pcapng files,
//! in file order, with their own timestamps.
//!
//! A file that cannot be read to its end contributes the packets before the
//! damage; the damage is reported (file, offset, what) and the next file is
//! read. The filter is compiled per link type, as tcpdump does per file.
//!
//! Files are read front to back, never sought, so a path may be a pipe: a
//! FIFO, `/dev/stdin`, or process substitution (`<(zcat x.pcap.gz)`); the
//! path `-` is standard input, as for tcpdump's `-r -`.

use crate::filter::{self, Filter};
use crate::{CaptureError, Delivery, Poll, Source};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use wv_wire::reader::Reader;

const BATCH: usize = 512;

/// Reads a list of capture files one after the other.
pub struct FileSource {
    paths: Vec<PathBuf>,
    next: usize,
    /// The file being read, its reader and whether it is byte-swapped.
    cur: Option<(PathBuf, Reader<Input>, bool)>,
    expression: Option<String>,
    /// Per (link type, byte-swapped file) as tcpdump compiles per file.
    filters: Vec<((u32, bool), Option<Filter>)>,
    problems: Vec<String>,
    /// Files opened so far.
    pub files_read: usize,
    stopped: bool,
}

impl FileSource {
    pub fn new(paths: Vec<PathBuf>, expression: Option<String>) -> FileSource {
        FileSource {
            paths,
            next: 0,
            cur: None,
            expression,
            filters: Vec::new(),
            problems: Vec::new(),
            files_read: 0,
            stopped: false,
        }
    }

    /// What could not be read, one sentence each.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    fn open_next(&mut self) -> bool {
        while self.next < self.paths.len() {
            let p = self.paths[self.next].clone();
            self.next += 1;
            match open(&p).and_then(peek_order) {
                Ok((f, swapped)) => match Reader::new(f) {
                    Ok(r) => {
                        self.cur = Some((p, r, swapped));
                        self.files_read += 1;
                        return true;
                    }
                    Err(e) => self.problems.push(format!("{}: {e}", p.display())),
                },
                Err(e) => self.problems.push(format!("{}: cannot open: {e}", p.display())),
            }
        }
        false
    }
}

/// What a file source reads from: a file or pipe, or standard input.
type Input = Box<dyn Read + Send>;

/// Opens `path` for reading; `-` is standard input.
fn open(path: &Path) -> std::io::Result<Input> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    Ok(Box::new(File::open(path)?))
}

/// The input with its first bytes read and put back in front, and whether
/// they say the file is byte-swapped (a pipe cannot be sought back).
fn peek_order(mut f: Input) -> std::io::Result<(Input, bool)> {
    let mut head = [0u8; 12];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let swapped = filter::swapped_header(&head[..n]);
    Ok((Box::new(std::io::Cursor::new(head[..n].to_vec()).chain(f)), swapped))
}

/// The filter for `linktype`, compiled on first use (a failure is reported once
/// and makes every packet of that link type count as filtered).
fn filter_for<'f>(
    filters: &'f mut Vec<((u32, bool), Option<Filter>)>,
    problems: &mut Vec<String>,
    expr: &str,
    path: &std::path::Path,
    linktype: u32,
    snaplen: u32,
    swapped: bool,
) -> &'f Option<Filter> {
    let i = match filters.iter().position(|(l, _)| *l == (linktype, swapped)) {
        Some(i) => i,
        None => {
            let f = filter::compile_file(expr, linktype, snaplen, swapped)
                .map_err(|e| {
                    problems.push(format!(
                        "{}: {e}; its packets of link type {linktype} are counted as filtered",
                        path.display()
                    ))
                })
                .ok();
            filters.push(((linktype, swapped), f));
            filters.len() - 1
        }
    };
    &filters[i].1
}

impl Source for FileSource {
    fn problems(&self) -> Vec<String> {
        self.problems.clone()
    }

    fn stop_intake(&mut self) -> Result<(), CaptureError> {
        self.stopped = true;
        Ok(())
    }

    fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError> {
        if self.stopped || (self.cur.is_none() && !self.open_next()) {
            return Ok(Poll::End);
        }
        let FileSource { cur, expression, filters, problems, .. } = self;
        let (path, reader, swapped) = cur.as_mut().expect("opened above");
        let swapped = *swapped;
        for _ in 0..BATCH {
            // Never drop what is read from a file: wait for the writer instead.
            if !out.has_room(wv_wire::reader::MAX_BLOCK_LEN.min(wv_wire::MAX_SNAPLEN)) {
                std::thread::sleep(std::time::Duration::from_micros(200));
                return Ok(Poll::Idle);
            }
            match reader.next_packet() {
                Ok(Some(p)) => {
                    let keep = match expression {
                        None => true,
                        Some(expr) => match filter_for(filters, problems, expr, path, p.linktype, p.snaplen, swapped) {
                            Some(f) => f.matches(p.data, p.origlen),
                            None => false,
                        },
                    };
                    if keep {
                        out.packet(p.ts_ns, p.linktype, p.snaplen, p.origlen, &[p.data]);
                    } else {
                        out.filtered();
                    }
                }
                Ok(None) => {
                    *cur = None;
                    return Ok(Poll::Packets);
                }
                Err(e) => {
                    problems.push(format!("{}: {e}", path.display()));
                    *cur = None;
                    return Ok(Poll::Packets);
                }
            }
        }
        Ok(Poll::Packets)
    }
}
