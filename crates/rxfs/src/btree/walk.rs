//! A read-only walker for the short-format (per-AG) btrees.
//!
//! Two operations: visit every record in key order ([`btree_walk`])
//! and find the last record whose key is `<=` a search key
//! ([`btree_lookup_le`]). Every block passes
//! [`SBlock::verify`] (magic, CRC, blkno, owner AG, UUID, in-block order)
//! and then these tree invariants:
//!
//! - the root is at level `levels - 1` and has no siblings; each child is
//!   exactly one level below its parent;
//! - a child's keys lie inside its parent's key range: first key `>=` the
//!   parent's key for it (`==` for checkers, [`btree_walk_blocks`]), last key below the parent's next key; for the
//!   rmapbt the parent's high key equals the child's largest high key;
//! - (full walks) at each level the blocks met left to right form one
//!   sibling chain: the first has no left sibling, each block's right
//!   sibling is the next block met and that block's left sibling points
//!   back, the last has no right sibling. A block met twice would break the
//!   chain, so a cycle or a shared subtree is reported, never followed.
//!
//! Bounds: depth is capped by the tree height, itself capped by the AG
//! verifier; a walk reads at most as many blocks as the AG has; memory is
//! one decoded node per level.

use crate::error::{Error, Location, Result};
use crate::format::ag::{Agf, Agi};
use crate::format::btree::{BlockCheck, BtreeKey, BtreeKind, BtreeRecord, SBlock, NULL_AGBLOCK};
use crate::inode::ReadCtx;
use crate::types::{AgBlock, AgNumber, Daddr};

/// One btree of one AG, as its AG header describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BtreeRoot {
    pub kind: BtreeKind,
    pub agno: AgNumber,
    pub root: AgBlock,
    pub levels: u32,
}

impl BtreeRoot {
    /// A tree rooted in the AGF (bnobt, cntbt, rmapbt, refcountbt).
    /// Panics for the inode trees (a caller bug, not a disk state).
    pub fn from_agf(kind: BtreeKind, agno: AgNumber, agf: &Agf) -> Self {
        let (root, levels) = match kind {
            BtreeKind::Bno => (agf.bno_root, agf.bno_level),
            BtreeKind::Cnt => (agf.cnt_root, agf.cnt_level),
            BtreeKind::Rmap => (agf.rmap_root, agf.rmap_level),
            BtreeKind::Refcount => (agf.refcount_root, agf.refcount_level),
            BtreeKind::Ino | BtreeKind::Fino => panic!("{kind:?} is rooted in the AGI"),
        };
        BtreeRoot {
            kind,
            agno,
            root: AgBlock(root),
            levels,
        }
    }

    /// A tree rooted in the AGI (inobt, finobt).
    /// Panics for the AGF trees (a caller bug, not a disk state).
    pub fn from_agi(kind: BtreeKind, agno: AgNumber, agi: &Agi) -> Self {
        let (root, levels) = match kind {
            BtreeKind::Ino => (agi.root, agi.level),
            BtreeKind::Fino => (agi.free_root, agi.free_level),
            _ => panic!("{kind:?} is rooted in the AGF"),
        };
        BtreeRoot {
            kind,
            agno,
            root: AgBlock(root),
            levels,
        }
    }
}

/// What a full walk saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// Blocks read (all levels).
    pub blocks: u64,
    /// Records visited.
    pub records: u64,
}

/// A node kept while its children are visited.
struct Frame {
    level: u16,
    ptrs: Vec<u32>,
    keys: Vec<BtreeKey>,
    high: Vec<BtreeKey>,
    next: usize,
}

/// Sibling-chain state of one level during a full walk.
#[derive(Clone, Copy)]
struct LevelCursor {
    last: Option<(u32, u32)>, // (agbno, its rightsib)
}

struct Walker<'a, C: ReadCtx + ?Sized> {
    fs: &'a C,
    root: BtreeRoot,
    check: BlockCheck,
    blocks_read: u64,
    /// Every block read, when the caller asked for them (checkers).
    visited: Option<Vec<u32>>,
    /// Checkers: a child's first key must equal its parent's key for it
    /// (the kernel keeps them equal; readers only need `>=`).
    strict_keys: bool,
}

