//! Several volumes in one store (DESIGN.md, "Several volumes").
//!
//! The store directory holds the catalog, lock and stats as always and is
//! volume 0. Extra volumes (other disks) are listed in `STORE/volumes.json`
//! by absolute path and id; each holds a marker file naming the store's id
//! and its own, so a disk swapped or mounted elsewhere is noticed instead of
//! read. A capture file on volume `k` is catalogued as `@k/stream-NNN/NAME`:
//! [`Volumes::resolve`] maps the `@k` component to that volume's directory,
//! and every file is opened beneath it as beneath the store (no symlink
//! followed, no `..`), so a catalog line cannot make a reader leave the
//! store's volumes. [`Rotation`] is the writers' shared view: which volumes
//! are still taken for new files.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_sys::fs::{Dir, Kind, Open, Stat};

/// The list of extra volumes, in the store directory.
pub const REGISTRY: &str = "volumes.json";
/// The marker file in each extra volume.
pub const MARKER: &str = ".wirevault-volume";

/// `STORE/volumes.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    /// A random id of the store, also in every volume's marker.
    pub store_id: String,
    pub volumes: Vec<Registered>,
}

/// One extra volume of a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registered {
    /// 1, 2, ...: the `@id` of catalog paths on it. Never reused.
    pub id: u32,
    /// Absolute path of the volume's directory.
    pub path: PathBuf,
}

/// `VOLUME/.wirevault-volume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Marker {
    store_id: String,
    id: u32,
}

/// Why volumes could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("volume {}: {source}; check that it is mounted, readable, and writable for a recording", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("volume {}: it belongs to another wirevault store (its {MARKER} names another store); give a new or empty directory", path.display())]
    Foreign { path: PathBuf },
    #[error("volume {}: the directory is not empty and not a volume of this store; give a new or empty directory", path.display())]
    NotEmpty { path: PathBuf },
    #[error("volume {}: it is the store directory or inside or around it (or another volume given twice); give a directory on another disk", path.display())]
    Overlaps { path: PathBuf },
    #[error("volume {}: registered as volume @{id} but its {MARKER} says otherwise (a swapped disk?); mount the right disk there", path.display())]
    Swapped { path: PathBuf, id: u32 },
    #[error("volume {}: registered as volume @{id} but its {MARKER} is not there (the disk not mounted?); mount it there, its files are unreadable until then", path.display())]
    Unmounted { path: PathBuf, id: u32 },
    #[error("{REGISTRY} of the store is damaged ({why}); fix or remove it")]
    Damaged { why: String },
}

/// The volume a catalog path lies on and the path inside it: `@k/REST` is
/// `(k, REST)` for k >= 1, anything else `(0, rel)` (the store directory).
/// A first component starting with `@` that is not `@k` (k >= 1, written
/// without leading zeros) is an error.
pub fn split(rel: &str) -> Result<(u32, &str), String> {
    let Some(after) = rel.strip_prefix('@') else { return Ok((0, rel)) };
    let (num, rest) = after.split_once('/').ok_or_else(|| format!("\"{rel}\" names a volume but no file on it"))?;
    match num.parse::<u32>() {
        Ok(k) if k >= 1 && k.to_string() == num && !rest.is_empty() => Ok((k, rest)),
        _ => Err(format!("\"{rel}\" does not start with a volume @1, @2, ...")),
    }
}

/// The catalog path of `rel` on volume `id` (the inverse of [`split`]).
pub fn on_volume(id: u32, rel: &str) -> String {
    if id == 0 {
        rel.to_string()
    } else {
        format!("@{id}/{rel}")
    }
}

