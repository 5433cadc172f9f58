//! Remote attribute value blocks (`XARM`) and the self-describing header
//! they share with remote symlink blocks (`XSLM`, see [`super::symlink`];
//! a symlink has one header per contiguous run of blocks, a value one per
//! block).
//!
//! A value too big for its leaf block is written to attr fork blocks
//! `valueblk ..` (the leaf's remote record names them). On v5 filesystems
//! every filesystem block of the value starts with its own 56-byte header,
//! so a value of `len` bytes needs `ceil(len / (blocksize - 56))` blocks,
//! each holding the next `min(remaining, blocksize - 56)` bytes:
//! ```text
//!  0 magic u32 ("XARM" or "XSLM")   4 offset u32 (byte offset of this
//!  block's payload in the whole value)   8 bytes u32 (payload bytes)
//! 12 crc u32 (LE, over the whole block)  16 uuid[16]  32 owner u64 (inode)
//! 40 blkno u64 (daddr of this block)     48 lsn u64
//! 56 payload[bytes] ... zero fill to the block end
//! ```
//! Remote value blocks are written outside the log, so their LSN is often
//! all ones ("never logged"); it is not checked on read.
//!
//! Invariants checked per block: magic, CRC, UUID, owner, blkno equal to
//! the address it was read from, `offset` equal to the running offset and
//! `bytes` equal to the expected chunk (so the blocks tile the value with
//! no gap or overlap), and `offset + bytes` within the format's maximum.

use super::{be32, be64, crc, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, Ino};

pub const ATTR3_RMT_MAGIC: u32 = 0x5841_524d; // "XARM"
pub const RMT_HDR_SIZE: usize = 56;
pub const RMT_CRC_OFF: usize = 12;

/// Payload bytes a remote block of `blocksize` bytes carries.
pub fn rmt_payload(blocksize: u32) -> u32 {
    blocksize.saturating_sub(RMT_HDR_SIZE as u32)
}

/// Number of blocks a remote value (or symlink target) of `len` bytes
/// occupies.
pub fn rmt_blocks(len: u32, blocksize: u32) -> u32 {
    let per = rmt_payload(blocksize).max(1);
    len.div_ceil(per)
}

/// Decoded remote block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmtHdr {
    pub magic: u32,
    pub offset: u32,
    pub bytes: u32,
    pub uuid: Uuid,
    pub owner: u64,
    pub blkno: u64,
    pub lsn: u64,
}

impl RmtHdr {
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < RMT_HDR_SIZE {
            return None;
        }
        Some(RmtHdr {
            magic: be32(b, 0),
            offset: be32(b, 4),
            bytes: be32(b, 8),
            uuid: b[16..32].try_into().ok()?,
            owner: be64(b, 32),
            blkno: be64(b, 40),
            lsn: be64(b, 48),
        })
    }
}

/// What a caller expects of one remote block.
#[derive(Debug, Clone, Copy)]
pub struct RmtExpect<'a> {
    pub what: &'static str,
    pub magic: u32,
    /// Largest `offset + bytes` the format allows (64 KiB for values,
    /// 1 KiB for symlinks).
    pub max_len: u32,
    pub owner: Ino,
    pub uuid: &'a Uuid,
    /// Byte offset of this block's payload in the whole value.
    pub offset: u32,
    /// Bytes of the value not yet read (this block holds the first
    /// `min(remaining, blocksize - 56)` of them).
    pub remaining: u32,
}

/// Verify one remote block read at `daddr` and return its payload.
pub fn verify_rmt_block<'b>(buf: &'b [u8], daddr: Daddr, x: &RmtExpect) -> Result<&'b [u8]> {
    let at = Location::Daddr(daddr.0);
    let bad = |d: String| Error::corrupt(x.what, at, d);
    let h = RmtHdr::decode(buf).ok_or_else(|| bad(format!("block of {} bytes", buf.len())))?;
    if h.magic != x.magic {
        return Err(bad(format!(
            "bad magic {:#x}, expected {:#x}",
            h.magic, x.magic
        )));
    }
    if !crc::verify(buf, RMT_CRC_OFF) {
        return Err(bad("CRC mismatch".into()));
    }
    if &h.uuid != x.uuid {
        return Err(bad("UUID does not match the filesystem".into()));
    }
    if h.blkno != daddr.0 {
        return Err(bad(format!("self-described blkno {:#x}", h.blkno)));
    }
    if h.owner != x.owner.0 {
        return Err(bad(format!("owner {} is not inode {}", h.owner, x.owner.0)));
    }
    let want = x.remaining.min(rmt_payload(buf.len() as u32));
    if h.offset != x.offset || h.bytes != want {
        return Err(bad(format!(
            "holds bytes {}+{}, expected {}+{want}",
            h.offset, h.bytes, x.offset
        )));
    }
    if h.offset as u64 + h.bytes as u64 > x.max_len as u64 {
        return Err(bad(format!(
            "bytes {}+{} beyond the {}-byte maximum",
            h.offset, h.bytes, x.max_len
        )));
    }
    Ok(&buf[RMT_HDR_SIZE..RMT_HDR_SIZE + h.bytes as usize])
}

