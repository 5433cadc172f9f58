//! A seeded workload over the library's write API, run against a
//! [`CrashDevice`] while a model records the [`History`]: create, mkdir,
//! unlink, rmdir, chmod, chown, utimens, fsync (files and directories),
//! fdatasync, sync and requests that must fail (here); write
//! new/append/overwrite/sparse, truncate, fallocate (allocate, keep-size,
//! punch hole, zero range) and xattr set/replace/remove
//! ([`super::workload_data`]); rename (to a new name, over a file, of a
//! directory, RENAME_NOREPLACE, RENAME_EXCHANGE), link, and the atomic
//! save "write X.tmp, fsync it, rename it over X, fsync the directory"
//! ([`super::workload_ns`]).
//!
//! The generator only asks for what the model says is possible, plus some
//! requests that must fail with a known error (create over an existing
//! name, unlink of a missing one, rmdir of a non-empty directory, rename
//! into itself, ...): an error path must cancel its transaction without
//! leaving anything behind. Operations go to a [`Target`] (the library,
//! or system calls on a mount). Directories stay in shortform or block
//! form (at most [`MAX_ENTRIES`] entries, paths at most [`MAX_DEPTH`]
//! deep) and files small (extent-format data forks): leaf/node
//! directories and btree forks are issue 4.
//!
//! Op mixes and their weights: [`super::workload_mix`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::model::{Durable, History, InodeId, Namespace, NsEntry, OpRec, Scope, State};
use super::target::{parent_of, Attr, TErr, Target};
pub use super::workload_mix::{mix_table, Mix, Op};

/// Entries per directory, so directories stay in block form.
pub const MAX_ENTRIES: usize = 60;
/// Components per path (`/a/b/f`).
pub const MAX_DEPTH: usize = 3;

#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Ops to run (the last step may add a few more).
    pub ops: usize,
    /// File size cap (keeps data forks in extent format).
    pub max_file: usize,
    pub mix: Mix,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            ops: 160,
            max_file: 384 << 10,
            mix: Mix::Full,
        }
    }
}

/// Why a workload ended early.
#[derive(Debug, Clone)]
pub enum Stop {
    /// An operation rxfs does not implement (yet).
    NotSupported(String),
    /// A result the model did not expect: a bug.
    Unexpected(String),
}

pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        // SplitMix64.
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len() as u64) as usize])
    }
}

/// The model's view of one inode now.
pub struct Node {
    pub st: Arc<State>,
    /// Last op that logged this inode (see the model's docs: changes of
    /// it, renames and links of it, a directory's entry changes), and the
    /// last that changed its data or size (or made it).
    pub last_any: usize,
    pub last_data: usize,
}

pub struct Workload {
    pub(super) t: Box<dyn Target + Send>,
    pub(super) rng: Rng,
    /// The namespace now: path -> model inode.
    pub(super) ns: BTreeMap<String, InodeId>,
    pub(super) nodes: BTreeMap<InodeId, Node>,
    next_ino: InodeId,
    pub h: History,
    pub(super) names: u64,
    pub(super) params: Params,
    pub(super) fill: u64,
    /// An op that fails may still have happened (a daemon killed while
    /// serving it): record its effect before stopping.
    pub assume_on_error: bool,
    /// Requests the target refused as not supported, which the workload
    /// then leaves out (fallocate modes through a mount); the library
    /// target must have none.
    pub unsupported: BTreeSet<String>,
}

pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Components of a path ("/" has none).
pub fn depth(path: &str) -> usize {
    if path == "/" {
        0
    } else {
        path.matches('/').count()
    }
}

/// Whether `path` is `top` or lies below it.
pub fn is_under(path: &str, top: &str) -> bool {
    path == top || top == "/" || path.strip_prefix(top).is_some_and(|r| r.starts_with('/'))
}

/// Deterministic bytes for one write.
pub fn fill_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&r.next().to_le_bytes());
    }
    v.truncate(len);
    v
}

impl Workload {
    pub fn new(t: Box<dyn Target + Send>, seed: u64, params: Params) -> Self {
        let mut h = History::default();
        h.ops.push(OpRec {
            desc: "mkfs".into(),
            ev_start: 0,
            ev_end: t.clock(),
        });
        let mut w = Workload {
            t,
            rng: Rng::new(seed ^ 0x6372_6173_6874_6573),
            ns: BTreeMap::new(),
            nodes: BTreeMap::new(),
            next_ino: 1,
            h,
            names: 0,
            params,
            fill: seed << 20,
            assume_on_error: false,
            unsupported: BTreeSet::new(),
        };
        let root = w.new_inode(State::new(true, 0o755));
        w.ns.insert("/".into(), root);
        w.record_ns();
        w
    }

