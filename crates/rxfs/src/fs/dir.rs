//! Directories: lookup and iteration over all on-disk forms.
//! (Stub: filled in by the directory work.)

use super::inode::Inode;
use super::Filesystem;
use crate::error::{Error, Result};
use crate::types::{FileType, Ino};

/// One directory entry as readdir returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    /// From the entry's ftype byte (None on filesystems without ftype).
    pub ftype: Option<FileType>,
    /// The cookie to pass to `readdir` to continue after this entry.
    pub next_cookie: u64,
}

impl Filesystem {
    /// Look `name` up in directory `dir`. `Err(NotFound)` when absent.
    pub fn lookup(&self, dir: &Inode, name: &[u8]) -> Result<Ino> {
        let _ = (dir, name);
        Err(Error::NotSupported("directory lookup".into()))
    }

    /// Iterate entries starting at `cookie` (0 = start, "." and ".." first).
    /// `f` returns false to stop early.
    pub fn readdir(
        &self,
        dir: &Inode,
        cookie: u64,
        f: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> Result<()> {
        let _ = (dir, cookie, f);
        Err(Error::NotSupported("readdir".into()))
    }
}
