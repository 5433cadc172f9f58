//! link, symlink and O_TMPFILE on a read-write mount, and the open
//! references that keep an unlinked inode alive (on the AGI unlinked list)
//! until its last user goes.
//!
//! Open references: the FUSE front end takes one per lookup/create reply
//! and drops them at `forget` (the kernel's lookup count); a library user
//! may do the same around its use of an inode. An inode with references
//! whose last link goes (unlink, rmdir, rename over it) is put on the AGI
//! unlinked list ([`crate::ialloc::unlinked`]) instead of being freed; the
//! last [`Filesystem::inode_unref`] frees it (blocks, then the inode, off
//! the list), and so does unmount for the ones still referenced. A crash
//! in between leaves it on the list for recovery.
//!
//! Locking: the reference count of an inode is read by the removals with
//! that inode's lock held, and the last unref decides under the same lock,
//! so a removal and a last unref never both miss (or both free) the inode.
//! Taking an inode off the list changes its predecessor there: the
//! predecessor is found first, then both inode locks are taken in inode
//! order and the transaction checks it is still the predecessor (else it
//! starts over, a bounded number of times).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::ops_ns::{now, CreateArgs};
use super::Filesystem;
use crate::error::{Error, Result};
use crate::format::dinode_edit as di;
use crate::ialloc::unlinked::{self, Removed};
use crate::inode::Inode;
use crate::ns::{self, link as ns_link};
use crate::types::Ino;
use crate::xact::{MetaTx, Resv};

/// Tries of an operation that takes an inode off an unlinked list when
/// its predecessor there keeps changing.
const PREV_TRIES: usize = 16;

/// Extents a file may have to be freed in the transaction that removes
/// its last link; a bigger one goes onto the unlinked list and is
/// truncated in steps of this many extents first (the kernel's
/// inactivation does the same in bounded transactions).
const FREE_STEP_EXTENTS: usize = 32;

/// The step [`Filesystem::with_unlinked_prev`] runs: `Ok(None)` = the
/// predecessor changed, start over.
type PrevStep<'a, T> = dyn FnMut(&mut dyn MetaTx, Option<Ino>) -> Result<Option<T>> + 'a;

/// Open references and O_TMPFILE inodes of a read-write mount.
#[derive(Default)]
pub struct OpenRefs {
    refs: Mutex<HashMap<u64, u64>>,
    /// Inodes created by [`Filesystem::tmpfile`] that may still be linked.
    linkable: Mutex<HashSet<u64>>,
    /// The frees of unlinked inodes, running and to come.
    frees: Mutex<Frees>,
    /// Signalled when a free ends.
    free_ended: parking_lot::Condvar,
}

/// How long after losing its last link a referenced inode counts as
/// about to be freed: through FUSE the kernel's FORGET of a removed file
/// follows the removal's reply within milliseconds, unless the file is
/// still open, which no wait should outlast much.
const ORPHAN_GRACE: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Frees {
    /// Frees now running (the last reference of an unlinked inode went,
    /// or its last link with no reference left).
    running: u64,
    /// Frees ended since the mount.
    ended: u64,
    /// Referenced inodes that lost their last link, and when.
    orphans: HashMap<u64, Instant>,
}

/// One running free, counted in [`OpenRefs::frees`] until dropped.
struct FreeRunning<'a>(&'a OpenRefs);

impl Drop for FreeRunning<'_> {
    fn drop(&mut self) {
        let mut f = self.0.frees.lock();
        f.running -= 1;
        f.ended += 1;
        self.0.free_ended.notify_all();
    }
}

impl OpenRefs {
    /// Whether `ino` has open references.
    pub fn is_open(&self, ino: Ino) -> bool {
        self.refs.lock().get(&ino.0).is_some_and(|&n| n > 0)
    }

