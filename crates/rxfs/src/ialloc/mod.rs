//! Inode allocation: chunks, the inode btrees and the AGI.
//!
//! Inodes live in chunks of 64 (`chunk`); each allocated chunk has one
//! inobt record (first AG inode, hole mask, count, free count, free
//! bitmap), and, with the finobt feature, a copy in the finobt while it
//! has free inodes (`irec`). The AGI counts the AG's inodes
//! (`agi_count`), its free ones (`agi_freecount`) and remembers the last
//! chunk made (`agi_newino`); the superblock's `icount`/`ifree` are lazy
//! counters changed through [`MetaTx::mod_sb`]. Whether an inode number
//! is allocated, for the read path: [`read`].
//!
//! ```text
//!  ialloc(parent, init)
//!    for each AG in order (files: the parent's AG first; directories: a
//!                          rotor over the AGs):
//!      AGI freecount > 0 -> take a free inode: finobt record near the
//!                           parent (or at agi_newino, or leftmost); without
//!                           finobt the parent's, agi_newino's or the
//!                           leftmost inobt record with one free
//!      else              -> new chunk: whole and aligned, else (sparse
//!                           inodes) a sparse piece; NoSpace: next AG;
//!                           then take from it
//!    clear the free bit: inobt update; finobt update, or delete when the
//!    chunk became full; AGI freecount - 1; sb ifree - 1
//!    new dinode (format::dinode_edit::init_dinode, plus what it inherits
//!    from the parent directory: dinode_edit::inherit) -> ijoin_new
//!
//!  ifree(ip, ino)      nlink 0, no blocks, on no unlinked list
//!    set the free bit: inobt update; finobt update or insert; AGI
//!    freecount + 1; sb ifree + 1; dinode: mode 0, gen + 1, empty forks
//! ```
//!
//! Invariants kept (what xfs_repair checks): for every chunk record
//! `freecount == popcount(free & present)` and `count == 64 - 4 *
//! holes`; the finobt holds exactly the records with `freecount > 0`,
//! identical to their inobt records; `agi_count`/`agi_freecount` are the
//! sums over the records; sb icount/ifree the sums over the AGs; a free
//! inode has mode 0.
//!
//! Generation numbers: a new chunk gets a random one (logged in the
//! ICREATE item) which its first-allocated inode keeps; reusing a freed
//! inode takes its on-disk generation (already bumped by [`ifree`]) plus
//! one, so a file handle to any earlier incarnation goes stale. (The
//! kernel draws a fresh random generation for every created inode on v5;
//! either way it differs from the previous incarnation's.)
//!
//! Limits: chunks are never freed (a fully free chunk stays allocated and
//! in both trees, which xfs_repair accepts; the kernel frees it unless
//! mounted `ikeep`); no `sb_imax_pct` limit check (it needs the global
//! icount); stripe alignment of chunks is ignored (cluster alignment
//! only); no space is held back for inobt/finobt splits after the chunk
//! allocation (near ENOSPC the split's own allocation may fail and the
//! transaction must be cancelled). With an rmapbt, new chunks get an
//! OWN_INODES record and inode btree blocks OWN_INOBT ones.
//! Inodes on an AGI unlinked list cannot be freed here.
//!
//! Lock order: the AGIs are joined in the order the AGs are tried, which
//! wraps around to AG 0 after the last AG; a transaction that moved past
//! its starting AG therefore holds a higher AGI while taking a lower one.
//! MemTx does not care; the logged transaction must avoid a deadlock by
//! serialising such wrap-arounds (the kernel uses in-core per-AG counters
//! to skip AGs without taking their AGI).

mod agi;
mod chunk;
mod irec;
pub mod read;
pub mod unlinked;

use std::sync::atomic::Ordering;

use crate::btree::{Lookup, Tree};
use crate::error::{Error, Location, Result};
use crate::format::btree::InobtRec;
use crate::format::bufkind::BufKind;
use crate::format::dinode_edit::{self as de, init_dinode, NULLAGINO};
use crate::format::inode::{DINODE_MAGIC, DINODE_V3_CORE_SIZE, FMT_EXTENTS};
use crate::types::{AgIno, AgNumber, Ino};
use crate::xact::{BufId, InodeId, MetaTx, SbCounter};

pub use crate::format::dinode_edit::NewInode;
pub use chunk::{chunk_blocks, free_chunk_if_empty};

/// An unpredictable 32-bit number for generation numbers (no crate
/// dependency: std's per-process random hash keys, a counter and the
/// clock, mixed by SipHash).
pub(crate) fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    if let Some(v) = crate::clock::next_random() {
        return (v ^ (v >> 32)) as u32;
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    let v = h.finish();
    (v ^ (v >> 32)) as u32
}

