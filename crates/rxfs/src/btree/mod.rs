//! The short-form AG btrees: bnobt and cntbt (free space, rooted in the
//! AGF), inobt and finobt (inode chunks, rooted in the AGI) and the rmapbt
//! (reverse mappings, rooted in the AGF). [`walk`] reads them (every block
//! verified, the tree shape checked); this module edits them on a
//! transaction (the generic editor, libxfs's `xfs_btree.c` idea: one
//! editor, per-tree record types and block sources).
//!
//! ## API
//! Every operation is keyed and walks from the root to a leaf, so there is
//! no cursor to keep valid across changes (a [`Pos`] is informational).
//! Records are raw on-disk bytes, [`Tree::rec_size`] long; build and read
//! them with [`crate::format::btree::AllocRec`] (bnobt/cntbt) and
//! [`crate::format::btree::InobtRec`] (inobt/finobt, with `sparse =
//! sb.has_sparse_inodes()`). Keys are [`BtreeKey`]s, made by
//! [`Tree::key_of`] from a record or by hand:
//! - Bno: `BtreeKey(startblock, 0, 0)`
//! - Cnt: `BtreeKey(blockcount, startblock, 0)`
//! - Ino/Fino: `BtreeKey(startino, 0, 0)` (AG inode number)
//! - Rmap: `BtreeKey(startblock, owner, offset with the attr-fork and
//!   bmbt bits, without the unwritten bit)`; records are
//!   [`crate::format::btree::RmapRec`]. Records are treated as unique by
//!   key and are not looked up by overlap (rxfs shares no blocks, see
//!   [`crate::rmap`]).
//!
//! [`lookup`] finds `Le`/`Ge`/`Eq`/`Lt`/`Gt` a key (step through a tree
//! with `Gt`/`Lt` of the last key seen); [`insert`], [`delete`] and
//! [`update`] change one record. On any error the transaction is left half
//! changed and must be cancelled.
//!
//! ## Invariants kept after every operation
//! - Every non-root block holds at least `maxrecs / 2` entries (what
//!   `xfs_repair` demands): an insert into a full block splits it in two
//!   halves; a delete that leaves a block short borrows one entry from a
//!   sibling under the same parent, or merges with it and frees the
//!   emptied block, recursively up the tree.
//! - A root node has at least two children: a root split adds a level, a
//!   root left with one child is freed and the child becomes the root.
//! - Each node key is the low key of its child (the key bytes of the
//!   child's first entry, as the kernel copies them), fixed up the path
//!   whenever a block's first entry changes. In the rmapbt (overlapping
//!   keys) each node key slot is (low key, high key): the high key is the
//!   largest "last block" key of the subtree, so every change of a block
//!   refreshes its parent's slot, up the path while slots change.
//! - Sibling pointers link every level left to right.
//! - Block accounting: bnobt/cntbt/rmapbt blocks come from and go to the
//!   AGFL (`agf_btreeblks` counts their non-root blocks, `agf_rmap_blocks`
//!   all rmapbt blocks; a freed block is busy; they stay OWN_AG);
//!   inobt/finobt blocks come from [`crate::xact::AgSpace`] (one block near
//!   the block being split, in the same AG) and go back through
//!   the allocator, with their OWN_INOBT reverse mapping; with
//!   inobtcount `agi_iblocks`/`agi_fblocks` count all their blocks.
//!
//! Loops are bounded by the tree height, which is checked against the
//! largest height the AG geometry allows.

pub(crate) mod block;
mod rebal;
pub mod walk;

use crate::ag::{self as hdr, *};
use crate::error::{Error, Location, Result};
use crate::format::btree::{BtreeKey, BtreeKind, NULL_AGBLOCK};
use crate::format::bufkind::BufKind;
use crate::types::{AgBlock, AgNumber};
use crate::xact::{BufId, MetaTx};
use block::{BGeo, Blk, Ents};
use rebal::{fix_keys, insert_at, remove_at};

/// Which tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tree {
    Bno,
    Cnt,
    Ino,
    Fino,
    /// The reverse-mapping btree (rooted in the AGF; overlapping keys).
    Rmap,
}