    /// Run the workload; `Err` says why it stopped early (the history is
    /// complete up to there).
    pub fn run(&mut self) -> Result<(), Stop> {
        // Ops, not steps (an atomic save is several ops); a step may also
        // find nothing to do, hence the bound.
        for _ in 0..self.params.ops * 20 {
            if self.op() >= self.params.ops {
                break;
            }
            self.step()?;
        }
        Ok(())
    }

    /// The target's clock now (the crash point "after everything").
    pub fn clock(&self) -> usize {
        self.t.clock()
    }

    pub(super) fn op(&self) -> usize {
        self.h.ops.len() - 1
    }

    /// Run `f` on the target as op `desc`; returns the op number and
    /// `Some(stop)` if it failed (the effect is then recorded only with
    /// `assume_on_error`, and the caller stops after recording).
    pub(super) fn exec(
        &mut self,
        desc: String,
        f: impl FnOnce(&mut dyn Target) -> Result<(), TErr>,
    ) -> Result<(usize, Option<Stop>), Stop> {
        self.h.ops.push(OpRec {
            desc,
            ev_start: self.t.clock(),
            ev_end: usize::MAX,
        });
        let r = f(&mut *self.t);
        let i = self.op();
        self.h.ops[i].ev_end = self.t.clock();
        match r {
            Ok(()) => Ok((i, None)),
            Err(e) => {
                let stop = self.stop(e);
                if self.assume_on_error {
                    Ok((i, Some(stop)))
                } else {
                    Err(stop)
                }
            }
        }
    }

    /// Run a request that must fail with one of `want` and change nothing.
    pub(super) fn expect_err(
        &mut self,
        desc: String,
        want: &[TErr],
        f: impl FnOnce(&mut dyn Target) -> Result<(), TErr>,
    ) -> Result<(), Stop> {
        let mut got = None;
        self.exec(desc, |t| {
            got = Some(f(t));
            Ok(())
        })?;
        match got {
            Some(Err(e)) if want.contains(&e) => Ok(()),
            Some(Err(TErr::NotSupported(m))) => Err(Stop::NotSupported(m)),
            other => Err(Stop::Unexpected(format!(
                "op {} {}: got {other:?}, want {want:?}",
                self.op(),
                self.h.ops[self.op()].desc
            ))),
        }
    }

    fn stop(&self, e: TErr) -> Stop {
        let i = self.op();
        let d = &self.h.ops[i].desc;
        match e {
            TErr::NotSupported(m) => Stop::NotSupported(format!("op {i} {d}: {m}")),
            e => Stop::Unexpected(format!("op {i} {d}: {e:?}")),
        }
    }

    pub(super) fn done(stop: Option<Stop>) -> Result<(), Stop> {
        match stop {
            None => Ok(()),
            Some(s) => Err(s),
        }
    }

    /// A new inode with state `st` (the current op made it).
    pub(super) fn new_inode(&mut self, st: State) -> InodeId {
        let op = self.op();
        let ino = self.next_ino;
        self.next_ino += 1;
        let st = Arc::new(st);
        self.h.inodes.insert(ino, vec![(op, Some(st.clone()))]);
        self.nodes.insert(
            ino,
            Node {
                st,
                last_any: op,
                last_data: op,
            },
        );
        ino
    }

    /// The namespace now, as the history records it.
    fn ns_now(&self) -> Namespace {
        self.ns
            .iter()
            .map(|(p, &ino)| {
                let dir = self.nodes[&ino].st.dir;
                (p.clone(), NsEntry { dir, ino })
            })
            .collect()
    }

    pub(super) fn record_ns(&mut self) {
        let ns = Arc::new(self.ns_now());
        let op = self.op();
        self.h.ns.push((op, ns));
    }

    pub(super) fn node(&self, path: &str) -> &Node {
        &self.nodes[&self.ns[path]]
    }

    pub(super) fn is_dir(&self, path: &str) -> bool {
        self.node(path).st.dir
    }

