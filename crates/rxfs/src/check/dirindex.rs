//! The hash index of leaf- and node-form directories against their data
//! blocks.
//!
//! Lookups (in [`super::dirs`]) prove every data entry can be found
//! through the index; this proves the converse by counting: the live
//! (non-stale) entries of all leaf1/leafn blocks must equal the data
//! entries, `.` and `..` included. Block-form directories are counted by
//! the read path itself (their tail's count against the data block).
//! Reads only the blocks the fork maps in the leaf segment, each through
//! the leaf verifier (DA node blocks are skipped: the lookups walk them).

use crate::error::Result;
use crate::format::be16;
use crate::format::dir_leaf::{decode_leaf, LEAF1_MAGIC, LEAFN_MAGIC};
use crate::fs::Filesystem;
use crate::inode::ReadCtx;
use crate::inode::{Fork, Inode};
use crate::types::{FileBlock, ForkKind};

/// Live entries of the hash index of `dir`, or `None` when the directory
/// has no separate index (shortform or block form).
pub(crate) fn live_index_entries(fs: &Filesystem, dir: &Inode) -> Result<Option<u64>> {
    let Fork::Extents { list, .. } = &dir.data else {
        return Ok(None);
    };
    let dg = fs.dir_geo();
    let step = dg.fsbs() as u64;
    if list.last().is_none_or(|e| e.end() <= step) {
        return Ok(None);
    }
    let (lo, hi) = (dg.leaf_dablk(), dg.free_dablk());
    let uuid = fs.sb().metadata_uuid();
    let mut live = 0u64;
    for e in list {
        let start = e.off.0.max(lo);
        let end = e.end().min(hi);
        let mut blk = start.div_ceil(step) * step;
        while blk + step <= end {
            let Some((daddr, buf)) =
                fs.read_fork_blocks(dir, ForkKind::Data, FileBlock(blk), step as u32)?
            else {
                break;
            };
            let magic = be16(&buf, 8);
            if magic == LEAF1_MAGIC || magic == LEAFN_MAGIC {
                let leaf = decode_leaf(&buf, magic, daddr, dir.ino, &uuid)?;
                live += leaf.entries.len() as u64 - leaf.stale as u64;
            }
            blk += step;
        }
    }
    Ok(Some(live))
}
