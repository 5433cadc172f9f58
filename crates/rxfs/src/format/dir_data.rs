//! Directory data blocks: the single-block form `XDB3` and the data blocks
//! `XDD3` of leaf/node/btree directories.
//!
//! ```text
//! v3 header (64 bytes, big-endian except the CRC):
//!  0 magic u32 ("XDB3" 0x58444233 / "XDD3" 0x58444433)   4 crc u32 (LE)
//!  8 blkno u64 (daddr of the first block)   16 lsn u64   24 uuid[16]
//! 40 owner u64 (directory inode)   48 bestfree[3] {offset u16, length u16}
//! 60 pad u32
//!
//! then, 8-byte aligned, up to the end of the block (XDD3) or up to the
//! leaf entries (XDB3), a sequence of slots:
//!   entry:  0 inumber u64   8 namelen u8   9 name[namelen]   [ftype u8]
//!           pad to 8 ... tag u16 (= offset of the entry) in the last 2 bytes
//!   unused: 0 freetag u16 = 0xffff   2 length u16   ... tag u16 at length-2
//!
//! XDB3 only, at the end of the block:
//!   leaf entries {hashval u32, address u32} x count   tail {count u32, stale u32}
//! ```
//! Invariants checked on every block: slots tile the region exactly, each
//! tag equals its slot's offset, names are valid, no two unused slots are
//! adjacent, bestfree lists the three longest unused slots (longest first,
//! unused entries zeroed). A valid inode number never starts with 0xffff,
//! which is what tells an entry from an unused slot.

use super::crc::{self, Sum};
use super::dir::{check_ftype, check_name, DirGeo, DIR3_CRC_OFF, DIR3_HDR_SIZE};
use super::dir_leaf::{check_leaf_entries, LeafEntry, LEAF_ENTRY_SIZE};
use super::{be16, be32, be64, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, Ino};

pub const BLOCK_MAGIC: u32 = 0x5844_4233; // "XDB3"
pub const DATA_MAGIC: u32 = 0x5844_4433; // "XDD3"
/// Marks an unused slot.
pub const FREETAG: u16 = 0xffff;
/// Bytes of the block-form tail (count, stale).
pub const BLOCK_TAIL_SIZE: usize = 8;
/// Smallest unused slot (freetag, length, tag, rounded to 8).
pub const MIN_UNUSED: usize = 8;
const BESTFREE_OFF: usize = 48;
const BESTFREE_COUNT: usize = 3;

/// Verify the 64-byte header shared by XDB3, XDD3 and XDF3 blocks: magic,
/// CRC over the whole block, self-described block number, owner and UUID.
pub fn verify_dir3_hdr(
    what: &'static str,
    buf: &[u8],
    magic: u32,
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    sum: Sum,
) -> Result<()> {
    let at = Location::Daddr(daddr.0);
    if buf.len() < DIR3_HDR_SIZE {
        return Err(Error::corrupt(
            what,
            at,
            format!("block of {} bytes", buf.len()),
        ));
    }
    let m = be32(buf, 0);
    if m != magic {
        return Err(Error::corrupt(
            what,
            at,
            format!("bad magic {m:#x}, expected {magic:#x}"),
        ));
    }
    if sum == Sum::Verify && !crc::verify(buf, DIR3_CRC_OFF) {
        return Err(Error::corrupt(what, at, "CRC mismatch"));
    }
    let blkno = be64(buf, 8);
    if blkno != daddr.0 {
        return Err(Error::corrupt(
            what,
            at,
            format!("self-described blkno {blkno:#x}"),
        ));
    }
    if &buf[24..40] != uuid {
        return Err(Error::corrupt(
            what,
            at,
            "UUID does not match the filesystem",
        ));
    }
    let o = be64(buf, 40);
    if o != owner.0 {
        return Err(Error::corrupt(
            what,
            at,
            format!("owner {o} is not inode {}", owner.0),
        ));
    }
    Ok(())
}

/// One live entry of a data block, borrowed from the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataEntry<'a> {
    /// Byte offset of the entry in its block.
    pub off: usize,
    /// Bytes the entry takes (a multiple of 8).
    pub size: usize,
    /// Raw inode number (range-checked by the caller).
    pub ino: u64,
    pub name: &'a [u8],
    /// Raw file type byte (0 without ftype).
    pub ftype: u8,
}

/// A verified data block (either form) ready for entry access.
#[derive(Debug, Clone)]
pub struct DataBlock<'a> {
    buf: &'a [u8],
    /// End of the slot region (start of the leaf entries for XDB3).
    end: usize,
    geo: DirGeo,
    what: &'static str,
    at: Location,
    pub bestfree: [(u16, u16); BESTFREE_COUNT],
    /// Leaf entries of a block-form (XDB3) block (empty for XDD3).
    pub leaf: Vec<LeafEntry>,
    /// Live entries the leaf of an XDB3 block indexes (None for XDD3).
    indexed: Option<usize>,
}

