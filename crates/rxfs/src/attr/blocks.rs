//! Attribute forks in block form: one leaf block at attr fork block 0
//! ("leaf form"), or a DA btree whose root node is block 0 and whose
//! leaves, chained by `forw`/`back` in hash order, sit in other blocks
//! ("node form"); values too big for a leaf live in remote value blocks
//! (see [`crate::format::attr`]).
//!
//! How a change is made: [`Tree::load`] reads every node and leaf of the
//! fork into entry lists (one per leaf, in hash order); the caller edits
//! them ([`Tree::find`], [`Tree::take`], [`Tree::insert`]); [`Tree::store`]
//! splits overfull leaves, drops empty ones, chooses the form (one leaf:
//! leaf form, else node form with as many node levels as needed),
//! allocates the blocks new leaves and nodes need, frees those no longer
//! used, and writes every leaf and node whose bytes changed (logging only
//! the changed ranges). Leaves keep their blocks and their entries where
//! they were unless they split or empty, so a change touches few blocks.
//!
//! Placement: new leaf, node and remote value blocks take the lowest
//! unmapped attr fork offsets from 1 on (block 0 is the root).
//!
//! Invariants kept: every leaf fits its block and holds at least one
//! entry (unless it is the leaf-form root); entries are in hash order
//! within and across leaves (equal hashes may continue in the next leaf);
//! a node entry holds the last hash of its child's subtree; at most
//! [`DA_NODE_MAXDEPTH`] levels. Remote values are written in the same
//! transaction as the leaf entry naming them, so no entry is ever
//! INCOMPLETE.

use std::collections::{BTreeMap, BTreeSet};

use crate::bmap::attrfork::{attr_alloc, attr_free, attr_map};
use crate::error::{Error, Location, Result};
use crate::format::attr::{self, AttrEntry, AttrValue};
use crate::format::attr_enc::{self as enc, BlkId};
use crate::format::attr_remote::{rmt_blocks, verify_attr_rmt_block};
use crate::format::bufkind::BufKind;
use crate::format::da::{self, DA_NODE_MAXDEPTH};
use crate::format::Uuid;
use crate::types::{Daddr, FileBlock, FsBlock, Ino};
use crate::xact::{BufId, InodeId, MetaTx};

/// A node block being planned: (block or `None` until allocated, level,
/// (hash, child index in the row below) entries).
type NodeRow = (Option<u64>, u16, Vec<(u32, usize)>);

/// One leaf as loaded or planned.
#[derive(Debug, Clone)]
struct LeafBlk {
    /// Attr fork block, `None` until [`Tree::store`] gives it one.
    dablk: Option<u64>,
    ents: Vec<AttrEntry>,
}

/// An attribute fork in leaf or node form, decoded.
pub struct Tree {
    ino: Ino,
    uuid: Uuid,
    bs: usize,
    leaves: Vec<LeafBlk>,
    /// Node blocks as loaded, root (block 0) included, in level order.
    nodes: Vec<u64>,
    /// Node levels above the leaves (0: leaf form).
    levels: usize,
    /// Buffers joined while loading: attr fork block -> (buffer, kind).
    bufs: BTreeMap<u64, (BufId, BufKind)>,
}

fn corrupt(ino: Ino, detail: impl Into<String>) -> Error {
    Error::corrupt("attr fork", Location::Ino(ino.0), detail)
}

/// Disk address of attr fork block `blk` of `ip`.
fn daddr_of(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino, blk: u64) -> Result<Daddr> {
    let map = attr_map(tx, ip)?;
    let e = map
        .lookup(blk)
        .ok_or_else(|| corrupt(ino, format!("attr fork block {blk} is not mapped")))?;
    let fsb = FsBlock(e.start + (blk - e.off.0));
    Ok(tx.geo().fsb_to_daddr(fsb))
}

/// Whether a value of `len` bytes for a name of `namelen` bytes is stored
/// in the leaf (the kernel's rule: its record is under 3/4 of a block).
pub fn value_is_local(namelen: usize, len: usize, bs: usize) -> bool {
    attr::leaf_entsize_local(namelen, len) < bs / 2 + bs / 4
}

