//! Walker tests on a synthetic filesystem in memory: the superblock and AGF
//! of a real image (reshaped to one AG), with a hand-built two-level bnobt,
//! read through a bare [`ReadCtx`] over the image (no mount).

use std::sync::Arc;

use super::*;
use crate::bdev::{BlockDevice, MemDevice};
use crate::cache::buf::TxGuard;
use crate::cache::ilock::IoLockGuard;
use crate::format::btree::{
    AllocRec, BtreeKind, SBlockHdr, BNOBT_MAGIC, NULL_AGBLOCK, SBLOCK_CRC_OFF, SBLOCK_HDR_SIZE,
};
use crate::format::sb::Superblock;
use crate::format::{crc, put_be32};
use crate::geometry::Geometry;
use crate::inode::{Inode, Reading};
use crate::types::Ino;

const HDR: &[u8] = include_bytes!("../format/testdata/ag2_hdr.bin");
const BS: usize = 1024;
const AGBLOCKS: usize = 81920;
const ROOT: u32 = 20;
const LEAVES: [u32; 3] = [10, 11, 12];

fn leaf_recs(i: usize) -> Vec<AllocRec> {
    let starts: &[u32] = match i {
        0 => &[100, 200],
        1 => &[300, 400],
        _ => &[500],
    };
    starts
        .iter()
        .map(|&s| AllocRec { start: s, len: 5 })
        .collect()
}

/// Write a bnobt block: header, then records (leaf) or keys and pointers.
fn put_block(img: &mut [u8], agbno: u32, level: u16, n: usize, left: u32, right: u32) {
    let uuid = HDR[32..48].try_into().unwrap();
    let off = agbno as usize * BS;
    let b = &mut img[off..off + BS];
    SBlockHdr {
        magic: BNOBT_MAGIC,
        level,
        numrecs: n as u16,
        leftsib: left,
        rightsib: right,
        blkno: agbno as u64 * 2,
        lsn: 1,
        uuid,
        owner: 0,
    }
    .encode(b);
}

fn image() -> Vec<u8> {
    let mut img = vec![0u8; AGBLOCKS * BS];
    let mut sb = Superblock::decode_unverified(&HDR[..512]).unwrap();
    sb.agcount = 1;
    // The template is a secondary superblock (mkfs leaves those marked in
    // progress); a primary must not be.
    sb.inprogress = 0;
    sb.dblocks = AGBLOCKS as u64;
    // The log (never written: all zero) moves into our one AG.
    sb.logstart = 10_000;
    sb.logblocks = 8192;
    sb.encode(&mut img[..512]);
    // The AGF of AG 2, renumbered to AG 0 with our bnobt root.
    img[512..1024].copy_from_slice(&HDR[512..1024]);
    let agf = &mut img[512..1024];
    put_be32(agf, 8, 0);
    put_be32(agf, 16, ROOT);
    put_be32(agf, 28, 2);
    crc::update(agf, crate::format::ag::AGF_CRC_OFF);
    for (i, &agbno) in LEAVES.iter().enumerate() {
        let left = if i == 0 { NULL_AGBLOCK } else { LEAVES[i - 1] };
        let right = LEAVES.get(i + 1).copied().unwrap_or(NULL_AGBLOCK);
        let recs = leaf_recs(i);
        put_block(&mut img, agbno, 0, recs.len(), left, right);
        for (j, r) in recs.iter().enumerate() {
            let o = agbno as usize * BS + SBLOCK_HDR_SIZE + 8 * j;
            r.encode(&mut img[o..o + 8]);
        }
    }
    put_block(&mut img, ROOT, 1, 3, NULL_AGBLOCK, NULL_AGBLOCK);
    let maxnode = BtreeKind::Bno.max_recs(BS, false);
    for (i, &agbno) in LEAVES.iter().enumerate() {
        let o = ROOT as usize * BS + SBLOCK_HDR_SIZE;
        BtreeKind::Bno.encode_key(
            BtreeKey(leaf_recs(i)[0].start as u64, 0, 0),
            &mut img[o + 8 * i..],
        );
        put_be32(&mut img, o + maxnode * 8 + 4 * i, agbno);
    }
    for agbno in LEAVES.iter().chain([&ROOT]) {
        restamp(&mut img, *agbno);
    }
    img
}

fn restamp(img: &mut [u8], agbno: u32) {
    let o = agbno as usize * BS;
    crc::update(&mut img[o..o + BS], SBLOCK_CRC_OFF);
}

/// A read-only image: the primary superblock read through its verifier,
/// nothing else (the walker reads only AG headers and btree blocks).
struct Image {
    dev: MemDevice,
    sb: Superblock,
    geo: Geometry,
}