impl<'a> DataBlock<'a> {
    /// Verify and open an `XDD3` block of a leaf/node directory.
    pub fn data(
        buf: &'a [u8],
        geo: &DirGeo,
        daddr: Daddr,
        owner: Ino,
        uuid: &Uuid,
    ) -> Result<Self> {
        Self::data_as(buf, geo, daddr, owner, uuid, Sum::Verify)
    }

    /// [`DataBlock::data`], the CRC checked as `sum` says.
    pub fn data_as(
        buf: &'a [u8],
        geo: &DirGeo,
        daddr: Daddr,
        owner: Ino,
        uuid: &Uuid,
        sum: Sum,
    ) -> Result<Self> {
        const WHAT: &str = "directory data block";
        Self::check_len(WHAT, buf, geo, daddr)?;
        verify_dir3_hdr(WHAT, buf, DATA_MAGIC, daddr, owner, uuid, sum)?;
        Self::open(WHAT, buf, buf.len(), geo, daddr, Vec::new())
    }

    /// Verify and open the `XDB3` block of a block-form directory,
    /// including its tail and leaf entries.
    pub fn block(
        buf: &'a [u8],
        geo: &DirGeo,
        daddr: Daddr,
        owner: Ino,
        uuid: &Uuid,
    ) -> Result<Self> {
        Self::block_as(buf, geo, daddr, owner, uuid, Sum::Verify)
    }

    /// [`DataBlock::block`], the CRC checked as `sum` says.
    pub fn block_as(
        buf: &'a [u8],
        geo: &DirGeo,
        daddr: Daddr,
        owner: Ino,
        uuid: &Uuid,
        sum: Sum,
    ) -> Result<Self> {
        const WHAT: &str = "directory block";
        Self::check_len(WHAT, buf, geo, daddr)?;
        verify_dir3_hdr(WHAT, buf, BLOCK_MAGIC, daddr, owner, uuid, sum)?;
        let at = Location::Daddr(daddr.0);
        let n = buf.len();
        let count = be32(buf, n - 8) as usize;
        let stale = be32(buf, n - 4) as usize;
        let room = (n - BLOCK_TAIL_SIZE - DIR3_HDR_SIZE) / LEAF_ENTRY_SIZE;
        if count > room {
            return Err(Error::corrupt(
                WHAT,
                at,
                format!("{count} leaf entries (room for {room})"),
            ));
        }
        let end = n - BLOCK_TAIL_SIZE - count * LEAF_ENTRY_SIZE;
        let leaf: Vec<LeafEntry> = (0..count)
            .map(|i| LeafEntry::decode(&buf[end + i * LEAF_ENTRY_SIZE..]))
            .collect();
        check_leaf_entries(WHAT, at, &leaf, stale)?;
        let mut b = Self::open(WHAT, buf, end, geo, daddr, leaf)?;
        b.indexed = Some(count - stale);
        Ok(b)
    }

    fn check_len(what: &'static str, buf: &[u8], geo: &DirGeo, daddr: Daddr) -> Result<()> {
        if buf.len() != geo.blksize as usize {
            return Err(Error::corrupt(
                what,
                Location::Daddr(daddr.0),
                format!("{} bytes, directory blocks have {}", buf.len(), geo.blksize),
            ));
        }
        Ok(())
    }

    fn open(
        what: &'static str,
        buf: &'a [u8],
        end: usize,
        geo: &DirGeo,
        daddr: Daddr,
        leaf: Vec<LeafEntry>,
    ) -> Result<Self> {
        let at = Location::Daddr(daddr.0);
        let mut bestfree = [(0u16, 0u16); BESTFREE_COUNT];
        for (i, bf) in bestfree.iter_mut().enumerate() {
            let o = BESTFREE_OFF + i * 4;
            *bf = (be16(buf, o), be16(buf, o + 2));
        }
        let mut prev_len = u16::MAX;
        for (i, &(off, len)) in bestfree.iter().enumerate() {
            let ok = if len == 0 {
                off == 0
            } else {
                (off as usize) >= DIR3_HDR_SIZE
                    && off as usize + len as usize <= end
                    && len <= prev_len
            };
            if !ok {
                return Err(Error::corrupt(
                    what,
                    at,
                    format!("bad bestfree[{i}] = ({off:#x}, {len:#x})"),
                ));
            }
            prev_len = len;
        }
        Ok(DataBlock {
            buf,
            end,
            geo: *geo,
            what,
            at,
            bestfree,
            leaf,
            indexed: None,
        })
    }