/// Reads `STORE/volumes.json` (no symlink followed); `None` when the store has none.
pub fn read_registry(root: &Dir) -> Result<Option<Registry>, VolumeError> {
    let mut f = match root.open_file(REGISTRY, Open::Read, 0) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(VolumeError::Io { path: root.display(REGISTRY), source: e }),
    };
    let mut s = String::new();
    f.by_ref()
        .take(1 << 20)
        .read_to_string(&mut s)
        .map_err(|e| VolumeError::Io { path: root.display(REGISTRY), source: e })?;
    let reg: Registry = serde_json::from_str(&s).map_err(|e| VolumeError::Damaged { why: e.to_string() })?;
    for v in &reg.volumes {
        if v.id == 0 || !v.path.is_absolute() || reg.volumes.iter().filter(|w| w.id == v.id).count() > 1 {
            return Err(VolumeError::Damaged { why: format!("volume @{} at {}", v.id, v.path.display()) });
        }
    }
    Ok(Some(reg))
}

fn read_marker(dir: &Dir) -> io::Result<Option<Marker>> {
    let mut f = match dir.open_file(MARKER, Open::Read, 0) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut s = String::new();
    f.by_ref().take(4096).read_to_string(&mut s)?;
    Ok(serde_json::from_str(&s).ok())
}

/// Opens a registered volume and checks its marker.
fn open_volume(reg: &Registry, v: &Registered) -> Result<Dir, VolumeError> {
    let dir = Dir::open(&v.path).map_err(|e| VolumeError::Io { path: v.path.clone(), source: e })?;
    match read_marker(&dir).map_err(|e| VolumeError::Io { path: dir.display(MARKER), source: e })? {
        Some(m) if m.store_id == reg.store_id && m.id == v.id => Ok(dir),
        Some(_) => Err(VolumeError::Swapped { path: v.path.clone(), id: v.id }),
        None => Err(VolumeError::Unmounted { path: v.path.clone(), id: v.id }),
    }
}

/// A store's directory and its usable extra volumes: what readers (query,
/// repair, retention) resolve catalog paths through.
#[derive(Debug)]
pub struct Volumes {
    root: Dir,
    /// Registered volumes: their directory, or why it cannot be used.
    vols: Vec<(u32, Result<Dir, String>)>,
}

impl Volumes {
    /// Opens the store directory `store` and every registered volume. A
    /// volume that cannot be opened or is not the registered one is kept as
    /// unusable (see [`Volumes::warnings`]): its files read as missing.
    pub fn open(store: &Path) -> io::Result<Volumes> {
        let root = Dir::open(store)?;
        let reg = read_registry(&root).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let vols = reg
            .as_ref()
            .map(|r| r.volumes.iter().map(|v| (v.id, open_volume(r, v).map_err(|e| e.to_string()))).collect())
            .unwrap_or_default();
        Ok(Volumes { root, vols })
    }

    /// The store directory alone (no extra volume).
    pub fn single(root: Dir) -> Volumes {
        Volumes { root, vols: Vec::new() }
    }

    /// The store directory (volume 0).
    pub fn root(&self) -> &Dir {
        &self.root
    }

    /// One sentence per registered volume that cannot be read.
    pub fn warnings(&self) -> Vec<String> {
        self.unusable().into_iter().map(|(_, why)| why.to_string()).collect()
    }

    /// The registered volumes that cannot be read (not mounted, swapped,
    /// unreadable), with their id and the sentence that says why and what to do.
    pub fn unusable(&self) -> Vec<(u32, &str)> {
        self.vols.iter().filter_map(|(id, d)| d.as_ref().err().map(|why| (*id, why.as_str()))).collect()
    }

    /// Every usable volume with its id, the store directory (0) first.
    pub fn all(&self) -> Vec<(u32, &Dir)> {
        let mut v = vec![(0, &self.root)];
        v.extend(self.vols.iter().filter_map(|(id, d)| d.as_ref().ok().map(|d| (*id, d))));
        v
    }

