//! The hash index of leaf and node directories: loading it into a
//! [`BigDir`] and writing it back in whichever form fits.
//!
//! ```text
//!  leaf form: leaf1 block at the first fork block of the leaf segment:
//!    blkinfo | count stale pad | entries[count] ... | bests[nb] | nb u32
//!  node form: one leafn block there, or a DA node tree whose root is
//!    there (leafn blocks chained by forw/back in hash order, each level of
//!    DA nodes chained too; node entry = {last hash of child, child dablk});
//!    free index blocks XDF3 in the free segment, block j holding the bests
//!    of data blocks j*maxbests .. (nvalid = last valid + 1, nused = count;
//!    a block with nothing valid is not kept).
//! ```
//! Loading reads the DA nodes and free index blocks, not the leafn blocks
//! under the nodes: an operation reads the leaf blocks whose hash range
//! holds the names it looks for or adds ([`BigDir::load_leaf`]), so its
//! cost does not grow with the directory (the DA node and free index
//! blocks are 1/250th of the leaf blocks). A leaf block's range is known
//! from the node entries: its entries lie between the previous block's
//! node hash and its own ([`LeafBlk::hash`]). Blocks not read are kept as
//! they are, unless their siblings change (then they are read and their
//! pointers rewritten).
//!
//! Rebuild rules at commit, on the leaf blocks read: leafn blocks over
//! capacity are split in two, empty ones dropped, neighbours that fit in
//! three quarters of a block together merged (the neighbours of a block
//! less than 3/8 full are read for that, the kernel's thresholds); leaf
//! form is kept while the entries and bests fit the leaf1 block, node form
//! goes back to leaf form when they fit in three quarters of one (decided
//! when every leaf block was read: all of them are when at most two are
//! left). DA node levels are rebuilt from the leaf list (the hash of a
//! block not read is its node entry's) keeping every child under the node
//! it was under (a new block under its left neighbour's node): a node over
//! capacity is split in two, an emptied one dropped, one less than 3/8 full
//! joined with a neighbour when both fit in 3/4 of a node. So one change
//! rewrites the nodes on its path, within the transaction's reservation
//! (filling the levels evenly instead rewrote whole levels and overran
//! it). Blocks keep their fork offsets where they can,
//! so an unchanged block is not rewritten, and a block whose kind changes
//! at the same address (leaf1 -> leafn -> node root) is re-joined as the
//! new kind and logged whole. Freed index blocks are cancelled in the
//! same transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use std::sync::Arc;

use super::big::{corrupt, write_buf, BigDir, LeafBlk};
use super::skel::{DirSkel, NodeImg};
use crate::bmap::fork;
use crate::bmap::map::ExtentMap;
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::format::crc::Sum;
use crate::format::da::{decode_node_as, DA3_NODE_HDR_SIZE, DA3_NODE_MAGIC, DA_NODE_MAXDEPTH};
use crate::format::dir::DIR3_HDR_SIZE;
use crate::format::dir_data::DATA_MAGIC;
use crate::format::dir_leaf::{
    decode_free_as, decode_leaf_as, free_max_bests, LeafEntry, FREE_MAGIC, LEAF1_MAGIC,
    LEAFN_MAGIC, LEAF_ENTRY_SIZE, LEAF_HDR_SIZE, NULL_DATAOFF,
};
use crate::format::put_be32;
use crate::types::Ino;
use crate::types::WhichFork;
use crate::xact::{InodeId, MetaTx};

const _: u32 = DATA_MAGIC;

/// Test knob: when nonzero, leafn blocks and DA nodes hold at most this
/// many entries (at least 4), so that deep trees come with few entries.
/// The structures stay valid (just less full than the kernel makes them).
#[doc(hidden)]
pub static TEST_FANOUT: AtomicUsize = AtomicUsize::new(0);

fn fanout(cap: usize) -> usize {
    match TEST_FANOUT.load(Ordering::Relaxed) {
        0 => cap,
        k => cap.min(k.max(4)),
    }
}

