//! Access times: when a read of a file's data or a directory's entries
//! sets the inode's atime, by the kernel's rules (`touch_atime` and
//! `relatime_need_update` in the VFS).
//!
//! The mount's mode ([`AtimeMode`], the `noatime` / `relatime` /
//! `strictatime` mount options, relatime by default as in the kernel)
//! decides, then the inode:
//! - never on a read-only mount, with `noatime`, on an inode with the
//!   `noatime` flag (`chattr +A`), or on a directory with `nodiratime`;
//! - `strictatime`: whenever the clock (the coarse timestamp clock of
//!   [`crate::bmap::data::now`]) shows another time than atime;
//! - `relatime`: only if atime is not after mtime, not after ctime, or a
//!   day or more old: "was it read since it last changed?" stays
//!   answerable while a file read all day costs one update a day.
//!
//! The update is a timestamps-only transaction of the inode core (atime
//! alone: ctime and the change counter stay, as an atime update changes
//! neither in the kernel), so it is logged and recovered like any other
//! change, and `fdatasync` does not wait for it.
//!
//! Callers: the FUSE front end after each READ and READDIR it serves.
//! Reads the kernel serves from its page cache never reach the daemon;
//! the front end keeps a file's cache across opens only while no update
//! is due (see [`Filesystem::atime_update_due`]), so the first read after
//! an open that must update atime reaches [`Filesystem::touch_atime`].

use super::Filesystem;
use crate::bmap::data;
use crate::error::Result;
use crate::format::inode::{InodeCore, Timestamp, DIFLAG_NOATIME};
use crate::types::Ino;
use crate::xact::{MetaTx, Resv};

/// How reads update atime (the kernel's mount options of those names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AtimeMode {
    /// Never.
    NoAtime,
    /// When atime is not after mtime or ctime, or a day old (the
    /// kernel's default).
    #[default]
    Relatime,
    /// At every read whose time differs from atime.
    StrictAtime,
}

/// Seconds after which `relatime` updates atime however recent mtime and
/// ctime are (the kernel's one day).
pub const RELATIME_MAX_AGE_SECS: i64 = 24 * 60 * 60;

fn key(t: Timestamp) -> (i64, u32) {
    (t.sec, t.nsec)
}

/// Whether a read at `now` updates the atime of an inode with `core`
/// under `mode` (the inode's own `noatime` flag included; the mount's
/// read-only state and `nodiratime` are the caller's).
pub fn atime_due(mode: AtimeMode, core: &InodeCore, now: Timestamp) -> bool {
    if core.flags & DIFLAG_NOATIME != 0 || core.atime == now {
        return false;
    }
    match mode {
        AtimeMode::NoAtime => false,
        AtimeMode::StrictAtime => true,
        AtimeMode::Relatime => {
            key(core.mtime) >= key(core.atime)
                || key(core.ctime) >= key(core.atime)
                || now.sec - core.atime.sec >= RELATIME_MAX_AGE_SECS
        }
    }
}

impl Filesystem {
    /// Whether a read of an inode with `core` now would update its atime
    /// on this mount (mode, read-only, `nodiratime`, the inode's flag).
    pub fn atime_update_due(&self, core: &InodeCore) -> bool {
        let o = self.options();
        if o.read_only || self.rw().is_none() {
            return false;
        }
        let dir = u32::from(core.mode) & 0o170000 == 0o040000;
        if dir && o.nodiratime {
            return false;
        }
        atime_due(o.atime, core, data::now())
    }

    /// After a read of `ino`'s data or entries: set its atime to now if
    /// [`Self::atime_update_due`] says so. Returns whether it did.
    pub fn touch_atime(&self, ino: Ino) -> Result<bool> {
        // Cheap check first, on the cached inode: almost every read
        // updates nothing.
        if !self.atime_update_due(&self.iget(ino)?.core) {
            return Ok(false);
        }
        let _lock = self.ilock(ino)?;
        // Another read may have updated it meanwhile.
        let ip = self.iget(ino)?;
        if !self.atime_update_due(&ip.core) {
            return Ok(false);
        }
        let now = data::now();
        let mut tx = self.trans_alloc(Resv::SetAttr)?;
        let r = tx.ijoin(ino).map(|id| {
            crate::bmap::set_times(&mut tx, id, Some(now), None, None);
        });
        match r {
            Ok(()) => {
                tx.timestamps_only();
                tx.commit()?;
                Ok(true)
            }
            Err(e) => {
                tx.cancel();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(sec: i64) -> Timestamp {
        Timestamp { sec, nsec: 0 }
    }

    fn core(atime: i64, mtime: i64, ctime: i64) -> InodeCore {
        InodeCore {
            atime: ts(atime),
            mtime: ts(mtime),
            ctime: ts(ctime),
            ..InodeCore::default()
        }
    }

    #[test]
    fn relatime_rules() {
        let r = AtimeMode::Relatime;
        // Not read since the last change: update.
        assert!(atime_due(r, &core(100, 100, 100), ts(200)));
        assert!(atime_due(r, &core(100, 150, 100), ts(200)));
        assert!(atime_due(r, &core(100, 90, 150), ts(200)));
        // Read since: no update, until a day has passed.
        assert!(!atime_due(r, &core(150, 100, 100), ts(200)));
        assert!(atime_due(
            r,
            &core(150, 100, 100),
            ts(150 + RELATIME_MAX_AGE_SECS)
        ));
        // Same time as atime: nothing to do.
        assert!(!atime_due(r, &core(100, 100, 100), ts(100)));
    }

    #[test]
    fn strict_noatime_and_the_inode_flag() {
        let c = core(150, 100, 100);
        assert!(atime_due(AtimeMode::StrictAtime, &c, ts(151)));
        assert!(!atime_due(AtimeMode::StrictAtime, &c, ts(150)));
        assert!(!atime_due(AtimeMode::NoAtime, &core(1, 100, 100), ts(200)));
        let mut f = core(1, 100, 100);
        f.flags = DIFLAG_NOATIME;
        assert!(!atime_due(AtimeMode::StrictAtime, &f, ts(200)));
        assert!(!atime_due(AtimeMode::Relatime, &f, ts(200)));
    }
}
