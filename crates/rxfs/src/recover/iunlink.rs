//! Recovery, last step: free the inodes on the AGI unlinked lists.
//!
//! A file unlinked while still open keeps its inode until the last close:
//! the unlink puts the inode (link count 0) on one of the 64 unlinked lists
//! of its AG, hashed by AG inode number, and the last close frees it. After
//! a crash nobody holds it open any more, so recovery frees it, as the
//! kernel's `xlog_recover_process_iunlinks` does (there: through a normal
//! inode release, which truncates and frees the inode).
//!
//! ```text
//!  AGI  unlinked[b] ──> agino A ──di_next_unlinked──> agino B ──> NULLAGINO
//!                       (nlink 0, mode != 0)          (b = agino % 64 for all)
//!
//!  pop:  unlinked[b] = A.next;  A: blocks freed, next = NULL, freed (mode 0)
//! ```
//!
//! For each inode, head first ([`pop_unlinked`]), in one transaction:
//! 1. free the blocks of its forks: every extent of an extents- or
//!    btree-format data or attribute fork goes back with
//!    [`crate::alloc::free_extent`], and so do the blocks of a btree fork's
//!    tree ([`super::bmbt`]); metadata blocks (directory, symlink,
//!    attribute and bmap btree blocks) are also cancelled with
//!    [`MetaTx::stale_buf`], block by block; local and device forks hold
//!    no blocks; realtime data extents go back to the realtime bitmap
//!    ([`crate::bmap::release`]: whole rt extents, before any AG block, the
//!    realtime lock's place in the lock order); reflink data is refused
//!    (`NotSupported`);
//! 2. unhook it: the bucket points at its successor, its own
//!    `di_next_unlinked` becomes NULLAGINO;
//! 3. size, block and extent counts to zero, attribute fork removed, and
//!    [`crate::ialloc::ifree`] frees the inode (inobt/finobt, AGI counts,
//!    mode 0);
//! 4. if that left its inode chunk all free, the chunk goes too, as the
//!    kernel's inode free does (unless mounted `ikeep`): inobt and finobt
//!    records deleted, AGI and superblock inode counts lowered, cluster
//!    buffers cancelled, blocks freed (the present parts of a sparse
//!    chunk).
//!
//! Bounds: every list is walked at most as many times as the AG has inode
//! slots; an inode met twice is free by then (mode 0), which is reported
//! as corruption. Every extent is checked against the geometry.

use super::bmbt::{btree_fork_map, BtreeMap};
use crate::error::{Error, Location, Result};
use crate::format::bmbt::{Extent, EXTENT_REC_SIZE};
use crate::format::bufkind::BufKind;
use crate::format::dinode_edit as de;
use crate::format::inode::{DIFLAG2_REFLINK, DIFLAG_REALTIME, FMT_BTREE, FMT_EXTENTS};
use crate::format::{be32, put_be32};
use crate::rmap::RmapOwner;
use crate::types::WhichFork;
use crate::types::{AgIno, AgNumber, FsBlock, Ino};
use crate::xact::{InodeId, MetaTx};

/// Number of unlinked buckets in an AGI.
pub const AGI_UNLINKED_BUCKETS: u32 = 64;
/// Byte offset of `agi_unlinked[0]`.
const AGI_UNLINKED_OFF: usize = 40;
const NULLAGINO: u32 = de::NULLAGINO;

/// What processing the unlinked lists did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IunlinkStats {
    pub inodes: u64,
    pub blocks: u64,
    /// Inode chunks emptied and freed, and their blocks.
    pub chunks: u64,
    pub chunk_blocks: u64,
}

fn agi_buf(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<crate::xact::BufId> {
    let daddr = tx.geo().ag_header_daddr(agno, 2);
    let len = tx.geo().sectsize as usize;
    tx.read_buf(daddr, len, BufKind::Agi)
}

/// The non-empty unlinked buckets of every AG: (AG, bucket).
pub fn unlinked_buckets(tx: &mut dyn MetaTx) -> Result<Vec<(AgNumber, u32)>> {
    let mut out = Vec::new();
    for agno in (0..tx.geo().agcount).map(AgNumber) {
        let b = agi_buf(tx, agno)?;
        for bucket in 0..AGI_UNLINKED_BUCKETS {
            if be32(tx.buf(b), AGI_UNLINKED_OFF + 4 * bucket as usize) != NULLAGINO {
                out.push((agno, bucket));
            }
        }
    }
    Ok(out)
}

/// Free every inode on every unlinked list, in `tx`.
pub fn process_iunlinks(tx: &mut dyn MetaTx) -> Result<IunlinkStats> {
    let mut st = IunlinkStats::default();
    for (agno, bucket) in unlinked_buckets(tx)? {
        let cap = tx.geo().ag_size(agno) as u64 * tx.geo().inopblock as u64;
        let mut n = 0u64;
        while let Some(u) = pop_unlinked(tx, agno, bucket)? {
            st.inodes += 1;
            st.blocks += u.blocks;
            if u.chunk_blocks > 0 {
                st.chunks += 1;
                st.chunk_blocks += u.chunk_blocks;
            }
            n += 1;
            if n > cap {
                return Err(Error::corrupt(
                    "AGI",
                    Location::Daddr(tx.geo().ag_header_daddr(agno, 2).0),
                    format!("unlinked bucket {bucket} lists more inodes than the AG holds"),
                ));
            }
        }
    }
    Ok(st)
}

/// An inode [`pop_unlinked`] freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unlinked {
    pub ino: Ino,
    /// Blocks its forks held.
    pub blocks: u64,
    /// Blocks of its inode chunk, when freeing it emptied the chunk (then
    /// freed too), else 0.
    pub chunk_blocks: u64,
}