impl<'a, C: ReadCtx + ?Sized> Walker<'a, C> {
    fn new(fs: &'a C, root: &BtreeRoot) -> Result<Self> {
        let c = crate::ag::read::ag_check(fs, root.agno)?;
        let bs = fs.geo().blocksize as usize;
        let max = root
            .kind
            .max_levels(bs, c.agblocks, fs.geo().agino_log(), c.has_reflink);
        let at = Location::Daddr(c.header_daddr(1).0);
        if root.levels == 0 || root.levels > max {
            return Err(Error::corrupt(
                root.kind.name(),
                at,
                format!("tree of {} levels (at most {max})", root.levels),
            ));
        }
        if !c.agbno_ok(root.root.0) {
            return Err(Error::corrupt(
                root.kind.name(),
                at,
                format!("root block {:#x} outside the AG", root.root.0),
            ));
        }
        let check = crate::ag::read::block_check(fs, &c, root.levels);
        Ok(Walker {
            fs,
            root: *root,
            check,
            blocks_read: 0,
            visited: None,
            strict_keys: false,
        })
    }

    fn daddr(&self, agbno: u32) -> Daddr {
        self.fs.geo().agb_to_daddr(self.root.agno, AgBlock(agbno))
    }

    fn corrupt(&self, agbno: u32, detail: String) -> Error {
        Error::corrupt(
            self.root.kind.name(),
            Location::Daddr(self.daddr(agbno).0),
            detail,
        )
    }

    /// Read and verify block `agbno`, expected at `level`.
    fn read(&mut self, agbno: u32, level: u16) -> Result<Vec<u8>> {
        self.blocks_read += 1;
        if self.blocks_read > self.check.ag_len as u64 {
            return Err(self.corrupt(agbno, "walk read more blocks than the AG holds".into()));
        }
        if let Some(v) = &mut self.visited {
            v.push(agbno);
        }
        let daddr = self.daddr(agbno);
        let (kind, c) = (self.root.kind, &self.check);
        let buf = self.fs.read_meta(daddr, c.blocksize, |b, d| {
            SBlock::verify(b, kind, d, c).map(|_| ())
        })?;
        let blk = self.verified(&buf);
        if blk.level() != level {
            return Err(self.corrupt(
                agbno,
                format!("level {} where level {level} was expected", blk.level()),
            ));
        }
        let (l, r) = (blk.hdr.leftsib, blk.hdr.rightsib);
        if l == agbno || r == agbno || (l == r && l != NULL_AGBLOCK) {
            return Err(self.corrupt(agbno, format!("sibling pointers {l:#x}/{r:#x}")));
        }
        if agbno == self.root.root.0 && (l != NULL_AGBLOCK || r != NULL_AGBLOCK) {
            return Err(self.corrupt(agbno, "root block has siblings".into()));
        }
        Ok(buf)
    }

