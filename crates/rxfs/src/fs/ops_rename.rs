//! rename(2) on a read-write mount, with `RENAME_NOREPLACE` and
//! `RENAME_EXCHANGE`.
//!
//! (API stub for issue 4: the namespace helper fills it in.)

use super::Filesystem;
use crate::error::{Error, Result};
use crate::types::Ino;

/// renameat2 flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// Fail with `Exists` when the target name exists.
    pub noreplace: bool,
    /// Atomically swap the two entries (both must exist).
    pub exchange: bool,
}

impl Filesystem {
    /// Move entry `sname` of directory `sp` to `dname` in `dp`, replacing
    /// an existing target (a non-directory, or an empty directory when the
    /// source is a directory) unless `flags` say otherwise.
    pub fn rename(
        &self,
        sp: Ino,
        sname: &[u8],
        dp: Ino,
        dname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        let _ = (sp, sname, dp, dname, flags);
        Err(Error::NotSupported("rename (issue 4)".into()))
    }
}
