//! The stat(2) view of an inode where XFS computes it rather than stores
//! it (`st_blocks`, `st_blksize`, the device number): the library's rules
//! ([`rxfs::volume::stat`]), shared by `rxfs stat`, the FUSE attributes,
//! the manifest and the bindings.

pub use rxfs::volume::stat::{rdev, st_blksize, st_blocks};
