//! The stat(2) view of an inode where XFS computes it rather than stores
//! it: `st_blocks`, `st_blksize` and the device number. One rule each,
//! shared by `rxfs stat`, the FUSE attributes, the manifest and the
//! bindings, so they cannot disagree.

use crate::format::inode::{InodeCore, Timestamp, DIFLAG_EXTSIZE, DIFLAG_REALTIME};
use crate::fs::Filesystem;
use crate::inode::{Fork, Inode};
use crate::types::FileType;

const PAGE_SIZE: u32 = 4096;

/// st_blksize as the kernel's XFS reports it: the block size, at least a
/// page; for a realtime file its extent size (hint, else `rextsize`).
pub fn st_blksize(fs: &Filesystem, core: &InodeCore) -> u32 {
    let bs = fs.geo().blocksize;
    if core.flags & DIFLAG_REALTIME != 0 {
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
            Some(crate::format::inode::decode_rdev(*raw))
        }
        _ => None,
    }
}

/// Everything `stat` reports of one inode, birth time included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub ino: u64,
    /// File type and permission bits, as `st_mode`.
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub blksize: u32,
    /// 512-byte units.
    pub blocks: u64,
    /// (major, minor) of a device file; (0, 0) otherwise.
    pub rdev: (u32, u32),
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub btime: Timestamp,
    /// The inode's generation number (`FS_IOC_GETVERSION`).
    pub generation: u32,
}

impl Stat {
    /// The stat view of `ip`.
    pub fn of(fs: &Filesystem, ip: &Inode) -> Stat {
        let c = &ip.core;
        Stat {
            ino: ip.ino.0,
            mode: u32::from(c.mode),
            nlink: c.nlink,
            uid: c.uid,
            gid: c.gid,
            size: c.size,
            blksize: st_blksize(fs, c),
            blocks: st_blocks(fs, c),
            rdev: rdev(ip).unwrap_or((0, 0)),
            atime: c.atime,
            mtime: c.mtime,
            ctime: c.ctime,
            btime: c.crtime,
            generation: c.gen,
        }
    }

    /// The file type bits of `mode`.
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_mode(self.mode as u16)
    }
}
