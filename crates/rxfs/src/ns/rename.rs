//! rename(2) on a transaction, with `RENAME_NOREPLACE` and
//! `RENAME_EXCHANGE`.
//!
//! ```text
//!  move S (sp/sname) to dp/dname:
//!    no target:      dp + dname -> S           (dp nlink + 1 if S is a dir
//!                                               and dp != sp)
//!    target T:       dp/dname retargeted to S; T nlink - 1 (a directory
//!                    T: nlink 0, dp nlink - 1); T freed at 0 links, or
//!                    put on the unlinked list when it is still open
//!    then:           sp - sname; a directory S moved to another parent
//!                    gets ".." = dp and sp nlink - 1
//!  whiteout W:      as a move, but sp/sname is retargeted to W (a 0:0
//!                    character device) instead of removed
//!  exchange S and T: both entries retargeted; directories moved to the
//!                    other parent get their ".." changed, and the parents'
//!                    link counts follow the directories
//! ```
//!
//! The caller holds the inode locks of sp, dp, S and T, has joined them,
//! and (for a move between directories) has checked that dp is not inside
//! S. Times: both parents get mtime = ctime = now; S and T get ctime.
//! Everything that can fail is checked first; the directory edits come
//! last (an error there cancels the transaction, which is always safe).

use super::{check_can_free, check_parent, ftype_of, inactivate, touch_parent, MAXLINK};
use crate::dir::dir_replace;
use crate::dir::{check_name, dir_add_from, dir_can_add, dir_is_empty, dir_lookup, dir_remove};
use crate::error::{Error, Result};
use crate::format::dinode_edit as di;
use crate::format::inode::Timestamp;
use crate::format::xflags::{flags_allow, Change};
use crate::types::{AgNumber, Ino};
use crate::xact::{InodeId, MetaTx};

/// The inodes of a rename, joined by the caller.
#[derive(Debug, Clone, Copy)]
pub struct RenameInodes {
    pub sdp: InodeId,
    pub ddp: InodeId,
    pub src: InodeId,
    /// The inode `dname` names now (`None`: no target).
    pub target: Option<InodeId>,
    /// `RENAME_WHITEOUT`: the inode that takes the source's name (see
    /// [`super::link::whiteout`]), given one link by the caller.
    pub whiteout: Option<InodeId>,
}

fn is_dir(tx: &dyn MetaTx, ip: InodeId) -> bool {
    di::mode(tx.inode(ip)) as u32 & di::S_IFMT == di::S_IFDIR
}

fn ino_of(tx: &dyn MetaTx, ip: InodeId) -> Ino {
    Ino(di::ino(tx.inode(ip)))
}

fn ftype(tx: &dyn MetaTx, ip: InodeId) -> Result<u8> {
    Ok(ftype_of(di::mode(tx.inode(ip)) as u32)?.1)
}

fn add_nlink(tx: &mut dyn MetaTx, ip: InodeId, delta: i32) {
    let d = tx.inode_mut(ip);
    let n = di::nlink(d).saturating_add_signed(delta);
    di::set_nlink(d, n);
}

fn touch_ctime(tx: &mut dyn MetaTx, ip: InodeId, now: Timestamp) {
    let d = tx.inode_mut(ip);
    di::set_ctime(d, now);
    di::bump_changecount(d, 1);
}

/// Check that the entries are still what the caller locked: `sname` names
/// `src`, `dname` names `target` (or nothing). `Ok(false)`: they changed.
pub fn entries_match(
    tx: &mut dyn MetaTx,
    ri: &RenameInodes,
    sname: &[u8],
    dname: &[u8],
) -> Result<bool> {
    let s = dir_lookup(tx, ri.sdp, sname)?;
    let t = dir_lookup(tx, ri.ddp, dname)?;
    let want_t = ri.target.map(|t| ino_of(tx, t));
    Ok(s == Some(ino_of(tx, ri.src)) && t == want_t)
}

