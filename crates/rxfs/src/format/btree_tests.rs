//! Tests of the short-format btree verifier and records on real blocks cut
//! from a kernel-populated image (see `testdata/README.md`): 1 KiB blocks,
//! 81920 blocks per AG, rmapbt, reflink, sparse inodes.

use super::*;
use crate::format::ag::NULL_AGINO;

const UUID_SRC: &[u8] = include_bytes!("testdata/ag2_hdr.bin");

fn blk(name: &str) -> Vec<u8> {
    let b: &[u8] = match name {
        "bno_root" => include_bytes!("testdata/ag2_71996.blk"),
        "bno_leaf" => include_bytes!("testdata/ag2_2.blk"),
        "cnt_root" => include_bytes!("testdata/ag2_71022.blk"),
        "cnt_leaf" => include_bytes!("testdata/ag2_3.blk"),
        "ino_root" => include_bytes!("testdata/ag2_71999.blk"),
        "ino_leaf" => include_bytes!("testdata/ag2_65604.blk"),
        "fino_root" => include_bytes!("testdata/ag2_5.blk"),
        "rmap_root" => include_bytes!("testdata/ag2_65545.blk"),
        "rmap_leaf" => include_bytes!("testdata/ag2_6.blk"),
        "refc_empty" => include_bytes!("testdata/ag2_7.blk"),
        "refc_ag0" => include_bytes!("testdata/ag0_7.blk"),
        _ => unreachable!(),
    };
    b.to_vec()
}

fn check(agno: u32, levels: u32) -> BlockCheck {
    BlockCheck {
        agno: AgNumber(agno),
        ag_len: 81920,
        first_agbno: 2,
        uuid: UUID_SRC[32..48].try_into().unwrap(),
        blocksize: 1024,
        sparse_inodes: true,
        inopblog: 1,
        max_ino: 4 << 18,
        tree_levels: levels,
    }
}

fn daddr(agno: u64, agbno: u64) -> Daddr {
    Daddr((agno * 81920 + agbno) * 2)
}

fn verify<'a>(b: &'a [u8], kind: BtreeKind, agno: u64, agbno: u64) -> Result<SBlock<'a>> {
    SBlock::verify(b, kind, daddr(agno, agbno), &check(agno as u32, 2))
}

fn restamp(b: &mut [u8]) {
    crc::update(b, SBLOCK_CRC_OFF);
}

#[test]
fn free_space_blocks() {
    let root = blk("bno_root");
    let n = verify(&root, BtreeKind::Bno, 2, 71996).unwrap();
    assert_eq!((n.level(), n.numrecs()), (1, 3));
    assert_eq!(
        (n.hdr.leftsib, n.hdr.rightsib),
        (NULL_AGBLOCK, NULL_AGBLOCK)
    );
    let keys: Vec<u64> = (0..3).map(|i| n.key(i).0).collect();
    assert_eq!(keys, [65605, 69568, 76196]);
    assert_eq!(
        (0..3).map(|i| n.ptr(i)).collect::<Vec<_>>(),
        [2, 71039, 72463]
    );
    assert_eq!(n.last_le(BtreeKey(69567, 0, 0)), Some(0));
    assert_eq!(n.last_le(BtreeKey(69568, 0, 0)), Some(1));
    assert_eq!(n.last_le(BtreeKey(65604, 0, 0)), None);
    assert_eq!(n.last_le(BtreeKey(u64::MAX, 0, 0)), Some(2));

    let leaf = blk("bno_leaf");
    let l = verify(&leaf, BtreeKind::Bno, 2, 2).unwrap();
    assert_eq!((l.numrecs(), l.hdr.rightsib), (121, 71039));
    assert_eq!(
        AllocRec::decode(l.rec(0)),
        AllocRec {
            start: 65605,
            len: 9
        }
    );
    assert_eq!(
        l.entry_key(0),
        n.key(0),
        "parent key is the child's first key"
    );

    let root = blk("cnt_root");
    let n = verify(&root, BtreeKind::Cnt, 2, 71022).unwrap();
    assert_eq!(n.key(0), BtreeKey(2, 65838, 0));
    assert_eq!(n.key(2), BtreeKey(20, 72840, 0));
    let leaf = blk("cnt_leaf");
    let l = verify(&leaf, BtreeKind::Cnt, 2, 3).unwrap();
    assert_eq!(l.numrecs(), 82);
    assert_eq!(
        AllocRec::decode(l.rec(1)),
        AllocRec {
            start: 65902,
            len: 2
        }
    );
    // A free-space block is not a cntbt block, nor an inobt block.
    assert!(verify(&leaf, BtreeKind::Bno, 2, 3).is_err());
    assert!(verify(&leaf, BtreeKind::Ino, 2, 3).is_err());
}