/// Load a leaf or node directory (data fork EXTENTS or BTREE, not block):
/// from the skeleton kept in core when there is a valid one (see
/// [`super::skel`]), else from the disk.
pub fn load_big(tx: &mut dyn MetaTx, dp: InodeId) -> Result<BigDir> {
    let geo = super::dir_geo(tx);
    let owner = Ino(di_ino(tx, dp));
    let uuid = tx.sb().metadata_uuid();
    if let Some(sk) = DirSkel::kept(tx.fork_cache(dp), tx.inode(dp)) {
        SKEL_HITS.fetch_add(1, Ordering::Relaxed);
        return Ok(BigDir {
            geo,
            dp,
            owner,
            uuid,
            old_map: sk.map.clone(),
            map: sk.map.clone(),
            leaf_form: false,
            leaves: sk.leaves.clone(),
            bests: sk.bests.clone(),
            bufs: BTreeMap::new(),
            base: sk,
            data: BTreeMap::new(),
            delta: 0,
        });
    }
    let (map, _) = fork::load(tx, dp, WhichFork::Data)?;
    let leaf_dablk = geo.leaf_dablk();
    let node_form = map.exts.last().is_some_and(|e| e.end() > geo.free_dablk());
    let mut sk = DirSkel::empty(map.clone());
    let mut d = BigDir {
        geo,
        dp,
        owner,
        uuid,
        old_map: map.clone(),
        map,
        leaf_form: !node_form,
        leaves: Vec::new(),
        bests: Vec::new(),
        bufs: BTreeMap::new(),
        base: Arc::new(DirSkel::empty(ExtentMap::new(Vec::new(), 0))),
        data: BTreeMap::new(),
        delta: 0,
    };
    let n = geo.blksize as usize;
    let root = d.daddr(tx, leaf_dablk)?;
    if !node_form {
        let b = tx.read_buf(root, n, BufKind::DirLeaf1)?;
        let leaf = decode_leaf_as(tx.buf(b), LEAF1_MAGIC, root, owner, &uuid, Sum::InCore)?;
        d.bufs.insert(leaf_dablk, (b, BufKind::DirLeaf1));
        Arc::make_mut(&mut sk.index).insert(leaf_dablk, BufKind::DirLeaf1);
        let mut l = LeafBlk::loaded(
            leaf_dablk,
            leaf.entries.into_iter().filter(|e| !e.is_stale()).collect(),
        );
        l.chain = Some((0, 0));
        d.leaves.push(l);
        d.bests = leaf.bests;
    } else {
        walk_tree(tx, &mut d, &mut sk, leaf_dablk, DA_NODE_MAXDEPTH + 1, true)?;
        if d.leaves.windows(2).any(|w| w[0].hash > w[1].hash) {
            return Err(corrupt(owner, "leafn blocks out of hash order"));
        }
        // Every index block reached (nodes, leaves) must be reached once.
        let mut seen: Vec<u64> = d.leaves.iter().map(|l| l.dablk).collect();
        seen.extend(sk.nodes.keys());
        seen.sort_unstable();
        if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
            return Err(corrupt(
                owner,
                format!("index block {:#x} reached twice", w[0]),
            ));
        }
        link_chain(&mut d.leaves);
        Arc::make_mut(&mut sk.index).extend(d.leaves.iter().map(|l| (l.dablk, BufKind::DirLeafN)));
        // Free index blocks.
        let maxb = free_max_bests(n);
        let fsbs = geo.fsbs() as u64;
        let starts: Vec<u64> = d
            .map
            .exts
            .iter()
            .filter(|e| e.end() > geo.free_dablk())
            .flat_map(|e| {
                let a = e.off.0.max(geo.free_dablk());
                let a = a.div_ceil(fsbs) * fsbs;
                (a..e.end()).step_by(fsbs as usize)
            })
            .collect();
        for dablk in starts {
            let daddr = d.daddr(tx, dablk)?;
            let b = tx.read_buf(daddr, n, BufKind::DirFree)?;
            let f = decode_free_as(tx.buf(b), daddr, owner, &uuid, Sum::InCore)?;
            let j = (dablk - geo.free_dablk()) / fsbs;
            if f.firstdb as u64 != j * maxb as u64 {
                return Err(corrupt(
                    owner,
                    format!("free block {j}: firstdb {}", f.firstdb),
                ));
            }
            let end = f.firstdb as usize + f.bests.len();
            if d.bests.len() < end {
                d.bests.resize(end, NULL_DATAOFF);
            }
            d.bests[f.firstdb as usize..end].copy_from_slice(&f.bests);
            d.bufs.insert(dablk, (b, BufKind::DirFree));
            Arc::make_mut(&mut sk.index).insert(dablk, BufKind::DirFree);
        }
        let last = d.bests.iter().rposition(|&b| b != NULL_DATAOFF);
        d.bests.truncate(last.map_or(0, |l| l + 1));
    }
    if d.bests.first().is_none_or(|&b| b == NULL_DATAOFF) {
        return Err(corrupt(owner, "no data block 0"));
    }
    sk.bests = d.bests.clone();
    sk.leaves = d.leaves.iter().map(LeafBlk::bare).collect();
    d.base = Arc::new(sk);
    Ok(d)
}