    /// The directory a catalog path lies in and the path beneath it. A path
    /// on a volume the store does not have (or cannot read) is an error.
    pub fn resolve<'a>(&'a self, rel: &'a str) -> io::Result<(&'a Dir, &'a str)> {
        let (id, inner) = split(rel).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if id == 0 {
            return Ok((&self.root, inner));
        }
        match self.vols.iter().find(|(k, _)| *k == id) {
            Some((_, Ok(d))) => Ok((d, inner)),
            Some((_, Err(why))) => Err(io::Error::new(io::ErrorKind::NotFound, why.clone())),
            None => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("\"{rel}\" names volume @{id}, which the store does not have"),
            )),
        }
    }

    /// Whether `rel` lies on a registered volume that cannot be read now
    /// (not mounted, swapped): its files are not there, but not gone.
    pub fn unreadable_volume(&self, rel: &str) -> bool {
        let id = split(rel).map_or(0, |x| x.0);
        self.vols.iter().any(|(k, d)| *k == id && d.is_err())
    }

    /// [`Dir::display`] of a catalog path (the volume's real path).
    pub fn display(&self, rel: &str) -> PathBuf {
        match self.resolve(rel) {
            Ok((d, inner)) => d.display(inner),
            Err(_) => self.root.display(rel),
        }
    }

    /// [`Dir::lstat`] of a catalog path.
    pub fn lstat(&self, rel: &str) -> io::Result<Stat> {
        let (d, inner) = self.resolve(rel)?;
        d.lstat(inner)
    }

    /// [`Dir::open_file`] of a catalog path.
    pub fn open_file(&self, rel: &str, how: Open, extra_flags: i32) -> io::Result<File> {
        let (d, inner) = self.resolve(rel)?;
        d.open_file(inner, how, extra_flags)
    }

    /// [`Dir::unlink`] of a catalog path.
    pub fn unlink(&self, rel: &str) -> io::Result<()> {
        let (d, inner) = self.resolve(rel)?;
        d.unlink(inner)
    }

    /// [`Dir::persist`] of two catalog paths on one volume.
    pub fn persist(&self, file: &File, from: &str, to: &str) -> io::Result<()> {
        let ((d, a), (_, b)) = (self.resolve(from)?, self.resolve(to)?);
        if split(from).ok().map(|x| x.0) != split(to).ok().map(|x| x.0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a file cannot be renamed across volumes"));
        }
        d.persist(file, a, b)
    }

    /// The `stream-NNN` directories of every volume, as catalog paths
    /// (`stream-000`, `@1/stream-001`, ...), with their stream number; and
    /// entries named like one that are not real directories (a symlink).
    pub fn stream_dirs(&self) -> (Vec<(usize, String)>, Vec<String>) {
        let (mut dirs, mut odd) = (Vec::new(), Vec::new());
        for (id, d) in self.all() {
            for (name, kind) in d.list("").unwrap_or_default() {
                let Some(n) = name.strip_prefix("stream-").and_then(|n| n.parse::<usize>().ok()) else { continue };
                match kind {
                    Kind::Dir if name == crate::layout::stream_dir(n) => dirs.push((n, on_volume(id, &name))),
                    Kind::Dir => {}
                    _ => odd.push(on_volume(id, &name)),
                }
            }
        }
        dirs.sort();
        (dirs, odd)
    }

    /// [`Dir::list`] of a catalog path.
    pub fn list(&self, rel: &str) -> io::Result<Vec<(String, Kind)>> {
        let (d, inner) = self.resolve(rel)?;
        d.list(inner)
    }
}

