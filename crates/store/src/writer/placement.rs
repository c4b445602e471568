//! Which volume a stream's next file goes on (`record --volume`; DESIGN.md,
//! "Several volumes"), for the copy path's writer and the zero-copy one.
//!
//! Each new file goes to the first volume still in rotation in the stream's
//! order that has room for a whole file. With retention on (`--max-size`,
//! `--on-full delete`), a volume without room first deletes its own oldest
//! files (each volume fills at its own pace, whatever the store's budget);
//! one that still has no room is taken out while others remain. A volume whose create, write or close fails is taken out
//! too, and the stream goes on on another from its next file.

use super::{WriterConfig, WriterShared};
use crate::catalog::{Catalog, OnFull};
use crate::layout;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use wv_sys::fs::Dir;

/// A stream writer's volume: where its current file is.
pub(crate) struct Placement {
    /// The volume (the store directory, or one of `WriterConfig::volumes`),
    /// which every path is opened beneath (no symlink followed).
    pub store: Arc<Dir>,
    /// Its id (0: the store directory), the `@k` of catalog paths.
    pub vol: u32,
    /// The stream's directory on it, for messages.
    pub dir: PathBuf,
    /// The stream's directory relative to a volume.
    pub rel_dir: String,
    /// The current volume was taken out while others remain: the next file
    /// goes to another one ([`Placement::resume`]).
    down: bool,
    /// Files placed so far (which volume the next one prefers).
    files: usize,
}

impl Placement {
    /// The store directory, with the stream's directory created in it when
    /// the store has one volume (with several, [`Placement::choose`] creates
    /// it on the volume it picks).
    pub fn new(cfg: &WriterConfig) -> io::Result<Placement> {
        let rel_dir = layout::stream_dir(cfg.stream);
        let dir = cfg.store.join(&rel_dir);
        // The stream directory (0750) beneath the store; a symlink there is refused.
        let store = Arc::new(Dir::open(&cfg.store)?);
        if cfg.volumes.is_none() {
            store.mkdir(&rel_dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        }
        Ok(Placement { store, vol: 0, dir, rel_dir, down: false, files: 0 })
    }

    /// True once after the current volume was taken out with others left
    /// ([`Placement::out`]): the caller goes on from its next file.
    pub fn resume(&mut self) -> bool {
        std::mem::take(&mut self.down)
    }

    /// Before each new file, with several volumes: moves to the first volume
    /// in rotation in this stream's order that has room for a whole file.
    /// False when no file can be created now: either no volume is left (the
    /// stream stops; `shared` says why) or the picked one failed and was
    /// taken out ([`Placement::resume`] is then true: choose again).
    pub fn choose(&mut self, cfg: &WriterConfig, shared: &WriterShared, catalog: &Catalog) -> bool {
        let Some(rot) = cfg.volumes.clone() else { return true };
        let need = cfg.file_size.saturating_add(cfg.reserve.min(1 << 30));
        let retention = cfg.budget.get().is_some_and(|b| b.on_full == OnFull::DeleteOldest);
        let mut pick = None;
        self.files += 1;
        for (id, d) in rot.order(cfg.stream, self.files - 1) {
            let space = || wv_sys::fs::fs_space(d.path()).map_or(u64::MAX, |s| s.0);
            let mut free = space();
            if free < need && retention {
                match catalog.make_room_on(id, free, need) {
                    Ok(del) if del.files > 0 => {
                        shared.deleted(del);
                        free = space();
                    }
                    Ok(_) => {}
                    Err(e) => shared
                        .warn(format!("retention could not delete old files on volume {}: {e}", d.path().display())),
                }
            }
            if free >= need || rot.in_rotation().len() <= 1 {
                pick = Some((id, d));
                break;
            }
            rot.take_out(id, || format!(
                "volume {} is full ({free} bytes free, a file takes up to {need}); taken out of rotation, recording goes on on the other volumes",
                d.path().display()
            ));
        }
        let Some((id, d)) = pick else {
            shared.fail("every volume of the store failed or is full".into(), true);
            return false;
        };
        if id == self.vol && Arc::ptr_eq(&d, &self.store) {
            return true;
        }
        if let Err(e) = d.mkdir(&self.rel_dir) {
            let msg = format!("cannot create {}: {e}", d.display(&self.rel_dir).display());
            (self.store, self.vol) = (d, id);
            if !self.out(cfg, self.vol, &msg) {
                shared.fail(msg, false);
            }
            return false;
        }
        self.dir = d.display(&self.rel_dir);
        (self.store, self.vol) = (d, id);
        true
    }

    /// A create, write or close on volume `vol` failed (`why`): with other
    /// volumes in rotation, takes it out (saying so once) and returns true;
    /// when it is the current volume, [`Placement::resume`] is then true.
    /// False with one volume, or none left: the stream stops as it always did.
    pub fn out(&mut self, cfg: &WriterConfig, vol: u32, why: &str) -> bool {
        let Some(rot) = cfg.volumes.clone() else { return false };
        let last = rot.in_rotation() == [vol];
        if !last {
            let path = rot.dir(vol).map_or_else(|| self.store.path().to_owned(), |d| d.path().to_owned());
            rot.take_out(vol, || {
                format!(
                    "{why}; volume {} taken out of rotation, recording goes on on the other volumes",
                    path.display()
                )
            });
        }
        if last || rot.in_rotation().is_empty() {
            return false;
        }
        self.down |= vol == self.vol;
        true
    }
}
