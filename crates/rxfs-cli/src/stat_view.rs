//! The stat(2) view of an inode where XFS computes it rather than stores
//! it: `st_blocks`, `st_blksize` and the device number, shared by
//! `rxfs stat`, the FUSE attributes and the manifest (one rule each, so
//! the three cannot disagree).

use rxfs::format::inode::{InodeCore, DIFLAG_EXTSIZE};
use rxfs::inode::{Fork, Inode};
use rxfs::types::FileType;
use rxfs::Filesystem;

const PAGE_SIZE: u32 = 4096;

/// st_blksize as the kernel's XFS reports it: the block size, at least a
/// page; for a realtime file its extent size (hint, else `rextsize`).
pub fn st_blksize(fs: &Filesystem, core: &InodeCore) -> u32 {
    let bs = fs.geo().blocksize;
    if core.flags & rxfs::format::inode::DIFLAG_REALTIME != 0 {
        let ext = if core.flags & DIFLAG_EXTSIZE != 0 && core.extsize != 0 {
            core.extsize
        } else {
            fs.sb().rextsize
        };
        return ext.saturating_mul(bs);
    }
    bs.max(PAGE_SIZE)
}

/// st_blocks as the kernel's XFS reports it: allocated blocks in 512-byte
/// units.
pub fn st_blocks(fs: &Filesystem, core: &InodeCore) -> u64 {
    core.nblocks << (fs.geo().blocklog - 9)
}

/// (major, minor) for device files.
pub fn rdev(ip: &Inode) -> Option<(u32, u32)> {
    match (ip.file_type(), &ip.data) {
        (Some(FileType::CharDev | FileType::BlockDev), Fork::Dev(raw)) => {
            Some(rxfs::format::inode::decode_rdev(*raw))
        }
        _ => None,
    }
}
