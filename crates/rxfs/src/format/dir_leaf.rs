//! Directory hash index blocks (leaf1, leafn) and free-index blocks.
//!
//! ```text
//! leaf (v3), magic 0x3df1 (leaf1: the one leaf of a leaf-form directory)
//!        or 0x3dff (leafn: a leaf of a node-form directory):
//!  0 DA block info (56 bytes, see super::da)   56 count u16   58 stale u16
//! 60 pad u32   64 entries {hashval u32, address u32} x count
//! leaf1 only, at the end of the block:
//!   bests[bestcount] u16 (longest free slot of each data block)   bestcount u32
//!
//! free index (v3), magic "XDF3" 0x58444633:
//!  0..48 as a data block header (magic, crc, blkno, lsn, uuid, owner)
//! 48 firstdb i32   52 nvalid i32   56 nused i32   60 pad
//! 64 bests[nvalid] u16 (0xffff: no such data block)
//! ```
//! Leaf entries are sorted by hashval; `address` is a data pointer (see
//! [`super::dir`]), 0 for a stale entry, and `stale` counts those. The
//! entries of equal hash may run across leafn blocks (follow `forw`). Free
//! block `k` (k-th directory block of the free segment) describes data blocks
//! `k * maxbests ..`, so `firstdb` is a multiple of the per-block maximum.

use super::crc::Sum;
use super::da::{verify_blkinfo, BlkInfo};
use super::dir::DIR3_HDR_SIZE;
use super::dir_data::verify_dir3_hdr;
use super::{be16, be32, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, Ino};

pub const LEAF1_MAGIC: u16 = 0x3df1;
pub const LEAFN_MAGIC: u16 = 0x3dff;
pub const FREE_MAGIC: u32 = 0x5844_4633; // "XDF3"
pub const LEAF_HDR_SIZE: usize = 64;
pub const LEAF_ENTRY_SIZE: usize = 8;
/// Address of a stale leaf entry.
pub const NULL_DATAPTR: u32 = 0;
/// A free-index slot for a data block that does not exist.
pub const NULL_DATAOFF: u16 = 0xffff;

/// One hash index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeafEntry {
    pub hashval: u32,
    /// Data pointer of the entry (0 = stale).
    pub address: u32,
}

impl LeafEntry {
    /// Decode from 8 bytes; callers bound-check.
    pub fn decode(b: &[u8]) -> Self {
        LeafEntry {
            hashval: be32(b, 0),
            address: be32(b, 4),
        }
    }

    pub fn is_stale(&self) -> bool {
        self.address == NULL_DATAPTR
    }
}

/// Check a run of leaf entries: sorted by hash, and the stale ones
/// counted correctly.
pub fn check_leaf_entries(
    what: &'static str,
    at: Location,
    entries: &[LeafEntry],
    stale: usize,
) -> Result<()> {
    if entries.windows(2).any(|w| w[0].hashval > w[1].hashval) {
        return Err(Error::corrupt(what, at, "leaf entries out of hash order"));
    }
    let n = entries.iter().filter(|e| e.is_stale()).count();
    if n != stale {
        return Err(Error::corrupt(
            what,
            at,
            format!("{n} stale leaf entries, header says {stale}"),
        ));
    }
    Ok(())
}

/// Index range of the entries whose hash is `hash` (possibly empty, at the
/// place such entries would be).
pub fn hash_range(entries: &[LeafEntry], hash: u32) -> std::ops::Range<usize> {
    let lo = entries.partition_point(|e| e.hashval < hash);
    let hi = lo + entries[lo..].partition_point(|e| e.hashval == hash);
    lo..hi
}

/// A decoded leaf1 or leafn block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub info: BlkInfo,
    pub entries: Vec<LeafEntry>,
    pub stale: u16,
    /// leaf1 only: the best free length of each data block.
    pub bests: Vec<u16>,
}

/// Decode and verify a leaf block of magic `magic` (leaf1 or leafn).
pub fn decode_leaf(buf: &[u8], magic: u16, daddr: Daddr, owner: Ino, uuid: &Uuid) -> Result<Leaf> {
    decode_leaf_as(buf, magic, daddr, owner, uuid, Sum::Verify)
}