/// Registers `paths` as volumes of `store` (creating each directory, 0750,
/// and its marker) unless they are already; returns their ids in order.
/// A directory that is the store, overlaps it or another volume, belongs to
/// another store or holds anything else is refused.
pub fn register(store: &Path, paths: &[PathBuf]) -> Result<Vec<u32>, VolumeError> {
    let root = Dir::open(store).map_err(|e| VolumeError::Io { path: store.to_path_buf(), source: e })?;
    let mut reg = match read_registry(&root)? {
        Some(r) => r,
        None => Registry { store_id: new_id(), volumes: Vec::new() },
    };
    let canon = |p: &Path| p.canonicalize().map_err(|e| VolumeError::Io { path: p.to_path_buf(), source: e });
    let store_c = canon(store)?;
    let mut ids = Vec::new();
    let mut seen: Vec<PathBuf> = vec![store_c.clone()];
    let mut changed = false;
    for p in paths {
        if !p.exists() {
            // Checked before it is created: nothing is made inside the store.
            let parent = p.parent().filter(|q| !q.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if let (Ok(pc), Some(name)) = (parent.canonicalize(), p.file_name()) {
                let c = pc.join(name);
                if seen.iter().any(|s| s.starts_with(&c) || c.starts_with(s)) {
                    return Err(VolumeError::Overlaps { path: p.clone() });
                }
            }
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(wv_sys::fs::DIR_MODE)
                .create(p)
                .map_err(|e| VolumeError::Io { path: p.clone(), source: e })?;
        }
        let c = canon(p)?;
        let meta = std::fs::metadata(&c).map_err(|e| VolumeError::Io { path: p.clone(), source: e })?;
        if !meta.is_dir() {
            return Err(VolumeError::Io { path: p.clone(), source: io::Error::from(io::ErrorKind::NotADirectory) });
        }
        if seen.iter().any(|s| s.starts_with(&c) || c.starts_with(s)) {
            return Err(VolumeError::Overlaps { path: p.clone() });
        }
        seen.push(c.clone());
        let dir = Dir::open(&c).map_err(|e| VolumeError::Io { path: p.clone(), source: e })?;
        let marker = read_marker(&dir).map_err(|e| VolumeError::Io { path: dir.display(MARKER), source: e })?;
        let known = reg.volumes.iter().find(|v| v.path == c).cloned();
        let id = match (known, marker) {
            (Some(v), Some(m)) if m.store_id == reg.store_id && m.id == v.id => v.id,
            (Some(v), Some(_)) => return Err(VolumeError::Swapped { path: p.clone(), id: v.id }),
            (Some(v), None) => return Err(VolumeError::Unmounted { path: p.clone(), id: v.id }),
            (None, Some(m)) if m.store_id != reg.store_id => return Err(VolumeError::Foreign { path: p.clone() }),
            // Ours, but registered under another path (moved mount point): follow it.
            (None, Some(m)) => {
                match reg.volumes.iter_mut().find(|v| v.id == m.id) {
                    Some(v) => v.path = c.clone(),
                    None => reg.volumes.push(Registered { id: m.id, path: c.clone() }),
                }
                changed = true;
                m.id
            }
            (None, None) => {
                let names = dir.list("").map_err(|e| VolumeError::Io { path: p.clone(), source: e })?;
                // A fresh file system's lost+found is all it may hold.
                if names.iter().any(|(n, _)| n != "lost+found") {
                    return Err(VolumeError::NotEmpty { path: p.clone() });
                }
                let id = reg.volumes.iter().map(|v| v.id).max().unwrap_or(0) + 1;
                let m = serde_json::to_vec(&Marker { store_id: reg.store_id.clone(), id }).map_err(io::Error::other);
                let io = |e| VolumeError::Io { path: dir.display(MARKER), source: e };
                let m = m.map_err(io)?;
                dir.replace(MARKER, |f| io::Write::write_all(f, &m)).map_err(io)?;
                reg.volumes.push(Registered { id, path: c.clone() });
                changed = true;
                id
            }
        };
        ids.push(id);
    }
    if changed {
        let text = serde_json::to_vec_pretty(&reg).map_err(io::Error::other);
        let io = |e| VolumeError::Io { path: root.display(REGISTRY), source: e };
        let text = text.map_err(io)?;
        root.replace(REGISTRY, |f| io::Write::write_all(f, &text)).map_err(io)?;
    }
    Ok(ids)
}

/// A random store id (the kernel's UUID generator; time and pid if unreadable).
fn new_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/uuid").map(|s| s.trim().to_string()).unwrap_or_else(|_| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        format!("{:x}-{:x}", t.as_nanos(), std::process::id())
    })
}

/// The volumes a recording writes new files to, shared by its writers: a
/// volume that fails or fills is taken out for all of them at once.
#[derive(Debug)]
pub struct Rotation {
    vols: Vec<RotVol>,
    /// Streams writing (see [`Rotation::order`]).
    streams: usize,
    /// Sentences about volumes taken out, for `record` to print as they happen.
    notes: std::sync::Mutex<Vec<String>>,
}