/// The AGs to try, in order.
fn ag_order(tx: &dyn MetaTx, parent: Ino, is_dir: bool) -> impl Iterator<Item = AgNumber> {
    let geo = tx.geo();
    let n = geo.agcount.max(1);
    let start = if is_dir {
        tx.dir_rotor() % n
    } else if geo.ino_valid(parent) {
        geo.ino_agno(parent).0
    } else {
        0
    };
    (0..n).map(move |i| AgNumber((start + i) % n))
}

fn valid_mode(mode: u32) -> bool {
    matches!(
        mode & de::S_IFMT,
        de::S_IFREG
            | de::S_IFDIR
            | de::S_IFLNK
            | de::S_IFCHR
            | de::S_IFBLK
            | de::S_IFIFO
            | de::S_IFSOCK
    ) && mode <= u16::MAX as u32
}

/// Join the AGI of `ino`'s AG now: a transaction that will free `ino` (or
/// put it on an unlinked list) after changes that lock AGFs (reverse
/// mappings of freed blocks) takes the AGI first, in lock order.
pub fn lock_agi(tx: &mut dyn MetaTx, ino: Ino) -> Result<()> {
    let geo = tx.geo();
    if !geo.ino_valid(ino) {
        return Err(Error::Invalid(format!("inode number {}", ino.0)));
    }
    let agno = geo.ino_agno(ino);
    agi::read(tx, agno).map(|_| ())
}

/// Allocate an inode near `parent` (files: the parent's AG first;
/// directories: a rotating AG), initialise its dinode from `init` and join
/// it to the transaction with `ijoin_new`. `Err(NoSpace)` when no AG has a
/// free inode or room for a new chunk.
pub fn ialloc(tx: &mut dyn MetaTx, parent: Ino, init: &NewInode) -> Result<(Ino, InodeId)> {
    ialloc_from(tx, parent, init, false)
}

/// [`ialloc`]; with `from_ag0` the AGs are tried from AG 0 upwards (the
/// retry, in a new transaction, after `NoSpace`: every AG then comes in
/// lock order).
pub fn ialloc_from(
    tx: &mut dyn MetaTx,
    parent: Ino,
    init: &NewInode,
    from_ag0: bool,
) -> Result<(Ino, InodeId)> {
    if !valid_mode(init.mode) {
        return Err(Error::Invalid(format!("ialloc: mode {:#o}", init.mode)));
    }
    chunk::chunk_blocks(tx)?;
    let is_dir = init.mode & de::S_IFMT == de::S_IFDIR;
    let order: Vec<AgNumber> = if from_ag0 {
        (0..tx.geo().agcount).map(AgNumber).collect()
    } else {
        ag_order(tx, parent, is_dir).collect()
    };
    for agno in order {
        // The AGs after the first (wrapping round, or after a chunk
        // allocation that joined an AGF and failed) come against the lock
        // order: join their AGIs only if free now (the kernel's trylock
        // pass); the caller's retry in a new transaction covers the rest.
        let agi_b = if tx.ag_join_out_of_order(BufKind::Agi, agno) {
            match agi::try_read(tx, agno)? {
                Some(b) => b,
                None => continue,
            }
        } else {
            agi::read(tx, agno)?
        };
        let (rec, new_gen) = if agi::get(tx, agi_b, agi::FREECOUNT) > 0 {
            (find_free(tx, agno, agi_b, parent)?, None)
        } else if tx.ag_join_out_of_order(BufKind::Agf, agno) {
            // A new chunk needs this AG's AGF, below one already held.
            continue;
        } else {
            match chunk::alloc_chunk(tx, agno, agi_b) {
                Ok((rec, gen)) => (rec, Some(gen)),
                Err(Error::NoSpace) => continue,
                Err(e) => return Err(e),
            }
        };
        let ino = take(tx, agno, agi_b, rec)?;
        // A reused slot: its old bytes give the next generation and are
        // the inode item's before-image (read once).
        let (gen, before) = match new_gen {
            Some(g) => (g, None),
            None => {
                let old = tx.read_dinode_raw(ino)?;
                (reuse_gen(&old, ino)?, Some(old))
            }
        };
        let mut d = init_dinode(tx.sb(), ino, init, gen);
        if let Some(p) = parent_dinode(tx, parent)? {
            de::inherit(&mut d, &p, tx.sb());
        }
        let id = tx.ijoin_new(ino, d, before)?;
        return Ok((ino, id));
    }
    Err(Error::NoSpace)
}

/// The parent directory's dinode as last committed (or as joined to this
/// transaction), for the flags a new inode inherits; `None` when `parent`
/// does not name an in-use directory (e.g. inode 0 for a detached inode).
fn parent_dinode(tx: &mut dyn MetaTx, parent: Ino) -> Result<Option<Vec<u8>>> {
    if !tx.geo().ino_valid(parent) {
        return Ok(None);
    }
    let p = tx.read_dinode_raw(parent)?;
    let ok = p.len() >= DINODE_V3_CORE_SIZE
        && de::magic(&p) == DINODE_MAGIC
        && de::ino(&p) == parent.0
        && de::mode(&p) as u32 & de::S_IFMT == de::S_IFDIR;
    Ok(ok.then_some(p))
}