impl ReadCtx for Image {
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn sb(&self) -> &Superblock {
        &self.sb
    }
    fn read_locked<'a>(&self, ip: &'a Inode) -> Result<Reading<'a>> {
        Ok(Reading::given(ip))
    }
    fn reads_take_locks(&self) -> bool {
        false
    }
    fn dev(&self) -> &dyn BlockDevice {
        &self.dev
    }
    fn rtdev(&self) -> Option<&dyn BlockDevice> {
        None
    }
    fn data_read_lock(&self, _ino: Ino) -> Result<Option<IoLockGuard>> {
        Ok(None)
    }
    fn agi_read_lock(&self, _agno: AgNumber) -> Result<Option<TxGuard>> {
        Ok(None)
    }
    fn iget(&self, _ino: Ino) -> Result<Arc<Inode>> {
        Err(Error::NotSupported("no inodes in a walker test".into()))
    }
}

fn open(img: Vec<u8>) -> (Image, BtreeRoot) {
    let dev = MemDevice::new_read_only(img);
    let sb = crate::geometry::read_primary_sb(&dev).unwrap();
    let geo = Geometry::new(&sb);
    let fs = Image { dev, sb, geo };
    let agf = crate::ag::read::read_agf(&fs, AgNumber(0)).unwrap();
    let root = BtreeRoot::from_agf(BtreeKind::Bno, AgNumber(0), &agf);
    (fs, root)
}

#[test]
fn walks_and_looks_up() {
    let (fs, root) = open(image());
    let recs: Vec<AllocRec> = btree_records(&fs, &root).unwrap();
    let starts: Vec<u32> = recs.iter().map(|r| r.start).collect();
    assert_eq!(starts, [100, 200, 300, 400, 500]);
    let st = btree_walk_raw(&fs, &root, &mut |_| Ok(true)).unwrap();
    assert_eq!(
        st,
        WalkStats {
            blocks: 4,
            records: 5
        }
    );
    let mut seen = 0;
    let st = btree_walk_raw(&fs, &root, &mut |_| {
        seen += 1;
        Ok(seen < 3)
    });
    assert_eq!(st.unwrap().records, 3, "a walk stops when asked");
    let look = |k: u64| {
        btree_lookup_le::<AllocRec>(&fs, &root, BtreeKey(k, 0, 0))
            .unwrap()
            .map(|r| r.start)
    };
    assert_eq!(look(99), None);
    assert_eq!(look(100), Some(100));
    assert_eq!(look(299), Some(200));
    assert_eq!(look(300), Some(300));
    assert_eq!(look(1 << 20), Some(500));
}

/// Damage the image: a full walk must report corruption, and so must some
/// lookup unless the damage is only in sibling pointers (which lookups do
/// not follow). No operation may hang.
fn assert_corrupt(what: &str, damage: impl FnOnce(&mut Vec<u8>)) {
    assert_corrupt_walk(what, true, damage)
}

fn assert_corrupt_walk(what: &str, lookup_sees: bool, damage: impl FnOnce(&mut Vec<u8>)) {
    let mut img = image();
    damage(&mut img);
    let (fs, root) = open(img);
    let err = btree_walk_raw(&fs, &root, &mut |_| Ok(true)).unwrap_err();
    assert!(err.is_corrupt(), "{what}: {err}");
    let errs = [0u64, 150, 350, 450, 600]
        .iter()
        .filter(|&&k| btree_lookup_le::<AllocRec>(&fs, &root, BtreeKey(k, 0, 0)).is_err())
        .count();
    assert_eq!(errs > 0, lookup_sees, "{what}: {errs} lookups failed");
}

fn node_ptr_off(i: usize) -> usize {
    ROOT as usize * BS + SBLOCK_HDR_SIZE + BtreeKind::Bno.max_recs(BS, false) * 8 + 4 * i
}

#[test]
fn detects_damaged_trees() {
    assert_corrupt("two parents for one leaf", |img| {
        put_be32(img, node_ptr_off(1), LEAVES[0]);
        restamp(img, ROOT);
    });
    assert_corrupt("node points to itself", |img| {
        put_be32(img, node_ptr_off(2), ROOT);
        restamp(img, ROOT);
    });
    assert_corrupt("broken left link", |img| {
        put_be32(img, LEAVES[1] as usize * BS + 8, LEAVES[2]);
        restamp(img, LEAVES[1]);
    });
    assert_corrupt_walk("leaf chain loops back", false, |img| {
        put_be32(img, LEAVES[2] as usize * BS + 12, LEAVES[0]);
        restamp(img, LEAVES[2]);
    });
    assert_corrupt("parent key above the child's keys", |img| {
        put_be32(img, ROOT as usize * BS + SBLOCK_HDR_SIZE + 8, 350);
        restamp(img, ROOT);
    });
    assert_corrupt("leaf owned by another AG", |img| {
        put_be32(img, LEAVES[2] as usize * BS + 48, 1);
        restamp(img, LEAVES[2]);
    });
    assert_corrupt("leaf with a bad CRC", |img| {
        img[LEAVES[1] as usize * BS + 100] ^= 1;
    });
    assert_corrupt("tree taller than its root", |img| {
        put_be32(img, 512 + 28, 3);
        crc::update(&mut img[512..1024], crate::format::ag::AGF_CRC_OFF);
    });
}
