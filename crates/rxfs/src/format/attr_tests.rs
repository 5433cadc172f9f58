//! Tests of the attribute decoders on blocks the kernel wrote (see
//! tests/data/attr/README.md for how they were made) and on mutations.

use super::*;
use crate::format::attr_remote::{rmt_blocks, verify_attr_rmt_block};
use crate::format::crc;
use crate::format::da::{decode_node, hashname};

const SF_SMALL: &[u8] = include_bytes!("../../tests/data/attr/sf_small.bin");
const SF_NS: &[u8] = include_bytes!("../../tests/data/attr/sf_ns.bin");
const SF_ACL_DIR: &[u8] = include_bytes!("../../tests/data/attr/sf_acl_dir.bin");
const LEAF_30: &[u8] = include_bytes!("../../tests/data/attr/leaf_30.bin");
const NODE_ROOT: &[u8] = include_bytes!("../../tests/data/attr/node_root.bin");
const NODE_LEAF1: &[u8] = include_bytes!("../../tests/data/attr/node_leaf1.bin");
const REMOTE: &[u8] = include_bytes!("../../tests/data/attr/remote_leaf_xarm.bin");
const UUID: Uuid = [
    0x80, 0xca, 0xae, 0xd9, 0x6c, 0xee, 0x42, 0x28, 0x9f, 0x7e, 0x8a, 0x58, 0x31, 0xdd, 0x8c, 0x01,
];

fn local(e: &AttrEntry) -> &[u8] {
    match &e.value {
        AttrValue::Local(v) => v,
        AttrValue::Remote { .. } => panic!("remote value"),
    }
}

#[test]
fn names_and_namespaces() {
    assert_eq!(split_name(b"user.x"), Some((Namespace::User, &b"x"[..])));
    assert_eq!(
        split_name(b"trusted.x"),
        Some((Namespace::Trusted, &b"x"[..]))
    );
    assert_eq!(
        split_name(b"security.x"),
        Some((Namespace::Security, &b"x"[..]))
    );
    assert_eq!(split_name(b"system.posix_acl_access"), None);
    assert_eq!(split_name(b"userx"), None);
    assert_eq!(full_name(Namespace::Security, b"s").unwrap(), b"security.s");
    assert_eq!(full_name(Namespace::Parent, b"p"), None);
    assert_eq!(
        Namespace::from_flags(ATTR_ROOT | ATTR_LOCAL),
        Some(Namespace::Trusted)
    );
    assert_eq!(Namespace::from_flags(ATTR_ROOT | ATTR_SECURE), None);
    assert_eq!(
        Namespace::from_flags(ATTR_INCOMPLETE),
        Some(Namespace::User)
    );
    for ns in [
        Namespace::User,
        Namespace::Trusted,
        Namespace::Security,
        Namespace::Parent,
    ] {
        assert_eq!(Namespace::from_flags(ns.flags()), Some(ns));
    }
}

#[test]
fn shortform_kernel() {
    let e = decode_shortform(SF_SMALL, Ino(131)).unwrap();
    assert_eq!(e.len(), 1);
    assert!(e[0].matches(Namespace::User, b"a"));
    assert_eq!(local(&e[0]), b"hello");

    let e = decode_shortform(SF_NS, Ino(137)).unwrap();
    let got: Vec<_> = e
        .iter()
        .map(|e| (e.namespace(), e.name.clone(), local(e).to_vec()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Namespace::Trusted, b"t1".to_vec(), b"tv".to_vec()),
            (Namespace::Security, b"s1".to_vec(), b"sv".to_vec()),
            (Namespace::User, b"u1".to_vec(), b"uv".to_vec()),
        ]
    );

    let e = decode_shortform(SF_ACL_DIR, Ino(136)).unwrap();
    assert_eq!(e.len(), 2);
    assert!(e[0].matches(Namespace::Trusted, b"SGI_ACL_DEFAULT"));
    assert!(e[1].matches(Namespace::Trusted, b"SGI_ACL_FILE"));
    assert_eq!(local(&e[1]).len(), 64);
}

