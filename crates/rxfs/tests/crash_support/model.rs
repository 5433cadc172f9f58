//! The history a crash workload records, and what it allows after a crash.
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
//! # Durability points
//!
//! A durability op `d` (sync, fsync, fdatasync, unmount) that returned
//! before the crash (`ev_end(d) <= p`) promises:
//!
//! - `sync`/`unmount` at op `i`: everything as of op `i`;
//! - `fsync(P)` at op `i`: P's data and attributes as of op `i`, and (XFS
//!   has one ordered log: forcing P's last change forces every change
//!   committed before it) the namespace as of P's last change;
//! - `fdatasync(P)` at op `i`: P's data and size as of op `i`, and the
//!   namespace as of P's last data change (its creation included).
//!   Attributes (mode, owner, times) are not promised.
//!
//! # What a recovered image must show at crash point `p`
//!
//! - Namespace (paths and their kinds): exactly the namespace after some op
//!   `k` with `NS_LO(p) <= k <= U(p)`, where `NS_LO` is the largest
//!   namespace bound of the durability ops done by `p`. Metadata
//!   transactions are committed in op order to one log, so recovery yields
//!   a prefix of them.
//! - Each path present: for its attributes (perm, uid, gid) one of P's
//!   states in the window `[META_LO(P), U(p)]`; for its data (size and
//!   content) one of the states in `[DATA_LO(P), U(p)]`, where the window
//!   holds the state current at its low end and every later one. With one
//!   state in the window the content must match it exactly (sha256), and
//!   so must an explicitly set mtime; with several, the size must be one of
//!   theirs and every 512-byte sector (the device's atomic unit) must equal
//!   that sector in one of them (past a state's size, zeros): a write that
//!   was not made durable may be torn, but no sector may hold bytes no
//!   allowed state ever had (stale data), nor an older version than the
//!   one made durable.

use std::collections::BTreeMap;
use std::sync::Arc;

/// What a path holds at one moment.
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
}

/// Which paths a durability op covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    /// One path; `meta` false for fdatasync (data and size only).
    Path {
        path: String,
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

/// One path's history: (op, state after it; None = absent), op ascending.
pub type PathHistory = Vec<(usize, Option<Arc<State>>)>;

/// A namespace: path -> is a directory.
pub type Namespace = BTreeMap<String, bool>;

#[derive(Debug, Default)]
pub struct History {
    /// `ops[0]` is the fresh filesystem.
    pub ops: Vec<OpRec>,
    pub paths: BTreeMap<String, PathHistory>,
    /// Namespace after each op that changed it (op ascending; first: op 0).
    pub ns: Vec<(usize, Arc<Namespace>)>,
    pub durable: Vec<Durable>,
}

/// What the crash image must satisfy at one crash point (see module docs).
#[derive(Debug, Clone)]
pub struct Bounds {
    pub upper: usize,
    pub ns_lo: usize,
    /// Per path: (meta lo, data lo); paths without a promise are absent.
    pub lo: BTreeMap<String, (usize, usize)>,
    /// Durability ops done (all scopes).
    pub all_lo: usize,
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
                Scope::Path { path, meta } => {
                    let e = b.lo.entry(path.clone()).or_insert((0, 0));
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

    /// The states of `path` in the window `[lo, upper]`.
    pub fn states(&self, path: &str, lo: usize, upper: usize) -> PathHistory {
        match self.paths.get(path) {
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