/// A record of AG `agno` with a free inode (the AGI says there is one).
fn find_free(tx: &mut dyn MetaTx, agno: AgNumber, agi_b: BufId, parent: Ino) -> Result<InobtRec> {
    let geo = tx.geo();
    let pagino =
        (geo.ino_valid(parent) && geo.ino_agno(parent) == agno).then(|| geo.ino_agino(parent).0);
    let newino = agi::get(tx, agi_b, agi::NEWINO);
    let found = if tx.sb().has_finobt() {
        find_free_finobt(tx, agno, pagino, newino)?
    } else {
        find_free_inobt(tx, agno, pagino, newino)?
    };
    let Some(f) = found else {
        let daddr = tx.geo().ag_header_daddr(agno, 2);
        return Err(Error::corrupt(
            "AGI",
            Location::Daddr(daddr.0),
            "free inodes counted but none in the inode btrees",
        ));
    };
    if !tx.sb().has_finobt() {
        return Ok(f);
    }
    // The finobt copy must match the inobt record.
    let r = irec::lookup(tx, Tree::Ino, agno, f.startino, Lookup::Eq)?;
    if r != Some(f) {
        let daddr = tx.geo().ag_header_daddr(agno, 2);
        return Err(Error::corrupt(
            "finobt record",
            Location::Daddr(daddr.0),
            format!("{f:?} but the inobt has {r:?}"),
        ));
    }
    Ok(f)
}

fn find_free_finobt(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    pagino: Option<u32>,
    newino: u32,
) -> Result<Option<InobtRec>> {
    if let Some(p) = pagino {
        let le = irec::lookup(tx, Tree::Fino, agno, p, Lookup::Le)?;
        if le.is_some_and(|r| r.covers(p)) {
            return Ok(le);
        }
        let ge = irec::lookup(tx, Tree::Fino, agno, p, Lookup::Ge)?;
        return Ok(match (le, ge) {
            (Some(l), Some(g)) => {
                let dl = p - l.startino;
                let dg = g.startino - p;
                Some(if dl <= dg { l } else { g })
            }
            (l, g) => l.or(g),
        });
    }
    if newino != NULLAGINO {
        if let Some(r) = irec::covering(tx, Tree::Fino, agno, newino)? {
            return Ok(Some(r));
        }
    }
    irec::lookup(tx, Tree::Fino, agno, 0, Lookup::Ge)
}

fn find_free_inobt(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    pagino: Option<u32>,
    newino: u32,
) -> Result<Option<InobtRec>> {
    for hint in pagino
        .into_iter()
        .chain((newino != NULLAGINO).then_some(newino))
    {
        if let Some(r) = irec::covering(tx, Tree::Ino, agno, hint)? {
            if r.freecount > 0 {
                return Ok(Some(r));
            }
        }
    }
    irec::first_with_free(tx, agno)
}

/// Take the first free inode of `rec`: update both trees, the AGI and the
/// superblock counter.
fn take(tx: &mut dyn MetaTx, agno: AgNumber, agi_b: BufId, mut rec: InobtRec) -> Result<Ino> {
    let avail = rec.free & rec.present_mask();
    debug_assert!(
        avail != 0,
        "checked records with freecount > 0 have a free bit"
    );
    if avail == 0 {
        return Err(Error::Invalid("inode record without a free inode".into()));
    }
    let idx = avail.trailing_zeros();
    rec.free &= !(1u64 << idx);
    rec.freecount -= 1;
    irec::update(tx, Tree::Ino, agno, &rec)?;
    if tx.sb().has_finobt() {
        if rec.freecount == 0 {
            irec::delete(tx, Tree::Fino, agno, rec.startino)?;
        } else {
            irec::update(tx, Tree::Fino, agno, &rec)?;
        }
    }
    agi::add(tx, agi_b, agno, agi::FREECOUNT, -1)?;
    tx.mod_sb(SbCounter::IFree, -1);
    Ok(tx.geo().agino_to_ino(agno, AgIno(rec.startino + idx)))
}

/// The generation for a reused inode; refuses an inode the inobt calls
/// free whose dinode is in use.
fn reuse_gen(d: &[u8], ino: Ino) -> Result<u32> {
    if d.len() < DINODE_V3_CORE_SIZE || de::magic(d) != DINODE_MAGIC {
        // Never initialised (or garbage): any generation will do.
        return Ok(random_u32());
    }
    if de::mode(d) != 0 {
        return Err(Error::corrupt(
            "inode",
            Location::Ino(ino.0),
            "free in the inode btree but in use on disk",
        ));
    }
    Ok(de::gen(d).wrapping_add(1))
}

