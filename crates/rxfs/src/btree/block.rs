//! Raw access to one short-form btree block joined to a transaction: its
//! entries loaded into a flat vector, edited, and stored back with exactly
//! the changed slots logged.
//!
//! An *entry* is a record (leaf) or a key followed by its 4-byte child
//! pointer (node), so splitting and merging move entries the same way at
//! every level. On disk a node keeps all keys first, then all pointers
//! (layout in [`crate::format::btree`]):
//! ```text
//! leaf: | hdr 56 | rec 0 | rec 1 | ...                     |
//! node: | hdr 56 | key 0 | ... | key max-1 | ptr 0 | ... | ptr max-1 |
//! ```

use super::Tree;
use crate::error::{Error, Location, Result};
use crate::format::btree::{BtreeKey, SBlockHdr, NULL_AGBLOCK, SBLOCK_HDR_SIZE};
use crate::format::{be16, be32, put_be16, put_be32};
use crate::types::{AgBlock, AgNumber};
use crate::xact::{BufId, MetaTx};

pub const OFF_LEVEL: usize = 4;
pub const OFF_NUMRECS: usize = 6;
pub const OFF_LEFT: usize = 8;
pub const OFF_RIGHT: usize = 12;

/// A block of a tree, joined to the transaction.
#[derive(Debug, Clone, Copy)]
pub struct Blk {
    pub agbno: AgBlock,
    pub buf: BufId,
    pub level: u16,
}

/// The entries of one block, flat: `n` entries of `esz` bytes.
#[derive(Debug, Clone)]
pub struct Ents {
    pub esz: usize,
    /// Bytes of the key (leaf: of the record prefix used as node key).
    pub ksz: usize,
    pub data: Vec<u8>,
}

impl Ents {
    pub fn len(&self) -> usize {
        self.data.len() / self.esz
    }
    pub fn get(&self, i: usize) -> &[u8] {
        &self.data[i * self.esz..(i + 1) * self.esz]
    }
    pub fn insert(&mut self, i: usize, e: &[u8]) {
        debug_assert_eq!(e.len(), self.esz);
        let at = i * self.esz;
        self.data.splice(at..at, e.iter().copied());
    }
    pub fn remove(&mut self, i: usize) -> Vec<u8> {
        let at = i * self.esz;
        self.data.drain(at..at + self.esz).collect()
    }
    /// Split off the entries from `i` on.
    pub fn split_off(&mut self, i: usize) -> Ents {
        Ents {
            esz: self.esz,
            ksz: self.ksz,
            data: self.data.split_off(i * self.esz),
        }
    }
    pub fn append(&mut self, o: &Ents) {
        self.data.extend_from_slice(&o.data);
    }
    /// The key bytes a parent stores for the block holding these entries
    /// (empty if there are none).
    #[cfg(test)]
    pub fn low_key_bytes(&self) -> Vec<u8> {
        self.data.get(..self.ksz).map_or(Vec::new(), <[u8]>::to_vec)
    }
    /// Child pointer of node entry `i`.
    pub fn ptr(&self, i: usize) -> u32 {
        be32(self.get(i), self.ksz)
    }
}

/// Geometry of the blocks of a tree.
#[derive(Debug, Clone, Copy)]
pub struct BGeo {
    pub tree: Tree,
    pub bs: usize,
    pub max_leaf: usize,
    pub max_node: usize,
}

