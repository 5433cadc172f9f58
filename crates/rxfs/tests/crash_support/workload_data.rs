//! The workload's data and xattr operations: write (new, append,
//! overwrite, sparse, block-aligned, whole blocks inside EOF), truncate, fallocate (allocate with
//! and without KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE with and
//! without KEEP_SIZE) and xattr set/replace/remove ("user." names, values
//! mostly up to 300 bytes, some up to 2 KiB so the attr fork changes
//! form, a few up to 4 KiB: remote values), with their effect on the
//! model.

use std::sync::Arc;

use libc::{FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE};

use super::model::State;
use super::target::{TErr, XattrHow};
use super::workload::{fill_bytes, Stop, Workload};

/// Xattr names per inode the workload makes (short ones; two more are
/// long).
const XATTR_NAMES: u64 = 10;

/// The xattr name number `k`.
fn xattr_name(k: u64) -> Vec<u8> {
    if k < XATTR_NAMES {
        format!("user.x{k}").into_bytes()
    } else {
        format!("user.long{k}-{}", "n".repeat(150)).into_bytes()
    }
}

impl Workload {
    pub(super) fn write(&mut self) -> Result<(), Stop> {
        let Some((path, _, _)) = self.pick_file() else {
            return Ok(());
        };
        self.write_path(&path)
    }

    /// One write of random kind and length to the file `path`.
    pub(super) fn write_path(&mut self, path: &str) -> Result<(), Stop> {
        let ino = self.ns[path];
        let st = self.nodes[&ino].st.clone();
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
        // Half of the aligned writes are whole blocks inside EOF: pure
        // overwrites, which rxfs writes in place without a transaction
        // (but a timestamp per tick).
        if kind == "aligned" && off < size && self.rng.below(2) == 0 {
            len = len.div_ceil(4096).max(1) * 4096;
            len = len.min((size - off) & !4095);
            if len == 0 {
                len = 1;
            }
        }
        if off + len > self.params.max_file {
            if off >= self.params.max_file {
                return Ok(());
            }
            len = self.params.max_file - off;
        }
        self.fill += 1;
        let data = fill_bytes(self.fill, len);
        let desc = format!("write {kind} {path} off {off} len {len}");
        let (_, stop) = self.exec(desc, |t| t.write(path, off as u64, &data))?;
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
        self.set_state(ino, new, true);
        Self::done(stop)
    }

    pub(super) fn truncate(&mut self) -> Result<(), Stop> {
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
        let desc = format!("truncate {path} {size} -> {to}");
        let (_, stop) = self.exec(desc, |t| t.truncate(&path, to))?;
        let mut c = (*st.content).clone();
        c.resize(to as usize, 0);
        let new = State {
            content: Arc::new(c),
            mtime: None,
            ..(*st).clone()
        };
        self.set_state(ino, new, true);
        Self::done(stop)
    }

