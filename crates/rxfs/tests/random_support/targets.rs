//! Where the random operations go: the rxfs library ([`LibTarget`], on a
//! file or a crash device) or a mounted tree through system calls
//! ([`PosixTarget`]: an `rxfs mount` FUSE mount, or the kernel's XFS).
//! Both answer Ok or the errno the call returned.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::model::{Ent, Errno, Kind, Op, XHow};
use rxfs::bmap::data::SetAttr;
use rxfs::fs::ops_attr::XattrSet;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::ops_rename::RenameFlags;
use rxfs::types::Ino;
use rxfs::Filesystem;

pub trait Target {
    fn exec(&mut self, op: &Op) -> Result<(), Errno>;
    /// Orders operations against crash points (a crash device's event
    /// count), or 0.
    fn clock(&self) -> usize {
        0
    }
}

/// The library API; directories are found by path from the root (so a
/// tree made by anyone can be continued).
pub struct LibTarget {
    pub fs: Arc<Filesystem>,
    pub dev: Option<Arc<rxfs::bdev::CrashDevice>>,
    handles: HashMap<u64, Ino>,
}

impl LibTarget {
    pub fn new(fs: Arc<Filesystem>, dev: Option<Arc<rxfs::bdev::CrashDevice>>) -> Self {
        LibTarget {
            fs,
            dev,
            handles: HashMap::new(),
        }
    }

    fn dir(&self, e: &Ent) -> rxfs::Result<Ino> {
        let mut d = self.fs.root_ino();
        for c in e.dpath.split('/').filter(|c| !c.is_empty()) {
            d = self.fs.lookup(&*self.fs.iget(d)?, c.as_bytes())?;
        }
        Ok(d)
    }

    fn ino(&self, e: &Ent) -> Result<Ino, rxfs::Error> {
        let d = self.fs.iget(self.dir(e)?)?;
        self.fs.lookup(&d, &e.name)
    }

    fn run(&mut self, op: &Op) -> rxfs::Result<()> {
        let fs = self.fs.clone();
        let args = |mode| CreateArgs {
            mode,
            uid: 0,
            gid: 0,
            rdev: 0,
            umask: 0,
        };
        match op {
            Op::Create { e, kind, .. } => {
                let d = self.dir(e)?;
                match kind {
                    Kind::File => fs.create(d, &e.name, &args(0o100644)).map(drop),
                    Kind::Fifo => fs.create(d, &e.name, &args(0o010644)).map(drop),
                    Kind::Dir => fs.mkdir(d, &e.name, &args(0o040755)).map(drop),
                    Kind::Symlink(t) => fs.symlink(d, &e.name, t, &args(0)).map(drop),
                }
            }
            Op::Link { src, dst } => {
                let s = self.ino(src)?;
                fs.link(s, self.dir(dst)?, &dst.name).map(drop)
            }
            Op::Unlink { e } => fs.unlink(self.dir(e)?, &e.name),
            Op::Rmdir { e } => fs.rmdir(self.dir(e)?, &e.name),
            Op::Rename {
                src,
                dst,
                noreplace,
                exchange,
            } => fs.rename(
                self.dir(src)?,
                &src.name,
                self.dir(dst)?,
                &dst.name,
                RenameFlags {
                    noreplace: *noreplace,
                    exchange: *exchange,
                    whiteout: None,
                },
            ),
            Op::Write { e, off, data } => {
                let n = fs.write(self.ino(e)?, *off, data)?;
                assert_eq!(n, data.len(), "short write");
                Ok(())
            }
            Op::Truncate { e, size } => {
                let a = SetAttr {
                    size: Some(*size),
                    ..Default::default()
                };
                fs.setattr(self.ino(e)?, &a).map(drop)
            }
            Op::SetXattr { e, key, val, how } => {
                let how = match how {
                    XHow::Any => XattrSet::Any,
                    XHow::Create => XattrSet::Create,
                    XHow::Replace => XattrSet::Replace,
                };
                fs.setxattr(self.ino(e)?, key, val, how)
            }
            Op::RemoveXattr { e, key } => fs.removexattr(self.ino(e)?, key),
            Op::Open { e, h } => {
                let i = self.ino(e)?;
                fs.inode_ref(i);
                self.handles.insert(*h, i);
                Ok(())
            }
            Op::Close { h } => {
                let i = self.handles.remove(h).expect("handle");
                fs.inode_unref(i, 1)
            }
            Op::HWrite { h, off, data } => fs.write(self.handles[h], *off, data).map(drop),
            Op::Scatter { e, offs, data } => {
                let i = self.ino(e)?;
                for &o in offs {
                    fs.write(i, o, data)?;
                }
                Ok(())
            }
            Op::Falloc {
                e, mode, off, len, ..
            } => fs.fallocate(self.ino(e)?, *mode, *off, *len),
            Op::Sync => fs.sync(),
        }
    }
}

