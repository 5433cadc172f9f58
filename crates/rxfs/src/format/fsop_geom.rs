//! The answers of `XFS_IOC_FSGEOMETRY` (and its `_V1`/`_V4` forms) and
//! `XFS_IOC_FSCOUNTS`: the structures `xfs_info`, `xfs_io`,
//! `xfs_spaceman` and fstests read from a mounted XFS, in the kernel's
//! layout (native endian, as every ioctl structure).
//!
//! `struct xfs_fsop_geom` is 256 bytes: eight u32 (block size, realtime
//! extent size, AG blocks, AG count, log blocks, sector size, inode size,
//! max inode %), four u64 (data blocks, realtime blocks, realtime
//! extents, log start), the 16-byte UUID, then u32s: stripe unit and
//! width, structure version, feature flags, log sector size, realtime
//! sector size, directory block size, log stripe unit, sick, checked; the
//! rest is reserved (zero). The `_V1` form ends after the directory block
//! size (108 bytes, 112 with padding), `_V4` after the log stripe unit
//! (112). A v1 answer carries version 0 and no `LOGV2` flag, a v4 answer
//! version 0 with `LOGV2`, a v5 answer version 5: what the kernel sends.
//!
//! The feature flags follow from the superblock as the kernel derives
//! them: `NLINK`, `DIRV2` and `EXTFLG` always (the kernel no longer
//! mounts filesystems without them), the others from their version,
//! features2, ro-compat and incompat bits. `sick`/`checked` report online
//! scrub results; rxfs has no online scrub, so both are 0, as the kernel
//! reports before any scrub.

use super::sb::{
    Superblock, FEAT2_ATTR2, FEAT2_FTYPE, FEAT2_LAZYSBCOUNT, FEAT2_PROJID32, INCOMPAT_BIGTIME,
    INCOMPAT_EXCHRANGE, INCOMPAT_FTYPE, INCOMPAT_METADIR, INCOMPAT_NREXT64, INCOMPAT_PARENT,
    INCOMPAT_SPINODES, INCOMPAT_ZONED, RO_COMPAT_FINOBT, RO_COMPAT_INOBTCNT, RO_COMPAT_REFLINK,
    RO_COMPAT_RMAPBT, VERSION_5,
};

/// `sb_versionnum` feature bits (above the version number).
pub const VERSION_ATTRBIT: u16 = 0x0010;
pub const VERSION_QUOTABIT: u16 = 0x0040;
pub const VERSION_ALIGNBIT: u16 = 0x0080;
pub const VERSION_DALIGNBIT: u16 = 0x0100;
pub const VERSION_LOGV2BIT: u16 = 0x0400;
pub const VERSION_SECTORBIT: u16 = 0x0800;
pub const VERSION_BORGBIT: u16 = 0x4000;

/// `XFS_FSOP_GEOM_FLAGS_*`.
pub const GEOM_ATTR: u32 = 1 << 0;
pub const GEOM_NLINK: u32 = 1 << 1;
pub const GEOM_QUOTA: u32 = 1 << 2;
pub const GEOM_IALIGN: u32 = 1 << 3;
pub const GEOM_DALIGN: u32 = 1 << 4;
pub const GEOM_EXTFLG: u32 = 1 << 6;
pub const GEOM_DIRV2: u32 = 1 << 7;
pub const GEOM_LOGV2: u32 = 1 << 8;
pub const GEOM_SECTOR: u32 = 1 << 9;
pub const GEOM_ATTR2: u32 = 1 << 10;
pub const GEOM_PROJID32: u32 = 1 << 11;
pub const GEOM_DIRV2CI: u32 = 1 << 12;
pub const GEOM_LAZYSB: u32 = 1 << 14;
pub const GEOM_V5SB: u32 = 1 << 15;
pub const GEOM_FTYPE: u32 = 1 << 16;
pub const GEOM_FINOBT: u32 = 1 << 17;
pub const GEOM_SPINODES: u32 = 1 << 18;
pub const GEOM_RMAPBT: u32 = 1 << 19;
pub const GEOM_REFLINK: u32 = 1 << 20;
pub const GEOM_BIGTIME: u32 = 1 << 21;
pub const GEOM_INOBTCNT: u32 = 1 << 22;
pub const GEOM_NREXT64: u32 = 1 << 23;
pub const GEOM_EXCHANGE_RANGE: u32 = 1 << 24;
pub const GEOM_PARENT: u32 = 1 << 25;
pub const GEOM_METADIR: u32 = 1 << 26;
pub const GEOM_ZONED: u32 = 1 << 27;

