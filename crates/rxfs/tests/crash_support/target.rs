//! Where a workload's operations go: the rxfs library on a crash device
//! ([`LibTarget`]), or a mounted tree through system calls
//! ([`super::posix::PosixTarget`], e.g. `rxfs mount` before a `kill -9`).
//! Operations name paths; each target maps them to its own handles.
//! Fallocate modes are Linux `FALLOC_FL_*` bits.

use std::collections::BTreeMap;
use std::sync::Arc;

use rxfs::bdev::CrashDevice;
use rxfs::bmap::data::SetAttr;
use rxfs::format::inode::Timestamp;
use rxfs::fs::ops_attr::XattrSet;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::ops_rename::RenameFlags;
use rxfs::types::Ino;
use rxfs::{Error, Filesystem};

/// How an operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TErr {
    Exists,
    NotFound,
    NotEmpty,
    /// ENODATA: no such xattr.
    NoAttr,
    /// EINVAL (e.g. a directory renamed into itself).
    Invalid,
    NotSupported(String),
    Other(String),
}

/// renameat2 flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameHow {
    Plain,
    NoReplace,
    Exchange,
}

/// setxattr flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XattrHow {
    Any,
    /// XATTR_CREATE
    Create,
    /// XATTR_REPLACE
    Replace,
}

/// One attribute change.
#[derive(Debug, Clone, Copy)]
pub enum Attr {
    Perm(u32),
    Owner(u32, u32),
    /// (atime, mtime) as (sec, nsec).
    Times((i64, u32), (i64, u32)),
}

pub trait Target {
    /// A clock that orders operations against crash points: the crash
    /// device's event count, or an operation counter.
    fn clock(&self) -> usize;
    /// Whether `sync` makes everything durable (FUSE gets no syncfs).
    fn has_sync(&self) -> bool {
        true
    }
    /// Permission bits the workload may set.
    fn perm_mask(&self) -> u32 {
        0o7777
    }
    fn create(&mut self, path: &str, dir: bool, perm: u32) -> Result<(), TErr>;
    fn write(&mut self, path: &str, off: u64, data: &[u8]) -> Result<(), TErr>;
    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TErr>;
    fn setattr(&mut self, path: &str, a: Attr) -> Result<(), TErr>;
    fn remove(&mut self, path: &str, dir: bool) -> Result<(), TErr>;
    fn rename(&mut self, from: &str, to: &str, how: RenameHow) -> Result<(), TErr>;
    /// A new name `to` for the file `from`.
    fn link(&mut self, from: &str, to: &str) -> Result<(), TErr>;
    fn setxattr(
        &mut self,
        path: &str,
        name: &[u8],
        value: &[u8],
        how: XattrHow,
    ) -> Result<(), TErr>;
    fn removexattr(&mut self, path: &str, name: &[u8]) -> Result<(), TErr>;
    fn fallocate(&mut self, path: &str, mode: i32, off: u64, len: u64) -> Result<(), TErr>;
    /// fsync or fdatasync of a file or a directory.
    fn fsync(&mut self, path: &str, datasync: bool) -> Result<(), TErr>;
    fn sync(&mut self) -> Result<(), TErr>;
    fn unmount(&mut self) -> Result<(), TErr>;
}

pub fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

pub fn name_of(path: &str) -> &[u8] {
    path.rsplit('/').next().unwrap_or("").as_bytes()
}

fn lib_err(e: Error) -> TErr {
    match e {
        Error::Exists => TErr::Exists,
        Error::NotFound => TErr::NotFound,
        Error::NotEmpty => TErr::NotEmpty,
        Error::NoAttr => TErr::NoAttr,
        Error::IntoItself => TErr::Invalid,
        Error::NotSupported(m) => TErr::NotSupported(m),
        e => TErr::Other(e.to_string()),
    }
}

/// The library API of a read-write [`Filesystem`] on a [`CrashDevice`].
pub struct LibTarget {
    pub fs: Arc<Filesystem>,
    pub dev: Arc<CrashDevice>,
    inos: BTreeMap<String, Ino>,
}

impl LibTarget {
    pub fn new(fs: Arc<Filesystem>, dev: Arc<CrashDevice>) -> Self {
        let mut inos = BTreeMap::new();
        inos.insert("/".to_string(), fs.root_ino());
        LibTarget { fs, dev, inos }
    }

    fn ino(&self, path: &str) -> Result<Ino, TErr> {
        self.inos
            .get(path)
            .copied()
            .ok_or_else(|| TErr::Other(format!("{path}: not in the target's map")))
    }

    /// `path` and every path below it, taken out of the map.
    fn take_subtree(&mut self, path: &str) -> Vec<(String, Ino)> {
        let below = format!("{path}/");
        let keys: Vec<String> = self
            .inos
            .keys()
            .filter(|k| *k == path || k.starts_with(&below))
            .cloned()
            .collect();
        keys.into_iter()
            .map(|k| {
                let i = self.inos.remove(&k).unwrap();
                (k, i)
            })
            .collect()
    }

    /// Put a subtree taken from under `from` back under `to`.
    fn put_subtree(&mut self, from: &str, to: &str, sub: Vec<(String, Ino)>) {
        for (k, i) in sub {
            self.inos.insert(format!("{to}{}", &k[from.len()..]), i);
        }
    }
}

impl Target for LibTarget {
    fn clock(&self) -> usize {
        self.dev.event_count()
    }

