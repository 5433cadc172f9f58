//! The AG headers. [`read`]: the AGF, AGI and AGFL read through their
//! verifiers, and the bounds every AG block is checked against. This
//! module: the headers as transactions edit them, fields of the AGF and
//! AGI changed in place, and the AGFL, the AG free list (used by the btree
//! editor, the allocator and inode allocation).
//!
//! The headers are joined with [`MetaTx::read_buf`] and edited field by
//! field: each change writes 4 big-endian bytes and logs exactly them. We
//! never decode them through the read-side verifiers here, because a
//! header changed earlier in the same transaction has a stale CRC; instead
//! every field we rely on is range-checked when it is read.
//!
//! AGFL (one sector): a 36-byte header, then `agfl_size = (sectsize -
//! 36) / 4` slots. The live list is circular: `flcount` slots from
//! `flfirst` to `fllast` inclusive (wrapping). [`agfl_get`] takes the
//! block at `flfirst`, [`agfl_put`] appends after `fllast`.
//! ```text
//!  slot:  0   1   2   3   4   5  ...  agfl_size-1
//!             ^first      ^last          (flcount = 3)
//! ```

pub mod read;

use crate::error::{Error, Location, Result};
use crate::format::ag::{
    agfl_size, first_usable_agbno, AGFL_HDR_SIZE, AGFL_SECTOR, AGF_SECTOR, AGI_SECTOR,
};
use crate::format::bufkind::BufKind;
use crate::format::{be32, put_be32};
use crate::types::{AgBlock, AgNumber};
use crate::xact::{BufId, MetaTx};

// AGF field offsets (see crate::format::ag).
pub const AGF_BNO_ROOT: usize = 16;
pub const AGF_CNT_ROOT: usize = 20;
pub const AGF_RMAP_ROOT: usize = 24;
pub const AGF_BNO_LEVEL: usize = 28;
pub const AGF_CNT_LEVEL: usize = 32;
pub const AGF_RMAP_LEVEL: usize = 36;
pub const AGF_FLFIRST: usize = 40;
pub const AGF_FLLAST: usize = 44;
pub const AGF_FLCOUNT: usize = 48;
pub const AGF_FREEBLKS: usize = 52;
pub const AGF_LONGEST: usize = 56;
pub const AGF_BTREEBLKS: usize = 60;
pub const AGF_RMAP_BLOCKS: usize = 80;
// AGI field offsets.
pub const AGI_ROOT: usize = 20;
pub const AGI_LEVEL: usize = 24;
pub const AGI_FREE_ROOT: usize = 328;
pub const AGI_FREE_LEVEL: usize = 332;
pub const AGI_IBLOCKS: usize = 336;
pub const AGI_FBLOCKS: usize = 340;

