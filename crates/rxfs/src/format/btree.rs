//! Short-format btree blocks: the per-AG btrees whose pointers are AG block
//! numbers (u32): free space by block (bnobt `AB3B`) and by size (cntbt
//! `AB3C`), inodes (inobt `IAB3`), free inodes (finobt `FIB3`), reverse
//! mappings (rmapbt `RMB3`) and reference counts (refcountbt `R3FC`).
//!
//! Block header (56 bytes, big-endian):
//! ```text
//!  0 magic  4 level u16  6 numrecs u16  8 leftsib u32  12 rightsib u32
//! 16 blkno u64 (daddr of this block)  24 lsn u64  32 uuid[16]
//! 48 owner u32 (= agno)  52 crc u32 (LE, over the whole block)
//! ```
//! Level 0 blocks (leaves) hold `numrecs` records from byte 56. Nodes hold
//! `maxrecs(node)` key slots from byte 56, then `maxrecs(node)` u32 child
//! pointers; only the first `numrecs` of each are live. The rmapbt may hold
//! overlapping intervals, so its node key slots are (low key, high key)
//! pairs: the high key is the largest "last block" key below the child.
//!
//! Record and key formats (bytes):
//! ```text
//! bnobt/cntbt rec = key: startblock u32, blockcount u32           (8)
//! inobt/finobt rec: startino u32, then either (sparse inodes)
//!   holemask u16, count u8, freecount u8   or   freecount u32,
//!   free u64 (bit i set = inode startino+i free)                  (16)
//!   key: startino u32                                              (4)
//! rmapbt rec: startblock u32, blockcount u32, owner u64,
//!   offset u64 (bit 63 attr fork, 62 bmbt block, 61 unwritten,
//!   low 54 bits file offset)                                       (24)
//!   key: startblock u32, owner u64, offset u64 (no unwritten bit)  (20)
//! refcountbt rec: startblock u32 (bit 31 = CoW staging domain),
//!   blockcount u32, refcount u32                                   (12)
//!   key: startblock u32                                            (4)
//! ```
//! Key order: bnobt by startblock; cntbt by (blockcount, startblock);
//! inobt by startino; refcountbt by raw startblock (CoW records sort after
//! shared ones); rmapbt by (startblock, owner, offset with the attr and
//! bmbt bits but without the unwritten bit). Inside a block, records and
//! keys are strictly increasing (rmapbt: non-decreasing) and extents of
//! the non-overlapping trees do not overlap.
//!
//! [`SBlock::verify`] checks a block against all of this; the tree-level
//! invariants (levels, sibling chains, parent keys bounding children) are
//! checked by the walker in [`crate::btree::walk`].

use std::cmp::Ordering;

