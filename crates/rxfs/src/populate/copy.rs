//! The copy pass of a populate (see the module doc of [`super`]).
//!
//! One walker thread goes through the scanned list in order and does every
//! namespace operation (so directory entries are made in one order, and a
//! directory is finished exactly when its subtree has been passed); regular
//! files, once created, go to worker threads over a bounded channel, which
//! copy their data ranges, then set attributes and times. Workers touch
//! only the inodes handed to them; the per-inode locks of the library keep
//! a worker's writes and the walker's `link` of the same inode apart.
//!
//! The first error is kept, every thread stops at its next step, and it is
//! returned once all have joined.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

use super::overrides::Settings;
use super::scan::{Node, Tree};
use super::{source, stream, Cause, Dest, Options, PopulateError, Progress, Summary};
use crate::bmap::data::SetAttr;
use crate::format::inode::Timestamp;
use crate::fs::ops_ns::CreateArgs;
use crate::fs::Filesystem;
use crate::types::Ino;

const S_IFMT: u32 = libc::S_IFMT;

struct Copier<'a> {
    fs: &'a Filesystem,
    tree: &'a Tree,
    opts: &'a Options,
    progress: &'a (dyn Fn(&Progress) + Sync),
    files_done: AtomicU64,
    bytes_done: AtomicU64,
    abort: AtomicBool,
    first_err: Mutex<Option<PopulateError>>,
}

type Res<T> = Result<T, PopulateError>;

fn image_err<'p>(
    path: &'p Path,
    op: &'static str,
) -> impl FnOnce(crate::Error) -> PopulateError + 'p {
    move |e| PopulateError {
        path: path.to_path_buf(),
        op,
        cause: Cause::Image(e),
    }
}

fn source_err<'p>(
    path: &'p Path,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> PopulateError + 'p {
    move |e| PopulateError {
        path: path.to_path_buf(),
        op,
        cause: Cause::Source(e),
    }
}

/// Run the copy pass over `tree`.
pub(super) fn run(
    fs: &Filesystem,
    tree: &Tree,
    dest: Dest,
    opts: &Options,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Res<Summary> {
    let c = Copier {
        fs,
        tree,
        opts,
        progress,
        files_done: AtomicU64::new(0),
        bytes_done: AtomicU64::new(0),
        abort: AtomicBool::new(false),
        first_err: Mutex::new(None),
    };
    // threads == 0: data copied on the walker's thread (see Options).
    let threads = opts.threads;
    let (tx, rx) = sync_channel::<(usize, Ino)>(threads.max(1) * 16);
    let rx = Mutex::new(rx);
    let root = std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| c.worker(&rx));
        }
        // A walker error stops the workers at once (they skip what is
        // still queued), before they are joined.
        c.walk(dest, tx).unwrap_or_else(|e| {
            c.fail(e);
            Ino(0)
        })
    });
    let first = c.first_err.lock().map(|mut g| g.take()).unwrap_or(None);
    if let Some(e) = first {
        return Err(e);
    }
    c.report();
    Ok(Summary {
        files: c.files_done.load(Relaxed),
        bytes: c.bytes_done.load(Relaxed),
        root,
    })
}

/// A source time; with a fixed clock (reproducible builds), times newer
/// than it are clamped to it, as SOURCE_DATE_EPOCH asks.
fn ts(sec: i64, nsec: i64) -> Timestamp {
    let t = Timestamp {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    };
    match crate::clock::fixed() {
        Some(f) if (t.sec, t.nsec) > (f.sec, f.nsec) => f,
        _ => t,
    }
}

/// The attributes a finished inode gets from its source.
fn final_attrs(n: &Node, with_mode: bool) -> SetAttr {
    let m = &n.meta;
    SetAttr {
        mode: with_mode.then_some(m.mode() & 0o7777),
        uid: Some(m.uid()),
        gid: Some(m.gid()),
        size: None,
        atime: Some(ts(m.atime(), m.atime_nsec())),
        mtime: Some(ts(m.mtime(), m.mtime_nsec())),
        ctime: None,
    }
}

