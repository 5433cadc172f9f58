//! Populate: copy a host directory tree into an open read-write
//! [`Filesystem`], the engine behind `rxfs mkfs --populate`, `rxfs
//! populate` and `rxfs put`.
//!
//! Everything goes through the normal transactional operations (`create`,
//! `mkdir`, `symlink`, `link`, `write`, `setattr`, `setxattr`), so the
//! result is what a kernel mount would have made with `cp -a`: modes
//! (setuid, setgid, sticky included), owners, access and modification
//! times, extended attributes of every namespace and POSIX ACLs, hard
//! links, symbolic links, devices, FIFOs, sockets, and holes (only the
//! source's data ranges, found with `SEEK_DATA`/`SEEK_HOLE`, are written;
//! the size is set last). Change times are "now", as with the kernel.
//!
//! Two passes: [`scan::scan`] lists and `lstat`s the tree (the totals for
//! progress), then the copy pass (`copy`) walks the list in order on one
//! thread, doing every namespace operation, and hands regular files'
//! data, attributes and times to a pool of worker threads.
//!
//! Invariants:
//! - a directory's attributes, ACLs (default ACLs included, so nothing
//!   created inside inherits them) and times are set after the last entry
//!   inside it was created; a file's after its data;
//! - a host inode with several links becomes one image inode with as many
//!   links: keyed by the host (st_dev, st_ino), its first path is copied
//!   and the others are `link`ed to it;
//! - no log force: the caller makes the result durable (`unmount` or
//!   `sync`) once at the end;
//! - the first error stops the copy (workers finish the chunk they are
//!   writing); it names the host path and what was being done. The image
//!   stays consistent, holding what was copied so far.

mod copy;
pub mod overrides;
pub mod scan;
pub mod source;
pub mod stream;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::fs::Filesystem;
use crate::types::Ino;

/// Where a populate puts the source.
#[derive(Debug, Clone)]
pub enum Dest {
    /// The source is a directory; its entries go into this existing
    /// directory, which takes the source directory's mode, owner, times and
    /// extended attributes (what `mkfs --populate` does to the root).
    Into(Ino),
    /// The source (of any kind) becomes the new entry `name` in `parent`.
    New { parent: Ino, name: Vec<u8> },
}

/// Tuning of a populate.
#[derive(Debug, Clone)]
pub struct Options {
    /// Threads copying file data; 0 copies it on the walking thread, in
    /// walk order, so that every allocation happens in one order
    /// (reproducible images; slower).
    pub threads: usize,
    /// Bytes read from the source and written to the image at a time.
    pub chunk_bytes: usize,
    /// Copy the source's access times (`cp -a`); false leaves each inode
    /// the time it was made (mkfs.xfs `-p` without `atime=1`).
    pub keep_atime: bool,
    /// Every inode's owner (uid, gid) instead of the source's: an
    /// unprivileged build of a tree meant to be root's.
    pub owner: Option<(u32, u32)>,
    /// Per-path owner, mode and xattrs ([`overrides`]); they win over
    /// `owner` and the source.
    pub overrides: Option<Arc<overrides::Overrides>>,
    /// Host inodes, as (st_dev, st_ino), left out of the copy (with
    /// everything below them): the image file itself when it lies inside
    /// the source tree.
    pub exclude: Vec<(u64, u64)>,
}

impl Default for Options {
    fn default() -> Self {
        // The walker thread (every namespace operation) keeps one CPU
        // busy; the data copiers get the others. More than 4 gain nothing
        // against the log and allocator locks.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        // A fixed clock means a reproducible build: one allocation order.
        let threads = if crate::clock::fixed().is_some() {
            0
        } else {
            (cores - 1).clamp(1, 4)
        };
        Options {
            threads,
            chunk_bytes: 4 << 20,
            keep_atime: true,
            owner: None,
            overrides: None,
            exclude: Vec::new(),
        }
    }
}

/// Where a populate stands; the totals come from the scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Paths done (every kind; each hard link counts).
    pub files_done: u64,
    pub files_total: u64,
    /// Regular-file bytes done (holes count as done when passed).
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What a finished populate did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub files: u64,
    pub bytes: u64,
    /// The inode the source root became (or filled, for [`Dest::Into`]).
    pub root: Ino,
}

/// Which side failed.
#[derive(Debug)]
pub enum Cause {
    /// Reading the host tree.
    Source(std::io::Error),
    /// Changing the image.
    Image(crate::Error),
}

/// A populate failure: the host path, the step, and the cause.
#[derive(Debug)]
pub struct PopulateError {
    pub path: PathBuf,
    pub op: &'static str,
    pub cause: Cause,
}

impl PopulateError {
    /// The image ran out of space (or inodes).
    pub fn is_no_space(&self) -> bool {
        matches!(self.cause, Cause::Image(crate::Error::NoSpace))
    }
}

impl fmt::Display for PopulateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Cause::Source(e) => {
                let s = e.to_string();
                let s = match s.rfind(" (os error ") {
                    Some(i) if s.ends_with(')') => s[..i].to_string(),
                    _ => s,
                };
                write!(f, "{}: {}: {s}", self.path.display(), self.op)
            }
            Cause::Image(e) => write!(f, "{}: {} in the image: {e}", self.path.display(), self.op),
        }
    }
}

impl std::error::Error for PopulateError {}

/// Copy the host tree at `src` into `fs` at `dest` (see the module doc).
/// `progress` is called from any of the copying threads, after each path
/// and each chunk of data.
pub fn populate(
    fs: &Filesystem,
    src: &Path,
    dest: Dest,
    opts: &Options,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Result<Summary, PopulateError> {
    if let Some(o) = &opts.overrides {
        o.check(src).map_err(|e| PopulateError {
            path: src.to_path_buf(),
            op: "apply the override file",
            cause: Cause::Source(std::io::Error::other(e.to_string())),
        })?;
    }
    // Into a directory: the source is a directory, possibly through a
    // symbolic link; as a new entry: the source itself, as `cp -a`.
    let tree = scan::scan(src, matches!(dest, Dest::Into(_)), &opts.exclude)?;
    if matches!(dest, Dest::Into(_)) && !tree.nodes[0].meta.is_dir() {
        return Err(PopulateError {
            path: src.to_path_buf(),
            op: "copy into a directory",
            cause: Cause::Source(std::io::Error::from_raw_os_error(libc::ENOTDIR)),
        });
    }
    copy::run(fs, &tree, dest, opts, progress)
}