impl Tree {
    /// An empty tree for `ip` (its fork is being converted from shortform).
    pub fn empty(tx: &dyn MetaTx, ino: Ino) -> Tree {
        Tree {
            ino,
            uuid: tx.sb().metadata_uuid(),
            bs: tx.geo().blocksize as usize,
            leaves: vec![LeafBlk {
                dablk: None,
                ents: Vec::new(),
            }],
            nodes: Vec::new(),
            levels: 0,
            bufs: BTreeMap::new(),
        }
    }

    /// Read the leaf or node form attr fork of `ip`.
    pub fn load(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino) -> Result<Tree> {
        let mut t = Tree::empty(tx, ino);
        t.leaves.clear();
        let d0 = daddr_of(tx, ip, ino, 0)?;
        let bs = t.bs;
        let as_node = tx
            .read_buf(d0, bs, BufKind::DaNode)
            .ok()
            .filter(|&b| BufKind::DaNode.magic_ok(tx.buf(b)));
        let Some(root) = as_node else {
            let b = tx.read_buf(d0, bs, BufKind::AttrLeaf)?;
            let l = attr::decode_leaf(tx.buf(b), d0, ino, &t.uuid)?;
            t.bufs.insert(0, (b, BufKind::AttrLeaf));
            t.leaves.push(LeafBlk {
                dablk: Some(0),
                ents: l.entries,
            });
            return Ok(t);
        };
        // Node form: level by level from the root.
        let mut seen = BTreeSet::from([0u64]);
        let mut row = vec![(0u64, root, d0)];
        // The level every node of the row being read must have (the root
        // sets it).
        let mut level: Option<u16> = None;
        loop {
            let mut children = Vec::new();
            for &(dablk, b, daddr) in &row {
                let n = da::decode_node(tx.buf(b), daddr, ino, &t.uuid)?;
                if level.is_some_and(|l| n.level != l) || n.entries.is_empty() {
                    return Err(corrupt(ino, format!("node block {dablk} level/count")));
                }
                level = Some(n.level);
                t.levels = t.levels.max(n.level as usize);
                t.bufs.insert(dablk, (b, BufKind::DaNode));
                t.nodes.push(dablk);
                for e in &n.entries {
                    let c = e.before as u64;
                    if !seen.insert(c) {
                        return Err(corrupt(ino, format!("block {c} linked twice")));
                    }
                    children.push(c);
                }
            }
            if level == Some(1) {
                for c in children {
                    let daddr = daddr_of(tx, ip, ino, c)?;
                    let b = tx.read_buf(daddr, bs, BufKind::AttrLeaf)?;
                    let l = attr::decode_leaf(tx.buf(b), daddr, ino, &t.uuid)?;
                    t.bufs.insert(c, (b, BufKind::AttrLeaf));
                    t.leaves.push(LeafBlk {
                        dablk: Some(c),
                        ents: l.entries,
                    });
                }
                break;
            }
            row.clear();
            level = level.map(|l| l - 1);
            for c in children {
                let daddr = daddr_of(tx, ip, ino, c)?;
                let b = tx.read_buf(daddr, bs, BufKind::DaNode)?;
                row.push((c, b, daddr));
            }
        }
        let ordered = t.leaves.windows(2).all(|w| {
            let (a, b) = (w[0].ents.last(), w[1].ents.first());
            a.zip(b).is_none_or(|(a, b)| a.hashval <= b.hashval)
        });
        if !ordered {
            return Err(corrupt(ino, "leaves out of hash order"));
        }
        Ok(t)
    }

    /// Every entry, in hash order.
    pub fn entries(&self) -> impl Iterator<Item = &AttrEntry> {
        self.leaves.iter().flat_map(|l| l.ents.iter())
    }

