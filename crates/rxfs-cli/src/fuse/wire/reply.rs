//! Replies: each request is answered exactly once, on the descriptor it
//! was read from.
//!
//! A reply object owns the request's `unique`; its typed methods write
//! the answer with one `writev` (header, fixed part, data straight from
//! the handler's buffer). A reply dropped unanswered (a handler that
//! panicked, a bug) answers EIO, so the caller never hangs. A write the
//! kernel refuses with ENOENT is a request it no longer waits for (the
//! caller was interrupted): nothing to do.

use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use zerocopy::IntoBytes;

use super::abi;
use super::types::{ttl_pair, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo};

/// The most parts a message has after its header (the largest reply,
/// READDIRPLUS or a notification, has fewer).
const MAX_PARTS: usize = 7;

/// One `/dev/fuse` descriptor (the session's or a clone).
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
}

impl Channel {
    pub fn new(fd: OwnedFd) -> Channel {
        Channel { fd }
    }

    pub fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Write one message: the out header (`unique` 0 and a notify code
    /// in `error` for a notification), then `parts`.
    pub fn message(&self, unique: u64, error: i32, parts: &[&[u8]]) -> std::io::Result<()> {
        let len =
            std::mem::size_of::<abi::OutHeader>() + parts.iter().map(|p| p.len()).sum::<usize>();
        let h = abi::OutHeader {
            len: len as u32,
            error,
            unique,
        };
        // The iovecs live on the stack: a reply allocates nothing (a
        // per-reply heap block costs an allocator slow path when the
        // event loops take turns, each loop's page emptying in between).
        let mut iov = [IoSlice::new(&[]); MAX_PARTS + 1];
        if parts.len() > MAX_PARTS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "reply of too many parts",
            ));
        }
        iov[0] = IoSlice::new(h.as_bytes());
        for (slot, p) in iov[1..].iter_mut().zip(parts) {
            *slot = IoSlice::new(p);
        }
        self.send(&iov[..parts.len() + 1], len)
    }

    /// Write one message of `total` bytes (header first). ENOENT (an
    /// interrupted request) is not an error.
    fn send(&self, iov: &[IoSlice<'_>], total: usize) -> std::io::Result<()> {
        loop {
            // SAFETY: IoSlice is ABI-compatible with iovec; the slices
            // outlive the call.
            let n = unsafe {
                libc::writev(
                    self.raw(),
                    iov.as_ptr() as *const libc::iovec,
                    iov.len() as libc::c_int,
                )
            };
            if n >= 0 {
                return if n as usize == total {
                    Ok(())
                } else {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "short write to /dev/fuse",
                    ))
                };
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOENT) => return Ok(()),
                _ => return Err(e),
            }
        }
    }
}

/// Where an io_uring event loop collects the answer of the request it
/// runs (see [`super::uring`]): the loop copies it into the ring
/// entry's buffers once the handler returns.
#[derive(Debug, Default)]
pub struct RingSlot {
    answer: std::sync::Mutex<RingAnswer>,
}

#[derive(Debug, Default)]
pub struct RingAnswer {
    pub set: bool,
    /// 0 or a negative errno.
    pub error: i32,
    pub data: Vec<u8>,
}

impl RingSlot {
    /// Take the answer out (and reset the slot for the next request).
    pub fn take(&self, f: impl FnOnce(&RingAnswer)) {
        let mut a = self.answer.lock().unwrap_or_else(|e| e.into_inner());
        f(&a);
        a.set = false;
        a.data.clear();
    }
}

enum Sink {
    Dev(Arc<Channel>),
    Ring(Arc<RingSlot>),
}

/// The answer to one request.
pub struct Reply {
    sink: Sink,
    unique: u64,
    done: bool,
    /// Called once, just before the answer is written (the read gate's
    /// count of loops running requests).
    on_answer: Option<AnswerHook>,
}

/// What a reply calls just before its answer is written.
pub type AnswerHook = Arc<dyn Fn() + Send + Sync>;

impl Reply {
    pub fn new(ch: Arc<Channel>, unique: u64) -> Reply {
        Reply {
            sink: Sink::Dev(ch),
            unique,
            done: false,
            on_answer: None,
        }
    }

    /// A reply an io_uring event loop delivers.
    pub fn ring(slot: Arc<RingSlot>, unique: u64) -> Reply {
        Reply {
            sink: Sink::Ring(slot),
            unique,
            done: false,
            on_answer: None,
        }
    }

    /// Call `hook` just before the answer is written.
    pub fn on_answer(mut self, hook: &AnswerHook) -> Reply {
        self.on_answer = Some(hook.clone());
        self
    }

