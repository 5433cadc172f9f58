//! Field accessors on raw v3 dinode bytes, and the initial dinode of a new
//! inode.
//!
//! The layout is the one [`super::inode`] decodes (see its byte diagram);
//! this module reads and writes single fields of a dinode held by a
//! transaction ([`crate::xact::MetaTx::inode_mut`]) without decoding the
//! whole core. Every accessor takes a slice of at least
//! [`DINODE_V3_CORE_SIZE`] bytes (a whole inode, `inodesize` bytes); the
//! callers get such slices from the transaction, which sized them from the
//! geometry, so a shorter slice is a bug in rxfs and panics (like slice
//! indexing), never a disk problem.
//!
//! Invariants kept here:
//! - di_crc (100..104) and di_lsn (112..120) are never written: the
//!   write-back path stamps them.
//! - Counters that change width with `NREXT64` (data/attr extent counts)
//!   and timestamps that change encoding with `BIGTIME` are read and written
//!   according to the inode's own di_flags2, so set flags2 first.
//! - v3 inodes keep the link count in di_nlink (offset 16, 32 bits); the
//!   old 16-bit di_onlink (offset 6) stays zero.

use super::inode::{
    Timestamp, DIFLAG2_BIGTIME, DIFLAG2_NREXT64, DINODE_MAGIC, DINODE_V3_CORE_SIZE, FMT_DEV,
    FMT_EXTENTS,
};
use super::sb::Superblock;
use super::{be16, be32, be64, put_be16, put_be32, put_be64, Uuid};
use crate::types::Ino;

/// `di_next_unlinked` of an inode on no unlinked list.
pub const NULLAGINO: u32 = 0xffff_ffff;

/// Offsets of the core fields (bytes from the start of the dinode).
pub mod off {
    pub const MAGIC: usize = 0;
    pub const MODE: usize = 2;
    pub const VERSION: usize = 4;
    pub const FORMAT: usize = 5;
    pub const ONLINK: usize = 6;
    pub const UID: usize = 8;
    pub const GID: usize = 12;
    pub const NLINK: usize = 16;
    pub const PROJID_LO: usize = 20;
    pub const PROJID_HI: usize = 22;
    pub const BIG_NEXTENTS: usize = 24;
    pub const ATIME: usize = 32;
    pub const MTIME: usize = 40;
    pub const CTIME: usize = 48;
    pub const SIZE: usize = 56;
    pub const NBLOCKS: usize = 64;
    pub const EXTSIZE: usize = 72;
    pub const NEXTENTS: usize = 76;
    pub const BIG_ANEXTENTS: usize = 76;
    pub const ANEXTENTS: usize = 80;
    pub const FORKOFF: usize = 82;
    pub const AFORMAT: usize = 83;
    pub const FLAGS: usize = 90;
    pub const GEN: usize = 92;
    pub const NEXT_UNLINKED: usize = 96;
    pub const CRC: usize = 100;
    pub const CHANGECOUNT: usize = 104;
    pub const LSN: usize = 112;
    pub const FLAGS2: usize = 120;
    pub const COWEXTSIZE: usize = 128;
    pub const CRTIME: usize = 144;
    pub const INO: usize = 152;
    pub const UUID: usize = 160;
}

/// What a new inode starts with (see [`init_dinode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NewInode {
    /// File type and permission bits (`S_IFMT | mode`); never 0.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Device number in the XFS on-disk encoding (major << 18 | minor) for
    /// character and block devices; ignored otherwise.
    pub rdev: u32,
    /// Initial link count (1 for files, 2 for directories, as the caller
    /// decides).
    pub nlink: u32,
    /// Creation time: atime = mtime = ctime = crtime.
    pub time: Timestamp,
}

macro_rules! field {
    ($get:ident, $set:ident, $ty:ty, $off:expr, $rd:ident, $wr:ident) => {
        pub fn $get(d: &[u8]) -> $ty {
            $rd(d, $off)
        }
        pub fn $set(d: &mut [u8], v: $ty) {
            $wr(d, $off, v)
        }
    };
}

