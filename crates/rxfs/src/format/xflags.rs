//! Inode flags as user space sees them: the `FS_XFLAG_*` bits of
//! `struct fsxattr` (`FS_IOC_FSGETXATTR`, `xfs_io lsattr`) and the
//! `FS_*_FL` bits of `FS_IOC_GETFLAGS` (`lsattr`), and their mapping onto
//! the inode core's `di_flags` and `di_flags2`. Pure: no I/O.
//!
//! Invariants of the mapping (as XFS keeps them):
//! - `FS_XFLAG_*` bits 0x1..0x4000 sit where the `di_flags` bits do;
//!   `FS_XFLAG_DAX` and `FS_XFLAG_COWEXTSIZE` come from `di_flags2`;
//!   `FS_XFLAG_HASATTR` says the inode has an attribute fork.
//! - Setting keeps what user space cannot set (`PREALLOC`; `REFLINK`,
//!   `BIGTIME`, `NREXT64` in `di_flags2`) and drops what does not apply
//!   to the file's type: the inheritance flags (`RTINHERIT`,
//!   `EXTSZINHERIT`, `PROJINHERIT`, `NOSYMLINKS`) live on directories
//!   only, `REALTIME` and `EXTSIZE` on regular files only.
//! - `FS_*_FL` carries the seven flags both interfaces share
//!   ([`COMMON_FL`] / [`XFLAG_COMMON`]).

use super::inode::{
    DIFLAG2_BIGTIME, DIFLAG2_COWEXTSIZE, DIFLAG2_DAX, DIFLAG2_NREXT64, DIFLAG2_REFLINK,
    DIFLAG_APPEND as APPEND_BIT, DIFLAG_APPEND, DIFLAG_EXTSIZE, DIFLAG_EXTSZINHERIT,
    DIFLAG_FILESTREAM, DIFLAG_IMMUTABLE as IMMUTABLE_BIT, DIFLAG_IMMUTABLE, DIFLAG_NOATIME,
    DIFLAG_NODEFRAG, DIFLAG_NODUMP, DIFLAG_NOSYMLINKS, DIFLAG_PREALLOC, DIFLAG_PROJINHERIT,
    DIFLAG_REALTIME, DIFLAG_RTINHERIT, DIFLAG_SYNC,
};
use crate::error::{Error, Result};

pub const XFLAG_REALTIME: u32 = 0x0000_0001;
pub const XFLAG_PREALLOC: u32 = 0x0000_0002;
pub const XFLAG_IMMUTABLE: u32 = 0x0000_0008;
pub const XFLAG_APPEND: u32 = 0x0000_0010;
pub const XFLAG_SYNC: u32 = 0x0000_0020;
pub const XFLAG_NOATIME: u32 = 0x0000_0040;
pub const XFLAG_NODUMP: u32 = 0x0000_0080;
pub const XFLAG_RTINHERIT: u32 = 0x0000_0100;
pub const XFLAG_PROJINHERIT: u32 = 0x0000_0200;
pub const XFLAG_NOSYMLINKS: u32 = 0x0000_0400;
pub const XFLAG_EXTSIZE: u32 = 0x0000_0800;
pub const XFLAG_EXTSZINHERIT: u32 = 0x0000_1000;
pub const XFLAG_NODEFRAG: u32 = 0x0000_2000;
pub const XFLAG_FILESTREAM: u32 = 0x0000_4000;
pub const XFLAG_DAX: u32 = 0x0000_8000;
pub const XFLAG_COWEXTSIZE: u32 = 0x0001_0000;
pub const XFLAG_HASATTR: u32 = 0x8000_0000;

pub const FL_SYNC: u32 = 0x0000_0008;
pub const FL_IMMUTABLE: u32 = 0x0000_0010;
pub const FL_APPEND: u32 = 0x0000_0020;
pub const FL_NODUMP: u32 = 0x0000_0040;
pub const FL_NOATIME: u32 = 0x0000_0080;
pub const FL_DAX: u32 = 0x0200_0000;
pub const FL_PROJINHERIT: u32 = 0x2000_0000;

