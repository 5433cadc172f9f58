//! The history a crash workload records, and what it allows after a crash.
//!
//! # Inodes and names
//!
//! The model keeps inodes apart from the names that reach them: each
//! inode has a model id (never reused) and a history of states (content,
//! permission bits, owner, explicit mtime, user xattrs); a namespace maps
//! every path to (kind, inode id). Hard links are several paths with one
//! id; a change made through any of them is one new state of that inode.
//! A rename moves the inode (and, for a directory, its subtree) to the new
//! path; the old path is gone; a replaced target loses that name, and with
//! its last name its inode ends (a `None` state).
//!
//! # Timeline
//!
//! Operations are numbered from 1; op 0 is the freshly made filesystem.
//! Each op records the crash device's event count before it started
//! (`ev_start`) and after it returned (`ev_end`). A crash at point `p`
//! (events `0..p` done, see `rxfs::bdev::CrashDevice`) can have seen the
//! effects of op `i` only if `ev_start(i) <= p`; so
//!
//! ```text
//!   U(p) = max { i : ev_start(i) <= p }      newest state the image may show
//! ```
//!
//! # What each inode's marks are
//!
//! - `last_any(I)`: the last op that logged inode I. XFS logs an inode for
//!   every change of it, and also when a rename moves it (ctime), when a
//!   link or unlink changes its link count, when a rename replaces it, and,
//!   for a directory, when an entry is added, removed or renamed in or out
//!   of it (rename changes both parents, the moved inode and the replaced
//!   one; link changes the inode and its new parent). Xattr changes,
//!   fallocate (every mode) and truncate log the inode too.
//! - `last_data(I)`: the last op that changed I's data or size (its
//!   creation included): writes, truncates, fallocate.
//!
//! # Durability points (Linux, XFS)
//!
//! A durability op `d` (sync, fsync, fdatasync, unmount) that returned
//! before the crash (`ev_end(d) <= p`) promises:
//!
//! - `sync`/`unmount` at op `i`: everything as of op `i`;
//! - `fsync(P)` at op `i`, P naming inode I (a file or a directory): I's
//!   data, attributes and xattrs as of op `i`, and, XFS having one ordered
//!   log in which forcing I's last change forces every change committed
//!   before it, the namespace as of `last_any(I)`. For a directory that
//!   covers its entries (every add, remove and rename in or out of it is
//!   one of its changes); for a file renamed or linked, the rename/link
//!   (it changed the file's ctime or link count).
//! - `fdatasync(P)` at op `i`: I's data and size as of op `i`, and the
//!   namespace as of `last_data(I)`. Attributes (mode, owner, times,
//!   xattrs) are not promised.
//!
//! # What a recovered image must show at crash point `p`
//!
//! - Namespace (paths, their kinds, and which paths are links to one
//!   inode): exactly the namespace after some op `k` with
//!   `NS_LO(p) <= k <= U(p)`, where `NS_LO` is the largest namespace bound
//!   of the durability ops done by `p`. Metadata transactions are
//!   committed in op order to one log, so recovery yields a prefix of them.
//!   Link groups are compared as partitions: paths that share a model
//!   inode must share a recovered inode number, and only those.
//! - Link structure of the image itself: the names of one inode show the
//!   same inode (attributes, xattrs, size, content), a file's link count
//!   equals its number of names, a directory's is 2 + its subdirectories.
//! - Each path present names, in the namespace(s) that matched, some model
//!   inode I; for its attributes (perm, uid, gid and the user xattrs, taken
//!   together: one inode update is one transaction) one of I's states in
//!   the window `[META_LO(I), U(p)]`; for its data (size and content) one
//!   of I's states in `[DATA_LO(I), U(p)]`, where the window holds the
//!   state current at its low end and every later one. With one state in
//!   the window the content must match it exactly (sha256), and so must an
//!   explicitly set mtime; with several, the size must be one of theirs
//!   and every 512-byte sector (the device's atomic unit) must equal that
//!   sector in one of them (past a state's size, zeros): a write, punch or
//!   zeroing that was not made durable may be torn, but no sector may hold
//!   bytes no allowed state ever had (stale data), nor an older version
//!   than the one made durable.

use std::collections::BTreeMap;
use std::sync::Arc;

/// A model inode's id (never reused; not the filesystem's inode number).
pub type InodeId = u64;

/// User extended attributes: full name ("user.x") -> value.
pub type Xattrs = BTreeMap<Vec<u8>, Vec<u8>>;

/// What an inode holds at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    pub dir: bool,
    pub content: Arc<Vec<u8>>,
    /// Permission bits (`mode & 0o7777`).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    /// Set explicitly (utimens); `None` when the last change set "now".
    pub mtime: Option<(i64, u32)>,
    pub xattrs: Arc<Xattrs>,
}

impl State {
    /// A new empty file or directory owned by root.
    pub fn new(dir: bool, perm: u32) -> Self {
        State {
            dir,
            content: Arc::new(Vec::new()),
            perm,
            uid: 0,
            gid: 0,
            mtime: None,
            xattrs: Arc::new(Xattrs::new()),
        }
    }
}

