//! POSIX ACLs: XFS keeps them as ordinary attributes in the trusted
//! ("ROOT") namespace, named `SGI_ACL_FILE` (access ACL) and
//! `SGI_ACL_DEFAULT` (default ACL of a directory), in a big-endian format
//! of its own. Linux shows them as `system.posix_acl_access` /
//! `system.posix_acl_default` in the generic little-endian xattr format.
//!
//! XFS value (big-endian):
//! ```text
//! 0 count u32
//! 4 entries[count] { tag u32, id u32, perm u16, pad u16 }   (12 bytes each)
//! ```
//! Linux xattr value (little-endian):
//! ```text
//! 0 version u32 = 2
//! 4 entries[count] { tag u16, perm u16, id u32 }            (8 bytes each)
//! ```
//! Tags are the same numbers in both: USER_OBJ 0x01, USER 0x02,
//! GROUP_OBJ 0x04, GROUP 0x08, MASK 0x10, OTHER 0x20. Only USER and GROUP
//! entries carry an id; Linux reports the others with id 0xffffffff
//! whatever the disk says. Entry order is kept.
//!
//! The value must be exactly `4 + 12 * count` bytes with `count` at most
//! what a 64 KiB attribute can hold; otherwise the attribute is corrupt.
//! An unknown tag makes the ACL invalid (the kernel answers EINVAL).

use super::{be16, be32};
use crate::error::{Error, Location, Result};
use crate::types::Ino;

/// On-disk name (trusted namespace) of the access ACL.
pub const SGI_ACL_FILE: &[u8] = b"SGI_ACL_FILE";
/// On-disk name (trusted namespace) of a directory's default ACL.
pub const SGI_ACL_DEFAULT: &[u8] = b"SGI_ACL_DEFAULT";
pub const XATTR_POSIX_ACL_ACCESS: &[u8] = b"system.posix_acl_access";
pub const XATTR_POSIX_ACL_DEFAULT: &[u8] = b"system.posix_acl_default";

pub const ACL_USER_OBJ: u16 = 0x01;
pub const ACL_USER: u16 = 0x02;
pub const ACL_GROUP_OBJ: u16 = 0x04;
pub const ACL_GROUP: u16 = 0x08;
pub const ACL_MASK: u16 = 0x10;
pub const ACL_OTHER: u16 = 0x20;
pub const ACL_UNDEFINED_ID: u32 = u32::MAX;

pub const POSIX_ACL_XATTR_VERSION: u32 = 2;
const XFS_ACL_HDR: usize = 4;
const XFS_ACL_ENTRY: usize = 12;
/// Most entries a 64 KiB attribute value can hold.
pub const XFS_ACL_MAX_ENTRIES: usize =
    (super::attr::XATTR_SIZE_MAX as usize - XFS_ACL_HDR) / XFS_ACL_ENTRY;

/// The Linux name an ACL attribute is shown under, for an on-disk trusted
/// attribute name; `None` if the name is not an ACL.
pub fn acl_xattr_name(trusted_name: &[u8]) -> Option<&'static [u8]> {
    match trusted_name {
        SGI_ACL_FILE => Some(XATTR_POSIX_ACL_ACCESS),
        SGI_ACL_DEFAULT => Some(XATTR_POSIX_ACL_DEFAULT),
        _ => None,
    }
}

/// The on-disk trusted attribute behind a `system.posix_acl_*` name.
pub fn acl_disk_name(xattr_name: &[u8]) -> Option<&'static [u8]> {
    match xattr_name {
        XATTR_POSIX_ACL_ACCESS => Some(SGI_ACL_FILE),
        XATTR_POSIX_ACL_DEFAULT => Some(SGI_ACL_DEFAULT),
        _ => None,
    }
}

