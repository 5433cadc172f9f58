//! Unit tests of the pieces that need no btree: freed dinodes, modes.
//! The whole allocator is tested against the kernel in
//! `tests/ialloc_kernel.rs`.

use super::*;
use crate::format::crc;
use crate::format::inode::{decode_core, Timestamp, DIFLAG2_BIGTIME, FMT_BTREE};
use crate::format::sb::{Superblock, INCOMPAT_BIGTIME};

const HDR: &[u8] = include_bytes!("../format/testdata/ag2_hdr.bin");

fn sb() -> Superblock {
    let mut sb = Superblock::decode_unverified(&HDR[..512]).unwrap();
    sb.features_incompat |= INCOMPAT_BIGTIME;
    sb
}

#[test]
fn freed_dinode_is_free_and_keeps_times() {
    let sb = sb();
    let t = Timestamp {
        sec: 1_600_000_000,
        nsec: 42,
    };
    let init = NewInode {
        mode: de::S_IFDIR | 0o755,
        uid: 5,
        gid: 6,
        rdev: 0,
        nlink: 2,
        time: t,
    };
    let ino = Ino(777);
    let mut d = init_dinode(&sb, ino, &init, 10);
    // Pretend it was an old-style inode with a btree fork and data.
    de::set_flags2(&mut d, 0);
    de::set_atime(&mut d, t);
    de::set_format(&mut d, FMT_BTREE);
    de::set_forkoff(&mut d, 20);
    de::set_size(&mut d, 4096);
    d[200] = 0xee;
    de::set_nlink(&mut d, 0);
    free_dinode(&mut d, DIFLAG2_BIGTIME);
    crc::update(&mut d, de::off::CRC);
    let c = decode_core(&d, ino, &sb.metadata_uuid(), false).unwrap();
    assert_eq!(c.mode, 0);
    assert_eq!(c.gen, 11);
    assert_eq!(
        (c.size, c.nextents, c.forkoff, c.format),
        (0, 0, 0, FMT_EXTENTS)
    );
    assert_eq!(c.flags2, DIFLAG2_BIGTIME);
    assert_eq!(c.atime, t);
    assert_eq!((c.uid, c.gid), (5, 6));
    assert!(d[DINODE_V3_CORE_SIZE..].iter().all(|&b| b == 0));
}

#[test]
fn modes() {
    assert!(valid_mode(de::S_IFREG | 0o644));
    assert!(valid_mode(de::S_IFSOCK));
    assert!(!valid_mode(0));
    assert!(!valid_mode(0o644));
    assert!(!valid_mode(0o170000 | 0o644));
}
