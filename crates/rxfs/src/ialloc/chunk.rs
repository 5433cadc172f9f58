//! A new inode chunk: space, cluster buffers, records, counters.
//!
//! ```text
//!  AG blocks  [agbno ............................ agbno + chunk_blocks)
//!             | cluster 0 | cluster 1 | ...      (inode_cluster_blocks each)
//!  each inode: "IN", version 3, gen, next_unlinked NULLAGINO, di_ino,
//!              di_uuid, all else 0 (mode 0 = free)
//! ```
//! A whole chunk (64 inodes) is allocated aligned to `sb_inoalignmt`, as
//! xfs_repair demands of chunk starts. When no such extent is left and the
//! filesystem has sparse inodes, a *sparse* chunk is made instead, as the
//! kernel does: `sb_spino_align` blocks aligned to themselves; its record
//! starts at the chunk-aligned block below it, with holemask bits set for
//! the inodes not allocated (one bit per 4 inodes, free bits set for
//! holes). If a record already covers that chunk (an earlier sparse
//! piece), the new inodes fill some of its holes and the records merge.
//!
//! The cluster buffers are not logged: one ICREATE item describes them and
//! the buffers are *ordered* (written back before the log tail passes this
//! transaction), exactly the bytes an ICREATE replay writes (see
//! [`crate::fs::recover_icreate`]). Their CRCs are computed here, as the
//! write-back of an unlogged buffer does not know about inode CRCs.

use super::{agi, irec};
use crate::alloc::{alloc_extent, free_extent, AgExtent, AllocReq};
use crate::btree::{self, Lookup, Tree};
use crate::error::{Error, Location, Result};
use crate::format::btree::BtreeKey;
use crate::format::btree::{InobtRec, INODES_PER_CHUNK, INODES_PER_HOLEMASK_BIT};
use crate::format::bufkind::BufKind;
use crate::format::crc;
use crate::format::dinode_edit::{self, NULLAGINO};
use crate::format::inode::DINODE_CRC_OFF;
use crate::format::{be32, put_be32};
use crate::rmap::RmapOwner;
use crate::types::{AgBlock, AgIno, AgNumber};
use crate::xact::{BufId, MetaTx, SbCounter};

/// Blocks of one 64-inode chunk; `NotSupported` when a chunk would be
/// smaller than a block (tiny inodes in huge blocks: several chunk records
/// per block, which this allocator does not build).
pub fn chunk_blocks(tx: &dyn MetaTx) -> Result<u32> {
    let geo = tx.geo();
    let bytes = geo.inodes_per_chunk * geo.inodesize;
    if bytes < geo.blocksize || !bytes.is_multiple_of(geo.blocksize) {
        return Err(Error::NotSupported(format!(
            "inode chunks of {bytes} bytes in {}-byte blocks",
            geo.blocksize
        )));
    }
    Ok(bytes / geo.blocksize)
}

/// Allocate and initialise a new chunk in AG `agno` (AGI `agi_b` joined),
/// insert or merge its records and count it. Returns the chunk's record
/// as it now is and the generation number of the new inodes.
/// `Err(NoSpace)` when the AG has no room even for a sparse chunk.
pub fn alloc_chunk(tx: &mut dyn MetaTx, agno: AgNumber, agi_b: BufId) -> Result<(InobtRec, u32)> {
    let cb = chunk_blocks(tx)?;
    let geo = tx.geo().clone();
    let newino = agi::get(tx, agi_b, agi::NEWINO);
    let near = if newino != NULLAGINO {
        geo.agino_agbno(AgIno(newino)).0.saturating_add(cb)
    } else {
        agi::get(tx, agi_b, agi::ROOT)
    };
    let full = AllocReq {
        agno,
        near: Some(AgBlock(near.min(geo.ag_size(agno).saturating_sub(1)))),
        minlen: cb,
        maxlen: cb,
        align: geo.inoalignmt.max(1),
        any_ag: false,
        meta: true,
    };
    let ext = match alloc_extent(tx, &full) {
        Err(Error::NoSpace) => match sparse_len(tx, cb) {
            Some(len) => alloc_sparse(tx, agno, agi_b, len, cb)?,
            None => return Err(Error::NoSpace),
        },
        r => r?,
    };
    crate::rmap::rmap_alloc(
        tx,
        ext.agno,
        ext.agbno,
        ext.len,
        &crate::rmap::RmapOwner::Inodes,
    )?;
    place(tx, agno, agi_b, ext)
}

/// The length of a sparse chunk allocation, if this filesystem makes them:
/// sparse inodes enabled, `sb_spino_align` a whole number of clusters and
/// of holemask bits, smaller than a chunk, and chunks aligned to their own
/// size (mkfs guarantees all of this; anything else gets no sparse chunks).
fn sparse_len(tx: &dyn MetaTx, cb: u32) -> Option<u32> {
    let geo = tx.geo();
    let sa = geo.spino_align;
    let ok = tx.sb().has_sparse_inodes()
        && sa > 0
        && sa < cb
        && cb.is_multiple_of(sa)
        && sa.is_multiple_of(geo.inode_cluster_blocks.max(1))
        && (sa << geo.inopblog).is_multiple_of(INODES_PER_HOLEMASK_BIT)
        && geo.inoalignmt == cb;
    ok.then_some(sa)
}