/// Rename (see the module doc). `exchange` swaps the two entries;
/// `noreplace` fails with `Exists` when there is a target; `open` says
/// whether a target losing its last link is still open.
#[allow(clippy::too_many_arguments)]
pub fn rename(
    tx: &mut dyn MetaTx,
    ri: &RenameInodes,
    sname: &[u8],
    dname: &[u8],
    noreplace: bool,
    exchange: bool,
    now: Timestamp,
    open: &dyn Fn(Ino) -> bool,
) -> Result<()> {
    check_name(sname)?;
    check_name(dname)?;
    for n in [sname, dname] {
        if n == b"." || n == b".." {
            return Err(Error::Busy);
        }
    }
    check_parent(tx, ri.sdp)?;
    check_parent(tx, ri.ddp)?;
    let same_parent = ri.sdp == ri.ddp;
    let s_dir = is_dir(tx, ri.src);
    let s_ino = ino_of(tx, ri.src);
    if noreplace && !exchange && ri.target.is_some() {
        return Err(Error::Exists);
    }
    // The inode flags: the source's entry goes away (its directory and
    // itself neither immutable nor append-only), the target's too if
    // there is one, else the destination gains an entry (not immutable).
    // A rename onto another link of the same inode does nothing, allowed.
    let same_inode = ri.target.is_some_and(|t| ino_of(tx, t) == s_ino);
    if exchange || !same_inode {
        let flags = |tx: &dyn MetaTx, i: InodeId| di::flags(tx.inode(i));
        flags_allow(flags(tx, ri.sdp), Change::RemoveEntry)?;
        flags_allow(flags(tx, ri.src), Change::Unlink)?;
        match ri.target {
            None => flags_allow(flags(tx, ri.ddp), Change::AddEntry)?,
            Some(t) => {
                flags_allow(flags(tx, ri.ddp), Change::RemoveEntry)?;
                flags_allow(flags(tx, t), Change::Unlink)?;
            }
        }
    }
    if exchange {
        if ri.whiteout.is_some() {
            return Err(Error::Invalid(
                "RENAME_WHITEOUT with RENAME_EXCHANGE".into(),
            ));
        }
        let Some(t) = ri.target else {
            return Err(Error::NotFound);
        };
        return exchange_entries(tx, ri, t, sname, dname, now);
    }
    let Some(t) = ri.target else {
        // A plain move.
        if s_dir && !same_parent && di::nlink(tx.inode(ri.ddp)) >= MAXLINK {
            return Err(Error::TooManyLinks);
        }
        dir_can_add(tx, ri.ddp, dname, s_ino)?;
        let ft = ftype(tx, ri.src)?;
        dir_add_from(tx, ri.ddp, dname, s_ino, ft, false)?;
        return finish_move(tx, ri, sname, s_dir, now);
    };
    if noreplace {
        return Err(Error::Exists);
    }
    let t_ino = ino_of(tx, t);
    if t_ino == s_ino {
        // Two links to one inode: nothing to do (POSIX).
        return Ok(());
    }
    let t_dir = is_dir(tx, t);
    match (s_dir, t_dir) {
        (true, false) => return Err(Error::NotDir),
        (false, true) => return Err(Error::IsDir),
        // XFS answers EEXIST here (POSIX allows it or ENOTEMPTY).
        (true, true) if !dir_is_empty(tx, t)? => return Err(Error::Exists),
        _ => {}
    }
    let t_last = t_dir || di::nlink(tx.inode(t)) == 1;
    let t_keep = t_last && open(t_ino);
    if t_last && !t_keep {
        check_can_free(tx, t)?;
    }
    if t_last {
        // Lock order, as in unlink: the target's AGI before any AGF, then
        // (rmapbt) every AGF the directory edits and the freeing of the
        // target's blocks and chunk will take, ascending.
        crate::ialloc::lock_agi(tx, t_ino)?;
        let chunk_ag = [tx.geo().ino_agno(t_ino)];
        let (forks, also): (&[InodeId], &[AgNumber]) = if t_keep {
            (&[ri.sdp, ri.ddp], &[])
        } else {
            (&[ri.sdp, ri.ddp, t], &chunk_ag)
        };
        crate::bmap::prelock_fork_agfs(tx, forks, also)?;
    }
    let ft = ftype(tx, ri.src)?;
    dir_replace(tx, ri.ddp, dname, s_ino, ft)?;
    if t_dir {
        di::set_nlink(tx.inode_mut(t), 0);
        // T's ".." no longer counts for dp (S's is counted by
        // finish_move when S comes from another parent).
        add_nlink(tx, ri.ddp, -1);
    } else {
        add_nlink(tx, t, -1);
    }
    touch_ctime(tx, t, now);
    finish_move(tx, ri, sname, s_dir, now)?;
    if t_keep {
        crate::ialloc::unlinked::add(tx, t)?;
    } else if t_last {
        inactivate(tx, t, t_ino)?;
    }
    Ok(())
}

