//! BTREE-format forks: the block-mapping btree (bmbt) rooted in the inode.
//!
//! ```text
//! inode fork (bmdr root):  level u16 | numrecs u16 | keys[rootmax] u64 | ptrs[rootmax] u64
//! child block (BMA3):      72-byte long header | leaf: extent records (16 bytes each)
//!                                              | node: keys[max] u64, ptrs[max] u64
//! header: magic 0, level 4, numrecs 6, leftsib 8, rightsib 16, blkno 24,
//!         lsn 32, uuid 40, owner 56, crc 64
//! ```
//! `rootmax = (fork bytes - 4) / 16`; `max = (blocksize - 72) / 16` for
//! leaves and nodes alike; a node's key is the file offset of the first
//! record under its pointer.
//!
//! Model: [`walk`] reads every block (verified) into a [`Tree`]: per level
//! the blocks left to right. An edit is a *range replacement*: entries
//! `[a, b)` of a level are replaced by new ones. Only the blocks holding
//! that range are rewritten (widened by one neighbour when the result
//! would be underfull), their entries spread evenly over as many blocks as
//! needed (old blocks reused first, new ones allocated near them, surplus
//! ones freed), sibling pointers of the two outside neighbours fixed. The
//! rewritten blocks' (first key, pointer) pairs then replace their old
//! entries one level up; because the entries of level `l + 1` are exactly
//! the blocks of level `l` in order, entry indices there are block indices
//! here. The inode root grows a level when it overflows and pulls its only
//! child back in when that child fits. A record edit therefore touches
//! O(depth) blocks (plus the blocks the changed range itself spans).
//!
//! Invariants kept (and checked by [`walk`] on what is read, except the
//! minimum fill, which kernel-made trees need not have after all edits):
//! - every non-root block holds 1..=max entries, and at least max/2 when
//!   its level has other blocks;
//! - keys strictly increase along a level, and a parent's key is the first
//!   key below it;
//! - sibling pointers link each level left to right (NULLFSBLOCK at ends);
//! - every block names this inode as owner and its level;
//! - di_nblocks counts the bmbt blocks (the caller applies the delta we
//!   return).

use crate::alloc::{alloc_extent, AllocReq};
use crate::error::{Error, Result};
use crate::format::bmbt::{self, Extent, EXTENT_REC_SIZE, LBLOCK_HDR_SIZE};
use crate::format::bufkind::BufKind;
use crate::format::{be64, put_be16, put_be64};
use crate::rmap::{rmap_alloc, rmap_free, RmapOwner};
use crate::types::WhichFork;
use crate::types::{AgNumber, FsBlock, Ino};
use crate::xact::{BufId, InodeId, MetaTx};

/// Deepest bmbt accepted.
pub(super) const MAXLEVELS: u16 = 9;
pub(super) const NULLFSBLOCK: u64 = u64::MAX;
const BMA3: u32 = bmbt::BMAP_CRC_MAGIC;

/// One entry of a level: an extent record (leaves) or a key/pointer pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ent {
    Rec(Extent),
    Ptr { key: u64, fsb: u64 },
}

