//! Tests of the AG header decoders on real headers cut from a
//! kernel-populated image (see `testdata/README.md`): AG 2 of 4, 81920
//! blocks of 1 KiB, 512-byte sectors, rmapbt + reflink + finobt +
//! inobtcount + sparse inodes.

use super::*;
use crate::format::btree::BtreeKind;

const HDR: &[u8] = include_bytes!("testdata/ag2_hdr.bin");

pub(crate) fn check(agno: u32) -> AgCheck {
    let max = |k: BtreeKind| k.max_levels(1024, 81920, 18, true);
    AgCheck {
        agno: AgNumber(agno),
        ag_len: 81920,
        agblocks: 81920,
        sectsize: 512,
        blocklog: 10,
        inopblog: 1,
        uuid: HDR[32..48].try_into().unwrap(),
        has_rmapbt: true,
        has_reflink: true,
        has_finobt: true,
        has_inobtcount: true,
        maxlevels_alloc: max(BtreeKind::Bno),
        maxlevels_inobt: max(BtreeKind::Ino),
        maxlevels_rmap: max(BtreeKind::Rmap),
        maxlevels_refc: max(BtreeKind::Refcount),
    }
}

fn sector(i: usize) -> Vec<u8> {
    HDR[i * 512..(i + 1) * 512].to_vec()
}

/// Change a big-endian u32 field and fix the CRC, so that only the
/// semantic checks can object.
fn patched(i: usize, crc_off: usize, off: usize, v: u32) -> Vec<u8> {
    let mut b = sector(i);
    crate::format::put_be32(&mut b, off, v);
    crc::update(&mut b, crc_off);
    b
}

#[test]
fn agf_decodes_and_roundtrips() {
    let c = check(2);
    let agf = Agf::decode(&sector(1), &c).unwrap();
    assert_eq!((agf.seqno, agf.length), (2, 81920));
    assert_eq!((agf.bno_root, agf.bno_level), (71996, 2));
    assert_eq!((agf.cnt_root, agf.cnt_level), (71022, 2));
    assert_eq!(
        (agf.rmap_root, agf.rmap_level, agf.rmap_blocks),
        (65545, 2, 20)
    );
    assert_eq!(
        (agf.refcount_root, agf.refcount_level, agf.refcount_blocks),
        (7, 1, 1)
    );
    assert_eq!((agf.flfirst, agf.fllast, agf.flcount), (26, 37, 12));
    assert_eq!((agf.freeblks, agf.longest, agf.btreeblks), (3383, 24, 25));
    assert_eq!(agf.agfl_size, 119);
    assert!(!agf.agfl_needs_reset());
    assert_eq!(agf.agfl_active().unwrap(), (26..=37).collect::<Vec<_>>());
    let mut out = vec![0u8; 512];
    agf.encode(&mut out, 512);
    assert_eq!(out, sector(1), "encode reproduces the kernel's sector");
}

#[test]
fn agf_rejects_bad_fields() {
    let c = check(2);
    let mut b = sector(1);
    b[100] ^= 1;
    assert!(Agf::decode(&b, &c).unwrap_err().to_string().contains("CRC"));
    assert!(Agf::decode(&sector(1), &check(1)).is_err(), "seqno");
    assert!(Agf::decode(&sector(2), &c).is_err(), "magic");
    assert!(Agf::decode(&sector(1)[..300], &c).is_err(), "short");
    for (off, v, what) in [
        (4, 2, "version"),
        (12, 81919, "length"),
        (16, 1, "bnobt root in the headers"),
        (20, 81920, "cntbt root past the AG"),
        (28, 0, "bnobt level 0"),
        (36, 40, "rmapbt level"),
        (40, 119, "flfirst"),
        (44, 200, "fllast"),
        (48, 120, "flcount"),
        (56, 4000, "longest > freeblks"),
        (80, 0, "rmap_blocks"),
        (92, 0, "refcount level"),
    ] {
        let b = patched(1, AGF_CRC_OFF, off, v);
        assert!(Agf::decode(&b, &c).is_err(), "{what} accepted");
    }
}