/// Convert an XFS ACL value of inode `ino` to the Linux xattr format.
pub fn xfs_acl_to_xattr(v: &[u8], ino: Ino) -> Result<Vec<u8>> {
    let at = Location::Ino(ino.0);
    if v.len() < XFS_ACL_HDR {
        return Err(Error::corrupt(
            "ACL",
            at,
            format!("value of {} bytes", v.len()),
        ));
    }
    let count = be32(v, 0) as usize;
    if count > XFS_ACL_MAX_ENTRIES || XFS_ACL_HDR + count * XFS_ACL_ENTRY != v.len() {
        return Err(Error::corrupt(
            "ACL",
            at,
            format!("{count} entries in a {}-byte value", v.len()),
        ));
    }
    let mut out = Vec::with_capacity(4 + 8 * count);
    out.extend_from_slice(&POSIX_ACL_XATTR_VERSION.to_le_bytes());
    for i in 0..count {
        let e = XFS_ACL_HDR + i * XFS_ACL_ENTRY;
        let tag = be32(v, e);
        let id = be32(v, e + 4);
        let perm = be16(v, e + 8);
        let id = match u16::try_from(tag) {
            Ok(ACL_USER | ACL_GROUP) => id,
            Ok(ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_MASK | ACL_OTHER) => ACL_UNDEFINED_ID,
            _ => {
                return Err(Error::Invalid(format!(
                    "inode {}: ACL entry {i} has unknown tag {tag:#x}",
                    ino.0
                )))
            }
        };
        out.extend_from_slice(&(tag as u16).to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    Ok(out)
}

/// One ACL entry, in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclEntry {
    pub tag: u16,
    pub perm: u16,
    /// uid/gid for USER/GROUP entries; [`ACL_UNDEFINED_ID`] for the others.
    pub id: u32,
}

/// Decode a Linux xattr ACL value (version 2, little-endian). `Ok(None)`
/// for an empty ACL (header only), which removes the ACL. Errors as Linux
/// gives them: a short or ragged value or unknown tag is `Invalid`, a
/// version other than 2 is `NotSupported`. Ids of entries other than
/// USER/GROUP are ignored.
pub fn decode_xattr(v: &[u8]) -> Result<Option<Vec<AclEntry>>> {
    if v.len() < 4 {
        return Err(Error::Invalid(format!("ACL value of {} bytes", v.len())));
    }
    let version = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
    if version != POSIX_ACL_XATTR_VERSION {
        return Err(Error::NotSupported(format!("ACL xattr version {version}")));
    }
    if !(v.len() - 4).is_multiple_of(8) {
        return Err(Error::Invalid(format!("ACL value of {} bytes", v.len())));
    }
    let count = (v.len() - 4) / 8;
    if count == 0 {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let e = &v[4 + 8 * i..12 + 8 * i];
        let tag = u16::from_le_bytes([e[0], e[1]]);
        let perm = u16::from_le_bytes([e[2], e[3]]);
        let id = match tag {
            ACL_USER | ACL_GROUP => u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_MASK | ACL_OTHER => ACL_UNDEFINED_ID,
            _ => return Err(Error::Invalid(format!("ACL entry {i} has tag {tag:#x}"))),
        };
        out.push(AclEntry { tag, perm, id });
    }
    Ok(Some(out))
}

/// Encode entries in the Linux xattr format.
pub fn encode_xattr(acl: &[AclEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 8 * acl.len());
    out.extend_from_slice(&POSIX_ACL_XATTR_VERSION.to_le_bytes());
    for e in acl {
        out.extend_from_slice(&e.tag.to_le_bytes());
        out.extend_from_slice(&e.perm.to_le_bytes());
        out.extend_from_slice(&e.id.to_le_bytes());
    }
    out
}

/// Encode entries in the XFS on-disk format (the inverse of
/// [`xfs_acl_to_xattr`]): object entries get id 0xffffffff, as the kernel
/// writes them. At most [`XFS_ACL_MAX_ENTRIES`] entries (the caller checks).
pub fn encode_xfs(acl: &[AclEntry]) -> Vec<u8> {
    debug_assert!(acl.len() <= XFS_ACL_MAX_ENTRIES);
    let mut out = Vec::with_capacity(XFS_ACL_HDR + XFS_ACL_ENTRY * acl.len());
    out.extend_from_slice(&(acl.len() as u32).to_be_bytes());
    for e in acl {
        let id = match e.tag {
            ACL_USER | ACL_GROUP => e.id,
            _ => ACL_UNDEFINED_ID,
        };
        out.extend_from_slice(&(e.tag as u32).to_be_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&e.perm.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
    out
}

/// Decode an XFS on-disk ACL of inode `ino` into entries.
pub fn decode_xfs(v: &[u8], ino: Ino) -> Result<Vec<AclEntry>> {
    let x = xfs_acl_to_xattr(v, ino)?;
    Ok(decode_xattr(&x)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `setfacl -m u:1234:rw` on a 0644 file, as the kernel stored it and
    /// as the kernel's getxattr returned it (getfattr -e hex).
    #[test]
    fn kernel_pair() {
        let disk = hex(
            "0000000500000001ffffffff0006000000000002000004d20006000000000004\
             ffffffff0004000000000010ffffffff0006000000000020ffffffff00040000",
        );
        let want = hex(
            "0200000001000600ffffffff02000600d204000004000400ffffffff10000600\
             ffffffff20000400ffffffff",
        );
        assert_eq!(xfs_acl_to_xattr(&disk, Ino(1)).unwrap(), want);
    }

    #[test]
    fn ids_of_object_entries_are_undefined() {
        // USER_OBJ with id 7 on disk is still reported as 0xffffffff.
        let mut d = vec![0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 7, 0, 6, 0, 0];
        let x = xfs_acl_to_xattr(&d, Ino(1)).unwrap();
        assert_eq!(&x[8..12], &[0xff; 4]);
        // Unknown tag: invalid, not corrupt.
        d[7] = 0x40;
        assert!(matches!(
            xfs_acl_to_xattr(&d, Ino(1)),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn bad_sizes() {
        assert!(xfs_acl_to_xattr(&[0, 0], Ino(1)).unwrap_err().is_corrupt());
        // count says 2, one entry present.
        let d = vec![0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 7, 0, 6, 0, 0];
        assert!(xfs_acl_to_xattr(&d, Ino(1)).unwrap_err().is_corrupt());
        // Huge count does not allocate: rejected first.
        let d = vec![0xff, 0xff, 0xff, 0xff];
        assert!(xfs_acl_to_xattr(&d, Ino(1)).unwrap_err().is_corrupt());
        // Empty ACL: header only.
        assert_eq!(xfs_acl_to_xattr(&[0; 4], Ino(1)).unwrap(), vec![2, 0, 0, 0]);
    }

    #[test]
    fn xfs_encoder_inverts_the_kernel_pair() {
        let disk = hex(
            "0000000500000001ffffffff0006000000000002000004d20006000000000004\
             ffffffff0004000000000010ffffffff0006000000000020ffffffff00040000",
        );
        let x = xfs_acl_to_xattr(&disk, Ino(1)).unwrap();
        let entries = decode_xattr(&x).unwrap().unwrap();
        assert_eq!(entries.len(), 5);
        assert_eq!(encode_xfs(&entries), disk);
        assert_eq!(encode_xattr(&entries), x);
        assert_eq!(decode_xattr(&[2, 0, 0, 0]).unwrap(), None);
        assert!(matches!(
            decode_xattr(&[3, 0, 0, 0]),
            Err(Error::NotSupported(_))
        ));
        assert!(matches!(
            decode_xattr(&[2, 0, 0, 0, 1]),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn names() {
        assert_eq!(
            acl_xattr_name(b"SGI_ACL_FILE"),
            Some(XATTR_POSIX_ACL_ACCESS)
        );
        assert_eq!(
            acl_xattr_name(b"SGI_ACL_DEFAULT"),
            Some(XATTR_POSIX_ACL_DEFAULT)
        );
        assert_eq!(acl_xattr_name(b"SGI_ACL_FILEX"), None);
        assert_eq!(
            acl_disk_name(b"system.posix_acl_access"),
            Some(SGI_ACL_FILE)
        );
        assert_eq!(acl_disk_name(b"system.foo"), None);
    }
}
