//! Inode core v3 (`IN`) and fork layout.
//!
//! ```text
//!   0 magic "IN"  2 mode  4 version(3)  5 format  6 metatype/onlink  8 uid
//!  12 gid  16 nlink  20 projid_lo  22 projid_hi  24 big_nextents (nrext64)
//!  32 atime  40 mtime  48 ctime  56 size  64 nblocks  72 extsize
//!  76 nextents (u32) | big_anextents (nrext64)  80 anextents (u16)
//!  82 forkoff (x8 bytes)  83 aformat  84 dmevmask  88 dmstate  90 flags
//!  92 gen  96 next_unlinked  100 crc (LE)  104 changecount  112 lsn
//! 120 flags2  128 cowextsize  132 pad[12]  144 crtime  152 ino  160 uuid
//! 176 data fork ... attr fork at 176 + forkoff * 8
//! ```
//! Timestamps are `{sec: i32, nsec: u32}` or, with the BIGTIME flag in
//! flags2, a u64 count of nanoseconds since 1901-12-13T20:45:52Z.

use super::{be16, be32, be64, crc, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::Ino;

pub const DINODE_MAGIC: u16 = 0x494e; // "IN"
pub const DINODE_V3_CORE_SIZE: usize = 176;
pub const DINODE_CRC_OFF: usize = 100;
/// `di_lsn`: the LSN of the last write back (v3).
pub const DINODE_LSN_OFF: usize = 112;

pub const FMT_DEV: u8 = 0;
pub const FMT_LOCAL: u8 = 1;
pub const FMT_EXTENTS: u8 = 2;
pub const FMT_BTREE: u8 = 3;
pub const FMT_UUID: u8 = 4;

pub const DIFLAG_REALTIME: u16 = 0x0001;
pub const DIFLAG_PREALLOC: u16 = 0x0002;
pub const DIFLAG_NEWRTBM: u16 = 0x0004;
pub const DIFLAG_IMMUTABLE: u16 = 0x0008;
pub const DIFLAG_APPEND: u16 = 0x0010;
pub const DIFLAG_SYNC: u16 = 0x0020;
pub const DIFLAG_NOATIME: u16 = 0x0040;
pub const DIFLAG_NODUMP: u16 = 0x0080;
pub const DIFLAG_RTINHERIT: u16 = 0x0100;
pub const DIFLAG_PROJINHERIT: u16 = 0x0200;
pub const DIFLAG_NOSYMLINKS: u16 = 0x0400;
pub const DIFLAG_EXTSIZE: u16 = 0x0800;
pub const DIFLAG_EXTSZINHERIT: u16 = 0x1000;
pub const DIFLAG_NODEFRAG: u16 = 0x2000;
pub const DIFLAG_FILESTREAM: u16 = 0x4000;

pub const DIFLAG2_DAX: u64 = 1 << 0;
pub const DIFLAG2_REFLINK: u64 = 1 << 1;
pub const DIFLAG2_COWEXTSIZE: u64 = 1 << 2;
pub const DIFLAG2_BIGTIME: u64 = 1 << 3;
pub const DIFLAG2_NREXT64: u64 = 1 << 4;

/// Seconds from 1901-12-13T20:45:52Z (the bigtime epoch) to the Unix epoch.
pub const BIGTIME_EPOCH_OFFSET: i64 = 1 << 31;

/// A decoded timestamp (Unix seconds and nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timestamp {
    pub sec: i64,
    pub nsec: u32,
}

impl Timestamp {
    /// Decode an on-disk timestamp word.
    pub fn decode(raw: u64, bigtime: bool) -> Self {
        if bigtime {
            let sec = (raw / 1_000_000_000) as i64 - BIGTIME_EPOCH_OFFSET;
            Timestamp {
                sec,
                nsec: (raw % 1_000_000_000) as u32,
            }
        } else {
            Timestamp {
                sec: (raw >> 32) as u32 as i32 as i64,
                nsec: raw as u32,
            }
        }
    }

    pub fn encode(self, bigtime: bool) -> u64 {
        if bigtime {
            ((self.sec + BIGTIME_EPOCH_OFFSET) as u64) * 1_000_000_000 + self.nsec as u64
        } else {
            ((self.sec as i32 as u32 as u64) << 32) | self.nsec as u64
        }
    }

    /// Total nanoseconds since the Unix epoch.
    pub fn as_nanos(self) -> i128 {
        self.sec as i128 * 1_000_000_000 + self.nsec as i128
    }
}

/// The decoded inode core.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InodeCore {
    pub mode: u16,
    pub version: u8,
    pub format: u8,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub projid: u32,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub crtime: Timestamp,
    pub size: u64,
    pub nblocks: u64,
    pub extsize: u32,
    /// Data fork extent count (u32 or, with nrext64, u64 at offset 24).
    pub nextents: u64,
    /// Attr fork extent count (u16 or, with nrext64, u32 at offset 76).
    pub anextents: u32,
    /// Attr fork offset in 8-byte units from the start of the literal area.
    pub forkoff: u8,
    pub aformat: u8,
    pub flags: u16,
    pub flags2: u64,
    pub gen: u32,
    pub next_unlinked: u32,
    pub changecount: u64,
    pub lsn: u64,
    pub cowextsize: u32,
    pub ino: u64,
    pub uuid: Uuid,
}

impl InodeCore {
    pub fn bigtime(&self) -> bool {
        self.flags2 & DIFLAG2_BIGTIME != 0
    }
    pub fn nrext64(&self) -> bool {
        self.flags2 & DIFLAG2_NREXT64 != 0
    }

