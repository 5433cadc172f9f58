//! A bare FUSE passthrough: the cost of FUSE round trips alone, the
//! "ceiling" target of `scripts/bench-dio`. A measuring tool, not a product.
//!
//! Usage: passthrough SRC MNT [--threads N] [--no-parallel-dio]
//!
//! Serves the directory SRC (meant to be a tmpfs) read-write at MNT until
//! MNT is unmounted (`fusermount3 -u MNT` or `umount MNT`), in the
//! foreground. Requests: lookup, forget, getattr, setattr (mode, owner,
//! size, times), open, create, read, write, flush, release, fsync, mkdir,
//! unlink, rmdir, opendir, readdir, releasedir, statfs, fallocate.
//!
//! How it serves:
//! - fuser 0.15's session loop reads and dispatches one request at a time
//!   on one thread. Metadata requests are answered there; read, write,
//!   fsync and fallocate are handed, with their (Send) reply object and an
//!   `Arc<File>` from the handle table, to a pool of worker threads, so
//!   several data requests are in flight at once (pread/pwrite on the
//!   file's descriptor: no shared file position).
//! - Inodes are named by path (relative to SRC): FUSE inode numbers are
//!   ours, handed out at lookup and freed when the kernel forgets them.
//!   No rename, links or symlinks: the benchmark needs none.
//! - An open whose flags carry O_DIRECT opens the source file with
//!   O_DIRECT and replies FOPEN_DIRECT_IO (the kernel sends every read and
//!   write to us, bypassing its page cache) plus FOPEN_PARALLEL_DIRECT_WRITES
//!   (1 << 6, FUSE 7.36: the kernel takes the inode lock shared, not
//!   exclusive, for direct writes that do not extend the file), unless
//!   `--no-parallel-dio`. Other opens use the kernel's page cache as usual.
//! - Data buffers for O_DIRECT are 4096-byte aligned.
//!
//! Invariants: the session thread alone touches the node and handle
//! tables (`&mut self`), so they need no lock; a worker holds its own
//! `Arc<File>`, so a RELEASE racing a READ closes the descriptor only after
//! the read finished.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::consts::FOPEN_DIRECT_IO;
use fuser::{
    FileAttr, FileType, KernelConfig, MountOption, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, Session,
    TimeOrNow, FUSE_ROOT_ID,
};

/// FUSE 7.36 open flag (not among fuser 0.15's constants): direct writes
/// inside EOF may run in parallel on one inode.
const FOPEN_PARALLEL_DIRECT_WRITES: u32 = 1 << 6;
/// Attributes and entries are cached this long by the kernel. The source
/// changes only through us, so any value would do.
const TTL: Duration = Duration::from_secs(1);
/// O_DIRECT buffer alignment (and the largest logical block size we expect).
const ALIGN: usize = 4096;
/// Largest request we accept (fuser's buffer allows 16 MiB; the kernel's
/// default max_pages gives 128 KiB..1 MiB).
const MAX_WRITE: u32 = 1 << 20;

// ------------------------------------------------------------- the pool
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Worker threads fed through a bounded queue: a full queue blocks the
/// session thread, which pushes back on the kernel.
struct Pool {
    tx: Option<SyncSender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    fn new(threads: usize) -> io::Result<Pool> {
        let (tx, rx) = sync_channel::<Job>(threads * 4);
        let rx = Arc::new(Mutex::new(rx));
        let mut workers = Vec::new();
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("pt-worker-{i}"))
                    .spawn(move || worker(&rx))?,
            );
        }
        Ok(Pool {
            tx: Some(tx),
            workers,
        })
    }

    fn run(&self, job: impl FnOnce() + Send + 'static) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Box::new(job));
        }
    }
}