use super::{be16, be32, be64, crc, put_be16, put_be32, put_be64, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::{AgNumber, Daddr};

pub use super::ag::NULL_AGBLOCK;

pub const SBLOCK_HDR_SIZE: usize = 56;
pub const SBLOCK_CRC_OFF: usize = 52;

pub const BNOBT_MAGIC: u32 = 0x4142_3342; // "AB3B"
pub const CNTBT_MAGIC: u32 = 0x4142_3343; // "AB3C"
pub const INOBT_MAGIC: u32 = 0x4941_4233; // "IAB3"
pub const FINOBT_MAGIC: u32 = 0x4649_4233; // "FIB3"
pub const RMAPBT_MAGIC: u32 = 0x524d_4233; // "RMB3"
pub const REFCOUNTBT_MAGIC: u32 = 0x5233_4643; // "R3FC"

/// Inodes covered by one inobt record.
pub const INODES_PER_CHUNK: u32 = 64;
/// Inodes covered by one bit of a sparse holemask.
pub const INODES_PER_HOLEMASK_BIT: u32 = 4;

pub const RMAP_OFF_ATTR_FORK: u64 = 1 << 63;
pub const RMAP_OFF_BMBT_BLOCK: u64 = 1 << 62;
pub const RMAP_OFF_UNWRITTEN: u64 = 1 << 61;
pub const RMAP_OFF_MASK: u64 = (1 << 54) - 1;
/// Special rmap owners (negative numbers stored as u64).
pub const RMAP_OWN_NULL: u64 = -1i64 as u64;
pub const RMAP_OWN_UNKNOWN: u64 = -2i64 as u64;
pub const RMAP_OWN_FS: u64 = -3i64 as u64;
pub const RMAP_OWN_LOG: u64 = -4i64 as u64;
pub const RMAP_OWN_AG: u64 = -5i64 as u64;
pub const RMAP_OWN_INOBT: u64 = -6i64 as u64;
pub const RMAP_OWN_INODES: u64 = -7i64 as u64;
pub const RMAP_OWN_REFC: u64 = -8i64 as u64;
pub const RMAP_OWN_COW: u64 = -9i64 as u64;
/// The smallest special owner.
pub const RMAP_OWN_MIN: u64 = RMAP_OWN_COW;

/// Bit 31 of a refcount startblock: the record is CoW staging space.
pub const REFC_COW_FLAG: u32 = 1 << 31;

/// Which short-format btree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BtreeKind {
    Bno,
    Cnt,
    Ino,
    Fino,
    Rmap,
    Refcount,
}

impl BtreeKind {
    pub const ALL: [BtreeKind; 6] = [
        BtreeKind::Bno,
        BtreeKind::Cnt,
        BtreeKind::Ino,
        BtreeKind::Fino,
        BtreeKind::Rmap,
        BtreeKind::Refcount,
    ];

    pub const fn magic(self) -> u32 {
        match self {
            BtreeKind::Bno => BNOBT_MAGIC,
            BtreeKind::Cnt => CNTBT_MAGIC,
            BtreeKind::Ino => INOBT_MAGIC,
            BtreeKind::Fino => FINOBT_MAGIC,
            BtreeKind::Rmap => RMAPBT_MAGIC,
            BtreeKind::Refcount => REFCOUNTBT_MAGIC,
        }
    }