#[test]
fn agf_inconsistent_free_list_needs_reset() {
    let c = check(2);
    // flcount 11 with first 26, last 37: the kernel resets such a list.
    let agf = Agf::decode(&patched(1, AGF_CRC_OFF, 48, 11), &c).unwrap();
    assert!(agf.agfl_needs_reset());
    assert!(agf.agfl_active().is_err());
    // A wrapped list is consistent: first 110, last 2, count 12.
    let mut b = patched(1, AGF_CRC_OFF, 40, 110);
    crate::format::put_be32(&mut b, 44, 2);
    crc::update(&mut b, AGF_CRC_OFF);
    let agf = Agf::decode(&b, &c).unwrap();
    assert_eq!(
        agf.agfl_active().unwrap(),
        [110, 111, 112, 113, 114, 115, 116, 117, 118, 0, 1, 2]
    );
}

#[test]
fn agi_decodes_and_roundtrips() {
    let c = check(2);
    let agi = Agi::decode(&sector(2), &c).unwrap();
    assert_eq!((agi.count, agi.freecount), (17760, 0));
    assert_eq!((agi.root, agi.level), (71999, 2));
    assert_eq!((agi.free_root, agi.free_level), (5, 1));
    assert_eq!((agi.iblocks, agi.fblocks), (7, 1));
    assert_eq!((agi.newino, agi.dirino), (163776, NULL_AGINO));
    assert!(agi.unlinked.iter().all(|&u| u == NULL_AGINO));
    let mut out = vec![0u8; 512];
    agi.encode(&mut out, 512);
    assert_eq!(out, sector(2));
}

#[test]
fn agi_rejects_bad_fields() {
    let c = check(2);
    let mut b = sector(2);
    b[7] ^= 1;
    assert!(Agi::decode(&b, &c).is_err());
    assert!(Agi::decode(&sector(2), &check(3)).is_err(), "seqno");
    for (off, v, what) in [
        (20, 0, "root"),
        (24, 0, "level"),
        (28, 17761, "freecount > count"),
        (40 + 4 * 5, 1, "unlinked bucket in the AG headers"),
        (40, 81920 << 1, "unlinked bucket past the AG"),
        (332, 0, "finobt level"),
        (336, 0, "iblocks"),
        (340, 90000, "fblocks"),
    ] {
        let b = patched(2, AGI_CRC_OFF, off, v);
        assert!(Agi::decode(&b, &c).is_err(), "{what} accepted");
    }
    // A real unlinked inode number is fine.
    let agi = Agi::decode(&patched(2, AGI_CRC_OFF, 40 + 4 * 3, 163776 + 3), &c).unwrap();
    assert_eq!(agi.unlinked[3], 163779);
}

#[test]
fn agfl_live_blocks() {
    let c = check(2);
    let agf = Agf::decode(&sector(1), &c).unwrap();
    let agfl = Agfl::decode(&sector(3), &c).unwrap();
    assert_eq!(agfl.slots.len(), 119);
    assert_eq!(agfl.slots[0], NULL_AGBLOCK);
    let live: Vec<u32> = agfl
        .active_blocks(&agf, &c)
        .unwrap()
        .iter()
        .map(|b| b.0)
        .collect();
    assert_eq!(
        live,
        [72465, 72466, 72467, 72468, 72469, 65583, 65646, 65647, 65710, 65774, 65775, 65711]
    );
    let mut out = vec![0u8; 512];
    agfl.encode(&mut out, 512);
    assert_eq!(out, sector(3));
    // A slot past sb_agblocks, a duplicate live block, a live NULL.
    assert!(Agfl::decode(&patched(3, AGFL_CRC_OFF, 36 + 4 * 50, 81920), &c).is_err());
    let dup = Agfl::decode(&patched(3, AGFL_CRC_OFF, 36 + 4 * 30, 72465), &c).unwrap();
    assert!(dup.active_blocks(&agf, &c).is_err());
    let null = Agfl::decode(&patched(3, AGFL_CRC_OFF, 36 + 4 * 30, NULL_AGBLOCK), &c).unwrap();
    assert!(null.active_blocks(&agf, &c).is_err());
    assert!(Agfl::decode(&sector(3), &check(0)).is_err(), "seqno");
}

#[test]
fn header_geometry() {
    assert_eq!(agfl_size(512), 119);
    assert_eq!(agfl_size(4096), 1015);
    assert_eq!(first_usable_agbno(512, 12), 1);
    assert_eq!(first_usable_agbno(512, 10), 2);
    assert_eq!(first_usable_agbno(512, 9), 4);
    assert_eq!(first_usable_agbno(4096, 12), 4);
    assert_eq!(check(2).header_daddr(AGF_SECTOR), Daddr(2 * 81920 * 2 + 1));
}
