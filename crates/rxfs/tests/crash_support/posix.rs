//! A [`Target`] that makes the workload's changes with ordinary system
//! calls under a mount point (e.g. an `rxfs mount` that will be killed).
//!
//! Its clock counts calls to [`Target::clock`]: every op gets a start and
//! an end tick, so a crash "after everything" (the clock read once the
//! workload stopped) covers every op, and an op cut by the crash counts as
//! possibly done. FUSE passes no syncfs to the daemon, so there is no
//! `sync` (the workload fsyncs instead); permission bits stay within 0o777
//! (setuid/setgid handling on write and chown is the kernel's business).
//! Renames go through renameat2 (flags NOREPLACE, EXCHANGE), xattrs through
//! lsetxattr/lremovexattr, fallocate through fallocate(2) on a file opened
//! for writing (a mode the mount refuses with EOPNOTSUPP is reported as
//! not supported, and the workload leaves it out), and a directory is
//! fsynced through an O_RDONLY|O_DIRECTORY descriptor.

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::target::{Attr, RenameHow, TErr, Target, XattrHow};

pub struct PosixTarget {
    root: PathBuf,
    tick: Arc<AtomicUsize>,
}

impl PosixTarget {
    pub fn new(root: &Path) -> Self {
        PosixTarget {
            root: root.to_path_buf(),
            tick: Arc::new(AtomicUsize::new(1)),
        }
    }

    /// The clock, to watch the workload's progress from another thread
    /// (two ticks per op).
    pub fn ticks(&self) -> Arc<AtomicUsize> {
        self.tick.clone()
    }

    fn p(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    fn c(&self, path: &str) -> std::ffi::CString {
        std::ffi::CString::new(self.p(path).into_os_string().into_encoded_bytes()).unwrap()
    }
}

/// A system call's return value: 0 (or more) is success.
fn sys(r: i64) -> Result<(), TErr> {
    if r >= 0 {
        Ok(())
    } else {
        Err(io(std::io::Error::last_os_error()))
    }
}

fn io(e: std::io::Error) -> TErr {
    match e.raw_os_error() {
        Some(libc::EEXIST) => TErr::Exists,
        Some(libc::ENOENT) => TErr::NotFound,
        Some(libc::ENOTEMPTY) => TErr::NotEmpty,
        Some(libc::ENODATA) => TErr::NoAttr,
        Some(libc::EINVAL) => TErr::Invalid,
        Some(libc::EOPNOTSUPP) => TErr::NotSupported(e.to_string()),
        _ => TErr::Other(e.to_string()),
    }
}

impl Target for PosixTarget {
    fn clock(&self) -> usize {
        self.tick.fetch_add(1, Ordering::SeqCst)
    }

    fn has_sync(&self) -> bool {
        false
    }

    fn perm_mask(&self) -> u32 {
        0o777
    }

    fn create(&mut self, path: &str, dir: bool, perm: u32) -> Result<(), TErr> {
        let p = self.p(path);
        if dir {
            DirBuilder::new().mode(perm).create(&p).map_err(io)
        } else {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(perm)
                .open(&p)
                .map(drop)
                .map_err(io)
        }
    }

    fn write(&mut self, path: &str, off: u64, data: &[u8]) -> Result<(), TErr> {
        let f = OpenOptions::new()
            .write(true)
            .open(self.p(path))
            .map_err(io)?;
        f.write_all_at(data, off).map_err(io)
    }

    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TErr> {
        let f = OpenOptions::new()
            .write(true)
            .open(self.p(path))
            .map_err(io)?;
        f.set_len(size).map_err(io)
    }

    fn setattr(&mut self, path: &str, a: Attr) -> Result<(), TErr> {
        let p = self.p(path);
        match a {
            Attr::Perm(m) => {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m)).map_err(io)
            }
            Attr::Owner(u, g) => std::os::unix::fs::lchown(&p, Some(u), Some(g)).map_err(io),
            Attr::Times(at, mt) => {
                let ts = |(s, n): (i64, u32)| libc::timespec {
                    tv_sec: s,
                    tv_nsec: n as i64,
                };
                let t = [ts(at), ts(mt)];
                let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: a NUL-terminated path and two timespecs.
                let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), t.as_ptr(), 0) };
                if r == 0 {
                    Ok(())
                } else {
                    Err(io(std::io::Error::last_os_error()))
                }
            }
        }
    }

    fn remove(&mut self, path: &str, dir: bool) -> Result<(), TErr> {
        let p = self.p(path);
        if dir {
            std::fs::remove_dir(p).map_err(io)
        } else {
            std::fs::remove_file(p).map_err(io)
        }
    }

    fn rename(&mut self, from: &str, to: &str, how: RenameHow) -> Result<(), TErr> {
        let flags = match how {
            RenameHow::Plain => 0,
            RenameHow::NoReplace => libc::RENAME_NOREPLACE,
            RenameHow::Exchange => libc::RENAME_EXCHANGE,
        };
        let (f, t) = (self.c(from), self.c(to));
        // SAFETY: two NUL-terminated paths.
        let r = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                f.as_ptr(),
                libc::AT_FDCWD,
                t.as_ptr(),
                flags,
            )
        };
        sys(r as i64)
    }

    fn link(&mut self, from: &str, to: &str) -> Result<(), TErr> {
        std::fs::hard_link(self.p(from), self.p(to)).map_err(io)
    }

    fn setxattr(
        &mut self,
        path: &str,
        name: &[u8],
        value: &[u8],
        how: XattrHow,
    ) -> Result<(), TErr> {
        let flags = match how {
            XattrHow::Any => 0,
            XattrHow::Create => libc::XATTR_CREATE,
            XattrHow::Replace => libc::XATTR_REPLACE,
        };
        let (p, n) = (self.c(path), std::ffi::CString::new(name).unwrap());
        // SAFETY: NUL-terminated path and name; value.len() bytes of value.
        let r = unsafe {
            libc::lsetxattr(
                p.as_ptr(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
            )
        };
        sys(r as i64)
    }

    fn removexattr(&mut self, path: &str, name: &[u8]) -> Result<(), TErr> {
        let (p, n) = (self.c(path), std::ffi::CString::new(name).unwrap());
        // SAFETY: NUL-terminated path and name.
        sys(unsafe { libc::lremovexattr(p.as_ptr(), n.as_ptr()) } as i64)
    }

    fn fallocate(&mut self, path: &str, mode: i32, off: u64, len: u64) -> Result<(), TErr> {
        let f = OpenOptions::new()
            .write(true)
            .open(self.p(path))
            .map_err(io)?;
        use std::os::fd::AsRawFd;
        // SAFETY: an open file descriptor.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as i64, len as i64) };
        sys(r as i64)
    }

    fn fsync(&mut self, path: &str, datasync: bool) -> Result<(), TErr> {
        let mut o = OpenOptions::new();
        o.read(true);
        if std::fs::symlink_metadata(self.p(path)).is_ok_and(|m| m.is_dir()) {
            o.custom_flags(libc::O_DIRECTORY);
        }
        let f = o.open(self.p(path)).map_err(io)?;
        if datasync {
            f.sync_data().map_err(io)
        } else {
            f.sync_all().map_err(io)
        }
    }

    fn sync(&mut self) -> Result<(), TErr> {
        Err(TErr::NotSupported("sync through a mount point".into()))
    }

    fn unmount(&mut self) -> Result<(), TErr> {
        Err(TErr::NotSupported("unmount through a mount point".into()))
    }
}
