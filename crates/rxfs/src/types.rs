//! Newtypes for every address space XFS uses.
//!
//! Mixing address spaces must not compile: an AG-relative block is not a
//! filesystem block, which is not a 512-byte disk address. Conversions between
//! them need the geometry and live in [`crate::geometry::Geometry`].

use std::fmt;

macro_rules! newtype {
    ($(#[$m:meta])* $name:ident, $inner:ty) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $inner);
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

newtype!(
    /// Allocation group number.
    AgNumber, u32
);
newtype!(
    /// Block number relative to the start of an allocation group.
    AgBlock, u32
);
newtype!(
    /// Filesystem block number: `agno << agblklog | agbno` (sparse address space).
    FsBlock, u64
);
newtype!(
    /// Disk address in 512-byte basic blocks from the start of the data device.
    Daddr, u64
);
newtype!(
    /// Block number on the realtime device (filesystem-block units).
    RtBlock, u64
);
newtype!(
    /// Inode number: `agno << (agblklog + inopblog) | agbno << inopblog | index`.
    Ino, u64
);
newtype!(
    /// AG-relative inode number: `agbno << inopblog | index`.
    AgIno, u32
);
newtype!(
    /// Logical block offset inside an inode fork, in filesystem blocks.
    FileBlock, u64
);

/// Log sequence number: `cycle << 32 | block offset in the log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub i64);

impl Lsn {
    pub fn new(cycle: u32, block: u32) -> Self {
        Lsn(((cycle as i64) << 32) | block as i64)
    }
    pub fn cycle(self) -> u32 {
        (self.0 as u64 >> 32) as u32
    }
    pub fn block(self) -> u32 {
        self.0 as u64 as u32
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.cycle(), self.block())
    }
}

impl Daddr {
    /// Byte offset on the device.
    pub fn bytes(self) -> u64 {
        self.0 << 9
    }
}

/// Which fork of an inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForkKind {
    Data,
    Attr,
}

/// File type as stored in directory entries (ftype) and derived from the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    CharDev,
    BlockDev,
    Fifo,
    Socket,
}

impl FileType {
    /// From the `S_IFMT` bits of a mode.
    pub fn from_mode(mode: u16) -> Option<Self> {
        Some(match mode as u32 & libc::S_IFMT {
            libc::S_IFREG => FileType::Regular,
            libc::S_IFDIR => FileType::Directory,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFCHR => FileType::CharDev,
            libc::S_IFBLK => FileType::BlockDev,
            libc::S_IFIFO => FileType::Fifo,
            libc::S_IFSOCK => FileType::Socket,
            _ => return None,
        })
    }

    /// From the XFS directory-entry ftype byte (`XFS_DIR3_FT_*`).
    pub fn from_ftype(ft: u8) -> Option<Self> {
        Some(match ft {
            1 => FileType::Regular,
            2 => FileType::Directory,
            3 => FileType::CharDev,
            4 => FileType::BlockDev,
            5 => FileType::Fifo,
            6 => FileType::Socket,
            7 => FileType::Symlink,
            _ => return None,
        })
    }

    pub fn to_ftype(self) -> u8 {
        match self {
            FileType::Regular => 1,
            FileType::Directory => 2,
            FileType::CharDev => 3,
            FileType::BlockDev => 4,
            FileType::Fifo => 5,
            FileType::Socket => 6,
            FileType::Symlink => 7,
        }
    }
}

/// Which fork of an inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WhichFork {
    Data,
    Attr,
}

impl WhichFork {
    pub fn name(self) -> &'static str {
        match self {
            WhichFork::Data => "inode data fork",
            WhichFork::Attr => "inode attr fork",
        }
    }
}