    /// View of a block that [`Walker::read`] verified.
    fn verified<'b>(&self, buf: &'b [u8]) -> SBlock<'b> {
        SBlock::view_verified(buf, self.root.kind, self.check.blocksize)
    }

    /// Check a child block against its parent's entry `i`.
    fn check_child(&self, parent: &Frame, i: usize, child: &SBlock, agbno: u32) -> Result<()> {
        let n = child.numrecs();
        if n == 0 {
            return Err(self.corrupt(agbno, "empty non-root block".into()));
        }
        let first = child.entry_key(0);
        let last = child.entry_key(n - 1);
        if first < parent.keys[i] {
            return Err(self.corrupt(
                agbno,
                format!("first key {first:?} below parent key {:?}", parent.keys[i]),
            ));
        }
        if self.strict_keys && first != parent.keys[i] {
            return Err(self.corrupt(
                agbno,
                format!("first key {first:?} but parent key {:?}", parent.keys[i]),
            ));
        }
        if let Some(&next) = parent.keys.get(i + 1) {
            let ok = if self.root.kind.overlapping() {
                last <= next
            } else {
                last < next
            };
            if !ok {
                return Err(self.corrupt(
                    agbno,
                    format!("last key {last:?} not below the parent's next key {next:?}"),
                ));
            }
        }
        if self.root.kind.overlapping() {
            let hk = child.max_high_key();
            if hk != Some(parent.high[i]) {
                return Err(self.corrupt(
                    agbno,
                    format!("high key {hk:?} but parent says {:?}", parent.high[i]),
                ));
            }
        }
        Ok(())
    }

    fn frame(&self, blk: &SBlock) -> Frame {
        let n = blk.numrecs();
        Frame {
            level: blk.level(),
            ptrs: (0..n).map(|i| blk.ptr(i)).collect(),
            keys: (0..n).map(|i| blk.key(i)).collect(),
            high: (0..n).map(|i| blk.high_key(i)).collect(),
            next: 0,
        }
    }

    fn visit_sibling(&self, cur: &mut LevelCursor, blk: &SBlock, agbno: u32) -> Result<()> {
        match cur.last {
            None if blk.hdr.leftsib != NULL_AGBLOCK => {
                return Err(self.corrupt(
                    agbno,
                    format!("leftmost block has left sibling {:#x}", blk.hdr.leftsib),
                ))
            }
            Some((prev, prev_right)) if prev_right != agbno || blk.hdr.leftsib != prev => {
                return Err(self.corrupt(
                    agbno,
                    format!(
                        "sibling chain broken: block {prev:#x} points right to {prev_right:#x}, \
                         this block points left to {:#x}",
                        blk.hdr.leftsib
                    ),
                ))
            }
            _ => {}
        }
        cur.last = Some((agbno, blk.hdr.rightsib));
        Ok(())
    }

    fn walk(&mut self, f: &mut dyn FnMut(&[u8]) -> Result<bool>) -> Result<WalkStats> {
        let levels = self.root.levels as usize;
        let mut cursors = vec![LevelCursor { last: None }; levels];
        let mut stats = WalkStats::default();
        let mut stack: Vec<Frame> = Vec::with_capacity(levels);
        let top = (levels - 1) as u16;
        let root = self.root.root.0;
        let buf = self.read(root, top)?;
        let blk = self.verified(&buf);
        self.visit_sibling(&mut cursors[top as usize], &blk, root)?;
        if blk.is_leaf() {
            return self.leaf(&blk, f, &mut stats).map(|_| {
                stats.blocks = self.blocks_read;
                stats
            });
        }
        stack.push(self.frame(&blk));
        while let Some(parent) = stack.last_mut() {
            if parent.next >= parent.ptrs.len() {
                stack.pop();
                continue;
            }
            let i = parent.next;
            parent.next += 1;
            let (agbno, level) = (parent.ptrs[i], parent.level - 1);
            let buf = self.read(agbno, level)?;
            let blk = self.verified(&buf);
            let parent = stack.last().expect("non-empty");
            self.check_child(parent, i, &blk, agbno)?;
            self.visit_sibling(&mut cursors[level as usize], &blk, agbno)?;
            if blk.is_leaf() {
                if !self.leaf(&blk, f, &mut stats)? {
                    stats.blocks = self.blocks_read;
                    return Ok(stats);
                }
            } else {
                let fr = self.frame(&blk);
                stack.push(fr);
            }
        }
        for (level, cur) in cursors.iter().enumerate() {
            match cur.last {
                Some((agbno, right)) if right != NULL_AGBLOCK => {
                    return Err(self.corrupt(
                        agbno,
                        format!("rightmost block of level {level} has right sibling {right:#x}"),
                    ))
                }
                None => {
                    return Err(self.corrupt(root, format!("no block reached at level {level}")))
                }
                _ => {}
            }
        }
        stats.blocks = self.blocks_read;
        Ok(stats)
    }

    /// Hand a leaf's records to `f`; false when `f` asked to stop.
    fn leaf(
        &self,
        blk: &SBlock,
        f: &mut dyn FnMut(&[u8]) -> Result<bool>,
        stats: &mut WalkStats,
    ) -> Result<bool> {
        for i in 0..blk.numrecs() {
            stats.records += 1;
            if !f(blk.rec(i))? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn lookup_le(&mut self, key: BtreeKey) -> Result<Option<Vec<u8>>> {
        let mut level = (self.root.levels - 1) as u16;
        let mut agbno = self.root.root.0;
        let mut parent: Option<(Frame, usize)> = None;
        loop {
            let buf = self.read(agbno, level)?;
            let blk = self.verified(&buf);
            if let Some((fr, i)) = &parent {
                self.check_child(fr, *i, &blk, agbno)?;
            }
            let Some(i) = blk.last_le(key) else {
                return Ok(None);
            };
            if blk.is_leaf() {
                return Ok(Some(blk.rec(i).to_vec()));
            }
            let fr = self.frame(&blk);
            agbno = fr.ptrs[i];
            level -= 1;
            parent = Some((fr, i));
        }
    }
}

/// Visit every record of a btree in key order, verifying every block
/// and the tree shape. `f` gets the raw record bytes and returns
/// whether to continue.
pub fn btree_walk_raw(
    fs: &(impl ReadCtx + ?Sized),
    root: &BtreeRoot,
    f: &mut dyn FnMut(&[u8]) -> Result<bool>,
) -> Result<WalkStats> {
    Walker::new(fs, root)?.walk(f)
}

/// Like [`btree_walk_raw`], and also return the AG block
/// numbers of every block the walk read (also when it failed part way:
/// then the blocks read before the failure), in reading order. For
/// checkers: a child's first key must also equal its parent's key.
pub fn btree_walk_blocks(
    fs: &(impl ReadCtx + ?Sized),
    root: &BtreeRoot,
    f: &mut dyn FnMut(&[u8]) -> Result<bool>,
) -> (Result<WalkStats>, Vec<u32>) {
    let mut w = match Walker::new(fs, root) {
        Ok(w) => w,
        Err(e) => return (Err(e), Vec::new()),
    };
    w.visited = Some(Vec::new());
    w.strict_keys = true;
    let r = w.walk(f);
    (r, w.visited.take().unwrap_or_default())
}

/// Visit every record of a btree in key order as typed records.
pub fn btree_walk<R: BtreeRecord>(
    fs: &(impl ReadCtx + ?Sized),
    root: &BtreeRoot,
    mut f: impl FnMut(R) -> Result<bool>,
) -> Result<WalkStats> {
    assert!(
        R::KINDS.contains(&root.kind),
        "record type does not match the tree"
    );
    let sparse = fs.sb().has_sparse_inodes();
    btree_walk_raw(fs, root, &mut |b| f(R::from_disk(b, sparse)))
}

/// Collect every record of a btree (bounded by the AG size).
pub fn btree_records<R: BtreeRecord>(
    fs: &(impl ReadCtx + ?Sized),
    root: &BtreeRoot,
) -> Result<Vec<R>> {
    let mut out = Vec::new();
    btree_walk(fs, root, |r: R| {
        out.push(r);
        Ok(true)
    })?;
    Ok(out)
}

/// The last record whose (low) key is `<= key`, or `None` when every
/// record's key is larger. For the bnobt this finds the free extent
/// starting at or before a block; for the inobt the chunk starting at or
/// before an inode.
pub fn btree_lookup_le<R: BtreeRecord>(
    fs: &(impl ReadCtx + ?Sized),
    root: &BtreeRoot,
    key: BtreeKey,
) -> Result<Option<R>> {
    assert!(
        R::KINDS.contains(&root.kind),
        "record type does not match the tree"
    );
    let sparse = fs.sb().has_sparse_inodes();
    let rec = Walker::new(fs, root)?.lookup_le(key)?;
    Ok(rec.map(|b| R::from_disk(&b, sparse)))
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod walk_tests;