#[test]
fn inode_blocks_with_sparse_chunks() {
    let root = blk("ino_root");
    let n = verify(&root, BtreeKind::Ino, 2, 71999).unwrap();
    assert!(n.level() == 1 && n.numrecs() >= 2);
    let leaf = blk("ino_leaf");
    let l = verify(&leaf, BtreeKind::Ino, 2, 65604).unwrap();
    assert_eq!(l.numrecs(), 53);
    let r = InobtRec::decode(l.rec(0), true);
    assert_eq!(
        r,
        InobtRec {
            startino: 134976,
            holemask: 0xff,
            count: 32,
            freecount: 0,
            free: 0xffff_ffff,
        }
    );
    assert_eq!(r.present_mask(), 0xffff_ffff_0000_0000);
    assert!(r.is_hole(0) && r.is_hole(31) && !r.is_hole(32));
    assert!(!r.is_allocated(5) && r.is_allocated(32) && r.is_allocated(63));
    assert!(r.covers(134976 + 63) && !r.covers(134976 + 64) && !r.covers(134975));
    let mut out = [0u8; 16];
    r.encode(&mut out, true);
    assert_eq!(&out[..], l.rec(0));
    let fino = blk("fino_root");
    let f = verify(&fino, BtreeKind::Fino, 2, 5).unwrap();
    assert_eq!(f.numrecs(), 0, "no free inodes in AG 2");
    assert!(verify(&fino, BtreeKind::Ino, 2, 5).is_err());
}

#[test]
fn rmap_blocks() {
    let root = blk("rmap_root");
    let n = verify(&root, BtreeKind::Rmap, 2, 65545).unwrap();
    assert_eq!((n.level(), n.numrecs()), (1, 19));
    assert_eq!(n.key(0), BtreeKey(0, RMAP_OWN_FS, 0));
    assert_eq!(n.high_key(0), BtreeKey(65837, 80, 211007));
    assert_eq!(n.key(1), BtreeKey(65840, RMAP_OWN_INODES, 0));
    assert_eq!(n.ptr(0), 6);
    let leaf = blk("rmap_leaf");
    let l = verify(&leaf, BtreeKind::Rmap, 2, 6).unwrap();
    assert_eq!(l.numrecs(), 24);
    let r0 = RmapRec::decode(l.rec(0));
    assert_eq!((r0.start, r0.len, r0.owner), (0, 2, RMAP_OWN_FS));
    assert_eq!(RmapRec::decode(l.rec(1)).owner, RMAP_OWN_AG);
    assert_eq!(l.max_high_key(), Some(n.high_key(0)), "parent high key");
    for i in 0..l.numrecs() {
        let mut out = [0u8; 24];
        RmapRec::decode(l.rec(i)).encode(&mut out);
        assert_eq!(&out[..], l.rec(i));
    }
}

#[test]
fn refcount_blocks() {
    let b = blk("refc_ag0");
    let l = verify(&b, BtreeKind::Refcount, 0, 7).unwrap();
    let recs: Vec<RefcountRec> = (0..l.numrecs())
        .map(|i| RefcountRec::decode(l.rec(i)))
        .collect();
    let want = [(9476, 1024, 4), (10500, 64, 3), (10564, 1984, 4)];
    let got: Vec<(u32, u32, u32)> = recs.iter().map(|r| (r.start, r.len, r.refcount)).collect();
    assert_eq!(got, want);
    assert!(recs.iter().all(|r| !r.cow));
    let e = blk("refc_empty");
    assert_eq!(verify(&e, BtreeKind::Refcount, 2, 7).unwrap().numrecs(), 0);
    // Owned by AG 2, read as AG 0's block.
    assert!(SBlock::verify(&e, BtreeKind::Refcount, daddr(2, 7), &check(0, 1)).is_err());
}