/// A sparse chunk: `len` blocks aligned to `len`, placed so that the whole
/// chunk it belongs to (aligned down to the chunk alignment) lies inside
/// the AG and not at block 0. A placement outside those bounds is given
/// back and reported as `NoSpace`.
fn alloc_sparse(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agi_b: BufId,
    len: u32,
    cb: u32,
) -> Result<AgExtent> {
    let geo = tx.geo().clone();
    let req = AllocReq {
        agno,
        near: Some(AgBlock(agi::get(tx, agi_b, agi::ROOT))),
        minlen: len,
        maxlen: len,
        align: len,
        any_ag: false,
        meta: true,
    };
    let ext = alloc_extent(tx, &req)?;
    let align = geo.inoalignmt.max(1);
    let max = (geo.ag_size(agno) / align * align).saturating_sub(cb);
    if ext.agbno.0 < align || ext.agbno.0 > max {
        free_extent(tx, ext.agno, ext.agbno, ext.len)?;
        return Err(Error::NoSpace);
    }
    Ok(ext)
}

/// Initialise the new inodes of `ext`, log the ICREATE, and record them:
/// a full chunk gets new inobt/finobt records; a sparse one becomes a
/// record with holes, or fills holes of the record already covering its
/// chunk.
fn place(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agi_b: BufId,
    ext: AgExtent,
) -> Result<(InobtRec, u32)> {
    let geo = tx.geo().clone();
    let cb = chunk_blocks(tx)?;
    let align = geo.inoalignmt.max(1);
    let whole = ext.len == cb;
    // A whole chunk starts its record; a sparse piece lies inside the
    // chunk-aligned (sparse_len: inoalignmt == chunk size) record.
    let chunk_blk = if whole {
        ext.agbno.0
    } else {
        ext.agbno.0 - ext.agbno.0 % align
    };
    let first = (ext.agbno.0 - chunk_blk) << geo.inopblog;
    let n = ext.len << geo.inopblog;
    let bad = |what: &str| {
        Err(Error::Invalid(format!(
            "inode chunk allocation gave {ext:?}: {what} (chunk {cb} blocks aligned {align})"
        )))
    };
    if ext.agno != agno || !ext.agbno.0.is_multiple_of(align.min(ext.len)) {
        return bad("misplaced");
    }
    if !whole
        && (!tx.sb().has_sparse_inodes()
            || !n.is_multiple_of(INODES_PER_HOLEMASK_BIT)
            || first + n > INODES_PER_CHUNK)
    {
        return bad("bad sparse chunk");
    }
    let gen = super::random_u32();
    init_clusters(tx, agno, ext.agbno, ext.len, gen)?;
    tx.log_icreate(agno, ext.agbno, n, ext.len, gen);

    let startino = geo.agbno_to_agino(AgBlock(chunk_blk), 0).0;
    let bits = n / INODES_PER_HOLEMASK_BIT;
    let shift = first / INODES_PER_HOLEMASK_BIT;
    let allocmask = (((1u32 << bits) - 1) << shift) as u16;
    let new = InobtRec {
        startino,
        holemask: !allocmask,
        count: n,
        freecount: n,
        free: u64::MAX,
    };
    let old = if new.holemask != 0 {
        irec::lookup(tx, Tree::Ino, agno, startino, Lookup::Eq)?
    } else {
        None
    };
    let rec = match old {
        None => {
            irec::insert(tx, Tree::Ino, agno, &new)?;
            if tx.sb().has_finobt() {
                irec::insert(tx, Tree::Fino, agno, &new)?;
            }
            new
        }
        Some(o) => {
            // The new inodes must fill holes of the existing record.
            if o.holemask & allocmask != allocmask {
                return Err(Error::corrupt(
                    "inobt record",
                    Location::Ino(geo.agino_to_ino(agno, AgIno(startino)).0),
                    format!("sparse chunk {ext:?} overlaps the present inodes of {o:?}"),
                ));
            }
            let m = InobtRec {
                startino,
                holemask: o.holemask & new.holemask,
                count: o.count + n,
                freecount: o.freecount + n,
                free: o.free & new.free,
            };
            irec::update(tx, Tree::Ino, agno, &m)?;
            if tx.sb().has_finobt() {
                match irec::lookup(tx, Tree::Fino, agno, startino, Lookup::Eq)? {
                    Some(_) => irec::update(tx, Tree::Fino, agno, &m)?,
                    None => irec::insert(tx, Tree::Fino, agno, &m)?,
                }
            }
            m
        }
    };
    agi::add(tx, agi_b, agno, agi::COUNT, n as i64)?;
    agi::add(tx, agi_b, agno, agi::FREECOUNT, n as i64)?;
    agi::set(tx, agi_b, agi::NEWINO, startino);
    tx.mod_sb(SbCounter::ICount, n as i64);
    tx.mod_sb(SbCounter::IFree, n as i64);
    Ok((rec, gen))
}

