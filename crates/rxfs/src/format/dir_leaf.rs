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

/// The entries of a leaf block read in place, for a block that already
/// passed [`decode_leaf`] (see `inode::ForkBlock::verified`): the order
/// and the stale count are that decoder's word; only the bounds are
/// checked again, so that no read leaves the block.
#[derive(Debug, Clone, Copy)]
pub struct LeafView<'a> {
    buf: &'a [u8],
    count: usize,
}

impl<'a> LeafView<'a> {
    /// The entries of `buf`, None when it is no leaf of magic `magic` or
    /// its entries overrun it.
    pub fn open(buf: &'a [u8], magic: u16) -> Option<Self> {
        let n = buf.len();
        if n < LEAF_HDR_SIZE + 4 || be16(buf, 8) != magic {
            return None;
        }
        let count = be16(buf, 56) as usize;
        let limit = if magic == LEAF1_MAGIC {
            n.checked_sub(4 + be32(buf, n - 4) as usize * 2)?
        } else {
            n
        };
        (LEAF_HDR_SIZE + count * LEAF_ENTRY_SIZE <= limit).then_some(LeafView { buf, count })
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Entry `i` (< `len`).
    pub fn entry(&self, i: usize) -> LeafEntry {
        LeafEntry::decode(&self.buf[LEAF_HDR_SIZE + i * LEAF_ENTRY_SIZE..])
    }

    /// The entries that are not stale, in order.
    pub fn live(&self) -> Vec<LeafEntry> {
        let raw = &self.buf[LEAF_HDR_SIZE..LEAF_HDR_SIZE + self.count * LEAF_ENTRY_SIZE];
        let mut out = Vec::with_capacity(self.count);
        out.extend(
            raw.chunks_exact(LEAF_ENTRY_SIZE)
                .map(LeafEntry::decode)
                .filter(|e| !e.is_stale()),
        );
        out
    }

    /// The block's forward sibling (0: none).
    pub fn forw(&self) -> u32 {
        be32(self.buf, 0)
    }

    /// [`hash_range`] over the block's entries.
    pub fn hash_range(&self, hash: u32) -> std::ops::Range<usize> {
        let first_not_below = |pred: &dyn Fn(u32) -> bool| {
            let (mut lo, mut hi) = (0, self.count);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if pred(self.entry(mid).hashval) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        first_not_below(&|h| h < hash)..first_not_below(&|h| h <= hash)
    }
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

    /// A leaf block of `magic` holding `ents` (and, for leaf1, `nbests`
    /// best-free slots), CRC left zero: the in-place view needs none.
    fn leaf_block(magic: u16, ents: &[LeafEntry], nbests: usize, forw: u32) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0..4].copy_from_slice(&forw.to_be_bytes());
        b[8..10].copy_from_slice(&magic.to_be_bytes());
        b[56..58].copy_from_slice(&(ents.len() as u16).to_be_bytes());
        let stale = ents.iter().filter(|e| e.is_stale()).count() as u16;
        b[58..60].copy_from_slice(&stale.to_be_bytes());
        for (k, e) in ents.iter().enumerate() {
            let p = LEAF_HDR_SIZE + k * LEAF_ENTRY_SIZE;
            b[p..p + 4].copy_from_slice(&e.hashval.to_be_bytes());
            b[p + 4..p + 8].copy_from_slice(&e.address.to_be_bytes());
        }
        if magic == LEAF1_MAGIC {
            let n = b.len();
            b[n - 4..].copy_from_slice(&(nbests as u32).to_be_bytes());
        }
        b
    }

    #[test]
    fn in_place_view_matches_the_decoded_entries() {
        let mut x = 0x5eed_1eafu64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..400 {
            let magic = if round % 2 == 0 {
                LEAFN_MAGIC
            } else {
                LEAF1_MAGIC
            };
            let nbests = if magic == LEAF1_MAGIC {
                (next() % 40) as usize
            } else {
                0
            };
            let tail = if magic == LEAF1_MAGIC {
                4 + nbests * 2
            } else {
                0
            };
            let room = (4096 - LEAF_HDR_SIZE - tail) / LEAF_ENTRY_SIZE;
            let count = (next() as usize) % (room + 1);
            // Few distinct hashes: long runs of equal ones.
            let spread = 1 + next() % 64;
            let mut ents: Vec<LeafEntry> = (0..count)
                .map(|_| e((next() % spread) as u32 * 3, (next() % 4) as u32 * 8))
                .collect();
            ents.sort_by_key(|e| e.hashval);
            let forw = (next() % 3) as u32;
            let b = leaf_block(magic, &ents, nbests, forw);
            let v = LeafView::open(&b, magic).expect("a well-formed block opens");
            assert_eq!(v.len(), count);
            assert_eq!(v.forw(), forw);
            let live: Vec<LeafEntry> = ents.iter().copied().filter(|e| !e.is_stale()).collect();
            assert_eq!(v.live(), live);
            for h in 0..(spread as u32 * 3 + 2) {
                assert_eq!(
                    v.hash_range(h),
                    hash_range(&ents, h),
                    "round {round} hash {h}"
                );
            }
            // The other magic, or a count past the room, is refused.
            let other = if magic == LEAFN_MAGIC {
                LEAF1_MAGIC
            } else {
                LEAFN_MAGIC
            };
            assert!(LeafView::open(&b, other).is_none());
            let mut bad = b.clone();
            bad[56..58].copy_from_slice(&((room + 1) as u16).to_be_bytes());
            assert!(LeafView::open(&bad, magic).is_none(), "round {round}");
        }
        // Random bytes never make it read outside the block.
        for _ in 0..2000 {
            let len = 64 + (next() % 200) as usize;
            let b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            for magic in [LEAF1_MAGIC, LEAFN_MAGIC] {
                if let Some(v) = LeafView::open(&b, magic) {
                    let _ = (v.live(), v.hash_range(next() as u32), v.forw());
                }
            }
        }
    }
}
