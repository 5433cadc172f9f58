//! Extended attribute changes on a read-write mount: setxattr (with
//! XATTR_CREATE / XATTR_REPLACE) and removexattr. The names are the full
//! Linux names `getxattr` takes; the algorithms are in [`crate::attr`]
//! (one transaction per call, under the inode lock).
//!
//! Errors as Linux gives them: a full name of more than 255 bytes or none
//! at all `Range`; a prefix with nothing after it `Invalid`; a value over
//! 64 KiB `Range`; "user." attributes of anything but files and
//! directories `Perm`; other "system." names and unknown prefixes
//! `NotSupported`; XATTR_CREATE of a present name `Exists`, XATTR_REPLACE
//! or removal of an absent one `NoAttr` (ENODATA). ACL names ignore the
//! create/replace flags, as Linux does.

use super::Filesystem;
use crate::attr as xattr_tx;
use crate::attr::acl::{self, AclKind};
use crate::cred::Cred;
use crate::error::{Error, Result};
use crate::format::attr::{self, Namespace, XATTR_SIZE_MAX};
use crate::format::dinode_edit as di;
use crate::format::inode::Timestamp;
use crate::format::xflags::{flags_allow, Change};
use crate::types::Ino;
use crate::xact::{InodeId, MetaTx, Resv};

pub use crate::attr::XattrSet;

use crate::attr::read::XATTR_NAME_MAX;

fn now() -> Timestamp {
    crate::bmap::data::now()
}

/// What a full xattr name addresses.
enum Target<'a> {
    Acl(AclKind),
    Attr(Namespace, &'a [u8]),
}

fn resolve(name: &[u8]) -> Result<Target<'_>> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(Error::Range);
    }
    if let Some(k) = AclKind::from_xattr_name(name) {
        return Ok(Target::Acl(k));
    }
    let (ns, short) = attr::split_name(name).ok_or_else(|| {
        Error::NotSupported(format!(
            "xattr namespace of {:?}",
            String::from_utf8_lossy(name)
        ))
    })?;
    if short.is_empty() {
        return Err(Error::Invalid("empty attribute name".into()));
    }
    Ok(Target::Attr(ns, short))
}

/// Linux refuses user attributes on anything but files and directories.
fn check_user_ns(tx: &dyn MetaTx, ip: InodeId, ns: Namespace) -> Result<()> {
    let fmt = di::mode(tx.inode(ip)) as u32 & di::S_IFMT;
    if ns == Namespace::User && fmt != di::S_IFREG && fmt != di::S_IFDIR {
        return Err(Error::Perm);
    }
    Ok(())
}

impl Filesystem {
    /// Set attribute `name` (full name with its namespace prefix, as
    /// `getxattr` takes it: "user.x", "trusted.x", "security.x",
    /// "system.posix_acl_access", ...) to `value`.
    /// Made by the library itself ([`Cred::root`]).
    pub fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], how: XattrSet) -> Result<()> {
        self.setxattr_by(ino, name, value, how, &Cred::root())
    }

    /// [`Self::setxattr`] made by `who`: an access ACL that rewrites the
    /// mode drops set-gid unless `who` is in the file's group or capable
    /// (see [`crate::cred`]).
    pub fn setxattr_by(
        &self,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
        who: &Cred,
    ) -> Result<()> {
        let target = resolve(name)?;
        if value.len() > XATTR_SIZE_MAX as usize {
            return Err(Error::Range);
        }
        let t = now();
        self.attr_transaction(ino, Resv::AttrSet, &mut |tx, ip| match target {
            Target::Acl(k) => acl::set_acl_xattr(tx, ip, k, Some(value), t, who),
            Target::Attr(ns, short) => {
                check_user_ns(tx, ip, ns)?;
                xattr_tx::attr_set(tx, ip, ns, short, value, how, t)
            }
        })
    }

    /// Remove attribute `name`.
    pub fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        let target = resolve(name)?;
        let t = now();
        self.attr_transaction(ino, Resv::AttrRemove, &mut |tx, ip| match target {
            Target::Acl(k) => acl::set_acl_xattr(tx, ip, k, None, t, &Cred::root()),
            Target::Attr(ns, short) => {
                check_user_ns(tx, ip, ns)?;
                xattr_tx::attr_remove(tx, ip, ns, short, t)
            }
        })
    }

    /// Run `f` on the joined inode `ino` in one transaction (inode locked);
    /// commit on success, cancel on error.
    fn attr_transaction(
        &self,
        ino: Ino,
        resv: Resv,
        f: &mut dyn FnMut(&mut dyn MetaTx, InodeId) -> Result<()>,
    ) -> Result<()> {
        let _lock = self.ilock(ino)?;
        let mut tx = self.trans_alloc(resv)?;
        // Immutable and append-only inodes take no xattr change (EPERM).
        let r = tx.ijoin(ino).and_then(|ip| {
            flags_allow(di::flags(tx.inode(ip)), Change::Modify)?;
            f(&mut tx, ip)
        });
        match r {
            Ok(()) => {
                tx.commit()?;
                Ok(())
            }
            Err(e) => {
                tx.cancel();
                Err(e)
            }
        }
    }
}