impl BGeo {
    pub fn new(tree: Tree, bs: usize) -> Self {
        let k = tree.kind();
        BGeo {
            tree,
            bs,
            max_leaf: k.max_recs(bs, true),
            max_node: k.max_recs(bs, false),
        }
    }
    /// Bytes of one (low) key.
    pub fn ksz(&self) -> usize {
        self.tree.kind().key_size()
    }
    /// Bytes of one node key slot: the key, or (low, high) key pairs in
    /// the overlapping rmapbt.
    pub fn kslot(&self) -> usize {
        self.tree.kind().node_key_slot()
    }
    pub fn overlapping(&self) -> bool {
        self.tree.kind().overlapping()
    }
    pub fn esz(&self, level: u16) -> usize {
        if level == 0 {
            self.tree.rec_size()
        } else {
            self.kslot() + 4
        }
    }
    pub fn max_recs(&self, level: u16) -> usize {
        if level == 0 {
            self.max_leaf
        } else {
            self.max_node
        }
    }
    /// Fewest entries a non-root block may hold.
    pub fn min_recs(&self, level: u16) -> usize {
        self.max_recs(level) / 2
    }
    fn key_off(&self, level: u16, i: usize) -> usize {
        let slot = if level == 0 {
            self.tree.rec_size()
        } else {
            self.kslot()
        };
        SBLOCK_HDR_SIZE + i * slot
    }
    fn ptr_off(&self, i: usize) -> usize {
        SBLOCK_HDR_SIZE + self.max_node * self.kslot() + 4 * i
    }
    /// Decode the key of entry bytes `e` of a block at `level`.
    pub fn key(&self, level: u16, e: &[u8]) -> BtreeKey {
        if level == 0 {
            self.tree.key_of(e)
        } else {
            self.tree.kind().decode_key(e)
        }
    }

    /// Check the header of a block read for this tree at `level`:
    /// level and record count must be sane before anything indexes it.
    pub fn check(&self, tx: &dyn MetaTx, b: Blk, agno: AgNumber) -> Result<()> {
        let buf = tx.buf(b.buf);
        let bad = |d: String| {
            Err(Error::corrupt(
                self.tree.kind().name(),
                Location::Daddr(tx.geo().agb_to_daddr(agno, b.agbno).0),
                d,
            ))
        };
        if buf.len() != self.bs {
            return bad(format!("buffer of {} bytes", buf.len()));
        }
        let level = be16(buf, OFF_LEVEL);
        let n = be16(buf, OFF_NUMRECS) as usize;
        if level != b.level {
            return bad(format!("level {level}, expected {}", b.level));
        }
        if n > self.max_recs(level) {
            return bad(format!("{n} records"));
        }
        if be32(buf, 48) != agno.0 {
            return bad("owner is another AG".into());
        }
        Ok(())
    }

    /// All entries of a block (checked with [`BGeo::check`] before).
    pub fn load(&self, tx: &dyn MetaTx, b: Blk) -> Ents {
        let buf = tx.buf(b.buf);
        let n = (be16(buf, OFF_NUMRECS) as usize).min(self.max_recs(b.level));
        let esz = self.esz(b.level);
        let mut data = Vec::with_capacity((n + 1) * esz);
        if b.level == 0 {
            data.extend_from_slice(&buf[SBLOCK_HDR_SIZE..SBLOCK_HDR_SIZE + n * esz]);
        } else {
            let k = self.kslot();
            for i in 0..n {
                let ko = self.key_off(1, i);
                data.extend_from_slice(&buf[ko..ko + k]);
                let po = self.ptr_off(i);
                data.extend_from_slice(&buf[po..po + 4]);
            }
        }
        Ents {
            esz,
            ksz: self.kslot(),
            data,
        }
    }

    /// The key slot a parent stores for a block at `level` holding `e`
    /// (empty if it holds nothing): the first entry's key; in the
    /// overlapping rmapbt also the largest high key of all entries.
    pub fn node_key(&self, level: u16, e: &Ents) -> Vec<u8> {
        let kind = self.tree.kind();
        if e.len() == 0 {
            return Vec::new();
        }
        if !self.overlapping() {
            return e.get(0)[..self.kslot()].to_vec();
        }
        let k = self.ksz();
        let mut out = vec![0u8; 2 * k];
        if level == 0 {
            kind.encode_key(kind.rec_key(e.get(0)), &mut out[..k]);
        } else {
            out[..k].copy_from_slice(&e.get(0)[..k]);
        }
        let high = (0..e.len())
            .map(|i| {
                let ent = e.get(i);
                if level == 0 {
                    kind.rec_high_key(ent)
                } else {
                    kind.decode_key(&ent[k..2 * k])
                }
            })
            .max()
            .unwrap_or_default();
        kind.encode_key(high, &mut out[k..]);
        out
    }