field!(mode, set_mode, u16, off::MODE, be16, put_be16);
field!(uid, set_uid, u32, off::UID, be32, put_be32);
field!(gid, set_gid, u32, off::GID, be32, put_be32);
field!(nlink, set_nlink, u32, off::NLINK, be32, put_be32);
field!(size, set_size, u64, off::SIZE, be64, put_be64);
field!(nblocks, set_nblocks, u64, off::NBLOCKS, be64, put_be64);
field!(extsize, set_extsize, u32, off::EXTSIZE, be32, put_be32);
field!(flags, set_flags, u16, off::FLAGS, be16, put_be16);
field!(flags2, set_flags2, u64, off::FLAGS2, be64, put_be64);
field!(gen, set_gen, u32, off::GEN, be32, put_be32);
field!(
    next_unlinked,
    set_next_unlinked,
    u32,
    off::NEXT_UNLINKED,
    be32,
    put_be32
);
field!(
    changecount,
    set_changecount,
    u64,
    off::CHANGECOUNT,
    be64,
    put_be64
);
field!(
    cowextsize,
    set_cowextsize,
    u32,
    off::COWEXTSIZE,
    be32,
    put_be32
);
field!(ino, set_ino, u64, off::INO, be64, put_be64);

fn get_u8(d: &[u8], o: usize) -> u8 {
    d[o]
}
fn put_u8(d: &mut [u8], o: usize, v: u8) {
    d[o] = v
}
field!(version, set_version, u8, off::VERSION, get_u8, put_u8);
field!(format, set_format, u8, off::FORMAT, get_u8, put_u8);
field!(aformat, set_aformat, u8, off::AFORMAT, get_u8, put_u8);
field!(forkoff, set_forkoff, u8, off::FORKOFF, get_u8, put_u8);

pub fn magic(d: &[u8]) -> u16 {
    be16(d, off::MAGIC)
}

/// Project id (two 16-bit halves on disk).
pub fn projid(d: &[u8]) -> u32 {
    (be16(d, off::PROJID_HI) as u32) << 16 | be16(d, off::PROJID_LO) as u32
}
pub fn set_projid(d: &mut [u8], v: u32) {
    put_be16(d, off::PROJID_LO, v as u16);
    put_be16(d, off::PROJID_HI, (v >> 16) as u16);
}

pub fn uuid(d: &[u8]) -> Uuid {
    d[off::UUID..off::UUID + 16].try_into().unwrap()
}
pub fn set_uuid(d: &mut [u8], u: &Uuid) {
    d[off::UUID..off::UUID + 16].copy_from_slice(u);
}

/// True when di_flags2 has BIGTIME (timestamps are ns since 1901).
pub fn is_bigtime(d: &[u8]) -> bool {
    flags2(d) & DIFLAG2_BIGTIME != 0
}
/// True when di_flags2 has NREXT64 (big extent counters).
pub fn is_nrext64(d: &[u8]) -> bool {
    flags2(d) & DIFLAG2_NREXT64 != 0
}

/// Data fork extent count (u64 at 24 with NREXT64, else u32 at 76).
pub fn nextents(d: &[u8]) -> u64 {
    if is_nrext64(d) {
        be64(d, off::BIG_NEXTENTS)
    } else {
        be32(d, off::NEXTENTS) as u64
    }
}
/// Set the data fork extent count. Without NREXT64 the caller keeps it
/// below 2^32 (the kernel's limit is lower still); a larger value is
/// truncated, which `debug_assert!` catches in tests.
pub fn set_nextents(d: &mut [u8], v: u64) {
    if is_nrext64(d) {
        put_be64(d, off::BIG_NEXTENTS, v)
    } else {
        debug_assert!(v <= u32::MAX as u64);
        put_be32(d, off::NEXTENTS, v as u32)
    }
}

/// Attr fork extent count (u32 at 76 with NREXT64, else u16 at 80).
pub fn anextents(d: &[u8]) -> u32 {
    if is_nrext64(d) {
        be32(d, off::BIG_ANEXTENTS)
    } else {
        be16(d, off::ANEXTENTS) as u32
    }
}
pub fn set_anextents(d: &mut [u8], v: u32) {
    if is_nrext64(d) {
        put_be32(d, off::BIG_ANEXTENTS, v)
    } else {
        debug_assert!(v <= u16::MAX as u32);
        put_be16(d, off::ANEXTENTS, v as u16)
    }
}

