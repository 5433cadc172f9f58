//! Structural edits of the short-form AG btrees for [`super`]:
//! inserting and removing entries at any level with splits, borrowing,
//! merges, root growth and shrink, the parent key fix-ups (low keys, and
//! the (low, high) key slots of the overlapping rmapbt) and the blocks
//! trees take and give back. The invariants are listed in
//! [`super`].

use super::block::{Blk, Ents};
use super::{max_height, read_blk, Path, Tree};
use crate::ag::{self as hdr, *};
use crate::error::{Error, Location, Result};
use crate::format::btree::NULL_AGBLOCK;
use crate::types::AgBlock;
use crate::xact::MetaTx;

/// A copy of the path whose step above `level` points at entry `idx` (to
/// fix the parent key of a sibling under the same parent).
pub(crate) fn sub_path(p: &Path, level: usize, idx: usize) -> Path {
    let mut lv = p.lv.clone();
    lv[level + 1].idx = idx;
    Path { lv, ..*p }
}

/// The block at `level` of the path changed and its parent key slot is
/// now `key` ([`BGeo::node_key`]): rewrite the parent keys up the path for
/// as long as the changed block is its parent's first child, or (the
/// overlapping rmapbt, whose node keys also hold the subtree's highest
/// key) for as long as a parent's key slot changes.
pub(crate) fn fix_keys(tx: &mut dyn MetaTx, p: &Path, level: usize, key: &[u8]) {
    let g = p.g;
    if key.len() != g.kslot() {
        return; // an empty block (only on a corrupt tree): nothing to copy
    }
    let mut key = key.to_vec();
    let mut l = level;
    while l + 1 < p.lv.len() {
        let parent = p.lv[l + 1];
        if g.overlapping() {
            let pe = g.load(tx, parent.blk);
            if parent.idx < pe.len() && pe.get(parent.idx)[..g.kslot()] == key[..] {
                break;
            }
        }
        g.set_key(tx, parent.blk, parent.idx, &key);
        if g.overlapping() {
            let pe = g.load(tx, parent.blk);
            key = g.node_key(parent.blk.level, &pe);
        } else if parent.idx != 0 {
            break;
        }
        l += 1;
    }
}

/// Get a fresh block for level `level` of the tree.
fn alloc_block(tx: &mut dyn MetaTx, p: &Path, level: u16, near: AgBlock) -> Result<Blk> {
    let agno = p.agno;
    let agbno = match p.tree {
        Tree::Bno | Tree::Cnt | Tree::Rmap => {
            let b = hdr::agfl_get(tx, agno, p.root.hdr)?;
            let max = hdr::ag_len(tx, agno);
            hdr::add(tx, p.root.hdr, AGF_BTREEBLKS, 1, max)?;
            if p.tree == Tree::Rmap {
                hdr::add(tx, p.root.hdr, AGF_RMAP_BLOCKS, 1, max)?;
            }
            b
        }
        Tree::Ino | Tree::Fino => {
            let agbno = tx.ag_space().alloc_inobt_block(tx, agno, near)?;
            if let Some(off) = p.root.count_off {
                let max = hdr::ag_len(tx, agno);
                hdr::add(tx, p.root.hdr, off, 1, max)?;
            }
            agbno
        }
    };
    let daddr = tx.geo().agb_to_daddr(agno, agbno);
    let buf = tx.new_buf(daddr, p.g.bs, p.tree.buf_kind())?;
    let b = Blk { agbno, buf, level };
    p.g.init(tx, b, agno);
    Ok(b)
}

/// Give back a block the tree no longer uses.
fn free_block(tx: &mut dyn MetaTx, p: &Path, b: Blk) -> Result<()> {
    tx.stale_buf(b.buf);
    let agno = p.agno;
    let max = hdr::ag_len(tx, agno);
    match p.tree {
        Tree::Bno | Tree::Cnt | Tree::Rmap => {
            hdr::add(tx, p.root.hdr, AGF_BTREEBLKS, -1, max)?;
            if p.tree == Tree::Rmap {
                hdr::add(tx, p.root.hdr, AGF_RMAP_BLOCKS, -1, max)?;
            }
            hdr::agfl_put(tx, agno, p.root.hdr, b.agbno)?;
            tx.mark_busy(agno, b.agbno, 1);
        }
        Tree::Ino | Tree::Fino => {
            if let Some(off) = p.root.count_off {
                hdr::add(tx, p.root.hdr, off, -1, max)?;
            }
            tx.ag_space().free_inobt_block(tx, agno, b.agbno)?;
        }
    }
    Ok(())
}

fn node_entry(key: &[u8], ptr: AgBlock) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(&ptr.0.to_be_bytes());
    v
}