    /// Name used in corruption reports.
    pub const fn name(self) -> &'static str {
        match self {
            BtreeKind::Bno => "bnobt block",
            BtreeKind::Cnt => "cntbt block",
            BtreeKind::Ino => "inobt block",
            BtreeKind::Fino => "finobt block",
            BtreeKind::Rmap => "rmapbt block",
            BtreeKind::Refcount => "refcountbt block",
        }
    }

    pub const fn rec_size(self) -> usize {
        match self {
            BtreeKind::Bno | BtreeKind::Cnt => 8,
            BtreeKind::Ino | BtreeKind::Fino => 16,
            BtreeKind::Rmap => 24,
            BtreeKind::Refcount => 12,
        }
    }

    /// Size of one key.
    pub const fn key_size(self) -> usize {
        match self {
            BtreeKind::Bno | BtreeKind::Cnt => 8,
            BtreeKind::Ino | BtreeKind::Fino | BtreeKind::Refcount => 4,
            BtreeKind::Rmap => 20,
        }
    }

    /// Whether node key slots hold (low, high) pairs.
    pub const fn overlapping(self) -> bool {
        matches!(self, BtreeKind::Rmap)
    }

    /// Bytes of one node key slot.
    pub const fn node_key_slot(self) -> usize {
        if self.overlapping() {
            2 * self.key_size()
        } else {
            self.key_size()
        }
    }

    /// Records (leaf) or key/pointer pairs (node) that fit in a block.
    pub const fn max_recs(self, blocksize: usize, leaf: bool) -> usize {
        let room = blocksize - SBLOCK_HDR_SIZE;
        if leaf {
            room / self.rec_size()
        } else {
            room / (self.node_key_slot() + 4)
        }
    }

    /// The low key of a record (`rec.len() == rec_size()`).
    pub fn rec_key(self, rec: &[u8]) -> BtreeKey {
        match self {
            // An rmap record has its block count between start and owner.
            BtreeKind::Rmap => BtreeKey(
                be32(rec, 0) as u64,
                be64(rec, 8),
                be64(rec, 16) & !RMAP_OFF_UNWRITTEN,
            ),
            // The others begin with their key fields, laid out as in a key.
            _ => self.decode_key(rec),
        }
    }

    /// The high key of a record: the key of its last block. Only the
    /// rmapbt stores high keys; for the others it equals the low key.
    pub fn rec_high_key(self, rec: &[u8]) -> BtreeKey {
        if self != BtreeKind::Rmap {
            return self.rec_key(rec);
        }
        let adj = (be32(rec, 4) as u64).saturating_sub(1);
        let owner = be64(rec, 8);
        let off = be64(rec, 16) & !RMAP_OFF_UNWRITTEN;
        let off = if owner >= RMAP_OWN_MIN || off & RMAP_OFF_BMBT_BLOCK != 0 {
            off
        } else {
            ((off & RMAP_OFF_MASK) + adj) | (off & !RMAP_OFF_MASK)
        };
        BtreeKey(be32(rec, 0) as u64 + adj, owner, off)
    }

    /// Decode a key stored in a node (`b.len() >= key_size()`).
    pub fn decode_key(self, b: &[u8]) -> BtreeKey {
        match self {
            BtreeKind::Bno | BtreeKind::Ino | BtreeKind::Fino | BtreeKind::Refcount => {
                BtreeKey(be32(b, 0) as u64, 0, 0)
            }
            BtreeKind::Cnt => BtreeKey(be32(b, 4) as u64, be32(b, 0) as u64, 0),
            BtreeKind::Rmap => BtreeKey(
                be32(b, 0) as u64,
                be64(b, 4),
                be64(b, 12) & !RMAP_OFF_UNWRITTEN,
            ),
        }
    }

    /// Encode a key into node key bytes.
    pub fn encode_key(self, k: BtreeKey, b: &mut [u8]) {
        match self {
            BtreeKind::Bno => {
                put_be32(b, 0, k.0 as u32);
                put_be32(b, 4, 0);
            }
            BtreeKind::Ino | BtreeKind::Fino | BtreeKind::Refcount => put_be32(b, 0, k.0 as u32),
            BtreeKind::Cnt => {
                put_be32(b, 0, k.1 as u32);
                put_be32(b, 4, k.0 as u32);
            }
            BtreeKind::Rmap => {
                put_be32(b, 0, k.0 as u32);
                put_be64(b, 4, k.1);
                put_be64(b, 12, k.2);
            }
        }
    }

    /// Whether record `b` may follow record `a` in a leaf.
    fn recs_in_order(self, a: &[u8], b: &[u8]) -> bool {
        match self {
            BtreeKind::Bno | BtreeKind::Refcount => {
                be32(a, 0) as u64 + be32(a, 4) as u64 <= be32(b, 0) as u64
            }
            BtreeKind::Ino | BtreeKind::Fino => {
                be32(a, 0) as u64 + INODES_PER_CHUNK as u64 <= be32(b, 0) as u64
            }
            BtreeKind::Cnt => self.rec_key(a) < self.rec_key(b),
            BtreeKind::Rmap => self.rec_key(a) <= self.rec_key(b),
        }
    }

    /// Whether node key `b` may follow node key `a`.
    fn keys_in_order(self, a: BtreeKey, b: BtreeKey) -> bool {
        if self.overlapping() {
            a <= b
        } else {
            a < b
        }
    }

    /// Tallest tree of this kind an AG of the given geometry can need: the
    /// height of a tree of minimally filled blocks holding the largest
    /// possible number of records (for the rmapbt with reflink, where
    /// records are unbounded, the tallest tree that fits in the AG).
    pub fn max_levels(self, blocksize: usize, agblocks: u32, agino_log: u8, reflink: bool) -> u32 {
        let min_leaf = (self.max_recs(blocksize, true) / 2).max(1) as u64;
        let min_node = (self.max_recs(blocksize, false) / 2).max(2) as u64;
        let records: u64 = match self {
            BtreeKind::Bno | BtreeKind::Cnt => (agblocks as u64).div_ceil(2),
            BtreeKind::Ino | BtreeKind::Fino => (1u64 << agino_log) / INODES_PER_CHUNK as u64,
            BtreeKind::Refcount => agblocks as u64,
            BtreeKind::Rmap if !reflink => agblocks as u64,
            BtreeKind::Rmap => return space_to_height(min_node, agblocks as u64),
        };
        let mut level = 1;
        let mut blocks = records.div_ceil(min_leaf);
        while blocks > 1 {
            blocks = blocks.div_ceil(min_node);
            level += 1;
        }
        level
    }
}

