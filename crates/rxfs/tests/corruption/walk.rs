//! The full-tree walk the corruption tests run: every public read API of
//! [`Filesystem`] over every inode reachable from the root, with bounds of
//! its own so that a corrupted image cannot make the *walk* loop forever
//! (the library is what is under test).

use std::collections::HashSet;

use rxfs::dir::read::DirEntry;
use rxfs::types::{FileType, Ino};
use rxfs::{Error, Filesystem};

/// Inodes the walk visits at most.
const MAX_INODES: usize = 50_000;
/// Directory entries read per directory at most.
const MAX_DIR_ENTRIES: usize = 100_000;
/// readdir page size: the walk resumes from cookies to exercise seeking.
const READDIR_PAGE: usize = 97;
/// File data read per file at most (the walk's own bound, not the library's).
const MAX_FILE_BYTES: u64 = 8 << 20;
/// Directory depth at most.
const MAX_DEPTH: usize = 64;

/// What a walk saw. `errors` holds every error with where it happened.
#[derive(Debug, Default)]
pub struct Report {
    pub errors: Vec<(String, Error)>,
    /// Invariant violations that are failures whatever the image holds
    /// (e.g. readdir cookies that do not advance).
    pub violations: Vec<String>,
    pub inodes: usize,
    pub entries: usize,
    pub xattrs: usize,
    pub data_bytes: u64,
}

impl Report {
    fn err(&mut self, ctx: impl FnOnce() -> String, e: Error) {
        self.errors.push((ctx(), e));
    }

    pub fn has_corrupt(&self) -> bool {
        self.errors.iter().any(|(_, e)| e.is_corrupt())
    }

    /// Errors of a kind a corrupted image must never produce.
    pub fn unclean_errors(&self) -> Vec<String> {
        self.errors
            .iter()
            .filter(|(_, e)| !clean(e))
            .map(|(c, e)| format!("{c}: {e:?}"))
            .collect()
    }

    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} inodes, {} entries, {} xattrs, {} data bytes, {} errors",
            self.inodes,
            self.entries,
            self.xattrs,
            self.data_bytes,
            self.errors.len()
        );
        for (c, e) in self.errors.iter().take(8) {
            s += &format!("\n    {c}: {e}");
        }
        s
    }
}

/// Errors a corrupted image may legitimately cause.
fn clean(e: &Error) -> bool {
    match e {
        Error::Corrupt { .. }
        | Error::NotFound
        | Error::Invalid(_)
        | Error::NoAttr
        | Error::NotDir
        | Error::IsDir
        | Error::NotSymlink
        | Error::DirtyLog { .. }
        | Error::UnknownIncompat { .. } => true,
        Error::NotSupported(msg) => !msg.is_empty(),
        _ => false,
    }
}

/// Whether an error comes from a read API that is still a stub.
pub fn is_stub(e: &Error) -> bool {
    matches!(e, Error::NotSupported(_))
}

pub struct Walker<'a> {
    fs: &'a Filesystem,
    /// Inodes the kernel listed when it built the image, visited after the
    /// tree walk (so they are reached even when a directory is damaged).
    known: &'a [(String, u64)],
    read_data: bool,
    pub report: Report,
    visited: HashSet<Ino>,
}

impl<'a> Walker<'a> {
    pub fn new(fs: &'a Filesystem, known: &'a [(String, u64)], read_data: bool) -> Self {
        Walker {
            fs,
            known,
            read_data,
            report: Report::default(),
            visited: HashSet::new(),
        }
    }

    /// Walk everything: filesystem-wide metadata, then the tree.
    pub fn run(mut self) -> Report {
        if let Err(e) = self.fs.statfs() {
            self.report.err(|| "statfs".into(), e);
        }
        crate::agwalk::walk_ags(self.fs, &mut self.report);
        let root = self.fs.root_ino();
        self.visit(root, 0, "/".into());
        for (path, ino) in self.known {
            self.visit(Ino(*ino), 0, format!("{path}/"));
        }
        self.paths();
        self.report
    }

    fn visit(&mut self, ino: Ino, depth: usize, path: String) {
        if depth > MAX_DEPTH || self.visited.len() >= MAX_INODES || !self.visited.insert(ino) {
            return;
        }
        let ip = match self.fs.iget(ino) {
            Ok(ip) => ip,
            Err(e) => return self.report.err(|| format!("iget {} ({path})", ino.0), e),
        };
        self.report.inodes += 1;
        if self.report.inodes % 16 == 1 || ip.is_dir() {
            crate::agwalk::check_allocated(self.fs, ino, &mut self.report);
        }
        self.xattrs(&ip, &path);
        match ip.file_type() {
            Some(FileType::Directory) => self.dir(&ip, depth, &path),
            Some(FileType::Symlink) => {
                if let Err(e) = self.fs.readlink(&ip) {
                    self.report.err(|| format!("readlink {path}"), e);
                }
            }
            Some(FileType::Regular) if self.read_data => self.data(&ip, &path),
            _ => {}
        }
    }