/// Free inode `ino` (joined as `ip`; nlink 0, no blocks, not on an
/// unlinked list): mode 0 on disk, the inobt/finobt/AGI updated,
/// `ifree_done`. The chunk stays allocated even when it becomes all free.
pub fn ifree(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino) -> Result<()> {
    let geo = tx.geo();
    if !geo.ino_valid(ino) {
        return Err(Error::Invalid(format!("ifree: inode number {}", ino.0)));
    }
    let agno = geo.ino_agno(ino);
    let agino = geo.ino_agino(ino).0;
    {
        let d = tx.inode(ip);
        if d.len() != geo.inodesize as usize || de::ino(d) != ino.0 {
            return Err(Error::Invalid(format!(
                "ifree: {ip:?} is not inode {}",
                ino.0
            )));
        }
        if de::mode(d) == 0 {
            return Err(Error::corrupt(
                "inode",
                Location::Ino(ino.0),
                "freeing a free inode",
            ));
        }
        if de::nlink(d) != 0 {
            return Err(Error::Invalid(format!("ifree: inode {} has links", ino.0)));
        }
        if de::nblocks(d) != 0 || de::nextents(d) != 0 || de::anextents(d) != 0 {
            return Err(Error::Invalid(format!("ifree: inode {} has blocks", ino.0)));
        }
        if de::next_unlinked(d) != NULLAGINO {
            return Err(Error::NotSupported(
                "ifree of an inode on an unlinked list".into(),
            ));
        }
    }
    let agi_b = agi::read(tx, agno)?;
    if agi::unlinked(tx, agi_b, agino % agi::UNLINKED_BUCKETS) == agino {
        return Err(Error::NotSupported(
            "ifree of an inode on an unlinked list".into(),
        ));
    }
    let Some(mut rec) = irec::covering(tx, Tree::Ino, agno, agino)? else {
        return Err(Error::corrupt(
            "inobt",
            Location::Ino(ino.0),
            "no chunk record for the inode",
        ));
    };
    let idx = agino - rec.startino;
    if rec.is_hole(idx) || rec.is_free(idx) {
        return Err(Error::corrupt(
            "inobt record",
            Location::Ino(ino.0),
            "inode already free or in a hole",
        ));
    }
    rec.free |= 1u64 << idx;
    rec.freecount += 1;
    irec::update(tx, Tree::Ino, agno, &rec)?;
    if tx.sb().has_finobt() {
        match irec::lookup(tx, Tree::Fino, agno, rec.startino, Lookup::Eq)? {
            Some(_) => irec::update(tx, Tree::Fino, agno, &rec)?,
            None if rec.freecount == 1 => irec::insert(tx, Tree::Fino, agno, &rec)?,
            None => {
                return Err(Error::corrupt(
                    "finobt",
                    Location::Ino(ino.0),
                    "chunk with free inodes missing from the finobt",
                ))
            }
        }
    }
    agi::add(tx, agi_b, agno, agi::FREECOUNT, 1)?;
    tx.mod_sb(SbCounter::IFree, 1);
    let flags2 = de::new_flags2(tx.sb());
    free_dinode(tx.inode_mut(ip), flags2);
    tx.ifree_done(ip);
    Ok(())
}

/// What a freed dinode looks like: mode 0, no forks, flags cleared,
/// flags2 the filesystem's default (timestamps re-encoded to match),
/// generation bumped; owner and times kept.
fn free_dinode(d: &mut [u8], flags2: u64) {
    let times = [de::atime(d), de::mtime(d), de::ctime(d), de::crtime(d)];
    de::set_mode(d, 0);
    de::set_nlink(d, 0);
    de::set_size(d, 0);
    de::set_nextents(d, 0);
    de::set_anextents(d, 0);
    de::set_flags(d, 0);
    de::set_flags2(d, flags2);
    // Both counter layouts zeroed whatever flags2 was before.
    d[de::off::BIG_NEXTENTS..de::off::BIG_NEXTENTS + 8].fill(0);
    d[de::off::NEXTENTS..de::off::ANEXTENTS + 2].fill(0);
    de::set_atime(d, times[0]);
    de::set_mtime(d, times[1]);
    de::set_ctime(d, times[2]);
    de::set_crtime(d, times[3]);
    de::set_format(d, FMT_EXTENTS);
    de::set_forkoff(d, 0);
    de::set_aformat(d, FMT_EXTENTS);
    de::set_extsize(d, 0);
    de::set_cowextsize(d, 0);
    let g = de::gen(d).wrapping_add(1);
    de::set_gen(d, g);
    de::bump_changecount(d, 1);
    d[DINODE_V3_CORE_SIZE..].fill(0);
}

#[cfg(test)]
mod tests;