/// Operations that found their directory's index in core (a test and
/// statistics counter).
pub static SKEL_HITS: AtomicU64 = AtomicU64::new(0);

/// Commits that kept the DA nodes and the index map as they were (see
/// `BigDir::same_shape`; a test and statistics counter).
pub static SKEL_SAME_SHAPE: AtomicU64 = AtomicU64::new(0);

/// Set every leaf block's sibling pointers to its neighbours in the list
/// (as they are on disk once written).
fn link_chain(leaves: &mut [LeafBlk]) {
    let dablks: Vec<u64> = leaves.iter().map(|l| l.dablk).collect();
    for (i, l) in leaves.iter_mut().enumerate() {
        let back = if i > 0 { dablks[i - 1] } else { 0 };
        l.chain = Some((back, dablks.get(i + 1).copied().unwrap_or(0)));
    }
}

fn di_ino(tx: &dyn MetaTx, dp: InodeId) -> u64 {
    crate::format::dinode_edit::ino(tx.inode(dp))
}

/// Descend the node tree from `dablk`, collecting the leafn blocks in
/// order and the nodes into `sk`. Leaf blocks under a node are not read
/// here (only the root, when it is a leaf): [`BigDir::load_leaf`] reads
/// those an operation needs.
fn walk_tree(
    tx: &mut dyn MetaTx,
    d: &mut BigDir,
    sk: &mut DirSkel,
    dablk: u64,
    above: u16,
    is_root: bool,
) -> Result<()> {
    let n = d.geo.blksize as usize;
    let (owner, uuid) = (d.owner, d.uuid);
    let daddr = d.daddr(tx, dablk)?;
    if sk.nodes.contains_key(&dablk) || d.bufs.contains_key(&dablk) {
        return Err(corrupt(
            owner,
            format!("index block {dablk:#x} reached twice"),
        ));
    }
    // A buffer joined earlier in this transaction comes back whatever kind
    // is asked for: tell the kinds by their magic.
    let tried = if above > 1 {
        tx.read_buf(daddr, n, BufKind::DaNode).ok()
    } else {
        None
    };
    let as_node = tried.filter(|&b| BufKind::DaNode.magic_ok(tx.buf(b)));
    if let Some(b) = as_node {
        let node = decode_node_as(tx.buf(b), daddr, owner, &uuid, Sum::InCore)?;
        if node.level >= above {
            return Err(corrupt(
                owner,
                format!("node level {} out of order", node.level),
            ));
        }
        d.bufs.insert(dablk, (b, BufKind::DaNode));
        Arc::make_mut(&mut sk.index).insert(dablk, BufKind::DaNode);
        Arc::make_mut(&mut sk.nodes).insert(
            dablk,
            NodeImg {
                level: node.level,
                ents: node
                    .entries
                    .iter()
                    .map(|e| (e.hashval, e.before as u64))
                    .collect(),
                forw: node.info.forw as u64,
                back: node.info.back as u64,
            },
        );
        for e in &node.entries {
            let child = e.before as u64;
            if child < d.geo.leaf_dablk() || child >= d.geo.free_dablk() {
                return Err(corrupt(owner, format!("node child {child:#x}")));
            }
            Arc::make_mut(&mut sk.parent).insert(child, dablk);
            if node.level == 1 {
                // Reached twice: told after the walk (load_big).
                d.leaves.push(LeafBlk {
                    dablk: child,
                    hash: e.hashval,
                    ents: None,
                    chain: None,
                });
            } else {
                walk_tree(tx, d, sk, child, node.level, false)?;
            }
        }
        return Ok(());
    }
    if above != 1 && !is_root {
        // A leaf is only expected under a level-1 node (or as the root).
        return Err(corrupt(
            owner,
            format!("leaf block {dablk:#x} at a node level"),
        ));
    }
    let b = match tried {
        Some(b) => b,
        None => tx.read_buf(daddr, n, BufKind::DirLeafN)?,
    };
    let leaf = decode_leaf_as(tx.buf(b), LEAFN_MAGIC, daddr, owner, &uuid, Sum::InCore)?;
    d.bufs.insert(dablk, (b, BufKind::DirLeafN));
    d.leaves.push(LeafBlk::loaded(
        dablk,
        leaf.entries.into_iter().filter(|e| !e.is_stale()).collect(),
    ));
    Ok(())
}

