//! ioctls through FUSE.
//!
//! The kernel sends a FUSE_IOCTL for the commands its VFS does not handle
//! itself, "restricted": it copies in and out only what the command's
//! number declares (`_IOC_DIR`, `_IOC_SIZE`), and the daemon cannot ask
//! for more.
//!
//! - `XFS_IOC_GOINGDOWN` (= `FS_IOC_SHUTDOWN`, what `xfs_io -x -c
//!   shutdown`, fstests' `godown` and ext4's tools send): CAP_SYS_ADMIN
//!   required (EPERM), as XFS does. Its number declares the flags word as
//!   output (`_IOR`), although XFS reads it, so FUSE never passes the
//!   flags to a daemon: rxfs always does what `LOGFLUSH` asks (data and
//!   log stable, then the filesystem stops). That is the strongest of the
//!   three for the log and a valid result of each: `NOLOGFLUSH` leaves
//!   the log as a crash at that instant would, and a log write may have
//!   ended just before it; `DEFAULT` also writes metadata back in place,
//!   which recovery does from the same log. Answered with no output bytes,
//!   so the caller's flags word is left alone. After it every request
//!   fails with EIO and the unmount writes nothing.
//! - The inode flags (`lsattr`/`chattr`, `xfs_io lsattr/chattr/extsize`):
//!   the kernel's VFS turns `FS_IOC_GETFLAGS`/`SETFLAGS` and
//!   `FS_IOC_FSGETXATTR`/`FSSETXATTR` into a FUSE ioctl of the same
//!   command after its own checks (owner, CAP_LINUX_IMMUTABLE for `i` and
//!   `a`, hint only on a regular file), with a 4-byte flags word or a
//!   28-byte `struct fsxattr`; `rxfs::fs::ops_flags` does the rest.
//!   SETFLAGS changes the seven flags both interfaces share and keeps the
//!   others, the hints and the project id.
//! - The label (`xfs_io -c label`): `FS_IOC_GETFSLABEL` answers the
//!   12-byte label and a NUL (13 bytes, as XFS copies out);
//!   `FS_IOC_SETFSLABEL` needs CAP_SYS_ADMIN (EPERM) and at most 12 bytes
//!   (EINVAL), and is durable when answered.
//! - The geometry and counters (`XFS_IOC_FSGEOMETRY` and its `_V1`/`_V4`
//!   forms, `XFS_IOC_FSCOUNTS`), on any file or directory, for anyone, as
//!   XFS answers them: `rxfs::format::fsop_geom` has the layouts. (The
//!   xfsprogs tools still refuse an rxfs mount before they ask: they check
//!   statfs's `f_type`, which the kernel sets to FUSE's for every FUSE
//!   mount.)
//! - Anything else: ENOTTY, as a filesystem without that ioctl answers.

use super::wire::ReplyIoctl;
use rxfs::format::fsop_geom::GeomVersion;
use rxfs::format::xflags::{fl_from_xflags, xflags_from_fl, COMMON_FL, XFLAG_COMMON};
use rxfs::fs::ops_flags::FsXattr;
use rxfs::fs::ops_flags::LABEL_MAX;
use rxfs::fs::rw::ShutdownFlush;

use super::cred::Asker;
use super::ops::Core;
use super::reply::Fail;

/// `_IOR('X', 125, __u32)`.
pub const XFS_IOC_GOINGDOWN: u32 = 0x8004_587d;
/// `_IOR('f', 1, long)` / `_IOW('f', 2, long)`, and their 32-bit forms.
pub const FS_IOC_GETFLAGS: u32 = 0x8008_6601;
pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
pub const FS_IOC32_GETFLAGS: u32 = 0x8004_6601;
pub const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
/// `_IOR('X', 31, struct fsxattr)` / `_IOW('X', 32, struct fsxattr)`.
pub const FS_IOC_FSGETXATTR: u32 = 0x801c_581f;
pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// `_IOR(0x94, 49, char[256])` / `_IOW(0x94, 50, char[256])`.
pub const FS_IOC_GETFSLABEL: u32 = 0x8100_9431;
pub const FS_IOC_SETFSLABEL: u32 = 0x4100_9432;