/// Sizes of the three structure versions.
pub const GEOM_V1_SIZE: usize = 112;
pub const GEOM_V4_SIZE: usize = 112;
pub const GEOM_V5_SIZE: usize = 256;
/// `struct xfs_fsop_counts`: four u64.
pub const COUNTS_SIZE: usize = 32;

/// Which structure the caller asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeomVersion {
    V1,
    V4,
    V5,
}

/// The feature flags of a filesystem with this superblock, for a
/// structure of version `v` (`LOGV2` exists from v4 on).
pub fn geom_flags(sb: &Superblock, v: GeomVersion) -> u32 {
    let vn = sb.versionnum;
    let f2 = sb.features2;
    let pairs: [(bool, u32); 24] = [
        (vn & VERSION_ATTRBIT != 0, GEOM_ATTR),
        (vn & VERSION_QUOTABIT != 0, GEOM_QUOTA),
        (vn & VERSION_ALIGNBIT != 0, GEOM_IALIGN),
        (vn & VERSION_DALIGNBIT != 0, GEOM_DALIGN),
        (vn & VERSION_BORGBIT != 0, GEOM_DIRV2CI),
        (f2 & FEAT2_LAZYSBCOUNT != 0, GEOM_LAZYSB),
        (f2 & FEAT2_ATTR2 != 0, GEOM_ATTR2),
        (f2 & FEAT2_PROJID32 != 0, GEOM_PROJID32),
        (sb.version() == VERSION_5, GEOM_V5SB),
        (
            f2 & FEAT2_FTYPE != 0 || sb.has_incompat(INCOMPAT_FTYPE),
            GEOM_FTYPE,
        ),
        (sb.has_ro_compat(RO_COMPAT_FINOBT), GEOM_FINOBT),
        (sb.has_incompat(INCOMPAT_SPINODES), GEOM_SPINODES),
        (sb.has_ro_compat(RO_COMPAT_RMAPBT), GEOM_RMAPBT),
        (sb.has_ro_compat(RO_COMPAT_REFLINK), GEOM_REFLINK),
        (sb.has_incompat(INCOMPAT_BIGTIME), GEOM_BIGTIME),
        (sb.has_ro_compat(RO_COMPAT_INOBTCNT), GEOM_INOBTCNT),
        (sb.has_incompat(INCOMPAT_PARENT), GEOM_PARENT),
        (vn & VERSION_SECTORBIT != 0, GEOM_SECTOR),
        (sb.has_incompat(INCOMPAT_NREXT64), GEOM_NREXT64),
        (sb.has_incompat(INCOMPAT_EXCHRANGE), GEOM_EXCHANGE_RANGE),
        (sb.has_incompat(INCOMPAT_METADIR), GEOM_METADIR),
        (sb.has_incompat(INCOMPAT_ZONED), GEOM_ZONED),
        (
            v != GeomVersion::V1 && vn & VERSION_LOGV2BIT != 0,
            GEOM_LOGV2,
        ),
        (true, GEOM_NLINK | GEOM_DIRV2 | GEOM_EXTFLG),
    ];
    pairs
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |acc, (_, bit)| acc | bit)
}