/// After the destination entry names S: remove the source entry, move a
/// directory's "..", and update link counts and times.
fn finish_move(
    tx: &mut dyn MetaTx,
    ri: &RenameInodes,
    sname: &[u8],
    s_dir: bool,
    now: Timestamp,
) -> Result<()> {
    let removed = match ri.whiteout {
        None => dir_remove(tx, ri.sdp, sname)?,
        Some(w) => {
            let (w_ino, w_ft) = (ino_of(tx, w), ftype(tx, w)?);
            touch_ctime(tx, w, now);
            dir_replace(tx, ri.sdp, sname, w_ino, w_ft)?
        }
    };
    if removed != ino_of(tx, ri.src) {
        return Err(Error::Invalid("rename source entry changed".into()));
    }
    let same_parent = ri.sdp == ri.ddp;
    if s_dir && !same_parent {
        let dp_ino = ino_of(tx, ri.ddp);
        let pft = ftype(tx, ri.ddp)?;
        dir_replace(tx, ri.src, b"..", dp_ino, pft)?;
        add_nlink(tx, ri.sdp, -1);
        add_nlink(tx, ri.ddp, 1);
    }
    touch_parent(tx, ri.sdp, now, 0);
    if !same_parent {
        touch_parent(tx, ri.ddp, now, 0);
    }
    touch_ctime(tx, ri.src, now);
    Ok(())
}

/// RENAME_EXCHANGE: swap the entries `sname` (S) and `dname` (T).
fn exchange_entries(
    tx: &mut dyn MetaTx,
    ri: &RenameInodes,
    t: InodeId,
    sname: &[u8],
    dname: &[u8],
    now: Timestamp,
) -> Result<()> {
    let (s_ino, t_ino) = (ino_of(tx, ri.src), ino_of(tx, t));
    if s_ino == t_ino {
        return Ok(());
    }
    let (s_dir, t_dir) = (is_dir(tx, ri.src), is_dir(tx, t));
    let same_parent = ri.sdp == ri.ddp;
    if !same_parent && s_dir != t_dir {
        // The parent gaining a directory gains a link.
        let gainer = if s_dir { ri.ddp } else { ri.sdp };
        if di::nlink(tx.inode(gainer)) >= MAXLINK {
            return Err(Error::TooManyLinks);
        }
    }
    let (sft, tft) = (ftype(tx, ri.src)?, ftype(tx, t)?);
    dir_replace(tx, ri.sdp, sname, t_ino, tft)?;
    dir_replace(tx, ri.ddp, dname, s_ino, sft)?;
    if !same_parent {
        let (sp_ino, dp_ino) = (ino_of(tx, ri.sdp), ino_of(tx, ri.ddp));
        let pft = ftype(tx, ri.sdp)?;
        if s_dir {
            dir_replace(tx, ri.src, b"..", dp_ino, pft)?;
        }
        if t_dir {
            dir_replace(tx, t, b"..", sp_ino, pft)?;
        }
        match (s_dir, t_dir) {
            (true, false) => {
                add_nlink(tx, ri.sdp, -1);
                add_nlink(tx, ri.ddp, 1);
            }
            (false, true) => {
                add_nlink(tx, ri.sdp, 1);
                add_nlink(tx, ri.ddp, -1);
            }
            _ => {}
        }
        touch_parent(tx, ri.ddp, now, 0);
    }
    touch_parent(tx, ri.sdp, now, 0);
    touch_ctime(tx, ri.src, now);
    touch_ctime(tx, t, now);
    Ok(())
}
