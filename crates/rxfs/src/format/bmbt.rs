//! Extent records and the block-mapping btree (bmbt, `BMA3`).
//!
//! Extent record (128 bits, big-endian, two u64 words l0, l1):
//! ```text
//! l0: [63] unwritten  [62..9] startoff (54 bits)  [8..0] startblock hi 9 bits
//! l1: [63..21] startblock low 43 bits  [20..0] blockcount (21 bits)
//! ```
//! Long-format btree block header (72 bytes): magic, level u16, numrecs u16,
//! leftsib u64, rightsib u64, blkno u64, lsn u64, uuid (16 bytes), owner u64,
//! crc u32 (LE), pad u32. Leaves hold extent records at 72; nodes hold
//! `maxrecs` keys (u64 startoff) at 72 followed by `maxrecs` pointers (u64
//! fsblock). The inode-rooted form (bmdr) is level u16, numrecs u16, keys
//! then pointers, with maxrecs derived from the fork size.

use super::{be16, be32, be64, crc};
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, FileBlock, Ino};

/// One mapping of a fork: `len` blocks from file block `off` to `start`
/// (a filesystem block, or a realtime block for realtime data forks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub off: FileBlock,
    pub start: u64,
    pub len: u64,
    pub unwritten: bool,
}

pub const EXTENT_REC_SIZE: usize = 16;
pub const MAX_EXTLEN: u64 = (1 << 21) - 1;
pub const MAX_STARTOFF: u64 = (1 << 54) - 1;

impl Extent {
    pub fn decode(b: &[u8]) -> Self {
        let l0 = be64(b, 0);
        let l1 = be64(b, 8);
        Extent {
            unwritten: l0 >> 63 != 0,
            off: FileBlock((l0 & ((1 << 63) - 1)) >> 9),
            start: ((l0 & 0x1ff) << 43) | (l1 >> 21),
            len: l1 & MAX_EXTLEN,
        }
    }

    pub fn encode(&self, b: &mut [u8]) {
        debug_assert!(self.off.0 <= MAX_STARTOFF && self.len <= MAX_EXTLEN);
        let l0 = ((self.unwritten as u64) << 63) | (self.off.0 << 9) | (self.start >> 43);
        let l1 = ((self.start & ((1 << 43) - 1)) << 21) | self.len;
        b[0..8].copy_from_slice(&l0.to_be_bytes());
        b[8..16].copy_from_slice(&l1.to_be_bytes());
    }

    pub fn end(&self) -> u64 {
        self.off.0 + self.len
    }
}

pub const BMAP_CRC_MAGIC: u32 = 0x424d_4133; // "BMA3"
pub const LBLOCK_HDR_SIZE: usize = 72;
pub const LBLOCK_CRC_OFF: usize = 64;

/// Max records in a long-format block of `blocksize` (leaf or node).
pub fn block_maxrecs(blocksize: usize, leaf: bool) -> usize {
    let space = blocksize - LBLOCK_HDR_SIZE;
    if leaf {
        space / EXTENT_REC_SIZE
    } else {
        space / 16
    }
}

/// Max records of the inode-rooted bmdr in a fork of `forksize` bytes.
pub fn root_maxrecs(forksize: usize) -> usize {
    forksize.saturating_sub(4) / 16
}

pub fn root_level(b: &[u8]) -> u16 {
    be16(b, 0)
}

pub fn root_numrecs(b: &[u8]) -> u16 {
    be16(b, 2)
}

/// Verifier of a long-format bmbt block.
pub fn verify_block(
    b: &[u8],
    daddr: Daddr,
    owner: Ino,
    uuid: &super::Uuid,
    level: u16,
) -> Result<()> {
    verify_block_as(b, daddr, owner, uuid, level, crc::Sum::Verify)
}

/// [`verify_block`], the CRC checked as `sum` says.
pub fn verify_block_as(
    b: &[u8],
    daddr: Daddr,
    owner: Ino,
    uuid: &super::Uuid,
    level: u16,
    sum: crc::Sum,
) -> Result<()> {
    const WHAT: &str = "bmbt block";
    let at = Location::Daddr(daddr.0);
    let magic = be32(b, 0);
    if magic != BMAP_CRC_MAGIC {
        return Err(Error::corrupt(WHAT, at, format!("bad magic {magic:#x}")));
    }
    if sum == crc::Sum::Verify && !crc::verify(b, LBLOCK_CRC_OFF) {
        return Err(Error::corrupt(WHAT, at, "CRC mismatch"));
    }
    if be64(b, 24) != daddr.0 {
        return Err(Error::corrupt(
            WHAT,
            at,
            format!("self-described blkno {:#x}", be64(b, 24)),
        ));
    }
    if &b[40..56] != uuid {
        return Err(Error::corrupt(
            WHAT,
            at,
            "UUID does not match the filesystem",
        ));
    }
    if be64(b, 56) != owner.0 {
        return Err(Error::corrupt(
            WHAT,
            at,
            format!("owner {} is not inode {}", be64(b, 56), owner.0),
        ));
    }
    let lvl = be16(b, 4);
    if lvl != level {
        return Err(Error::corrupt(
            WHAT,
            at,
            format!("level {lvl}, expected {level}"),
        ));
    }
    let numrecs = be16(b, 6) as usize;
    let max = block_maxrecs(b.len(), level == 0);
    if numrecs == 0 || numrecs > max {
        return Err(Error::corrupt(
            WHAT,
            at,
            format!("{numrecs} records (max {max})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extent_roundtrip() {
        let e = Extent {
            off: FileBlock(0x3_1234_5678),
            start: (1 << 51) + 12345,
            len: MAX_EXTLEN,
            unwritten: true,
        };
        let mut b = [0u8; 16];
        e.encode(&mut b);
        assert_eq!(Extent::decode(&b), e);
    }
}
