//! The credentials of a FUSE request's caller, for the rules the kernel
//! leaves to the daemon (set-id bits dropped by fallocate and by an ACL
//! that rewrites the mode, see `rxfs::cred`; CAP_SYS_ADMIN for the
//! shutdown ioctl).
//!
//! A request carries the caller's filesystem uid and gid and its pid;
//! supplementary groups and capabilities are read from
//! `/proc/PID/status` (`Groups:` and `CapEff:`). The pid is the kernel's
//! translation into the daemon's pid namespace. If the process is gone
//! or unreadable (pid 0 for requests the kernel makes itself), the caller
//! is taken as its uid alone: uid 0 capable, anyone else in its primary
//! group only, which errs towards dropping a set-gid bit, never towards
//! keeping one it should not.

use super::wire::Request;
use rxfs::cred::Cred;

/// Bits in the capability sets.
const CAP_FSETID: u32 = 4;
const CAP_SYS_ADMIN: u32 = 21;

/// Who sent a request, as its header says; [`Asker::cred`] reads the
/// rest (only when a rule needs it: it costs a read of `/proc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asker {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
    /// Whether the caller holds CAP_FSETID, when the request says so
    /// (FUSE_HANDLE_KILLPRIV_V2: a WRITE or truncate by a caller without
    /// it carries a KILL_SUIDGID flag); None: read it from `/proc`.
    pub fsetid: Option<bool>,
}

impl Asker {
    pub fn of(req: &Request) -> Asker {
        Asker {
            uid: req.uid(),
            gid: req.gid(),
            pid: req.pid(),
            fsetid: None,
        }
    }

    /// The same caller, CAP_FSETID as the request told.
    pub fn with_fsetid(self, fsetid: Option<bool>) -> Asker {
        Asker { fsetid, ..self }
    }

    pub fn cred(&self) -> Cred {
        let mut c = caller_cred(self.uid, self.gid, self.pid);
        if let Some(f) = self.fsetid {
            c.fsetid = f;
        }
        c
    }
}

/// The caller of a request with fs uid `uid`, fs gid `gid`, pid `pid`.
pub fn caller_cred(uid: u32, gid: u32, pid: u32) -> Cred {
    let status = (pid != 0)
        .then(|| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .flatten();
    match status {
        Some(s) => from_status(uid, gid, &s),
        None => Cred {
            uid,
            gid,
            groups: Vec::new(),
            fsetid: uid == 0,
            sys_admin: uid == 0,
        },
    }
}

/// Parse the `Uid:`, `Gid:`, `Groups:` and `CapEff:` lines of a
/// `/proc/PID/status` text. The filesystem ids (the fourth of `Uid:` and
/// `Gid:`) win over the request's: with FUSE_ALLOW_IDMAP the kernel sends
/// requests other than creates with -1 there.
fn from_status(uid: u32, gid: u32, status: &str) -> Cred {
    let (mut uid, mut gid) = (uid, gid);
    let mut groups = Vec::new();
    let mut caps = 0u64;
    let fs_id = |v: &str| {
        v.split_whitespace()
            .nth(3)
            .and_then(|x| x.parse::<u32>().ok())
    };
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("Uid:") {
            uid = fs_id(v).unwrap_or(uid);
        } else if let Some(v) = line.strip_prefix("Gid:") {
            gid = fs_id(v).unwrap_or(gid);
        } else if let Some(g) = line.strip_prefix("Groups:") {
            groups = g
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
        } else if let Some(c) = line.strip_prefix("CapEff:") {
            caps = u64::from_str_radix(c.trim(), 16).unwrap_or(0);
        }
    }
    Cred {
        uid,
        gid,
        groups,
        fsetid: caps & (1 << CAP_FSETID) != 0,
        sys_admin: caps & (1 << CAP_SYS_ADMIN) != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_give_groups_and_fsetid() {
        let s = "Name:\tsh\nUid:\t1000\t1000\t1000\t1001\nGid:\t7\t7\t7\t8\nGroups:\t4 24 1000 \nCapInh:\t0000000000000000\nCapEff:\t0000000000000000\n";
        // The filesystem ids of the status win (idmapped requests carry -1).
        let c = from_status(u32::MAX, u32::MAX, s);
        assert_eq!((c.uid, c.gid), (1001, 8));
        assert_eq!(c.groups, vec![4, 24, 1000]);
        assert!(!c.fsetid);
        let root = "Groups:\nCapEff:\t000001ffffffffff\n";
        let c = from_status(0, 0, root);
        assert!(c.groups.is_empty());
        assert!(c.fsetid && c.sys_admin);
        // Each capability by its own bit.
        let c = from_status(0, 0, "CapEff:\t0000000000000020\n");
        assert!(!c.fsetid && !c.sys_admin);
        let c = from_status(0, 0, "CapEff:\t0000000000000010\n");
        assert!(c.fsetid && !c.sys_admin);
        let c = from_status(0, 0, "CapEff:\t0000000000200000\n");
        assert!(!c.fsetid && c.sys_admin);
    }

    #[test]
    fn this_process_is_read_from_proc() {
        let me = std::process::id();
        let c = caller_cred(1234, 5678, me);
        let want = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(c, from_status(1234, 5678, &want));
        // SAFETY: getuid/getgid cannot fail.
        assert_eq!((c.uid, c.gid), unsafe { (libc::getuid(), libc::getgid()) });
        // A pid that cannot exist: the uid alone decides.
        assert!(!caller_cred(1000, 1000, u32::MAX).fsetid);
        assert!(caller_cred(0, 0, 0).fsetid);
    }
}