#[test]
fn shortform_exact_fit_and_errors() {
    // Only totsize bytes are needed.
    assert_eq!(decode_shortform(&SF_SMALL[..13], Ino(1)).unwrap().len(), 1);
    assert!(decode_shortform(&SF_SMALL[..12], Ino(1)).is_err());
    // Empty list.
    assert!(decode_shortform(&[0, 4, 0, 0], Ino(1)).unwrap().is_empty());
    assert!(decode_shortform(&[0, 3, 0, 0], Ino(1)).is_err());
    assert!(decode_shortform(&[0, 4], Ino(1)).is_err());
    let mut b = SF_SMALL.to_vec();
    b[2] = 2; // count 2, room for one
    assert!(decode_shortform(&b, Ino(1)).unwrap_err().is_corrupt());
    let mut b = SF_SMALL.to_vec();
    b[2] = 0; // count 0 but totsize covers an entry
    assert!(decode_shortform(&b, Ino(1)).is_err());
    let mut b = SF_SMALL.to_vec();
    b[4] = 0; // empty name
    assert!(decode_shortform(&b, Ino(1)).is_err());
    let mut b = SF_SMALL.to_vec();
    b[6] = ATTR_ROOT | ATTR_SECURE;
    assert!(decode_shortform(&b, Ino(1)).is_err());
    let mut b = SF_SMALL.to_vec();
    b[7] = 0; // NUL name
    assert!(decode_shortform(&b, Ino(1)).is_err());
}

#[test]
fn shortform_random_never_panics() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for _ in 0..20_000 {
        let mut b = SF_NS.to_vec();
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(0..30);
            b[i] = rng.gen();
        }
        let _ = decode_shortform(&b, Ino(1));
    }
}

#[test]
fn leaf_kernel() {
    // Inode 132, attr fork block 0 at fsblock 15 (daddr 120).
    let l = decode_leaf(LEAF_30, Daddr(120), Ino(132), &UUID).unwrap();
    assert_eq!(l.hdr.count, 30);
    assert_eq!(l.hdr.info.forw, 0);
    assert_eq!(l.entries.len(), 30);
    let mut names: Vec<Vec<u8>> = Vec::new();
    for e in &l.entries {
        assert_eq!(e.namespace(), Namespace::User);
        assert_eq!(e.flags & ATTR_LOCAL, ATTR_LOCAL);
        assert_eq!(e.hashval, hashname(&e.name));
        let i: usize = std::str::from_utf8(&e.name[4..]).unwrap().parse().unwrap();
        let want = format!("{}{:050}", "x".repeat(50), i);
        assert_eq!(local(e), want.as_bytes());
        names.push(e.name.clone());
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 30);
    // Every verifier input matters.
    assert!(decode_leaf(LEAF_30, Daddr(128), Ino(132), &UUID).is_err());
    assert!(decode_leaf(LEAF_30, Daddr(120), Ino(131), &UUID).is_err());
    assert!(decode_leaf(LEAF_30, Daddr(120), Ino(132), &[0; 16]).is_err());
    let mut b = LEAF_30.to_vec();
    b[2000] ^= 1;
    assert!(decode_leaf(&b, Daddr(120), Ino(132), &UUID)
        .unwrap_err()
        .is_corrupt());
}

/// Rewrite a field of the leaf and fix the CRC, so only the structure
/// checks can catch it.
fn leaf_with(f: impl FnOnce(&mut Vec<u8>)) -> Result<Leaf> {
    let mut b = LEAF_30.to_vec();
    f(&mut b);
    crc::update(&mut b, da::BLKINFO_CRC_OFF);
    decode_leaf(&b, Daddr(120), Ino(132), &UUID)
}

#[test]
fn leaf_structure_checks() {
    assert!(leaf_with(|_| ()).is_ok());
    // count too large for the entry table.
    assert!(leaf_with(|b| b[56..58].copy_from_slice(&500u16.to_be_bytes())).is_err());
    // firstused inside the header.
    assert!(leaf_with(|b| b[60..62].copy_from_slice(&40u16.to_be_bytes())).is_err());
    // Entry 1's hash below entry 0's.
    assert!(leaf_with(|b| b[88..92].copy_from_slice(&0u32.to_be_bytes())).is_err());
    // nameidx past the block end.
    assert!(leaf_with(|b| b[84..86].copy_from_slice(&4096u16.to_be_bytes())).is_err());
    // nameidx below firstused.
    assert!(leaf_with(|b| b[84..86].copy_from_slice(&100u16.to_be_bytes())).is_err());
    // Two namespace bits.
    assert!(leaf_with(|b| b[86] |= ATTR_ROOT | ATTR_SECURE).is_err());
    // Misaligned freemap.
    assert!(leaf_with(|b| b[64..66].copy_from_slice(&3u16.to_be_bytes())).is_err());
    // A record whose value runs past the block end.
    let hi = (0..30)
        .map(|i| be16(LEAF_30, 80 + i * 8 + 4))
        .max()
        .unwrap() as usize;
    assert!(leaf_with(|b| b[hi..hi + 2].copy_from_slice(&200u16.to_be_bytes())).is_err());
}

#[test]
fn leaf_random_never_panics() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut ok = 0;
    for _ in 0..3_000 {
        let r = leaf_with(|b| {
            for _ in 0..rng.gen_range(1..4) {
                // Mostly the header and entry table, sometimes names.
                let i = if rng.gen_bool(0.7) {
                    rng.gen_range(56..80 + 30 * 8)
                } else {
                    rng.gen_range(56..4096)
                };
                b[i] = rng.gen();
            }
        });
        ok += r.is_ok() as u32;
    }
    assert!(ok > 0, "some mutations are harmless");
}

