//! `rxfs get`: copy a file or a tree out of an image.
//!
//! Preserves what `cp -a` would and a little more: modes (set after the
//! owner, since chown clears setuid/setgid), owners (only when running as
//! root), atime/mtime with nanoseconds (directories' times are set after
//! their contents, by a post-order pass), extended attributes including
//! POSIX ACLs (`system.posix_acl_*` values are in the Linux xattr format,
//! so they are set as they come), symlinks, hard links (a second path to an
//! inode already copied becomes a link), device files, fifos and sockets
//! (mknod), and holes (unmapped and unwritten ranges are skipped, the file
//! is then extended to its size, so holes stay holes).
//!
//! The walk uses an explicit stack (no recursion depth driven by the
//! image) and refuses to enter a directory twice (a corrupt image could
//! link a directory into its own subtree). Errors on single entries are
//! reported and the walk goes on; the exit code is 1 if any happened.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rxfs::inode::Inode;
use rxfs::types::{FileBlock, FileType};
use rxfs::Filesystem;

use crate::cli_error::io_message;
use crate::opts::ImageArgs;
use crate::sys;
use crate::{CliError, CliResult};

const CHUNK_BYTES: usize = 1 << 20;

/// Copy a file or directory tree out of the image.
///
/// Preserves modes, owners (as root), times with nanoseconds, xattrs and ACLs,
/// symlinks, hard links, device files and sparse holes.
///
/// If DEST is an existing directory the copy is made inside it under the
/// source's name (the image root "/" copies its contents into DEST);
/// otherwise DEST is created. Existing files are never overwritten.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device.
    pub image: PathBuf,
    /// Absolute path inside the image.
    pub path: PathBuf,
    /// Where to write the copy.
    pub dest: PathBuf,
    /// Print each path as it is copied.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    #[command(flatten)]
    pub img: ImageArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let (fs, ip) = a.img.open_path(&a.image, &a.path)?;
    let is_root = ip.ino == fs.root_ino();
    let dest = match std::fs::symlink_metadata(&a.dest) {
        Ok(m) if m.is_dir() => {
            if is_root {
                a.dest.clone()
            } else {
                let name = a.path.file_name().unwrap_or(OsStr::new("root"));
                a.dest.join(name)
            }
        }
        Ok(_) => {
            return Err(CliError::new(format!(
                "{}: exists and is not a directory",
                a.dest.display()
            )))
        }
        Err(_) => a.dest.clone(),
    };
    let mut c = Copier {
        fs: &fs,
        as_root: sys::is_root(),
        verbose: a.verbose,
        links: HashMap::new(),
        dirs_seen: HashSet::new(),
        errors: 0,
    };
    c.copy_tree(ip, dest, is_root);
    if c.errors > 0 {
        return Err(CliError::new(format!(
            "{} error(s) while copying {}",
            c.errors,
            a.path.display()
        )));
    }
    Ok(())
}

enum Work {
    /// Copy the inode to the path.
    Copy(Arc<Inode>, PathBuf),
    /// After a directory's contents: owner, mode, xattrs, times.
    Finish(Arc<Inode>, PathBuf),
}

struct Copier<'a> {
    fs: &'a Filesystem,
    as_root: bool,
    verbose: bool,
    /// Inodes with nlink > 1 already copied, for hard links.
    links: HashMap<u64, PathBuf>,
    dirs_seen: HashSet<u64>,
    errors: u64,
}

