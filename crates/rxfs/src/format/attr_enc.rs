//! Encoders for attribute fork blocks (the layouts are documented in
//! [`super::attr`], [`super::attr_remote`] and [`super::da`]): v3 leaf
//! blocks, DA node blocks and remote value blocks. Pure: bytes in, bytes
//! out; the CRC and LSN of leaf and node blocks are stamped when the
//! transaction commits, remote blocks get their CRC here.
//!
//! Leaf layout produced: the entry table in hash order right after the
//! header, the name/value records packed against the end of the block in
//! table order (entry 0's record last in the block), one free region
//! between them described by `freemap[0]` (the other two slots empty),
//! `holes` 0, `usedbytes` the sum of the records' sizes.
//!
//! Invariant: [`leaf_bytes`] of the entries is at most the block size
//! (callers split before encoding); the result decodes with
//! [`super::attr::decode_leaf`] to the same entries.

use super::attr::{
    leaf_entsize_local, leaf_entsize_remote, AttrEntry, AttrValue, ATTR3_LEAF_HDR_SIZE,
    ATTR3_LEAF_MAGIC, ATTR_LEAF_ENTRY_SIZE, ATTR_LOCAL,
};
use super::attr_remote::{rmt_payload, ATTR3_RMT_MAGIC, RMT_CRC_OFF, RMT_HDR_SIZE};
use super::da::{DA3_NODE_HDR_SIZE, DA3_NODE_MAGIC};
use super::{crc, put_be16, put_be32, put_be64, Uuid};

/// Self-description of a DA-family block being written.
#[derive(Debug, Clone, Copy)]
pub struct BlkId {
    pub forw: u32,
    pub back: u32,
    /// Disk address (512-byte units) of the block.
    pub daddr: u64,
    pub uuid: Uuid,
    pub owner: u64,
}

fn put_blkinfo(b: &mut [u8], id: &BlkId, magic: u16) {
    put_be32(b, 0, id.forw);
    put_be32(b, 4, id.back);
    put_be16(b, 8, magic);
    put_be64(b, 16, id.daddr);
    b[32..48].copy_from_slice(&id.uuid);
    put_be64(b, 48, id.owner);
}

/// Bytes the name/value record of `e` takes in a leaf.
pub fn entsize(e: &AttrEntry) -> usize {
    match &e.value {
        AttrValue::Local(v) => leaf_entsize_local(e.name.len(), v.len()),
        AttrValue::Remote { .. } => leaf_entsize_remote(e.name.len()),
    }
}

/// Bytes a leaf holding `entries` needs (header, table, records).
pub fn leaf_bytes(entries: &[AttrEntry]) -> usize {
    ATTR3_LEAF_HDR_SIZE
        + entries
            .iter()
            .map(|e| ATTR_LEAF_ENTRY_SIZE + entsize(e))
            .sum::<usize>()
}

/// Encode a leaf block of `bsize` bytes holding `entries` (sorted by hash
/// by the caller).
pub fn encode_leaf(entries: &[AttrEntry], bsize: usize, id: &BlkId) -> Vec<u8> {
    debug_assert!(leaf_bytes(entries) <= bsize);
    debug_assert!(entries.windows(2).all(|w| w[0].hashval <= w[1].hashval));
    let mut b = vec![0u8; bsize];
    put_blkinfo(&mut b, id, ATTR3_LEAF_MAGIC);
    let mut at = bsize;
    let mut used = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let size = entsize(e);
        at -= size;
        used += size;
        let t = ATTR3_LEAF_HDR_SIZE + i * ATTR_LEAF_ENTRY_SIZE;
        put_be32(&mut b, t, e.hashval);
        put_be16(&mut b, t + 4, at as u16);
        match &e.value {
            AttrValue::Local(v) => {
                b[t + 6] = e.flags | ATTR_LOCAL;
                put_be16(&mut b, at, v.len() as u16);
                b[at + 2] = e.name.len() as u8;
                b[at + 3..at + 3 + e.name.len()].copy_from_slice(&e.name);
                let v0 = at + 3 + e.name.len();
                b[v0..v0 + v.len()].copy_from_slice(v);
            }
            AttrValue::Remote { blk, len } => {
                b[t + 6] = e.flags & !ATTR_LOCAL;
                put_be32(&mut b, at, *blk);
                put_be32(&mut b, at + 4, *len);
                b[at + 8] = e.name.len() as u8;
                b[at + 9..at + 9 + e.name.len()].copy_from_slice(&e.name);
            }
        }
    }
    let table_end = ATTR3_LEAF_HDR_SIZE + entries.len() * ATTR_LEAF_ENTRY_SIZE;
    put_be16(&mut b, 56, entries.len() as u16);
    put_be16(&mut b, 58, used as u16);
    // firstused: 0 stands for a full 64 KiB block.
    put_be16(&mut b, 60, if at >= 1 << 16 { 0 } else { at as u16 });
    put_be16(&mut b, 64, table_end as u16);
    put_be16(&mut b, 66, (at - table_end) as u16);
    b
}