    /// (node levels, node blocks, leaves) as loaded or last stored.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.levels, self.nodes.len(), self.leaves.len())
    }

    /// The entries of leaf `li`.
    pub fn entries_of(&self, li: usize) -> &[AttrEntry] {
        &self.leaves[li].ents
    }

    /// Where the complete attribute `name` in `ns` is: (leaf, index).
    pub fn find(&self, ns: attr::Namespace, name: &[u8]) -> Option<(usize, usize)> {
        let h = da::hashname(name);
        self.leaves.iter().enumerate().find_map(|(li, l)| {
            l.ents
                .iter()
                .position(|e| e.hashval == h && e.matches(ns, name))
                .map(|ei| (li, ei))
        })
    }

    /// Remove and return the entry at `at`.
    pub fn take(&mut self, at: (usize, usize)) -> AttrEntry {
        self.leaves[at.0].ents.remove(at.1)
    }

    /// Add `e` (its hash set) in hash order, after entries of equal hash.
    pub fn insert(&mut self, e: AttrEntry) {
        let li = self
            .leaves
            .iter()
            .position(|l| l.ents.last().is_some_and(|x| x.hashval >= e.hashval))
            .unwrap_or(self.leaves.len() - 1);
        let l = &mut self.leaves[li];
        let at = l.ents.partition_point(|x| x.hashval <= e.hashval);
        l.ents.insert(at, e);
    }

    /// Whether the fork would be a single leaf holding every entry.
    pub fn is_leaf_form(&self) -> bool {
        self.leaves.len() == 1 && enc::leaf_bytes(&self.leaves[0].ents) <= self.bs
    }

    /// The value of `e`, reading its remote blocks.
    pub fn value(&self, tx: &mut dyn MetaTx, ip: InodeId, e: &AttrEntry) -> Result<Vec<u8>> {
        let (blk, len) = match &e.value {
            AttrValue::Local(v) => return Ok(v.clone()),
            AttrValue::Remote { blk, len } => (*blk as u64, *len),
        };
        let mut out = Vec::with_capacity(len as usize);
        for i in 0..rmt_blocks(len, self.bs as u32) as u64 {
            let daddr = daddr_of(tx, ip, self.ino, blk + i)?;
            let b = tx.read_buf(daddr, self.bs, BufKind::AttrRmt)?;
            let p = verify_attr_rmt_block(
                tx.buf(b),
                daddr,
                self.ino,
                &self.uuid,
                out.len() as u32,
                len - out.len() as u32,
            )?;
            out.extend_from_slice(p);
        }
        Ok(out)
    }

    /// Split overfull leaves (at the hash boundary nearest the middle
    /// byte), drop empty ones (one leaf always stays).
    fn rebalance(&mut self) {
        let bs = self.bs;
        let mut i = 0;
        while i < self.leaves.len() {
            if enc::leaf_bytes(&self.leaves[i].ents) > bs {
                let ents = &self.leaves[i].ents;
                let total: usize = ents.iter().map(|e| 8 + enc::entsize(e)).sum();
                let mut acc = 0;
                let mut best = (usize::MAX, 1);
                for k in 1..ents.len() {
                    acc += 8 + enc::entsize(&ents[k - 1]);
                    let boundary = ents[k - 1].hashval != ents[k].hashval;
                    let skew = acc.abs_diff(total - acc) + if boundary { 0 } else { bs };
                    if skew < best.0 {
                        best = (skew, k);
                    }
                }
                let right = self.leaves[i].ents.split_off(best.1);
                self.leaves.insert(
                    i + 1,
                    LeafBlk {
                        dablk: None,
                        ents: right,
                    },
                );
                continue;
            }
            i += 1;
        }
        if self.leaves.len() > 1 {
            self.leaves.retain(|l| !l.ents.is_empty());
        }
        // Join neighbours that fit together in 3/4 of a block (the slack
        // keeps a join from splitting again at the next insertion).
        let mut i = 0;
        while i + 1 < self.leaves.len() {
            let both = enc::leaf_bytes(&self.leaves[i].ents)
                + enc::leaf_bytes(&self.leaves[i + 1].ents)
                - attr::ATTR3_LEAF_HDR_SIZE;
            if both <= bs / 2 + bs / 4 {
                let right = self.leaves.remove(i + 1);
                self.leaves[i].ents.extend(right.ents);
            } else {
                i += 1;
            }
        }
    }

    /// Attr fork blocks of `n` free offsets (lowest first, from 1 on, not
    /// in `taken`), allocated and mapped one by one.
    fn new_blocks(
        tx: &mut dyn MetaTx,
        ip: InodeId,
        ino: Ino,
        n: usize,
        taken: &mut BTreeSet<u64>,
    ) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        let map = attr_map(tx, ip)?;
        let mut pos = 1u64;
        while out.len() < n {
            if map.lookup(pos).is_none() && !taken.contains(&pos) {
                out.push(pos);
                taken.insert(pos);
            }
            pos += 1;
        }
        for &b in &out {
            attr_alloc(tx, ip, ino, FileBlock(b), 1)?;
        }
        Ok(out)
    }

    /// Write the tree back (see the module docs). With no entry left the
    /// caller removes the fork instead.
    pub fn store(&mut self, tx: &mut dyn MetaTx, ip: InodeId) -> Result<()> {
        self.rebalance();
        let (ino, bs) = (self.ino, self.bs);
        let leaf_form = self.leaves.len() == 1;
        let cap = enc::node_capacity(bs);
        // Which blocks the new shape uses.
        let mut taken: BTreeSet<u64> = BTreeSet::new();
        if leaf_form {
            self.leaves[0].dablk = Some(0);
        } else {
            for l in &mut self.leaves {
                if l.dablk == Some(0) {
                    l.dablk = None;
                }
            }
        }
        taken.extend(self.leaves.iter().filter_map(|l| l.dablk));
        // Node rows, bottom up: (dablk or None, level, items).
        let mut rows: Vec<Vec<NodeRow>> = Vec::new();
        if !leaf_form {
            let mut items: Vec<(u32, usize)> = (0..self.leaves.len())
                .map(|i| (self.leaves[i].ents.last().map_or(0, |e| e.hashval), i))
                .collect();
            let mut level = 1u16;
            let mut reuse = self.nodes.iter().copied().filter(|&b| b != 0);
            loop {
                if items.len() <= cap {
                    rows.push(vec![(Some(0), level, items)]);
                    break;
                }
                if level + 1 >= DA_NODE_MAXDEPTH {
                    return Err(Error::NoSpace);
                }
                let mut row = Vec::new();
                let mut up = Vec::new();
                for (k, c) in items.chunks(cap).enumerate() {
                    let d = reuse.next();
                    up.push((c.last().unwrap().0, k));
                    row.push((d, level, c.to_vec()));
                }
                rows.push(row);
                items = up;
                level += 1;
            }
            taken.insert(0);
            for row in &rows {
                taken.extend(row.iter().filter_map(|r| r.0));
            }
        }
        // Allocate what has no block yet.
        let need = self.leaves.iter().filter(|l| l.dablk.is_none()).count()
            + rows.iter().flatten().filter(|r| r.0.is_none()).count();
        let mut fresh = Self::new_blocks(tx, ip, ino, need, &mut taken)?.into_iter();
        for l in &mut self.leaves {
            if l.dablk.is_none() {
                l.dablk = fresh.next();
            }
        }
        for r in rows.iter_mut().flatten() {
            if r.0.is_none() {
                r.0 = fresh.next();
            }
        }
        if leaf_form && !self.bufs.contains_key(&0) && attr_map(tx, ip)?.lookup(0).is_none() {
            attr_alloc(tx, ip, ino, FileBlock(0), 1)?;
        }
        // Free the blocks no longer used.
        let gone: Vec<(u64, BufId)> = self
            .bufs
            .iter()
            .filter(|(d, _)| !taken.contains(d))
            .map(|(d, (b, _))| (*d, *b))
            .collect();
        for (d, b) in gone {
            tx.stale_buf(b);
            self.bufs.remove(&d);
            attr_free(tx, ip, FileBlock(d), 1)?;
        }
        // Write the leaves.
        let n = self.leaves.len();
        let dablks: Vec<u64> = self.leaves.iter().map(|l| l.dablk.unwrap()).collect();
        for i in 0..n {
            let (forw, back) = if leaf_form {
                (0, 0)
            } else {
                (
                    dablks.get(i + 1).copied().unwrap_or(0),
                    if i > 0 { dablks[i - 1] } else { 0 },
                )
            };
            let daddr = daddr_of(tx, ip, ino, dablks[i])?;
            let id = BlkId {
                forw: forw as u32,
                back: back as u32,
                daddr: daddr.0,
                uuid: self.uuid,
                owner: ino.0,
            };
            let bytes = enc::encode_leaf(&self.leaves[i].ents, bs, &id);
            self.write(tx, dablks[i], daddr, BufKind::AttrLeaf, bytes)?;
        }
        self.levels = rows.len();
        self.nodes = rows.iter().flatten().map(|r| r.0.unwrap()).collect();
        // Write the nodes: row 0 is level 1 (children: leaves), row j's
        // children are the blocks of row j - 1.
        for j in 0..rows.len() {
            for k in 0..rows[j].len() {
                let (d, level, ref items) = rows[j][k];
                let d = d.unwrap();
                let items: Vec<(u32, u32)> = items
                    .iter()
                    .map(|&(h, c)| {
                        let child = if j == 0 {
                            dablks[c]
                        } else {
                            rows[j - 1][c].0.unwrap()
                        };
                        (h, child as u32)
                    })
                    .collect();
                let forw = rows[j].get(k + 1).map_or(0, |r| r.0.unwrap());
                let back = if k > 0 { rows[j][k - 1].0.unwrap() } else { 0 };
                let daddr = daddr_of(tx, ip, ino, d)?;
                let id = BlkId {
                    forw: forw as u32,
                    back: back as u32,
                    daddr: daddr.0,
                    uuid: self.uuid,
                    owner: ino.0,
                };
                let bytes = enc::encode_node(&items, level, bs, &id);
                self.write(tx, d, daddr, BufKind::DaNode, bytes)?;
            }
        }
        Ok(())
    }

    /// Put `bytes` in attr fork block `dablk`: into its joined buffer if it
    /// has the same kind (logging what changed), else a fresh buffer.
    fn write(
        &mut self,
        tx: &mut dyn MetaTx,
        dablk: u64,
        daddr: Daddr,
        kind: BufKind,
        mut bytes: Vec<u8>,
    ) -> Result<()> {
        match self.bufs.get(&dablk) {
            Some(&(b, k)) if k == kind => {
                // Keep the stamped CRC and LSN as they are.
                let cur = tx.buf(b);
                let (crc, lsn) = (cur[12..16].to_vec(), cur[24..32].to_vec());
                bytes[12..16].copy_from_slice(&crc);
                bytes[24..32].copy_from_slice(&lsn);
                crate::dir::store_block(tx, b, &bytes);
            }
            _ => {
                let b = tx.new_buf(daddr, bytes.len(), kind)?;
                tx.buf_mut(b).copy_from_slice(&bytes);
                tx.log_buf(b, 0..bytes.len());
                self.bufs.insert(dablk, (b, kind));
            }
        }
        Ok(())
    }

    /// Free every block of the fork (before it goes back to shortform or
    /// away); remote values included.
    pub fn free_all(&mut self, tx: &mut dyn MetaTx, ip: InodeId) -> Result<()> {
        for (_, (b, _)) in std::mem::take(&mut self.bufs) {
            tx.stale_buf(b);
        }
        let remote: Vec<(u32, u32)> = self
            .entries()
            .filter_map(|e| match e.value {
                AttrValue::Remote { blk, len } => Some((blk, len)),
                AttrValue::Local(_) => None,
            })
            .collect();
        for (blk, len) in remote {
            free_remote(tx, ip, self.ino, blk, len)?;
        }
        let map = attr_map(tx, ip)?;
        let end = map.exts.last().map_or(0, |e| e.end());
        attr_free(tx, ip, FileBlock(0), end)
    }
}