impl Target for LibTarget {
    fn exec(&mut self, op: &Op) -> Result<(), Errno> {
        self.run(op).map_err(|e| e.errno())
    }
    fn clock(&self) -> usize {
        self.dev.as_ref().map_or(0, |d| d.event_count())
    }
}

/// System calls on a mounted tree.
pub struct PosixTarget {
    pub root: PathBuf,
    handles: HashMap<u64, File>,
}

fn os_err(e: std::io::Error) -> Errno {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn cstr(p: &std::path::Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn last() -> Errno {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

impl PosixTarget {
    pub fn new(root: PathBuf) -> Self {
        PosixTarget {
            root,
            handles: HashMap::new(),
        }
    }

    fn p(&self, e: &Ent) -> PathBuf {
        let mut p = self.root.clone();
        for c in e.dpath.split('/').filter(|c| !c.is_empty()) {
            p.push(c);
        }
        p.push(OsStr::from_bytes(&e.name));
        p
    }
}

impl Target for PosixTarget {
    fn exec(&mut self, op: &Op) -> Result<(), Errno> {
        match op {
            Op::Create { e, kind, .. } => {
                let p = self.p(e);
                match kind {
                    Kind::File => std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&p)
                        .map(drop)
                        .map_err(os_err),
                    Kind::Dir => std::fs::create_dir(&p).map_err(os_err),
                    Kind::Fifo => {
                        let r = unsafe { libc::mkfifo(cstr(&p).as_ptr(), 0o644) };
                        if r == 0 {
                            Ok(())
                        } else {
                            Err(last())
                        }
                    }
                    Kind::Symlink(t) => {
                        std::os::unix::fs::symlink(OsStr::from_bytes(t), &p).map_err(os_err)
                    }
                }
            }
            Op::Link { src, dst } => std::fs::hard_link(self.p(src), self.p(dst)).map_err(os_err),
            Op::Unlink { e } => std::fs::remove_file(self.p(e)).map_err(os_err),
            Op::Rmdir { e } => std::fs::remove_dir(self.p(e)).map_err(os_err),
            Op::Rename {
                src,
                dst,
                noreplace,
                exchange,
            } => {
                let mut flags = 0;
                if *noreplace {
                    flags |= libc::RENAME_NOREPLACE;
                }
                if *exchange {
                    flags |= libc::RENAME_EXCHANGE;
                }
                let (s, d) = (cstr(&self.p(src)), cstr(&self.p(dst)));
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        s.as_ptr(),
                        libc::AT_FDCWD,
                        d.as_ptr(),
                        flags,
                    )
                };
                if r == 0 {
                    Ok(())
                } else {
                    Err(last())
                }
            }
            Op::Write { e, off, data } => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(self.p(e))
                    .map_err(os_err)?;
                f.write_all_at(data, *off).map_err(os_err)
            }
            Op::Truncate { e, size } => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(self.p(e))
                    .map_err(os_err)?;
                f.set_len(*size).map_err(os_err)
            }
            Op::SetXattr { e, key, val, how } => {
                let flags = match how {
                    XHow::Any => 0,
                    XHow::Create => libc::XATTR_CREATE,
                    XHow::Replace => libc::XATTR_REPLACE,
                };
                let (p, k) = (cstr(&self.p(e)), CString::new(key.clone()).unwrap());
                let r = unsafe {
                    libc::lsetxattr(
                        p.as_ptr(),
                        k.as_ptr(),
                        val.as_ptr() as *const _,
                        val.len(),
                        flags,
                    )
                };
                if r == 0 {
                    Ok(())
                } else {
                    Err(last())
                }
            }
            Op::RemoveXattr { e, key } => {
                let (p, k) = (cstr(&self.p(e)), CString::new(key.clone()).unwrap());
                let r = unsafe { libc::lremovexattr(p.as_ptr(), k.as_ptr()) };
                if r == 0 {
                    Ok(())
                } else {
                    Err(last())
                }
            }
            Op::Open { e, h } => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(self.p(e))
                    .map_err(os_err)?;
                self.handles.insert(*h, f);
                Ok(())
            }
            Op::Close { h } => {
                self.handles.remove(h);
                Ok(())
            }
            Op::HWrite { h, off, data } => self.handles[h].write_all_at(data, *off).map_err(os_err),
            Op::Scatter { e, offs, data } => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(self.p(e))
                    .map_err(os_err)?;
                for &o in offs {
                    f.write_all_at(data, o).map_err(os_err)?;
                }
                Ok(())
            }
            Op::Falloc {
                e, mode, off, len, ..
            } => {
                use std::os::fd::AsRawFd;
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(self.p(e))
                    .map_err(os_err)?;
                let r = unsafe { libc::fallocate(f.as_raw_fd(), *mode, *off as i64, *len as i64) };
                if r == 0 {
                    Ok(())
                } else {
                    Err(last())
                }
            }
            Op::Sync => Ok(()),
        }
    }
}