/// [`decode_leaf`], the CRC checked as `sum` says.
pub fn decode_leaf_as(
    buf: &[u8],
    magic: u16,
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    sum: Sum,
) -> Result<Leaf> {
    let what = if magic == LEAF1_MAGIC {
        "directory leaf1 block"
    } else {
        "directory leafn block"
    };
    let info = verify_blkinfo(what, buf, magic, daddr, owner, uuid, sum)?;
    let at = Location::Daddr(daddr.0);
    let n = buf.len();
    if n < LEAF_HDR_SIZE + 4 {
        return Err(Error::corrupt(what, at, "short block"));
    }
    let count = be16(buf, 56) as usize;
    let stale = be16(buf, 58);
    // Where the entries must end: the block end, or the leaf1 bests.
    let mut limit = n;
    let mut bests = Vec::new();
    if magic == LEAF1_MAGIC {
        let bestcount = be32(buf, n - 4) as usize;
        let room = (n - LEAF_HDR_SIZE - 4) / 2;
        if bestcount > room {
            return Err(Error::corrupt(what, at, format!("bestcount {bestcount}")));
        }
        limit = n - 4 - bestcount * 2;
        bests = (0..bestcount).map(|i| be16(buf, limit + i * 2)).collect();
    }
    if LEAF_HDR_SIZE + count * LEAF_ENTRY_SIZE > limit {
        return Err(Error::corrupt(
            what,
            at,
            format!("{count} entries do not fit the block"),
        ));
    }
    let entries: Vec<LeafEntry> = (0..count)
        .map(|i| LeafEntry::decode(&buf[LEAF_HDR_SIZE + i * LEAF_ENTRY_SIZE..]))
        .collect();
    check_leaf_entries(what, at, &entries, stale as usize)?;
    Ok(Leaf {
        info,
        entries,
        stale,
        bests,
    })
}

/// A decoded free-index block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeIndex {
    pub firstdb: u32,
    pub nused: u32,
    /// `nvalid` slots: best free length per data block, or [`NULL_DATAOFF`].
    pub bests: Vec<u16>,
}

/// Free-index slots per directory block of `blksize` bytes.
pub fn free_max_bests(blksize: usize) -> usize {
    (blksize - DIR3_HDR_SIZE) / 2
}

/// Decode and verify a free-index block.
pub fn decode_free(buf: &[u8], daddr: Daddr, owner: Ino, uuid: &Uuid) -> Result<FreeIndex> {
    decode_free_as(buf, daddr, owner, uuid, Sum::Verify)
}

/// [`decode_free`], the CRC checked as `sum` says.
pub fn decode_free_as(
    buf: &[u8],
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    sum: Sum,
) -> Result<FreeIndex> {
    const WHAT: &str = "directory free block";
    verify_dir3_hdr(WHAT, buf, FREE_MAGIC, daddr, owner, uuid, sum)?;
    let at = Location::Daddr(daddr.0);
    let max = free_max_bests(buf.len());
    let firstdb = be32(buf, 48);
    let nvalid = be32(buf, 52);
    let nused = be32(buf, 56);
    if !(firstdb as usize).is_multiple_of(max) || firstdb > i32::MAX as u32 {
        return Err(Error::corrupt(WHAT, at, format!("firstdb {firstdb}")));
    }
    if nvalid as usize > max || nused > nvalid {
        return Err(Error::corrupt(
            WHAT,
            at,
            format!("nvalid {nvalid}, nused {nused} (max {max})"),
        ));
    }
    let bests = (0..nvalid as usize)
        .map(|i| be16(buf, DIR3_HDR_SIZE + i * 2))
        .collect();
    Ok(FreeIndex {
        firstdb,
        nused,
        bests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(h: u32, a: u32) -> LeafEntry {
        LeafEntry {
            hashval: h,
            address: a,
        }
    }

    #[test]
    fn ranges() {
        let v = [e(1, 8), e(5, 9), e(5, 0), e(5, 11), e(9, 12)];
        assert_eq!(hash_range(&v, 5), 1..4);
        assert_eq!(hash_range(&v, 1), 0..1);
        assert_eq!(hash_range(&v, 3), 1..1);
        assert_eq!(hash_range(&v, 10), 5..5);
        assert_eq!(hash_range(&[], 10), 0..0);
    }

    #[test]
    fn entry_checks() {
        let at = Location::Unknown;
        let v = [e(1, 8), e(5, 0), e(5, 11)];
        assert!(check_leaf_entries("t", at, &v, 1).is_ok());
        assert!(check_leaf_entries("t", at, &v, 0).is_err());
        let v = [e(5, 8), e(1, 9)];
        assert!(check_leaf_entries("t", at, &v, 0).is_err());
    }
}
