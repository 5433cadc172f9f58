//! Round trips through [`crate::format::inode::decode_core`].

use super::*;
use crate::format::crc;
use crate::format::inode::{decode_core, FMT_BTREE};
use crate::format::sb::{INCOMPAT_BIGTIME, INCOMPAT_NREXT64};

const HDR: &[u8] = include_bytes!("testdata/ag2_hdr.bin");

fn sb(bigtime: bool, nrext64: bool) -> Superblock {
    let mut sb = Superblock::decode_unverified(&HDR[..512]).unwrap();
    sb.features_incompat &= !(INCOMPAT_BIGTIME | INCOMPAT_NREXT64);
    if bigtime {
        sb.features_incompat |= INCOMPAT_BIGTIME;
    }
    if nrext64 {
        sb.features_incompat |= INCOMPAT_NREXT64;
    }
    sb
}

fn decode(d: &[u8], ino: Ino, sb: &Superblock) -> crate::format::inode::InodeCore {
    let mut d = d.to_vec();
    crc::update(&mut d, off::CRC);
    decode_core(&d, ino, &sb.metadata_uuid(), sb.has_nrext64()).unwrap()
}

fn new(mode: u32) -> NewInode {
    NewInode {
        mode,
        uid: 1000,
        gid: 100,
        rdev: (8 << 18) | 3,
        nlink: 1,
        time: Timestamp {
            sec: 1_700_000_000,
            nsec: 123_456_789,
        },
    }
}

#[test]
fn init_file_roundtrip() {
    for (bt, nx) in [(false, false), (true, false), (true, true), (false, true)] {
        let sb = sb(bt, nx);
        let ino = Ino(4242);
        let n = new(S_IFREG | 0o644);
        let d = init_dinode(&sb, ino, &n, 77);
        assert_eq!(d.len(), sb.inodesize as usize);
        let c = decode(&d, ino, &sb);
        assert_eq!(c.mode as u32, S_IFREG | 0o644);
        assert_eq!(c.version, 3);
        assert_eq!(c.format, FMT_EXTENTS);
        assert_eq!((c.uid, c.gid, c.nlink), (1000, 100, 1));
        assert_eq!(c.atime, n.time);
        assert_eq!(c.mtime, n.time);
        assert_eq!(c.ctime, n.time);
        assert_eq!(c.crtime, n.time);
        assert_eq!(c.gen, 77);
        assert_eq!(c.next_unlinked, NULLAGINO);
        assert_eq!(c.ino, ino.0);
        assert_eq!((c.size, c.nblocks, c.nextents, c.anextents), (0, 0, 0, 0));
        assert_eq!(c.forkoff, 0);
        assert_eq!(c.bigtime(), bt);
        assert_eq!(c.nrext64(), nx);
        // onlink stays 0.
        assert_eq!(be16(&d, off::ONLINK), 0);
        // CRC and LSN untouched.
        assert_eq!(&d[off::CRC..off::CRC + 4], &[0; 4]);
        assert_eq!(&d[off::LSN..off::LSN + 8], &[0; 8]);
    }
}

#[test]
fn init_formats_by_type() {
    let sb = sb(true, false);
    for (mode, fmt) in [
        (S_IFDIR | 0o755, FMT_EXTENTS),
        (S_IFLNK | 0o777, FMT_EXTENTS),
        (S_IFCHR | 0o600, FMT_DEV),
        (S_IFBLK | 0o600, FMT_DEV),
        (S_IFIFO | 0o600, FMT_DEV),
        (S_IFSOCK | 0o600, FMT_DEV),
        (S_IFREG | 0o600, FMT_EXTENTS),
    ] {
        let d = init_dinode(&sb, Ino(99), &new(mode), 1);
        let c = decode(&d, Ino(99), &sb);
        assert_eq!(c.format, fmt, "mode {mode:o}");
        let want_rdev = if matches!(mode & S_IFMT, S_IFCHR | S_IFBLK) {
            (8 << 18) | 3
        } else {
            0
        };
        assert_eq!(rdev(&d), want_rdev, "mode {mode:o}");
    }
}

