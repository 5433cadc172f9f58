//! Our own FUSE transport: the kernel protocol spoken over `/dev/fuse`
//! without a FUSE library.
//!
//! - [`abi`]: the message layouts and numbers of the kernel's `fuse.h`.
//! - [`request`]: a request's header and its decoded arguments ([`Op`]).
//! - [`reply`]: answering a request exactly once ([`Reply`] and a typed
//!   reply per kind of answer).
//! - [`types`]: node ids, open flags, file types and attributes.
//! - [`mount`]: mount(2) for root, `fusermount3` for everyone else.
//! - [`session`]: INIT, then one event loop per cloned descriptor.
//! - [`gate`]: how many of those loops wait in `read` at once.
//! - [`uring`]: the event loops of FUSE over io_uring.
//! - [`trace`]: a request/reply trace for debugging (`RXFS_FUSE_TRACE`).
//!
//! Why our own: the protocol requests rxfs needs (FUSE_TMPFILE,
//! FUSE_STATX) are not in the FUSE crates, and the event loops are
//! where the per-request cost of a FUSE filesystem is decided.

pub mod abi;
pub mod gate;
pub mod mount;
pub mod reply;
pub mod request;
pub mod session;
pub mod trace;
pub mod types;
pub mod uring;

use std::sync::atomic::{AtomicU64, Ordering};

/// Requests served through `/dev/fuse` reads, and through io_uring
/// entries (this process serves one mount).
static DEV_REQUESTS: AtomicU64 = AtomicU64::new(0);
static RING_REQUESTS: AtomicU64 = AtomicU64::new(0);
/// io_uring loops pinning themselves to their queue's CPU, and unpinning
/// (see [`uring`]'s placement).
static RING_PINS: AtomicU64 = AtomicU64::new(0);
static RING_UNPINS: AtomicU64 = AtomicU64::new(0);

/// The transport's counters, as `rxfs stats` lists them.
pub fn counters() -> [(&'static str, u64); 4] {
    [
        ("fuse_dev_requests", DEV_REQUESTS.load(Ordering::Relaxed)),
        ("fuse_uring_requests", RING_REQUESTS.load(Ordering::Relaxed)),
        ("fuse_uring_pins", RING_PINS.load(Ordering::Relaxed)),
        ("fuse_uring_unpins", RING_UNPINS.load(Ordering::Relaxed)),
    ]
}

pub use mount::MountSpec;
pub use reply::{
    Reply, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyStatx, ReplyWrite, ReplyXattr,
};
pub use request::{Op, Request};
pub use session::{Acl, Handler, InitWants, Notifier, Session};
pub use types::{FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, TimeOrNow};