    fn free_running(&self) -> FreeRunning<'_> {
        self.frees.lock().running += 1;
        FreeRunning(self)
    }

    /// `ino` lost its last link while referenced.
    fn orphaned(&self, ino: Ino) {
        self.frees
            .lock()
            .orphans
            .entry(ino.0)
            .or_insert_with(Instant::now);
    }

    /// `ino` was freed.
    fn not_orphan(&self, ino: Ino) {
        self.frees.lock().orphans.remove(&ino.0);
    }

    /// Frees ended since the mount: a mark taken before an allocation,
    /// for [`Self::wait_for_frees`].
    pub(super) fn frees_ended(&self) -> u64 {
        self.frees.lock().ended
    }

    /// At ENOSPC (the kernel flushes its queued inode inactivations
    /// then): wait for the frees pending now to end: those running, and
    /// those of inodes other than `held` that lost their last link less
    /// than [`ORPHAN_GRACE`] ago (their FORGET is likely on its way),
    /// each until it is freed or its grace is over. Frees that start
    /// later are not waited for (another thread removing file after file
    /// must not keep this one waiting). True if a free ended after the
    /// mark `since` ([`Self::frees_ended`] before the allocation failed:
    /// one that ended in between counts too).
    pub(super) fn wait_for_frees(&self, held: Ino, since: u64) -> bool {
        let mut f = self.frees.lock();
        // Frees end by themselves: none waits for an allocation.
        let running_end = f.ended + f.running;
        let now = Instant::now();
        let pending: Vec<(u64, Instant)> = f
            .orphans
            .iter()
            .filter(|(&i, _)| i != held.0)
            .map(|(&i, &t)| (i, t + ORPHAN_GRACE))
            .filter(|&(_, d)| d > now)
            .collect();
        loop {
            if f.ended < running_end {
                self.free_ended.wait(&mut f);
                continue;
            }
            let now = Instant::now();
            let until = pending
                .iter()
                .filter(|(i, d)| *d > now && f.orphans.contains_key(i))
                .map(|&(_, d)| d)
                .max();
            match until {
                Some(d) => {
                    self.free_ended.wait_until(&mut f, d);
                }
                None => return f.ended > since,
            }
        }
    }

    fn linkable(&self, ino: Ino) -> bool {
        self.linkable.lock().contains(&ino.0)
    }
}

impl Filesystem {
    /// Whether inode `ino` is held open (read-write mounts).
    pub(super) fn is_open(&self, ino: Ino) -> bool {
        self.rw().is_some_and(|rw| rw.open.is_open(ino))
    }

    /// Run `f` with `ino` (and the extra inodes `others`) locked in a
    /// transaction, where `ino` is on its unlinked list and `f` gets the
    /// predecessor there; `f` returning `Ok(None)` means "the predecessor
    /// changed": the transaction is cancelled and everything starts over.
    pub(super) fn with_unlinked_prev<T>(
        &self,
        resv: Resv,
        ino: Ino,
        others: &[Ino],
        agis_of: &[Ino],
        f: &mut PrevStep<'_, T>,
    ) -> Result<T> {
        let mut prev: Option<Ino> = None;
        for _ in 0..PREV_TRIES {
            let mut inos = vec![ino];
            inos.extend_from_slice(others);
            inos.extend(prev);
            let r = self.ns_transaction(resv, &inos, &mut |tx| {
                // The AGIs of `ino` and of `agis_of`, ascending, before
                // anything else takes one (lock order).
                let mut agis: Vec<Ino> = agis_of.iter().copied().chain([ino]).collect();
                agis.sort_by_key(|i| tx.geo().ino_agno(*i));
                for i in agis {
                    crate::ialloc::lock_agi(tx, i)?;
                }
                // Nothing changed yet: a stale guess only costs a retry.
                let id = tx.ijoin(ino)?;
                let on_list = di::nlink(tx.inode(id)) == 0;
                let actual = if on_list {
                    unlinked::find_prev(tx, ino)?
                } else {
                    None
                };
                if actual != prev {
                    return Ok(Err(actual));
                }
                match f(tx, prev)? {
                    Some(v) => Ok(Ok(v)),
                    None => Err(Error::Busy),
                }
            });
            match r {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(p)) => prev = p,
                Err(Error::Busy) => prev = None,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Invalid(format!(
            "unlinked list of inode {} kept changing",
            ino.0
        )))
    }

