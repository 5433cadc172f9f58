//! In-memory inodes: the decoded core plus both forks.
//!
//! Btree-format forks are flattened at load time into the sorted extent list
//! (the bmbt is walked once, every block verified), so readers see one shape.

use crate::format::bmbt::Extent;
use crate::format::inode::InodeCore;
use crate::types::{FileType, Ino};

/// A fork's contents after decoding.
#[derive(Debug, Clone)]
pub enum Fork {
    /// Device number (XFS encoding, see [`crate::format::inode::decode_rdev`]).
    Dev(u32),
    /// Inline bytes (shortform directory, inline symlink, shortform xattrs).
    Local(Vec<u8>),
    /// Extents or btree format: the full extent list sorted by file offset,
    /// non-overlapping. `btree` says which form it had on disk.
    Extents { list: Vec<Extent>, btree: bool },
}

impl Fork {
    pub fn extents(&self) -> &[Extent] {
        match self {
            Fork::Extents { list, .. } => list,
            _ => &[],
        }
    }
}

#[derive(Debug, Clone)]
pub struct Inode {
    pub ino: Ino,
    pub core: InodeCore,
    pub data: Fork,
    /// `None` when the inode has no attribute fork (forkoff 0).
    pub attr: Option<Fork>,
}

impl Inode {
    pub fn file_type(&self) -> Option<FileType> {
        FileType::from_mode(self.core.mode)
    }
    pub fn is_dir(&self) -> bool {
        self.file_type() == Some(FileType::Directory)
    }
    pub fn is_realtime(&self) -> bool {
        self.core.flags & crate::format::inode::DIFLAG_REALTIME != 0
    }
}

use super::Filesystem;
use crate::error::{Error, Result};

impl Filesystem {
    /// Read, verify and decode inode `ino` (cached). A free inode (mode 0)
    /// or an inode number outside the filesystem is `Err(NotFound)`...
    /// (stub until the core read path lands)
    pub fn iget(&self, ino: Ino) -> Result<std::sync::Arc<Inode>> {
        let _ = ino;
        Err(Error::NotSupported("iget".into()))
    }

    pub fn root_ino(&self) -> Ino {
        Ino(self.sb().rootino)
    }
}