fn worker(rx: &Mutex<Receiver<Job>>) {
    loop {
        let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        drop(self.tx.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

// ------------------------------------------------------- aligned buffers
/// A zeroed heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is owned memory, used by one thread at a time.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len.max(1).next_multiple_of(ALIGN), ALIGN)
            .expect("buffer layout");
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes, zero-initialized.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

// ------------------------------------------------------------ the tables
struct Node {
    /// Relative to the source directory ("" for the root).
    path: PathBuf,
    lookups: u64,
}

struct Passthrough {
    root: PathBuf,
    nodes: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next_ino: u64,
    handles: HashMap<u64, Arc<File>>,
    next_fh: u64,
    parallel_dio: bool,
    pool: Pool,
}

/// The changes of one SETATTR request (None: unchanged).
struct SetAttr {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn cvt(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn systime(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

fn attr_of(ino: u64, m: &std::fs::Metadata) -> FileAttr {
    let kind = match m.mode() & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    };
    FileAttr {
        ino,
        size: m.size(),
        blocks: m.blocks(),
        atime: systime(m.atime(), m.atime_nsec()),
        mtime: systime(m.mtime(), m.mtime_nsec()),
        ctime: systime(m.ctime(), m.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: m.blksize() as u32,
        flags: 0,
    }
}

/// The flags for `open(2)` on the source from FUSE open flags: access mode,
/// O_DIRECT, O_APPEND, O_TRUNC, O_SYNC/O_DSYNC; O_CREAT for create.
fn open_options(flags: i32, create_mode: Option<u32>) -> OpenOptions {
    let mut o = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => o.read(true),
    };
    let keep = libc::O_DIRECT | libc::O_APPEND | libc::O_SYNC | libc::O_DSYNC | libc::O_NOATIME;
    o.custom_flags(flags & keep);
    if flags & libc::O_TRUNC != 0 {
        o.truncate(true);
    }
    if let Some(mode) = create_mode {
        o.create(true).mode(mode);
        if flags & libc::O_EXCL != 0 {
            o.create_new(true);
        }
    }
    o
}

impl Passthrough {
    fn new(root: PathBuf, threads: usize, parallel_dio: bool) -> io::Result<Passthrough> {
        let mut nodes = HashMap::new();
        let mut by_path = HashMap::new();
        nodes.insert(
            FUSE_ROOT_ID,
            Node {
                path: PathBuf::new(),
                lookups: 1,
            },
        );
        by_path.insert(PathBuf::new(), FUSE_ROOT_ID);
        Ok(Passthrough {
            root,
            nodes,
            by_path,
            next_ino: FUSE_ROOT_ID + 1,
            handles: HashMap::new(),
            next_fh: 1,
            parallel_dio,
            pool: Pool::new(threads)?,
        })
    }

    /// The source path of inode `ino`.
    fn real(&self, ino: u64) -> Result<PathBuf, i32> {
        match self.nodes.get(&ino) {
            Some(n) => Ok(self.root.join(&n.path)),
            None => Err(libc::ESTALE),
        }
    }

    /// Relative and source paths of `name` in directory `parent`.
    fn child(&self, parent: u64, name: &OsStr) -> Result<(PathBuf, PathBuf), i32> {
        let n = self.nodes.get(&parent).ok_or(libc::ESTALE)?;
        if name.as_bytes().contains(&b'/') || name == "." || name == ".." {
            return Err(libc::EINVAL);
        }
        let rel = n.path.join(name);
        let real = self.root.join(&rel);
        Ok((rel, real))
    }

    /// One more kernel reference to the inode at `rel` (a new one if
    /// needed); its attributes.
    fn remember(&mut self, rel: PathBuf, m: &std::fs::Metadata) -> FileAttr {
        let ino = match self.by_path.get(&rel) {
            Some(&ino) => ino,
            None => {
                let ino = self.next_ino;
                self.next_ino += 1;
                self.by_path.insert(rel.clone(), ino);
                self.nodes.insert(
                    ino,
                    Node {
                        path: rel,
                        lookups: 0,
                    },
                );
                ino
            }
        };
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.lookups += 1;
        }
        attr_of(ino, m)
    }

    fn add_handle(&mut self, f: File) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, Arc::new(f));
        fh
    }

    fn open_reply_flags(&self, flags: i32) -> u32 {
        if flags & libc::O_DIRECT != 0 {
            FOPEN_DIRECT_IO
                | if self.parallel_dio {
                    FOPEN_PARALLEL_DIRECT_WRITES
                } else {
                    0
                }
        } else {
            0
        }
    }

    /// SETATTR: each change asked for, in the order chmod, chown,
    /// truncate, utimens; the attributes after.
    fn setattr_inner(&mut self, ino: u64, fh: Option<u64>, s: SetAttr) -> Result<FileAttr, i32> {
        let SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = s;
        let real = self.real(ino)?;
        let c = cpath(&real).map_err(|e| errno(&e))?;
        if let Some(mode) = mode {
            // SAFETY: c is a valid NUL-terminated path.
            cvt(unsafe { libc::chmod(c.as_ptr(), mode & 0o7777) }).map_err(|e| errno(&e))?;
        }
        if uid.is_some() || gid.is_some() {
            let u = uid.unwrap_or(u32::MAX);
            let g = gid.unwrap_or(u32::MAX);
            // SAFETY: as above; -1 (u32::MAX) leaves an id unchanged.
            cvt(unsafe { libc::lchown(c.as_ptr(), u, g) }).map_err(|e| errno(&e))?;
        }
        if let Some(size) = size {
            let r = match fh.and_then(|fh| self.handles.get(&fh)) {
                Some(f) => f.set_len(size),
                None => OpenOptions::new()
                    .write(true)
                    .open(&real)
                    .and_then(|f| f.set_len(size)),
            };
            r.map_err(|e| errno(&e))?;
        }
        if atime.is_some() || mtime.is_some() {
            let ts = |t: Option<TimeOrNow>| match t {
                None => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_OMIT,
                },
                Some(TimeOrNow::Now) => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_NOW,
                },
                Some(TimeOrNow::SpecificTime(t)) => {
                    let (sec, nsec) = match t.duration_since(UNIX_EPOCH) {
                        Ok(d) => (d.as_secs() as i64, d.subsec_nanos() as i64),
                        Err(e) => {
                            let d = e.duration();
                            if d.subsec_nanos() == 0 {
                                (-(d.as_secs() as i64), 0)
                            } else {
                                (
                                    -(d.as_secs() as i64) - 1,
                                    1_000_000_000 - d.subsec_nanos() as i64,
                                )
                            }
                        }
                    };
                    libc::timespec {
                        tv_sec: sec,
                        tv_nsec: nsec,
                    }
                }
            };
            let times = [ts(atime), ts(mtime)];
            // SAFETY: valid path and a two-element timespec array.
            cvt(unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            })
            .map_err(|e| errno(&e))?;
        }
        let m = std::fs::symlink_metadata(&real).map_err(|e| errno(&e))?;
        Ok(attr_of(ino, &m))
    }
}

