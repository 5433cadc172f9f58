//! A seeded workload over the library's write API (create, mkdir, unlink,
//! rmdir, write new/append/overwrite/sparse, truncate, chmod, chown,
//! utimens, fsync, fdatasync, sync, some operations that must fail), run
//! against a [`CrashDevice`] while a model records the [`History`].
//!
//! The generator only asks for what the model says is possible, plus a few
//! requests that must fail with a known error (create over an existing
//! name, unlink of a missing one, rmdir of a non-empty directory): an error
//! path must cancel its transaction without leaving anything behind.
//! Operations go to a [`Target`] (the library, or system calls on a
//! mount). Directories stay in shortform or block form (at most [`MAX_ENTRIES`]
//! entries) and files small (extent-format data forks): leaf/node
//! directories and btree forks are issue 4.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::model::{Durable, History, Namespace, OpRec, Scope, State};
use super::target::{parent_of, Attr, TErr, Target};

/// Entries per directory, so directories stay in block form.
pub const MAX_ENTRIES: usize = 60;

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub ops: usize,
    /// File size cap (keeps data forks in extent format).
    pub max_file: usize,
    /// Data and attribute ops (write, truncate, setattr, fsync); without
    /// them: namespace ops and sync only.
    pub data_ops: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            ops: 160,
            max_file: 384 << 10,
            data_ops: true,
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
    fn pick<'a, T>(&mut self, v: &'a [T]) -> Option<&'a T> {
        (!v.is_empty()).then(|| &v[self.below(v.len() as u64) as usize])
    }
}

struct Node {
    st: Arc<State>,
    /// Last op that changed anything of this inode (a directory: also its
    /// entries), and the last that changed its data or size (or made it).
    last_any: usize,
    last_data: usize,
}