impl Copier<'_> {
    fn aborted(&self) -> bool {
        self.abort.load(Relaxed)
    }

    /// Keep the first error and stop everyone.
    fn fail(&self, e: PopulateError) {
        if let Ok(mut g) = self.first_err.lock() {
            if g.is_none() {
                *g = Some(e);
            }
        }
        self.abort.store(true, Relaxed);
    }

    fn report(&self) {
        (self.progress)(&Progress {
            files_done: self.files_done.load(Relaxed),
            files_total: self.tree.nodes.len() as u64,
            bytes_done: self.bytes_done.load(Relaxed),
            bytes_total: self.tree.bytes_total,
        });
    }

    fn file_done(&self) {
        self.files_done.fetch_add(1, Relaxed);
        self.report();
    }

    /// The walker: namespace operations in list order. Returns the inode
    /// of the source root.
    fn walk(&self, dest: Dest, jobs: SyncSender<(usize, Ino)>) -> Res<Ino> {
        let nodes = &self.tree.nodes;
        let mut inos = vec![Ino(0); nodes.len()];
        let mut links: HashMap<(u64, u64), Ino> = HashMap::new();
        // Directories whose subtree is not passed yet, innermost last.
        let mut open: Vec<usize> = Vec::new();
        let (first, new_at) = match dest {
            Dest::Into(dir) => {
                inos[0] = dir;
                open.push(0);
                (1, None)
            }
            Dest::New { parent, name } => (0, Some((parent, name))),
        };
        for i in first..nodes.len() {
            if self.aborted() {
                return Ok(inos[0]);
            }
            while let Some(&d) = open.last() {
                if nodes[d].end > i {
                    break;
                }
                open.pop();
                self.finish_dir(&nodes[d], inos[d])?;
            }
            let n = &nodes[i];
            let (parent, name) = match (&new_at, i) {
                (Some((p, name)), 0) => (*p, name.as_slice()),
                _ => (inos[n.parent], n.name.as_slice()),
            };
            let m = &n.meta;
            let fmt = m.mode() & S_IFMT;
            if fmt != libc::S_IFDIR && m.nlink() > 1 {
                if let Some(&target) = links.get(&(m.dev(), m.ino())) {
                    self.fs
                        .link(target, parent, name)
                        .map_err(image_err(&n.path, "link"))?;
                    inos[i] = target;
                    self.file_done();
                    continue;
                }
            }
            let ino = self.make(n, parent, name)?;
            inos[i] = ino;
            if fmt != libc::S_IFDIR && m.nlink() > 1 {
                links.insert((m.dev(), m.ino()), ino);
            }
            match fmt {
                libc::S_IFDIR => open.push(i),
                libc::S_IFREG if self.opts.threads == 0 => {
                    // In order, on this thread: every allocation in walk
                    // order (reproducible builds).
                    let mut buf = vec![0u8; self.opts.chunk_bytes.max(4096)];
                    self.copy_file(n, ino, &mut buf)?;
                    self.file_done();
                }
                libc::S_IFREG => {
                    if jobs.send((i, ino)).is_err() {
                        // Every worker is gone: they stopped on an error.
                        return Ok(inos[0]);
                    }
                }
                _ => {
                    self.finish_inode(n, ino, fmt != libc::S_IFLNK)?;
                    self.file_done();
                }
            }
        }
        while let Some(d) = open.pop() {
            if self.aborted() {
                break;
            }
            self.finish_dir(&nodes[d], inos[d])?;
        }
        Ok(inos[0])
    }

    /// Create the image inode for `n` as `name` in `parent`.
    fn make(&self, n: &Node, parent: Ino, name: &[u8]) -> Res<Ino> {
        let m = &n.meta;
        let fmt = m.mode() & S_IFMT;
        let rdev = match fmt {
            libc::S_IFCHR | libc::S_IFBLK => {
                let r = m.rdev();
                stream::dev_number(libc::major(r), libc::minor(r))
            }
            _ => 0,
        };
        let (mut uid, mut gid) = self.opts.owner.unwrap_or((m.uid(), m.gid()));
        let mut mode = m.mode();
        if let Some(s) = self.overrides_of(n) {
            uid = s.uid.unwrap_or(uid);
            gid = s.gid.unwrap_or(gid);
            mode = s.mode.map_or(mode, |p| (mode & S_IFMT) | p);
        }
        let args = CreateArgs {
            mode,
            uid,
            gid,
            rdev,
            umask: 0,
        };
        let ip = match fmt {
            libc::S_IFDIR => self
                .fs
                .mkdir(parent, name, &args)
                .map_err(image_err(&n.path, "mkdir"))?,
            libc::S_IFLNK => {
                let target =
                    std::fs::read_link(&n.path).map_err(source_err(&n.path, "readlink"))?;
                self.fs
                    .symlink(parent, name, target.as_os_str().as_bytes(), &args)
                    .map_err(image_err(&n.path, "symlink"))?
            }
            libc::S_IFREG | libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO | libc::S_IFSOCK => self
                .fs
                .create(parent, name, &args)
                .map_err(image_err(&n.path, "create"))?,
            _ => {
                return Err(PopulateError {
                    path: n.path.clone(),
                    op: "copy",
                    cause: Cause::Source(std::io::Error::new(
                        std::io::ErrorKind::Unsupported,
                        format!("unknown file type {fmt:#o}"),
                    )),
                })
            }
        };
        Ok(ip.ino)
    }

    /// A directory after its subtree: xattrs (default ACL too), then mode,
    /// owner and times.
    fn finish_dir(&self, n: &Node, ino: Ino) -> Res<()> {
        self.finish_inode(n, ino, true)?;
        self.file_done();
        Ok(())
    }

    /// [`final_attrs`], without the access time unless the options keep it
    /// (then the inode keeps the time it was made), with the options'
    /// owner if they set one.
    fn attrs_of(&self, n: &Node, with_mode: bool) -> SetAttr {
        let mut a = final_attrs(n, with_mode);
        if !self.opts.keep_atime {
            a.atime = None;
        }
        if let Some((uid, gid)) = self.opts.owner {
            a.uid = Some(uid);
            a.gid = Some(gid);
        }
        if let Some(s) = self.overrides_of(n) {
            a.uid = s.uid.or(a.uid);
            a.gid = s.gid.or(a.gid);
            if with_mode {
                a.mode = s.mode.or(a.mode);
            }
        }
        a
    }

    /// The override file's settings for `n`, if any rule matches it.
    fn overrides_of(&self, n: &Node) -> Option<Settings> {
        let o = self.opts.overrides.as_ref()?;
        let rel = n.path.strip_prefix(&self.tree.nodes[0].path).ok()?;
        let rel = format!("/{}", rel.to_string_lossy());
        o.lookup(&rel, n.meta.file_type().is_symlink())
    }

    /// Extended attributes, then owner, mode (unless a symlink) and times.
    fn finish_inode(&self, n: &Node, ino: Ino, with_mode: bool) -> Res<()> {
        self.copy_xattrs(n, ino)?;
        self.fs
            .setattr(ino, &self.attrs_of(n, with_mode))
            .map_err(image_err(&n.path, "set attributes"))?;
        Ok(())
    }

    fn copy_xattrs(&self, n: &Node, ino: Ino) -> Res<()> {
        let mut list = source::xattrs(&n.path).map_err(source_err(&n.path, "read xattrs"))?;
        if let Some(s) = self.overrides_of(n) {
            s.apply_xattrs(&mut list);
        }
        for (name, value) in list {
            self.fs
                .setxattr(ino, &name, &value, crate::attr::XattrSet::Any)
                .map_err(image_err(&n.path, "setxattr"))?;
        }
        Ok(())
    }

    /// A worker: regular files' data, then their attributes.
    fn worker(&self, jobs: &Mutex<Receiver<(usize, Ino)>>) {
        let mut buf = vec![0u8; self.opts.chunk_bytes.max(4096)];
        loop {
            let job = match jobs.lock() {
                Ok(rx) => rx.recv(),
                Err(_) => return,
            };
            let Ok((i, ino)) = job else { return };
            if self.aborted() {
                continue; // drain, so the walker never blocks on send
            }
            let n = &self.tree.nodes[i];
            // A panic here would be a bug; caught, so that it stops the
            // populate with an error instead of leaving the walker
            // blocked on a channel nobody drains.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.copy_file(n, ino, &mut buf)
            }));
            match r {
                Ok(Ok(())) => self.file_done(),
                Ok(Err(e)) => self.fail(e),
                Err(p) => {
                    let what = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    self.fail(PopulateError {
                        path: n.path.clone(),
                        op: "copy",
                        cause: Cause::Image(crate::Error::Invalid(format!(
                            "internal error (a bug): copy thread panicked: {what}"
                        ))),
                    });
                }
            }
        }
    }

    fn copy_file(&self, n: &Node, ino: Ino, buf: &mut [u8]) -> Res<()> {
        // Empty at the scan: not even opened (most files of some trees).
        let (size, written_end, data_bytes) = if n.meta.len() == 0 {
            (0, 0, 0)
        } else {
            self.copy_data(n, ino, buf)?
        };
        if self.aborted() {
            return Ok(());
        }
        self.copy_xattrs(n, ino)?;
        let mut attrs = self.attrs_of(n, true);
        // The file was new: the writes made it `written_end` bytes long
        // (a hole at the end, or a source that shrank, needs the size set).
        if written_end != size {
            attrs.size = Some(size);
        }
        self.fs
            .setattr(ino, &attrs)
            .map_err(image_err(&n.path, "set attributes"))?;
        self.bytes_done
            .fetch_add(size.saturating_sub(data_bytes), Relaxed);
        Ok(())
    }

    /// Copy the data ranges of `n`; returns the source's size (at open),
    /// where the written data ends, and the bytes written.
    fn copy_data(&self, n: &Node, ino: Ino, buf: &mut [u8]) -> Res<(u64, u64, u64)> {
        let f = source::open_noatime(&n.path).map_err(source_err(&n.path, "open"))?;
        let size = f.metadata().map_err(source_err(&n.path, "stat"))?.len();
        let mut off = 0u64;
        let mut data_bytes = 0u64;
        // Where the written data ends: the image file's size so far.
        let mut written_end = 0u64;
        while let Some((start, end)) =
            source::next_data(&f, off, size).map_err(source_err(&n.path, "seek data"))?
        {
            // A range longer than one chunk is reserved in one piece first
            // (unwritten, past EOF until written), so writers in other
            // threads cannot interleave their blocks with it.
            if end - start > buf.len() as u64 {
                stream::reserve(self.fs, ino, start, end - start)
                    .map_err(image_err(&n.path, "reserve space"))?;
            }
            let mut pos = start;
            while pos < end {
                if self.aborted() {
                    return Ok((size, written_end, data_bytes));
                }
                let want = ((end - pos) as usize).min(buf.len());
                let got = source::read_full(&f, &mut buf[..want], pos)
                    .map_err(source_err(&n.path, "read"))?;
                if got == 0 {
                    break; // the file shrank under us
                }
                stream::write_all(self.fs, ino, pos, &buf[..got])
                    .map_err(image_err(&n.path, "write"))?;
                pos += got as u64;
                data_bytes += got as u64;
                self.bytes_done.fetch_add(got as u64, Relaxed);
                self.report();
            }
            if pos > start {
                written_end = pos;
            }
            off = end.max(pos);
        }
        Ok((size, written_end, data_bytes))
    }
}