    /// The names of inode `ino` now.
    pub(super) fn names_of(&self, ino: InodeId) -> Vec<String> {
        self.ns
            .iter()
            .filter(|(_, &i)| i == ino)
            .map(|(p, _)| p.clone())
            .collect()
    }

    pub(super) fn paths(&self, dir: bool) -> Vec<String> {
        self.ns
            .iter()
            .filter(|(_, i)| self.nodes[*i].st.dir == dir)
            .map(|(p, _)| p.clone())
            .collect()
    }

    pub(super) fn children(&self, dir: &str) -> usize {
        self.ns
            .keys()
            .filter(|p| p.as_str() != "/" && parent_of(p) == dir)
            .count()
    }

    /// The current op logged inode `ino` without changing its state.
    pub(super) fn touch(&mut self, ino: InodeId) {
        let op = self.op();
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.last_any = op;
        }
    }

    /// Change an inode's state: record it and bump its op marks.
    pub(super) fn set_state(&mut self, ino: InodeId, st: State, data: bool) {
        let op = self.op();
        let st = Arc::new(st);
        let n = self.nodes.get_mut(&ino).expect("inode in model");
        n.st = st.clone();
        n.last_any = op;
        if data {
            n.last_data = op;
        }
        self.h.inodes.get_mut(&ino).unwrap().push((op, Some(st)));
    }

    /// An entry was added to or removed from `parent`: logged, and its
    /// mtime is now.
    pub(super) fn touch_parent(&mut self, parent: &str) {
        let Some(&ino) = self.ns.get(parent) else {
            return;
        };
        let st = self.nodes[&ino].st.clone();
        if st.mtime.is_some() {
            let new = State {
                mtime: None,
                ..(*st).clone()
            };
            self.set_state(ino, new, false);
        } else {
            self.touch(ino);
        }
    }

    /// `path` goes (unlink, rmdir, replaced by a rename): its inode loses
    /// a name, and with its last name ends.
    pub(super) fn drop_name(&mut self, path: &str) {
        let ino = self.ns.remove(path).expect("path in model");
        if self.ns.values().any(|&i| i == ino) {
            self.touch(ino);
        } else {
            let op = self.op();
            self.nodes.remove(&ino);
            self.h.inodes.get_mut(&ino).unwrap().push((op, None));
        }
    }

    fn step(&mut self) -> Result<(), Stop> {
        if self.paths(false).is_empty() {
            return self.create(false);
        }
        let table = mix_table(self.params.mix);
        let total: u32 = table.iter().map(|(w, _)| w).sum();
        let mut r = self.rng.below(total as u64) as u32;
        for &(w, op) in table {
            if r < w {
                return self.run_op(op);
            }
            r -= w;
        }
        unreachable!("weights sum to {total}")
    }

    fn run_op(&mut self, op: Op) -> Result<(), Stop> {
        match op {
            Op::Create => self.create(false),
            Op::Mkdir => self.create(true),
            Op::Write => self.write(),
            Op::Truncate => self.truncate(),
            Op::Falloc => self.fallocate(),
            Op::Chmod => self.chmod(),
            Op::Chown => self.chown(),
            Op::Utimens => self.utimens(),
            Op::Xattr => self.xattr(),
            Op::Unlink => self.unlink(),
            Op::Rmdir => self.rmdir(),
            Op::Rename => self.rename_file(),
            Op::RenameOver => self.rename_over(),
            Op::RenameDir => self.rename_dir(),
            Op::Exchange => self.exchange(),
            Op::AtomicSave => self.atomic_save(),
            Op::Link => self.link(),
            Op::Fsync => self.fsync(false),
            Op::FsyncDir => self.fsync_dir(),
            Op::Fdatasync => self.fsync(true),
            Op::Sync => self.sync(),
            Op::Bogus => self.bogus(),
            Op::BogusNs => self.bogus_ns(),
        }
    }

    /// A directory that may take one more entry (paths at most
    /// [`MAX_DEPTH`] deep).
    pub(super) fn pick_dir(&mut self) -> String {
        // Prefer one directory that grows into block form.
        let dirs: Vec<String> = self
            .paths(true)
            .into_iter()
            .filter(|d| self.children(d) < MAX_ENTRIES && depth(d) < MAX_DEPTH)
            .collect();
        if self.rng.below(3) == 0 {
            if let Some(d) = dirs.iter().find(|d| d.as_str() == "/big") {
                return d.clone();
            }
        }
        self.rng.pick(&dirs).cloned().unwrap_or_else(|| "/".into())
    }

    fn create(&mut self, dir: bool) -> Result<(), Stop> {
        self.names += 1;
        let path = if dir && !self.ns.contains_key("/big") {
            "/big".to_string()
        } else {
            let parent = self.pick_dir();
            join(
                &parent,
                &format!("{}{}", if dir { "d" } else { "f" }, self.names),
            )
        };
        if self.children(parent_of(&path)) >= MAX_ENTRIES {
            return Ok(());
        }
        self.create_path(path, dir)
    }

    /// Create the file or directory `path` (its name is free).
    pub(super) fn create_path(&mut self, path: String, dir: bool) -> Result<(), Stop> {
        debug_assert!(!self.ns.contains_key(&path));
        let perm = if dir { 0o755 } else { 0o644 };
        let desc = format!("{} {path}", if dir { "mkdir" } else { "create" });
        let p2 = path.clone();
        let (_, stop) = self.exec(desc, |t| t.create(&p2, dir, perm))?;
        let ino = self.new_inode(State::new(dir, perm));
        self.ns.insert(path.clone(), ino);
        self.touch_parent(parent_of(&path));
        self.record_ns();
        Self::done(stop)
    }

    pub(super) fn pick_file(&mut self) -> Option<(String, InodeId, Arc<State>)> {
        let files = self.paths(false);
        let p = self.rng.pick(&files)?.clone();
        let ino = self.ns[&p];
        let st = self.nodes[&ino].st.clone();
        Some((p, ino, st))
    }

    /// A file or a directory (not the root).
    pub(super) fn pick_any(&mut self) -> Option<(String, InodeId, Arc<State>)> {
        let all: Vec<String> = self.ns.keys().filter(|p| *p != "/").cloned().collect();
        let p = self.rng.pick(&all)?.clone();
        let ino = self.ns[&p];
        let st = self.nodes[&ino].st.clone();
        Some((p, ino, st))
    }

    fn setattr(&mut self, path: &str, ino: InodeId, a: Attr, new: State) -> Result<(), Stop> {
        let desc = format!("setattr {path} {a:?}");
        let (_, stop) = self.exec(desc, |t| t.setattr(path, a))?;
        self.set_state(ino, new, false);
        Self::done(stop)
    }

    fn chmod(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_any() else {
            return Ok(());
        };
        let perm = (0o600 | (self.rng.below(0o10000) as u32 & 0o7177)) & self.t.perm_mask();
        let new = State {
            perm,
            ..(*st).clone()
        };
        self.setattr(&path, ino, Attr::Perm(perm), new)
    }

    fn chown(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_any() else {
            return Ok(());
        };
        // chown(2) clears setuid/setgid of files; leave those alone.
        if st.perm & 0o6000 != 0 {
            return Ok(());
        }
        let (uid, gid) = (self.rng.below(70000) as u32, self.rng.below(70000) as u32);
        let new = State {
            uid,
            gid,
            ..(*st).clone()
        };
        self.setattr(&path, ino, Attr::Owner(uid, gid), new)
    }

    fn utimens(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_any() else {
            return Ok(());
        };
        let ts = |r: &mut Rng| {
            (
                1_000_000_000 + r.below(1_000_000_000) as i64,
                r.below(1_000_000_000) as u32,
            )
        };
        let (at, mt) = (ts(&mut self.rng), ts(&mut self.rng));
        let new = State {
            mtime: Some(mt),
            ..(*st).clone()
        };
        self.setattr(&path, ino, Attr::Times(at, mt), new)
    }

    fn unlink(&mut self) -> Result<(), Stop> {
        let Some((path, _, _)) = self.pick_file() else {
            return Ok(());
        };
        self.remove(path, false)
    }

    fn rmdir(&mut self) -> Result<(), Stop> {
        let empty: Vec<String> = self
            .paths(true)
            .into_iter()
            .filter(|d| d != "/" && self.children(d) == 0)
            .collect();
        let Some(path) = self.rng.pick(&empty).cloned() else {
            return Ok(());
        };
        self.remove(path, true)
    }

    fn remove(&mut self, path: String, dir: bool) -> Result<(), Stop> {
        let desc = format!("{} {path}", if dir { "rmdir" } else { "unlink" });
        let (_, stop) = self.exec(desc, |t| t.remove(&path, dir))?;
        self.drop_name(&path);
        self.touch_parent(parent_of(&path));
        self.record_ns();
        Self::done(stop)
    }

    fn fsync(&mut self, datasync: bool) -> Result<(), Stop> {
        let pick = if datasync {
            self.pick_file()
        } else {
            self.pick_any()
        };
        let Some((path, _, _)) = pick else {
            return Ok(());
        };
        self.fsync_path(path, datasync)
    }

    /// fsync of a directory (the root included).
    fn fsync_dir(&mut self) -> Result<(), Stop> {
        let dirs = self.paths(true);
        let Some(d) = self.rng.pick(&dirs).cloned() else {
            return Ok(());
        };
        self.fsync_path(d, false)
    }

    /// fsync or fdatasync of `path` (a file or a directory), and the
    /// promise it makes once it returned.
    pub(super) fn fsync_path(&mut self, path: String, datasync: bool) -> Result<(), Stop> {
        let what = if datasync { "fdatasync" } else { "fsync" };
        let kind = if self.is_dir(&path) { "dir " } else { "" };
        let desc = format!("{what} {kind}{path}");
        let (op, stop) = self.exec(desc, |t| t.fsync(&path, datasync))?;
        if let Some(s) = stop {
            // Not known to have returned: promises nothing.
            return Err(s);
        }
        let ino = self.ns[&path];
        let n = &self.nodes[&ino];
        let ns_lo = if datasync { n.last_data } else { n.last_any };
        self.h.durable.push(Durable {
            op,
            ev_end: self.h.ops[op].ev_end,
            ns_lo,
            scope: Scope::Inode {
                ino,
                meta: !datasync,
            },
        });
        Ok(())
    }

    fn sync(&mut self) -> Result<(), Stop> {
        if !self.t.has_sync() {
            return self.fsync(false);
        }
        let (op, stop) = self.exec("sync".into(), |t| t.sync())?;
        if let Some(s) = stop {
            return Err(s);
        }
        self.durable_all(op);
        Ok(())
    }

    /// Everything as of `op` is durable (sync, unmount).
    fn durable_all(&mut self, op: usize) {
        self.h.durable.push(Durable {
            op,
            ev_end: self.h.ops[op].ev_end,
            ns_lo: op,
            scope: Scope::All,
        });
    }

    /// create/unlink/rmdir requests that must fail with a known error.
    fn bogus(&mut self) -> Result<(), Stop> {
        match self.rng.below(3) {
            0 => {
                let Some((path, _, st)) = self.pick_any() else {
                    return Ok(());
                };
                let d = if st.dir { "mkdir" } else { "create" };
                let dir = st.dir;
                self.expect_err(format!("{d} over {path} (EEXIST)"), &[TErr::Exists], |t| {
                    t.create(&path, dir, 0o644)
                })
            }
            1 => {
                let path = join(&self.pick_dir(), "missing");
                self.expect_err(format!("unlink {path} (ENOENT)"), &[TErr::NotFound], |t| {
                    t.remove(&path, false)
                })
            }
            _ => {
                let full: Vec<String> = self
                    .paths(true)
                    .into_iter()
                    .filter(|d| d != "/" && self.children(d) > 0)
                    .collect();
                let Some(path) = self.rng.pick(&full).cloned() else {
                    return Ok(());
                };
                self.expect_err(
                    format!("rmdir {path} (ENOTEMPTY)"),
                    &[TErr::NotEmpty],
                    |t| t.remove(&path, true),
                )
            }
        }
    }

    /// Unmount as the last op (a durability point for everything).
    pub fn unmount(&mut self) -> Result<(), Stop> {
        let (op, stop) = self.exec("unmount".into(), |t| t.unmount())?;
        if let Some(s) = stop {
            return Err(s);
        }
        self.durable_all(op);
        Ok(())
    }

    /// The model's namespace and each path's state now (for a check of
    /// the live filesystem).
    pub fn current(&self) -> (Namespace, BTreeMap<String, Arc<State>>) {
        let ns = self.ns_now();
        let states = self
            .ns
            .iter()
            .map(|(p, i)| (p.clone(), self.nodes[i].st.clone()))
            .collect();
        (ns, states)
    }
}
