//! Recovery: the whole mapping of a btree-format fork, for freeing the
//! fork of an unlinked inode ([`crate::recover::iunlink`]).
//!
//! ```text
//!  inode fork (bmdr root)        level L >= 1, numrecs n
//!    | 4-byte header | keys[maxrecs] (u64) | ptrs[maxrecs] (u64 fsblock) |
//!  node / leaf blocks (BMA3)     72-byte long header:
//!    level 4, numrecs 6, blkno 24, uuid 40, owner 56 (the inode), crc 64
//!    node:  keys[maxrecs] at 72, ptrs[maxrecs] at 72 + 8 * maxrecs
//!    leaf:  16-byte extent records at 72
//! ```
//!
//! The walk reads every block of the tree through the transaction
//! (verified: magic, CRC, self address, uuid), checks each block's level
//! (one below its parent) and owner, and collects the leaf extents and the
//! tree blocks. Bounds: levels below [`MAX_LEVELS`]; at most `cap` blocks
//! visited (the caller passes the inode's block count), so a cycle or a
//! shared block ends in a corruption error, never a loop.

use crate::error::{Error, Location, Result};
use crate::format::bmbt::{
    block_maxrecs, root_level, root_maxrecs, root_numrecs, Extent, EXTENT_REC_SIZE, LBLOCK_HDR_SIZE,
};
use crate::format::bufkind::BufKind;
use crate::format::{be16, be64};
use crate::types::{FsBlock, Ino};
use crate::xact::{BufId, MetaTx};

/// Deepest bmap btree accepted (the kernel's limit for any fork is lower).
pub const MAX_LEVELS: u16 = 10;

/// Everything a btree fork maps: leaf extents, and the tree's own blocks
/// (joined buffer, filesystem block).
#[derive(Debug, Default)]
pub struct BtreeMap {
    pub extents: Vec<Extent>,
    pub blocks: Vec<(BufId, FsBlock)>,
}

/// Walk the btree rooted in `root` (the fork bytes of inode `ino`),
/// visiting at most `cap` tree blocks.
pub fn btree_fork_map(
    tx: &mut dyn MetaTx,
    root: &[u8],
    ino: Ino,
    cap: u64,
    rt: bool,
) -> Result<BtreeMap> {
    let bad = |d: String| Err(Error::corrupt("bmap btree", Location::Ino(ino.0), d));
    if root.len() < 4 + 16 {
        return bad(format!("root of {} bytes", root.len()));
    }
    let (level, n, maxr) = (
        root_level(root),
        root_numrecs(root) as usize,
        root_maxrecs(root.len()),
    );
    if level == 0 || level >= MAX_LEVELS || n == 0 || n > maxr {
        return bad(format!(
            "root level {level} with {n} records (room for {maxr})"
        ));
    }
    let mut stack: Vec<(u64, u16)> = (0..n)
        .map(|i| (be64(root, 4 + 8 * maxr + 8 * i), level - 1))
        .collect();
    let bs = tx.geo().blocksize as usize;
    let mut out = BtreeMap::default();
    let mut seen = std::collections::HashSet::new();
    while let Some((fsb, want)) = stack.pop() {
        if out.blocks.len() as u64 >= cap {
            return bad(format!("more than {cap} tree blocks"));
        }
        if !tx.geo().fsb_extent_valid(FsBlock(fsb), 1) {
            return bad(format!("child pointer {fsb} outside the AGs"));
        }
        let daddr = tx.geo().fsb_to_daddr(FsBlock(fsb));
        let b = tx.read_buf(daddr, bs, BufKind::Bmbt)?;
        if !seen.insert(b) {
            return bad(format!("block {fsb} reached twice"));
        }
        out.blocks.push((b, FsBlock(fsb)));
        let blk = tx.buf(b);
        let (lvl, nr, owner) = (be16(blk, 4), be16(blk, 6) as usize, be64(blk, 56));
        if lvl != want || owner != ino.0 {
            return bad(format!(
                "block {fsb}: level {lvl} (expected {want}), owner {owner}"
            ));
        }
        let max = block_maxrecs(bs, lvl == 0);
        if nr == 0 || nr > max {
            return bad(format!("block {fsb}: {nr} records (room for {max})"));
        }
        if lvl == 0 {
            for i in 0..nr {
                let at = LBLOCK_HDR_SIZE + i * EXTENT_REC_SIZE;
                let e = Extent::decode(&blk[at..at + EXTENT_REC_SIZE]);
                if !super::iunlink::extent_ok(&*tx, &e, rt) {
                    return bad(format!(
                        "extent of {} blocks at block {} is not inside one AG (or the \
                         realtime device)",
                        e.len, e.start
                    ));
                }
                out.extents.push(e);
            }
        } else {
            let ptrs = LBLOCK_HDR_SIZE + 8 * max;
            for i in 0..nr {
                stack.push((be64(blk, ptrs + 8 * i), lvl - 1));
            }
        }
    }
    Ok(out)
}
