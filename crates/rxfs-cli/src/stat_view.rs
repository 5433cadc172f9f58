//! The stat(2) view of an inode where XFS computes it rather than stores
//! it: `st_blocks`, `st_blksize` and the device number, shared by
//! `rxfs stat`, the FUSE attributes and the manifest (one rule each, so
//! the three cannot disagree).

use rxfs::format::inode::DIFLAG_EXTSIZE;
use rxfs::inode::{Fork, Inode};
use rxfs::types::FileType;
use rxfs::Filesystem;

const PAGE_SIZE: u32 = 4096;

/// st_blksize as the kernel's XFS reports it: the block size, at least a
/// page; for a realtime file its extent size (hint, else `rextsize`).
pub fn st_blksize(fs: &Filesystem, ip: &Inode) -> u32 {
    let bs = fs.geo().blocksize;
    if ip.is_realtime() {
        let ext = if ip.core.flags & DIFLAG_EXTSIZE != 0 && ip.core.extsize != 0 {
            ip.core.extsize
        } else {
            fs.sb().rextsize
        };
        return ext.saturating_mul(bs);
    }
    bs.max(PAGE_SIZE)
}

/// st_blocks as the kernel's XFS reports it: allocated blocks in 512-byte
/// units.
pub fn st_blocks(fs: &Filesystem, ip: &Inode) -> u64 {
    ip.core.nblocks << (fs.geo().blocklog - 9)
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