fn time_at(d: &[u8], o: usize) -> Timestamp {
    Timestamp::decode(be64(d, o), is_bigtime(d))
}
fn set_time_at(d: &mut [u8], o: usize, t: Timestamp) {
    let b = is_bigtime(d);
    put_be64(d, o, clamp_time(t, b).encode(b))
}

/// Clamp a timestamp to what the on-disk encoding can hold (as the kernel
/// clamps to the superblock's time range).
pub fn clamp_time(t: Timestamp, bigtime: bool) -> Timestamp {
    let (min, max) = if bigtime {
        // 0 .. u64::MAX ns since the bigtime epoch, whole seconds.
        (
            -super::inode::BIGTIME_EPOCH_OFFSET,
            (u64::MAX / 1_000_000_000) as i64 - super::inode::BIGTIME_EPOCH_OFFSET,
        )
    } else {
        (i32::MIN as i64, i32::MAX as i64)
    };
    let nsec = t.nsec.min(999_999_999);
    if t.sec < min {
        Timestamp { sec: min, nsec: 0 }
    } else if t.sec > max {
        Timestamp { sec: max, nsec: 0 }
    } else {
        Timestamp { sec: t.sec, nsec }
    }
}

pub fn atime(d: &[u8]) -> Timestamp {
    time_at(d, off::ATIME)
}
pub fn set_atime(d: &mut [u8], t: Timestamp) {
    set_time_at(d, off::ATIME, t)
}
pub fn mtime(d: &[u8]) -> Timestamp {
    time_at(d, off::MTIME)
}
pub fn set_mtime(d: &mut [u8], t: Timestamp) {
    set_time_at(d, off::MTIME, t)
}
pub fn ctime(d: &[u8]) -> Timestamp {
    time_at(d, off::CTIME)
}
pub fn set_ctime(d: &mut [u8], t: Timestamp) {
    set_time_at(d, off::CTIME, t)
}
pub fn crtime(d: &[u8]) -> Timestamp {
    time_at(d, off::CRTIME)
}
pub fn set_crtime(d: &mut [u8], t: Timestamp) {
    set_time_at(d, off::CRTIME, t)
}

/// Bytes of the literal area given to the data fork.
pub fn data_fork_size(d: &[u8]) -> usize {
    let lit = d.len().saturating_sub(DINODE_V3_CORE_SIZE);
    match forkoff(d) as usize * 8 {
        0 => lit,
        n => n.min(lit),
    }
}

/// The data fork bytes (starting at 176, up to the attr fork).
pub fn data_fork(d: &[u8]) -> &[u8] {
    let n = data_fork_size(d);
    &d[DINODE_V3_CORE_SIZE..DINODE_V3_CORE_SIZE + n]
}
pub fn data_fork_mut(d: &mut [u8]) -> &mut [u8] {
    let n = data_fork_size(d);
    &mut d[DINODE_V3_CORE_SIZE..DINODE_V3_CORE_SIZE + n]
}

/// The attr fork bytes (empty when forkoff is 0).
pub fn attr_fork(d: &[u8]) -> &[u8] {
    match forkoff(d) as usize * 8 {
        0 => &[],
        n => &d[(DINODE_V3_CORE_SIZE + n).min(d.len())..],
    }
}
pub fn attr_fork_mut(d: &mut [u8]) -> &mut [u8] {
    let len = d.len();
    match forkoff(d) as usize * 8 {
        0 => &mut [],
        n => &mut d[(DINODE_V3_CORE_SIZE + n).min(len)..],
    }
}

/// Device number of a device inode (first 4 bytes of the data fork).
pub fn rdev(d: &[u8]) -> u32 {
    be32(d, DINODE_V3_CORE_SIZE)
}
pub fn set_rdev(d: &mut [u8], v: u32) {
    put_be32(d, DINODE_V3_CORE_SIZE, v)
}