/// Build the chunk's cluster buffers as ordered buffers.
fn init_clusters(
    tx: &mut dyn MetaTx,
    agno: AgNumber,
    agbno: AgBlock,
    cb: u32,
    gen: u32,
) -> Result<()> {
    let geo = tx.geo().clone();
    let sb = tx.sb().clone();
    let bpc = geo.inode_cluster_blocks.clamp(1, cb);
    let isize = geo.inodesize as usize;
    for first in (0..cb).step_by(bpc as usize) {
        let blk = AgBlock(agbno.0 + first);
        let daddr = geo.agb_to_daddr(agno, blk);
        let b = tx.new_buf(daddr, (bpc as usize) << geo.blocklog, BufKind::Dino)?;
        let buf = tx.buf_mut(b);
        for (i, d) in buf.chunks_exact_mut(isize).enumerate() {
            let i = i as u32;
            let this_blk = AgBlock(blk.0 + i / geo.inopblock);
            let agino = geo.agbno_to_agino(this_blk, i % geo.inopblock);
            let ino = geo.agino_to_ino(agno, agino);
            dinode_edit::init_free_dinode(d, &sb, ino, gen);
            crc::update(d, DINODE_CRC_OFF);
        }
        tx.ordered_buf(b);
    }
    Ok(())
}

/// After freeing an inode at `agino`: if its chunk is now entirely free,
/// free the chunk as the kernel does (unless mounted `ikeep`, which rxfs
/// has not): remove its inobt and finobt records, take its inodes off the
/// AGI and superblock counts, cancel its cluster buffers and free its
/// blocks (only the present parts of a sparse chunk). Returns the blocks
/// freed.
pub fn free_chunk_if_empty(tx: &mut dyn MetaTx, agno: AgNumber, agino: u32) -> Result<u64> {
    let geo = tx.geo().clone();
    if geo.inopblock > INODES_PER_CHUNK {
        return Ok(0);
    }
    let sparse = tx.sb().has_sparse_inodes();
    let key = |startino: u32| BtreeKey(startino as u64, 0, 0);
    let at = Location::Ino(geo.agino_to_ino(agno, AgIno(agino)).0);
    let Some(found) = btree::lookup(tx, Tree::Ino, agno, key(agino), Lookup::Le)? else {
        return Err(Error::corrupt("inobt", at, "no record for a freed inode"));
    };
    let rec = InobtRec::decode(&found.rec, sparse);
    if agino < rec.startino || agino - rec.startino >= INODES_PER_CHUNK {
        return Err(Error::corrupt("inobt", at, "no record for a freed inode"));
    }
    if rec.free != u64::MAX {
        return Ok(0);
    }
    // The runs of present inodes: (first inode, count), 4 per holemask bit.
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for bit in 0..16u32 {
        if rec.holemask & (1 << bit) != 0 {
            continue;
        }
        match runs.last_mut() {
            Some((s, n)) if *s + *n == 4 * bit => *n += 4,
            _ => runs.push((4 * bit, 4)),
        }
    }
    let present: u32 = runs.iter().map(|r| r.1).sum();
    if present != rec.count
        || runs
            .iter()
            .any(|&(s, n)| s % geo.inopblock != 0 || n % geo.inopblock != 0)
    {
        return Err(Error::corrupt(
            "inobt record",
            at,
            format!(
                "chunk at {} holemask {:#x} count {} does not fit {} inodes per block",
                rec.startino, rec.holemask, rec.count, geo.inopblock
            ),
        ));
    }
    btree::delete(tx, Tree::Ino, agno, key(rec.startino))?;
    if tx.sb().has_finobt() {
        btree::delete(tx, Tree::Fino, agno, key(rec.startino))?;
    }
    let agi = agi::read(tx, agno)?;
    for off in [agi::COUNT, agi::FREECOUNT] {
        let v = be32(tx.buf(agi), off);
        let Some(v) = v.checked_sub(rec.count) else {
            return Err(Error::corrupt("AGI", at, "inode counts below a chunk's"));
        };
        put_be32(tx.buf_mut(agi), off, v);
        tx.log_buf(agi, off..off + 4);
    }
    tx.mod_sb(SbCounter::ICount, -(rec.count as i64));
    tx.mod_sb(SbCounter::IFree, -(rec.count as i64));
    let chunk_agbno = geo.agino_agbno(AgIno(rec.startino)).0;
    let cluster = geo.inode_cluster_blocks.max(1);
    let mut blocks = 0u64;
    for (first, n) in runs {
        let agbno = chunk_agbno + first / geo.inopblock;
        let len = n / geo.inopblock;
        let mut b = 0;
        while b < len {
            let daddr = geo.agb_to_daddr(agno, AgBlock(agbno + b));
            let c = cluster.min(len - b);
            let id = tx.new_buf(daddr, (c as usize) << geo.blocklog, BufKind::Dino)?;
            tx.stale_buf(id);
            b += c;
        }
        crate::rmap::rmap_free(tx, agno, AgBlock(agbno), len, &RmapOwner::Inodes)?;
        crate::alloc::free_extent(tx, agno, AgBlock(agbno), len)?;
        blocks += len as u64;
    }
    Ok(blocks)
}
