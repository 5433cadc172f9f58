//! The session: the INIT handshake, then event loops, each on its own
//! clone of the `/dev/fuse` descriptor, until the kernel drops the
//! connection (unmount).
//!
//! Loops: the first reads on the session's descriptor; every other one
//! opens `/dev/fuse` again and binds it to the same connection
//! (`FUSE_DEV_IOC_CLONE`). The kernel hands each pending request to
//! whichever loop reads first and takes the reply on the descriptor the
//! request was read from. A loop runs its request's handler to the end
//! and answers from its own buffer: no queue, no handoff, no copy of a
//! write's data. Reads that fail with ENOENT (the request was
//! interrupted before we read it), EINTR or EAGAIN are retried; ENODEV
//! ends the loop: the filesystem was unmounted.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use zerocopy::IntoBytes;

use super::abi::{self, init};
use super::gate::{Parking, ReadGate};
use super::mount::{self, MountSpec, Mounted};
use super::reply::{AnswerHook, Channel, Reply};
use super::request::{self, Op, Request};
use super::types::INodeNo;
use super::uring;

/// What the filesystem asks for at INIT.
#[derive(Debug, Clone, Copy)]
pub struct InitWants {
    /// `init::*` capabilities wanted (granted where the kernel offers them).
    pub flags: u64,
    pub max_readahead: u32,
    pub max_write: u32,
    /// Serve over io_uring: None when the kernel offers it, Some(true)
    /// required (INIT fails otherwise), Some(false) never.
    pub uring: Option<bool>,
}

/// The request handlers.
pub trait Handler: Send + Sync + 'static {
    /// The capabilities to ask the kernel for.
    fn init(&self) -> InitWants;
    /// The capabilities the kernel granted (called once, before the
    /// first request is dispatched).
    fn granted(&self, _flags: u64) {}
    /// Serve one request. Every op but FORGET and BATCH_FORGET must be
    /// answered through `reply` (dropping it answers EIO).
    fn dispatch(&self, req: &Request, op: Op<'_>, reply: Reply);
}

/// Who may use the mount beyond what the kernel checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acl {
    /// The kernel admits only the mounting user (no `allow_other`).
    Owner,
    /// `allow_other` for the kernel; we answer EACCES to anyone but root
    /// and the owner (`auto_unmount` on a private mount).
    RootAndOwner,
    /// Everyone.
    All,
}

/// Notifications to the kernel, from any thread.
#[derive(Clone)]
pub struct Notifier {
    ch: Arc<Channel>,
}

impl Notifier {
    /// Drop the kernel's cached attributes of `ino` and, for `len`
    /// bytes from `off` (`off` < 0: none), its cached pages.
    pub fn inval_inode(&self, ino: INodeNo, off: i64, len: i64) -> io::Result<()> {
        let o = abi::NotifyInvalInodeOut {
            ino: ino.0,
            off,
            len,
        };
        self.ch.message(0, abi::NOTIFY_INVAL_INODE, &[o.as_bytes()])
    }
}

/// A mounted filesystem not yet served.
pub struct Session {
    ch: Arc<Channel>,
    watcher: Option<std::process::Child>,
    threads: usize,
    acl: Acl,
    // SAFETY-free: getuid at mount time.
    owner: u32,
}

/// Room for the largest request: a write of `max_write` bytes and its
/// headers.
fn buffer_size(max_write: u32) -> usize {
    max_write as usize + 64 * 1024
}

impl Session {
    /// Mount at `mnt`; `threads` event loops will serve it.
    pub fn mount(
        mnt: &std::path::Path,
        spec: &MountSpec,
        threads: usize,
        acl: Acl,
    ) -> io::Result<Session> {
        let Mounted { fd, watcher } = mount::mount(mnt, spec)?;
        Ok(Session {
            ch: Arc::new(Channel::new(fd)),
            watcher,
            threads: threads.max(1),
            acl,
            // SAFETY: getuid has no preconditions.
            owner: unsafe { libc::getuid() },
        })
    }

