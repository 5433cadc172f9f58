//! Extended attributes in all forms, and POSIX ACL translation.
//! (Stub: filled in by the xattr work.)

use super::inode::Inode;
use super::Filesystem;
use crate::error::{Error, Result};

impl Filesystem {
    /// Full names ("user.foo", "trusted.bar", "security.x",
    /// "system.posix_acl_access") of every attribute, as Linux lists them.
    pub fn listxattr(&self, ip: &Inode) -> Result<Vec<Vec<u8>>> {
        let _ = ip;
        Err(Error::NotSupported("listxattr".into()))
    }

    /// Value of attribute `name` (full name). `Err(NoAttr)` when absent.
    pub fn getxattr(&self, ip: &Inode, name: &[u8]) -> Result<Vec<u8>> {
        let _ = (ip, name);
        Err(Error::NotSupported("getxattr".into()))
    }
}
