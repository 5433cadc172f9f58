//! Records of the short-format btrees (layouts in [`super::btree`]), with
//! encoders for the write path and the per-record checks the block
//! verifier runs.

use super::btree::{
    BlockCheck, BtreeKind, INODES_PER_CHUNK, INODES_PER_HOLEMASK_BIT, REFC_COW_FLAG,
    RMAP_OFF_ATTR_FORK, RMAP_OFF_BMBT_BLOCK, RMAP_OFF_MASK, RMAP_OFF_UNWRITTEN, RMAP_OWN_FS,
    RMAP_OWN_MIN,
};
use super::{be16, be32, be64, put_be16, put_be32, put_be64};

type CheckResult = std::result::Result<(), String>;

/// A record type the generic walker can hand out.
pub trait BtreeRecord: Sized + Copy + std::fmt::Debug {
    /// The trees that hold this record type.
    const KINDS: &'static [BtreeKind];
    /// Decode from exactly `kind.rec_size()` bytes of a verified leaf.
    fn from_disk(b: &[u8], sparse_inodes: bool) -> Self;
}

/// Free-space record (bnobt and cntbt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocRec {
    pub start: u32,
    pub len: u32,
}

impl AllocRec {
    pub fn decode(b: &[u8]) -> Self {
        AllocRec {
            start: be32(b, 0),
            len: be32(b, 4),
        }
    }
    pub fn encode(&self, b: &mut [u8]) {
        put_be32(b, 0, self.start);
        put_be32(b, 4, self.len);
    }
}

impl BtreeRecord for AllocRec {
    const KINDS: &'static [BtreeKind] = &[BtreeKind::Bno, BtreeKind::Cnt];
    fn from_disk(b: &[u8], _: bool) -> Self {
        Self::decode(b)
    }
}

/// Inode chunk record (inobt and finobt). On filesystems without sparse
/// inodes `holemask` is 0 and `count` 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InobtRec {
    /// First AG inode number of the 64-inode chunk.
    pub startino: u32,
    /// Bit i set: inodes `4i..4i+4` of the chunk are not allocated (hole).
    pub holemask: u16,
    /// Inodes physically present (64 minus 4 per hole bit).
    pub count: u32,
    pub freecount: u32,
    /// Bit i set: inode `startino + i` is free (holes are free too).
    pub free: u64,
}

impl InobtRec {
    pub fn decode(b: &[u8], sparse_inodes: bool) -> Self {
        let (holemask, count, freecount) = if sparse_inodes {
            (be16(b, 4), b[6] as u32, b[7] as u32)
        } else {
            (0, INODES_PER_CHUNK, be32(b, 4))
        };
        InobtRec {
            startino: be32(b, 0),
            holemask,
            count,
            freecount,
            free: be64(b, 8),
        }
    }

    pub fn encode(&self, b: &mut [u8], sparse_inodes: bool) {
        put_be32(b, 0, self.startino);
        if sparse_inodes {
            debug_assert!(self.count <= 64 && self.freecount <= 64);
            put_be16(b, 4, self.holemask);
            b[6] = self.count as u8;
            b[7] = self.freecount as u8;
        } else {
            debug_assert!(self.holemask == 0);
            put_be32(b, 4, self.freecount);
        }
        put_be64(b, 8, self.free);
    }

    /// Bit i set: inode i of the chunk exists on disk (is not in a hole).
    pub fn present_mask(&self) -> u64 {
        let mut m = 0u64;
        for bit in 0..16 {
            if self.holemask & (1 << bit) == 0 {
                m |= 0xf << (bit * INODES_PER_HOLEMASK_BIT);
            }
        }
        m
    }

    /// Whether inode `idx` (0..64) of the chunk lies in a sparse hole.
    pub fn is_hole(&self, idx: u32) -> bool {
        debug_assert!(idx < INODES_PER_CHUNK);
        self.holemask & (1 << (idx / INODES_PER_HOLEMASK_BIT)) != 0
    }

    /// Whether inode `idx` of the chunk is free (holes count as free).
    pub fn is_free(&self, idx: u32) -> bool {
        debug_assert!(idx < INODES_PER_CHUNK);
        self.free & (1 << idx) != 0
    }

    /// Whether inode `idx` of the chunk is in use.
    pub fn is_allocated(&self, idx: u32) -> bool {
        !self.is_hole(idx) && !self.is_free(idx)
    }

    /// Whether AG inode number `agino` falls inside this chunk's range.
    pub fn covers(&self, agino: u32) -> bool {
        agino >= self.startino && (agino - self.startino) < INODES_PER_CHUNK
    }

    pub fn check(&self, c: &BlockCheck) -> CheckResult {
        let first = self.startino >> c.inopblog;
        let last = (self.startino as u64 + INODES_PER_CHUNK as u64 - 1) >> c.inopblog;
        if first < c.first_agbno || last >= c.ag_len as u64 {
            return Err(format!(
                "chunk at inode {:#x} outside the AG",
                self.startino
            ));
        }
        let present = self.present_mask().count_ones();
        if self.count != present {
            return Err(format!(
                "count {} but holemask {:#06x} leaves {present} inodes",
                self.count, self.holemask
            ));
        }
        if self.count < INODES_PER_HOLEMASK_BIT {
            return Err("chunk with no inodes".into());
        }
        let real_free = (self.free & self.present_mask()).count_ones();
        if self.freecount != real_free {
            return Err(format!(
                "freecount {} but the free mask has {real_free}",
                self.freecount
            ));
        }
        Ok(())
    }
}

impl BtreeRecord for InobtRec {
    const KINDS: &'static [BtreeKind] = &[BtreeKind::Ino, BtreeKind::Fino];
    fn from_disk(b: &[u8], sparse_inodes: bool) -> Self {
        Self::decode(b, sparse_inodes)
    }
}