    pub fn notifier(&self) -> Notifier {
        Notifier {
            ch: self.ch.clone(),
        }
    }

    /// Serve until unmounted: INIT, then the loops. Returns when every
    /// loop has ended (each answered the request it was running).
    pub fn run<H: Handler>(self, h: Arc<H>) -> io::Result<()> {
        let wants = h.init();
        let size = buffer_size(wants.max_write);
        let mut buf = vec![0u8; size];
        let Some(granted) = self.handshake(&mut buf, &wants)? else {
            return Ok(());
        };
        h.granted(granted);
        let uring = granted & init::OVER_IO_URING != 0;
        let rings = if uring {
            let queues = uring::possible_cpus();
            let per_queue = (self.threads / queues).max(2);
            match uring::Rings::start(self.ch.raw(), h.clone(), queues, per_queue, size) {
                Ok(r) => Some(r),
                Err(e) => {
                    errln!("rxfs: FUSE over io_uring failed ({e}); serving /dev/fuse only");
                    None
                }
            }
        } else {
            None
        };
        // With rings, /dev/fuse carries FORGET and INTERRUPT (and what
        // came before the rings were ready): two loops.
        let dev_loops = if rings.is_some() { 2 } else { self.threads };
        let gate = Arc::new(ReadGate::new(READ_LIMIT));
        let mut workers = Vec::new();
        for i in 1..dev_loops {
            let ch = Arc::new(Channel::new(clone_fd(&self.ch)?));
            let (h, acl, owner, gate) = (h.clone(), self.acl, self.owner, gate.clone());
            let t = std::thread::Builder::new()
                .name(format!("rxfs-fuse-{i}"))
                .spawn(move || serve_loop(&ch, &*h, acl, owner, gate, vec![0u8; size]))?;
            workers.push(t);
        }
        let r = serve_loop(&self.ch, &*h, self.acl, self.owner, gate, buf);
        if let Some(rings) = rings {
            rings.finish();
        }
        for w in workers {
            match w.join() {
                Ok(Err(e)) => errln!("rxfs: FUSE event loop: {e}"),
                Err(_) => errln!("rxfs: FUSE event loop panicked"),
                Ok(Ok(())) => {}
            }
        }
        drop(self.watcher);
        r
    }

    /// Read INIT and answer it: the capabilities granted, None if the
    /// connection ended first.
    fn handshake(&self, buf: &mut [u8], wants: &InitWants) -> io::Result<Option<u64>> {
        loop {
            let Some(n) = read_request(&self.ch, buf)? else {
                return Ok(None);
            };
            let Some((req, op)) = request::parse(&buf[..n]) else {
                continue;
            };
            let reply = Reply::new(self.ch.clone(), req.unique);
            let Op::Init(k) = op else {
                // Nothing but INIT may come first.
                reply.error(libc::EIO);
                continue;
            };
            if k.major != abi::KERNEL_VERSION {
                reply.error(libc::EPROTO);
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("kernel FUSE protocol {}.{} (want 7)", k.major, k.minor),
                ));
            }
            let offered = if k.flags as u64 & init::INIT_EXT != 0 {
                k.flags as u64 | (k.flags2 as u64) << 32
            } else {
                k.flags as u64
            };
            let mut base = init::ASYNC_READ | init::BIG_WRITES | init::MAX_PAGES | init::INIT_EXT;
            if wants.uring != Some(false) {
                base |= init::OVER_IO_URING;
            }
            let granted = (wants.flags | base) & offered;
            let uring = granted & init::OVER_IO_URING != 0;
            if wants.uring == Some(true) && !uring {
                reply.error(libc::EPROTO);
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the kernel does not offer FUSE over io_uring \
                     (kernel 6.14+ with /sys/module/fuse/parameters/enable_uring = Y)",
                ));
            }
            let page = 4096u32;
            let out = abi::InitOut {
                major: abi::KERNEL_VERSION,
                minor: abi::KERNEL_MINOR_VERSION.min(k.minor),
                max_readahead: wants.max_readahead.min(k.max_readahead),
                flags: granted as u32,
                max_background: 16,
                congestion_threshold: 12,
                max_write: wants.max_write,
                time_gran: 1,
                max_pages: wants.max_write.div_ceil(page) as u16,
                flags2: (granted >> 32) as u32,
                ..Default::default()
            };
            reply.bytes(&[out.as_bytes()]);
            return Ok(Some(granted));
        }
    }
}