/// Children (hash, child) meant for one node, and the node they were under.
type NodeGroup = (Option<u64>, Vec<(u32, u64)>);

/// Consecutive `items` (hash, child) grouped by the node their child hung
/// under when loaded; a child that is new (not in `parent`) joins the
/// group before it.
fn group_by_parent(items: &[(u32, u64)], parent: &BTreeMap<u64, u64>) -> Vec<NodeGroup> {
    let mut out: Vec<NodeGroup> = Vec::new();
    for &it in items {
        let hint = parent.get(&it.1).copied();
        match out.last_mut() {
            Some((h, g)) if hint.is_none() || *h == hint => g.push(it),
            _ => out.push((hint, vec![it])),
        }
    }
    out
}

/// A DA node to write: (fork block, level, entries {hash, child}).
type NodeRow = (u64, u16, Vec<(u32, u64)>);

/// One index block to write.
struct Out {
    dablk: u64,
    kind: BufKind,
    bytes: Vec<u8>,
}

impl BigDir {
    fn leafn_cap(&self) -> usize {
        fanout((self.geo.blksize as usize - LEAF_HDR_SIZE) / LEAF_ENTRY_SIZE)
    }

    /// Read the leaf blocks [`Self::reshape`] may need besides those this
    /// operation read: all of them when there are at most two (the form
    /// may change), and the neighbours of a block less than 3/8 full (so
    /// that it can be merged, the kernel's threshold).
    fn load_for_reshape(&mut self, tx: &mut dyn MetaTx) -> Result<()> {
        if self.leaves.len() <= 2 {
            return self.load_all_leaves(tx);
        }
        let cap = self.leafn_cap();
        let thin: Vec<usize> = (0..self.leaves.len())
            .filter(|&i| {
                self.leaves[i]
                    .ents
                    .as_ref()
                    .is_some_and(|e| e.len() < cap * 3 / 8)
            })
            .collect();
        for i in thin {
            if i > 0 {
                self.load_leaf(tx, i - 1)?;
            }
            if i + 1 < self.leaves.len() {
                self.load_leaf(tx, i + 1)?;
            }
        }
        Ok(())
    }