/// Verify one remote attribute value block (`XARM`) of inode `owner`.
pub fn verify_attr_rmt_block<'b>(
    buf: &'b [u8],
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    offset: u32,
    remaining: u32,
) -> Result<&'b [u8]> {
    verify_rmt_block(
        buf,
        daddr,
        &RmtExpect {
            what: "remote attr value",
            magic: ATTR3_RMT_MAGIC,
            max_len: super::attr::XATTR_SIZE_MAX,
            owner,
            uuid,
            offset,
            remaining,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(offset: u32, bytes: u32, owner: u64, blkno: u64, uuid: &Uuid) -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        b[0..4].copy_from_slice(&ATTR3_RMT_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&offset.to_be_bytes());
        b[8..12].copy_from_slice(&bytes.to_be_bytes());
        b[16..32].copy_from_slice(uuid);
        b[32..40].copy_from_slice(&owner.to_be_bytes());
        b[40..48].copy_from_slice(&blkno.to_be_bytes());
        b[48..56].copy_from_slice(&u64::MAX.to_be_bytes());
        for (i, x) in b[56..56 + bytes as usize].iter_mut().enumerate() {
            *x = i as u8;
        }
        crc::update(&mut b, RMT_CRC_OFF);
        b
    }

    #[test]
    fn block_counts() {
        assert_eq!(rmt_blocks(0, 4096), 0);
        assert_eq!(rmt_blocks(4040, 4096), 1);
        assert_eq!(rmt_blocks(4041, 4096), 2);
        assert_eq!(rmt_blocks(20000, 4096), 5);
        assert_eq!(rmt_blocks(65536, 1024), 68);
    }

    #[test]
    fn synthetic_block_checks() {
        let u = [9u8; 16];
        let b = block(968, 500, 77, 40, &u);
        let p = verify_attr_rmt_block(&b, Daddr(40), Ino(77), &u, 968, 500).unwrap();
        assert_eq!(p.len(), 500);
        assert_eq!(p[3], 3);
        // Wrong expectations of every kind fail.
        assert!(verify_attr_rmt_block(&b, Daddr(41), Ino(77), &u, 968, 500).is_err());
        assert!(verify_attr_rmt_block(&b, Daddr(40), Ino(78), &u, 968, 500).is_err());
        assert!(verify_attr_rmt_block(&b, Daddr(40), Ino(77), &[1; 16], 968, 500).is_err());
        assert!(verify_attr_rmt_block(&b, Daddr(40), Ino(77), &u, 0, 500).is_err());
        assert!(verify_attr_rmt_block(&b, Daddr(40), Ino(77), &u, 968, 501).is_err());
        let mut c = b.clone();
        c[100] ^= 1;
        let e = verify_attr_rmt_block(&c, Daddr(40), Ino(77), &u, 968, 500).unwrap_err();
        assert!(e.is_corrupt());
        assert!(verify_attr_rmt_block(&b[..50], Daddr(40), Ino(77), &u, 968, 500).is_err());
        // A header that claims more than the block holds cannot be built
        // with a matching expectation: bytes is capped by the block size.
        let big = block(0, 968, 77, 40, &u);
        assert!(verify_attr_rmt_block(&big, Daddr(40), Ino(77), &u, 0, 5000).is_ok());
        // Offsets past the format maximum are rejected.
        let far = block(65500, 100, 77, 40, &u);
        assert!(verify_attr_rmt_block(&far, Daddr(40), Ino(77), &u, 65500, 100).is_err());
    }
}