pub struct Workload {
    t: Box<dyn Target + Send>,
    rng: Rng,
    cur: BTreeMap<String, Node>,
    pub h: History,
    names: u64,
    params: Params,
    fill: u64,
    /// An op that fails may still have happened (a daemon killed while
    /// serving it): record its effect before stopping.
    pub assume_on_error: bool,
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
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
        let root = Arc::new(State {
            dir: true,
            content: Arc::new(Vec::new()),
            perm: 0o755,
            uid: 0,
            gid: 0,
            mtime: None,
        });
        let mut h = History::default();
        h.ops.push(OpRec {
            desc: "mkfs".into(),
            ev_start: 0,
            ev_end: t.clock(),
        });
        h.paths.insert("/".into(), vec![(0, Some(root.clone()))]);
        let mut ns = Namespace::new();
        ns.insert("/".into(), true);
        h.ns.push((0, Arc::new(ns)));
        let mut cur = BTreeMap::new();
        cur.insert(
            "/".to_string(),
            Node {
                st: root,
                last_any: 0,
                last_data: 0,
            },
        );
        Workload {
            t,
            rng: Rng::new(seed ^ 0x6372_6173_6874_6573),
            cur,
            h,
            names: 0,
            params,
            fill: seed << 20,
            assume_on_error: false,
        }
    }

    /// Run the workload; `Err` says why it stopped early (the history is
    /// complete up to there).
    pub fn run(&mut self) -> Result<(), Stop> {
        for _ in 0..self.params.ops {
            self.step()?;
        }
        Ok(())
    }

    /// The target's clock now (the crash point "after everything").
    pub fn clock(&self) -> usize {
        self.t.clock()
    }

    fn op(&self) -> usize {
        self.h.ops.len() - 1
    }

    /// Run `f` on the target as op `desc`; returns the op number and
    /// `Some(stop)` if it failed (the effect is then recorded only with
    /// `assume_on_error`, and the caller stops after recording).
    fn exec(
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

    fn stop(&self, e: TErr) -> Stop {
        let i = self.op();
        let d = &self.h.ops[i].desc;
        match e {
            TErr::NotSupported(m) => Stop::NotSupported(format!("op {i} {d}: {m}")),
            e => Stop::Unexpected(format!("op {i} {d}: {e:?}")),
        }
    }

    fn done(stop: Option<Stop>) -> Result<(), Stop> {
        match stop {
            None => Ok(()),
            Some(s) => Err(s),
        }
    }

    fn record(&mut self, path: &str, st: Option<Arc<State>>) {
        let op = self.op();
        self.h
            .paths
            .entry(path.to_string())
            .or_default()
            .push((op, st));
    }

    fn record_ns(&mut self) {
        let ns: Namespace = self
            .cur
            .iter()
            .map(|(p, n)| (p.clone(), n.st.dir))
            .collect();
        let op = self.op();
        self.h.ns.push((op, Arc::new(ns)));
    }

    fn paths(&self, dir: bool) -> Vec<String> {
        self.cur
            .iter()
            .filter(|(_, n)| n.st.dir == dir)
            .map(|(p, _)| p.clone())
            .collect()
    }

    fn children(&self, dir: &str) -> usize {
        self.cur
            .keys()
            .filter(|p| p.as_str() != "/" && parent_of(p) == dir)
            .count()
    }

    fn step(&mut self) -> Result<(), Stop> {
        let files = self.paths(false);
        if files.is_empty() {
            return self.create(false);
        }
        if !self.params.data_ops {
            return match self.rng.below(100) {
                0..=39 => self.create(false),
                40..=54 => self.create(true),
                55..=74 => self.unlink(),
                75..=84 => self.rmdir(),
                85..=92 => self.sync(),
                _ => self.bogus(),
            };
        }
        match self.rng.below(100) {
            0..=11 => self.create(false),
            12..=16 => self.create(true),
            17..=44 => self.write(),
            45..=50 => self.truncate(),
            51..=53 => self.chmod(),
            54..=55 => self.chown(),
            56..=58 => self.utimens(),
            59..=65 => self.unlink(),
            66..=68 => self.rmdir(),
            69..=80 => self.fsync(false),
            81..=86 => self.fsync(true),
            87..=90 => self.sync(),
            _ => self.bogus(),
        }
    }

    fn pick_dir(&mut self) -> String {
        // Prefer one directory that grows into block form.
        let dirs: Vec<String> = self
            .paths(true)
            .into_iter()
            .filter(|d| self.children(d) < MAX_ENTRIES && d.matches('/').count() <= 2)
            .collect();
        if self.rng.below(3) == 0 {
            if let Some(d) = dirs.iter().find(|d| d.as_str() == "/big") {
                return d.clone();
            }
        }
        self.rng.pick(&dirs).cloned().unwrap_or_else(|| "/".into())
    }

    fn create(&mut self, dir: bool) -> Result<(), Stop> {
        let parent = self.pick_dir();
        if self.children(&parent) >= MAX_ENTRIES {
            return Ok(());
        }
        self.names += 1;
        let name = if dir && !self.cur.contains_key("/big") {
            "big".to_string()
        } else if dir {
            format!("d{}", self.names)
        } else {
            format!("f{}", self.names)
        };
        let path = join(&parent, &name);
        let perm = if dir { 0o755 } else { 0o644 };
        let desc = format!("{} {path}", if dir { "mkdir" } else { "create" });
        let p2 = path.clone();
        let (op, stop) = self.exec(desc, |t| t.create(&p2, dir, perm))?;
        let st = Arc::new(State {
            dir,
            content: Arc::new(Vec::new()),
            perm,
            uid: 0,
            gid: 0,
            mtime: None,
        });
        self.cur.insert(
            path.clone(),
            Node {
                st: st.clone(),
                last_any: op,
                last_data: op,
            },
        );
        self.touch_parent(&parent, op);
        self.record(&path, Some(st));
        self.record_ns();
        Self::done(stop)
    }

    /// An entry was added to or removed from `parent`: its mtime is now.
    fn touch_parent(&mut self, parent: &str, op: usize) {
        let Some(n) = self.cur.get_mut(parent) else {
            return;
        };
        n.last_any = op;
        if n.st.mtime.is_some() {
            let st = Arc::new(State {
                mtime: None,
                ..(*n.st).clone()
            });
            n.st = st.clone();
            self.record(parent, Some(st));
        }
    }

    /// Change a path's state: record it and bump its op marks.
    fn set_state(&mut self, path: &str, st: State, data: bool) {
        let op = self.op();
        let st = Arc::new(st);
        let n = self.cur.get_mut(path).expect("path in model");
        n.st = st.clone();
        n.last_any = op;
        if data {
            n.last_data = op;
        }
        self.record(path, Some(st));
    }

    fn pick_file(&mut self) -> Option<(String, Arc<State>)> {
        let files = self.paths(false);
        let p = self.rng.pick(&files)?.clone();
        let st = self.cur[&p].st.clone();
        Some((p, st))
    }

    fn write(&mut self) -> Result<(), Stop> {
        let Some((path, st)) = self.pick_file() else {
            return Ok(());
        };
        let size = st.content.len();
        let mut len = match self.rng.below(10) {
            0 => 1 + self.rng.below(128 << 10) as usize,
            1..=3 => 1 + self.rng.below(512) as usize,
            _ => 1 + self.rng.below(16 << 10) as usize,
        };
        let (kind, off) = match self.rng.below(8) {
            _ if size == 0 => ("new", 0),
            0..=2 => ("append", size),
            3..=5 => ("overwrite", self.rng.below(size as u64) as usize),
            6 => ("sparse", size + 1 + self.rng.below(64 << 10) as usize),
            _ => ("aligned", (self.rng.below(size as u64) as usize) & !4095),
        };
        if off + len > self.params.max_file {
            if off >= self.params.max_file {
                return Ok(());
            }
            len = self.params.max_file - off;
        }
        self.fill += 1;
        let data = fill_bytes(self.fill, len);
        let desc = format!("write {kind} {path} off {off} len {len}");
        let (_, stop) = self.exec(desc, |t| t.write(&path, off as u64, &data))?;
        let mut c = (*st.content).clone();
        if c.len() < off + len {
            c.resize(off + len, 0);
        }
        c[off..off + len].copy_from_slice(&data);
        let new = State {
            content: Arc::new(c),
            mtime: None,
            ..(*st).clone()
        };
        self.set_state(&path, new, true);
        Self::done(stop)
    }

    fn truncate(&mut self) -> Result<(), Stop> {
        let Some((path, st)) = self.pick_file() else {
            return Ok(());
        };
        let size = st.content.len() as u64;
        let to = (match self.rng.below(4) {
            0 => 0,
            1 => size + self.rng.below(32 << 10),
            _ => self.rng.below(size + 1),
        })
        .min(self.params.max_file as u64);
        let desc = format!("truncate {path} {size} -> {to}");
        let (_, stop) = self.exec(desc, |t| t.truncate(&path, to))?;
        let mut c = (*st.content).clone();
        c.resize(to as usize, 0);
        let new = State {
            content: Arc::new(c),
            mtime: None,
            ..(*st).clone()
        };
        self.set_state(&path, new, true);
        Self::done(stop)
    }

    /// A file or a directory (not the root).
    fn pick_any(&mut self) -> Option<(String, Arc<State>)> {
        let all: Vec<String> = self.cur.keys().filter(|p| *p != "/").cloned().collect();
        let p = self.rng.pick(&all)?.clone();
        let st = self.cur[&p].st.clone();
        Some((p, st))
    }

    fn setattr(&mut self, path: &str, a: Attr, new: State) -> Result<(), Stop> {
        let desc = format!("setattr {path} {a:?}");
        let (_, stop) = self.exec(desc, |t| t.setattr(path, a))?;
        self.set_state(path, new, false);
        Self::done(stop)
    }

    fn chmod(&mut self) -> Result<(), Stop> {
        let Some((path, st)) = self.pick_any() else {
            return Ok(());
        };
        let perm = (0o600 | (self.rng.below(0o10000) as u32 & 0o7177)) & self.t.perm_mask();
        let new = State {
            perm,
            ..(*st).clone()
        };
        self.setattr(&path, Attr::Perm(perm), new)
    }

    fn chown(&mut self) -> Result<(), Stop> {
        let Some((path, st)) = self.pick_any() else {
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
        self.setattr(&path, Attr::Owner(uid, gid), new)
    }

    fn utimens(&mut self) -> Result<(), Stop> {
        let Some((path, st)) = self.pick_any() else {
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
        self.setattr(&path, Attr::Times(at, mt), new)
    }

    fn unlink(&mut self) -> Result<(), Stop> {
        let Some((path, _)) = self.pick_file() else {
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
        let parent = parent_of(&path).to_string();
        let desc = format!("{} {path}", if dir { "rmdir" } else { "unlink" });
        let (op, stop) = self.exec(desc, |t| t.remove(&path, dir))?;
        self.cur.remove(&path);
        self.touch_parent(&parent, op);
        self.record(&path, None);
        self.record_ns();
        Self::done(stop)
    }

    fn fsync(&mut self, datasync: bool) -> Result<(), Stop> {
        let pick = if datasync {
            self.pick_file()
        } else {
            self.pick_any()
        };
        let Some((path, _)) = pick else {
            return Ok(());
        };
        let desc = format!("{} {path}", if datasync { "fdatasync" } else { "fsync" });
        let (op, stop) = self.exec(desc, |t| t.fsync(&path, datasync))?;
        if let Some(s) = stop {
            // Not known to have returned: promises nothing.
            return Err(s);
        }
        let n = &self.cur[&path];
        let ns_lo = if datasync { n.last_data } else { n.last_any };
        self.h.durable.push(Durable {
            op,
            ev_end: self.h.ops[op].ev_end,
            ns_lo,
            scope: Scope::Path {
                path,
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

    /// Requests that must fail with a known error and change nothing.
    fn bogus(&mut self) -> Result<(), Stop> {
        let (desc, path, want, op): (String, String, TErr, u8) = match self.rng.below(3) {
            0 => {
                let Some((path, st)) = self.pick_any() else {
                    return Ok(());
                };
                let d = if st.dir { "mkdir" } else { "create" };
                (
                    format!("{d} over {path} (EEXIST)"),
                    path,
                    TErr::Exists,
                    st.dir as u8,
                )
            }
            1 => {
                let path = join(&self.pick_dir(), "missing");
                (format!("unlink {path} (ENOENT)"), path, TErr::NotFound, 2)
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
                (format!("rmdir {path} (ENOTEMPTY)"), path, TErr::NotEmpty, 3)
            }
        };
        let mut got = None;
        let r = self.exec(desc, |t| {
            got = Some(match op {
                0 | 1 => t.create(&path, op == 1, 0o644),
                2 => t.remove(&path, false),
                _ => t.remove(&path, true),
            });
            Ok(())
        });
        r?;
        match got {
            Some(Err(e)) if e == want => Ok(()),
            Some(Err(TErr::NotSupported(m))) => Err(Stop::NotSupported(m)),
            other => Err(Stop::Unexpected(format!(
                "op {} {}: got {other:?}, want {want:?}",
                self.op(),
                self.h.ops[self.op()].desc
            ))),
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

    /// The model's current tree (for a check of the live filesystem).
    pub fn current(&self) -> BTreeMap<String, Arc<State>> {
        self.cur
            .iter()
            .map(|(p, n)| (p.clone(), n.st.clone()))
            .collect()
    }
}