/// `_IOR('X', 126 / 124 / 100, struct xfs_fsop_geom[_v4|_v1])`.
pub const XFS_IOC_FSGEOMETRY: u32 = 0x8100_587e;
pub const XFS_IOC_FSGEOMETRY_V4: u32 = 0x8070_587c;
pub const XFS_IOC_FSGEOMETRY_V1: u32 = 0x8070_5864;
/// `_IOR('X', 113, struct xfs_fsop_counts)`.
pub const XFS_IOC_FSCOUNTS: u32 = 0x8020_5871;

/// `struct fsxattr`: five u32 and 8 bytes of padding.
const FSXATTR_SIZE: usize = 28;

fn encode_fsxattr(f: &FsXattr) -> [u8; FSXATTR_SIZE] {
    let mut b = [0u8; FSXATTR_SIZE];
    for (i, v) in [f.xflags, f.extsize, f.nextents, f.projid, f.cowextsize]
        .iter()
        .enumerate()
    {
        b[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
    }
    b
}

fn decode_fsxattr(b: &[u8]) -> Option<FsXattr> {
    let w = |i: usize| {
        Some(u32::from_ne_bytes(
            b.get(i * 4..i * 4 + 4)?.try_into().ok()?,
        ))
    };
    Some(FsXattr {
        xflags: w(0)?,
        extsize: w(1)?,
        nextents: w(2)?,
        projid: w(3)?,
        cowextsize: w(4)?,
    })
}

impl Core {
    pub fn ioctl(
        &self,
        nodeid: u64,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        who: Asker,
        reply: ReplyIoctl,
    ) {
        let ino = self.ino(nodeid);
        match cmd {
            FS_IOC_GETFLAGS | FS_IOC32_GETFLAGS => match self.fs.get_fsxattr(ino) {
                Ok(f) => {
                    let fl = fl_from_xflags(f.xflags).to_ne_bytes();
                    reply.ioctl(0, &fl[..(out_size as usize).min(4)])
                }
                Err(e) => reply.fail(self.errno("getflags", nodeid, &e)),
            },
            FS_IOC_FSGETXATTR => match self.fs.get_fsxattr(ino) {
                Ok(f) => {
                    let b = encode_fsxattr(&f);
                    reply.ioctl(0, &b[..(out_size as usize).min(FSXATTR_SIZE)])
                }
                Err(e) => reply.fail(self.errno("fsgetxattr", nodeid, &e)),
            },
            FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS => {
                if let Err(e) = self.check_rw() {
                    return reply.fail(e);
                }
                let Some(fl) = in_data
                    .get(..4)
                    .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
                else {
                    return reply.fail(libc::EINVAL);
                };
                if fl & !COMMON_FL != 0 {
                    return reply.fail(libc::EOPNOTSUPP);
                }
                let r = self.fs.get_fsxattr(ino).and_then(|old| {
                    let new = FsXattr {
                        xflags: (old.xflags & !XFLAG_COMMON) | xflags_from_fl(fl),
                        ..old
                    };
                    self.fs.set_fsxattr(ino, &new, false, &who.cred())
                });
                match r {
                    Ok(()) => {
                        self.forget_attrs(nodeid);
                        reply.ioctl(0, &[])
                    }
                    Err(e) => reply.fail(self.errno("setflags", nodeid, &e)),
                }
            }
            FS_IOC_GETFSLABEL => {
                let mut l = self.fs.label();
                l.resize(LABEL_MAX + 1, 0);
                reply.ioctl(0, &l[..(out_size as usize).min(LABEL_MAX + 1)])
            }
            FS_IOC_SETFSLABEL => {
                if let Err(e) = self.check_rw() {
                    return reply.fail(e);
                }
                if !who.cred().sys_admin {
                    return reply.fail(libc::EPERM);
                }
                let end = in_data
                    .iter()
                    .position(|&c| c == 0)
                    .unwrap_or(in_data.len());
                if end > LABEL_MAX {
                    return reply.fail(libc::EINVAL);
                }
                match self.fs.set_label(&in_data[..end]) {
                    Ok(()) => reply.ioctl(0, &[]),
                    Err(e) => reply.fail(self.errno("setfslabel", nodeid, &e)),
                }
            }
            FS_IOC_FSSETXATTR => {
                if let Err(e) = self.check_rw() {
                    return reply.fail(e);
                }
                let Some(new) = decode_fsxattr(in_data) else {
                    return reply.fail(libc::EINVAL);
                };
                match self.fs.set_fsxattr(ino, &new, true, &who.cred()) {
                    Ok(()) => {
                        // The mode (set-id bits) and ctime changed.
                        self.forget_attrs(nodeid);
                        reply.ioctl(0, &[])
                    }
                    Err(e) => reply.fail(self.errno("fssetxattr", nodeid, &e)),
                }
            }
            XFS_IOC_FSGEOMETRY | XFS_IOC_FSGEOMETRY_V4 | XFS_IOC_FSGEOMETRY_V1 => {
                let v = match cmd {
                    XFS_IOC_FSGEOMETRY => GeomVersion::V5,
                    XFS_IOC_FSGEOMETRY_V4 => GeomVersion::V4,
                    _ => GeomVersion::V1,
                };
                let g = self.fs.fs_geometry(v);
                reply.ioctl(0, &g[..(out_size as usize).min(g.len())])
            }
            XFS_IOC_FSCOUNTS => match self.fs.fs_counts() {
                Ok(c) => {
                    let b = c.encode();
                    reply.ioctl(0, &b[..(out_size as usize).min(b.len())])
                }
                Err(e) => reply.fail(self.errno("fscounts", nodeid, &e)),
            },
            XFS_IOC_GOINGDOWN => {
                if !who.cred().sys_admin {
                    return reply.fail(libc::EPERM);
                }
                errln!("rxfs: shutdown requested (XFS_IOC_GOINGDOWN); the log is forced, then every request fails with EIO");
                match self.fs.shutdown(ShutdownFlush::Log) {
                    Ok(()) => reply.ioctl(0, &[]),
                    Err(e) => reply.fail(self.errno("shutdown", nodeid, &e)),
                }
            }
            _ => reply.fail(libc::ENOTTY),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command numbers are `_IOR(type, nr, size)` of the structures.
    #[test]
    fn geometry_numbers() {
        use rxfs::format::fsop_geom::{COUNTS_SIZE, GEOM_V1_SIZE, GEOM_V4_SIZE, GEOM_V5_SIZE};
        let ior = |t: u8, nr: u8, size: usize| {
            0x8000_0000 | (size as u32) << 16 | (t as u32) << 8 | nr as u32
        };
        assert_eq!(XFS_IOC_FSGEOMETRY, ior(b'X', 126, GEOM_V5_SIZE));
        assert_eq!(XFS_IOC_FSGEOMETRY_V4, ior(b'X', 124, GEOM_V4_SIZE));
        assert_eq!(XFS_IOC_FSGEOMETRY_V1, ior(b'X', 100, GEOM_V1_SIZE));
        assert_eq!(XFS_IOC_FSCOUNTS, ior(b'X', 113, COUNTS_SIZE));
    }

    #[test]
    fn fsxattr_layout() {
        let f = FsXattr {
            xflags: 0x800,
            extsize: 65536,
            nextents: 3,
            projid: 7,
            cowextsize: 0,
        };
        let b = encode_fsxattr(&f);
        assert_eq!(&b[..4], &0x800u32.to_ne_bytes());
        assert_eq!(&b[12..16], &7u32.to_ne_bytes());
        assert_eq!(&b[20..], &[0u8; 8]);
        assert_eq!(decode_fsxattr(&b), Some(f));
        assert_eq!(decode_fsxattr(&b[..19]), None);
    }
}