    fn xattrs(&mut self, ip: &rxfs::inode::Inode, path: &str) {
        let names = match self.fs.listxattr(ip) {
            Ok(n) => n,
            Err(e) => return self.report.err(|| format!("listxattr {path}"), e),
        };
        for name in names.iter().take(10_000) {
            self.report.xattrs += 1;
            if let Err(e) = self.fs.getxattr(ip, name) {
                self.report.err(
                    || format!("getxattr {path} {}", String::from_utf8_lossy(name)),
                    e,
                );
            }
        }
        if let Err(e) = self.fs.getxattr(ip, b"user.no-such-attribute") {
            if !matches!(e, Error::NoAttr) {
                self.report.err(|| format!("getxattr {path} (absent)"), e);
            }
        }
    }

    fn dir(&mut self, ip: &rxfs::inode::Inode, depth: usize, path: &str) {
        let mut entries: Vec<DirEntry> = Vec::new();
        let mut cookie = 0u64;
        loop {
            let mut page = Vec::new();
            let r = self.fs.readdir(ip, cookie, &mut |e: &DirEntry| {
                page.push(e.clone());
                page.len() < READDIR_PAGE
            });
            let full = page.len() >= READDIR_PAGE;
            for e in &page {
                if e.next_cookie <= cookie {
                    self.report.violations.push(format!(
                        "readdir {path}: cookie {} after {cookie} does not advance",
                        e.next_cookie
                    ));
                    return;
                }
                cookie = e.next_cookie;
            }
            entries.extend(page);
            if let Err(e) = r {
                self.report.err(|| format!("readdir {path} at {cookie}"), e);
                break;
            }
            if !full || entries.len() >= MAX_DIR_ENTRIES {
                break;
            }
        }
        self.report.entries += entries.len();
        for e in &entries {
            match self.fs.lookup(ip, &e.name) {
                Ok(ino) if ino != e.ino => self.report.err(
                    || format!("lookup {path} {}", String::from_utf8_lossy(&e.name)),
                    Error::Invalid(format!("lookup gave {}, readdir {}", ino.0, e.ino.0)),
                ),
                Ok(_) => {}
                Err(err) => self.report.err(
                    || format!("lookup {path} {}", String::from_utf8_lossy(&e.name)),
                    err,
                ),
            }
        }
        if let Err(e) = self.fs.lookup(ip, b"no-such-name") {
            if !matches!(e, Error::NotFound) {
                self.report.err(|| format!("lookup {path} (absent)"), e);
            }
        }
        for e in entries {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let child = format!("{path}{}/", String::from_utf8_lossy(&e.name));
            self.visit(e.ino, depth + 1, child);
        }
    }

    fn data(&mut self, ip: &rxfs::inode::Inode, path: &str) {
        // Read the start, and one window at each extent (bounded).
        let mut offs: Vec<u64> = vec![0];
        let bs = self.fs.geo().blocksize as u64;
        for e in ip.data.extents().iter().take(64) {
            offs.push(e.off.0.saturating_mul(bs));
        }
        offs.push(ip.core.size.saturating_sub(5000));
        offs.sort_unstable();
        offs.dedup();
        let mut budget = MAX_FILE_BYTES;
        let mut buf = vec![0u8; 256 << 10];
        for off in offs {
            let want = (buf.len() as u64).min(budget) as usize;
            if want == 0 {
                break;
            }
            match self.fs.read_file(ip, off, &mut buf[..want]) {
                Ok(n) => {
                    if n > want {
                        self.report
                            .violations
                            .push(format!("read_file {path}: {n} bytes into {want}"));
                    }
                    self.report.data_bytes += n as u64;
                    budget -= want as u64;
                }
                Err(e) => return self.report.err(|| format!("read {path} at {off}"), e),
            }
        }
    }

    /// Path resolution through symlinks and "..".
    fn paths(&mut self) {
        for p in [
            &b"/sf/link_up"[..],
            b"/sf/../node/e0500",
            b"/xattr/remote",
            b"/link_short",
            b"/many/m00000",
        ] {
            if let Err(e) = self.fs.resolve(p) {
                self.report
                    .err(|| format!("resolve {}", String::from_utf8_lossy(p)), e);
            }
        }
    }
}