/// Write `value` into new remote blocks of `ip`'s attr fork; returns the
/// first block.
pub fn write_remote(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino, value: &[u8]) -> Result<u32> {
    let bs = tx.geo().blocksize as usize;
    let n = rmt_blocks(value.len() as u32, bs as u32) as u64;
    let map = attr_map(tx, ip)?;
    let start = map
        .holes(1, u32::MAX as u64)
        .into_iter()
        .find(|&(_, len)| len >= n)
        .map(|(off, _)| off)
        .ok_or(Error::NoSpace)?;
    attr_alloc(tx, ip, ino, FileBlock(start), n)?;
    let uuid = tx.sb().metadata_uuid();
    for i in 0..n {
        let daddr = daddr_of(tx, ip, ino, start + i)?;
        let bytes = enc::encode_rmt_block(value, i as usize, bs, daddr.0, &uuid, ino.0);
        let b = tx.new_buf(daddr, bs, BufKind::AttrRmt)?;
        tx.buf_mut(b).copy_from_slice(&bytes);
        tx.log_buf(b, 0..bs);
    }
    Ok(start as u32)
}

/// Free the remote value of `len` bytes at attr fork block `blk`.
pub fn free_remote(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino, blk: u32, len: u32) -> Result<()> {
    let bs = tx.geo().blocksize as usize;
    let n = rmt_blocks(len, bs as u32) as u64;
    for i in 0..n {
        let daddr = daddr_of(tx, ip, ino, blk as u64 + i)?;
        let b = tx.new_buf(daddr, bs, BufKind::AttrRmt)?;
        tx.stale_buf(b);
    }
    attr_free(tx, ip, FileBlock(blk as u64), n)
}