impl Ent {
    pub(super) fn key(&self) -> u64 {
        match self {
            Ent::Rec(e) => e.off.0,
            Ent::Ptr { key, .. } => *key,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Blk {
    pub(super) fsb: u64,
    pub(super) bid: BufId,
    pub(super) n: usize,
}

/// A bmbt as read into a transaction.
pub struct Tree {
    pub(super) which: WhichFork,
    pub(super) ino: Ino,
    /// Level of the root (>= 1).
    pub(super) depth: usize,
    pub(super) root: Vec<(u64, u64)>,
    /// `levels[l]`: the blocks of level `l`, left to right.
    pub(super) levels: Vec<Vec<Blk>>,
}

impl Tree {
    /// Number of bmbt blocks.
    pub fn blocks(&self) -> u64 {
        self.levels.iter().map(|l| l.len() as u64).sum()
    }
}

pub use super::bmbt_walk::walk;

pub(super) fn fork_bytes(d: &[u8], which: WhichFork) -> &[u8] {
    super::fork::fork_bytes(d, which)
}

pub(super) fn decode_ents(b: &[u8], level: usize, n: usize) -> Vec<Ent> {
    if level == 0 {
        (0..n)
            .map(|i| {
                let o = LBLOCK_HDR_SIZE + i * EXTENT_REC_SIZE;
                Ent::Rec(Extent::decode(&b[o..o + EXTENT_REC_SIZE]))
            })
            .collect()
    } else {
        let max = bmbt::block_maxrecs(b.len(), false);
        (0..n)
            .map(|i| Ent::Ptr {
                key: be64(b, LBLOCK_HDR_SIZE + i * 8),
                fsb: be64(b, LBLOCK_HDR_SIZE + max * 8 + i * 8),
            })
            .collect()
    }
}

/// An edit of one tree in one transaction.
pub struct Editor<'a> {
    pub tx: &'a mut dyn MetaTx,
    pub ip: InodeId,
    pub tree: Tree,
    /// bmbt blocks allocated minus freed.
    pub delta: i64,
    /// The first allocation searches from AG 0 up (when the transaction
    /// holds no AGF yet) instead of near the tree: the retry after
    /// `NoSpace`, since later allocations of the same transaction can
    /// only move to higher AGs.
    pub low_first: bool,
}

impl<'a> Editor<'a> {
    /// A new, empty tree for a fork that is being converted (the caller
    /// then calls [`Editor::build`]).
    pub fn empty(tx: &'a mut dyn MetaTx, ip: InodeId, which: WhichFork) -> Self {
        let ino = Ino(crate::format::dinode_edit::ino(tx.inode(ip)));
        Editor {
            tx,
            ip,
            tree: Tree {
                which,
                ino,
                depth: 0,
                root: Vec::new(),
                levels: Vec::new(),
            },
            delta: 0,
            low_first: false,
        }
    }

    /// Fill an empty tree with `recs` (more than fit inline).
    pub fn build(&mut self, recs: &[Extent]) -> Result<()> {
        debug_assert!(self.tree.depth == 0 && !recs.is_empty());
        self.tree.levels.push(Vec::new());
        let ents: Vec<Ent> = recs.iter().map(|e| Ent::Rec(*e)).collect();
        let up = self.write_blocks(0, 0, 0, ents)?;
        self.tree.depth = 1;
        self.tree.root = up.iter().map(|e| (e.key(), ptr_of(e))).collect();
        self.fix_root()
    }

    /// Replace records `[a, b)` by `ins`.
    pub fn splice_recs(&mut self, a: usize, b: usize, ins: &[Extent]) -> Result<()> {
        let ents = ins.iter().map(|e| Ent::Rec(*e)).collect();
        self.replace(0, a, b, ents)?;
        self.fix_root()
    }

    /// Write the root again for the fork's current size (after di_forkoff
    /// moved), growing a level when it no longer fits.
    pub fn relayout_root(&mut self) -> Result<()> {
        self.fix_root()
    }

    /// Free every block of the tree (the fork is about to become EXTENTS).
    pub fn destroy(&mut self) -> Result<()> {
        let levels = std::mem::take(&mut self.tree.levels);
        for blk in levels.iter().flatten() {
            self.free_block(blk)?;
        }
        self.tree.depth = 0;
        self.tree.root.clear();
        Ok(())
    }

    fn bs(&self) -> usize {
        self.tx.geo().blocksize as usize
    }

    fn max(&self, level: usize) -> usize {
        bmbt::block_maxrecs(self.bs(), level == 0)
    }

    fn owner(&self) -> RmapOwner {
        RmapOwner::File {
            ino: self.tree.ino,
            fork: self.tree.which,
            offset: 0,
            bmbt: true,
            unwritten: false,
        }
    }

    fn free_block(&mut self, blk: &Blk) -> Result<()> {
        let geo = self.tx.geo();
        let f = FsBlock(blk.fsb);
        let (agno, agbno) = (geo.fsb_agno(f), geo.fsb_agbno(f));
        self.tx.stale_buf(blk.bid);
        let owner = self.owner();
        rmap_free(&mut *self.tx, agno, agbno, 1, &owner)?;
        self.tx.defer_free(agno, agbno, 1)?;
        self.delta -= 1;
        Ok(())
    }

    /// Allocate one block near fsblock `near` (never in an AG below one
    /// this transaction already locked).
    fn alloc_block(&mut self, near: u64) -> Result<u64> {
        let geo = self.tx.geo();
        let f = FsBlock(near);
        let (mut agno, mut agbno) = (geo.fsb_agno(f), Some(geo.fsb_agbno(f)));
        if agno.0 >= geo.agcount {
            agno = AgNumber(0);
            agbno = None;
        }
        match self.tx.highest_agf() {
            Some(h) if h.0 > agno.0 => {
                agno = h;
                agbno = None;
            }
            None if self.low_first => {
                agno = AgNumber(0);
                agbno = None;
            }
            _ => {}
        }
        let req = AllocReq {
            agno,
            near: agbno,
            minlen: 1,
            maxlen: 1,
            align: 1,
            any_ag: true,
            meta: true,
        };
        let x = alloc_extent(&mut *self.tx, &req)?;
        let owner = self.owner();
        rmap_alloc(&mut *self.tx, x.agno, x.agbno, 1, &owner)?;
        self.delta += 1;
        Ok(self.tx.geo().agb_to_fsb(x.agno, x.agbno).0)
    }

    fn home(&self) -> u64 {
        let geo = self.tx.geo();
        let ino = self.tree.ino;
        geo.agb_to_fsb(geo.ino_agno(ino), geo.agino_agbno(geo.ino_agino(ino)))
            .0
    }

    fn read_ents(&self, level: usize, blk: &Blk) -> Vec<Ent> {
        decode_ents(self.tx.buf(blk.bid), level, blk.n)
    }

    /// Replace entries `[a, b)` of `level` by `ins`, then their blocks'
    /// entries one level up.
    fn replace(&mut self, level: usize, a: usize, b: usize, ins: Vec<Ent>) -> Result<()> {
        if level == self.tree.depth {
            let new: Vec<(u64, u64)> = ins.iter().map(|e| (e.key(), ptr_of(e))).collect();
            self.tree.root.splice(a..b, new);
            return Ok(());
        }
        let blocks = &self.tree.levels[level];
        let nb = blocks.len();
        debug_assert!(nb > 0);
        let mut starts = Vec::with_capacity(nb + 1);
        let mut s = 0;
        for blk in blocks {
            starts.push(s);
            s += blk.n;
        }
        let find = |x: usize| starts.partition_point(|&st| st <= x).saturating_sub(1);
        let mut i0 = find(a);
        let mut i1 = if b > a { find(b - 1) } else { i0 };
        let mut ents = Vec::new();
        for blk in &self.tree.levels[level][i0..=i1] {
            ents.extend(decode_ents(self.tx.buf(blk.bid), level, blk.n));
        }
        let base = starts[i0];
        ents.splice(a - base..b - base, ins);
        let max = self.max(level);
        while ents.len() < max / 2 && (i0 > 0 || i1 + 1 < nb) {
            if i0 > 0 {
                i0 -= 1;
                let blk = self.tree.levels[level][i0];
                let mut v = self.read_ents(level, &blk);
                v.extend(ents);
                ents = v;
            } else {
                i1 += 1;
                let blk = self.tree.levels[level][i1];
                ents.extend(self.read_ents(level, &blk));
            }
        }
        let old_up: Vec<Ent> = self.tree.levels[level][i0..=i1]
            .iter()
            .map(|b| b.fsb)
            .zip(self.parent_keys(level, i0, i1 + 1))
            .map(|(fsb, key)| Ent::Ptr { key, fsb })
            .collect();
        let up = self.write_blocks(level, i0, i1 + 1, ents)?;
        if up != old_up {
            self.replace(level + 1, i0, i1 + 1, up)?;
        }
        Ok(())
    }

    /// The keys of the entries pointing at blocks `[i0, i1)` of `level`.
    fn parent_keys(&self, level: usize, i0: usize, i1: usize) -> Vec<u64> {
        if level + 1 == self.tree.depth {
            return self.tree.root[i0..i1].iter().map(|r| r.0).collect();
        }
        let mut out = Vec::new();
        let mut idx = 0;
        for blk in &self.tree.levels[level + 1] {
            if idx >= i1 {
                break;
            }
            if idx + blk.n > i0 {
                for e in self.read_ents(level + 1, blk) {
                    if (i0..i1).contains(&idx) {
                        out.push(e.key());
                    }
                    idx += 1;
                }
            } else {
                idx += blk.n;
            }
        }
        out
    }

    /// Spread `ents` evenly over as few blocks as hold them, replacing
    /// blocks `[i0, i1)` of `level` (reused first); fix the outside
    /// neighbours' sibling pointers. Returns the new blocks' parent
    /// entries.
    fn write_blocks(
        &mut self,
        level: usize,
        i0: usize,
        i1: usize,
        ents: Vec<Ent>,
    ) -> Result<Vec<Ent>> {
        let max = self.max(level);
        let n = ents.len();
        let k = n.div_ceil(max);
        let old: Vec<Blk> = self.tree.levels[level][i0..i1].to_vec();
        let left = i0.checked_sub(1).map(|i| self.tree.levels[level][i]);
        let right = self.tree.levels[level].get(i1).copied();
        let mut fsbs: Vec<(u64, Option<BufId>)> =
            old.iter().take(k).map(|b| (b.fsb, Some(b.bid))).collect();
        while fsbs.len() < k {
            let near = fsbs
                .last()
                .map(|x| x.0)
                .or(left.map(|b| b.fsb))
                .or(right.map(|b| b.fsb))
                .unwrap_or_else(|| self.home());
            let f = self.alloc_block(near)?;
            fsbs.push((f, None));
        }
        for blk in old.iter().skip(k) {
            self.free_block(blk)?;
        }
        let geo = self.tx.geo().clone();
        let bs = self.bs();
        let uuid = self.tx.sb().metadata_uuid();
        let mut out = Vec::with_capacity(k);
        let mut new_blks = Vec::with_capacity(k);
        let mut pos = 0;
        for j in 0..k {
            let cnt = n / k + usize::from(j < n % k);
            let chunk = &ents[pos..pos + cnt];
            pos += cnt;
            let (fsb, bid) = fsbs[j];
            let daddr = geo.fsb_to_daddr(FsBlock(fsb));
            let bid = match bid {
                Some(b) => b,
                None => self.tx.new_buf(daddr, bs, BufKind::Bmbt)?,
            };
            let lsib = if j == 0 {
                left.map_or(NULLFSBLOCK, |b| b.fsb)
            } else {
                fsbs[j - 1].0
            };
            let rsib = if j + 1 == k {
                right.map_or(NULLFSBLOCK, |b| b.fsb)
            } else {
                fsbs[j + 1].0
            };
            let buf = self.tx.buf_mut(bid);
            buf[0..4].copy_from_slice(&BMA3.to_be_bytes());
            put_be16(buf, 4, level as u16);
            put_be16(buf, 6, cnt as u16);
            put_be64(buf, 8, lsib);
            put_be64(buf, 16, rsib);
            put_be64(buf, 24, daddr.0);
            buf[40..56].copy_from_slice(&uuid);
            put_be64(buf, 56, self.tree.ino.0);
            buf[LBLOCK_HDR_SIZE..].fill(0);
            for (i, e) in chunk.iter().enumerate() {
                match e {
                    Ent::Rec(x) => {
                        let o = LBLOCK_HDR_SIZE + i * EXTENT_REC_SIZE;
                        x.encode(&mut buf[o..o + EXTENT_REC_SIZE]);
                    }
                    Ent::Ptr { key, fsb } => {
                        put_be64(buf, LBLOCK_HDR_SIZE + i * 8, *key);
                        put_be64(buf, LBLOCK_HDR_SIZE + max * 8 + i * 8, *fsb);
                    }
                }
            }
            self.tx.log_buf(bid, 0..bs);
            out.push(Ent::Ptr {
                key: chunk[0].key(),
                fsb,
            });
            new_blks.push(Blk { fsb, bid, n: cnt });
        }
        let first = new_blks.first().map(|b| b.fsb);
        let last = new_blks.last().map(|b| b.fsb);
        if let Some(l) = left {
            let want = first.or(right.map(|r| r.fsb)).unwrap_or(NULLFSBLOCK);
            if be64(self.tx.buf(l.bid), 16) != want {
                put_be64(self.tx.buf_mut(l.bid), 16, want);
                self.tx.log_buf(l.bid, 16..24);
            }
        }
        if let Some(r) = right {
            let want = last.or(left.map(|l| l.fsb)).unwrap_or(NULLFSBLOCK);
            if be64(self.tx.buf(r.bid), 8) != want {
                put_be64(self.tx.buf_mut(r.bid), 8, want);
                self.tx.log_buf(r.bid, 8..16);
            }
        }
        self.tree.levels[level].splice(i0..i1, new_blks);
        Ok(out)
    }

    fn rootmax(&self) -> usize {
        bmbt::root_maxrecs(fork_bytes(self.tx.inode(self.ip), self.tree.which).len())
    }

    /// Grow the root a level while it overflows; pull its only child in
    /// while that fits; write it into the inode.
    fn fix_root(&mut self) -> Result<()> {
        let rootmax = self.rootmax();
        if rootmax == 0 {
            return Err(Error::Invalid("fork too small for a bmbt root".into()));
        }
        while self.tree.root.len() > rootmax {
            let d = self.tree.depth;
            if d as u16 >= MAXLEVELS {
                return Err(Error::NoSpace);
            }
            self.tree.levels.push(Vec::new());
            let ents: Vec<Ent> = self
                .tree
                .root
                .iter()
                .map(|&(key, fsb)| Ent::Ptr { key, fsb })
                .collect();
            let up = self.write_blocks(d, 0, 0, ents)?;
            self.tree.depth = d + 1;
            self.tree.root = up.iter().map(|e| (e.key(), ptr_of(e))).collect();
        }
        while self.tree.depth >= 2
            && self.tree.root.len() == 1
            && self.tree.levels[self.tree.depth - 1][0].n <= rootmax
        {
            let d = self.tree.depth;
            let child = self.tree.levels[d - 1][0];
            let ents = self.read_ents(d - 1, &child);
            self.free_block(&child)?;
            self.tree.levels.pop();
            self.tree.depth = d - 1;
            self.tree.root = ents.iter().map(|e| (e.key(), ptr_of(e))).collect();
        }
        let (depth, root) = (self.tree.depth, self.tree.root.clone());
        let which = self.tree.which;
        let d = self.tx.inode_mut(self.ip);
        let fork = super::fork::fork_bytes_mut(d, which);
        fork.fill(0);
        put_be16(fork, 0, depth as u16);
        put_be16(fork, 2, root.len() as u16);
        for (i, (k, p)) in root.iter().enumerate() {
            put_be64(fork, 4 + i * 8, *k);
            put_be64(fork, 4 + rootmax * 8 + i * 8, *p);
        }
        Ok(())
    }
}

fn ptr_of(e: &Ent) -> u64 {
    match e {
        Ent::Ptr { fsb, .. } => *fsb,
        Ent::Rec(_) => unreachable!("a record where a pointer belongs"),
    }
}