/// Add `by` to di_changecount (the kernel bumps it on every logged change
/// of a v3 inode's metadata; we bump it once per transaction that changes
/// the inode).
pub fn bump_changecount(d: &mut [u8], by: u64) {
    let c = changecount(d).wrapping_add(by);
    set_changecount(d, c)
}

/// The di_flags2 a new inode gets from the superblock features.
pub fn new_flags2(sb: &Superblock) -> u64 {
    let mut f = 0;
    if sb.has_bigtime() {
        f |= DIFLAG2_BIGTIME;
    }
    if sb.has_nrext64() {
        f |= DIFLAG2_NREXT64;
    }
    f
}

/// The "free inode" dinode the kernel's chunk initialisation writes (and an
/// ICREATE replay rebuilds): magic, version 3, generation, next_unlinked
/// NULL, inode number and UUID, everything else zero (mode 0 = free).
pub fn init_free_dinode(d: &mut [u8], sb: &Superblock, ino: Ino, gen: u32) {
    d.fill(0);
    put_be16(d, off::MAGIC, DINODE_MAGIC);
    set_version(d, 3);
    set_gen(d, gen);
    set_next_unlinked(d, NULLAGINO);
    set_ino(d, ino.0);
    set_uuid(d, &sb.metadata_uuid());
}

/// The file types' `S_IFMT` values.
pub const S_IFMT: u32 = 0o170000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFCHR: u32 = 0o020000;
pub const S_IFBLK: u32 = 0o060000;
pub const S_IFIFO: u32 = 0o010000;
pub const S_IFSOCK: u32 = 0o140000;
pub const S_ISUID: u32 = 0o4000;
pub const S_ISGID: u32 = 0o2000;
pub const S_IXGRP: u32 = 0o0010;

/// Build the complete initial dinode (`geo.inodesize` bytes) of a new
/// inode, as the kernel's inode initialisation and its copy to disk make it:
/// - magic `IN`, version 3, mode, uid, gid, nlink (di_onlink 0), projid 0;
/// - atime = mtime = ctime = crtime = `init.time` (clamped to the format);
/// - size 0, nblocks 0, extsize 0, no extents, no attr fork (forkoff 0,
///   aformat EXTENTS as the kernel leaves it);
/// - data fork: DEV with the device number for char/block devices, and
///   DEV (empty) for fifos and sockets; EXTENTS (no extents) for regular
///   files, directories and symlinks, as the kernel starts them: the
///   directory code then turns a new directory into an empty shortform
///   one (format LOCAL, size set: `dir::dir_init`), the symlink code
///   stores its target locally or in blocks;
/// - flags 0, flags2 BIGTIME / NREXT64 as the superblock has them;
/// - gen, next_unlinked NULLAGINO, changecount 1, di_ino, di_uuid = the
///   metadata UUID. di_crc and di_lsn stay zero (stamped at write-back).
pub fn init_dinode(sb: &Superblock, ino: Ino, init: &NewInode, gen: u32) -> Vec<u8> {
    let mut d = vec![0u8; sb.inodesize as usize];
    init_free_dinode(&mut d, sb, ino, gen);
    set_mode(&mut d, init.mode as u16);
    set_uid(&mut d, init.uid);
    set_gid(&mut d, init.gid);
    set_nlink(&mut d, init.nlink);
    set_flags2(&mut d, new_flags2(sb));
    for t in [off::ATIME, off::MTIME, off::CTIME, off::CRTIME] {
        set_time_at(&mut d, t, init.time);
    }
    set_aformat(&mut d, FMT_EXTENTS);
    let fmt = match init.mode & S_IFMT {
        S_IFCHR | S_IFBLK => {
            set_rdev(&mut d, init.rdev);
            FMT_DEV
        }
        S_IFIFO | S_IFSOCK => FMT_DEV,
        _ => FMT_EXTENTS,
    };
    set_format(&mut d, fmt);
    set_changecount(&mut d, 1);
    d
}

/// Largest extent length (and extent size hint) in blocks: 2^21 - 1.
pub const MAX_EXTLEN: u32 = (1 << 21) - 1;

