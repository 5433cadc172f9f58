//! One error type for the whole library.
//!
//! Kinds are precise about *what* failed: a corrupt structure on disk (with the
//! structure's name and its disk address), a failing device, an unsupported
//! feature, or an ordinary POSIX condition. The errno mapping happens only at
//! the edge (FUSE, CLI) through [`Error::errno`].
//!
//! Bugs and bad disks take different roads: our own invariants are
//! `debug_assert!`s; anything derived from disk bytes that is wrong becomes
//! [`Error::Corrupt`] and never a panic.

use std::fmt;

/// `EFSCORRUPTED` is `EUCLEAN` on Linux.
pub const EFSCORRUPTED: i32 = libc::EUCLEAN;

/// Where a corrupt structure was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A disk address in 512-byte basic blocks on the data device.
    Daddr(u64),
    /// An inode number.
    Ino(u64),
    /// A disk address on the realtime device.
    RtDaddr(u64),
    /// No better location is known.
    Unknown,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Daddr(d) => write!(f, "daddr {d:#x}"),
            Location::Ino(i) => write!(f, "inode {i}"),
            Location::RtDaddr(d) => write!(f, "rt daddr {d:#x}"),
            Location::Unknown => write!(f, "unknown location"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A metadata structure failed verification or is inconsistent.
    #[error("corrupt {what} at {at}: {detail}")]
    Corrupt {
        what: &'static str,
        at: Location,
        detail: String,
    },
    /// The device failed.
    #[error("I/O error {op} {len} bytes at offset {offset}: {source}")]
    Io {
        op: &'static str,
        offset: u64,
        len: usize,
        #[source]
        source: std::io::Error,
    },
    /// The image or request needs something rxfs does not implement.
    #[error("not supported: {0}")]
    NotSupported(String),
    /// The image uses an incompatible feature rxfs does not know.
    #[error("unknown incompatible feature bits {bits:#x} ({names})")]
    UnknownIncompat { bits: u32, names: String },
    /// The log is dirty and recovery is not available or not allowed.
    #[error("the log is dirty (head {head:#x}, tail {tail:#x}): {detail}")]
    DirtyLog {
        head: u64,
        tail: u64,
        detail: String,
    },
    /// Write attempted on a read-only filesystem.
    #[error("read-only filesystem: {0}")]
    ReadOnly(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("no such file or directory")]
    NotFound,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("name too long")]
    NameTooLong,
    /// ELOOP: too many symbolic links in a path, or one where none may be.
    #[error("too many levels of symbolic links")]
    Loop,
    #[error("no such attribute")]
    NoAttr,
    /// Permission denied (EACCES), e.g. a default ACL on a non-directory.
    #[error("permission denied")]
    Access,
    #[error("result does not fit the buffer")]
    Range,
    #[error("not a symbolic link")]
    NotSymlink,
    #[error("no space left on device")]
    NoSpace,
    #[error("file exists")]
    Exists,
    #[error("directory not empty")]
    NotEmpty,
    #[error("too many links")]
    TooManyLinks,
    #[error("filesystem is shut down")]
    Shutdown,
    /// EPERM: the operation is not permitted on this kind of object (a
    /// hard link to a directory, user xattrs on a symlink...).
    #[error("operation not permitted")]
    Perm,
    /// EINVAL for rename: a directory moved into its own subtree.
    #[error("cannot move a directory into itself")]
    IntoItself,
    /// EBUSY: the object is in use (rename of a mount root...).
    #[error("busy")]
    Busy,
    /// EBUSY: the device is owned by another read-write open (an rxfs
    /// mount, the kernel's) and stayed so.
    #[error("in use: {0}")]
    InUse(String),
    /// EEXIST for mkfs: the device holds a filesystem, partition table or
    /// RAID member, and overwriting was not asked for.
    #[error("{0}; use force to overwrite it")]
    HasFilesystem(String),
    /// lseek SEEK_DATA/SEEK_HOLE at or past EOF, or no data after it.
    #[error("no data or hole at or past the offset")]
    NoSuchOffset,
}

impl Error {
    /// A corruption error; `what` names the structure.
    pub fn corrupt(what: &'static str, at: Location, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            what,
            at,
            detail: detail.into(),
        }
    }

    pub fn io(op: &'static str, offset: u64, len: usize, source: std::io::Error) -> Self {
        Error::Io {
            op,
            offset,
            len,
            source,
        }
    }

    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }

    /// The errno a POSIX interface should report.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Corrupt { .. } => EFSCORRUPTED,
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::NotSupported(_) => libc::EOPNOTSUPP,
            Error::UnknownIncompat { .. } => libc::EINVAL,
            Error::DirtyLog { .. } => libc::EUCLEAN,
            Error::ReadOnly(_) => libc::EROFS,
            Error::Invalid(_) => libc::EINVAL,
            Error::NotFound => libc::ENOENT,
            Error::NotDir => libc::ENOTDIR,
            Error::IsDir => libc::EISDIR,
            Error::NameTooLong => libc::ENAMETOOLONG,
            Error::Loop => libc::ELOOP,
            Error::NoAttr => libc::ENODATA,
            Error::Access => libc::EACCES,
            Error::Range => libc::ERANGE,
            Error::NotSymlink => libc::EINVAL,
            Error::Shutdown => libc::EIO,
            Error::NoSuchOffset => libc::ENXIO,
            Error::NoSpace => libc::ENOSPC,
            Error::Exists | Error::HasFilesystem(_) => libc::EEXIST,
            Error::NotEmpty => libc::ENOTEMPTY,
            Error::TooManyLinks => libc::EMLINK,
            Error::Perm => libc::EPERM,
            Error::IntoItself => libc::EINVAL,
            Error::Busy | Error::InUse(_) => libc::EBUSY,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Return a corruption error unless `cond` holds.
#[macro_export]
macro_rules! ensure_corrupt {
    ($cond:expr, $what:expr, $at:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::error::Error::corrupt($what, $at, format!($($fmt)+)));
        }
    };
}