    fn send(&mut self, error: i32, parts: &[&[u8]]) {
        self.done = true;
        if let Some(hook) = self.on_answer.take() {
            hook();
        }
        super::trace::reply(self.unique, error, parts);
        let ch = match &self.sink {
            Sink::Dev(ch) => ch,
            Sink::Ring(slot) => {
                let mut a = slot.answer.lock().unwrap_or_else(|e| e.into_inner());
                a.set = true;
                a.error = error;
                a.data.clear();
                for p in parts {
                    a.data.extend_from_slice(p);
                }
                return;
            }
        };
        if let Err(e) = ch.message(self.unique, error, parts) {
            // The connection is gone (unmount) or the reply was malformed
            // (a bug): the session loop notices the former on its next read.
            if e.raw_os_error() != Some(libc::ENODEV) {
                errln!("rxfs: replying to request {}: {e}", self.unique);
            }
        }
    }

    /// Answer with a positive errno (anything else becomes EIO).
    pub fn error(mut self, errno: i32) {
        let e = if errno > 0 { errno } else { libc::EIO };
        self.send(-e, &[]);
    }

    pub fn ok(mut self) {
        self.send(0, &[]);
    }

    pub fn bytes(mut self, parts: &[&[u8]]) {
        self.send(0, parts);
    }

    /// A reply for a request that takes none (FORGET): dropping it sends
    /// nothing.
    pub fn answered(mut self) -> Reply {
        self.done = true;
        self
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.done {
            self.send(-libc::EIO, &[]);
        }
    }
}

fn entry_out(ttl: &Duration, attr: &FileAttr, gen: Generation) -> abi::EntryOut {
    let (s, ns) = ttl_pair(ttl);
    abi::EntryOut {
        nodeid: attr.ino.0,
        generation: gen.0,
        entry_valid: s,
        attr_valid: s,
        entry_valid_nsec: ns,
        attr_valid_nsec: ns,
        attr: attr.to_wire(),
    }
}

