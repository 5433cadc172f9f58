//! Tests of the directory block decoders on blocks cut out of kernel-made
//! images (tests/data/dir, see its README), and on corrupted copies.

use super::*;
use crate::format::da::{decode_node, hashname};
use crate::format::dir::{DirGeo, DOTDOT_COOKIE, DOT_COOKIE};
use crate::format::dir_leaf::{decode_free, decode_leaf, hash_range, LEAF1_MAGIC, LEAFN_MAGIC};

/// A test vector: bytes, the daddr it was read from, its owner.
struct Vector {
    buf: Vec<u8>,
    daddr: Daddr,
    owner: Ino,
    uuid: Uuid,
}

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dir")
}

fn parse_uuid(s: &str) -> Uuid {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    let mut u = [0u8; 16];
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).unwrap();
    }
    u
}

fn vector(name: &str) -> Vector {
    let manifest = std::fs::read_to_string(dir().join("manifest")).unwrap();
    let mut uuid = [0u8; 16];
    for line in manifest.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[0] == "uuid" {
            uuid = parse_uuid(f[1]);
        } else if f[0] == name {
            return Vector {
                buf: std::fs::read(dir().join(name)).unwrap(),
                daddr: Daddr(f[1].parse().unwrap()),
                owner: Ino(f[2].parse().unwrap()),
                uuid,
            };
        }
    }
    panic!("no vector {name}");
}

fn geo() -> DirGeo {
    DirGeo::new(12, 0, true)
}

fn names(b: &DataBlock) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    b.walk(0, |e| {
        v.push(e.name.to_vec());
        true
    })
    .unwrap();
    v
}

#[test]
fn block_form() {
    let v = vector("blk.xdb3");
    let b = DataBlock::block(&v.buf, &geo(), v.daddr, v.owner, &v.uuid).unwrap();
    let n = names(&b);
    assert_eq!(n.len(), 52);
    assert_eq!(n[0], b".");
    assert_eq!(n[1], b"..");
    for i in 1..=50 {
        assert!(n.contains(&format!("f{i:04}").into_bytes()));
    }
    // "." and ".." sit where the fixed cookies say.
    assert_eq!(b.entry_at((DOT_COOKIE << 3) as usize).unwrap().name, b".");
    assert_eq!(
        b.entry_at((DOTDOT_COOKIE << 3) as usize).unwrap().name,
        b".."
    );
    // Every name is found through the block's own leaf by its hash.
    assert_eq!(b.leaf.len(), 52);
    b.walk(0, |e| {
        let h = hashname(e.name);
        let r = hash_range(&b.leaf, h);
        let g = geo();
        assert!(r
            .clone()
            .any(|i| g.dataptr_split(b.leaf[i].address as u64) == (0, e.off)));
        true
    })
    .unwrap();
    // The parent entry points at the root, "." at the directory.
    assert_eq!(b.entry_at(64).unwrap().ino, v.owner.0);
    assert_eq!(b.entry_at(80).unwrap().ino, 128);
    // Resuming the walk from an offset skips what lies before.
    let mut from = Vec::new();
    b.walk(96, |e| {
        from.push(e.off);
        true
    })
    .unwrap();
    assert_eq!(from.len(), 50);
    assert!(from.iter().all(|&o| o >= 96));
}

#[test]
fn data_blocks_and_unused_slots() {
    let v = vector("leaf.xdd3");
    let b = DataBlock::data(&v.buf, &geo(), v.daddr, v.owner, &v.uuid).unwrap();
    let n = names(&b);
    assert_eq!(&n[..3], &[b".".to_vec(), b"..".to_vec(), b"f0001".to_vec()]);
    let v = vector("holes.xdd3");
    let b = DataBlock::data(&v.buf, &geo(), v.daddr, v.owner, &v.uuid).unwrap();
    let n = names(&b);
    assert!(!n.is_empty());
    // Every odd-numbered name was removed.
    for name in &n {
        let k: u32 = std::str::from_utf8(&name[1..]).unwrap().parse().unwrap();
        assert_eq!(k % 2, 0, "{name:?}");
    }
    assert!(b.bestfree[0].1 > 0);
}

#[test]
fn wrong_context_is_rejected() {
    let v = vector("blk.xdb3");
    let g = geo();
    // Block form opened as a data block (magic), wrong daddr, owner, uuid.
    assert!(DataBlock::data(&v.buf, &g, v.daddr, v.owner, &v.uuid).is_err());
    assert!(DataBlock::block(&v.buf, &g, Daddr(v.daddr.0 + 8), v.owner, &v.uuid).is_err());
    assert!(DataBlock::block(&v.buf, &g, v.daddr, Ino(v.owner.0 + 1), &v.uuid).is_err());
    assert!(DataBlock::block(&v.buf, &g, v.daddr, v.owner, &[0; 16]).is_err());
    // Wrong directory block size.
    let g64 = DirGeo::new(12, 4, true);
    assert!(DataBlock::block(&v.buf, &g64, v.daddr, v.owner, &v.uuid).is_err());
    // A flipped bit fails the CRC.
    let mut b = v.buf.clone();
    b[200] ^= 1;
    let e = DataBlock::block(&b, &g, v.daddr, v.owner, &v.uuid).unwrap_err();
    assert!(e.is_corrupt());
}

/// Change bytes of a block, recompute its CRC, and check the decoder
/// reports corruption without panicking.
fn corrupted(v: &Vector, edits: &[(usize, &[u8])]) -> Vec<u8> {
    let mut b = v.buf.clone();
    for (off, bytes) in edits {
        b[*off..*off + bytes.len()].copy_from_slice(bytes);
    }
    crc::update(&mut b, DIR3_CRC_OFF);
    b
}

