//! The metadata cache of a read-write mount: buffers and in-core inodes,
//! and the view of the device the read path sees through them.
//!
//! ```text
//!  transaction ---- join (tx lock) ----> Buf / InodeItem  (working copy in the tx)
//!       | commit: publish working copy as `committed`, pin, insert into CIL
//!       v
//!  committed contents (immutable Arc snapshots) --- read path (CacheDevice) sees them
//!       | checkpoint stable: unpin, AIL at the checkpoint's start LSN
//!       v
//!  AIL write-back: write the committed snapshot if unpinned; clean when the
//!  snapshot written is still the committed one
//! ```
//!
//! ## Invariants
//! - A buffer or inode is written to the device only when unpinned: every
//!   change in the snapshot written is in a checkpoint already on disk.
//! - The snapshot is read *before* the pin count is checked, and commits
//!   pin *before* publishing, so a write-back never writes changes from a
//!   checkpoint that is not yet stable.
//! - `committed` of a buffer not `on_disk` is visible to every read of the
//!   device through [`CacheDevice`]; stale (freed) buffers are dropped from
//!   that view at the commit that freed them and are never written.
//! - One transaction at a time holds a buffer's tx lock; the AIL only ever
//!   try-locks (it never waits on a transaction).

pub mod buf;
pub mod ilock;
pub mod inode_item;
pub mod rtbusy;
pub mod rtsum;
pub mod view;

pub use buf::{Buf, BufCache};
pub use inode_item::{InodeItem, InodeTable};
pub use view::CacheDevice;

use crate::types::Lsn;

/// Log item state shared by buffers and inodes (under the item's mutex).
#[derive(Debug, Default)]
pub struct ItemLog {
    /// CIL context sequence this item is in (0: none).
    pub cil_seq: u64,
    /// Insertion order within the context (relogging moves it to the end).
    pub order: u64,
    /// The item's log vector for its current context.
    pub lv: Option<crate::log::LogVec>,
    /// Checkpoints in flight holding this item.
    pub pin: u32,
    /// Position in the AIL (the start LSN of its last stable checkpoint).
    pub ail_lsn: Option<Lsn>,
    /// CIL sequence of the last commit that changed this item.
    pub last_seq: u64,
    /// Inodes: CIL sequence of the last commit that changed more than
    /// timestamps (what `fdatasync` must make stable, as the kernel's
    /// `ili_fsync_fields` without `XFS_ILOG_TIMESTAMP`).
    pub last_dsync_seq: u64,
}