macro_rules! reply_type {
    ($($(#[$m:meta])* $name:ident),*) => {$(
        $(#[$m])*
        pub struct $name(pub Reply);
        impl $name {
            pub fn error(self, errno: i32) {
                self.0.error(errno)
            }
        }
    )*};
}

reply_type!(
    ReplyEmpty,
    ReplyEntry,
    ReplyAttr,
    ReplyStatx,
    ReplyData,
    ReplyOpen,
    ReplyCreate,
    ReplyWrite,
    ReplyStatfs,
    ReplyXattr,
    ReplyLseek,
    ReplyIoctl
);

impl ReplyEmpty {
    pub fn ok(self) {
        self.0.ok()
    }
}

impl ReplyEntry {
    /// A name's inode: the kernel takes one reference to it (node id 0:
    /// a negative entry, cached for `ttl`).
    pub fn entry(self, ttl: &Duration, attr: &FileAttr, gen: Generation) {
        let e = entry_out(ttl, attr, gen);
        self.0.bytes(&[e.as_bytes()])
    }
}

impl ReplyAttr {
    pub fn attr(self, ttl: &Duration, attr: &FileAttr) {
        let (s, ns) = ttl_pair(ttl);
        let a = abi::AttrOut {
            attr_valid: s,
            attr_valid_nsec: ns,
            dummy: 0,
            attr: attr.to_wire(),
        };
        self.0.bytes(&[a.as_bytes()])
    }
}

impl ReplyStatx {
    pub fn statx(self, ttl: &Duration, attr: &FileAttr) {
        let (s, ns) = ttl_pair(ttl);
        let a = abi::StatxOut {
            attr_valid: s,
            attr_valid_nsec: ns,
            flags: 0,
            spare: [0; 2],
            stat: attr.to_statx(),
        };
        self.0.bytes(&[a.as_bytes()])
    }
}

impl ReplyData {
    pub fn data(self, d: &[u8]) {
        self.0.bytes(&[d])
    }
}

fn open_out(fh: FileHandle, flags: FopenFlags) -> abi::OpenOut {
    abi::OpenOut {
        fh: fh.0,
        open_flags: flags.bits(),
        backing_id: 0,
    }
}

impl ReplyOpen {
    pub fn opened(self, fh: FileHandle, flags: FopenFlags) {
        let o = open_out(fh, flags);
        self.0.bytes(&[o.as_bytes()])
    }
}

impl ReplyCreate {
    /// CREATE and TMPFILE: the new entry and the open file.
    pub fn created(
        self,
        ttl: &Duration,
        attr: &FileAttr,
        gen: Generation,
        fh: FileHandle,
        flags: FopenFlags,
    ) {
        let e = entry_out(ttl, attr, gen);
        let o = open_out(fh, flags);
        self.0.bytes(&[e.as_bytes(), o.as_bytes()])
    }
}

impl ReplyWrite {
    pub fn written(self, size: u32) {
        let w = abi::WriteOut { size, padding: 0 };
        self.0.bytes(&[w.as_bytes()])
    }
}

impl ReplyStatfs {
    #[allow(clippy::too_many_arguments)]
    pub fn statfs(
        self,
        blocks: u64,
        bfree: u64,
        bavail: u64,
        files: u64,
        ffree: u64,
        bsize: u32,
        namelen: u32,
        frsize: u32,
    ) {
        let s = abi::Kstatfs {
            blocks,
            bfree,
            bavail,
            files,
            ffree,
            bsize,
            namelen,
            frsize,
            ..Default::default()
        };
        self.0.bytes(&[s.as_bytes()])
    }
}

impl ReplyXattr {
    /// The size a value or list needs (the caller asked with size 0).
    pub fn size(self, size: u32) {
        let o = abi::GetxattrOut { size, padding: 0 };
        self.0.bytes(&[o.as_bytes()])
    }

    pub fn data(self, d: &[u8]) {
        self.0.bytes(&[d])
    }
}

impl ReplyLseek {
    pub fn offset(self, offset: i64) {
        let o = abi::LseekOut {
            offset: offset as u64,
        };
        self.0.bytes(&[o.as_bytes()])
    }
}

impl ReplyIoctl {
    pub fn ioctl(self, result: i32, data: &[u8]) {
        let o = abi::IoctlOut {
            result,
            ..Default::default()
        };
        self.0.bytes(&[o.as_bytes(), data])
    }
}

/// Directory entries packed into at most `size` bytes (the request's
/// buffer size), each padded to 8 bytes.
struct DirBuf {
    reply: Reply,
    buf: Vec<u8>,
    size: usize,
}

impl DirBuf {
    fn new(reply: Reply, size: u32) -> Self {
        let size = size as usize;
        DirBuf {
            reply,
            buf: Vec::with_capacity(size.min(1 << 20)),
            size,
        }
    }

    /// Append `head` (READDIRPLUS's entry, or nothing), the dirent and
    /// the name; true if it did not fit (nothing was added).
    fn push(&mut self, head: &[u8], d: abi::Dirent, name: &[u8]) -> bool {
        let len =
            (head.len() + std::mem::size_of::<abi::Dirent>() + name.len()).next_multiple_of(8);
        if self.buf.len() + len > self.size {
            return true;
        }
        self.buf.extend_from_slice(head);
        self.buf.extend_from_slice(d.as_bytes());
        self.buf.extend_from_slice(name);
        self.buf.resize(self.buf.len().next_multiple_of(8), 0);
        false
    }
}

fn dirent(ino: INodeNo, offset: u64, kind: FileType, name: &[u8]) -> abi::Dirent {
    abi::Dirent {
        ino: ino.0,
        off: offset,
        namelen: name.len() as u32,
        typ: kind.dirent_type(),
    }
}

/// READDIR: entries packed into at most `size` bytes.
pub struct ReplyDirectory(DirBuf);

impl ReplyDirectory {
    pub fn new(reply: Reply, size: u32) -> Self {
        ReplyDirectory(DirBuf::new(reply, size))
    }

    /// Add an entry; true if it did not fit (it was not added).
    pub fn add(&mut self, ino: INodeNo, offset: u64, kind: FileType, name: &[u8]) -> bool {
        self.0.push(&[], dirent(ino, offset, kind, name), name)
    }

    /// Add an entry of unknown type (DT_UNKNOWN), as XFS lists an entry
    /// without a file type whose inode it has not read.
    pub fn add_unknown(&mut self, ino: INodeNo, offset: u64, name: &[u8]) -> bool {
        let d = abi::Dirent {
            ino: ino.0,
            off: offset,
            namelen: name.len() as u32,
            typ: 0,
        };
        self.0.push(&[], d, name)
    }

    pub fn ok(self) {
        self.0.reply.bytes(&[&self.0.buf])
    }

    pub fn error(self, errno: i32) {
        self.0.reply.error(errno)
    }
}

/// READDIRPLUS: entries with their attributes.
pub struct ReplyDirectoryPlus(DirBuf);

impl ReplyDirectoryPlus {
    pub fn new(reply: Reply, size: u32) -> Self {
        ReplyDirectoryPlus(DirBuf::new(reply, size))
    }

    /// Add an entry; true if it did not fit (it was not added, and the
    /// kernel takes no reference for it).
    pub fn add(
        &mut self,
        ino: INodeNo,
        offset: u64,
        name: &[u8],
        ttl: &Duration,
        attr: &FileAttr,
        gen: Generation,
    ) -> bool {
        let mut e = entry_out(ttl, attr, gen);
        e.nodeid = ino.0;
        self.0
            .push(e.as_bytes(), dirent(ino, offset, attr.kind, name), name)
    }

    /// Add an entry whose inode cannot be read: the name and inode number
    /// are listed (`d_type` as given, 0 for DT_UNKNOWN) with node id 0,
    /// which tells the kernel "no attributes", so that a later lookup of
    /// the name reports the error. (A zero inode number instead would
    /// make libc's readdir skip the entry: the file would vanish.)
    pub fn add_unattributed(&mut self, ino: INodeNo, offset: u64, name: &[u8], dtype: u32) -> bool {
        let e = abi::EntryOut::default();
        let d = abi::Dirent {
            ino: ino.0,
            off: offset,
            namelen: name.len() as u32,
            typ: dtype,
        };
        self.0.push(e.as_bytes(), d, name)
    }

    pub fn ok(self) {
        self.0.reply.bytes(&[&self.0.buf])
    }

    pub fn error(self, errno: i32) {
        self.0.reply.error(errno)
    }
}