/// Join the AGF of `agno`.
pub fn agf(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<BufId> {
    check_agno(tx, agno)?;
    let geo = tx.geo();
    let (daddr, len) = (geo.ag_header_daddr(agno, AGF_SECTOR), geo.sectsize as usize);
    tx.read_buf(daddr, len, BufKind::Agf)
}

/// Join the AGI of `agno`.
pub fn agi(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<BufId> {
    check_agno(tx, agno)?;
    let geo = tx.geo();
    let (daddr, len) = (geo.ag_header_daddr(agno, AGI_SECTOR), geo.sectsize as usize);
    tx.read_buf(daddr, len, BufKind::Agi)
}

fn agfl(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<BufId> {
    let geo = tx.geo();
    let (daddr, len) = (
        geo.ag_header_daddr(agno, AGFL_SECTOR),
        geo.sectsize as usize,
    );
    tx.read_buf(daddr, len, BufKind::Agfl)
}

fn check_agno(tx: &dyn MetaTx, agno: AgNumber) -> Result<()> {
    if agno.0 >= tx.geo().agcount {
        return Err(Error::Invalid(format!(
            "AG {agno} does not exist ({} AGs)",
            tx.geo().agcount
        )));
    }
    Ok(())
}

pub fn get(tx: &dyn MetaTx, b: BufId, off: usize) -> u32 {
    be32(tx.buf(b), off)
}

/// Write a header field and log it.
pub fn set(tx: &mut dyn MetaTx, b: BufId, off: usize, v: u32) {
    put_be32(tx.buf_mut(b), off, v);
    tx.log_buf(b, off..off + 4);
}

/// Add `delta` to a counter field; going below 0 or above `max` is
/// corruption (the counter disagreed with the trees).
pub fn add(tx: &mut dyn MetaTx, b: BufId, off: usize, delta: i64, max: u32) -> Result<()> {
    let v = get(tx, b, off) as i64 + delta;
    if v < 0 || v > max as i64 {
        return Err(Error::corrupt(
            "AG header",
            Location::Unknown,
            format!("counter at offset {off} would become {v}"),
        ));
    }
    set(tx, b, off, v as u32);
    Ok(())
}

/// The AG's length in blocks.
pub fn ag_len(tx: &dyn MetaTx, agno: AgNumber) -> u32 {
    tx.geo().ag_size(agno)
}

/// First block after the AG headers.
pub fn first_agbno(tx: &dyn MetaTx) -> u32 {
    first_usable_agbno(tx.geo().sectsize, tx.geo().blocklog)
}

/// Whether `[agbno, agbno + len)` lies inside the usable part of the AG.
pub fn extent_ok(tx: &dyn MetaTx, agno: AgNumber, agbno: u32, len: u32) -> bool {
    len > 0 && agbno >= first_agbno(tx) && agbno as u64 + len as u64 <= ag_len(tx, agno) as u64
}

/// Free-list geometry read from the AGF, checked.
struct FlState {
    first: u32,
    last: u32,
    count: u32,
    size: u32,
}

fn fl_state(tx: &dyn MetaTx, agf: BufId) -> Result<FlState> {
    let size = agfl_size(tx.geo().sectsize);
    let s = FlState {
        first: get(tx, agf, AGF_FLFIRST),
        last: get(tx, agf, AGF_FLLAST),
        count: get(tx, agf, AGF_FLCOUNT),
        size,
    };
    let active = if s.count == 0 {
        0
    } else if s.last >= s.first {
        s.last.wrapping_sub(s.first) + 1
    } else {
        size - s.first + s.last + 1
    };
    if s.first >= size || s.last >= size || s.count > size || active != s.count {
        // Includes the "needs reset" layout of old kernels: not handled.
        return Err(Error::corrupt(
            "AGF",
            Location::Unknown,
            format!(
                "free list first {} last {} count {} with {size} slots",
                s.first, s.last, s.count
            ),
        ));
    }
    Ok(s)
}

/// Blocks on the free list.
pub fn flcount(tx: &dyn MetaTx, agf: BufId) -> u32 {
    get(tx, agf, AGF_FLCOUNT)
}

/// Take the first block off the AG free list.
pub fn agfl_get(tx: &mut dyn MetaTx, agno: AgNumber, agf: BufId) -> Result<AgBlock> {
    let s = fl_state(tx, agf)?;
    if s.count == 0 {
        return Err(Error::NoSpace);
    }
    let fl = agfl(tx, agno)?;
    let b = be32(tx.buf(fl), AGFL_HDR_SIZE + 4 * s.first as usize);
    if !extent_ok(tx, agno, b, 1) {
        return Err(Error::corrupt(
            "AGFL",
            Location::Unknown,
            format!("free list slot {} holds block {b:#x}", s.first),
        ));
    }
    set(tx, agf, AGF_FLFIRST, (s.first + 1) % s.size);
    set(tx, agf, AGF_FLCOUNT, s.count - 1);
    Ok(AgBlock(b))
}

/// Append `b` to the AG free list.
pub fn agfl_put(tx: &mut dyn MetaTx, agno: AgNumber, agf: BufId, b: AgBlock) -> Result<()> {
    let s = fl_state(tx, agf)?;
    if s.count >= s.size {
        return Err(Error::corrupt("AGFL", Location::Unknown, "free list full"));
    }
    let fl = agfl(tx, agno)?;
    // An empty list restarts at `flfirst`, whatever `fllast` says.
    let last = if s.count == 0 {
        s.first
    } else {
        (s.last + 1) % s.size
    };
    let off = AGFL_HDR_SIZE + 4 * last as usize;
    put_be32(tx.buf_mut(fl), off, b.0);
    tx.log_buf(fl, off..off + 4);
    set(tx, agf, AGF_FLLAST, last);
    set(tx, agf, AGF_FLCOUNT, s.count + 1);
    Ok(())
}

/// The blocks on the free list, in list order (for tests and checks).
pub fn agfl_blocks(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<Vec<AgBlock>> {
    let agf = agf(tx, agno)?;
    let s = fl_state(tx, agf)?;
    let fl = agfl(tx, agno)?;
    Ok((0..s.count)
        .map(|i| {
            let slot = (s.first + i) % s.size;
            AgBlock(be32(tx.buf(fl), AGFL_HDR_SIZE + 4 * slot as usize))
        })
        .collect())
}

/// Join the AGF of `agno` (lock order: see [`crate::xact`]).
pub fn lock_agf(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<()> {
    agf(tx, agno).map(|_| ())
}
