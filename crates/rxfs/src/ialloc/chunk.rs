//! A new inode chunk: space, cluster buffers, records, counters.
//!
//! ```text
//!  AG blocks  [agbno ............................ agbno + chunk_blocks)
//!             | cluster 0 | cluster 1 | ...      (inode_cluster_blocks each)
//!  each inode: "IN", version 3, gen, next_unlinked NULLAGINO, di_ino,
//!              di_uuid, all else 0 (mode 0 = free)
//! ```
//! The chunk is allocated whole (64 inodes, even on sparse-inode
//! filesystems: a full chunk is a valid sparse record with holemask 0),
//! aligned to `sb_inoalignmt` as xfs_repair demands of chunk starts. The
//! cluster buffers are not logged: one ICREATE item describes them and
//! the buffers are *ordered* (written back before the log tail passes this
//! transaction), exactly the bytes an ICREATE replay writes (see
//! [`crate::fs::recover_icreate`]). Their CRCs are computed here, as the
//! write-back of an unlogged buffer does not know about inode CRCs.

use super::{agi, irec};
use crate::alloc::btree_edit::Tree;
use crate::alloc::{alloc_extent, AllocReq};
use crate::error::{Error, Result};
use crate::format::btree::InobtRec;
use crate::format::crc;
use crate::format::dinode_edit::{self, NULLAGINO};
use crate::format::inode::DINODE_CRC_OFF;
use crate::types::{AgBlock, AgIno, AgNumber};
use crate::xact::{BufId, BufKind, MetaTx, SbCounter};

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
/// insert its records and count it. Returns the record (all free) and the
/// chunk's generation number. `Err(NoSpace)` when the AG has no aligned
/// room; nothing was changed then.
pub fn alloc_chunk(tx: &mut dyn MetaTx, agno: AgNumber, agi_b: BufId) -> Result<(InobtRec, u32)> {
    let cb = chunk_blocks(tx)?;
    let geo = tx.geo().clone();
    let align = geo.inoalignmt.max(1);
    let newino = agi::get(tx, agi_b, agi::NEWINO);
    let near = if newino != NULLAGINO {
        geo.agino_agbno(AgIno(newino)).0.saturating_add(cb)
    } else {
        agi::get(tx, agi_b, agi::ROOT)
    };
    let near = near.min(geo.ag_size(agno).saturating_sub(1));
    let ext = alloc_extent(
        tx,
        &AllocReq {
            agno,
            near: Some(AgBlock(near)),
            minlen: cb,
            maxlen: cb,
            align,
            any_ag: false,
            meta: true,
        },
    )?;
    if ext.agno != agno || ext.len != cb || ext.agbno.0 % align != 0 {
        return Err(Error::Invalid(format!(
            "inode chunk allocation gave {ext:?} (wanted {cb} blocks aligned {align} in AG {agno})"
        )));
    }
    let gen = super::random_u32();
    init_clusters(tx, agno, ext.agbno, cb, gen)?;
    tx.log_icreate(agno, ext.agbno, geo.inodes_per_chunk, cb, gen);

    let startino = geo.agbno_to_agino(ext.agbno, 0).0;
    let n = geo.inodes_per_chunk;
    let rec = InobtRec {
        startino,
        holemask: 0,
        count: n,
        freecount: n,
        free: u64::MAX,
    };
    irec::insert(tx, Tree::Ino, agno, &rec)?;
    if tx.sb().has_finobt() {
        irec::insert(tx, Tree::Fino, agno, &rec)?;
    }
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