/// Which inodes a durability op covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    /// One inode; `meta` false for fdatasync (data and size only).
    Inode {
        ino: InodeId,
        meta: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Durable {
    pub op: usize,
    pub ev_end: usize,
    /// The namespace is at least as new as after this op.
    pub ns_lo: usize,
    pub scope: Scope,
}

#[derive(Debug, Clone)]
pub struct OpRec {
    pub desc: String,
    pub ev_start: usize,
    pub ev_end: usize,
}

/// One inode's history: (op, state after it; None = gone), op ascending.
pub type StateHistory = Vec<(usize, Option<Arc<State>>)>;

/// One name of a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsEntry {
    pub dir: bool,
    pub ino: InodeId,
}

/// A namespace: path -> (kind, model inode).
pub type Namespace = BTreeMap<String, NsEntry>;

/// A namespace with inode ids replaced by link groups: path -> (is a
/// directory, the first path, in path order, of its group). Two shapes
/// are equal when the paths, kinds and partitions into links are.
pub type Shape = BTreeMap<String, (bool, String)>;

/// The shape of (path, is_dir, inode key) triples in path order.
pub fn shape<'a, K: Ord + Copy>(it: impl Iterator<Item = (&'a String, bool, K)>) -> Shape {
    let mut first: BTreeMap<K, &String> = BTreeMap::new();
    let mut out = Shape::new();
    for (p, dir, k) in it {
        let f = *first.entry(k).or_insert(p);
        out.insert(p.clone(), (dir, f.clone()));
    }
    out
}

/// The shape of a model namespace.
pub fn ns_shape(ns: &Namespace) -> Shape {
    shape(ns.iter().map(|(p, e)| (p, e.dir, e.ino)))
}

#[derive(Debug, Default)]
pub struct History {
    /// `ops[0]` is the fresh filesystem.
    pub ops: Vec<OpRec>,
    pub inodes: BTreeMap<InodeId, StateHistory>,
    /// Namespace after each op that changed it (op ascending; first: op 0).
    pub ns: Vec<(usize, Arc<Namespace>)>,
    pub durable: Vec<Durable>,
}

/// What the crash image must satisfy at one crash point (see module docs).
#[derive(Debug, Clone)]
pub struct Bounds {
    pub upper: usize,
    pub ns_lo: usize,
    /// Per inode: (meta lo, data lo); inodes without a promise are absent.
    pub lo: BTreeMap<InodeId, (usize, usize)>,
    /// Durability ops done (all scopes).
    pub all_lo: usize,
}

impl Bounds {
    /// (meta lo, data lo) of inode `ino`, `sync`s included.
    pub fn inode_lo(&self, ino: InodeId) -> (usize, usize) {
        let (m, d) = self.lo.get(&ino).copied().unwrap_or((0, 0));
        (self.all_lo.max(m), self.all_lo.max(d))
    }
}

impl History {
    pub fn bounds(&self, p: usize) -> Bounds {
        let upper = self.ops.iter().rposition(|o| o.ev_start <= p).unwrap_or(0);
        let mut b = Bounds {
            upper,
            ns_lo: 0,
            lo: BTreeMap::new(),
            all_lo: 0,
        };
        for d in self.durable.iter().filter(|d| d.ev_end <= p) {
            b.ns_lo = b.ns_lo.max(d.ns_lo);
            match &d.scope {
                Scope::All => b.all_lo = b.all_lo.max(d.op),
                Scope::Inode { ino, meta } => {
                    let e = b.lo.entry(*ino).or_insert((0, 0));
                    if *meta {
                        e.0 = e.0.max(d.op);
                    }
                    e.1 = e.1.max(d.op);
                }
            }
        }
        // An op that returned before p started before p: upper >= every
        // durability op done, so the windows below are never empty.
        debug_assert!(b.ns_lo <= b.upper && b.all_lo <= b.upper);
        b
    }

    /// The namespaces an image at these bounds may show.
    pub fn namespaces(&self, b: &Bounds) -> Vec<(usize, Arc<Namespace>)> {
        window(&self.ns, b.ns_lo, b.upper)
            .into_iter()
            .map(|(op, n)| (*op, n.clone()))
            .collect()
    }

    /// The states of inode `ino` in the window `[lo, upper]`.
    pub fn states(&self, ino: InodeId, lo: usize, upper: usize) -> StateHistory {
        match self.inodes.get(&ino) {
            Some(h) => window(h, lo, upper)
                .into_iter()
                .map(|(op, s)| (*op, s.clone()))
                .collect(),
            None => Vec::new(),
        }
    }
}

/// The entry in effect at `lo` (the last one at or before it) and every
/// later one up to `upper`.
fn window<T>(h: &[(usize, T)], lo: usize, upper: usize) -> Vec<&(usize, T)> {
    let first = h.iter().rposition(|(op, _)| *op <= lo).unwrap_or(0);
    h[first..].iter().filter(|(op, _)| *op <= upper).collect()
}
