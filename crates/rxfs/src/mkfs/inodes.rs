//! The root inode chunk: the root directory (an empty shortform directory
//! that is its own parent, flagged RTINHERIT with `-d rtinherit=1`), the
//! realtime bitmap and summary inodes, and
//! free inodes, as mkfs.xfs writes them; and the realtime bitmap and
//! summary contents (every realtime extent free: one free extent of
//! `rextents`, counted once in the summary at level `rextslog`).
//!
//! mkfs.xfs's details kept: generation 0, change count 2, atime 0 (the
//! other times "now"), attr fork format EXTENTS, the bitmap inode flagged
//! NEWRTBM, modes 040755 (root) and 0100000 (realtime files).

use super::plan::Plan;
use crate::format::dinode_edit::*;
use crate::format::inode::{
    Timestamp, DIFLAG_NEWRTBM, DIFLAG_RTINHERIT, DINODE_CRC_OFF, FMT_EXTENTS, FMT_LOCAL,
};
use crate::format::sb::Superblock;
use crate::format::{bmbt::Extent, crc};
use crate::types::{FileBlock, Ino};

/// A realtime metadata file's extent in the data device: (fs block, len).
#[derive(Debug, Clone, Copy)]
pub struct RtFile {
    pub start: u64,
    pub len: u32,
}

/// The blocks of the root chunk, in order (`chunk_blocks` blocks).
/// `rtinherit`: the root directory passes the realtime flag on.
pub fn chunk(
    p: &Plan,
    sb: &Superblock,
    now: Timestamp,
    rbm: Option<RtFile>,
    rsum: Option<RtFile>,
    rtinherit: bool,
) -> Vec<u8> {
    let isz = p.inodesize as usize;
    let mut out = vec![0u8; (p.chunk_blocks * p.blocksize) as usize];
    let root = p.chunk_ino(0);
    for i in 0..p.chunk_inodes {
        let d = &mut out[i as usize * isz..(i as usize + 1) * isz];
        let ino = p.chunk_ino(i);
        init_free_dinode(d, sb, Ino(ino), 0);
        match i {
            0 => {
                base(d, sb, now, S_IFDIR | 0o755, 2);
                set_format(d, FMT_LOCAL);
                // Empty shortform directory: count 0, i8count 0, parent.
                let fork = data_fork_mut(d);
                fork[..6].fill(0);
                fork[2..6].copy_from_slice(&(root as u32).to_be_bytes());
                set_size(d, 6);
                if rtinherit {
                    set_flags(d, DIFLAG_RTINHERIT);
                }
            }
            1 | 2 => {
                base(d, sb, now, S_IFREG, 1);
                if i == 1 {
                    set_flags(d, DIFLAG_NEWRTBM);
                }
                let file = if i == 1 { rbm } else { rsum };
                if let Some(f) = file {
                    // mkfs.xfs logs these inodes again when it fills
                    // them: the bitmap twice (allocate, free the extents),
                    // the summary once.
                    set_changecount(d, if i == 1 { 4 } else { 3 });
                    set_size(d, f.len as u64 * p.blocksize as u64);
                    set_nblocks(d, f.len as u64);
                    set_nextents(d, 1);
                    Extent {
                        off: FileBlock(0),
                        start: f.start,
                        len: f.len as u64,
                        unwritten: false,
                    }
                    .encode(&mut data_fork_mut(d)[..16]);
                }
            }
            _ => {}
        }
        crc::update(d, DINODE_CRC_OFF);
    }
    out
}

fn base(d: &mut [u8], sb: &Superblock, now: Timestamp, mode: u32, nlink: u32) {
    set_mode(d, mode as u16);
    set_nlink(d, nlink);
    set_format(d, FMT_EXTENTS);
    set_aformat(d, FMT_EXTENTS);
    set_flags2(d, new_flags2(sb));
    set_changecount(d, 2);
    let t = clamp_time(now, sb.has_bigtime());
    set_mtime(d, t);
    set_ctime(d, t);
    set_crtime(d, t);
    set_atime(d, Timestamp { sec: 0, nsec: 0 });
}

/// The realtime bitmap (`rbmblocks` blocks): the first `rextents` bits set
/// (free).
pub fn rt_bitmap(p: &Plan) -> Vec<u8> {
    let mut b = vec![0u8; (p.rbmblocks as u64 * p.blocksize as u64) as usize];
    crate::format::rt::set_bits(&mut b, 0, p.rextents, true);
    b
}

/// The realtime summary (`rsumblocks` blocks): one free extent of length
/// `rextents` starting in bitmap block 0.
pub fn rt_summary(p: &Plan) -> Vec<u8> {
    let mut b = vec![0u8; (p.rsumblocks as u64 * p.blocksize as u64) as usize];
    if p.rextents > 0 {
        let idx = p.rextslog as usize * p.rbmblocks as usize;
        // Summary counters are in host byte order, like the bitmap words.
        b[idx * 4..idx * 4 + 4].copy_from_slice(&1u32.to_ne_bytes());
    }
    b
}
