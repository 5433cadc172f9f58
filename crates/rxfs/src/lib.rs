//! rxfs: XFS v5 in userspace.
//!
//! Layers, bottom up:
//! - [`bdev`]: every byte of I/O goes through the [`bdev::BlockDevice`] trait.
//! - [`format`]: the on-disk format, pure (no I/O): layouts, decoders, verifiers.
//! - [`geometry`]: sizes and address-space conversions from the superblock.
//! - [`log`]: the log writer's lower half: grant heads, log buffers, forces.
//! - [`xact`]: the transaction contract ([`xact::MetaTx`]) every metadata
//!   algorithm is written against, and the logged transaction.
//! - [`cache`], [`cil`], [`ail`]: the write path under transactions: the
//!   buffer and inode cache with the read view, delayed logging, write-back.
//! - [`alloc`] and the other algorithm modules: free space, inodes,
//!   directories, file mappings, on top of [`xact::MetaTx`].
//! - [`fs`]: a mounted filesystem: metadata reads through verifiers, inodes,
//!   fork mapping, directories, attributes, symlinks, the log state; on a
//!   read-write mount ([`fs::rw`]) the operations that change it.
//!
//! Lock order of the write path (outermost first), each module documenting
//! its own part:
//! 1. inode locks (`ilock`), ascending inode number;
//! 2. the log reservation (grant heads may wait for the AIL; nothing below
//!    is held while waiting);
//! 3. AGI buffers, then AGF buffers, ascending AG; then other buffers
//!    ([`xact`]);
//! 4. the CIL's push order, context, item and list locks ([`cil`]);
//! 5. the AIL lock, then an item's state ([`ail`]);
//! 6. the log writer's core lock, then the grant heads' lock ([`log`]).
//!
//! The read path holds at most one lock at a time; the inode cache lock is
//! never held across I/O.

pub mod ag;
pub mod ail;
pub mod alloc;
pub mod attrop;
pub mod bdev;
pub mod bmapop;
pub mod btree;
pub mod cache;
pub mod check;
pub mod cil;
pub mod cred;
pub mod dirop;
pub mod error;
pub mod format;
pub mod fs;
pub mod geometry;
pub mod ialloc;
pub mod log;
pub mod mkfs;
pub mod ns;
pub mod populate;
pub mod recover;
pub mod rmap;
pub mod types;
pub mod xact;

pub use error::{Error, Result};
pub use fs::{Filesystem, MountOptions};