#[test]
fn bad_slots_are_corruption() {
    let v = vector("blk.xdb3");
    let g = geo();
    let open = |b: &[u8]| -> Result<()> {
        let blk = DataBlock::block(b, &g, v.daddr, v.owner, &v.uuid)?;
        blk.walk(0, |_| true)
    };
    open(&v.buf).unwrap();
    // f0001 is at 96: name with '/', zero-length name, bad tag, bad ftype.
    for edit in [
        &[(96 + 9, &b"/"[..])][..],
        &[(96 + 8, &[0u8][..])],
        &[(96 + 22, &[0u8, 0][..])],
        &[(96 + 14, &[9u8][..])],
        // An unused slot with a bad length, and with length 0.
        &[(96, &[0xff, 0xff, 0x00, 0x07][..])],
        &[(96, &[0xff, 0xff, 0x00, 0x00][..])],
        // Leaf count past the block.
        &[(4088, &[0, 0, 0x10, 0][..])],
        // Bestfree pointing past the end.
        &[(48, &[0xff, 0xf0, 0x01, 0x00][..])],
    ] {
        let b = corrupted(&v, edit);
        assert!(open(&b).unwrap_err().is_corrupt(), "{edit:?}");
    }
}

#[test]
fn entry_at_the_end_of_the_block_is_corruption() {
    // A leaf address can name any 8-byte slot; the last one of a data
    // block has no room for an entry header (this used to index past the
    // buffer).
    let v = vector("holes.xdd3");
    let b = DataBlock::data(&v.buf, &geo(), v.daddr, v.owner, &v.uuid).unwrap();
    let end = b.end();
    for off in [end - 8, end - 16, end, end + 8] {
        if let Err(e) = b.entry_at(off) {
            assert!(e.is_corrupt(), "{off:#x}: {e}");
        }
    }
    assert!(b.entry_at(end - 8).is_err());
}

#[test]
fn random_mutations_never_panic() {
    let g = geo();
    let mut x = 0x9e37_79b9u32;
    for name in [
        "blk.xdb3",
        "holes.xdd3",
        "leaf.leaf1",
        "node.leafn",
        "node.xdf3",
    ] {
        let v = vector(name);
        for _ in 0..3000 {
            let mut b = v.buf.clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let i = x as usize % b.len();
                b[i] = (x >> 9) as u8;
            }
            crc::update(&mut b, DIR3_CRC_OFF);
            let _ = DataBlock::block(&b, &g, v.daddr, v.owner, &v.uuid).map(|blk| {
                let _ = blk.walk(0, |_| true);
            });
            let _ = DataBlock::data(&b, &g, v.daddr, v.owner, &v.uuid).map(|blk| {
                let _ = blk.walk(0, |e| blk.entry_at(e.off).is_ok());
            });
            let _ = decode_free(&b, v.daddr, v.owner, &v.uuid);
            crc::update(&mut b, crate::format::da::BLKINFO_CRC_OFF);
            let _ = decode_leaf(&b, LEAF1_MAGIC, v.daddr, v.owner, &v.uuid);
            let _ = decode_leaf(&b, LEAFN_MAGIC, v.daddr, v.owner, &v.uuid);
        }
    }
}

#[test]
fn leaf1_block() {
    let v = vector("leaf.leaf1");
    let l = decode_leaf(&v.buf, LEAF1_MAGIC, v.daddr, v.owner, &v.uuid).unwrap();
    assert_eq!(l.entries.len() - l.stale as usize, 302);
    assert_eq!(l.bests.len(), 2);
    // leafn magic is not leaf1.
    assert!(decode_leaf(&v.buf, LEAFN_MAGIC, v.daddr, v.owner, &v.uuid).is_err());
    // Every f0001..f0300 hash is present.
    for i in 1..=300 {
        let h = hashname(format!("f{i:04}").as_bytes());
        assert!(!hash_range(&l.entries, h).is_empty(), "f{i:04}");
    }
    // The entry for "f0001" points into data block 0 at 96.
    let h = hashname(b"f0001");
    let r = hash_range(&l.entries, h);
    let ptrs: Vec<_> = r
        .map(|i| geo().dataptr_split(l.entries[i].address as u64))
        .collect();
    assert!(ptrs.contains(&(0, 96)));
}

#[test]
fn node_leafn_free() {
    let v = vector("node.danode");
    let n = decode_node(&v.buf, v.daddr, v.owner, &v.uuid).unwrap();
    assert_eq!(n.level, 1);
    assert_eq!(n.entries.len(), 3);
    let leaf_dablk = geo().leaf_dablk() as u32;
    assert!(n
        .entries
        .iter()
        .all(|e| e.before > leaf_dablk && e.before < leaf_dablk + 8));
    let v = vector("node.leafn");
    let l = decode_leaf(&v.buf, LEAFN_MAGIC, v.daddr, v.owner, &v.uuid).unwrap();
    assert!(l.bests.is_empty());
    assert!(l.entries.len() > 200);
    let v = vector("node.xdf3");
    let f = decode_free(&v.buf, v.daddr, v.owner, &v.uuid).unwrap();
    assert_eq!(f.firstdb, 0);
    assert_eq!(f.bests.len(), 6);
    assert_eq!(f.nused, 6);
    // Corrupt header counts.
    let bad = corrupted(&v, &[(52, &[0, 0, 0x10, 0])]);
    assert!(decode_free(&bad, v.daddr, v.owner, &v.uuid).is_err());
    let bad = corrupted(&v, &[(56, &[0, 0, 0, 7])]);
    assert!(decode_free(&bad, v.daddr, v.owner, &v.uuid).is_err());
    let bad = corrupted(&v, &[(48, &[0, 0, 0, 1])]);
    assert!(decode_free(&bad, v.daddr, v.owner, &v.uuid).is_err());
}