/// A new descriptor bound to the session's connection.
fn clone_fd(ch: &Channel) -> io::Result<OwnedFd> {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")?;
    let fd: OwnedFd = dev.into();
    let mut master = ch.raw() as u32;
    // SAFETY: the ioctl reads one u32 from a live local.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), abi::DEV_IOC_CLONE, &mut master) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Read one request; `None` once the filesystem is unmounted.
fn read_request(ch: &Channel, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: buf is a live, writable buffer of its length.
        let n = unsafe { libc::read(ch.raw(), buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOENT | libc::EINTR | libc::EAGAIN) => continue,
            Some(libc::ENODEV) => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Loops waiting in `read` at once while the mount is not loaded
/// ([`ReadGate`]): two, so that one caller's next request finds a loop
/// ready while the last one answers. Measured with 2, 3 and 64 (no gate):
/// see the gate's module doc.
const READ_LIMIT: usize = 2;

fn serve_loop(
    ch: &Arc<Channel>,
    h: &dyn Handler,
    acl: Acl,
    owner: u32,
    gate: Arc<ReadGate>,
    buf: Vec<u8>,
) -> io::Result<()> {
    let me = Arc::new(Parking::default());
    let r = serve_gated(ch, h, acl, owner, &gate, &me, buf);
    match r {
        // Unmounted: every parked loop stops too.
        Ok(()) => gate.stop(),
        // This loop's read failed: the others serve on without it.
        Err(_) => gate.leave(),
    }
    r
}

fn serve_gated(
    ch: &Arc<Channel>,
    h: &dyn Handler,
    acl: Acl,
    owner: u32,
    gate: &Arc<ReadGate>,
    me: &Arc<Parking>,
    mut buf: Vec<u8>,
) -> io::Result<()> {
    // An answer ends the loop's count as running (see the gate).
    let hook: AnswerHook = {
        let (gate, me) = (gate.clone(), me.clone());
        Arc::new(move || gate.answered(&me))
    };
    while gate.enter(me) {
        let Some(n) = read_request(ch, &mut buf)? else {
            return Ok(());
        };
        // The caller's pid (fuse_in_header.pid) tells the gate how many
        // callers it serves.
        let pid = buf[..n]
            .get(32..36)
            .map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap_or([0; 4])));
        gate.taken(me, pid);
        let Some((req, op)) = request::parse(&buf[..n]) else {
            errln!("rxfs: a malformed FUSE message ({n} bytes) was dropped");
            continue;
        };
        super::DEV_REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match op {
            // No answer expected.
            Op::Forget { .. } | Op::BatchForget(_) => {
                h.dispatch(&req, op, Reply::new(ch.clone(), 0).answered());
                continue;
            }
            // We never block a request on a signal: the interrupted one
            // finishes and its answer is dropped by the kernel.
            Op::Interrupt => continue,
            _ => {}
        }
        let reply = Reply::new(ch.clone(), req.unique).on_answer(&hook);
        match op {
            Op::Init(_) => reply.error(libc::EIO),
            Op::Destroy => reply.ok(),
            Op::Unknown => reply.error(libc::ENOSYS),
            Op::Malformed => reply.error(libc::EINVAL),
            _ if acl == Acl::RootAndOwner
                && req.uid != 0
                && req.uid != owner
                && req.uid != u32::MAX =>
            {
                reply.error(libc::EACCES)
            }
            op => h.dispatch(&req, op, reply),
        }
    }
    Ok(())
}
