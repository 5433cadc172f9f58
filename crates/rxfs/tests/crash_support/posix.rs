//! A [`Target`] that makes the workload's changes with ordinary system
//! calls under a mount point (e.g. an `rxfs mount` that will be killed).
//!
//! Its clock counts calls to [`Target::clock`]: every op gets a start and
//! an end tick, so a crash "after everything" (the clock read once the
//! workload stopped) covers every op, and an op cut by the crash counts as
//! possibly done. FUSE passes no syncfs to the daemon, so there is no
//! `sync` (the workload fsyncs instead); permission bits stay within 0o777
//! (setuid/setgid handling on write and chown is the kernel's business).

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::target::{Attr, TErr, Target};

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
}

fn io(e: std::io::Error) -> TErr {
    match e.raw_os_error() {
        Some(libc::EEXIST) => TErr::Exists,
        Some(libc::ENOENT) => TErr::NotFound,
        Some(libc::ENOTEMPTY) => TErr::NotEmpty,
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

    fn fsync(&mut self, path: &str, datasync: bool) -> Result<(), TErr> {
        let f = File::open(self.p(path)).map_err(io)?;
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