/// Height of the tallest tree whose blocks fit in `blocks`: the root has
/// at least 2 children, every other node at least `min_node`.
fn space_to_height(min_node: u64, blocks: u64) -> u32 {
    if blocks == 0 {
        return 0;
    }
    let mut height = 1;
    let mut level_blocks: u64 = 2;
    let mut left = blocks - 1;
    while level_blocks < left {
        left -= level_blocks;
        level_blocks = level_blocks.saturating_mul(min_node);
        height += 1;
    }
    height
}

/// A key normalized so that `Ord` is the tree's order (see module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BtreeKey(pub u64, pub u64, pub u64);

/// Decoded block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SBlockHdr {
    pub magic: u32,
    pub level: u16,
    pub numrecs: u16,
    pub leftsib: u32,
    pub rightsib: u32,
    pub blkno: u64,
    pub lsn: u64,
    pub uuid: Uuid,
    pub owner: u32,
}

impl SBlockHdr {
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < SBLOCK_HDR_SIZE {
            return None;
        }
        Some(SBlockHdr {
            magic: be32(b, 0),
            level: be16(b, 4),
            numrecs: be16(b, 6),
            leftsib: be32(b, 8),
            rightsib: be32(b, 12),
            blkno: be64(b, 16),
            lsn: be64(b, 24),
            uuid: b[32..48].try_into().unwrap(),
            owner: be32(b, 48),
        })
    }

    /// Write the header (CRC field zeroed; stamp with [`crc::update`] at
    /// [`SBLOCK_CRC_OFF`] once the block is complete).
    pub fn encode(&self, b: &mut [u8]) {
        put_be32(b, 0, self.magic);
        put_be16(b, 4, self.level);
        put_be16(b, 6, self.numrecs);
        put_be32(b, 8, self.leftsib);
        put_be32(b, 12, self.rightsib);
        put_be64(b, 16, self.blkno);
        put_be64(b, 24, self.lsn);
        b[32..48].copy_from_slice(&self.uuid);
        put_be32(b, 48, self.owner);
        put_be32(b, 52, 0);
    }
}

/// What a block is checked against.
#[derive(Debug, Clone)]
pub struct BlockCheck {
    pub agno: AgNumber,
    pub ag_len: u32,
    /// First AG block after the AG headers.
    pub first_agbno: u32,
    pub uuid: Uuid,
    pub blocksize: usize,
    pub sparse_inodes: bool,
    /// log2 of inodes per block (AG inode number -> AG block).
    pub inopblog: u8,
    /// One past the largest inode number of the filesystem (rmap owners).
    pub max_ino: u64,
    /// Levels of the tree the block belongs to (from the AG header).
    pub tree_levels: u32,
}

impl BlockCheck {
    fn agbext_ok(&self, start: u32, len: u32) -> bool {
        len > 0 && start >= self.first_agbno && (start as u64 + len as u64) <= self.ag_len as u64
    }

    fn agbno_ok(&self, b: u32) -> bool {
        b >= self.first_agbno && b < self.ag_len
    }
}

/// A verified block.
#[derive(Debug, Clone, Copy)]
pub struct SBlock<'a> {
    pub hdr: SBlockHdr,
    pub kind: BtreeKind,
    buf: &'a [u8],
    max_node: usize,
}

