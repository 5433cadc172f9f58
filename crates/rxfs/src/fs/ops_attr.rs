//! Extended attribute changes on a read-write mount: setxattr (with
//! XATTR_CREATE / XATTR_REPLACE) and removexattr, in every attr fork form.
//!
//! (API stub for issue 4: the xattr helper fills it in.)

use super::Filesystem;
use crate::error::{Error, Result};
use crate::types::Ino;

/// setxattr(2) flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XattrSet {
    /// Create or replace.
    #[default]
    Any,
    /// XATTR_CREATE: fail with `Exists` when the name exists.
    Create,
    /// XATTR_REPLACE: fail with `NoAttr` / `NotFound` when it does not.
    Replace,
}

impl Filesystem {
    /// Set attribute `name` (full name with its namespace prefix, as
    /// `getxattr` takes it: "user.x", "trusted.x", "security.x",
    /// "system.posix_acl_access", ...) to `value`.
    pub fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], how: XattrSet) -> Result<()> {
        let _ = (ino, name, value, how);
        Err(Error::NotSupported("setxattr (issue 4)".into()))
    }

    /// Remove attribute `name`.
    pub fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        let _ = (ino, name);
        Err(Error::NotSupported("removexattr (issue 4)".into()))
    }
}