impl Tree {
    pub const fn kind(self) -> BtreeKind {
        match self {
            Tree::Bno => BtreeKind::Bno,
            Tree::Cnt => BtreeKind::Cnt,
            Tree::Ino => BtreeKind::Ino,
            Tree::Fino => BtreeKind::Fino,
            Tree::Rmap => BtreeKind::Rmap,
        }
    }
    pub const fn rec_size(self) -> usize {
        self.kind().rec_size()
    }
    /// The key of a record of this tree.
    pub fn key_of(self, rec: &[u8]) -> BtreeKey {
        self.kind().rec_key(rec)
    }
    pub const fn buf_kind(self) -> BufKind {
        match self {
            Tree::Bno => BufKind::BnoBt,
            Tree::Cnt => BufKind::CntBt,
            Tree::Ino => BufKind::InoBt,
            Tree::Fino => BufKind::FinoBt,
            Tree::Rmap => BufKind::RmapBt,
        }
    }
}

/// Lookup direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The last record with key <= the key.
    Le,
    /// The first record with key >= the key.
    Ge,
    /// The record with exactly the key.
    Eq,
    /// The last record with key < the key.
    Lt,
    /// The first record with key > the key.
    Gt,
}

/// Where a record was found: leaf block and index in it (informational:
/// any change to the tree invalidates it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub leaf: AgBlock,
    pub idx: usize,
}

/// A record found by [`lookup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub rec: Vec<u8>,
    pub key: BtreeKey,
    pub pos: Pos,
}

/// Where the root of a tree is recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RootRef {
    pub(crate) hdr: BufId,
    pub(crate) root_off: usize,
    pub(crate) level_off: usize,
    /// Block counter: `agf_btreeblks` (non-root blocks, shared by bnobt,
    /// cntbt and rmapbt) or `agi_iblocks`/`agi_fblocks` (all blocks).
    pub(crate) count_off: Option<usize>,
}

fn root_ref(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber) -> Result<RootRef> {
    let inobtcount = tx.sb().has_inobtcount();
    Ok(match tree {
        Tree::Bno | Tree::Cnt => {
            let agf = hdr::agf(tx, agno)?;
            let bno = tree == Tree::Bno;
            RootRef {
                hdr: agf,
                root_off: if bno { AGF_BNO_ROOT } else { AGF_CNT_ROOT },
                level_off: if bno { AGF_BNO_LEVEL } else { AGF_CNT_LEVEL },
                count_off: Some(AGF_BTREEBLKS),
            }
        }
        Tree::Rmap => {
            if !tx.sb().has_rmapbt() {
                return Err(Error::Invalid("no rmapbt on this filesystem".into()));
            }
            RootRef {
                hdr: hdr::agf(tx, agno)?,
                root_off: AGF_RMAP_ROOT,
                level_off: AGF_RMAP_LEVEL,
                count_off: Some(AGF_BTREEBLKS),
            }
        }
        Tree::Ino => RootRef {
            hdr: hdr::agi(tx, agno)?,
            root_off: AGI_ROOT,
            level_off: AGI_LEVEL,
            count_off: inobtcount.then_some(AGI_IBLOCKS),
        },
        Tree::Fino => {
            if !tx.sb().has_finobt() {
                return Err(Error::Invalid("no finobt on this filesystem".into()));
            }
            RootRef {
                hdr: hdr::agi(tx, agno)?,
                root_off: AGI_FREE_ROOT,
                level_off: AGI_FREE_LEVEL,
                count_off: inobtcount.then_some(AGI_FBLOCKS),
            }
        }
    })
}

/// The tallest tree of this kind the AG geometry allows.
pub(crate) fn max_height(tx: &dyn MetaTx, tree: Tree) -> u32 {
    let geo = tx.geo();
    tree.kind().max_levels(
        geo.blocksize as usize,
        geo.agblocks,
        geo.agino_log(),
        tx.sb().has_reflink(),
    )
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    pub(crate) blk: Blk,
    /// Index of the entry followed (node) or of the lower bound (leaf).
    pub(crate) idx: usize,
}

/// A root-to-leaf path; `lv[0]` is the leaf, `lv[height - 1]` the root.
pub(crate) struct Path {
    pub(crate) tree: Tree,
    pub(crate) agno: AgNumber,
    pub(crate) g: BGeo,
    pub(crate) root: RootRef,
    pub(crate) lv: Vec<Step>,
}