/// Entries a DA node block of `bsize` bytes holds at most.
pub fn node_capacity(bsize: usize) -> usize {
    (bsize - DA3_NODE_HDR_SIZE) / 8
}

/// Encode a DA node block at tree `level` (1 = just above the leaves)
/// with `(hashval, child block)` entries.
pub fn encode_node(items: &[(u32, u32)], level: u16, bsize: usize, id: &BlkId) -> Vec<u8> {
    debug_assert!(items.len() <= node_capacity(bsize));
    let mut b = vec![0u8; bsize];
    put_blkinfo(&mut b, id, DA3_NODE_MAGIC);
    put_be16(&mut b, 56, items.len() as u16);
    put_be16(&mut b, 58, level);
    for (k, (h, c)) in items.iter().enumerate() {
        put_be32(&mut b, DA3_NODE_HDR_SIZE + 8 * k, *h);
        put_be32(&mut b, DA3_NODE_HDR_SIZE + 8 * k + 4, *c);
    }
    b
}

/// Encode remote value block number `i` (of a value starting at byte 0)
/// of `value`, at `daddr`, for inode `owner`: header, payload, zero fill,
/// CRC. The LSN is all ones ("not logged yet"), as the kernel leaves it.
pub fn encode_rmt_block(
    value: &[u8],
    i: usize,
    bsize: usize,
    daddr: u64,
    uuid: &Uuid,
    owner: u64,
) -> Vec<u8> {
    let per = rmt_payload(bsize as u32) as usize;
    let off = i * per;
    let n = per.min(value.len() - off);
    let mut b = vec![0u8; bsize];
    put_be32(&mut b, 0, ATTR3_RMT_MAGIC);
    put_be32(&mut b, 4, off as u32);
    put_be32(&mut b, 8, n as u32);
    b[16..32].copy_from_slice(uuid);
    put_be64(&mut b, 32, owner);
    put_be64(&mut b, 40, daddr);
    put_be64(&mut b, 48, u64::MAX);
    b[RMT_HDR_SIZE..RMT_HDR_SIZE + n].copy_from_slice(&value[off..off + n]);
    crc::update(&mut b, RMT_CRC_OFF);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::attr::{decode_leaf, Namespace};
    use crate::format::da::decode_node;
    use crate::types::{Daddr, Ino};

    fn id() -> BlkId {
        BlkId {
            forw: 7,
            back: 0,
            daddr: 96,
            uuid: [3; 16],
            owner: 131,
        }
    }

    #[test]
    fn leaf_roundtrip() {
        let mut ents = vec![
            AttrEntry {
                flags: Namespace::User.flags(),
                name: b"alpha".to_vec(),
                hashval: 5,
                value: AttrValue::Local(b"one".to_vec()),
            },
            AttrEntry {
                flags: Namespace::Trusted.flags(),
                name: b"beta".to_vec(),
                hashval: 9,
                value: AttrValue::Remote { blk: 3, len: 5000 },
            },
            AttrEntry {
                flags: Namespace::Security.flags(),
                name: b"gamma".to_vec(),
                hashval: 9,
                value: AttrValue::Local(vec![7; 300]),
            },
        ];
        let mut b = encode_leaf(&ents, 4096, &id());
        crc::update(&mut b, 12);
        let l = decode_leaf(&b, Daddr(96), Ino(131), &[3; 16]).unwrap();
        for e in &mut ents {
            if matches!(e.value, AttrValue::Local(_)) {
                e.flags |= ATTR_LOCAL;
            }
        }
        assert_eq!(l.entries, ents);
        assert_eq!(l.hdr.info.forw, 7);
        assert_eq!(
            l.hdr.usedbytes as usize,
            leaf_bytes(&ents) - ATTR3_LEAF_HDR_SIZE - 3 * ATTR_LEAF_ENTRY_SIZE
        );
    }

    #[test]
    fn node_roundtrip() {
        let mut b = encode_node(&[(10, 1), (20, 2)], 1, 1024, &id());
        crc::update(&mut b, 12);
        let n = decode_node(&b, Daddr(96), Ino(131), &[3; 16]).unwrap();
        assert_eq!(n.level, 1);
        assert_eq!(n.entries.len(), 2);
        assert_eq!((n.entries[1].hashval, n.entries[1].before), (20, 2));
    }

    #[test]
    fn remote_blocks_tile_the_value() {
        let v: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let per = rmt_payload(1024) as usize;
        let mut got = Vec::new();
        for i in 0..v.len().div_ceil(per) {
            let b = encode_rmt_block(&v, i, 1024, 8 * i as u64, &[1; 16], 99);
            assert!(crc::verify(&b, RMT_CRC_OFF));
            let n = crate::format::be32(&b, 8) as usize;
            got.extend_from_slice(&b[RMT_HDR_SIZE..RMT_HDR_SIZE + n]);
        }
        assert_eq!(got, v);
    }
}
