//! POSIX ACLs on a transaction: setting and removing them through the
//! `system.posix_acl_access` / `system.posix_acl_default` xattr names,
//! inheritance of a directory's default ACL by new inodes, `chmod`
//! propagation, and the permission check the FUSE front end calls.
//!
//! Storage: the access ACL is the trusted attribute `SGI_ACL_FILE`, the
//! default ACL `SGI_ACL_DEFAULT`, in XFS's big-endian format
//! ([`crate::format::attr_acl`]).
//!
//! Rules (Linux's generic POSIX ACL code, which XFS uses):
//! - a valid ACL has, in this order: one USER_OBJ, USER entries, one
//!   GROUP_OBJ, GROUP entries, a MASK (required when USER or GROUP entries
//!   exist), one OTHER; perms are rwx bits only. Anything else: `Invalid`;
//! - setting an access ACL updates the mode's permission bits from it
//!   (USER_OBJ, GROUP_OBJ or MASK, OTHER); an access ACL the mode alone
//!   expresses (no USER/GROUP/MASK entries) is not stored, and an old one
//!   is removed;
//! - an empty ACL (header only) removes it; removing an absent ACL is fine;
//! - default ACLs exist only on directories (`Access` elsewhere, unless
//!   removing); no ACLs on symlinks (`NotSupported`);
//! - a new inode in a directory with a default ACL gets that ACL masked by
//!   its create mode as its access ACL (unless the mode expresses it), its
//!   mode masked by the ACL, and, for directories, the default ACL too.
//!   Without a default ACL nothing happens here (the caller's umask rule
//!   applies; with one, the umask must not be applied to the mode).

use super::{attr_get, attr_remove, attr_set, XattrSet};
use crate::cred::Cred;
use crate::error::{Error, Result};
use crate::format::attr::Namespace;
use crate::format::attr_acl::{
    decode_xattr, decode_xfs, encode_xfs, AclEntry, ACL_GROUP, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER,
    ACL_USER, ACL_USER_OBJ, SGI_ACL_DEFAULT, SGI_ACL_FILE, XFS_ACL_MAX_ENTRIES,
};
use crate::format::dinode_edit as di;
use crate::format::inode::Timestamp;
use crate::types::Ino;
use crate::xact::{InodeId, MetaTx};

/// Which ACL of an inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclKind {
    Access,
    Default,
}

impl AclKind {
    /// From a Linux xattr name.
    pub fn from_xattr_name(name: &[u8]) -> Option<Self> {
        match name {
            crate::format::attr_acl::XATTR_POSIX_ACL_ACCESS => Some(AclKind::Access),
            crate::format::attr_acl::XATTR_POSIX_ACL_DEFAULT => Some(AclKind::Default),
            _ => None,
        }
    }
    fn disk_name(self) -> &'static [u8] {
        match self {
            AclKind::Access => SGI_ACL_FILE,
            AclKind::Default => SGI_ACL_DEFAULT,
        }
    }
}

const S_IRWXUGO: u32 = 0o777;

/// Check the structure of an ACL (see the module docs).
pub fn valid(acl: &[AclEntry]) -> Result<()> {
    #[derive(PartialEq)]
    enum St {
        UserObj,
        User,
        Group,
        Other,
        Done,
    }
    let bad = |d: &str| Err(Error::Invalid(format!("ACL: {d}")));
    let mut st = St::UserObj;
    let mut needs_mask = false;
    for e in acl {
        if e.perm & !7 != 0 {
            return bad("perm bits beyond rwx");
        }
        st = match (e.tag, &st) {
            (ACL_USER_OBJ, St::UserObj) => St::User,
            (ACL_USER, St::User) | (ACL_GROUP, St::Group) => {
                needs_mask = true;
                continue;
            }
            (ACL_GROUP_OBJ, St::User) => St::Group,
            (ACL_MASK, St::Group) => St::Other,
            (ACL_OTHER, St::Other) => St::Done,
            (ACL_OTHER, St::Group) if !needs_mask => St::Done,
            _ => return bad("entries out of order, repeated or missing"),
        };
    }
    if st != St::Done {
        return bad("incomplete");
    }
    Ok(())
}

