//! The self-describing header of v5 metadata blocks, by magic: where a
//! block keeps its LSN, CRC, own address and filesystem UUID. Log
//! recovery's LSN rule, the CIL's and the AIL's LSN stamping and the
//! transaction's buffer checks all read it from here.
//!
//! | magic | lsn at | crc at | blkno at | uuid at |
//! |---|---|---|---|---|
//! | XFSB (sb) | 240 | 224 | - | (32/248) |
//! | XAGF / XAGI / XAFL | 208 / 320 / 24 | 216 / 312 / 32 | - | 64 / 296 / 8 |
//! | short btrees AB3B AB3C IAB3 FIB3 RMB3 R3FC | 24 | 52 | 16 | 32 |
//! | long btree BMA3 | 32 | 64 | 24 | 40 |
//! | XDB3 XDD3 XDF3 | 16 | 4 | 8 | 24 |
//! | DA node/leaf1/leafn/attr leaf (u16 at 8) | 24 | 12 | 16 | 32 |
//! | XSLM | 48 | 12 | 40 | 16 |
//! | XARM, inodes, dquots, unknown | replayed always (no usable LSN) |
//!

use crate::error::{Error, Location, Result};
use crate::format::{be16, be32, be64, crc, put_be64, Uuid};
use crate::types::Lsn;

/// The self-describing header of a metadata block (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaHeader {
    pub name: &'static str,
    pub lsn_off: usize,
    pub crc_off: usize,
    pub blkno_off: Option<usize>,
    pub uuid_off: Option<usize>,
}

const fn mh(
    name: &'static str,
    lsn_off: usize,
    crc_off: usize,
    blkno_off: Option<usize>,
    uuid_off: Option<usize>,
) -> Option<MetaHeader> {
    Some(MetaHeader {
        name,
        lsn_off,
        crc_off,
        blkno_off,
        uuid_off,
    })
}

/// The header of a v5 metadata block that carries a usable LSN, by magic.
pub fn meta_header(buf: &[u8]) -> Option<MetaHeader> {
    if buf.len() < 512 {
        return None;
    }
    let h = match be32(buf, 0) {
        0x5846_5342 => mh("superblock", 240, 224, None, None),
        0x5841_4746 => mh("AGF", 208, 216, None, Some(64)),
        0x5841_4749 => mh("AGI", 320, 312, None, Some(296)),
        0x5841_464c => mh("AGFL", 24, 32, None, Some(8)),
        0x4142_3342 | 0x4142_3343 | 0x4941_4233 | 0x4649_4233 | 0x524d_4233 | 0x5233_4643 => {
            mh("short btree block", 24, 52, Some(16), Some(32))
        }
        0x424d_4133 => mh("bmap btree block", 32, 64, Some(24), Some(40)),
        0x5844_4233 | 0x5844_4433 | 0x5844_4633 => mh("directory block", 16, 4, Some(8), Some(24)),
        0x5853_4c4d => mh("symlink block", 48, 12, Some(40), Some(16)),
        // Remote attr value blocks: the kernel writes them outside the log
        // (LSN all ones); rxfs logs them, one buffer per block.
        0x5841_524d => mh("attr remote block", 48, 12, Some(40), Some(16)),
        _ => None,
    };
    if h.is_some() {
        return h;
    }
    match be16(buf, 8) {
        0x3ebe | 0x3df1 | 0x3dff | 0x3bee => mh("dir/attr tree block", 24, 12, Some(16), Some(32)),
        _ => None,
    }
}

/// The LSN the block at `buf` stores, if it has a usable one (a foreign
/// UUID means stale contents: replay without the LSN rule).
pub fn block_lsn(buf: &[u8], uuid: &Uuid) -> Option<Lsn> {
    let h = meta_header(buf)?;
    if let Some(u) = h.uuid_off {
        if buf[u..u + 16] != uuid[..] {
            return None;
        }
    }
    let lsn = be64(buf, h.lsn_off) as i64;
    (lsn != 0 && lsn != -1).then_some(Lsn(lsn))
}