    /// Reshape the leaves read in this operation and choose the form (see
    /// the module doc). The leaf form is chosen only when every leaf block
    /// was read (the count is known).
    fn reshape(&mut self) {
        let n = self.geo.blksize as usize;
        let all_read = self.leaves.iter().all(|l| l.ents.is_some());
        let to_leaf = all_read && {
            let count: usize = self.leaves.iter().map(|l| l.ents().len()).sum();
            let need = LEAF_HDR_SIZE + count * LEAF_ENTRY_SIZE + self.bests.len() * 2 + 4;
            if self.leaf_form {
                need <= n
            } else {
                need <= n * 3 / 4
            }
        };
        if to_leaf {
            let ents: Vec<LeafEntry> = self
                .leaves
                .drain(..)
                .flat_map(|l| l.ents.unwrap_or_default())
                .collect();
            self.leaves
                .push(LeafBlk::loaded(self.geo.leaf_dablk(), ents));
            self.leaf_form = true;
            return;
        }
        self.leaf_form = false;
        let cap = self.leafn_cap();
        // Most operations leave every block read neither empty, nor over
        // capacity, nor small enough to merge with the block before it
        // (the rules below): then only the bounds of the blocks read move.
        let quiet = (0..self.leaves.len()).all(|i| {
            let Some(e) = self.leaves[i].ents.as_ref() else {
                return true;
            };
            let merges = i > 0
                && self.leaves[i - 1]
                    .ents
                    .as_ref()
                    .is_some_and(|p| p.len() + e.len() <= cap * 3 / 4);
            !e.is_empty() && e.len() <= cap && !merges
        });
        if quiet {
            for l in &mut self.leaves {
                if let Some(h) = l.ents.as_ref().and_then(|e| e.last()) {
                    l.hash = h.hashval;
                }
            }
            return;
        }
        let mut out: Vec<LeafBlk> = Vec::with_capacity(self.leaves.len() + 1);
        for l in self.leaves.drain(..) {
            if l.ents.as_ref().is_some_and(|e| e.is_empty()) {
                continue;
            }
            if let (Some(p), Some(le)) = (out.last_mut(), l.ents.as_ref()) {
                if let Some(pe) = p.ents.as_mut() {
                    if pe.len() + le.len() <= cap * 3 / 4 {
                        pe.extend_from_slice(le);
                        p.hash = l.hash;
                        continue;
                    }
                }
            }
            out.push(l);
        }
        let mut i = 0;
        while i < out.len() {
            let len = out[i].ents.as_ref().map_or(0, |e| e.len());
            if len > cap {
                let rest = out[i].ents_mut().split_off(len / 2);
                let mut new = LeafBlk::loaded(u64::MAX, rest);
                new.hash = out[i].hash;
                out.insert(i + 1, new);
            } else {
                i += 1;
            }
        }
        // Bounds become exact for the blocks read.
        for l in &mut out {
            if let Some(h) = l.ents.as_ref().and_then(|e| e.last()) {
                l.hash = h.hashval;
            }
        }
        self.leaves = out;
    }