/// The mode's permission bits as the ACL gives them, and whether the ACL
/// says more than the mode can (USER/GROUP/MASK entries).
pub fn equiv_mode(acl: &[AclEntry], mode: u32) -> (u32, bool) {
    let mut bits = 0u32;
    let mut not_equiv = false;
    for e in acl {
        let p = (e.perm & 7) as u32;
        match e.tag {
            ACL_USER_OBJ => bits |= p << 6,
            ACL_GROUP_OBJ => bits |= p << 3,
            ACL_OTHER => bits |= p,
            ACL_MASK => {
                bits = (bits & !0o070) | (p << 3);
                not_equiv = true;
            }
            _ => not_equiv = true,
        }
    }
    ((mode & !S_IRWXUGO) | bits, not_equiv)
}

/// Mask an inherited ACL with the create mode and the mode with the ACL
/// (the kernel's create masquerade). Returns whether the ACL says more than
/// the mode.
pub fn create_masq(acl: &mut [AclEntry], mode: &mut u32) -> bool {
    let mut not_equiv = false;
    let (mut group, mut mask) = (None, None);
    for (i, e) in acl.iter_mut().enumerate() {
        match e.tag {
            ACL_USER_OBJ => {
                e.perm &= ((*mode >> 6) & 7) as u16;
                *mode &= ((e.perm as u32) << 6) | !0o700;
            }
            ACL_USER | ACL_GROUP => not_equiv = true,
            ACL_GROUP_OBJ => group = Some(i),
            ACL_MASK => {
                mask = Some(i);
                not_equiv = true;
            }
            ACL_OTHER => {
                e.perm &= (*mode & 7) as u16;
                *mode &= e.perm as u32 | !0o007;
            }
            _ => {}
        }
    }
    if let Some(i) = mask.or(group) {
        let e = &mut acl[i];
        e.perm &= ((*mode >> 3) & 7) as u16;
        *mode &= ((e.perm as u32) << 3) | !0o070;
    }
    not_equiv
}

/// Carry a new mode into an ACL (chmod): USER_OBJ, MASK (or GROUP_OBJ
/// without a mask) and OTHER take the mode's bits.
pub fn chmod_acl(acl: &mut [AclEntry], mode: u32) {
    let has_mask = acl.iter().any(|e| e.tag == ACL_MASK);
    for e in acl.iter_mut() {
        match e.tag {
            ACL_USER_OBJ => e.perm = ((mode >> 6) & 7) as u16,
            ACL_MASK => e.perm = ((mode >> 3) & 7) as u16,
            ACL_GROUP_OBJ if !has_mask => e.perm = ((mode >> 3) & 7) as u16,
            ACL_OTHER => e.perm = (mode & 7) as u16,
            _ => {}
        }
    }
}

/// Who asks, for [`permits`].
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: &'a [u32],
}

/// The POSIX ACL access check: may `who` access a file owned by
/// `owner_uid`/`owner_gid` whose access ACL is `acl`, for the rwx bits in
/// `want` (4 read, 2 write, 1 execute)? Privileged callers are the
/// caller's business. A malformed ACL (no OTHER entry) denies.
pub fn permits(acl: &[AclEntry], owner_uid: u32, owner_gid: u32, who: &Caller, want: u16) -> bool {
    let want = want & 7;
    let in_group = |g: u32| who.gid == g || who.groups.contains(&g);
    let mask = acl.iter().find(|e| e.tag == ACL_MASK).map(|e| e.perm);
    let masked = |p: u16| p & mask.unwrap_or(7) & want == want;
    let mut found_group = false;
    for e in acl {
        match e.tag {
            ACL_USER_OBJ if who.uid == owner_uid => return e.perm & want == want,
            ACL_USER if e.id == who.uid => return masked(e.perm),
            ACL_GROUP_OBJ | ACL_GROUP => {
                let g = if e.tag == ACL_GROUP_OBJ {
                    owner_gid
                } else {
                    e.id
                };
                if in_group(g) {
                    found_group = true;
                    if e.perm & want == want {
                        return masked(e.perm);
                    }
                }
            }
            ACL_OTHER => return !found_group && e.perm & want == want,
            _ => {}
        }
    }
    false
}

fn check_target(tx: &dyn MetaTx, ip: InodeId, kind: AclKind, setting: bool) -> Result<()> {
    let fmt = di::mode(tx.inode(ip)) as u32 & di::S_IFMT;
    if fmt == di::S_IFLNK {
        return Err(Error::NotSupported("ACLs on a symlink".into()));
    }
    if kind == AclKind::Default && fmt != di::S_IFDIR && setting {
        return Err(Error::Access);
    }
    Ok(())
}