impl<'a> SBlock<'a> {
    /// Verify a block of tree `kind` read at `daddr`: header (magic, CRC,
    /// blkno, UUID, owner, level below the tree height, numrecs within
    /// bounds, siblings inside the AG), then every record (leaf) or key and
    /// pointer (node) and their order.
    pub fn verify(buf: &'a [u8], kind: BtreeKind, daddr: Daddr, c: &BlockCheck) -> Result<Self> {
        let what = kind.name();
        let at = Location::Daddr(daddr.0);
        let bad = |d: String| Error::corrupt(what, at, d);
        if buf.len() != c.blocksize {
            return Err(bad(format!("block of {} bytes", buf.len())));
        }
        let hdr = SBlockHdr::decode(buf).ok_or_else(|| bad("short block".into()))?;
        if hdr.magic != kind.magic() {
            return Err(bad(format!(
                "bad magic {:#x}, expected {:#x}",
                hdr.magic,
                kind.magic()
            )));
        }
        if !crc::verify(buf, SBLOCK_CRC_OFF) {
            return Err(bad("CRC mismatch".into()));
        }
        if hdr.blkno != daddr.0 {
            return Err(bad(format!("self-described blkno {:#x}", hdr.blkno)));
        }
        if hdr.uuid != c.uuid {
            return Err(bad("UUID does not match the filesystem".into()));
        }
        if hdr.owner != c.agno.0 {
            return Err(bad(format!("owner AG {} read in AG {}", hdr.owner, c.agno)));
        }
        if hdr.level as u32 >= c.tree_levels {
            return Err(bad(format!(
                "level {} in a tree of {} levels",
                hdr.level, c.tree_levels
            )));
        }
        let leaf = hdr.level == 0;
        let max = kind.max_recs(c.blocksize, leaf);
        if hdr.numrecs as usize > max {
            return Err(bad(format!("{} records, at most {max} fit", hdr.numrecs)));
        }
        for (name, sib) in [("left", hdr.leftsib), ("right", hdr.rightsib)] {
            if sib != NULL_AGBLOCK && !c.agbno_ok(sib) {
                return Err(bad(format!("{name} sibling {sib:#x} outside the AG")));
            }
        }
        let blk = SBlock {
            hdr,
            kind,
            buf,
            max_node: kind.max_recs(c.blocksize, false),
        };
        if leaf {
            blk.check_records(c).map_err(bad)?;
        } else {
            blk.check_node(c).map_err(bad)?;
        }
        Ok(blk)
    }

    /// A view of a block that already passed [`SBlock::verify`] (the
    /// caller keeps the verified buffer; nothing is re-checked).
    pub fn view_verified(buf: &'a [u8], kind: BtreeKind, blocksize: usize) -> Self {
        let hdr = SBlockHdr::decode(buf).expect("verified block has a header");
        debug_assert!(hdr.magic == kind.magic() && buf.len() == blocksize);
        SBlock {
            hdr,
            kind,
            buf,
            max_node: kind.max_recs(blocksize, false),
        }
    }

    fn check_records(&self, c: &BlockCheck) -> std::result::Result<(), String> {
        let n = self.numrecs();
        for i in 0..n {
            let r = self.rec(i);
            check_record(self.kind, r, c).map_err(|e| format!("record {i}: {e}"))?;
            if i > 0 && !self.kind.recs_in_order(self.rec(i - 1), r) {
                return Err(format!("record {i} out of order"));
            }
        }
        Ok(())
    }

    fn check_node(&self, c: &BlockCheck) -> std::result::Result<(), String> {
        let n = self.numrecs();
        if n == 0 {
            return Err("node with no children".into());
        }
        for i in 0..n {
            let p = self.ptr(i);
            if !c.agbno_ok(p) {
                return Err(format!("pointer {i} to block {p:#x} outside the AG"));
            }
            if i > 0 && !self.kind.keys_in_order(self.key(i - 1), self.key(i)) {
                return Err(format!("key {i} out of order"));
            }
            if self.kind.overlapping() && self.high_key(i) < self.key(i) {
                return Err(format!("high key {i} below its low key"));
            }
        }
        Ok(())
    }