/// Stamp `lsn` into a replayed block and recompute its CRC, as the write
/// verifiers do; then check the self-describing fields. Blocks without a
/// known header are left as they are.
pub fn stamp_and_verify(buf: &mut [u8], daddr: u64, lsn: Lsn, uuid: &Uuid) -> Result<()> {
    let Some(h) = meta_header(buf) else {
        return Ok(());
    };
    put_be64(buf, h.lsn_off, lsn.0 as u64);
    crc::update(buf, h.crc_off);
    check_identity(buf, &h, daddr, uuid)
}

/// Stamp `lsn` into `buf`, a copy of `committed` (a committed image, whose
/// stored CRC is valid unless a transaction changed bytes outside the
/// chunks it logged), updating the CRC for the LSN's bytes only; then
/// check the self-describing fields. Returns whether the stored CRC was
/// valid (when not, it is recomputed whole).
pub fn stamp_committed(
    buf: &mut [u8],
    committed: &[u8],
    daddr: u64,
    lsn: Lsn,
    uuid: &Uuid,
) -> Result<bool> {
    let Some(h) = meta_header(buf) else {
        return Ok(true);
    };
    let ok = crc::verify(buf, h.crc_off);
    put_be64(buf, h.lsn_off, lsn.0 as u64);
    if ok {
        let lsn = h.lsn_off..h.lsn_off + 8;
        crc::restamp(committed, buf, h.crc_off, std::slice::from_ref(&lsn));
    } else {
        crc::update(buf, h.crc_off);
    }
    check_identity(buf, &h, daddr, uuid)?;
    Ok(ok)
}

/// The write verifier of a block whose kind its magic names (mkfs's
/// headers and btree roots): a valid CRC and the self-describing block
/// number and UUID. Blocks without a v5 header pass.
pub fn verify_for_write(buf: &[u8], daddr: u64, uuid: &Uuid) -> Result<()> {
    let Some(h) = meta_header(buf) else {
        return Ok(());
    };
    if !crc::verify(buf, h.crc_off) {
        return Err(Error::corrupt(
            h.name,
            Location::Daddr(daddr),
            "CRC mismatch",
        ));
    }
    check_identity(buf, &h, daddr, uuid)
}

/// The self-describing block number and UUID of a block to be written.
fn check_identity(buf: &[u8], h: &MetaHeader, daddr: u64, uuid: &Uuid) -> Result<()> {
    let at = Location::Daddr(daddr);
    if let Some(b) = h.blkno_off {
        if be64(buf, b) != daddr {
            return Err(Error::corrupt(
                h.name,
                at,
                format!("block says it lives at daddr {}", be64(buf, b)),
            ));
        }
    }
    if let Some(u) = h.uuid_off {
        if buf[u..u + 16] != uuid[..] {
            return Err(Error::corrupt(h.name, at, "block has a foreign uuid"));
        }
    }
    debug_assert!(crc::verify(buf, h.crc_off));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_headers_by_magic() {
        let mut b = vec![0u8; 4096];
        assert!(meta_header(&b).is_none());
        b[..4].copy_from_slice(b"XDB3");
        let h = meta_header(&b).unwrap();
        assert_eq!((h.lsn_off, h.crc_off), (16, 4));
        b[..4].copy_from_slice(&[0; 4]);
        b[8..10].copy_from_slice(&0x3bee_u16.to_be_bytes());
        assert_eq!(meta_header(&b).unwrap().lsn_off, 24);
    }

    #[test]
    fn lsn_rule_needs_our_uuid() {
        let uuid = [3u8; 16];
        let mut b = vec![0u8; 4096];
        b[..4].copy_from_slice(b"AB3B");
        b[32..48].copy_from_slice(&uuid);
        put_be64(&mut b, 16, 80);
        put_be64(&mut b, 24, Lsn::new(5, 100).0 as u64);
        assert_eq!(block_lsn(&b, &uuid), Some(Lsn::new(5, 100)));
        assert_eq!(block_lsn(&b, &[4u8; 16]), None);
        stamp_and_verify(&mut b, 80, Lsn::new(6, 8), &uuid).unwrap();
        assert_eq!(block_lsn(&b, &uuid), Some(Lsn::new(6, 8)));
        assert!(crc::verify(&b, 52));
        assert!(stamp_and_verify(&mut b, 81, Lsn::new(6, 8), &uuid).is_err());
    }
}