/// Read an ACL of `ip` (`None` when it has none).
pub fn get_acl(tx: &mut dyn MetaTx, ip: InodeId, kind: AclKind) -> Result<Option<Vec<AclEntry>>> {
    let ino = Ino(di::ino(tx.inode(ip)));
    match attr_get(tx, ip, Namespace::Trusted, kind.disk_name())? {
        None => Ok(None),
        Some(v) => decode_xfs(&v, ino).map(Some),
    }
}

/// Store (or with `None`, remove) an ACL as it is, no mode rules.
fn put_acl(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    kind: AclKind,
    acl: Option<&[AclEntry]>,
    now: Timestamp,
) -> Result<()> {
    match acl {
        Some(a) => {
            if a.len() > XFS_ACL_MAX_ENTRIES {
                return Err(Error::Range);
            }
            let v = encode_xfs(a);
            attr_set(
                tx,
                ip,
                Namespace::Trusted,
                kind.disk_name(),
                &v,
                XattrSet::Any,
                now,
            )
        }
        None => match attr_remove(tx, ip, Namespace::Trusted, kind.disk_name(), now) {
            Err(Error::NoAttr) => Ok(()),
            r => r,
        },
    }
}

/// setxattr of `system.posix_acl_*` with a Linux-format `value` (`None`:
/// removexattr). Applies the mode rules of the module docs.
pub fn set_acl_xattr(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    kind: AclKind,
    value: Option<&[u8]>,
    now: Timestamp,
    who: &Cred,
) -> Result<()> {
    let mut acl = match value {
        Some(v) => decode_xattr(v)?,
        None => None,
    };
    check_target(tx, ip, kind, acl.is_some())?;
    if let Some(a) = &acl {
        valid(a)?;
        if a.len() > XFS_ACL_MAX_ENTRIES {
            return Err(Error::Range);
        }
    }
    if kind == AclKind::Default && acl.is_some() {
        let fmt = di::mode(tx.inode(ip)) as u32 & di::S_IFMT;
        debug_assert_eq!(fmt, di::S_IFDIR);
    }
    let mut new_mode = None;
    if kind == AclKind::Access {
        if let Some(a) = &acl {
            let mode = di::mode(tx.inode(ip)) as u32;
            let (mut m, not_equiv) = equiv_mode(a, mode);
            // The VFS's rule for a mode rewritten from an ACL: set-gid
            // goes unless the caller is in the file's group or capable.
            if !who.in_group_or_capable(di::gid(tx.inode(ip))) {
                m &= !di::S_ISGID;
            }
            new_mode = Some(m);
            if !not_equiv {
                acl = None;
            }
        }
    }
    put_acl(tx, ip, kind, acl.as_deref(), now)?;
    if let Some(m) = new_mode {
        let d = tx.inode_mut(ip);
        di::set_mode(d, m as u16);
        di::set_ctime(d, now);
    }
    Ok(())
}

/// Give the new inode `ip` (mode already set from its create mode) the
/// ACLs its parent directory `dp`'s default ACL implies, and mask its mode
/// with it; without a default ACL, clear the `umask` bits instead (as the
/// VFS does). Nothing happens for symlinks.
pub fn inherit(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    ip: InodeId,
    umask: u32,
    now: Timestamp,
) -> Result<()> {
    let mode = di::mode(tx.inode(ip)) as u32;
    let fmt = mode & di::S_IFMT;
    if fmt == di::S_IFLNK {
        return Ok(());
    }
    let Some(def) = get_acl(tx, dp, AclKind::Default)? else {
        if umask & 0o777 != 0 {
            di::set_mode(tx.inode_mut(ip), (mode & !(umask & 0o777)) as u16);
        }
        return Ok(());
    };
    let mut access = def.clone();
    let mut m = mode;
    let not_equiv = create_masq(&mut access, &mut m);
    if fmt == di::S_IFDIR {
        put_acl(tx, ip, AclKind::Default, Some(&def), now)?;
    }
    if not_equiv {
        put_acl(tx, ip, AclKind::Access, Some(&access), now)?;
    }
    di::set_mode(tx.inode_mut(ip), m as u16);
    Ok(())
}

/// After a mode change of `ip`: carry the new permission bits into its
/// access ACL, if it has one.
pub fn chmod(tx: &mut dyn MetaTx, ip: InodeId, now: Timestamp) -> Result<()> {
    let mode = di::mode(tx.inode(ip)) as u32;
    if mode & di::S_IFMT == di::S_IFLNK {
        return Ok(());
    }
    let Some(mut acl) = get_acl(tx, ip, AclKind::Access)? else {
        return Ok(());
    };
    chmod_acl(&mut acl, mode);
    put_acl(tx, ip, AclKind::Access, Some(&acl), now)
}

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