    /// Write the index back (and then the data blocks and the fork).
    pub fn commit(&mut self, tx: &mut dyn MetaTx) -> Result<()> {
        self.load_for_reshape(tx)?;
        self.reshape();
        let geo = self.geo;
        let n = geo.blksize as usize;
        let fsbs = geo.fsbs() as u64;
        let root = geo.leaf_dablk();
        // Next unused fork block of the leaf segment.
        let mut next = self
            .map
            .exts
            .iter()
            .filter(|e| e.off.0 < geo.free_dablk())
            .map(|e| e.end())
            .max()
            .unwrap_or(0)
            .max(root + fsbs);
        next = next.div_ceil(fsbs) * fsbs;
        let mut fresh = || {
            let d = next;
            next += fsbs;
            d
        };
        // Place the leaves.
        let single = self.leaves.len() == 1;
        for l in &mut self.leaves {
            if single {
                l.dablk = root;
            } else if l.dablk == u64::MAX || l.dablk == root {
                l.dablk = fresh();
            }
        }
        // A block not read whose siblings change is read now (its
        // pointers are rewritten).
        for i in 0..self.leaves.len() {
            if self.leaves[i].ents.is_some() {
                continue;
            }
            let back = if i > 0 { self.leaves[i - 1].dablk } else { 0 };
            let forw = self.leaves.get(i + 1).map_or(0, |l| l.dablk);
            if self.leaves[i].chain != Some((back, forw)) {
                self.load_leaf(tx, i)?;
            }
        }
        // Free index blocks.
        let maxb = free_max_bests(n);
        let mut frees: Vec<(u64, usize)> = Vec::new();
        if !self.leaf_form {
            for (j, c) in self.bests.chunks(maxb).enumerate() {
                if c.iter().any(|&b| b != NULL_DATAOFF) {
                    frees.push((geo.free_dablk() + j as u64 * fsbs, j));
                }
            }
        }
        // The same leaf blocks under the same node entries, and the same
        // free index blocks, as the kept index: the DA nodes and the
        // index map stay as they are (most creates and removes), so
        // nothing of their size is rebuilt.
        let fast = self.same_shape()
            && self
                .base
                .index
                .range(geo.free_dablk()..)
                .map(|(d, _)| *d)
                .eq(frees.iter().map(|f| f.0));
        if fast {
            SKEL_SAME_SHAPE.fetch_add(1, Ordering::Relaxed);
        }
        // DA node levels: (dablk, level, entries) rows, root last.
        let mut rows: Vec<Vec<NodeRow>> = Vec::new();
        if !single && !fast {
            let cap = fanout((n - DA3_NODE_HDR_SIZE) / 8);
            let mut items: Vec<(u32, u64)> = self
                .leaves
                .iter()
                .map(|l| (l.last_hash().unwrap_or(l.hash), l.dablk))
                .collect();
            let mut taken = BTreeSet::new();
            let mut level = 1u16;
            loop {
                if items.len() <= cap {
                    rows.push(vec![(root, level, items)]);
                    break;
                }
                if level >= DA_NODE_MAXDEPTH {
                    return Err(Error::NoSpace);
                }
                // Children stay under the node they were under (a new
                // block under its left neighbour's); a node over capacity
                // is split, an emptied one goes. So a change rewrites the
                // nodes on its path, not a whole level.
                let mut row = Vec::new();
                let mut up = Vec::new();
                // A node less than 3/8 full joins a neighbour when both
                // fit in 3/4 of one (the kernel's thresholds).
                let mut groups: Vec<NodeGroup> = Vec::new();
                for g in group_by_parent(&items, &self.base.parent) {
                    if let Some(p) = groups.last_mut() {
                        let thin = p.1.len() < cap * 3 / 8 || g.1.len() < cap * 3 / 8;
                        if thin && p.1.len() + g.1.len() <= cap * 3 / 4 {
                            p.1.extend(g.1);
                            continue;
                        }
                    }
                    groups.push(g);
                }
                for (hint, g) in groups {
                    let k = g.len().div_ceil(cap);
                    let per = g.len().div_ceil(k);
                    for (ci, c) in g.chunks(per).enumerate() {
                        let dablk = match hint {
                            Some(h) if ci == 0 && h != root && !taken.contains(&h) => h,
                            _ => fresh(),
                        };
                        taken.insert(dablk);
                        up.push((c.last().unwrap().0, dablk));
                        row.push((dablk, level, c.to_vec()));
                    }
                }
                rows.push(row);
                items = up;
                level += 1;
            }
        }
        // Which blocks the new index uses; allocate, then free the rest
        // (those of the index as it was, and any joined since).
        let base = self.base.clone();
        let mut daddrs = BTreeMap::new();
        if !fast {
            let mut used: BTreeSet<u64> = self.leaves.iter().map(|l| l.dablk).collect();
            for row in &rows {
                used.extend(row.iter().map(|r| r.0));
            }
            used.extend(frees.iter().map(|f| f.0));
            for &dablk in &used {
                if self.map.lookup(dablk).is_none() {
                    daddrs.insert(dablk, self.alloc_block(tx, dablk)?);
                }
            }
            let gone: BTreeSet<u64> = base
                .index
                .keys()
                .chain(self.bufs.keys())
                .filter(|d| !used.contains(d))
                .copied()
                .collect();
            for dablk in gone {
                let b = self.ensure_joined(tx, dablk)?;
                tx.stale_buf(b);
                self.bufs.remove(&dablk);
                self.free_block(tx, dablk)?;
            }
        }
        // Build the blocks that change: the leaf blocks read, the nodes and
        // free index blocks that differ from the index as it was.
        let mut outs = Vec::new();
        let nl = self.leaves.len();
        for (i, l) in self.leaves.iter().enumerate() {
            let Some(ents) = l.ents.as_ref() else {
                // Not read: unchanged, siblings included.
                continue;
            };
            let mut b = vec![0u8; n];
            let magic = if self.leaf_form {
                LEAF1_MAGIC
            } else {
                LEAFN_MAGIC
            };
            let (forw, back) = if single {
                (0, 0)
            } else {
                (
                    if i + 1 < nl {
                        self.leaves[i + 1].dablk
                    } else {
                        0
                    },
                    if i > 0 { self.leaves[i - 1].dablk } else { 0 },
                )
            };
            self.blkinfo(&mut b, forw, back, magic);
            b[56..58].copy_from_slice(&(ents.len() as u16).to_be_bytes());
            for (k, e) in ents.iter().enumerate() {
                let p = LEAF_HDR_SIZE + k * LEAF_ENTRY_SIZE;
                put_be32(&mut b, p, e.hashval);
                put_be32(&mut b, p + 4, e.address);
            }
            if self.leaf_form {
                let nb = self.bests.len();
                let t = n - 4 - nb * 2;
                for (k, v) in self.bests.iter().enumerate() {
                    b[t + 2 * k..t + 2 * k + 2].copy_from_slice(&v.to_be_bytes());
                }
                put_be32(&mut b, n - 4, nb as u32);
            }
            let kind = if self.leaf_form {
                BufKind::DirLeaf1
            } else {
                BufKind::DirLeafN
            };
            outs.push(Out {
                dablk: l.dablk,
                kind,
                bytes: b,
            });
        }
        let mut nodes = BTreeMap::new();
        for row in &rows {
            for (i, (dablk, level, items)) in row.iter().enumerate() {
                let img = NodeImg {
                    level: *level,
                    ents: items.clone(),
                    forw: row.get(i + 1).map_or(0, |r| r.0),
                    back: if i > 0 { row[i - 1].0 } else { 0 },
                };
                let same = base.nodes.get(dablk) == Some(&img)
                    && base.index.get(dablk) == Some(&BufKind::DaNode);
                if !same {
                    let mut b = vec![0u8; n];
                    self.blkinfo(&mut b, img.forw, img.back, DA3_NODE_MAGIC);
                    b[56..58].copy_from_slice(&(items.len() as u16).to_be_bytes());
                    b[58..60].copy_from_slice(&level.to_be_bytes());
                    for (k, (h, c)) in items.iter().enumerate() {
                        let p = DA3_NODE_HDR_SIZE + k * 8;
                        put_be32(&mut b, p, *h);
                        put_be32(&mut b, p + 4, *c as u32);
                    }
                    outs.push(Out {
                        dablk: *dablk,
                        kind: BufKind::DaNode,
                        bytes: b,
                    });
                }
                nodes.insert(*dablk, img);
            }
        }
        for &(dablk, j) in &frees {
            let first = j * maxb;
            let c = &self.bests[first..(first + maxb).min(self.bests.len())];
            let was = base.bests.get(first..(first + maxb).min(base.bests.len()));
            if base.index.get(&dablk) == Some(&BufKind::DirFree) && was == Some(c) {
                continue;
            }
            let mut b = vec![0u8; n];
            put_be32(&mut b, 0, FREE_MAGIC);
            b[24..40].copy_from_slice(&self.uuid);
            b[40..48].copy_from_slice(&self.owner.0.to_be_bytes());
            let nvalid = c
                .iter()
                .rposition(|&v| v != NULL_DATAOFF)
                .map_or(0, |p| p + 1);
            let nused = c.iter().filter(|&&v| v != NULL_DATAOFF).count();
            put_be32(&mut b, 48, first as u32);
            put_be32(&mut b, 52, nvalid as u32);
            put_be32(&mut b, 56, nused as u32);
            for (k, v) in c[..nvalid].iter().enumerate() {
                let p = DIR3_HDR_SIZE + 2 * k;
                b[p..p + 2].copy_from_slice(&v.to_be_bytes());
            }
            outs.push(Out {
                dablk,
                kind: BufKind::DirFree,
                bytes: b,
            });
        }
        for mut o in outs {
            let daddr = match daddrs.get(&o.dablk) {
                Some(&a) => a,
                None => self.daddr(tx, o.dablk)?,
            };
            // The self-describing address (the free index header has it at
            // 8, the others at 16).
            let at = if o.kind == BufKind::DirFree { 8 } else { 16 };
            o.bytes[at..at + 8].copy_from_slice(&daddr.0.to_be_bytes());
            // A block of the index as it was is joined to be rewritten.
            let old = if base.index.contains_key(&o.dablk) || self.bufs.contains_key(&o.dablk) {
                self.ensure_joined(tx, o.dablk)?;
                self.bufs.get(&o.dablk).copied()
            } else {
                None
            };
            let same = old.filter(|&(_, k)| k == o.kind).map(|(b, _)| b);
            if let Some(b) = same {
                // Keep the stamped fields (CRC, LSN) as they are.
                let (crc, lsn) = if o.kind == BufKind::DirFree {
                    (4, 16)
                } else {
                    (12, 24)
                };
                let cur = tx.buf(b);
                let (c0, l0) = (cur[crc..crc + 4].to_vec(), cur[lsn..lsn + 8].to_vec());
                o.bytes[crc..crc + 4].copy_from_slice(&c0);
                o.bytes[lsn..lsn + 8].copy_from_slice(&l0);
            }
            write_buf(tx, same, false, daddr, o.kind, &o.bytes)?;
        }
        link_chain(&mut self.leaves);
        // The index as it now is (map and bests are set with the fork).
        let leaf_kind = if self.leaf_form {
            BufKind::DirLeaf1
        } else {
            BufKind::DirLeafN
        };
        let (index, parent, nodes) = if fast {
            (base.index.clone(), base.parent.clone(), base.nodes.clone())
        } else {
            let mut index: BTreeMap<u64, BufKind> =
                self.leaves.iter().map(|l| (l.dablk, leaf_kind)).collect();
            index.extend(nodes.keys().map(|&d| (d, BufKind::DaNode)));
            index.extend(frees.iter().map(|&(d, _)| (d, BufKind::DirFree)));
            let mut parent = BTreeMap::new();
            for row in &rows {
                for (dablk, _, items) in row {
                    parent.extend(items.iter().map(|&(_, c)| (c, *dablk)));
                }
            }
            (Arc::new(index), Arc::new(parent), Arc::new(nodes))
        };
        let leaves = self.leaves.iter().map(LeafBlk::bare).collect();
        self.base = Arc::new(DirSkel {
            fp: [0; 7],
            map: ExtentMap::new(Vec::new(), 0),
            leaves,
            bests: Vec::new(),
            parent,
            nodes,
            index,
        });
        self.commit_data_and_fork(tx)
    }