/// Whether an extent size hint is one the kernel's inode verifier accepts
/// for an inode with these flags: non-zero, at most [`MAX_EXTLEN`], and a
/// multiple of the realtime extent size on realtime files, else at most
/// half an AG (directories passing RTINHERIT on are checked like other
/// directories, as the kernel does).
fn extsize_ok(sb: &Superblock, extsize: u32, rt: bool) -> bool {
    extsize > 0
        && extsize <= MAX_EXTLEN
        && if rt {
            sb.rextsize > 0 && extsize.is_multiple_of(sb.rextsize)
        } else {
            extsize <= sb.agblocks / 2
        }
}

/// Give the new inode `child` (just built by [`init_dinode`]) what it takes
/// from its parent directory's dinode `parent`, as the kernel's inode
/// initialisation does:
/// - project id, when the parent has PROJINHERIT (any file type);
/// - regular files and directories only: from di_flags, RTINHERIT (a
///   directory keeps passing it on; a file becomes REALTIME if the
///   filesystem has a realtime device), EXTSZINHERIT with the parent's
///   extent size hint (EXTSIZE on a file), PROJINHERIT (directories), and
///   NOATIME, NODUMP, SYNC, NODEFRAG, FILESTREAM (the kernel's default
///   `fs.xfs.inherit_*` settings: NOSYMLINKS is not inherited); from
///   di_flags2, COWEXTSIZE with the parent's hint, and DAX.
///
/// Hints the verifier would refuse are dropped rather than propagated.
pub fn inherit(child: &mut [u8], parent: &[u8], sb: &Superblock) {
    use super::inode::{
        DIFLAG2_COWEXTSIZE, DIFLAG2_DAX, DIFLAG_EXTSIZE, DIFLAG_EXTSZINHERIT, DIFLAG_FILESTREAM,
        DIFLAG_NOATIME, DIFLAG_NODEFRAG, DIFLAG_NODUMP, DIFLAG_PROJINHERIT, DIFLAG_REALTIME,
        DIFLAG_RTINHERIT, DIFLAG_SYNC,
    };
    let pf = flags(parent);
    if pf & DIFLAG_PROJINHERIT != 0 {
        set_projid(child, projid(parent));
    }
    let kind = mode(child) as u32 & S_IFMT;
    if kind != S_IFREG && kind != S_IFDIR {
        return;
    }
    let dir = kind == S_IFDIR;
    let mut f = 0u16;
    let mut ext = 0u32;
    if pf & DIFLAG_RTINHERIT != 0 {
        if dir {
            f |= DIFLAG_RTINHERIT;
        } else if sb.rblocks > 0 {
            f |= DIFLAG_REALTIME;
        }
    }
    if pf & DIFLAG_EXTSZINHERIT != 0 {
        f |= if dir {
            DIFLAG_EXTSZINHERIT
        } else {
            DIFLAG_EXTSIZE
        };
        ext = extsize(parent);
    }
    if dir && pf & DIFLAG_PROJINHERIT != 0 {
        f |= DIFLAG_PROJINHERIT;
    }
    f |= pf & (DIFLAG_NOATIME | DIFLAG_NODUMP | DIFLAG_SYNC | DIFLAG_NODEFRAG | DIFLAG_FILESTREAM);
    if f & (DIFLAG_EXTSIZE | DIFLAG_EXTSZINHERIT) != 0 {
        let rt = f & DIFLAG_REALTIME != 0;
        if !extsize_ok(sb, ext, rt) {
            f &= !(DIFLAG_EXTSIZE | DIFLAG_EXTSZINHERIT);
            ext = 0;
        }
    }
    set_flags(child, flags(child) | f);
    set_extsize(child, ext);

    let pf2 = flags2(parent);
    let mut f2 = pf2 & DIFLAG2_DAX;
    let mut cow = 0;
    if pf2 & DIFLAG2_COWEXTSIZE != 0 {
        cow = cowextsize(parent);
        if sb.has_reflink() && cow > 0 && cow <= MAX_EXTLEN && cow <= sb.agblocks / 2 {
            f2 |= DIFLAG2_COWEXTSIZE;
        } else {
            cow = 0;
        }
    }
    set_flags2(child, flags2(child) | f2);
    set_cowextsize(child, cow);
}

#[cfg(test)]
#[path = "dinode_edit_tests.rs"]
mod tests;