#[test]
fn header_checks() {
    let b = blk("bno_leaf");
    let c = check(2, 2);
    let kind = BtreeKind::Bno;
    assert!(SBlock::verify(&b, kind, daddr(2, 3), &c).is_err(), "blkno");
    assert!(
        SBlock::verify(&b[..512], kind, daddr(2, 2), &c).is_err(),
        "size"
    );
    assert!(
        SBlock::verify(&b, kind, daddr(2, 2), &check(2, 0)).is_err(),
        "level 0 >= 0"
    );
    let mut bad_uuid = check(2, 2);
    bad_uuid.uuid[3] ^= 1;
    assert!(
        SBlock::verify(&b, kind, daddr(2, 2), &bad_uuid).is_err(),
        "uuid"
    );
    let mut x = b.clone();
    x[700] ^= 0x10;
    assert!(SBlock::verify(&x, kind, daddr(2, 2), &c)
        .unwrap_err()
        .to_string()
        .contains("CRC"));
    let mut hdr = SBlockHdr::decode(&b).unwrap();
    let mut x = b.clone();
    hdr.encode(&mut x);
    restamp(&mut x);
    assert_eq!(x, b, "header encode roundtrip");
    for (field, v) in [
        ("numrecs", 200u32),
        ("leftsib", 81920),
        ("rightsib", 1),
        ("owner", 1),
    ] {
        let mut h = hdr;
        match field {
            "numrecs" => h.numrecs = v as u16,
            "leftsib" => h.leftsib = v,
            "rightsib" => h.rightsib = v,
            _ => h.owner = v,
        }
        let mut x = b.clone();
        h.encode(&mut x);
        restamp(&mut x);
        assert!(
            SBlock::verify(&x, kind, daddr(2, 2), &c).is_err(),
            "{field} accepted"
        );
    }
    hdr.numrecs = 0;
    hdr.level = 1;
    let mut x = b.clone();
    hdr.encode(&mut x);
    restamp(&mut x);
    assert!(
        SBlock::verify(&x, kind, daddr(2, 2), &c).is_err(),
        "empty node"
    );
}

/// Rewrite record `i` of a leaf and fix the CRC.
fn with_rec(b: &[u8], kind: BtreeKind, i: usize, f: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut x = b.to_vec();
    let off = SBLOCK_HDR_SIZE + i * kind.rec_size();
    f(&mut x[off..off + kind.rec_size()]);
    restamp(&mut x);
    x
}

#[test]
fn record_checks() {
    let c = check(2, 2);
    let ok = |x: &[u8], k: BtreeKind, agbno| SBlock::verify(x, k, daddr(2, agbno), &c).is_ok();
    let bno = blk("bno_leaf");
    // Overlapping free extents; a zero-length one; one past the AG end.
    assert!(!ok(
        &with_rec(&bno, BtreeKind::Bno, 0, |r| put_be32(r, 4, 60)),
        BtreeKind::Bno,
        2
    ));
    assert!(!ok(
        &with_rec(&bno, BtreeKind::Bno, 5, |r| put_be32(r, 4, 0)),
        BtreeKind::Bno,
        2
    ));
    let last = 120;
    let past = with_rec(&bno, BtreeKind::Bno, last, |r| put_be32(r, 4, 81920));
    assert!(!ok(&past, BtreeKind::Bno, 2));
    // cntbt order is by length first.
    let cnt = blk("cnt_leaf");
    assert!(!ok(
        &with_rec(&cnt, BtreeKind::Cnt, 1, |r| put_be32(r, 4, 1)),
        BtreeKind::Cnt,
        3
    ));

    let ino = blk("ino_leaf");
    let k = BtreeKind::Ino;
    assert!(
        !ok(&with_rec(&ino, k, 0, |r| r[6] = 33), k, 65604),
        "count vs holemask"
    );
    assert!(
        !ok(&with_rec(&ino, k, 0, |r| r[7] = 1), k, 65604),
        "freecount vs mask"
    );
    let freed = with_rec(&ino, k, 0, |r| {
        r[7] = 1;
        put_be64(r, 8, 0x1_ffff_ffff);
    });
    assert!(ok(&freed, k, 65604), "one more free inode, counted");
    assert!(!ok(
        &with_rec(&ino, k, 1, |r| put_be32(r, 0, 134976 + 32)),
        k,
        65604
    ));
    assert!(
        !ok(&with_rec(&ino, k, 0, |r| put_be32(r, 0, 0)), k, 65604),
        "chunk in headers"
    );

    let rmap = blk("rmap_leaf");
    let k = BtreeKind::Rmap;
    assert!(
        !ok(&with_rec(&rmap, k, 5, |r| put_be64(r, 16, 1 << 58)), k, 6),
        "unknown bits"
    );
    assert!(
        !ok(&with_rec(&rmap, k, 0, |r| put_be64(r, 8, 77)), k, 6),
        "headers owned by inode"
    );
    assert!(
        !ok(
            &with_rec(&rmap, k, 1, |r| put_be64(r, 8, -20i64 as u64)),
            k,
            6
        ),
        "owner"
    );
    let unwritten_special = with_rec(&rmap, k, 1, |r| put_be64(r, 16, RMAP_OFF_UNWRITTEN));
    assert!(!ok(&unwritten_special, k, 6));
    assert!(
        !ok(&with_rec(&rmap, k, 2, |r| put_be32(r, 0, 1)), k, 6),
        "order"
    );

    let refc = blk("refc_ag0");
    let c0 = check(0, 1);
    let k = BtreeKind::Refcount;
    let okr = |x: &[u8]| SBlock::verify(x, k, daddr(0, 7), &c0).is_ok();
    assert!(okr(&refc));
    assert!(
        !okr(&with_rec(&refc, k, 1, |r| put_be32(r, 8, 1))),
        "shared with refcount 1"
    );
    assert!(
        !okr(&with_rec(&refc, k, 0, |r| put_be32(r, 4, 1025))),
        "overlap"
    );
    let cow = with_rec(&refc, k, 2, |r| {
        put_be32(r, 0, 10564 | REFC_COW_FLAG);
        put_be32(r, 8, 1);
    });
    assert!(okr(&cow), "CoW staging record sorts last");
    let r = RefcountRec::decode(&cow[SBLOCK_HDR_SIZE + 24..SBLOCK_HDR_SIZE + 36]);
    assert!(r.cow && r.start == 10564);
}