/// Free the first inode of unlinked list `bucket` of AG `agno` in `tx`
/// (see the module doc). `None` when the list is empty.
pub fn pop_unlinked(tx: &mut dyn MetaTx, agno: AgNumber, bucket: u32) -> Result<Option<Unlinked>> {
    if agno.0 >= tx.geo().agcount || bucket >= AGI_UNLINKED_BUCKETS {
        return Err(Error::Invalid(format!("AG {} bucket {bucket}", agno.0)));
    }
    let agi = agi_buf(tx, agno)?;
    let slot = AGI_UNLINKED_OFF + 4 * bucket as usize;
    let agino = be32(tx.buf(agi), slot);
    if agino == NULLAGINO {
        return Ok(None);
    }
    let ino = tx.geo().agino_to_ino(agno, AgIno(agino));
    let bad = |d: String| {
        Err(Error::corrupt(
            "unlinked inode list",
            Location::Ino(ino.0),
            d,
        ))
    };
    if agino % AGI_UNLINKED_BUCKETS != bucket || !tx.geo().ino_valid(ino) {
        return bad(format!(
            "AG {} bucket {bucket} points at AG inode {agino}",
            agno.0
        ));
    }
    let ip = tx.ijoin(ino)?;
    let d = tx.inode(ip);
    if de::mode(d) == 0 || de::nlink(d) != 0 {
        return bad(format!(
            "inode on an unlinked list has mode {:o} and {} links",
            de::mode(d),
            de::nlink(d)
        ));
    }
    let next = de::next_unlinked(d);
    if next != NULLAGINO && next % AGI_UNLINKED_BUCKETS != bucket {
        return bad(format!(
            "next unlinked inode {next} is not of bucket {bucket}"
        ));
    }
    let blocks = free_forks(tx, ip, ino)?;
    // Unhook it.
    put_be32(tx.buf_mut(agi), slot, next);
    tx.log_buf(agi, slot..slot + 4);
    // Through the cluster buffer too (see crate::ialloc::unlinked): a crash
    // in the middle of this processing leaves the pointer as logged.
    crate::ialloc::unlinked::set_next(tx, ip, NULLAGINO)?;
    crate::ialloc::ifree(tx, ip, ino)?;
    let chunk = crate::ialloc::free_chunk_if_empty(tx, agno, agino)?;
    Ok(Some(Unlinked {
        ino,
        blocks,
        chunk_blocks: chunk,
    }))
}

/// Free the blocks of both forks of `ip` and leave it empty: size 0, no
/// blocks, no extents, no attribute fork.
fn free_forks(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino) -> Result<u64> {
    let d = tx.inode(ip);
    let mode = de::mode(d) as u32 & de::S_IFMT;
    let data_meta = match mode {
        de::S_IFDIR => Some(BufKind::DirData),
        de::S_IFLNK => Some(BufKind::Symlink),
        _ => None,
    };
    let (dfmt, dn) = (de::format(d), de::nextents(d));
    let (afmt, an, has_attr) = (de::aformat(d), de::anextents(d) as u64, de::forkoff(d) != 0);
    let realtime = de::flags(d) & DIFLAG_REALTIME != 0;
    let reflink = de::flags2(d) & DIFLAG2_REFLINK != 0;
    let mapped = matches!(dfmt, FMT_EXTENTS | FMT_BTREE) && dn > 0;
    let refuse = |what: &str| {
        Err(Error::NotSupported(format!(
            "recovery of unlinked inode {}: freeing {what} is not implemented yet; \
             mount with the kernel, or use -o ro,norecovery",
            ino.0
        )))
    };
    if mapped && reflink {
        return refuse("the extents of a reflink file");
    }
    let cap = de::nblocks(d).saturating_add(1);
    let mut data = fork_map(tx, ip, ino, dfmt, dn, true, cap, realtime)?;
    let mut blocks = 0;
    if mapped && realtime {
        // Realtime extents first: the realtime lock comes before the
        // AGFs that freeing the fork's tree blocks takes.
        let rt: Vec<(u64, u64)> = data.extents.iter().map(|e| (e.start, e.len)).collect();
        blocks += rt.iter().map(|r| r.1).sum::<u64>();
        crate::bmap::release(tx, true, rt)?;
        data.extents.clear();
    }
    let attr = match has_attr {
        true => fork_map(tx, ip, ino, afmt, an, false, cap, false)?,
        false => BtreeMap::default(),
    };
    let forks = [
        (data, data_meta, WhichFork::Data),
        (attr, Some(BufKind::AttrLeaf), WhichFork::Attr),
    ];
    for (map, meta, fork) in forks {
        for e in &map.extents {
            if let Some(kind) = meta {
                stale_blocks(tx, e, kind)?;
            }
            let owner = RmapOwner::File {
                ino,
                fork,
                offset: e.off.0,
                bmbt: false,
                unwritten: e.unwritten,
            };
            free(tx, FsBlock(e.start), e.len as u32, &owner)?;
            blocks += e.len;
        }
        for &(b, fsb) in &map.blocks {
            tx.stale_buf(b);
            let owner = RmapOwner::File {
                ino,
                fork,
                offset: 0,
                bmbt: true,
                unwritten: false,
            };
            free(tx, fsb, 1, &owner)?;
            blocks += 1;
        }
    }
    let d = tx.inode_mut(ip);
    if matches!(dfmt, FMT_EXTENTS | FMT_BTREE) {
        de::set_nextents(d, 0);
        de::data_fork_mut(d).fill(0);
        de::set_format(d, FMT_EXTENTS);
    }
    if has_attr {
        de::set_anextents(d, 0);
        de::attr_fork_mut(d).fill(0);
        de::set_forkoff(d, 0);
        de::set_aformat(d, FMT_EXTENTS);
    }
    de::set_size(d, 0);
    de::set_nblocks(d, 0);
    Ok(blocks)
}