/// The `FS_*_FL` flags an XFS inode has (and accepts).
pub const COMMON_FL: u32 =
    FL_SYNC | FL_IMMUTABLE | FL_APPEND | FL_NODUMP | FL_NOATIME | FL_DAX | FL_PROJINHERIT;
/// Their `FS_XFLAG_*` twins.
pub const XFLAG_COMMON: u32 = XFLAG_SYNC
    | XFLAG_IMMUTABLE
    | XFLAG_APPEND
    | XFLAG_NODUMP
    | XFLAG_NOATIME
    | XFLAG_DAX
    | XFLAG_PROJINHERIT;

/// (FS_*_FL, FS_XFLAG_*) pairs.
const FL_PAIRS: [(u32, u32); 7] = [
    (FL_SYNC, XFLAG_SYNC),
    (FL_IMMUTABLE, XFLAG_IMMUTABLE),
    (FL_APPEND, XFLAG_APPEND),
    (FL_NODUMP, XFLAG_NODUMP),
    (FL_NOATIME, XFLAG_NOATIME),
    (FL_DAX, XFLAG_DAX),
    (FL_PROJINHERIT, XFLAG_PROJINHERIT),
];

/// `FS_*_FL` bits to `FS_XFLAG_*` bits (the shared seven; others dropped).
pub fn xflags_from_fl(fl: u32) -> u32 {
    FL_PAIRS
        .iter()
        .filter(|(f, _)| fl & f != 0)
        .fold(0, |acc, (_, x)| acc | x)
}

/// `FS_XFLAG_*` bits to `FS_*_FL` bits.
pub fn fl_from_xflags(x: u32) -> u32 {
    FL_PAIRS
        .iter()
        .filter(|(_, xf)| x & xf != 0)
        .fold(0, |acc, (f, _)| acc | f)
}

/// Every `di_flags` bit that maps 1:1 onto an `FS_XFLAG_*` bit.
const DIFLAGS_AS_XFLAGS: u16 = DIFLAG_REALTIME
    | DIFLAG_PREALLOC
    | DIFLAG_IMMUTABLE
    | DIFLAG_APPEND
    | DIFLAG_SYNC
    | DIFLAG_NOATIME
    | DIFLAG_NODUMP
    | DIFLAG_RTINHERIT
    | DIFLAG_PROJINHERIT
    | DIFLAG_NOSYMLINKS
    | DIFLAG_EXTSIZE
    | DIFLAG_EXTSZINHERIT
    | DIFLAG_NODEFRAG
    | DIFLAG_FILESTREAM;

/// The `FS_XFLAG_*` view of an inode's flags.
pub fn xflags_of(flags: u16, flags2: u64, has_attr_fork: bool) -> u32 {
    let mut x = (flags & DIFLAGS_AS_XFLAGS) as u32;
    if flags2 & DIFLAG2_DAX != 0 {
        x |= XFLAG_DAX;
    }
    if flags2 & DIFLAG2_COWEXTSIZE != 0 {
        x |= XFLAG_COWEXTSIZE;
    }
    if has_attr_fork {
        x |= XFLAG_HASATTR;
    }
    x
}

/// New `di_flags` from user `xflags` for an inode of type `fmt`
/// (`S_IFMT` bits of its mode) that had `old`.
pub fn diflags_from_xflags(old: u16, xflags: u32, fmt: u32) -> u16 {
    const ANY: u32 = XFLAG_IMMUTABLE
        | XFLAG_APPEND
        | XFLAG_SYNC
        | XFLAG_NOATIME
        | XFLAG_NODUMP
        | XFLAG_NODEFRAG
        | XFLAG_FILESTREAM;
    const DIR_ONLY: u32 =
        XFLAG_RTINHERIT | XFLAG_NOSYMLINKS | XFLAG_EXTSZINHERIT | XFLAG_PROJINHERIT;
    const REG_ONLY: u32 = XFLAG_REALTIME | XFLAG_EXTSIZE;
    let mut take = ANY;
    match fmt {
        super::dinode_edit::S_IFDIR => take |= DIR_ONLY,
        super::dinode_edit::S_IFREG => take |= REG_ONLY,
        _ => {}
    }
    (old & DIFLAG_PREALLOC) | (xflags & take) as u16
}