    fn create(&mut self, path: &str, dir: bool, perm: u32) -> Result<(), TErr> {
        let pino = self.ino(parent_of(path))?;
        let args = CreateArgs {
            mode: if dir { 0o040000 } else { 0o100000 } | perm,
            uid: 0,
            gid: 0,
            rdev: 0,
            umask: 0,
        };
        let name = name_of(path);
        let ip = if dir {
            self.fs.mkdir(pino, name, &args)
        } else {
            self.fs.create(pino, name, &args)
        }
        .map_err(lib_err)?;
        if ip.core.mode as u32 != args.mode || (!dir && ip.core.size != 0) {
            return Err(TErr::Other(format!(
                "created {path} has mode {:o} size {}",
                ip.core.mode, ip.core.size
            )));
        }
        self.inos.insert(path.to_string(), ip.ino);
        Ok(())
    }

    fn write(&mut self, path: &str, off: u64, data: &[u8]) -> Result<(), TErr> {
        let n = self.fs.write(self.ino(path)?, off, data).map_err(lib_err)?;
        if n != data.len() {
            return Err(TErr::Other(format!("short write {n} of {}", data.len())));
        }
        Ok(())
    }

    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TErr> {
        let a = SetAttr {
            size: Some(size),
            ..Default::default()
        };
        let ip = self.fs.setattr(self.ino(path)?, &a).map_err(lib_err)?;
        if ip.core.size != size {
            return Err(TErr::Other(format!("truncate left size {}", ip.core.size)));
        }
        Ok(())
    }

    fn setattr(&mut self, path: &str, a: Attr) -> Result<(), TErr> {
        let ts = |(sec, nsec)| Timestamp { sec, nsec };
        let mut s = SetAttr::default();
        match a {
            Attr::Perm(p) => s.mode = Some(p),
            Attr::Owner(u, g) => (s.uid, s.gid) = (Some(u), Some(g)),
            Attr::Times(at, mt) => (s.atime, s.mtime) = (Some(ts(at)), Some(ts(mt))),
        }
        let ip = self.fs.setattr(self.ino(path)?, &s).map_err(lib_err)?;
        let c = &ip.core;
        let ok = match a {
            Attr::Perm(p) => c.mode as u32 & 0o7777 == p,
            Attr::Owner(u, g) => c.uid == u && c.gid == g,
            Attr::Times(_, mt) => (c.mtime.sec, c.mtime.nsec) == mt,
        };
        if !ok {
            return Err(TErr::Other(format!(
                "setattr {a:?} returned mode {:o} owner {}:{} mtime {:?}",
                c.mode, c.uid, c.gid, c.mtime
            )));
        }
        Ok(())
    }

    fn remove(&mut self, path: &str, dir: bool) -> Result<(), TErr> {
        let pino = self.ino(parent_of(path))?;
        let r = if dir {
            self.fs.rmdir(pino, name_of(path))
        } else {
            self.fs.unlink(pino, name_of(path))
        };
        r.map_err(lib_err)?;
        self.inos.remove(path);
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str, how: RenameHow) -> Result<(), TErr> {
        let sp = self.ino(parent_of(from))?;
        let dp = self.ino(parent_of(to))?;
        let flags = RenameFlags {
            noreplace: how == RenameHow::NoReplace,
            exchange: how == RenameHow::Exchange,
            whiteout: None,
        };
        self.fs
            .rename(sp, name_of(from), dp, name_of(to), flags)
            .map_err(lib_err)?;
        let (s, t) = (self.ino(from)?, self.inos.get(to).copied());
        if t == Some(s) {
            // Two names of one inode: rename does nothing.
            return Ok(());
        }
        let src = self.take_subtree(from);
        let dst = self.take_subtree(to);
        self.put_subtree(from, to, src);
        if how == RenameHow::Exchange {
            self.put_subtree(to, from, dst);
        }
        Ok(())
    }

    fn link(&mut self, from: &str, to: &str) -> Result<(), TErr> {
        let ino = self.ino(from)?;
        let ip = self
            .fs
            .link(ino, self.ino(parent_of(to))?, name_of(to))
            .map_err(lib_err)?;
        if ip.ino != ino {
            return Err(TErr::Other(format!("link returned inode {:?}", ip.ino)));
        }
        self.inos.insert(to.to_string(), ino);
        Ok(())
    }

    fn setxattr(
        &mut self,
        path: &str,
        name: &[u8],
        value: &[u8],
        how: XattrHow,
    ) -> Result<(), TErr> {
        let how = match how {
            XattrHow::Any => XattrSet::Any,
            XattrHow::Create => XattrSet::Create,
            XattrHow::Replace => XattrSet::Replace,
        };
        self.fs
            .setxattr(self.ino(path)?, name, value, how)
            .map_err(lib_err)
    }

    fn removexattr(&mut self, path: &str, name: &[u8]) -> Result<(), TErr> {
        self.fs.removexattr(self.ino(path)?, name).map_err(lib_err)
    }

    fn fallocate(&mut self, path: &str, mode: i32, off: u64, len: u64) -> Result<(), TErr> {
        self.fs
            .fallocate(self.ino(path)?, mode, off, len)
            .map_err(lib_err)
    }

    fn fsync(&mut self, path: &str, datasync: bool) -> Result<(), TErr> {
        self.fs.fsync(self.ino(path)?, datasync).map_err(lib_err)
    }

    fn sync(&mut self) -> Result<(), TErr> {
        self.fs.sync().map_err(lib_err)
    }

    fn unmount(&mut self) -> Result<(), TErr> {
        self.fs.unmount().map_err(lib_err)
    }
}
