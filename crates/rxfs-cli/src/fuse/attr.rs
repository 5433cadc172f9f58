//! Inode attributes as the kernel's XFS reports them, in FUSE form.
//!
//! - `ino` is the XFS inode number (also for the root, whose FUSE node id
//!   is 1), so st_ino through FUSE equals st_ino on a kernel mount.
//! - `blocks` is `di_nblocks` in 512-byte units (no delayed allocations
//!   exist on an image).
//! - `blksize` is what XFS's getattr reports: the realtime extent size (or
//!   the inode's extent size hint) for realtime files, otherwise the larger
//!   of the page size and the block size.
//! - `rdev` is encoded the way the FUSE kernel module decodes it
//!   (`new_decode_dev`): minor low byte, major, then the minor's high bits.
//! - Times keep nanoseconds, also before 1970.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::wire::{FileAttr, FileType as FuseType, INodeNo};
use rxfs::format::inode::{InodeCore, Timestamp};
use rxfs::inode::{Inode, InodeAttrs};
use rxfs::types::FileType;
use rxfs::Filesystem;

/// Linux's `new_encode_dev(MKDEV(major, minor))`, the form FUSE expects.
pub fn encode_dev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

/// The `SystemTime` of an XFS timestamp, `sec + nsec / 10^9` exactly
/// (the reply sends it to the kernel as the same (sec, nsec) pair,
/// seconds rounded down before 1970).
pub fn system_time(t: Timestamp) -> SystemTime {
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::new(t.sec as u64, t.nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + Duration::from_nanos(t.nsec as u64)
    }
}

pub fn fuse_type(t: Option<FileType>) -> FuseType {
    match t {
        Some(FileType::Directory) => FuseType::Directory,
        Some(FileType::Symlink) => FuseType::Symlink,
        Some(FileType::CharDev) => FuseType::CharDevice,
        Some(FileType::BlockDev) => FuseType::BlockDevice,
        Some(FileType::Fifo) => FuseType::NamedPipe,
        Some(FileType::Socket) => FuseType::Socket,
        Some(FileType::Regular) | None => FuseType::RegularFile,
    }
}

pub fn file_attr(fs: &Filesystem, ip: &Inode) -> FileAttr {
    let rdev = crate::stat_view::rdev(ip)
        .map(|(ma, mi)| encode_dev(ma, mi))
        .unwrap_or(0);
    attr_of(fs, ip.ino, &ip.core, rdev)
}

/// [`file_attr`] of the attributes alone ([`Filesystem::iget_attrs`]).
pub fn file_attr_of(fs: &Filesystem, a: &InodeAttrs) -> FileAttr {
    let rdev = a
        .rdev
        .map(|raw| {
            let (ma, mi) = rxfs::format::inode::decode_rdev(raw);
            encode_dev(ma, mi)
        })
        .unwrap_or(0);
    attr_of(fs, a.ino, &a.core, rdev)
}

fn attr_of(fs: &Filesystem, ino: rxfs::types::Ino, c: &InodeCore, rdev: u32) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino.0),
        size: c.size,
        blocks: crate::stat_view::st_blocks(fs, c),
        atime: system_time(c.atime),
        mtime: system_time(c.mtime),
        ctime: system_time(c.ctime),
        crtime: system_time(c.crtime),
        kind: fuse_type(FileType::from_mode(c.mode)),
        perm: c.mode & 0o7777,
        nlink: c.nlink,
        uid: c.uid,
        gid: c.gid,
        rdev,
        blksize: crate::stat_view::st_blksize(fs, c),
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's `new_decode_dev`, to check the round trip.
    fn decode(dev: u32) -> (u32, u32) {
        ((dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00))
    }

    #[test]
    fn dev_round_trip() {
        for (ma, mi) in [(0, 0), (4, 5), (8, 1), (259, 0), (511, 262_143), (1, 256)] {
            assert_eq!(decode(encode_dev(ma, mi)), (ma, mi));
        }
    }

    #[test]
    fn times_survive_the_wire() {
        for (sec, nsec) in [
            (0, 0),
            (1_700_000_000, 7),
            (-1, 500_000_000),
            (-2_147_483_648, 1),
        ] {
            assert_eq!(
                crate::fuse::wire::types::time_pair(system_time(Timestamp { sec, nsec })),
                (sec, nsec)
            );
        }
    }
}