#[test]
fn sizes_and_heights() {
    assert_eq!(BtreeKind::Bno.max_recs(4096, true), 505);
    assert_eq!(BtreeKind::Bno.max_recs(4096, false), 336);
    assert_eq!(BtreeKind::Ino.max_recs(4096, true), 252);
    assert_eq!(BtreeKind::Ino.max_recs(4096, false), 505);
    assert_eq!(BtreeKind::Rmap.max_recs(4096, true), 168);
    assert_eq!(BtreeKind::Rmap.max_recs(4096, false), 91);
    assert_eq!(BtreeKind::Refcount.max_recs(4096, true), 336);
    assert_eq!(BtreeKind::Rmap.max_recs(1024, false), 22);
    for k in BtreeKind::ALL {
        let h = k.max_levels(4096, 1 << 20, 23, true);
        assert!((2..=9).contains(&h), "{k:?}: {h}");
        assert!(k.max_levels(1024, 81920, 18, true) >= 2);
    }
    assert_eq!(space_to_height(10, 1), 1);
    assert_eq!(space_to_height(10, 3), 1);
    assert_eq!(space_to_height(10, 4), 2);
    assert_eq!(NULL_AGINO, u32::MAX);
}

#[test]
fn record_keys() {
    // Free-space records: start block 5, 7 blocks.
    let alloc = [0, 0, 0, 5, 0, 0, 0, 7];
    assert_eq!(BtreeKind::Bno.rec_key(&alloc), BtreeKey(5, 0, 0));
    assert_eq!(BtreeKind::Cnt.rec_key(&alloc), BtreeKey(7, 5, 0));
    let mut ino = [0u8; 16];
    ino[..4].copy_from_slice(&64u32.to_be_bytes());
    ino[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert_eq!(BtreeKind::Ino.rec_key(&ino), BtreeKey(64, 0, 0));
    assert_eq!(BtreeKind::Fino.rec_key(&ino), BtreeKey(64, 0, 0));
    let mut refc = [0u8; 12];
    refc[..4].copy_from_slice(&9u32.to_be_bytes());
    refc[4..8].copy_from_slice(&2u32.to_be_bytes());
    assert_eq!(BtreeKind::Refcount.rec_key(&refc), BtreeKey(9, 0, 0));
    // rmap: start 100, 4 blocks, owner 131, offset 8 unwritten.
    let mut rmap = [0u8; 24];
    rmap[..4].copy_from_slice(&100u32.to_be_bytes());
    rmap[4..8].copy_from_slice(&4u32.to_be_bytes());
    rmap[8..16].copy_from_slice(&131u64.to_be_bytes());
    rmap[16..24].copy_from_slice(&(8 | RMAP_OFF_UNWRITTEN).to_be_bytes());
    assert_eq!(BtreeKind::Rmap.rec_key(&rmap), BtreeKey(100, 131, 8));
    assert_eq!(BtreeKind::Rmap.rec_high_key(&rmap), BtreeKey(103, 131, 11));
}