/// Insert `entry` at index `pos` of the block at `level` of the path,
/// splitting it (and its ancestors, and the root) when full.
pub(crate) fn insert_at(
    tx: &mut dyn MetaTx,
    p: &mut Path,
    level: usize,
    pos: usize,
    entry: &[u8],
) -> Result<()> {
    let blk = p.lv[level].blk;
    let g = p.g;
    let mut e = g.load(tx, blk);
    e.insert(pos, entry);
    if e.len() <= g.max_recs(blk.level) {
        g.store(tx, blk, &e, pos);
        if pos == 0 || g.overlapping() {
            fix_keys(tx, p, level, &g.node_key(blk.level, &e));
        }
        return Ok(());
    }
    // Split: the upper half moves to a new right sibling.
    let keep = e.len().div_ceil(2);
    let right = e.split_off(keep);
    let nb = alloc_block(tx, p, blk.level, blk.agbno)?;
    let old_right = g.sib(tx, blk, true);
    g.set_sib(tx, nb, false, blk.agbno.0);
    g.set_sib(tx, nb, true, old_right);
    g.set_sib(tx, blk, true, nb.agbno.0);
    if old_right != NULL_AGBLOCK {
        let ob = read_blk(tx, &g, p.agno, old_right, blk.level)?;
        g.set_sib(tx, ob, false, nb.agbno.0);
    }
    g.store(tx, blk, &e, pos.min(keep));
    g.store(tx, nb, &right, 0);
    if pos == 0 || g.overlapping() {
        fix_keys(tx, p, level, &g.node_key(blk.level, &e));
    }
    let rkey = g.node_key(blk.level, &right);
    if level + 1 < p.lv.len() {
        let ppos = p.lv[level + 1].idx + 1;
        return insert_at(tx, p, level + 1, ppos, &node_entry(&rkey, nb.agbno));
    }
    // The root split: a new root above the two halves.
    if p.lv.len() as u32 >= max_height(tx, p.tree) {
        return Err(Error::corrupt(
            p.tree.kind().name(),
            Location::Unknown,
            "tree would grow past its maximum height",
        ));
    }
    let root = alloc_block(tx, p, blk.level + 1, blk.agbno)?;
    let mut re = Ents {
        esz: g.esz(root.level),
        ksz: g.kslot(),
        data: Vec::new(),
    };
    re.insert(0, &node_entry(&g.node_key(blk.level, &e), blk.agbno));
    re.insert(1, &node_entry(&rkey, nb.agbno));
    g.store(tx, root, &re, 0);
    hdr::set(tx, p.root.hdr, p.root.root_off, root.agbno.0);
    hdr::set(tx, p.root.hdr, p.root.level_off, root.level as u32 + 1);
    Ok(())
}

/// Remove entry `pos` of the block at `level` of the path; rebalance a
/// block left short, recursively.
pub(crate) fn remove_at(tx: &mut dyn MetaTx, p: &mut Path, level: usize, pos: usize) -> Result<()> {
    let g = p.g;
    let blk = p.lv[level].blk;
    let mut e = g.load(tx, blk);
    e.remove(pos);
    if level + 1 == p.lv.len() {
        g.store(tx, blk, &e, pos);
        if blk.level > 0 && e.len() == 1 {
            // A root with one child: the child becomes the root.
            hdr::set(tx, p.root.hdr, p.root.root_off, e.ptr(0));
            hdr::set(tx, p.root.hdr, p.root.level_off, blk.level as u32);
            free_block(tx, p, blk)?;
        }
        return Ok(());
    }
    let min = g.min_recs(blk.level);
    if e.len() >= min {
        g.store(tx, blk, &e, pos);
        if pos == 0 || g.overlapping() {
            fix_keys(tx, p, level, &g.node_key(blk.level, &e));
        }
        return Ok(());
    }
    let parent = p.lv[level + 1];
    let pe = g.load(tx, parent.blk);
    let pidx = parent.idx;
    let bad = |d: &str| {
        Err(Error::corrupt(
            g.tree.kind().name(),
            Location::Unknown,
            d.to_string(),
        ))
    };
    if pidx + 1 < pe.len() {
        let rb = read_blk(tx, &g, p.agno, pe.ptr(pidx + 1), blk.level)?;
        let mut re = g.load(tx, rb);
        if re.len() > min {
            // Borrow the right sibling's first entry.
            let first = re.remove(0);
            e.insert(e.len(), &first);
            g.store(tx, blk, &e, pos);
            g.store(tx, rb, &re, 0);
            fix_keys(
                tx,
                &sub_path(p, level, pidx + 1),
                level,
                &g.node_key(blk.level, &re),
            );
            if pos == 0 || g.overlapping() {
                fix_keys(tx, p, level, &g.node_key(blk.level, &e));
            }
            return Ok(());
        }
        // Merge the right sibling into this block.
        e.append(&re);
        g.store(tx, blk, &e, pos);
        let rr = g.sib(tx, rb, true);
        g.set_sib(tx, blk, true, rr);
        if rr != NULL_AGBLOCK {
            let rrb = read_blk(tx, &g, p.agno, rr, blk.level)?;
            g.set_sib(tx, rrb, false, blk.agbno.0);
        }
        free_block(tx, p, rb)?;
        if pos == 0 || g.overlapping() {
            fix_keys(tx, p, level, &g.node_key(blk.level, &e));
        }
        return remove_at(tx, p, level + 1, pidx + 1);
    }
    if pidx == 0 {
        return bad("non-root node with a single child");
    }
    let lb = read_blk(tx, &g, p.agno, pe.ptr(pidx - 1), blk.level)?;
    let mut le = g.load(tx, lb);
    if le.len() > min {
        // Borrow the left sibling's last entry.
        let last = le.remove(le.len() - 1);
        e.insert(0, &last);
        g.store(tx, lb, &le, le.len());
        g.store(tx, blk, &e, 0);
        if g.overlapping() {
            fix_keys(
                tx,
                &sub_path(p, level, pidx - 1),
                level,
                &g.node_key(blk.level, &le),
            );
        }
        fix_keys(tx, p, level, &g.node_key(blk.level, &e));
        return Ok(());
    }
    // Merge this block into the left sibling.
    let from = le.len();
    le.append(&e);
    g.store(tx, lb, &le, from);
    let r = g.sib(tx, blk, true);
    g.set_sib(tx, lb, true, r);
    if r != NULL_AGBLOCK {
        let rb = read_blk(tx, &g, p.agno, r, blk.level)?;
        g.set_sib(tx, rb, false, lb.agbno.0);
    }
    free_block(tx, p, blk)?;
    if g.overlapping() {
        fix_keys(
            tx,
            &sub_path(p, level, pidx - 1),
            level,
            &g.node_key(blk.level, &le),
        );
    }
    remove_at(tx, p, level + 1, pidx)
}
