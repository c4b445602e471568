//! Retention: the store's byte budget ([`Budget`], changed while recording
//! through [`LiveBudget`]) and the deletions of the oldest cataloged files
//! that keep the store inside it, or inside a volume's free space.

use crate::catalog::{open_append, reserve_ahead, rewrite_in, Catalog, Entry, Inner};
use std::io;
use std::sync::Arc;

/// What to do when a new file would push the store over its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFull {
    /// Delete the oldest files (and their indexes) first.
    DeleteOldest,
    /// Stop recording.
    Stop,
}

/// The store's byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_bytes: u64,
    pub on_full: OnFull,
}

/// The store's budget as the writers read it before each new file; `record`
/// changes it while they run (SIGHUP re-reads `--config`). A lock, not
/// atomics: the two fields change together, and it is read once per file.
#[derive(Debug, Default)]
pub struct LiveBudget(std::sync::Mutex<Option<Budget>>);

impl LiveBudget {
    pub fn new(budget: Option<Budget>) -> LiveBudget {
        LiveBudget(std::sync::Mutex::new(budget))
    }

    /// The budget in force now (`None`: no budget).
    pub fn get(&self) -> Option<Budget> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the budget; the next file any writer opens obeys it.
    pub fn set(&self, budget: Option<Budget>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = budget;
    }
}

/// Files deleted to make room.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    pub files: u64,
    pub bytes: u64,
    /// Of them, files this catalog appended (the running recording's own),
    /// and the newest packet those held (0: none).
    pub own_files: u64,
    pub own_last_ns: u64,
}

impl Deleted {
    /// What two deletions (of two streams, or one after the other) deleted
    /// together: the counts summed, the newest packet of the two.
    pub fn and(self, o: Deleted) -> Deleted {
        Deleted {
            files: self.files + o.files,
            bytes: self.bytes + o.bytes,
            own_files: self.own_files + o.own_files,
            own_last_ns: self.own_last_ns.max(o.own_last_ns),
        }
    }
}

impl Catalog {
    /// Makes sure `reserve` more bytes fit under `budget`: deletes the oldest
    /// files (by first timestamp) with [`OnFull::DeleteOldest`], or returns
    /// `Err` with [`OnFull::Stop`] when they do not fit. Files being written
    /// are not in the catalog, so they are never deleted.
    pub fn make_room(&self, budget: &Budget, reserve: u64) -> Result<Deleted, io::Error> {
        let mut g = self.lock();
        // Closed files on their way to the catalog take room too.
        let reserve = reserve.saturating_add(g.pending);
        if g.total.saturating_add(reserve) <= budget.max_bytes {
            return Ok(Deleted::default());
        }
        if budget.on_full == OnFull::Stop {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "the store reached its --max-size budget"));
        }
        let mut left = g.total;
        self.delete_oldest(
            &mut g,
            |_| true,
            |size| {
                let more = left.saturating_add(reserve) > budget.max_bytes;
                left = left.saturating_sub(size);
                more
            },
        )
    }

    /// With retention on ([`OnFull::DeleteOldest`]), before a file opens on
    /// volume `vol` (0: the store directory) whose file system has `free`
    /// bytes and the file needs `need`: deletes the oldest files on that
    /// volume (other volumes keep theirs) until the freed bytes make up the
    /// difference. Nothing is deleted when all of its files would not make
    /// it up (other data fills the volume: it is taken out instead, and
    /// keeps its recordings). Returns what was deleted; the caller reads
    /// the free space again.
    pub fn make_room_on(&self, vol: u32, free: u64, need: u64) -> Result<Deleted, io::Error> {
        let mut g = self.lock();
        let on_vol = |e: &Entry| crate::volume::split(&e.file).is_ok_and(|(k, _)| k == vol);
        let ours: u64 = g.entries.iter().filter(|(e, _)| on_vol(e)).map(|(_, size)| *size).sum();
        if free.saturating_add(ours) < need {
            return Ok(Deleted::default());
        }
        let mut freed = 0u64;
        self.delete_oldest(&mut g, on_vol, |size| {
            let more = free.saturating_add(freed) < need;
            freed = freed.saturating_add(size);
            more
        })
    }

    /// Deletes catalogued files that `pick` chooses, oldest first (by first
    /// timestamp), while `more(size of the next)` says so; takes them out of
    /// the catalog and its total. Entries were checked when read (relative,
    /// inside the store or a volume); the unlinks resolve beneath it and
    /// follow no symlink.
    fn delete_oldest(
        &self,
        g: &mut Inner,
        pick: impl Fn(&Entry) -> bool,
        mut more: impl FnMut(u64) -> bool,
    ) -> Result<Deleted, io::Error> {
        let mut deleted = Deleted::default();
        let mut order: Vec<usize> = (0..g.entries.len()).filter(|&i| pick(&g.entries[i].0)).collect();
        order.sort_by_key(|&i| (g.entries[i].0.first_ns, g.entries[i].0.last_ns));
        let mut drop_set = vec![false; g.entries.len()];
        // An unlink that fails stops the deletions; those done before it
        // still leave the catalog (and its total), then the error is told.
        let mut failed = None;
        for i in order {
            let (e, size) = &g.entries[i];
            if !more(*size) {
                break;
            }
            if let Some(ix) = &e.index {
                let _ = self.vols.unlink(ix);
            }
            // Its flow records go with it (most files have one; none is no error).
            let _ = self.vols.unlink(&crate::layout::flows_rel(&e.file));
            match self.vols.unlink(&e.file) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => {
                    failed = Some(err);
                    break;
                }
            }
            deleted.files += 1;
            deleted.bytes = deleted.bytes.saturating_add(*size);
            if g.own.remove(&e.file) {
                if g.gone.len() == crate::catalog::GONE_KEPT {
                    g.gone.pop_front();
                }
                g.gone.push_back(e.file.clone());
                deleted.own_files += 1;
                deleted.own_last_ns = deleted.own_last_ns.max(e.last_ns);
            }
            drop_set[i] = true;
        }
        if deleted.files == 0 {
            return failed.map_or(Ok(deleted), Err);
        }
        let mut i = 0;
        g.entries.retain(|_| {
            i += 1;
            !drop_set[i - 1]
        });
        g.total = g.total.saturating_sub(deleted.bytes);
        let entries: Vec<Entry> = g.entries.iter().map(|(e, _)| e.clone()).collect();
        rewrite_in(&self.dir, &entries)?;
        // The rename replaced the file our append handle points to.
        g.file = open_append(&self.dir)?;
        g.reserved = 0;
        reserve_ahead(g);
        failed.map_or(Ok(deleted), Err)
    }

    /// Counts a closed file of `bytes` against the budget until its
    /// catalog line is written (or it is given up): until the returned
    /// guard is dropped. Between the two, [`Catalog::make_room`] sees it.
    pub fn uncataloged(self: &Arc<Self>, bytes: u64) -> Uncataloged {
        // Room for its index too (well under 5% of the capture).
        let bytes = bytes.saturating_add(bytes / 20);
        let mut g = self.lock();
        g.pending = g.pending.saturating_add(bytes);
        Uncataloged { catalog: self.clone(), bytes }
    }
}

/// A closed file counted against the budget until it is cataloged
/// ([`Catalog::uncataloged`]); dropped after its catalog line is written,
/// so that for a moment it counts twice, never not at all.
pub struct Uncataloged {
    catalog: Arc<Catalog>,
    bytes: u64,
}

impl Drop for Uncataloged {
    fn drop(&mut self) {
        let mut g = self.catalog.lock();
        g.pending = g.pending.saturating_sub(self.bytes);
    }
}
