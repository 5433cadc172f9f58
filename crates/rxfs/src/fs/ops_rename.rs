//! rename(2) on a read-write mount, with `RENAME_NOREPLACE` and
//! `RENAME_EXCHANGE`.
//!
//! The source and target inodes are found with the read path first (to
//! know which inodes to lock); then the two parents and both inodes are
//! locked in inode order, and the transaction checks the entries again
//! (starting over, a bounded number of times, if they changed).
//! Renames between directories hold the mount's rename lock while they
//! check that a directory is not moved into its own subtree (walking
//! ".." up from the destination), so that no other such rename changes
//! the ancestry meanwhile.

use super::Filesystem;
use crate::error::{Error, Result};
use crate::ns::rename::{self as ns_rename, RenameInodes};
use crate::types::Ino;
use crate::xact::Resv;

/// renameat2 flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// Fail with `Exists` when the target name exists.
    pub noreplace: bool,
    /// Atomically swap the two entries (both must exist).
    pub exchange: bool,
    /// `RENAME_WHITEOUT`: leave a whiteout (a 0:0 character device, mode
    /// 0) owned by this (uid, gid) under the source name, in the same
    /// transaction (overlayfs upper layers).
    pub whiteout: Option<(u32, u32)>,
}

/// Tries when the entries change between the lookup and the locks.
const RELOOKUP_TRIES: usize = 8;

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
        crate::dir::check_name(sname)?;
        crate::dir::check_name(dname)?;
        if flags.exchange && (flags.noreplace || flags.whiteout.is_some()) {
            return Err(Error::Invalid(
                "RENAME_EXCHANGE with RENAME_NOREPLACE or RENAME_WHITEOUT".into(),
            ));
        }
        // The whiteout is made first, unnamed on its unlinked list (a
        // crash leaves nothing but an orphan recovery frees); the
        // rename's transaction names it. Whatever happens, an unused one
        // is freed afterwards.
        let w = match flags.whiteout {
            Some((uid, gid)) => Some(self.whiteout_inode(sp, uid, gid)?),
            None => None,
        };
        let r = self.rename_with(sp, sname, dp, dname, flags, w);
        if let Some(w) = w {
            let freed = self.free_unreferenced(w);
            r?;
            return freed;
        }
        r
    }

    /// The whiteout inode of a rename from directory `sp`.
    fn whiteout_inode(&self, sp: Ino, uid: u32, gid: u32) -> Result<Ino> {
        let args = super::ops_ns::CreateArgs {
            uid,
            gid,
            ..super::ops_ns::CreateArgs::root(crate::format::dinode_edit::S_IFCHR)
        };
        self.retry_from_ag0(&args, &mut |ns| {
            self.ns_transaction(Resv::Create, &[sp], &mut |tx| {
                let dp = tx.ijoin(sp)?;
                crate::ns::link::whiteout(tx, dp, ns).map(|(ino, _)| ino)
            })
        })
    }

    fn rename_with(
        &self,
        sp: Ino,
        sname: &[u8],
        dp: Ino,
        dname: &[u8],
        flags: RenameFlags,
        w: Option<Ino>,
    ) -> Result<()> {
        let rw = self.rw_live()?;
        let _cross = (sp != dp).then(|| rw.rename_lock.lock());
        for _ in 0..RELOOKUP_TRIES {
            let s = self.lookup(&*self.iget(sp)?, sname)?;
            let t = match self.lookup(&*self.iget(dp)?, dname) {
                Ok(i) => Some(i),
                Err(Error::NotFound) => None,
                Err(e) => return Err(e),
            };
            if flags.exchange && t.is_none() {
                return Err(Error::NotFound);
            }
            if flags.noreplace && t.is_some() {
                return Err(Error::Exists);
            }
            if sp != dp {
                if self.iget(s)?.core.mode as u32 & 0o170000 == 0o040000 {
                    self.check_not_inside(dp, s)?;
                }
                if let (true, Some(t)) = (flags.exchange, t) {
                    if self.iget(t)?.core.mode as u32 & 0o170000 == 0o040000 {
                        self.check_not_inside(sp, t)?;
                    }
                }
            }
            let mut inos = vec![sp, dp, s];
            inos.extend(t);
            let t0 = super::ops_ns::now();
            // A rename onto another link of the same inode does nothing,
            // and leaves no whiteout (as the VFS returns before XFS).
            let w = w.filter(|_| t != Some(s));
            let mut body =
                |tx: &mut dyn crate::xact::MetaTx, prev: Option<Ino>| -> Result<Option<bool>> {
                    let ri = RenameInodes {
                        sdp: tx.ijoin(sp)?,
                        ddp: tx.ijoin(dp)?,
                        src: tx.ijoin(s)?,
                        target: match t {
                            Some(t) => Some(tx.ijoin(t)?),
                            None => None,
                        },
                        whiteout: match w {
                            Some(w) => Some(tx.ijoin(w)?),
                            None => None,
                        },
                    };
                    if !ns_rename::entries_match(tx, &ri, sname, dname)? {
                        return Ok(Some(false));
                    }
                    if let Some(wp) = ri.whiteout {
                        // Off the unlinked list, one link: the rename names it.
                        let pp = match prev {
                            Some(p) => Some(tx.ijoin(p)?),
                            None => None,
                        };
                        if crate::ialloc::unlinked::remove(tx, wp, pp)?
                            != crate::ialloc::unlinked::Removed::Done
                        {
                            return Ok(None);
                        }
                        crate::format::dinode_edit::set_nlink(tx.inode_mut(wp), 1);
                    }
                    let open = |i: Ino| self.is_open(i) || self.staged_free(i);
                    ns_rename::rename(
                        tx,
                        &ri,
                        sname,
                        dname,
                        flags.noreplace,
                        flags.exchange,
                        t0,
                        &open,
                    )?;
                    Ok(Some(true))
                };
            let done = match w {
                // The whiteout's AGI and the target's (freed or put on its
                // unlinked list) are locked first, ascending.
                Some(w) => self.with_unlinked_prev(
                    Resv::Rename,
                    w,
                    &inos,
                    &t.map_or(vec![], |t| vec![t]),
                    &mut body,
                )?,
                None => self.ns_transaction(Resv::Rename, &inos, &mut |tx| {
                    body(tx, None).map(|r| r.unwrap_or(false))
                })?,
            };
            if done {
                return match (t, flags.exchange) {
                    (Some(t), false) => self.free_unreferenced(t),
                    _ => Ok(()),
                };
            }
        }
        Err(Error::Invalid(format!(
            "rename of {:?} kept racing with other changes",
            String::from_utf8_lossy(sname)
        )))
    }

    /// `Err(IntoItself)` when `dir` is `moved` or lies below it (walking
    /// ".." up to the root; bounded by the number of inodes).
    fn check_not_inside(&self, dir: Ino, moved: Ino) -> Result<()> {
        let root = self.root_ino();
        if moved == root {
            return Err(Error::Busy);
        }
        let mut cur = dir;
        for _ in 0..=self.sb().icount.max(64) {
            if cur == moved {
                return Err(Error::IntoItself);
            }
            if cur == root {
                return Ok(());
            }
            cur = self.lookup(&*self.iget(cur)?, b"..")?;
        }
        Err(Error::corrupt(
            "directory tree",
            crate::error::Location::Ino(dir.0),
            "\"..\" chain does not reach the root",
        ))
    }
}