pub(crate) fn read_blk(
    tx: &mut dyn MetaTx,
    g: &BGeo,
    agno: AgNumber,
    agbno: u32,
    level: u16,
) -> Result<Blk> {
    if !hdr::extent_ok(tx, agno, agbno, 1) {
        return Err(Error::corrupt(
            g.tree.kind().name(),
            Location::Unknown,
            format!("pointer to block {agbno:#x} outside AG {agno}"),
        ));
    }
    let daddr = tx.geo().agb_to_daddr(agno, AgBlock(agbno));
    let buf = tx.read_buf(daddr, g.bs, g.tree.buf_kind())?;
    let b = Blk {
        agbno: AgBlock(agbno),
        buf,
        level,
    };
    g.check(tx, b, agno)?;
    Ok(b)
}

/// Index of the first entry whose key is >= `key`.
fn lower_bound(g: &BGeo, level: u16, e: &Ents, key: BtreeKey) -> usize {
    let (mut lo, mut hi) = (0, e.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if g.key(level, e.get(mid)) < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

fn walk(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, key: BtreeKey) -> Result<Path> {
    let root = root_ref(tx, tree, agno)?;
    let g = BGeo::new(tree, tx.geo().blocksize as usize);
    let height = hdr::get(tx, root.hdr, root.level_off);
    if height == 0 || height > max_height(tx, tree) {
        return Err(Error::corrupt(
            tree.kind().name(),
            Location::Unknown,
            format!("tree of AG {agno} has {height} levels"),
        ));
    }
    let mut bno = hdr::get(tx, root.hdr, root.root_off);
    let mut lv = Vec::with_capacity(height as usize + 1);
    for level in (0..height as u16).rev() {
        let blk = read_blk(tx, &g, agno, bno, level)?;
        let e = g.load(tx, blk);
        let lb = lower_bound(&g, level, &e, key);
        if level == 0 {
            lv.push(Step { blk, idx: lb });
            break;
        }
        if e.len() == 0 {
            return Err(Error::corrupt(
                tree.kind().name(),
                Location::Unknown,
                format!("node {bno:#x} of AG {agno} has no children"),
            ));
        }
        // The child whose low key is the last <= key (the first if none).
        let idx = if lb < e.len() && g.key(level, e.get(lb)) == key {
            lb
        } else {
            lb.saturating_sub(1)
        };
        lv.push(Step { blk, idx });
        bno = e.ptr(idx);
    }
    lv.reverse();
    Ok(Path {
        tree,
        agno,
        g,
        root,
        lv,
    })
}

fn found(g: &BGeo, blk: Blk, e: &Ents, idx: usize) -> Found {
    let rec = e.get(idx).to_vec();
    Found {
        key: g.key(0, &rec),
        rec,
        pos: Pos {
            leaf: blk.agbno,
            idx,
        },
    }
}

/// The first (`right`) or last record of the leaf sibling of `blk`.
fn sibling_rec(tx: &mut dyn MetaTx, p: &Path, blk: Blk, right: bool) -> Result<Option<Found>> {
    let s = p.g.sib(tx, blk, right);
    if s == NULL_AGBLOCK {
        return Ok(None);
    }
    let sb = read_blk(tx, &p.g, p.agno, s, 0)?;
    let e = p.g.load(tx, sb);
    if e.len() == 0 {
        return Ok(None);
    }
    let i = if right { 0 } else { e.len() - 1 };
    Ok(Some(found(&p.g, sb, &e, i)))
}

/// Find a record of `tree` in AG `agno`; `Ok(None)` if there is none.
pub fn lookup(
    tx: &mut dyn MetaTx,
    tree: Tree,
    agno: AgNumber,
    key: BtreeKey,
    dir: Lookup,
) -> Result<Option<Found>> {
    let p = walk(tx, tree, agno, key)?;
    let leaf = p.lv[0].blk;
    let e = p.g.load(tx, leaf);
    let n = e.len();
    let lb = p.lv[0].idx;
    let eq = lb < n && p.g.key(0, e.get(lb)) == key;
    let ub = if eq { lb + 1 } else { lb };
    let (idx, right) = match dir {
        Lookup::Eq => return Ok(eq.then(|| found(&p.g, leaf, &e, lb))),
        Lookup::Ge => (lb, true),
        Lookup::Gt => (ub, true),
        Lookup::Le => (ub.wrapping_sub(1), false),
        Lookup::Lt => (lb.wrapping_sub(1), false),
    };
    let f = if idx < n {
        Some(found(&p.g, leaf, &e, idx))
    } else {
        sibling_rec(tx, &p, leaf, right)?
    };
    if let Some(f) = &f {
        check_found(tx, tree, agno, f)?;
    }
    Ok(f)
}

/// Free-space records are used as block ranges: each must lie inside the
/// AG (the read-side verifier does not run on buffers we have changed).
fn check_found(tx: &dyn MetaTx, tree: Tree, agno: AgNumber, f: &Found) -> Result<()> {
    if matches!(tree, Tree::Bno | Tree::Cnt) {
        let r = crate::format::btree::AllocRec::decode(&f.rec);
        if !hdr::extent_ok(tx, agno, r.start, r.len) {
            return Err(Error::corrupt(
                tree.kind().name(),
                Location::Daddr(tx.geo().agb_to_daddr(agno, f.pos.leaf).0),
                format!("free extent {}+{} outside AG {agno}", r.start, r.len),
            ));
        }
    }
    Ok(())
}

/// Insert `rec`; `Err(Exists)` if a record with its key is there.
pub fn insert(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, rec: &[u8]) -> Result<()> {
    check_rec(tree, rec)?;
    let key = tree.key_of(rec);
    let mut p = walk(tx, tree, agno, key)?;
    let e = p.g.load(tx, p.lv[0].blk);
    let lb = p.lv[0].idx;
    if lb < e.len() && p.g.key(0, e.get(lb)) == key {
        return Err(Error::Exists);
    }
    insert_at(tx, &mut p, 0, lb, rec)
}

/// Delete the record with key `key`; `Err(NotFound)` if there is none.
pub fn delete(tx: &mut dyn MetaTx, tree: Tree, agno: AgNumber, key: BtreeKey) -> Result<()> {
    let mut p = walk(tx, tree, agno, key)?;
    let e = p.g.load(tx, p.lv[0].blk);
    let lb = p.lv[0].idx;
    if !(lb < e.len() && p.g.key(0, e.get(lb)) == key) {
        return Err(Error::NotFound);
    }
    remove_at(tx, &mut p, 0, lb)
}

/// Replace the record with key `key` by `rec`, in place. The new key may
/// differ from `key` but must still sort strictly between the record's
/// neighbours (checked inside the leaf; across leaves the caller
/// guarantees it). `Err(NotFound)` if there is no such record.
pub fn update(
    tx: &mut dyn MetaTx,
    tree: Tree,
    agno: AgNumber,
    key: BtreeKey,
    rec: &[u8],
) -> Result<()> {
    check_rec(tree, rec)?;
    let p = walk(tx, tree, agno, key)?;
    let leaf = p.lv[0].blk;
    let e = p.g.load(tx, leaf);
    let i = p.lv[0].idx;
    if !(i < e.len() && p.g.key(0, e.get(i)) == key) {
        return Err(Error::NotFound);
    }
    let nk = tree.key_of(rec);
    let after_prev = i == 0 || p.g.key(0, e.get(i - 1)) < nk;
    let before_next = i + 1 >= e.len() || nk < p.g.key(0, e.get(i + 1));
    if !(after_prev && before_next) {
        return Err(Error::Invalid(format!(
            "btree update from {key:?} to {nk:?} changes the record order"
        )));
    }
    p.g.set_rec(tx, leaf, i, rec);
    if i == 0 || p.g.overlapping() {
        let e = p.g.load(tx, leaf);
        fix_keys(tx, &p, 0, &p.g.node_key(0, &e));
    }
    Ok(())
}

fn check_rec(tree: Tree, rec: &[u8]) -> Result<()> {
    if rec.len() != tree.rec_size() {
        return Err(Error::Invalid(format!(
            "{}-byte record for a tree of {}-byte records",
            rec.len(),
            tree.rec_size()
        )));
    }
    Ok(())
}

/// Visit every record of `tree` in key order (tests and checks); stops
/// after `limit` records.
pub fn records(
    tx: &mut dyn MetaTx,
    tree: Tree,
    agno: AgNumber,
    limit: usize,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut f = lookup(tx, tree, agno, BtreeKey(0, 0, 0), Lookup::Ge)?;
    while let Some(r) = f {
        if out.len() >= limit {
            break;
        }
        let k = r.key;
        out.push(r.rec);
        f = lookup(tx, tree, agno, k, Lookup::Gt)?;
    }
    Ok(out)
}
