//! The AGI unlinked lists at run time: an inode whose last link goes while
//! it is still open (or an O_TMPFILE inode) is put on a list, so that a
//! crash before its last close leaves it for recovery to free
//! ([`crate::recover::iunlink`]).
//!
//! ```text
//!  AGI unlinked[b] ──> agino A ──di_next_unlinked──> agino B ──> NULLAGINO
//!  (b = agino % 64 for every inode on list b)
//!
//!  add X:     X.next = unlinked[b]; unlinked[b] = X
//!  remove X:  X at the head: unlinked[b] = X.next
//!             else:          P.next = X.next  (P: X's predecessor)
//!             X.next = NULLAGINO
//! ```
//!
//! Logging (the kernel's rule, which recovery relies on): recovery rebuilds
//! an inode from its inode item but keeps the on-disk `di_next_unlinked`;
//! the pointer is replayed only from inode-buffer (`INODE_BUF`) items of
//! the inode's cluster. So every pointer change is made in the inode and,
//! logged, in its cluster buffer ([`set_next`]); a change carried by the
//! inode item alone would be lost by a crash once the inode had been
//! written back, leaving a list that names an inode no longer on it.
//!
//! Locking: the AGI buffer (held by the transaction until it commits)
//! serialises every change to the lists of its AG. Changing a predecessor
//! `P` changes another inode, whose inode lock the caller must hold: the
//! caller finds `P` first with [`find_prev`] (under the AGI, read-only),
//! cancels, locks both inodes in inode order, and calls [`remove`] with
//! `P` joined; [`remove`] checks that `P` still points at `X` under the
//! AGI, and reports [`Removed::Retry`] otherwise.
//!
//! Bounds: a walk visits at most as many inodes as the AG has inode slots;
//! more is a cycle, reported as corruption.

use super::agi;
use crate::error::{Error, Location, Result};
use crate::format::bufkind::BufKind;
use crate::format::dinode_edit as de;
use crate::format::{be16, crc};
use crate::types::{AgIno, AgNumber, Ino};
use crate::xact::{InodeId, MetaTx};

const NULLAGINO: u32 = de::NULLAGINO;

fn slot(agino: u32) -> usize {
    agi::UNLINKED + 4 * (agino % agi::UNLINKED_BUCKETS) as usize
}

fn corrupt(ino: Ino, d: String) -> Error {
    Error::corrupt("unlinked inode list", Location::Ino(ino.0), d)
}

/// Magic of an on-disk inode.
const INODE_MAGIC: u16 = 0x494e;

/// Set `di_next_unlinked` of the joined inode `ip` to `v`, in the inode
/// and, logged, in its inode cluster buffer (see the module doc). The
/// cluster buffer's copy of the inode may be older than the inode item's
/// (the item not written back yet): only the pointer and that inode's CRC
/// change in it; the newer core comes with the inode item.
pub fn set_next(tx: &mut dyn MetaTx, ip: InodeId, v: u32) -> Result<()> {
    de::set_next_unlinked(tx.inode_mut(ip), v);
    let ino = Ino(de::ino(tx.inode(ip)));
    let (cdaddr, clen, boff) = tx.geo().inode_cluster(ino);
    let isize = tx.geo().inodesize as usize;
    let b = tx.read_buf(cdaddr, clen as usize * 512, BufKind::Dino)?;
    let (lo, hi) = (boff as usize, boff as usize + isize);
    let d = &mut tx.buf_mut(b)[lo..hi];
    if be16(d, 0) != INODE_MAGIC || de::ino(d) != ino.0 {
        return Err(corrupt(
            ino,
            "its inode cluster buffer holds another inode".into(),
        ));
    }
    de::set_next_unlinked(d, v);
    crc::update(d, crate::format::inode::DINODE_CRC_OFF);
    let f = lo + de::off::NEXT_UNLINKED;
    tx.log_buf(b, f..f + 4);
    Ok(())
}

/// Put the joined inode `ip` (link count 0) at the head of its AG's
/// unlinked list.
pub fn add(tx: &mut dyn MetaTx, ip: InodeId) -> Result<()> {
    let ino = Ino(de::ino(tx.inode(ip)));
    let (agno, agino) = (tx.geo().ino_agno(ino), tx.geo().ino_agino(ino).0);
    if de::nlink(tx.inode(ip)) != 0 {
        return Err(Error::Invalid(format!(
            "inode {} put on the unlinked list with links",
            ino.0
        )));
    }
    if de::next_unlinked(tx.inode(ip)) != NULLAGINO {
        return Err(corrupt(ino, "already on an unlinked list".into()));
    }
    let b = agi::read(tx, agno)?;
    let off = slot(agino);
    let head = agi::get(tx, b, off);
    if head == agino {
        return Err(corrupt(ino, "already at the head of its list".into()));
    }
    set_next(tx, ip, head)?;
    agi::set(tx, b, off, agino);
    Ok(())
}

/// The inode before `ino` on its unlinked list (`None`: `ino` is the
/// head). Read-only; `Err` (corruption) if `ino` is not on its list.
pub fn find_prev(tx: &mut dyn MetaTx, ino: Ino) -> Result<Option<Ino>> {
    let (agno, agino) = (tx.geo().ino_agno(ino), tx.geo().ino_agino(ino).0);
    let b = agi::read(tx, agno)?;
    let mut cur = agi::get(tx, b, slot(agino));
    if cur == agino {
        return Ok(None);
    }
    let cap = (tx.geo().ag_size(agno) as u64) << tx.geo().inopblog;
    let mut steps = 0u64;
    while cur != NULLAGINO {
        steps += 1;
        if steps > cap || cur % agi::UNLINKED_BUCKETS != agino % agi::UNLINKED_BUCKETS {
            return Err(corrupt(
                ino,
                format!("bad or cyclic list at AG inode {cur}"),
            ));
        }
        let c = tx.geo().agino_to_ino(agno, AgIno(cur));
        if !tx.geo().ino_valid(c) {
            return Err(corrupt(ino, format!("list names AG inode {cur}")));
        }
        let next = de::next_unlinked(&tx.read_dinode_raw(c)?);
        if next == agino {
            return Ok(Some(c));
        }
        cur = next;
    }
    Err(corrupt(ino, "not on its unlinked list".into()))
}

/// What [`remove`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    Done,
    /// The predecessor is not `prev` (any more): look it up again.
    Retry(Option<Ino>),
}

/// Take the joined inode `ip` off its unlinked list; `prev` is its
/// predecessor as [`find_prev`] found it, joined by the caller (its inode
/// lock held), or `None` when it was the head.
pub fn remove(tx: &mut dyn MetaTx, ip: InodeId, prev: Option<InodeId>) -> Result<Removed> {
    let ino = Ino(de::ino(tx.inode(ip)));
    let (agno, agino): (AgNumber, u32) = (tx.geo().ino_agno(ino), tx.geo().ino_agino(ino).0);
    let actual = find_prev(tx, ino)?;
    let want = prev.map(|p| Ino(de::ino(tx.inode(p))));
    if actual != want {
        return Ok(Removed::Retry(actual));
    }
    let next = de::next_unlinked(tx.inode(ip));
    match prev {
        None => {
            let b = agi::read(tx, agno)?;
            agi::set(tx, b, slot(agino), next);
        }
        Some(p) => {
            if de::next_unlinked(tx.inode(p)) != agino {
                return Ok(Removed::Retry(actual));
            }
            set_next(tx, p, next)?;
        }
    }
    set_next(tx, ip, NULLAGINO)?;
    Ok(Removed::Done)
}