    /// Store entries `from..` of `e` into the block and set its record
    /// count; entries before `from` must be unchanged.
    pub fn store(&self, tx: &mut dyn MetaTx, b: Blk, e: &Ents, from: usize) {
        let n = e.len();
        debug_assert!(n <= self.max_recs(b.level));
        let k = self.kslot();
        {
            let buf = tx.buf_mut(b.buf);
            put_be16(buf, OFF_NUMRECS, n as u16);
            for i in from..n {
                let ent = e.get(i);
                if b.level == 0 {
                    let o = self.key_off(0, i);
                    buf[o..o + e.esz].copy_from_slice(ent);
                } else {
                    let o = self.key_off(1, i);
                    buf[o..o + k].copy_from_slice(&ent[..k]);
                    let p = self.ptr_off(i);
                    buf[p..p + 4].copy_from_slice(&ent[k..k + 4]);
                }
            }
        }
        tx.log_buf(b.buf, OFF_NUMRECS..OFF_NUMRECS + 2);
        if from < n {
            tx.log_buf(b.buf, self.key_off(b.level, from)..self.key_off(b.level, n));
            if b.level > 0 {
                tx.log_buf(b.buf, self.ptr_off(from)..self.ptr_off(n));
            }
        }
    }

    /// Overwrite record `i` of a leaf.
    pub fn set_rec(&self, tx: &mut dyn MetaTx, b: Blk, i: usize, rec: &[u8]) {
        debug_assert!(b.level == 0 && rec.len() == self.tree.rec_size());
        let o = self.key_off(0, i);
        tx.buf_mut(b.buf)[o..o + rec.len()].copy_from_slice(rec);
        tx.log_buf(b.buf, o..o + rec.len());
    }

    /// Overwrite key `i` of a node with `key` bytes.
    pub fn set_key(&self, tx: &mut dyn MetaTx, b: Blk, i: usize, key: &[u8]) {
        debug_assert!(b.level > 0 && key.len() == self.kslot());
        let o = self.key_off(1, i);
        tx.buf_mut(b.buf)[o..o + key.len()].copy_from_slice(key);
        tx.log_buf(b.buf, o..o + key.len());
    }

    pub fn sib(&self, tx: &dyn MetaTx, b: Blk, right: bool) -> u32 {
        be32(tx.buf(b.buf), if right { OFF_RIGHT } else { OFF_LEFT })
    }

    pub fn set_sib(&self, tx: &mut dyn MetaTx, b: Blk, right: bool, v: u32) {
        let off = if right { OFF_RIGHT } else { OFF_LEFT };
        put_be32(tx.buf_mut(b.buf), off, v);
        tx.log_buf(b.buf, off..off + 4);
    }

    /// Write the v5 header of a fresh block (CRC and LSN left zero: the
    /// write-back stamps them).
    pub fn init(&self, tx: &mut dyn MetaTx, b: Blk, agno: AgNumber) {
        let hdr = SBlockHdr {
            magic: self.tree.kind().magic(),
            level: b.level,
            numrecs: 0,
            leftsib: NULL_AGBLOCK,
            rightsib: NULL_AGBLOCK,
            blkno: tx.geo().agb_to_daddr(agno, b.agbno).0,
            lsn: 0,
            uuid: tx.sb().metadata_uuid(),
            owner: agno.0,
        };
        hdr.encode(tx.buf_mut(b.buf));
        tx.log_buf(b.buf, 0..SBLOCK_HDR_SIZE);
    }
}
