//! The values handlers pass to replies: node ids, generations, open
//! flags, file types and attributes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::abi;

/// A FUSE node id (1 is the root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct INodeNo(pub u64);

impl INodeNo {
    pub const ROOT: INodeNo = INodeNo(abi::ROOT_ID);
}

/// An inode generation: (node id, generation) names one inode for the
/// filesystem's life (file handles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(pub u64);

/// The file handle an open answers (rxfs keeps no per-open state: 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHandle(pub u64);

/// `FOPEN_*` flags of an open's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FopenFlags(pub u32);

impl FopenFlags {
    pub const FOPEN_DIRECT_IO: FopenFlags = FopenFlags(abi::fopen::DIRECT_IO);
    pub const FOPEN_KEEP_CACHE: FopenFlags = FopenFlags(abi::fopen::KEEP_CACHE);
    pub const FOPEN_CACHE_DIR: FopenFlags = FopenFlags(abi::fopen::CACHE_DIR);
    pub const FOPEN_PARALLEL_DIRECT_WRITES: FopenFlags =
        FopenFlags(abi::fopen::PARALLEL_DIRECT_WRITES);

    pub const fn empty() -> FopenFlags {
        FopenFlags(0)
    }

    pub fn remove(&mut self, other: FopenFlags) {
        self.0 &= !other.0;
    }

    pub fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for FopenFlags {
    type Output = FopenFlags;
    fn bitor(self, rhs: FopenFlags) -> FopenFlags {
        FopenFlags(self.0 | rhs.0)
    }
}

/// A file type as FUSE reports it (the `S_IFMT` bits of a mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    NamedPipe,
    CharDevice,
    BlockDevice,
    Directory,
    RegularFile,
    Symlink,
    Socket,
}

impl FileType {
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::NamedPipe => libc::S_IFIFO,
            FileType::CharDevice => libc::S_IFCHR,
            FileType::BlockDevice => libc::S_IFBLK,
            FileType::Directory => libc::S_IFDIR,
            FileType::RegularFile => libc::S_IFREG,
            FileType::Symlink => libc::S_IFLNK,
            FileType::Socket => libc::S_IFSOCK,
        }
    }

    /// The `d_type` of a directory entry.
    pub fn dirent_type(self) -> u32 {
        self.mode_bits() >> 12
    }
}

/// A time to set: a given one, or the daemon's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeOrNow {
    SpecificTime(SystemTime),
    Now,
}

/// An inode's attributes, as handlers build them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileAttr {
    pub ino: INodeNo,
    pub size: u64,
    pub blocks: u64,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    pub crtime: SystemTime,
    pub kind: FileType,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub blksize: u32,
    pub flags: u32,
}

/// `(seconds, nanoseconds)` of a time, seconds rounded down (before 1970
/// too), the pair the kernel's `struct timespec64` holds.
pub fn time_pair(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            if d.subsec_nanos() == 0 {
                (-(d.as_secs() as i64), 0)
            } else {
                (-(d.as_secs() as i64) - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    }
}

/// The `SystemTime` of a `(seconds, nanoseconds)` pair from the kernel.
pub fn system_time_of(sec: i64, nsec: u32) -> SystemTime {
    let nsec = Duration::from_nanos(nsec.min(999_999_999) as u64);
    if sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(sec as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + nsec
    }
}

impl FileAttr {
    pub fn to_wire(self) -> abi::Attr {
        let (atime, atimensec) = time_pair(self.atime);
        let (mtime, mtimensec) = time_pair(self.mtime);
        let (ctime, ctimensec) = time_pair(self.ctime);
        abi::Attr {
            ino: self.ino.0,
            size: self.size,
            blocks: self.blocks,
            atime: atime as u64,
            mtime: mtime as u64,
            ctime: ctime as u64,
            atimensec,
            mtimensec,
            ctimensec,
            mode: self.kind.mode_bits() | self.perm as u32,
            nlink: self.nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: self.rdev,
            blksize: self.blksize,
            flags: self.flags,
        }
    }

    /// The statx form: every basic field and the birth time.
    pub fn to_statx(self) -> abi::Statx {
        let sx = |t: SystemTime| {
            let (sec, nsec) = time_pair(t);
            abi::SxTime {
                sec,
                nsec,
                reserved: 0,
            }
        };
        // The FUSE encoding of rdev (`new_encode_dev`), split back.
        let (rdev_major, rdev_minor) = (
            (self.rdev & 0xfff00) >> 8,
            (self.rdev & 0xff) | ((self.rdev >> 12) & 0xfff00),
        );
        abi::Statx {
            mask: (libc::STATX_BASIC_STATS | libc::STATX_BTIME),
            blksize: self.blksize,
            nlink: self.nlink,
            uid: self.uid,
            gid: self.gid,
            mode: (self.kind.mode_bits() | self.perm as u32) as u16,
            ino: self.ino.0,
            size: self.size,
            blocks: self.blocks,
            atime: sx(self.atime),
            btime: sx(self.crtime),
            ctime: sx(self.ctime),
            mtime: sx(self.mtime),
            rdev_major,
            rdev_minor,
            ..Default::default()
        }
    }
}

/// A `Duration` as the (seconds, nanoseconds) of a cache timeout.
pub fn ttl_pair(d: &Duration) -> (u64, u32) {
    (d.as_secs(), d.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        for (sec, nsec) in [
            (0, 0),
            (1_700_000_000, 7),
            (-1, 500_000_000),
            (-2_147_483_648, 1),
            (-5, 0),
        ] {
            assert_eq!(time_pair(system_time_of(sec, nsec)), (sec, nsec));
        }
    }

    #[test]
    fn flags_combine() {
        let mut f = FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_KEEP_CACHE;
        assert_eq!(f.bits(), abi::fopen::DIRECT_IO | abi::fopen::KEEP_CACHE);
        f.remove(FopenFlags::FOPEN_KEEP_CACHE);
        assert_eq!(f, FopenFlags::FOPEN_DIRECT_IO);
        assert_eq!(FileType::Directory.dirent_type(), libc::DT_DIR as u32);
    }
}