/// Reverse-mapping record: `len` blocks from `start` belong to `owner`
/// (an inode number, or a special `RMAP_OWN_*` owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RmapRec {
    pub start: u32,
    pub len: u32,
    pub owner: u64,
    /// File offset (inode owners of file data), else 0.
    pub offset: u64,
    pub attr_fork: bool,
    pub bmbt_block: bool,
    pub unwritten: bool,
    /// Offset bits that are neither flags nor offset (must be 0).
    pub unknown_bits: u64,
}

impl RmapRec {
    pub fn decode(b: &[u8]) -> Self {
        let off = be64(b, 16);
        RmapRec {
            start: be32(b, 0),
            len: be32(b, 4),
            owner: be64(b, 8),
            offset: off & RMAP_OFF_MASK,
            attr_fork: off & RMAP_OFF_ATTR_FORK != 0,
            bmbt_block: off & RMAP_OFF_BMBT_BLOCK != 0,
            unwritten: off & RMAP_OFF_UNWRITTEN != 0,
            unknown_bits: off
                & !(RMAP_OFF_MASK | RMAP_OFF_ATTR_FORK | RMAP_OFF_BMBT_BLOCK | RMAP_OFF_UNWRITTEN),
        }
    }

    pub fn encode(&self, b: &mut [u8]) {
        debug_assert!(self.offset <= RMAP_OFF_MASK && self.unknown_bits == 0);
        put_be32(b, 0, self.start);
        put_be32(b, 4, self.len);
        put_be64(b, 8, self.owner);
        let mut off = self.offset;
        if self.attr_fork {
            off |= RMAP_OFF_ATTR_FORK;
        }
        if self.bmbt_block {
            off |= RMAP_OFF_BMBT_BLOCK;
        }
        if self.unwritten {
            off |= RMAP_OFF_UNWRITTEN;
        }
        put_be64(b, 16, off);
    }

    /// Whether the owner is a special (non-inode) owner.
    pub fn is_special_owner(&self) -> bool {
        self.owner >> 63 != 0
    }

    pub fn check(&self, c: &BlockCheck) -> CheckResult {
        if self.unknown_bits != 0 {
            return Err(format!("undefined offset bits {:#x}", self.unknown_bits));
        }
        if self.len == 0 {
            return Err("zero-length mapping".into());
        }
        if self.start < c.first_agbno {
            // Only the AG headers themselves live below the first usable block.
            if self.owner != RMAP_OWN_FS || self.start != 0 || self.len != c.first_agbno {
                return Err(format!(
                    "mapping {}+{} over the AG headers not owned by the filesystem",
                    self.start, self.len
                ));
            }
        } else if self.start as u64 + self.len as u64 > c.ag_len as u64 {
            return Err(format!(
                "mapping {}+{} outside the AG",
                self.start, self.len
            ));
        }
        let inode = !self.is_special_owner();
        if inode && self.owner >= c.max_ino {
            return Err(format!("owner inode {} beyond the filesystem", self.owner));
        }
        if !inode && self.owner < RMAP_OWN_MIN {
            return Err(format!("unknown special owner {:#x}", self.owner));
        }
        if (self.bmbt_block || !inode) && self.offset != 0 {
            return Err("offset on a non-file mapping".into());
        }
        if self.unwritten && (self.bmbt_block || !inode || self.attr_fork) {
            return Err("unwritten flag on a non-data mapping".into());
        }
        if !inode && (self.attr_fork || self.bmbt_block) {
            return Err("fork flags on a special owner".into());
        }
        if inode && !self.bmbt_block && self.offset + self.len as u64 > RMAP_OFF_MASK + 1 {
            return Err("file range past the largest file offset".into());
        }
        Ok(())
    }
}

impl BtreeRecord for RmapRec {
    const KINDS: &'static [BtreeKind] = &[BtreeKind::Rmap];
    fn from_disk(b: &[u8], _: bool) -> Self {
        Self::decode(b)
    }
}

/// Reference-count record: `len` blocks from `start` are shared by
/// `refcount` owners, or (`cow`) are CoW staging space (refcount 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RefcountRec {
    /// AG block number (without the domain bit).
    pub start: u32,
    pub len: u32,
    pub refcount: u32,
    pub cow: bool,
}

impl RefcountRec {
    pub fn decode(b: &[u8]) -> Self {
        let raw = be32(b, 0);
        RefcountRec {
            start: raw & !REFC_COW_FLAG,
            len: be32(b, 4),
            refcount: be32(b, 8),
            cow: raw & REFC_COW_FLAG != 0,
        }
    }

    pub fn encode(&self, b: &mut [u8]) {
        debug_assert!(self.start & REFC_COW_FLAG == 0);
        put_be32(b, 0, self.start | if self.cow { REFC_COW_FLAG } else { 0 });
        put_be32(b, 4, self.len);
        put_be32(b, 8, self.refcount);
    }

    pub fn check(&self, c: &BlockCheck) -> CheckResult {
        if self.len == 0
            || self.start < c.first_agbno
            || self.start as u64 + self.len as u64 > c.ag_len as u64
        {
            return Err(format!("extent {}+{} outside the AG", self.start, self.len));
        }
        if self.cow && self.refcount != 1 {
            return Err(format!(
                "CoW staging extent with refcount {}",
                self.refcount
            ));
        }
        if !self.cow && self.refcount < 2 {
            return Err(format!("shared extent with refcount {}", self.refcount));
        }
        Ok(())
    }
}

impl BtreeRecord for RefcountRec {
    const KINDS: &'static [BtreeKind] = &[BtreeKind::Refcount];
    fn from_disk(b: &[u8], _: bool) -> Self {
        Self::decode(b)
    }
}