impl Copier<'_> {
    fn report(&mut self, path: &Path, msg: impl std::fmt::Display) {
        eprintln!("rxfs: {}: {msg}", path.display());
        self.errors += 1;
    }

    fn copy_tree(&mut self, top: Arc<Inode>, dest: PathBuf, dest_may_exist: bool) {
        let mut stack = vec![Work::Copy(top, dest)];
        let mut first = dest_may_exist;
        while let Some(w) = stack.pop() {
            match w {
                Work::Copy(ip, path) => {
                    let may_exist = std::mem::take(&mut first);
                    if self.verbose {
                        println!("{}", path.display());
                    }
                    if ip.is_dir() {
                        self.enter_dir(ip, path, may_exist, &mut stack);
                    } else if let Err(e) = self.copy_leaf(&ip, &path) {
                        self.report(&path, e);
                    }
                }
                Work::Finish(ip, path) => {
                    if let Err(e) = self.finish(&ip, &path) {
                        self.report(&path, e);
                    }
                }
            }
        }
    }

    fn enter_dir(&mut self, ip: Arc<Inode>, path: PathBuf, may_exist: bool, stack: &mut Vec<Work>) {
        if !self.dirs_seen.insert(ip.ino.0) {
            self.report(&path, "directory reached twice (corrupt image?): skipped");
            return;
        }
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if may_exist && e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return self.report(&path, io_message(&e)),
        }
        // Owner-writable while we fill it; the real mode comes in Finish.
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700));
        let mut children = Vec::new();
        let r = self.fs.readdir(&ip, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                children.push((e.name.clone(), e.ino));
            }
            true
        });
        if let Err(e) = r {
            self.report(&path, e);
        }
        stack.push(Work::Finish(ip, path.clone()));
        // Reverse so the pop order is the directory order.
        for (name, ino) in children.into_iter().rev() {
            let child_path = path.join(OsStr::from_bytes(&name));
            match self.fs.iget(ino) {
                Ok(cip) => stack.push(Work::Copy(cip, child_path)),
                Err(e) => self.report(&child_path, e),
            }
        }
    }

    /// Everything but directories.
    fn copy_leaf(&mut self, ip: &Inode, path: &Path) -> Result<(), String> {
        let c = &ip.core;
        if c.nlink > 1 {
            if let Some(first) = self.links.get(&ip.ino.0) {
                return std::fs::hard_link(first, path)
                    .map_err(|e| format!("link to {}: {e}", first.display()));
            }
        }
        let ft = ip.file_type().ok_or("unknown file type")?;
        match ft {
            FileType::Regular => self.copy_file(ip, path)?,
            FileType::Symlink => {
                let t = self.fs.readlink(ip).map_err(|e| e.to_string())?;
                std::os::unix::fs::symlink(OsStr::from_bytes(&t), path)
                    .map_err(|e| io_message(&e))?;
            }
            FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket => {
                let (ma, mi) = crate::stat_view::rdev(ip).unwrap_or((0, 0));
                let kind = c.mode as u32 & libc::S_IFMT;
                sys::mknod(path, kind | 0o600, ma, mi).map_err(|e| io_message(&e))?;
            }
            FileType::Directory => unreachable!("directories are entered, not copied"),
        }
        if c.nlink > 1 {
            self.links.insert(ip.ino.0, path.to_path_buf());
        }
        self.finish(ip, path)
    }

    /// Write the data ranges that are mapped and written; skip holes and
    /// unwritten extents, then set the size.
    fn copy_file(&mut self, ip: &Inode, path: &Path) -> Result<(), String> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| io_message(&e))?;
        let size = ip.core.size;
        let blocklog = self.fs.geo().blocklog;
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut off = 0u64;
        while off < size {
            let fb = off >> blocklog;
            let (ext, run) = ip.data.map(FileBlock(fb));
            if run == 0 {
                return Err(format!("empty mapping at file block {fb}"));
            }
            let end = fb
                .saturating_add(run)
                .saturating_mul(1 << blocklog)
                .min(size);
            if matches!(ext, Some(e) if !e.unwritten) {
                let mut pos = off;
                while pos < end {
                    let want = ((end - pos) as usize).min(CHUNK_BYTES);
                    let n = self
                        .fs
                        .read_file(ip, pos, &mut buf[..want])
                        .map_err(|e| e.to_string())?;
                    if n == 0 {
                        return Err(format!("short read at {pos}"));
                    }
                    f.write_all_at(&buf[..n], pos).map_err(|e| io_message(&e))?;
                    pos += n as u64;
                }
            }
            off = end;
        }
        f.set_len(size).map_err(|e| io_message(&e))?;
        Ok(())
    }

    /// Owner, mode, xattrs, then times (last: the others change ctime only,
    /// but xattrs on some filesystems touch mtime).
    fn finish(&mut self, ip: &Inode, path: &Path) -> Result<(), String> {
        let c = &ip.core;
        let symlink = ip.file_type() == Some(FileType::Symlink);
        let mut errs = Vec::new();
        if self.as_root {
            if let Err(e) = sys::lchown(path, c.uid, c.gid) {
                errs.push(format!("chown: {}", io_message(&e)));
            }
        }
        if !symlink {
            let perm = std::fs::Permissions::from_mode((c.mode & 0o7777) as u32);
            if let Err(e) = std::fs::set_permissions(path, perm) {
                errs.push(format!("chmod: {}", io_message(&e)));
            }
        }
        match self.fs.listxattr(ip) {
            Ok(names) => {
                for n in names {
                    if !self.as_root && n.starts_with(b"trusted.") {
                        continue;
                    }
                    let shown = crate::text::decode_name(&n);
                    match self.fs.getxattr(ip, &n) {
                        Ok(v) => {
                            if let Err(e) = sys::lsetxattr(path, &n, &v) {
                                errs.push(format!("set xattr {shown}: {}", io_message(&e)));
                            }
                        }
                        Err(e) => errs.push(format!("xattr {shown}: {e}")),
                    }
                }
            }
            Err(e) => errs.push(format!("listxattr: {e}")),
        }
        let at = (c.atime.sec, c.atime.nsec);
        let mt = (c.mtime.sec, c.mtime.nsec);
        if let Err(e) = sys::lutimens(path, at, mt) {
            errs.push(format!("times: {}", io_message(&e)));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}
