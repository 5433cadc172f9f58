//! A seeded workload over the library's write API (create, mkdir, unlink,
//! rmdir, write new/append/overwrite/sparse, truncate, chmod, chown,
//! utimens, fsync, fdatasync, sync, some operations that must fail), run
//! against a [`CrashDevice`] while a model records the [`History`].
//!
//! The generator only asks for what the model says is possible, plus a few
//! requests that must fail with a known error (create over an existing
//! name, unlink of a missing one, rmdir of a non-empty directory): an error
//! path must cancel its transaction without leaving anything behind.
//! Directories stay in shortform or block form (at most [`MAX_ENTRIES`]
//! entries) and files small (extent-format data forks): leaf/node
//! directories and btree forks are issue 4.

use std::collections::BTreeMap;
use std::sync::Arc;

use rxfs::bdev::CrashDevice;
use rxfs::format::inode::Timestamp;
use rxfs::fs::ops_data::SetAttr;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::{Error, Filesystem};

use super::model::{Durable, History, Namespace, OpRec, Scope, State};

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
    ino: Ino,
    st: Arc<State>,
    /// Last op that changed anything of this inode (a directory: also its
    /// entries), and the last that changed its data or size (or made it).
    last_any: usize,
    last_data: usize,
}

pub struct Workload<'a> {
    fs: Arc<Filesystem>,
    dev: &'a CrashDevice,
    rng: Rng,
    cur: BTreeMap<String, Node>,
    pub h: History,
    names: u64,
    params: Params,
    fill: u64,
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn name_of(path: &str) -> &[u8] {
    path.rsplit('/').next().unwrap_or("").as_bytes()
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

impl<'a> Workload<'a> {
    pub fn new(fs: Arc<Filesystem>, dev: &'a CrashDevice, seed: u64, params: Params) -> Self {
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
            ev_end: dev.event_count(),
        });
        h.paths.insert("/".into(), vec![(0, Some(root.clone()))]);
        let mut ns = Namespace::new();
        ns.insert("/".into(), true);
        h.ns.push((0, Arc::new(ns)));
        let mut cur = BTreeMap::new();
        cur.insert(
            "/".to_string(),
            Node {
                ino: fs.root_ino(),
                st: root,
                last_any: 0,
                last_data: 0,
            },
        );
        Workload {
            fs,
            dev,
            rng: Rng::new(seed ^ 0x6372_6173_6874_6573),
            cur,
            h,
            names: 0,
            params,
            fill: seed << 20,
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

    fn op(&self) -> usize {
        self.h.ops.len() - 1
    }

    fn begin(&mut self, desc: String) -> usize {
        self.h.ops.push(OpRec {
            desc,
            ev_start: self.dev.event_count(),
            ev_end: usize::MAX,
        });
        self.op()
    }

    fn end(&mut self) {
        let i = self.op();
        self.h.ops[i].ev_end = self.dev.event_count();
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

    fn check<T>(&self, what: &str, r: rxfs::Result<T>) -> Result<T, Stop> {
        r.map_err(|e| match e {
            Error::NotSupported(m) => Stop::NotSupported(format!("{what}: {m}")),
            e => Stop::Unexpected(format!("op {} {what}: {e}", self.op())),
        })
    }

    fn expect_err<T>(
        &self,
        what: &str,
        r: rxfs::Result<T>,
        want: fn(&Error) -> bool,
    ) -> Result<(), Stop> {
        match r {
            Err(e) if want(&e) => Ok(()),
            Err(Error::NotSupported(m)) => Err(Stop::NotSupported(format!("{what}: {m}"))),
            Err(e) => Err(Stop::Unexpected(format!(
                "op {} {what}: wrong error {e}",
                self.op()
            ))),
            Ok(_) => Err(Stop::Unexpected(format!(
                "op {} {what}: succeeded",
                self.op()
            ))),
        }
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
        let pino = self.cur[&parent].ino;
        let (perm, kind) = if dir {
            (0o755, 0o040000)
        } else {
            (0o644, 0o100000)
        };
        let args = CreateArgs {
            mode: kind | perm,
            uid: 0,
            gid: 0,
            rdev: 0,
        };
        let op = self.begin(format!("{} {path}", if dir { "mkdir" } else { "create" }));
        let r = if dir {
            self.fs.mkdir(pino, name.as_bytes(), &args)
        } else {
            self.fs.create(pino, name.as_bytes(), &args)
        };
        self.end();
        let ip = self.check("create", r)?;
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
                ino: ip.ino,
                st: st.clone(),
                last_any: op,
                last_data: op,
            },
        );
        self.touch_parent(&parent, op);
        self.record(&path, Some(st));
        self.record_ns();
        Ok(())
    }

    fn touch_parent(&mut self, parent: &str, op: usize) {
        if let Some(n) = self.cur.get_mut(parent) {
            n.last_any = op;
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

    fn pick_file(&mut self) -> Option<(String, Ino, Arc<State>)> {
        let files = self.paths(false);
        let p = self.rng.pick(&files)?.clone();
        let n = &self.cur[&p];
        Some((p, n.ino, n.st.clone()))
    }

    fn write(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_file() else {
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
        self.begin(format!("write {kind} {path} off {off} len {len}"));
        let r = self.fs.write(ino, off as u64, &data);
        self.end();
        let n = self.check("write", r)?;
        if n != len {
            return Err(Stop::Unexpected(format!(
                "short write {n} of {len} to {path}"
            )));
        }
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
        Ok(())
    }

    fn truncate(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_file() else {
            return Ok(());
        };
        let size = st.content.len() as u64;
        let to = (match self.rng.below(4) {
            0 => 0,
            1 => size + self.rng.below(32 << 10),
            _ => self.rng.below(size + 1),
        })
        .min(self.params.max_file as u64);
        self.begin(format!("truncate {path} {size} -> {to}"));
        let r = self.fs.setattr(
            ino,
            &SetAttr {
                size: Some(to),
                ..Default::default()
            },
        );
        self.end();
        self.check("truncate", r)?;
        let mut c = (*st.content).clone();
        c.resize(to as usize, 0);
        let new = State {
            content: Arc::new(c),
            mtime: None,
            ..(*st).clone()
        };
        self.set_state(&path, new, true);
        Ok(())
    }

    /// A file or a directory (not the root).
    fn pick_any(&mut self) -> Option<(String, Ino, Arc<State>)> {
        let all: Vec<String> = self.cur.keys().filter(|p| *p != "/").cloned().collect();
        let p = self.rng.pick(&all)?.clone();
        let n = &self.cur[&p];
        Some((p, n.ino, n.st.clone()))
    }

    fn setattr(
        &mut self,
        desc: String,
        path: &str,
        ino: Ino,
        a: SetAttr,
        new: State,
    ) -> Result<(), Stop> {
        self.begin(desc);
        let r = self.fs.setattr(ino, &a);
        self.end();
        let ip = self.check("setattr", r)?;
        if (ip.core.mode as u32 & 0o7777) != new.perm
            || ip.core.uid != new.uid
            || ip.core.gid != new.gid
        {
            return Err(Stop::Unexpected(format!(
                "setattr of {path} returned mode {:o} uid {} gid {}, want {:o} {} {}",
                ip.core.mode, ip.core.uid, ip.core.gid, new.perm, new.uid, new.gid
            )));
        }
        self.set_state(path, new, false);
        Ok(())
    }

    fn chmod(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_any() else {
            return Ok(());
        };
        let perm = 0o600 | (self.rng.below(0o10000) as u32 & 0o7177);
        let a = SetAttr {
            mode: Some(perm),
            ..Default::default()
        };
        let new = State {
            perm,
            ..(*st).clone()
        };
        self.setattr(format!("chmod {path} {perm:o}"), &path, ino, a, new)
    }

    fn chown(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_any() else {
            return Ok(());
        };
        let (uid, gid) = (self.rng.below(70000) as u32, self.rng.below(70000) as u32);
        let a = SetAttr {
            uid: Some(uid),
            gid: Some(gid),
            ..Default::default()
        };
        // The kernel clears setuid/setgid on chown of a regular file; a
        // library setattr is not chown(2), so the bits are kept only if
        // rxfs keeps them: avoid them here.
        let new = State {
            uid,
            gid,
            ..(*st).clone()
        };
        if new.perm & 0o6000 != 0 {
            return Ok(());
        }
        self.setattr(format!("chown {path} {uid}:{gid}"), &path, ino, a, new)
    }

    fn utimens(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_any() else {
            return Ok(());
        };
        let ts = |r: &mut Rng| Timestamp {
            sec: 1_000_000_000 + r.below(1_000_000_000) as i64,
            nsec: r.below(1_000_000_000) as u32,
        };
        let (at, mt) = (ts(&mut self.rng), ts(&mut self.rng));
        let a = SetAttr {
            atime: Some(at),
            mtime: Some(mt),
            ..Default::default()
        };
        let new = State {
            mtime: Some((mt.sec, mt.nsec)),
            ..(*st).clone()
        };
        self.setattr(
            format!("utimens {path} {}.{}", mt.sec, mt.nsec),
            &path,
            ino,
            a,
            new,
        )
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
        let parent = parent_of(&path).to_string();
        let pino = self.cur[&parent].ino;
        let op = self.begin(format!("{} {path}", if dir { "rmdir" } else { "unlink" }));
        let r = if dir {
            self.fs.rmdir(pino, name_of(&path))
        } else {
            self.fs.unlink(pino, name_of(&path))
        };
        self.end();
        self.check(if dir { "rmdir" } else { "unlink" }, r)?;
        self.cur.remove(&path);
        self.touch_parent(&parent, op);
        self.record(&path, None);
        self.record_ns();
        Ok(())
    }

    fn fsync(&mut self, datasync: bool) -> Result<(), Stop> {
        let pick = if datasync {
            self.pick_file()
        } else {
            self.pick_any()
        };
        let Some((path, ino, _)) = pick else {
            return Ok(());
        };
        let op = self.begin(format!(
            "{} {path}",
            if datasync { "fdatasync" } else { "fsync" }
        ));
        let r = self.fs.fsync(ino, datasync);
        self.end();
        self.check("fsync", r)?;
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
        let op = self.begin("sync".into());
        let r = self.fs.sync();
        self.end();
        self.check("sync", r)?;
        self.durable_all(op);
        Ok(())
    }

    /// Everything as of `op` is durable (sync, unmount).
    pub fn durable_all(&mut self, op: usize) {
        self.h.durable.push(Durable {
            op,
            ev_end: self.h.ops[op].ev_end,
            ns_lo: op,
            scope: Scope::All,
        });
    }

    /// Requests that must fail and change nothing.
    fn bogus(&mut self) -> Result<(), Stop> {
        let args = CreateArgs {
            mode: 0o100644,
            uid: 0,
            gid: 0,
            rdev: 0,
        };
        match self.rng.below(3) {
            0 => {
                let Some((path, _, _)) = self.pick_any() else {
                    return Ok(());
                };
                let pino = self.cur[parent_of(&path)].ino;
                self.begin(format!("create over {path} (EEXIST)"));
                let r = self.fs.create(pino, name_of(&path), &args);
                self.end();
                self.expect_err("create over existing", r, |e| matches!(e, Error::Exists))
            }
            1 => {
                let dir = self.pick_dir();
                let pino = self.cur[&dir].ino;
                self.begin(format!("unlink {dir}/missing (ENOENT)"));
                let r = self.fs.unlink(pino, b"missing");
                self.end();
                self.expect_err("unlink missing", r, |e| matches!(e, Error::NotFound))
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
                let pino = self.cur[parent_of(&path)].ino;
                self.begin(format!("rmdir {path} (ENOTEMPTY)"));
                let r = self.fs.rmdir(pino, name_of(&path));
                self.end();
                self.expect_err("rmdir non-empty", r, |e| matches!(e, Error::NotEmpty))
            }
        }
    }

    /// Unmount as the last op (a durability point for everything).
    pub fn unmount(&mut self) -> Result<(), Stop> {
        let op = self.begin("unmount".into());
        let r = self.fs.unmount();
        self.end();
        self.check("unmount", r)?;
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