fn free(tx: &mut dyn MetaTx, fsb: FsBlock, len: u32, owner: &RmapOwner) -> Result<()> {
    let (agno, agbno) = (tx.geo().fsb_agno(fsb), tx.geo().fsb_agbno(fsb));
    crate::rmap::rmap_free(tx, agno, agbno, len, owner)?;
    crate::alloc::free_extent(tx, agno, agbno, len)
}

/// What a fork of format `fmt` with `n` extents maps: its extents and, for
/// a btree fork, the tree blocks (at most `cap` of them). Local and device
/// forks map nothing.
#[allow(clippy::too_many_arguments)]
fn fork_map(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    fmt: u8,
    n: u64,
    data: bool,
    cap: u64,
    rt: bool,
) -> Result<BtreeMap> {
    let d = tx.inode(ip);
    let fork = if data {
        de::data_fork(d)
    } else {
        de::attr_fork(d)
    }
    .to_vec();
    match fmt {
        FMT_EXTENTS => Ok(BtreeMap {
            extents: fork_extents(tx, &fork, n, ino, rt)?,
            blocks: Vec::new(),
        }),
        FMT_BTREE => btree_fork_map(tx, &fork, ino, cap, rt),
        _ => Ok(BtreeMap::default()),
    }
}

/// Whether extent `e` lies inside one AG, or (`rt`: a realtime file's
/// data) inside the realtime device.
pub(super) fn extent_ok(tx: &dyn MetaTx, e: &Extent, rt: bool) -> bool {
    if e.len == 0 {
        return false;
    }
    if rt {
        return e
            .start
            .checked_add(e.len)
            .is_some_and(|end| end <= tx.sb().rblocks);
    }
    tx.geo().fsb_extent_valid(FsBlock(e.start), e.len)
}

/// The `n` extent records of a fork, each checked against the geometry.
fn fork_extents(tx: &dyn MetaTx, fork: &[u8], n: u64, ino: Ino, rt: bool) -> Result<Vec<Extent>> {
    let bad = |d: String| Err(Error::corrupt("inode fork", Location::Ino(ino.0), d));
    let room = (fork.len() / EXTENT_REC_SIZE) as u64;
    if n > room {
        return bad(format!("{n} extents in a fork with room for {room}"));
    }
    let mut out = Vec::with_capacity(n as usize);
    for rec in fork.chunks_exact(EXTENT_REC_SIZE).take(n as usize) {
        let e = Extent::decode(rec);
        if !extent_ok(tx, &e, rt) {
            return bad(format!(
                "extent of {} blocks at block {} is not inside one AG (or the realtime device)",
                e.len, e.start
            ));
        }
        out.push(e);
    }
    Ok(out)
}

/// Cancel the buffers of the metadata blocks of extent `e`, one per
/// filesystem block, so that nothing logged to them earlier is replayed
/// over whatever reuses the space.
fn stale_blocks(tx: &mut dyn MetaTx, e: &Extent, kind: BufKind) -> Result<()> {
    let bs = tx.geo().blocksize as usize;
    for i in 0..e.len {
        let daddr = tx.geo().fsb_to_daddr(FsBlock(e.start + i));
        let b = tx.new_buf(daddr, bs, kind)?;
        tx.stale_buf(b);
    }
    Ok(())
}