/// The geometry structure of version `v`, `v`'s size in bytes.
pub fn encode_geometry(sb: &Superblock, v: GeomVersion) -> Vec<u8> {
    let mut b = Vec::with_capacity(GEOM_V5_SIZE);
    let u32s = |b: &mut Vec<u8>, vals: &[u32]| {
        for x in vals {
            b.extend_from_slice(&x.to_ne_bytes());
        }
    };
    u32s(
        &mut b,
        &[
            sb.blocksize,
            sb.rextsize,
            sb.agblocks,
            sb.agcount,
            sb.logblocks,
            sb.sectsize as u32,
            sb.inodesize as u32,
            sb.imax_pct as u32,
        ],
    );
    for x in [sb.dblocks, sb.rblocks, sb.rextents, sb.logstart] {
        b.extend_from_slice(&x.to_ne_bytes());
    }
    b.extend_from_slice(&sb.uuid);
    let sector = sb.versionnum & VERSION_SECTORBIT != 0;
    u32s(
        &mut b,
        &[
            sb.unit,
            sb.width,
            if v == GeomVersion::V5 { 5 } else { 0 },
            geom_flags(sb, v),
            if sector { sb.logsectsize as u32 } else { 512 },
            // The kernel reports the data block size here.
            sb.blocksize,
            sb.blocksize << sb.dirblklog,
        ],
    );
    if v != GeomVersion::V1 {
        u32s(&mut b, &[sb.logsunit]);
    }
    let size = match v {
        GeomVersion::V1 => GEOM_V1_SIZE,
        GeomVersion::V4 => GEOM_V4_SIZE,
        GeomVersion::V5 => GEOM_V5_SIZE,
    };
    // sick, checked and the reserved words: zero.
    b.resize(size, 0);
    b
}

/// `struct xfs_fsop_counts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsCounts {
    /// Free data blocks a caller can get (as statfs's `f_bfree`).
    pub freedata: u64,
    /// Free realtime extents.
    pub freertx: u64,
    pub freeino: u64,
    pub allocino: u64,
}

impl FsCounts {
    pub fn encode(&self) -> [u8; COUNTS_SIZE] {
        let mut b = [0u8; COUNTS_SIZE];
        for (i, v) in [self.freedata, self.freertx, self.freeino, self.allocino]
            .iter()
            .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: &[u8] = include_bytes!("testdata/ag2_hdr.bin");

    /// A superblock with `mkfs.xfs`'s defaults of this machine.
    fn sb() -> Superblock {
        let mut sb = Superblock::decode_unverified(&HDR[..512]).unwrap();
        sb.blocksize = 4096;
        sb.dirblklog = 0;
        sb.dblocks = 262_144;
        sb.versionnum = 0xb4a5;
        sb.features2 = 0x18a;
        sb.features_ro_compat = 0xd;
        sb.features_incompat = 0xb;
        sb.logsunit = 1;
        sb.uuid = *b"0123456789abcdef";
        sb
    }

    /// What this machine's kernel (6.18) answered for `mkfs.xfs` defaults
    /// on a 1 GiB image: flags 0x77cdca for v5, 0x77ccca for v1.
    #[test]
    fn flags_of_mkfs_defaults() {
        assert_eq!(geom_flags(&sb(), GeomVersion::V5), 0x0077_cdca);
        assert_eq!(geom_flags(&sb(), GeomVersion::V1), 0x0077_ccca);
    }

    #[test]
    fn layout() {
        let s = sb();
        let v5 = encode_geometry(&s, GeomVersion::V5);
        assert_eq!(v5.len(), 256);
        let u32_at = |b: &[u8], o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(u32_at(&v5, 0), 4096);
        assert_eq!(u64::from_ne_bytes(v5[32..40].try_into().unwrap()), 262_144);
        assert_eq!(&v5[64..80], b"0123456789abcdef");
        assert_eq!(u32_at(&v5, 88), 5);
        assert_eq!(u32_at(&v5, 108), 1, "logsunit");
        assert!(v5[112..].iter().all(|&c| c == 0));
        let v1 = encode_geometry(&s, GeomVersion::V1);
        assert_eq!(v1.len(), 112);
        assert_eq!(u32_at(&v1, 88), 0);
        assert_eq!(u32_at(&v1, 104), 4096, "dirblocksize");
        assert!(v1[108..].iter().all(|&c| c == 0));
        let c = FsCounts {
            freedata: 1,
            freertx: 2,
            freeino: 3,
            allocino: 4,
        }
        .encode();
        assert_eq!(u64::from_ne_bytes(c[24..32].try_into().unwrap()), 4);
    }
}