impl fuser::Filesystem for Passthrough {
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let (rel, real) = match self.child(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match std::fs::symlink_metadata(&real) {
            Ok(m) => {
                let attr = self.remember(rel, &m);
                reply.entry(&TTL, &attr, 0);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn forget(&mut self, _req: &Request<'_>, ino: u64, nlookup: u64) {
        if ino == FUSE_ROOT_ID {
            return;
        }
        let gone = match self.nodes.get_mut(&ino) {
            Some(n) => {
                n.lookups = n.lookups.saturating_sub(nlookup);
                n.lookups == 0
            }
            None => false,
        };
        if gone {
            if let Some(n) = self.nodes.remove(&ino) {
                if self.by_path.get(&n.path) == Some(&ino) {
                    self.by_path.remove(&n.path);
                }
            }
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        let m = match fh.and_then(|fh| self.handles.get(&fh)) {
            Some(f) => f.metadata(),
            None => match self.real(ino) {
                Ok(p) => std::fs::symlink_metadata(p),
                Err(e) => return reply.error(e),
            },
        };
        match m {
            Ok(m) => reply.attr(&TTL, &attr_of(ino, &m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let s = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.setattr_inner(ino, fh, s) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let (rel, real) = match self.child(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let r = cpath(&real).and_then(|c| {
            // SAFETY: c is a valid NUL-terminated path.
            cvt(unsafe { libc::mkdir(c.as_ptr(), (mode & !umask) & 0o7777) })
        });
        match r.and_then(|()| std::fs::symlink_metadata(&real)) {
            Ok(m) => {
                let attr = self.remember(rel, &m);
                reply.entry(&TTL, &attr, 0);
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match self.child(parent, name) {
            Ok((rel, real)) => match std::fs::remove_file(real) {
                Ok(()) => {
                    // The inode lives on for the kernel's references, but the
                    // name may be reused by a new file.
                    self.by_path.remove(&rel);
                    reply.ok()
                }
                Err(e) => reply.error(errno(&e)),
            },
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        match self.child(parent, name) {
            Ok((rel, real)) => match std::fs::remove_dir(real) {
                Ok(()) => {
                    self.by_path.remove(&rel);
                    reply.ok()
                }
                Err(e) => reply.error(errno(&e)),
            },
            Err(e) => reply.error(e),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let real = match self.real(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        match open_options(flags, None).open(real) {
            Ok(f) => {
                let fh = self.add_handle(f);
                reply.opened(fh, self.open_reply_flags(flags));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (rel, real) = match self.child(parent, name) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let f = match open_options(flags, Some((mode & !umask) & 0o7777)).open(&real) {
            Ok(f) => f,
            Err(e) => return reply.error(errno(&e)),
        };
        match f.metadata() {
            Ok(m) => {
                let attr = self.remember(rel, &m);
                let fh = self.add_handle(f);
                reply.created(&TTL, &attr, 0, fh, self.open_reply_flags(flags));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let Some(f) = self.handles.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        self.pool.run(move || {
            let mut buf = AlignedBuf::new(size as usize);
            let b = &mut buf.as_mut()[..size as usize];
            // A short read is EOF (regular files on tmpfs).
            match f.read_at(b, offset as u64) {
                Ok(n) => reply.data(&b[..n]),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let Some(f) = self.handles.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        // The session reuses its buffer for the next request: copy (into
        // an aligned buffer, for O_DIRECT).
        let len = data.len();
        let mut buf = AlignedBuf::new(len);
        buf.as_mut()[..len].copy_from_slice(data);
        self.pool.run(
            move || match f.write_at(&buf.as_mut()[..len], offset as u64) {
                Ok(n) => reply.written(n as u32),
                Err(e) => reply.error(errno(&e)),
            },
        );
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _owner: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handles.remove(&fh);
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        let Some(f) = self.handles.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        self.pool.run(move || {
            let r = if datasync {
                f.sync_data()
            } else {
                f.sync_all()
            };
            match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let real = match self.real(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let rd = match std::fs::read_dir(&real) {
            Ok(rd) => rd,
            Err(e) => return reply.error(errno(&e)),
        };
        // Offsets are positions in this listing: ".", "..", then the
        // entries in read_dir order (stable while nothing changes).
        let mut entries: Vec<(u64, FileType, std::ffi::OsString)> = vec![
            (ino, FileType::Directory, ".".into()),
            (FUSE_ROOT_ID, FileType::Directory, "..".into()),
        ];
        for e in rd.flatten() {
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => FileType::Directory,
                Ok(t) if t.is_symlink() => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            let dino = e.metadata().map(|m| m.ino()).unwrap_or(0);
            entries.push((dino, kind, e.file_name()));
        }
        for (i, (dino, kind, name)) in entries.iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(*dino, i as i64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let c = match cpath(&self.root) {
            Ok(c) => c,
            Err(e) => return reply.error(errno(&e)),
        };
        // SAFETY: statvfs fills the zeroed struct; c is a valid path.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        match cvt(unsafe { libc::statvfs(c.as_ptr(), &mut s) }) {
            Ok(()) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(f) = self.handles.get(&fh).cloned() else {
            return reply.error(libc::EBADF);
        };
        self.pool.run(move || {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid descriptor held open by `f`.
            match cvt(unsafe { libc::fallocate(f.as_raw_fd(), mode, offset, length) }) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }
}

fn usage() -> ! {
    eprintln!("usage: passthrough SRC MNT [--threads N] [--no-parallel-dio]");
    std::process::exit(2);
}

fn main() {
    let mut pos = Vec::new();
    let mut threads = 16usize;
    let mut parallel_dio = true;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--threads") => {
                threads = args
                    .next()
                    .and_then(|v| v.to_str().and_then(|s| s.parse().ok()))
                    .unwrap_or_else(|| usage());
            }
            Some("--no-parallel-dio") => parallel_dio = false,
            Some(s) if s.starts_with('-') => usage(),
            _ => pos.push(PathBuf::from(a)),
        }
    }
    let [src, mnt] = <[PathBuf; 2]>::try_from(pos).unwrap_or_else(|_| usage());
    let src = match std::fs::canonicalize(&src) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("passthrough: {}: {e}", src.display());
            std::process::exit(1);
        }
    };
    let fs = match Passthrough::new(src, threads, parallel_dio) {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("passthrough: starting workers: {e}");
            std::process::exit(1);
        }
    };
    let opts = [
        MountOption::FSName("passthrough".into()),
        MountOption::CUSTOM("subtype=passthrough".into()),
        MountOption::RW,
        MountOption::DefaultPermissions,
    ];
    let mut session = match Session::new(fs, &mnt, &opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("passthrough: mounting on {}: {e}", mnt.display());
            std::process::exit(1);
        }
    };
    if let Err(e) = session.run() {
        eprintln!("passthrough: FUSE session: {e}");
        std::process::exit(1);
    }
}
