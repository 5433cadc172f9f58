//! rxfs: XFS v5 in userspace.
//!
//! Layers, bottom up:
//! - [`bdev`]: every byte of I/O goes through the [`bdev::BlockDevice`] trait.
//! - [`format`]: the on-disk format, pure (no I/O): layouts, decoders, verifiers.
//! - [`geometry`]: sizes and address-space conversions from the superblock.
//! - [`log`]: the log writer's lower half: grant heads, log buffers, forces.
//! - [`fs`]: a mounted filesystem: metadata reads through verifiers, inodes,
//!   fork mapping, directories, attributes, symlinks, the log state.
//!
//! Lock order (outermost first): none of the read path holds more than one
//! lock at a time; the inode cache lock is never held across I/O.

pub mod alloc;
pub mod bdev;
pub mod error;
pub mod format;
pub mod fs;
pub mod geometry;
pub mod ialloc;
pub mod log;
pub mod types;
pub mod xact;

pub use error::{Error, Result};
pub use fs::{Filesystem, MountOptions};