    pub fn numrecs(&self) -> usize {
        self.hdr.numrecs as usize
    }

    pub fn level(&self) -> u16 {
        self.hdr.level
    }

    pub fn is_leaf(&self) -> bool {
        self.hdr.level == 0
    }

    /// Record `i` of a leaf (`i < numrecs`).
    pub fn rec(&self, i: usize) -> &'a [u8] {
        debug_assert!(self.is_leaf() && i < self.numrecs());
        let s = self.kind.rec_size();
        let off = SBLOCK_HDR_SIZE + i * s;
        &self.buf[off..off + s]
    }

    /// Low key `i` of a node.
    pub fn key(&self, i: usize) -> BtreeKey {
        debug_assert!(!self.is_leaf() && i < self.numrecs());
        let off = SBLOCK_HDR_SIZE + i * self.kind.node_key_slot();
        self.kind.decode_key(&self.buf[off..])
    }

    /// High key `i` of an rmapbt node (the low key for other trees).
    pub fn high_key(&self, i: usize) -> BtreeKey {
        if !self.kind.overlapping() {
            return self.key(i);
        }
        let off = SBLOCK_HDR_SIZE + i * self.kind.node_key_slot() + self.kind.key_size();
        self.kind.decode_key(&self.buf[off..])
    }

    /// Child pointer `i` of a node (an AG block number).
    pub fn ptr(&self, i: usize) -> u32 {
        debug_assert!(!self.is_leaf() && i < self.numrecs());
        let off = SBLOCK_HDR_SIZE + self.max_node * self.kind.node_key_slot() + 4 * i;
        be32(self.buf, off)
    }

    /// Low key of entry `i` (record key in a leaf, key in a node).
    pub fn entry_key(&self, i: usize) -> BtreeKey {
        if self.is_leaf() {
            self.kind.rec_key(self.rec(i))
        } else {
            self.key(i)
        }
    }

    /// Largest high key in the block (the key a parent stores as this
    /// block's high key). `None` for an empty block.
    pub fn max_high_key(&self) -> Option<BtreeKey> {
        (0..self.numrecs())
            .map(|i| {
                if self.is_leaf() {
                    self.kind.rec_high_key(self.rec(i))
                } else {
                    self.high_key(i)
                }
            })
            .max()
    }

    /// Index of the last entry whose low key is `<= key`.
    pub fn last_le(&self, key: BtreeKey) -> Option<usize> {
        // Entries are sorted by low key; binary search the partition point.
        let (mut lo, mut hi) = (0usize, self.numrecs());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.entry_key(mid).cmp(&key) {
                Ordering::Greater => hi = mid,
                _ => lo = mid + 1,
            }
        }
        lo.checked_sub(1)
    }
}

/// Check one record's fields against the AG (kind-specific rules).
fn check_record(kind: BtreeKind, r: &[u8], c: &BlockCheck) -> std::result::Result<(), String> {
    match kind {
        BtreeKind::Bno | BtreeKind::Cnt => {
            let a = AllocRec::decode(r);
            if !c.agbext_ok(a.start, a.len) {
                return Err(format!("free extent {}+{} outside the AG", a.start, a.len));
            }
        }
        BtreeKind::Ino | BtreeKind::Fino => InobtRec::decode(r, c.sparse_inodes).check(c)?,
        BtreeKind::Rmap => RmapRec::decode(r).check(c)?,
        BtreeKind::Refcount => RefcountRec::decode(r).check(c)?,
    }
    Ok(())
}

pub use super::btree_rec::{AllocRec, BtreeRecord, InobtRec, RefcountRec, RmapRec};

#[cfg(test)]
#[path = "btree_tests.rs"]
mod tests;