/// New `di_flags2` from user `xflags` (keeps REFLINK, BIGTIME, NREXT64).
pub fn diflags2_from_xflags(old: u64, xflags: u32) -> u64 {
    let mut f = old & (DIFLAG2_REFLINK | DIFLAG2_BIGTIME | DIFLAG2_NREXT64);
    if xflags & XFLAG_DAX != 0 {
        f |= DIFLAG2_DAX;
    }
    if xflags & XFLAG_COWEXTSIZE != 0 {
        f |= DIFLAG2_COWEXTSIZE;
    }
    f
}

/// What a change to an inode is, for [`flags_allow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A write at or past EOF (allowed on append-only files).
    Append,
    /// Any other change of the inode itself: data, size, mode, owners,
    /// times, xattrs, flags of the fallocate family.
    Modify,
    /// Removing or renaming the inode, or a new link to it.
    Unlink,
    /// A new entry in a directory (allowed in append-only ones).
    AddEntry,
    /// Removing or renaming away an entry of a directory.
    RemoveEntry,
}

/// The immutable / append-only verdict on `flags` (`di_flags`).
pub fn flags_allow(flags: u16, change: Change) -> Result<()> {
    if flags & IMMUTABLE_BIT != 0 {
        return Err(Error::Perm);
    }
    if flags & APPEND_BIT != 0 && !matches!(change, Change::Append | Change::AddEntry) {
        return Err(Error::Perm);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::dinode_edit::{S_IFDIR, S_IFLNK, S_IFREG};

    #[test]
    fn fl_and_xflags_round_trip() {
        assert_eq!(xflags_from_fl(COMMON_FL), XFLAG_COMMON);
        assert_eq!(fl_from_xflags(XFLAG_COMMON), COMMON_FL);
        assert_eq!(xflags_from_fl(FL_IMMUTABLE | 0x1), XFLAG_IMMUTABLE);
        assert_eq!(fl_from_xflags(XFLAG_EXTSIZE | XFLAG_APPEND), FL_APPEND);
    }

    #[test]
    fn flags_go_where_the_type_allows() {
        let all = 0x7ffd | XFLAG_DAX | XFLAG_COWEXTSIZE;
        let reg = diflags_from_xflags(0, all, S_IFREG);
        assert_eq!(
            reg & (DIFLAG_RTINHERIT | DIFLAG_EXTSZINHERIT | DIFLAG_PROJINHERIT),
            0
        );
        assert_ne!(reg & DIFLAG_EXTSIZE, 0);
        let dir = diflags_from_xflags(0, all, S_IFDIR);
        assert_eq!(dir & (DIFLAG_REALTIME | DIFLAG_EXTSIZE), 0);
        assert_ne!(dir & DIFLAG_PROJINHERIT, 0);
        let lnk = diflags_from_xflags(0, all, S_IFLNK);
        assert_eq!(
            lnk,
            (DIFLAG_IMMUTABLE
                | DIFLAG_APPEND
                | DIFLAG_SYNC
                | DIFLAG_NOATIME
                | DIFLAG_NODUMP
                | DIFLAG_NODEFRAG
                | DIFLAG_FILESTREAM)
        );
        // PREALLOC is kept, never set.
        assert_eq!(
            diflags_from_xflags(DIFLAG_PREALLOC, 0, S_IFREG),
            DIFLAG_PREALLOC
        );
        assert_eq!(diflags_from_xflags(0, XFLAG_PREALLOC, S_IFREG), 0);
        let f2 = diflags2_from_xflags(DIFLAG2_BIGTIME | DIFLAG2_REFLINK, XFLAG_DAX);
        assert_eq!(f2, DIFLAG2_BIGTIME | DIFLAG2_REFLINK | DIFLAG2_DAX);
        assert_eq!(
            xflags_of(DIFLAG_IMMUTABLE | DIFLAG_PREALLOC, DIFLAG2_COWEXTSIZE, true),
            XFLAG_IMMUTABLE | XFLAG_PREALLOC | XFLAG_COWEXTSIZE | XFLAG_HASATTR
        );
    }
}
