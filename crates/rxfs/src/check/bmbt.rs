//! Walking an inode's bmbt for the checker: the block list (for the space
//! map and di_nblocks) and the tree invariants the extent loader does not
//! look at.
//!
//! Invariants: every block passes [`crate::format::bmbt::verify_block`] (magic, CRC, blkno,
//! UUID, owner, level, numrecs bounds); each child's first key equals its
//! parent's key for it; keys strictly increase inside a block; at each
//! level the blocks met left to right form one sibling chain with null
//! ends. The walk goes level by level, visits each block at most once and
//! at most as many blocks as the device has.

use std::collections::HashSet;

use crate::format::be64;
use crate::format::bmbt::{self, LBLOCK_HDR_SIZE};
use crate::fs::Filesystem;
use crate::inode::ReadCtx;
use crate::types::{FsBlock, Ino};

const NULL_FSBLOCK: u64 = u64::MAX;

/// Blocks of the tree (in walk order), the leaf records, and the problems
/// found.
pub(crate) struct BmbtWalk {
    pub blocks: Vec<u64>,
    pub extents: Vec<bmbt::Extent>,
    pub problems: Vec<String>,
}

/// Walk the bmbt whose root is the fork bytes `root`.
pub(crate) fn walk(fs: &Filesystem, ino: Ino, root: &[u8]) -> BmbtWalk {
    let mut w = BmbtWalk {
        blocks: Vec::new(),
        extents: Vec::new(),
        problems: Vec::new(),
    };
    if root.len() < 4 {
        w.problems.push("bmbt root too small".into());
        return w;
    }
    let level = bmbt::root_level(root);
    let n = bmbt::root_numrecs(root) as usize;
    let maxrecs = bmbt::root_maxrecs(root.len());
    if level == 0 || n == 0 || n > maxrecs {
        w.problems
            .push(format!("bmbt root level {level} with {n} records"));
        return w;
    }
    let keys: Vec<u64> = (0..n).map(|i| be64(root, 4 + i * 8)).collect();
    let ptrs: Vec<u64> = (0..n)
        .map(|i| be64(root, 4 + maxrecs * 8 + i * 8))
        .collect();
    if let Err(p) = keys_increasing(&keys) {
        w.problems.push(format!("bmbt root: {p}"));
    }
    let mut cur: Vec<(u64, u64)> = ptrs.into_iter().zip(keys).collect();
    let mut visited = HashSet::new();
    let geo = fs.geo();
    let uuid = fs.sb().metadata_uuid();
    let bs = geo.blocksize as usize;
    for lvl in (0..level).rev() {
        let mut next = Vec::new();
        let mut prev: Option<(u64, u64)> = None; // (block, its rightsib)
        for &(ptr, pkey) in &cur {
            if !geo.fsb_extent_valid(FsBlock(ptr), 1) || !visited.insert(ptr) {
                w.problems
                    .push(format!("bmbt pointer {ptr} out of range or reached twice"));
                return w;
            }
            if visited.len() as u64 > geo.dblocks {
                w.problems.push("bmbt larger than the device".into());
                return w;
            }
            w.blocks.push(ptr);
            let daddr = geo.fsb_to_daddr(FsBlock(ptr));
            let buf = match fs.read_meta(daddr, bs, |b, d| {
                crate::format::bmbt::verify_block(b, d, ino, &uuid, lvl)
            }) {
                Ok(b) => b,
                Err(e) => {
                    w.problems.push(e.to_string());
                    return w;
                }
            };
            let (left, right) = (be64(&buf, 8), be64(&buf, 16));
            let expect_left = prev.map_or(NULL_FSBLOCK, |p| p.0);
            if left != expect_left || prev.is_some_and(|p| p.1 != ptr) {
                w.problems.push(format!(
                    "bmbt block {ptr} (level {lvl}): sibling chain broken (left {left:#x})"
                ));
            }
            prev = Some((ptr, right));
            let n = crate::format::be16(&buf, 6) as usize;
            let keys: Vec<u64> = if lvl == 0 {
                let recs = (0..n).map(|i| bmbt::Extent::decode(&buf[LBLOCK_HDR_SIZE + i * 16..]));
                let first = w.extents.len();
                w.extents.extend(recs);
                w.extents[first..].iter().map(|e| e.off.0).collect()
            } else {
                (0..n)
                    .map(|i| be64(&buf, LBLOCK_HDR_SIZE + i * 8))
                    .collect()
            };
            if keys.first() != Some(&pkey) {
                w.problems.push(format!(
                    "bmbt block {ptr} (level {lvl}): first key {:?}, parent key {pkey}",
                    keys.first()
                ));
            }
            if let Err(p) = keys_increasing(&keys) {
                w.problems
                    .push(format!("bmbt block {ptr} (level {lvl}): {p}"));
            }
            if lvl > 0 {
                let maxrecs = bmbt::block_maxrecs(bs, false);
                let off = LBLOCK_HDR_SIZE + maxrecs * 8;
                for (i, k) in keys.iter().enumerate() {
                    next.push((be64(&buf, off + i * 8), *k));
                }
            }
        }
        if let Some((b, right)) = prev {
            if right != NULL_FSBLOCK {
                w.problems.push(format!(
                    "bmbt block {b} (level {lvl}) is the last of its level but has right sibling {right:#x}"
                ));
            }
        }
        cur = next;
    }
    w
}

fn keys_increasing(keys: &[u64]) -> Result<(), String> {
    for (i, k) in keys.windows(2).enumerate() {
        if k[1] <= k[0] {
            return Err(format!(
                "key {} ({}) not above key {i} ({})",
                i + 1,
                k[1],
                k[0]
            ));
        }
    }
    Ok(())
}