#[test]
fn node_kernel() {
    // Inode 133: 2000 attrs; attr fork block 0 (fsblock 14, daddr 112) is
    // the DA node, block 1 (fsblock 13, daddr 104) its first leaf.
    let n = decode_node(NODE_ROOT, Daddr(112), Ino(133), &UUID).unwrap();
    assert_eq!(n.level, 1);
    assert_eq!(n.entries.len(), 111);
    assert_eq!(n.entries[0].before, 1);
    assert_eq!(block_magic(NODE_ROOT), Some(da::DA3_NODE_MAGIC));
    assert_eq!(block_magic(NODE_LEAF1), Some(ATTR3_LEAF_MAGIC));
    let l = decode_leaf(NODE_LEAF1, Daddr(104), Ino(133), &UUID).unwrap();
    assert_eq!(l.hdr.info.back, 0, "leftmost leaf");
    assert_ne!(l.hdr.info.forw, 0);
    // The node's first key is the largest hash of its first child.
    assert_eq!(l.last_hash(), n.entries[0].hashval);
    for e in &l.entries {
        assert_eq!(e.hashval, hashname(&e.name));
        let i: u32 = std::str::from_utf8(&e.name[1..]).unwrap().parse().unwrap();
        assert_eq!(local(e), format!("{i:0100}").as_bytes());
    }
}

#[test]
fn remote_kernel() {
    // Inode 134: one 20000-byte value; attr fork = 6 blocks at fsblock 131
    // (daddr 1048): the leaf, then 5 XARM blocks.
    let bs = 4096usize;
    let l = decode_leaf(&REMOTE[..bs], Daddr(1048), Ino(134), &UUID).unwrap();
    assert_eq!(l.entries.len(), 1);
    let e = &l.entries[0];
    assert!(e.matches(Namespace::User, b"big"));
    let AttrValue::Remote { blk, len } = e.value else {
        panic!("value should be remote")
    };
    assert_eq!((blk, len), (1, 20000));
    let n = rmt_blocks(len, bs as u32);
    assert_eq!(n, 5);
    let mut value = Vec::new();
    for i in 0..n {
        let b = (blk + i) as usize;
        let buf = &REMOTE[b * bs..(b + 1) * bs];
        let daddr = Daddr(1048 + 8 * b as u64);
        let off = value.len() as u32;
        let part = verify_attr_rmt_block(buf, daddr, Ino(134), &UUID, off, len - off).unwrap();
        value.extend_from_slice(part);
    }
    let want: Vec<u8> = (0..20000u32).map(|i| ((i * 7) % 251) as u8).collect();
    assert_eq!(value, want);
    // Blocks out of order are caught by the offset check.
    let b2 = &REMOTE[2 * bs..3 * bs];
    assert!(verify_attr_rmt_block(b2, Daddr(1064), Ino(134), &UUID, 0, 20000).is_err());
}

#[test]
fn entry_sizes() {
    assert_eq!(leaf_entsize_local(1, 5), 12);
    assert_eq!(leaf_entsize_local(1, 0), 4);
    assert_eq!(leaf_entsize_remote(3), 16);
    assert_eq!(leaf_entsize_remote(1), 12);
}

#[test]
fn incomplete_and_parent_entries() {
    let mut e = AttrEntry {
        flags: ATTR_LOCAL,
        name: b"x".to_vec(),
        hashval: hashname(b"x"),
        value: AttrValue::Local(vec![]),
    };
    assert!(e.matches(Namespace::User, b"x"));
    assert!(!e.matches(Namespace::Trusted, b"x"));
    e.flags |= ATTR_INCOMPLETE;
    assert!(e.incomplete());
    assert!(
        !e.matches(Namespace::User, b"x"),
        "incomplete attrs do not exist"
    );
    // Parent pointer names are binary: NUL bytes allowed, never listed.
    assert!(check_name(ATTR_PARENT, &[0, 1, 2]).is_ok());
    assert!(check_name(0, &[0, 1, 2]).is_err());
    assert_eq!(
        full_name(Namespace::from_flags(ATTR_PARENT).unwrap(), b"p"),
        None
    );
}

#[test]
fn leaf_with_incomplete_entry_decodes() {
    // Mark entry 3 INCOMPLETE: the block stays valid, the flag is kept.
    let l = leaf_with(|b| b[80 + 3 * 8 + 6] |= ATTR_INCOMPLETE).unwrap();
    assert!(l.entries[3].incomplete());
    assert_eq!(l.entries.iter().filter(|e| e.incomplete()).count(), 1);
}