    /// fallocate: the range reads as zeros where punched or zeroed; the
    /// size grows to the range's end only without KEEP_SIZE.
    pub(super) fn fallocate(&mut self) -> Result<(), Stop> {
        let Some((path, ino, st)) = self.pick_file() else {
            return Ok(());
        };
        let modes = [
            ("alloc", 0),
            ("alloc keep-size", FALLOC_FL_KEEP_SIZE),
            ("punch", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE),
            ("zero", FALLOC_FL_ZERO_RANGE),
            ("zero keep-size", FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE),
        ];
        let (name, mode) = modes[self.rng.below(modes.len() as u64) as usize];
        let key = format!("fallocate {name}");
        if self.unsupported.contains(&key) {
            return Ok(());
        }
        let size = st.content.len() as u64;
        let max = self.params.max_file as u64;
        let mut off = match self.rng.below(10) {
            0..=4 => self.rng.below(size.max(1)),
            5..=7 => self.rng.below(size.max(1)) & !4095,
            _ => size + self.rng.below(32 << 10),
        };
        let mut len = 1 + self.rng.below(64 << 10);
        if self.rng.below(3) == 0 {
            off &= !4095;
            len = (len + 4095) & !4095;
        }
        if off >= max {
            return Ok(());
        }
        len = len.min(max - off);
        let desc = format!("{key} {path} off {off} len {len}");
        let mut refused = false;
        let (_, stop) = self.exec(desc, |t| match t.fallocate(&path, mode, off, len) {
            Err(TErr::NotSupported(_)) => {
                refused = true;
                Ok(())
            }
            r => r,
        })?;
        if refused {
            self.unsupported.insert(key);
            return Ok(());
        }
        let (lo, end) = (off as usize, (off + len) as usize);
        let mut c = (*st.content).clone();
        if mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
            let hi = end.min(c.len());
            if lo < hi {
                c[lo..hi].fill(0);
            }
        }
        if mode & FALLOC_FL_KEEP_SIZE == 0 && end > c.len() {
            c.resize(end, 0);
        }
        let new = State {
            content: Arc::new(c),
            mtime: None,
            ..(*st).clone()
        };
        self.set_state(ino, new, true);
        Self::done(stop)
    }

    /// Set, replace or remove a user xattr of a file or directory.
    pub(super) fn xattr(&mut self) -> Result<(), Stop> {
        // Half of the time an inode that has some already (replace,
        // remove, more forms).
        let with: Vec<String> = self
            .ns
            .iter()
            .filter(|(p, i)| *p != "/" && !self.nodes[*i].st.xattrs.is_empty())
            .map(|(p, _)| p.clone())
            .collect();
        let pick = match self.rng.below(2) {
            0 => self.rng.pick(&with).cloned(),
            _ => None,
        };
        let Some((path, ino, st)) = pick
            .map(|p| {
                let ino = self.ns[&p];
                (p, ino, self.nodes[&ino].st.clone())
            })
            .or_else(|| self.pick_any())
        else {
            return Ok(());
        };
        let have: Vec<Vec<u8>> = st.xattrs.keys().cloned().collect();
        let mut x = (*st.xattrs).clone();
        let remove = !have.is_empty() && (self.rng.below(3) == 0 || have.len() >= 8);
        let (desc, name, value, how) = if remove {
            let name = self.rng.pick(&have).unwrap().clone();
            x.remove(&name);
            let desc = format!("removexattr {path} {}", String::from_utf8_lossy(&name));
            (desc, name, None, XattrHow::Any)
        } else {
            // Half of the time a name it has (a replace).
            let name = match self.rng.below(2) {
                0 if !have.is_empty() => self.rng.pick(&have).unwrap().clone(),
                _ => xattr_name(self.rng.below(XATTR_NAMES + 2)),
            };
            let len = match self.rng.below(20) {
                0..=14 => self.rng.below(301),
                15..=18 => 301 + self.rng.below(1748),
                _ => 2049 + self.rng.below(2048),
            } as usize;
            self.fill += 1;
            let value = fill_bytes(self.fill, len);
            let how = match (x.contains_key(&name), self.rng.below(2)) {
                (true, 0) => XattrHow::Replace,
                (false, 0) => XattrHow::Create,
                _ => XattrHow::Any,
            };
            x.insert(name.clone(), value.clone());
            let desc = format!(
                "setxattr {how:?} {path} {} len {len}",
                String::from_utf8_lossy(&name)
            );
            (desc, name, Some(value), how)
        };
        let (_, stop) = self.exec(desc, |t| match &value {
            Some(v) => t.setxattr(&path, &name, v, how),
            None => t.removexattr(&path, &name),
        })?;
        let new = State {
            xattrs: Arc::new(x),
            ..(*st).clone()
        };
        self.set_state(ino, new, false);
        Self::done(stop)
    }

    /// An xattr request that must fail: remove or XATTR_REPLACE of an
    /// absent name (ENODATA), XATTR_CREATE of a present one (EEXIST).
    pub(super) fn bogus_xattr(&mut self) -> Result<(), Stop> {
        let Some((path, _, st)) = self.pick_any() else {
            return Ok(());
        };
        let name = xattr_name(self.rng.below(XATTR_NAMES + 2));
        let n = String::from_utf8_lossy(&name).into_owned();
        if st.xattrs.contains_key(&name) {
            return self.expect_err(
                format!("setxattr Create {path} {n} (EEXIST)"),
                &[TErr::Exists],
                |t| t.setxattr(&path, &name, b"v", XattrHow::Create),
            );
        }
        if self.rng.below(2) == 0 {
            self.expect_err(
                format!("removexattr {path} {n} (ENODATA)"),
                &[TErr::NoAttr],
                |t| t.removexattr(&path, &name),
            )
        } else {
            self.expect_err(
                format!("setxattr Replace {path} {n} (ENODATA)"),
                &[TErr::NoAttr],
                |t| t.setxattr(&path, &name, b"v", XattrHow::Replace),
            )
        }
    }
}
