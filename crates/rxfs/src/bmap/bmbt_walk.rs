//! Reading a bmbt into a [`Tree`], every block verified: the read
//! verifier (magic, CRC, blkno, uuid, owner, level, numrecs range), then
//! the structure across blocks: keys strictly increasing along each level,
//! a child's keys at or above its parent key and below the next one,
//! sibling pointers linking each level left to right, no block reached
//! twice, and as many records as the inode counts. Bad input is a
//! corruption error, never a panic.

use std::collections::HashSet;

use super::bmbt::{decode_ents, fork_bytes, Blk, Ent, Tree, MAXLEVELS, NULLFSBLOCK};
use crate::error::{Error, Location, Result};
use crate::format::bmbt::{self, Extent};
use crate::format::bufkind::BufKind;
use crate::format::{be16, be64};
use crate::types::WhichFork;
use crate::types::{FsBlock, Ino};
use crate::xact::{InodeId, MetaTx};

/// Read and check the whole bmbt of a BTREE-format fork; returns the tree
/// and its records in file order (`nextents` of them, else corruption).
pub fn walk(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    which: WhichFork,
    nextents: u64,
) -> Result<(Tree, Vec<Extent>)> {
    let d = tx.inode(ip);
    let ino = Ino(crate::format::dinode_edit::ino(d));
    let what = match which {
        WhichFork::Data => "inode data fork",
        WhichFork::Attr => "inode attr fork",
    };
    let at = Location::Ino(ino.0);
    let bad = |s: String| Error::corrupt(what, at, s);
    let fork = fork_bytes(d, which);
    if fork.len() < 4 {
        return Err(bad("btree root too small".into()));
    }
    let level = bmbt::root_level(fork);
    let numrecs = bmbt::root_numrecs(fork) as usize;
    let rootmax = bmbt::root_maxrecs(fork.len());
    if level == 0 || level > MAXLEVELS || numrecs == 0 || numrecs > rootmax {
        return Err(bad(format!(
            "bad btree root: level {level}, {numrecs} records (max {rootmax})"
        )));
    }
    let geo = tx.geo().clone();
    if nextents > geo.dblocks {
        return Err(bad(format!("{nextents} extents on a small device")));
    }
    let root: Vec<(u64, u64)> = (0..numrecs)
        .map(|i| (be64(fork, 4 + i * 8), be64(fork, 4 + rootmax * 8 + i * 8)))
        .collect();
    let uuid = tx.sb().metadata_uuid();
    let bs = geo.blocksize as usize;
    let depth = level as usize;
    let mut levels: Vec<Vec<Blk>> = vec![Vec::new(); depth];
    let mut visited = HashSet::new();
    // Entries of the level above the one being read: (key, ptr), plus the
    // key bound of the next parent entry (exclusive).
    let mut parents: Vec<(u64, u64)> = root.clone();
    for w in parents.windows(2) {
        if w[0].0 >= w[1].0 {
            return Err(bad("btree root keys out of order".into()));
        }
    }
    let mut recs = Vec::with_capacity(nextents.min(1 << 20) as usize);
    for l in (0..depth).rev() {
        let mut next = Vec::new();
        let mut prev_key: Option<u64> = None;
        for (pi, &(pkey, ptr)) in parents.iter().enumerate() {
            let fsb = FsBlock(ptr);
            if !geo.fsb_extent_valid(fsb, 1) || !visited.insert(ptr) {
                return Err(bad(format!("bmbt pointer {ptr} invalid or repeated")));
            }
            let daddr = geo.fsb_to_daddr(fsb);
            let bid = tx.read_buf(daddr, bs, BufKind::Bmbt)?;
            let b = tx.buf(bid);
            // The transaction checked the CRC when it joined the block; one
            // changed earlier in this transaction gets its CRC only at
            // commit: check all but the CRC.
            crate::format::bmbt::verify_block_as(
                b,
                daddr,
                ino,
                &uuid,
                l as u16,
                crate::format::crc::Sum::InCore,
            )?;
            let bad_blk = |s: &str| Error::corrupt("bmbt block", Location::Daddr(daddr.0), s);
            let n = be16(b, 6) as usize;
            let left = if pi == 0 {
                NULLFSBLOCK
            } else {
                parents[pi - 1].1
            };
            let right = parents.get(pi + 1).map_or(NULLFSBLOCK, |p| p.1);
            // Siblings across parents: the previous block of this level.
            let want_left = levels[l].last().map_or(left, |x: &Blk| x.fsb);
            if be64(b, 8) != want_left || (pi + 1 < parents.len() && be64(b, 16) != right) {
                return Err(bad_blk("sibling pointers do not link the level"));
            }
            let ents = decode_ents(b, l, n);
            if ents[0].key() < pkey {
                return Err(bad_blk("first key below the parent's key"));
            }
            for e in &ents {
                if prev_key.is_some_and(|p| e.key() <= p) {
                    return Err(bad_blk("keys out of order"));
                }
                if let Some(&(nk, _)) = parents.get(pi + 1) {
                    if e.key() >= nk {
                        return Err(bad_blk("key at or past the next parent key"));
                    }
                }
                prev_key = Some(e.key());
                match *e {
                    Ent::Rec(x) => {
                        if recs.len() as u64 >= nextents {
                            return Err(bad_blk("more extents than the inode counts"));
                        }
                        recs.push(x)
                    }
                    Ent::Ptr { key, fsb } => next.push((key, fsb)),
                }
            }
            levels[l].push(Blk { fsb: ptr, bid, n });
        }
        // The last block of a level has no right sibling.
        if let Some(last) = levels[l].last() {
            if be64(tx.buf(last.bid), 16) != NULLFSBLOCK {
                return Err(bad("last bmbt block of a level has a right sibling".into()));
            }
        }
        parents = next;
    }
    if recs.len() as u64 != nextents {
        return Err(bad(format!(
            "btree holds {} extents, inode says {nextents}",
            recs.len()
        )));
    }
    Ok((
        Tree {
            which,
            ino,
            depth,
            root,
            levels,
        },
        recs,
    ))
}
