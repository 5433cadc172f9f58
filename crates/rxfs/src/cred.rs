//! Who makes a change: the caller's credentials, for the rules of Linux's
//! VFS that depend on them and that a filesystem reached through FUSE
//! must apply itself (the kernel leaves them to the daemon).
//!
//! - A data change by a caller without CAP_FSETID drops set-id bits of a
//!   regular file ([`Cred::privs_to_drop`], the VFS's
//!   `setattr_should_drop_suidgid`): set-uid always, set-gid when the
//!   group may execute, or when the caller is not in the file's group.
//!   XFS does it for every fallocate mode (`file_modified`); FUSE's kernel
//!   side does it for writes and truncates itself (a SETATTR of the mode),
//!   not for fallocate.
//! - Setting an access ACL (which rewrites the mode) drops set-gid when
//!   the caller is neither in the file's group nor has CAP_FSETID
//!   ([`Cred::in_group_or_capable`], the VFS's `posix_acl_update_mode`).
//!
//! [`Cred::root`] is the library's own caller (the command-line tools):
//! capable of everything, so nothing is dropped.

use crate::format::dinode_edit::{S_IFMT, S_IFREG, S_ISGID, S_ISUID, S_IXGRP};

/// A caller: its filesystem uid and gid, supplementary groups, and
/// whether it holds CAP_FSETID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// CAP_FSETID in the caller's effective set.
    pub fsetid: bool,
    /// CAP_SYS_ADMIN in the caller's effective set (shutdown, ...).
    pub sys_admin: bool,
}

impl Cred {
    /// The superuser with every capability (the library's default).
    pub fn root() -> Cred {
        Cred {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
            fsetid: true,
            sys_admin: true,
        }
    }

    /// Whether the caller is in group `gid` (primary or supplementary) or
    /// may act as if it were (CAP_FSETID).
    pub fn in_group_or_capable(&self, gid: u32) -> bool {
        self.fsetid || self.gid == gid || self.groups.contains(&gid)
    }

    /// The set-id bits of `mode` (an inode of group `file_gid`) that a
    /// data change by this caller clears (0 if none).
    pub fn privs_to_drop(&self, mode: u32, file_gid: u32) -> u32 {
        if self.fsetid || mode & S_IFMT != S_IFREG {
            return 0;
        }
        let mut drop = mode & S_ISUID;
        if mode & S_ISGID != 0 && (mode & S_IXGRP != 0 || !self.in_group_or_capable(file_gid)) {
            drop |= S_ISGID;
        }
        drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(gid: u32, groups: &[u32]) -> Cred {
        Cred {
            uid: 1000,
            gid,
            groups: groups.to_vec(),
            fsetid: false,
            sys_admin: false,
        }
    }

    #[test]
    fn privs_dropped_as_the_vfs_drops_them() {
        let reg = S_IFREG;
        // set-uid always goes for an unprivileged caller.
        assert_eq!(user(5, &[]).privs_to_drop(reg | 0o4755, 5), S_ISUID);
        // set-gid with group execute goes even for a group member.
        assert_eq!(user(5, &[]).privs_to_drop(reg | 0o2775, 5), S_ISGID);
        // set-gid without group execute stays for a member...
        assert_eq!(user(5, &[]).privs_to_drop(reg | 0o2666, 5), 0);
        assert_eq!(user(7, &[5]).privs_to_drop(reg | 0o2666, 5), 0);
        // ... and goes for anyone else.
        assert_eq!(user(7, &[8]).privs_to_drop(reg | 0o2666, 5), S_ISGID);
        assert_eq!(
            user(7, &[]).privs_to_drop(reg | 0o6666, 5),
            S_ISUID | S_ISGID
        );
        // CAP_FSETID keeps everything; directories are never touched.
        assert_eq!(Cred::root().privs_to_drop(reg | 0o6777, 5), 0);
        assert_eq!(user(7, &[]).privs_to_drop(0o040000 | 0o6777, 5), 0);
        assert!(Cred::root().in_group_or_capable(12345));
        assert!(!user(7, &[8]).in_group_or_capable(5));
    }
}
