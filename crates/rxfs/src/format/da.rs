//! Shared pieces of the directory/attribute btree ("DA") format: the v3
//! block info header that starts every leaf and node block, the DA node
//! block, and the name hash.
//!
//! v3 block info (56 bytes, big-endian):
//! ```text
//!  0 forw u32   4 back u32   8 magic u16   10 pad u16   12 crc u32 (LE)
//! 16 blkno u64 (daddr of the block)   24 lsn u64   32 uuid[16]   48 owner u64
//! ```
//! DA node (magic 0x3ebe): blkinfo, then count u16 @56, level u16 @58,
//! pad u32 @60, then `count` entries of {hashval u32, before u32 (dablk)} @64.
//! Entries are sorted by hashval; `before` is the child block holding hashes
//! up to and including `hashval`.

use super::crc::{self, Sum};
use super::{be16, be32, be64, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, Ino};

pub const BLKINFO_SIZE: usize = 56;
pub const BLKINFO_CRC_OFF: usize = 12;
pub const DA3_NODE_MAGIC: u16 = 0x3ebe;
pub const DA3_NODE_HDR_SIZE: usize = 64;
/// Maximum depth of a DA btree (XFS_DA_NODE_MAXDEPTH).
pub const DA_NODE_MAXDEPTH: u16 = 5;

/// Decoded v3 block info header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlkInfo {
    pub forw: u32,
    pub back: u32,
    pub magic: u16,
    pub blkno: u64,
    pub lsn: u64,
    pub uuid: Uuid,
    pub owner: u64,
}

impl BlkInfo {
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < BLKINFO_SIZE {
            return None;
        }
        Some(BlkInfo {
            forw: be32(b, 0),
            back: be32(b, 4),
            magic: be16(b, 8),
            blkno: be64(b, 16),
            lsn: be64(b, 24),
            uuid: b[32..48].try_into().unwrap(),
            owner: be64(b, 48),
        })
    }
}

/// Verify a DA-family block (leaf1/leafn/attr leaf/DA node) read at `daddr`
/// for inode `owner`: magic, CRC over the whole block (as `sum` says),
/// self-described block number, owner and UUID.
pub fn verify_blkinfo(
    what: &'static str,
    buf: &[u8],
    magic: u16,
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    sum: Sum,
) -> Result<BlkInfo> {
    let at = Location::Daddr(daddr.0);
    let info = BlkInfo::decode(buf)
        .ok_or_else(|| Error::corrupt(what, at, format!("block of {} bytes", buf.len())))?;
    if info.magic != magic {
        return Err(Error::corrupt(
            what,
            at,
            format!("bad magic {:#x}, expected {magic:#x}", info.magic),
        ));
    }
    if sum == Sum::Verify && !crc::verify(buf, BLKINFO_CRC_OFF) {
        return Err(Error::corrupt(what, at, "CRC mismatch"));
    }
    if info.blkno != daddr.0 {
        return Err(Error::corrupt(
            what,
            at,
            format!("self-described blkno {:#x}", info.blkno),
        ));
    }
    if info.owner != owner.0 {
        return Err(Error::corrupt(
            what,
            at,
            format!("owner {} is not inode {}", info.owner, owner.0),
        ));
    }
    if &info.uuid != uuid {
        return Err(Error::corrupt(
            what,
            at,
            "UUID does not match the filesystem",
        ));
    }
    Ok(info)
}

/// One DA node entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeEntry {
    pub hashval: u32,
    /// Child block (in directory/attr blocks, fork-relative dablk).
    pub before: u32,
}

/// A decoded DA node block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub info: BlkInfo,
    pub level: u16,
    pub entries: Vec<NodeEntry>,
}

/// Decode and verify a DA node block.
pub fn decode_node(buf: &[u8], daddr: Daddr, owner: Ino, uuid: &Uuid) -> Result<Node> {
    decode_node_as(buf, daddr, owner, uuid, Sum::Verify)
}

/// [`decode_node`], the CRC checked as `sum` says.
pub fn decode_node_as(buf: &[u8], daddr: Daddr, owner: Ino, uuid: &Uuid, sum: Sum) -> Result<Node> {
    const WHAT: &str = "da node";
    let info = verify_blkinfo(WHAT, buf, DA3_NODE_MAGIC, daddr, owner, uuid, sum)?;
    let at = Location::Daddr(daddr.0);
    if buf.len() < DA3_NODE_HDR_SIZE {
        return Err(Error::corrupt(WHAT, at, "short block"));
    }
    let count = be16(buf, 56) as usize;
    let level = be16(buf, 58);
    if level == 0 || level > DA_NODE_MAXDEPTH {
        return Err(Error::corrupt(WHAT, at, format!("bad level {level}")));
    }
    let max = (buf.len() - DA3_NODE_HDR_SIZE) / 8;
    if count == 0 || count > max {
        return Err(Error::corrupt(
            WHAT,
            at,
            format!("bad count {count} (max {max})"),
        ));
    }
    let mut entries = Vec::with_capacity(count);
    for i in 0..count {
        let o = DA3_NODE_HDR_SIZE + i * 8;
        let e = NodeEntry {
            hashval: be32(buf, o),
            before: be32(buf, o + 4),
        };
        if let Some(prev) = entries.last() {
            let prev: &NodeEntry = prev;
            if prev.hashval > e.hashval {
                return Err(Error::corrupt(
                    WHAT,
                    at,
                    format!("hash order broken at entry {i}"),
                ));
            }
        }
        entries.push(e);
    }
    Ok(Node {
        info,
        level,
        entries,
    })
}

/// The XFS name hash used by directories and attributes: a rotating hash
/// taking the name 4 bytes at a time (7 bits of rotation per byte).
pub fn hashname(name: &[u8]) -> u32 {
    let mut hash: u32 = 0;
    let mut chunks = name.chunks_exact(4);
    for c in &mut chunks {
        hash = ((c[0] as u32) << 21)
            ^ ((c[1] as u32) << 14)
            ^ ((c[2] as u32) << 7)
            ^ (c[3] as u32)
            ^ hash.rotate_left(28);
    }
    let rest = chunks.remainder();
    match rest.len() {
        3 => {
            ((rest[0] as u32) << 14)
                ^ ((rest[1] as u32) << 7)
                ^ (rest[2] as u32)
                ^ hash.rotate_left(21)
        }
        2 => ((rest[0] as u32) << 7) ^ (rest[1] as u32) ^ hash.rotate_left(14),
        1 => (rest[0] as u32) ^ hash.rotate_left(7),
        _ => hash,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_known_values() {
        // "." and ".." hash values as xfs_db reports them in leaf blocks.
        assert_eq!(hashname(b"."), 0x2e);
        assert_eq!(hashname(b".."), 0x172e);
        assert_eq!(hashname(b""), 0);
    }
}