    /// Whether the leaf blocks are those of the kept index, in the same
    /// places, each under a node entry of the same hash: then every DA
    /// node is as it was (a node's entries are its children's last
    /// hashes), and commit leaves them (and the node merges the full
    /// rebuild would consider) alone.
    fn same_shape(&self) -> bool {
        let kept = &self.base.leaves;
        !self.leaf_form
            && self.leaves.len() > 1
            && self.leaves.len() == kept.len()
            && !self.base.nodes.is_empty()
            && self
                .leaves
                .iter()
                .zip(kept)
                .all(|(l, k)| l.dablk == k.dablk && l.last_hash() == Some(k.hash))
    }

    /// The buffer of index block `dablk` (of the index as it was, or
    /// joined in this operation), joined now if it was not.
    fn ensure_joined(&mut self, tx: &mut dyn MetaTx, dablk: u64) -> Result<crate::xact::BufId> {
        if let Some(&(b, _)) = self.bufs.get(&dablk) {
            return Ok(b);
        }
        let kind = *self
            .base
            .index
            .get(&dablk)
            .ok_or_else(|| corrupt(self.owner, format!("index block {dablk:#x} unknown")))?;
        let daddr = self.daddr(tx, dablk)?;
        let b = tx.read_buf(daddr, self.geo.blksize as usize, kind)?;
        self.bufs.insert(dablk, (b, kind));
        Ok(b)
    }

    /// The block info header (the address is set when it is known).
    fn blkinfo(&self, b: &mut [u8], forw: u64, back: u64, magic: u16) {
        put_be32(b, 0, forw as u32);
        put_be32(b, 4, back as u32);
        b[8..10].copy_from_slice(&magic.to_be_bytes());
        b[32..48].copy_from_slice(&self.uuid);
        b[48..56].copy_from_slice(&self.owner.0.to_be_bytes());
    }

    /// Drop the whole index (leaf -> block conversion): cancel and free
    /// every index block.
    pub fn drop_index(&mut self, tx: &mut dyn MetaTx) -> Result<()> {
        let all: BTreeSet<u64> = self
            .base
            .index
            .keys()
            .chain(self.bufs.keys())
            .copied()
            .collect();
        for dablk in all {
            let b = self.ensure_joined(tx, dablk)?;
            tx.stale_buf(b);
            self.free_block(tx, dablk)?;
        }
        self.bufs.clear();
        Ok(())
    }
}