#[test]
fn setters_roundtrip() {
    for (bt, nx) in [(false, false), (true, true)] {
        let sb = sb(bt, nx);
        let ino = Ino(1234);
        let mut d = init_dinode(&sb, ino, &new(S_IFREG | 0o600), 5);
        set_mode(&mut d, (S_IFREG | 0o4755) as u16);
        set_uid(&mut d, 0xdead_beef);
        set_gid(&mut d, 0x0102_0304);
        set_nlink(&mut d, 70_000);
        set_projid(&mut d, 0x0005_0006);
        set_size(&mut d, 1 << 40);
        set_nblocks(&mut d, 12345);
        set_extsize(&mut d, 16);
        let big = if nx { 5_000_000_000 } else { 4_000_000 };
        set_nextents(&mut d, big);
        set_anextents(&mut d, if nx { 100_000 } else { 60_000 });
        set_format(&mut d, FMT_BTREE);
        set_forkoff(&mut d, 15);
        set_aformat(&mut d, FMT_EXTENTS);
        set_flags(&mut d, 0x0040);
        set_gen(&mut d, 0xffff_fffe);
        set_next_unlinked(&mut d, 77);
        bump_changecount(&mut d, 3);
        let t1 = Timestamp { sec: -5, nsec: 1 };
        let t2 = Timestamp {
            sec: 2_000_000_000,
            nsec: 999_999_999,
        };
        let t3 = Timestamp { sec: 0, nsec: 0 };
        let t4 = Timestamp {
            sec: 86400,
            nsec: 7,
        };
        set_atime(&mut d, t1);
        set_mtime(&mut d, t2);
        set_ctime(&mut d, t3);
        set_crtime(&mut d, t4);
        let c = decode(&d, ino, &sb);
        assert_eq!(c.mode as u32, S_IFREG | 0o4755);
        assert_eq!((c.uid, c.gid, c.nlink), (0xdead_beef, 0x0102_0304, 70_000));
        assert_eq!(c.projid, 0x0005_0006);
        assert_eq!((c.size, c.nblocks, c.extsize), (1 << 40, 12345, 16));
        assert_eq!(c.nextents, big);
        assert_eq!(c.anextents, if nx { 100_000 } else { 60_000 });
        assert_eq!(
            (c.format, c.forkoff, c.aformat),
            (FMT_BTREE, 15, FMT_EXTENTS)
        );
        assert_eq!(c.flags, 0x0040);
        assert_eq!(
            (c.gen, c.next_unlinked, c.changecount),
            (0xffff_fffe, 77, 4)
        );
        assert_eq!((c.atime, c.mtime, c.ctime, c.crtime), (t1, t2, t3, t4));
        // Getters agree with the decoder.
        assert_eq!(nextents(&d), c.nextents);
        assert_eq!(anextents(&d), c.anextents);
        assert_eq!(projid(&d), c.projid);
        assert_eq!(mtime(&d), c.mtime);
        assert_eq!(uuid(&d), c.uuid);
        // Fork slices follow forkoff.
        assert_eq!(data_fork(&d).len(), 15 * 8);
        assert_eq!(attr_fork(&d).len(), d.len() - 176 - 120);
        set_forkoff(&mut d, 0);
        assert_eq!(data_fork(&d).len(), d.len() - 176);
        assert!(attr_fork(&d).is_empty());
    }
}

#[test]
fn times_clamp_to_format() {
    let sb = sb(false, false);
    let mut d = init_dinode(&sb, Ino(7), &new(S_IFREG), 1);
    set_mtime(
        &mut d,
        Timestamp {
            sec: 1 << 40,
            nsec: 5,
        },
    );
    assert_eq!(mtime(&d).sec, i32::MAX as i64);
    set_mtime(
        &mut d,
        Timestamp {
            sec: -(1 << 40),
            nsec: 5,
        },
    );
    assert_eq!(mtime(&d).sec, i32::MIN as i64);
    let sb = self::sb(true, false);
    let mut d = init_dinode(&sb, Ino(7), &new(S_IFREG), 1);
    let far = Timestamp {
        sec: 1 << 33,
        nsec: 5,
    };
    set_mtime(&mut d, far);
    assert_eq!(mtime(&d), far);
}