    /// A new hard link `name` in `parent` to the non-directory `ino`.
    pub fn link(&self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Arc<Inode>> {
        crate::dir::check_name(name)?;
        let rw = self.rw_live()?;
        let t = now();
        let linkable = rw.open.linkable(ino);
        self.with_unlinked_prev(Resv::Link, ino, &[parent], &[], &mut |tx, prev| {
            let dp = tx.ijoin(parent)?;
            let ip = tx.ijoin(ino)?;
            let pp = match prev {
                Some(p) => Some(tx.ijoin(p)?),
                None => None,
            };
            Ok(ns_link::link(tx, dp, ip, name, t, linkable, pp)?.then_some(()))
        })?;
        rw.open.linkable.lock().remove(&ino.0);
        self.iget_known(ino)
    }

    /// A symbolic link `name` in `parent` pointing at `target` (inline in
    /// the inode when it fits, else in remote blocks). `args.mode` file
    /// type bits are ignored (S_IFLNK | 0777).
    pub fn symlink(
        &self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        args: &CreateArgs,
    ) -> Result<Arc<Inode>> {
        crate::dir::check_name(name)?;
        let ino = self.retry_from_ag0(args, &mut |ns| {
            self.ns_transaction(Resv::Symlink, &[parent], &mut |tx| {
                let dp = tx.ijoin(parent)?;
                ns_link::symlink(tx, dp, name, target, ns).map(|(ino, _)| ino)
            })
        })?;
        self.iget_known(ino)
    }

    /// An unnamed regular file (O_TMPFILE): nlink 0, on the AGI unlinked
    /// list, holding one open reference ([`Filesystem::inode_ref`]); it
    /// is freed at its last [`Filesystem::inode_unref`] unless
    /// [`Filesystem::link`] gave it a name first.
    pub fn tmpfile(&self, parent: Ino, args: &CreateArgs) -> Result<Arc<Inode>> {
        let rw = self.rw_live()?;
        let ino = self.retry_from_ag0(args, &mut |ns| {
            self.ns_transaction(Resv::Create, &[parent], &mut |tx| {
                let dp = tx.ijoin(parent)?;
                ns_link::tmpfile(tx, dp, ns).map(|(ino, _)| ino)
            })
        })?;
        rw.open.linkable.lock().insert(ino.0);
        self.inode_ref(ino);
        self.iget_known(ino)
    }

    /// Take an open reference on `ino` (a FUSE lookup/create, an open file
    /// of a library user). While an inode has references, removing its
    /// last link puts it on the AGI unlinked list instead of freeing it.
    pub fn inode_ref(&self, ino: Ino) {
        if let Some(rw) = self.rw() {
            *rw.open.refs.lock().entry(ino.0).or_insert(0) += 1;
        }
    }

    /// Drop `n` open references on `ino` (FUSE forget); at the last one an
    /// unlinked inode is freed (its blocks, then the inode, off the
    /// unlinked list) in transactions.
    pub fn inode_unref(&self, ino: Ino, n: u64) -> Result<()> {
        let Some(rw) = self.rw() else {
            return Ok(());
        };
        let last = {
            let _l = self.ilock(ino)?;
            let mut refs = rw.open.refs.lock();
            match refs.get_mut(&ino.0) {
                Some(c) if *c > n => {
                    *c -= n;
                    false
                }
                Some(_) => {
                    refs.remove(&ino.0);
                    true
                }
                None => false,
            }
        };
        if last {
            let _running = rw.open.free_running();
            self.trim_eof(ino)?;
            // Only an unlinked inode is freed. Read after the reference
            // went: a removal that commits its last link later finds no
            // reference and frees the inode itself (free_unreferenced),
            // so skipping here on a linked inode leaves nothing behind.
            match self.iget(ino) {
                Ok(ip) if ip.core.mode != 0 && ip.core.nlink != 0 => {}
                _ => self.free_if_orphan(ino)?,
            }
        }
        Ok(())
    }

    /// Whether removing the last link of `ino` should leave the freeing
    /// to [`Filesystem::free_unreferenced`] (many extents or a btree fork).
    pub(super) fn staged_free(&self, ino: Ino) -> bool {
        match self.iget(ino) {
            Ok(ip) => {
                ip.core.format == crate::format::inode::FMT_BTREE
                    || ip.core.nextents > FREE_STEP_EXTENTS as u64
            }
            Err(_) => false,
        }
    }

    /// After a removal or rename: free `ino` if it lost its last link and
    /// nobody holds it.
    pub(super) fn free_unreferenced(&self, ino: Ino) -> Result<()> {
        if self.is_open(ino) {
            let rw = self.rw_live()?;
            if self
                .iget(ino)
                .is_ok_and(|ip| ip.core.mode != 0 && ip.core.nlink == 0)
            {
                rw.open.orphaned(ino);
            }
            return Ok(());
        }
        match self.iget(ino) {
            Ok(ip) if ip.core.mode != 0 && ip.core.nlink == 0 => {
                let _running = self.rw_live()?.open.free_running();
                self.free_if_orphan(ino)
            }
            _ => Ok(()),
        }
    }

    /// Truncate the data fork of the unlinked `ino` from its end, at most
    /// [`FREE_STEP_EXTENTS`] extents per transaction, until the rest fits
    /// one.
    fn truncate_in_steps(&self, ino: Ino) -> Result<()> {
        use crate::format::inode::{FMT_BTREE, FMT_EXTENTS};
        loop {
            let more = self.ns_transaction(Resv::Truncate, &[ino], &mut |tx| {
                let ip = tx.ijoin(ino)?;
                let d = tx.inode(ip);
                if di::nlink(d) != 0
                    || !matches!(di::format(d), FMT_EXTENTS | FMT_BTREE)
                    || di::mode(d) as u32 & di::S_IFMT != di::S_IFREG
                {
                    return Ok(false);
                }
                // Realtime extents are freed in the unmapping transaction:
                // fewer per step.
                let step = FREE_STEP_EXTENTS.min(crate::bmap::step_extents(d));
                let map = crate::bmap::read_map(tx, ip)?;
                if map.len() <= step {
                    return Ok(false);
                }
                let from = map[map.len() - step].off;
                crate::bmap::free_range(tx, ip, from)?;
                Ok(true)
            })?;
            if !more {
                return Ok(());
            }
        }
    }

    /// Free `ino` if it has no links and no references (it is then on
    /// its unlinked list).
    fn free_if_orphan(&self, ino: Ino) -> Result<()> {
        let rw = self.rw_live()?;
        // Its blocks go: no read may be using them.
        let _io = self.iolock(ino, true);
        self.truncate_in_steps(ino)?;
        self.with_unlinked_prev(Resv::Remove, ino, &[], &[], &mut |tx, prev| {
            let ip = tx.ijoin(ino)?;
            let d = tx.inode(ip);
            if di::mode(d) == 0 || di::nlink(d) != 0 || rw.open.is_open(ino) {
                return Ok(Some(()));
            }
            let pp = match prev {
                Some(p) => Some(tx.ijoin(p)?),
                None => None,
            };
            if unlinked::remove(tx, ip, pp)? != Removed::Done {
                return Ok(None);
            }
            ns::inactivate(tx, ip, ino)?;
            Ok(Some(()))
        })?;
        rw.open.linkable.lock().remove(&ino.0);
        rw.open.not_orphan(ino);
        Ok(())
    }

    /// Unmount: free every referenced inode that has lost its last link.
    pub(super) fn free_open_orphans(&self) -> Result<()> {
        let Some(rw) = self.rw() else {
            return Ok(());
        };
        let open: Vec<u64> = rw.open.refs.lock().drain().map(|(i, _)| i).collect();
        for ino in open {
            match self.iget(Ino(ino)) {
                Ok(ip) if ip.core.nlink == 0 => self.free_if_orphan(Ino(ino))?,
                _ => {}
            }
        }
        Ok(())
    }
}