    /// Bytes available to the data fork.
    pub fn data_fork_size(&self, inodesize: usize) -> usize {
        if self.forkoff != 0 {
            self.forkoff as usize * 8
        } else {
            inodesize - DINODE_V3_CORE_SIZE
        }
    }

    /// Bytes available to the attr fork (0 when there is none).
    pub fn attr_fork_size(&self, inodesize: usize) -> usize {
        if self.forkoff != 0 {
            inodesize - DINODE_V3_CORE_SIZE - self.forkoff as usize * 8
        } else {
            0
        }
    }

    /// Byte offset of the attr fork inside the inode.
    pub fn attr_fork_offset(&self) -> usize {
        DINODE_V3_CORE_SIZE + self.forkoff as usize * 8
    }
}

/// Decode and verify one on-disk inode (`buf` is exactly `inodesize` bytes).
///
/// Checks magic, version 3, CRC, the self-describing inode number and UUID,
/// the fork formats against the file type and the fork offset bounds.
/// A free inode (mode 0) verifies but callers treat it as not found.
pub fn decode_core(buf: &[u8], ino: Ino, meta_uuid: &Uuid, has_nrext64: bool) -> Result<InodeCore> {
    let at = Location::Ino(ino.0);
    let bad = |d: String| Error::corrupt("inode", at, d);
    if buf.len() < 512 {
        return Err(bad(format!("inode buffer of {} bytes", buf.len())));
    }
    let magic = be16(buf, 0);
    if magic != DINODE_MAGIC {
        return Err(bad(format!("bad magic {magic:#x}")));
    }
    let version = buf[4];
    if version != 3 {
        return Err(bad(format!("inode version {version} on a v5 filesystem")));
    }
    if !crc::verify(buf, DINODE_CRC_OFF) {
        return Err(bad("CRC mismatch".into()));
    }
    let flags2 = be64(buf, 120);
    let bigtime = flags2 & DIFLAG2_BIGTIME != 0;
    let nrext64 = flags2 & DIFLAG2_NREXT64 != 0;
    if nrext64 && !has_nrext64 {
        return Err(bad("nrext64 inode on a filesystem without nrext64".into()));
    }
    let core = InodeCore {
        mode: be16(buf, 2),
        version,
        format: buf[5],
        uid: be32(buf, 8),
        gid: be32(buf, 12),
        nlink: be32(buf, 16),
        projid: (be16(buf, 22) as u32) << 16 | be16(buf, 20) as u32,
        atime: Timestamp::decode(be64(buf, 32), bigtime),
        mtime: Timestamp::decode(be64(buf, 40), bigtime),
        ctime: Timestamp::decode(be64(buf, 48), bigtime),
        crtime: Timestamp::decode(be64(buf, 144), bigtime),
        size: be64(buf, 56),
        nblocks: be64(buf, 64),
        extsize: be32(buf, 72),
        nextents: if nrext64 {
            be64(buf, 24)
        } else {
            be32(buf, 76) as u64
        },
        anextents: if nrext64 {
            be32(buf, 76)
        } else {
            be16(buf, 80) as u32
        },
        forkoff: buf[82],
        aformat: buf[83],
        flags: be16(buf, 90),
        flags2,
        gen: be32(buf, 92),
        next_unlinked: be32(buf, 96),
        changecount: be64(buf, 104),
        lsn: be64(buf, DINODE_LSN_OFF),
        cowextsize: be32(buf, 128),
        ino: be64(buf, 152),
        uuid: buf[160..176].try_into().unwrap(),
    };
    if core.ino != ino.0 {
        return Err(bad(format!("self-described inode number {}", core.ino)));
    }
    if &core.uuid != meta_uuid {
        return Err(bad("UUID does not match the filesystem".into()));
    }
    if core.mode == 0 {
        return Ok(core);
    }
    if (core.size as i64) < 0 {
        return Err(bad(format!("negative size {:#x}", core.size)));
    }
    let isize = buf.len();
    let lit = isize - DINODE_V3_CORE_SIZE;
    if core.forkoff as usize * 8 >= lit {
        return Err(bad(format!(
            "attr fork offset {} past the literal area",
            core.forkoff
        )));
    }
    let ft = crate::types::FileType::from_mode(core.mode)
        .ok_or_else(|| bad(format!("bad file type in mode {:#o}", core.mode)))?;
    use crate::types::FileType as T;
    let ok = matches!(
        (ft, core.format),
        (T::CharDev | T::BlockDev | T::Fifo | T::Socket, FMT_DEV)
            | (T::Regular, FMT_EXTENTS | FMT_BTREE)
            | (
                T::Directory | T::Symlink,
                FMT_LOCAL | FMT_EXTENTS | FMT_BTREE
            )
    );

    if !ok {
        return Err(bad(format!(
            "data fork format {} invalid for {ft:?}",
            core.format
        )));
    }
    if core.forkoff == 0 {
        if core.anextents != 0 {
            return Err(bad("attr extents without an attr fork".into()));
        }
    } else if !matches!(core.aformat, FMT_LOCAL | FMT_EXTENTS | FMT_BTREE) {
        return Err(bad(format!("attr fork format {}", core.aformat)));
    }
    Ok(core)
}

/// Linux dev_t (major, minor) from the XFS on-disk device number.
pub fn decode_rdev(raw: u32) -> (u32, u32) {
    ((raw >> 18) & 0x1ff, raw & 0x3ffff)
}