#[derive(Debug)]
struct RotVol {
    id: u32,
    dir: Arc<Dir>,
    out: AtomicBool,
}

impl Rotation {
    /// The volumes `(id, directory)` that `streams` streams write to.
    pub fn new(vols: Vec<(u32, Dir)>, streams: usize) -> Rotation {
        Rotation {
            streams: streams.max(1),
            vols: vols
                .into_iter()
                .map(|(id, d)| RotVol { id, dir: Arc::new(d), out: AtomicBool::new(false) })
                .collect(),
            notes: Default::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.vols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vols.is_empty()
    }

    /// Volume ids still in rotation.
    pub fn in_rotation(&self) -> Vec<u32> {
        self.vols.iter().filter(|v| !v.out.load(Ordering::Acquire)).map(|v| v.id).collect()
    }

    /// The volumes in rotation in the order stream `stream` tries them for
    /// its `file`-th file (counted from 0): of the n volumes in rotation,
    /// the `(stream + file * streams) mod n`-th first, then the following
    /// ones. With as many streams as volumes (or a multiple) each stream
    /// keeps to its own volume; with fewer, a stream's files take turns over
    /// the volumes. Counted over those in rotation, a volume taken out
    /// leaves its turns to all the others alike, not to the one after it.
    pub fn order(&self, stream: usize, file: usize) -> Vec<(u32, Arc<Dir>)> {
        let live: Vec<_> = self.vols.iter().filter(|v| !v.out.load(Ordering::Acquire)).collect();
        let n = live.len();
        let first = stream.wrapping_add(file.wrapping_mul(self.streams)) % n.max(1);
        (0..n).map(|k| live[(first + k) % n]).map(|v| (v.id, v.dir.clone())).collect()
    }

    /// The directory of volume `id`, in rotation or not.
    pub fn dir(&self, id: u32) -> Option<Arc<Dir>> {
        self.vols.iter().find(|v| v.id == id).map(|v| v.dir.clone())
    }

    /// Takes volume `id` out of rotation saying `why`, once: true if this
    /// call did.
    pub fn take_out(&self, id: u32, why: impl FnOnce() -> String) -> bool {
        let did = self.vols.iter().find(|v| v.id == id).is_some_and(|v| !v.out.swap(true, Ordering::AcqRel));
        if did {
            self.notes.lock().unwrap_or_else(|p| p.into_inner()).push(why());
        }
        did
    }

    /// The sentences of volumes taken out since the last call.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// How many volumes were taken out.
    pub fn taken_out(&self) -> usize {
        self.vols.len() - self.in_rotation().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_join() {
        assert_eq!(split("stream-000/a.pcap"), Ok((0, "stream-000/a.pcap")));
        assert_eq!(split("@2/stream-001/a.pcap"), Ok((2, "stream-001/a.pcap")));
        assert_eq!(on_volume(2, "stream-001/a.pcap"), "@2/stream-001/a.pcap");
        for bad in ["@0/x", "@01/x", "@x/y", "@1", "@1/", "@-1/x"] {
            assert!(split(bad).is_err(), "{bad}");
        }
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wv-vol-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn register_resolve_and_refuse() {
        let t = tmp("reg");
        let (store, a, b) = (t.join("store"), t.join("a"), t.join("b"));
        std::fs::create_dir_all(&store).unwrap();
        assert_eq!(register(&store, &[a.clone(), b.clone()]).unwrap(), vec![1, 2]);
        // Again: the same ids, nothing new.
        assert_eq!(register(&store, std::slice::from_ref(&b)).unwrap(), vec![2]);
        std::fs::create_dir_all(b.join("stream-001")).unwrap();
        std::fs::write(b.join("stream-001/x.pcap"), b"hi").unwrap();
        let v = Volumes::open(&store).unwrap();
        assert_eq!(v.lstat("@2/stream-001/x.pcap").unwrap().len, 2);
        assert!(v.lstat("@3/stream-001/x.pcap").is_err());
        assert!(v.lstat("@2/../b/stream-001/x.pcap").is_err());
        assert_eq!(v.stream_dirs().0, vec![(1, "@2/stream-001".to_string())]);
        // Refused: the store itself, a directory inside it, another store's volume, a non-empty one.
        assert!(matches!(register(&store, &[store.join("in")]), Err(VolumeError::Overlaps { .. })));
        assert!(!store.join("in").exists(), "nothing is created inside the store");
        let other = t.join("other");
        std::fs::create_dir_all(&other).unwrap();
        assert!(matches!(register(&other, std::slice::from_ref(&a)), Err(VolumeError::Foreign { .. })));
        std::fs::create_dir_all(t.join("c")).unwrap();
        std::fs::write(t.join("c/keep"), b"").unwrap();
        assert!(matches!(register(&store, &[t.join("c")]), Err(VolumeError::NotEmpty { .. })));
        // A disk not mounted: the marker is gone.
        let marker = std::fs::read(a.join(MARKER)).unwrap();
        std::fs::remove_file(a.join(MARKER)).unwrap();
        let v = Volumes::open(&store).unwrap();
        assert_eq!(v.warnings().len(), 1);
        assert!(v.warnings()[0].contains("not mounted"), "{:?}", v.warnings());
        assert!(matches!(register(&store, std::slice::from_ref(&a)), Err(VolumeError::Unmounted { id: 1, .. })));
        // A swapped disk: the marker names another volume.
        let other_id = String::from_utf8(marker).unwrap().replace("\"id\":1", "\"id\":7");
        std::fs::write(a.join(MARKER), other_id).unwrap();
        assert!(matches!(register(&store, std::slice::from_ref(&a)), Err(VolumeError::Swapped { id: 1, .. })));
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn rotation_takes_out_once() {
        let t = tmp("rot");
        let r = Rotation::new(vec![(0, Dir::open(&t).unwrap()), (1, Dir::open(&t).unwrap())], 1);
        let ids = |o: Vec<(u32, Arc<Dir>)>| o.iter().map(|v| v.0).collect::<Vec<_>>();
        assert_eq!(ids(r.order(0, 0)), vec![0, 1]);
        assert_eq!(ids(r.order(0, 1)), vec![1, 0]);
        let two = Rotation::new(vec![(0, Dir::open(&t).unwrap()), (1, Dir::open(&t).unwrap())], 2);
        assert_eq!((ids(two.order(1, 0)), ids(two.order(1, 7))), (vec![1, 0], vec![1, 0]));
        assert!(r.take_out(1, || "gone".into()));
        assert!(!r.take_out(1, || "again".into()));
        assert_eq!(r.take_notes(), vec!["gone".to_string()]);
        assert_eq!(r.taken_out(), 1);
        assert_eq!(ids(r.order(1, 0)), vec![0]);
        assert_eq!(r.in_rotation(), vec![0]);
        // Three volumes, one stream, the middle one out: the other two take
        // turns (the one after it got two files in three).
        let dirs = || (0..3).map(|i| (i, Dir::open(&t).unwrap())).collect::<Vec<_>>();
        let three = Rotation::new(dirs(), 1);
        three.take_out(1, || "out".into());
        let firsts: Vec<u32> = (0..6).map(|f| three.order(0, f)[0].0).collect();
        assert_eq!(firsts, vec![0, 2, 0, 2, 0, 2]);
        // Three streams over three volumes, one out: each volume takes as
        // many of the streams' files as the other.
        let three = Rotation::new(dirs(), 3);
        three.take_out(1, || "out".into());
        let mut on = [0; 3];
        for stream in 0..3 {
            for f in 0..4 {
                on[three.order(stream, f)[0].0 as usize] += 1;
            }
        }
        assert_eq!(on, [6, 0, 6]);
        std::fs::remove_dir_all(&t).unwrap();
    }
}