    /// End of the slot region.
    pub fn end(&self) -> usize {
        self.end
    }

    fn bad(&self, d: String) -> Error {
        Error::corrupt(self.what, self.at, d)
    }

    /// Decode the slot at `off`: `Ok(Ok(entry))` for a live entry,
    /// `Ok(Err(len))` for an unused slot of `len` bytes.
    fn slot(&self, off: usize) -> Result<std::result::Result<DataEntry<'a>, usize>> {
        let b = self.buf;
        if !off.is_multiple_of(8) || off < DIR3_HDR_SIZE || off + MIN_UNUSED > self.end {
            return Err(self.bad(format!("slot at {off:#x} outside the data region")));
        }
        if be16(b, off) == FREETAG {
            let len = be16(b, off + 2) as usize;
            if len < MIN_UNUSED || !len.is_multiple_of(8) || off + len > self.end {
                return Err(self.bad(format!("unused slot at {off:#x} of length {len:#x}")));
            }
            if be16(b, off + len - 2) as usize != off {
                return Err(self.bad(format!("unused slot at {off:#x}: bad tag")));
            }
            return Ok(Err(len));
        }
        // A live entry needs at least its inode number and name length.
        if off + 9 > self.end {
            return Err(self.bad(format!("entry at {off:#x} runs past the data region")));
        }
        let namelen = b[off + 8] as usize;
        let size = self.geo.data_entsize(namelen);
        if off + size > self.end {
            return Err(self.bad(format!("entry at {off:#x} runs past the data region")));
        }
        let name = &b[off + 9..off + 9 + namelen];
        check_name(self.what, self.at, name)?;
        let ftype = if self.geo.ftype {
            b[off + 9 + namelen]
        } else {
            0
        };
        check_ftype(self.what, self.at, ftype)?;
        if be16(b, off + size - 2) as usize != off {
            return Err(self.bad(format!("entry at {off:#x}: bad tag")));
        }
        Ok(Ok(DataEntry {
            off,
            size,
            ino: be64(b, off),
            name,
            ftype,
        }))
    }

    /// The live entry at byte `off` (a leaf entry's target).
    pub fn entry_at(&self, off: usize) -> Result<DataEntry<'a>> {
        match self.slot(off)? {
            Ok(e) => Ok(e),
            Err(_) => Err(self.bad(format!("leaf points at unused slot {off:#x}"))),
        }
    }

    /// Walk every slot from the start of the block, calling `f` on each
    /// live entry at or after byte `from`; `f` returns false to stop. A walk
    /// that reaches the end also checks the bestfree table against the
    /// unused slots it met.
    pub fn walk(&self, from: usize, mut f: impl FnMut(&DataEntry<'a>) -> bool) -> Result<()> {
        let mut off = DIR3_HDR_SIZE;
        let mut last_unused = false;
        // Unused slots seen: (offset, length); only the longest few matter.
        let mut unused: Vec<(usize, usize)> = Vec::new();
        let mut live = 0usize;
        while off < self.end {
            match self.slot(off)? {
                Err(len) => {
                    if last_unused {
                        return Err(self.bad(format!("adjacent unused slots at {off:#x}")));
                    }
                    last_unused = true;
                    unused.push((off, len));
                    off += len;
                }
                Ok(e) => {
                    last_unused = false;
                    live += 1;
                    if off >= from && !f(&e) {
                        return Ok(());
                    }
                    off += e.size;
                }
            }
        }
        if off != self.end {
            return Err(self.bad(format!("slots end at {off:#x}, not {:#x}", self.end)));
        }
        if let Some(n) = self.indexed {
            if n != live {
                return Err(self.bad(format!("{live} entries, the leaf indexes {n}")));
            }
        }
        self.check_bestfree(&unused)
    }

    fn check_bestfree(&self, unused: &[(usize, usize)]) -> Result<()> {
        let smallest = self.bestfree[BESTFREE_COUNT - 1].1 as usize;
        for &(off, len) in unused {
            let listed = self
                .bestfree
                .iter()
                .any(|&(o, l)| o as usize == off && l as usize == len);
            if !listed && len > smallest {
                return Err(self.bad(format!(
                    "unused slot {off:#x} of {len:#x} bytes missing from bestfree"
                )));
            }
        }
        for &(o, l) in &self.bestfree {
            if l != 0
                && !unused
                    .iter()
                    .any(|&(off, len)| off == o as usize && len == l as usize)
            {
                return Err(self.bad(format!("bestfree ({o:#x}, {l:#x}) is no unused slot")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "dir_data_tests.rs"]
mod tests;