#[test]
fn free_dinode_is_what_icreate_replay_builds() {
    let sb = sb(true, false);
    let mut d = vec![0xaau8; sb.inodesize as usize];
    init_free_dinode(&mut d, &sb, Ino(555), 9);
    let c = decode(&d, Ino(555), &sb);
    assert_eq!(c.mode, 0);
    assert_eq!((c.gen, c.next_unlinked, c.ino), (9, NULLAGINO, 555));
    assert_eq!(c.flags2, 0);
}

#[test]
fn inherit_from_parent() {
    use crate::format::inode::*;
    let mut sb = sb(true, false);
    sb.features_ro_compat |= crate::format::sb::RO_COMPAT_REFLINK;
    sb.rblocks = 0;
    let mut parent = init_dinode(&sb, Ino(100), &new(S_IFDIR | 0o755), 1);
    set_flags(
        &mut parent,
        DIFLAG_PROJINHERIT
            | DIFLAG_EXTSZINHERIT
            | DIFLAG_RTINHERIT
            | DIFLAG_NOATIME
            | DIFLAG_NOSYMLINKS
            | DIFLAG_SYNC
            | DIFLAG_IMMUTABLE,
    );
    set_projid(&mut parent, 0x0001_0002);
    set_extsize(&mut parent, 16);
    let f2 = flags2(&parent) | DIFLAG2_COWEXTSIZE;
    set_flags2(&mut parent, f2);
    set_cowextsize(&mut parent, 32);

    let mut file = init_dinode(&sb, Ino(101), &new(S_IFREG | 0o644), 1);
    inherit(&mut file, &parent, &sb);
    // No realtime device: RTINHERIT gives nothing to a file.
    assert_eq!(flags(&file), DIFLAG_EXTSIZE | DIFLAG_NOATIME | DIFLAG_SYNC);
    assert_eq!((extsize(&file), projid(&file)), (16, 0x0001_0002));
    assert_eq!(flags2(&file), DIFLAG2_BIGTIME | DIFLAG2_COWEXTSIZE);
    assert_eq!(cowextsize(&file), 32);

    let mut dir = init_dinode(&sb, Ino(102), &new(S_IFDIR | 0o755), 1);
    inherit(&mut dir, &parent, &sb);
    assert_eq!(
        flags(&dir),
        DIFLAG_PROJINHERIT | DIFLAG_EXTSZINHERIT | DIFLAG_RTINHERIT | DIFLAG_NOATIME | DIFLAG_SYNC
    );
    assert_eq!(extsize(&dir), 16);

    // Devices and symlinks take only the project id.
    let mut dev = init_dinode(&sb, Ino(103), &new(S_IFCHR | 0o600), 1);
    inherit(&mut dev, &parent, &sb);
    assert_eq!(
        (flags(&dev), extsize(&dev), projid(&dev)),
        (0, 0, 0x0001_0002)
    );
    assert_eq!(rdev(&dev), (8 << 18) | 3);

    // Bad hints are not passed on; no reflink: no COW hint.
    set_extsize(&mut parent, sb.agblocks);
    sb.features_ro_compat &= !crate::format::sb::RO_COMPAT_REFLINK;
    let mut file = init_dinode(&sb, Ino(104), &new(S_IFREG | 0o644), 1);
    inherit(&mut file, &parent, &sb);
    assert_eq!(flags(&file), DIFLAG_NOATIME | DIFLAG_SYNC);
    assert_eq!((extsize(&file), cowextsize(&file)), (0, 0));
    assert_eq!(flags2(&file), DIFLAG2_BIGTIME);
    // The result verifies.
    decode(&file, Ino(104), &sb);

    // A parent without flags changes nothing.
    let plain = init_dinode(&sb, Ino(100), &new(S_IFDIR | 0o755), 1);
    let mut f = init_dinode(&sb, Ino(105), &new(S_IFREG | 0o644), 1);
    let orig = f.clone();
    inherit(&mut f, &plain, &sb);
    assert_eq!(f, orig);
}
