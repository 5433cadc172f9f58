//! The AGI fields inode allocation reads and changes.
//!
//! Offsets are those of [`crate::format::ag`]'s diagram. The AGI is read
//! through the transaction (verified: magic, CRC, UUID) and additionally
//! checked here for the fields we trust: its AG number and its counters.
//! Root, level and block-count fields of the inode btrees are the
//! business of [`crate::btree`], which reads the same buffer.

use crate::error::{Error, Location, Result};
use crate::format::bufkind::BufKind;
use crate::format::{be32, put_be32};
use crate::types::AgNumber;
use crate::xact::{BufId, MetaTx};

pub const SEQNO: usize = 8;
pub const LENGTH: usize = 12;
pub const COUNT: usize = 16;
pub const ROOT: usize = 20;
pub const FREECOUNT: usize = 28;
pub const NEWINO: usize = 32;
pub const UNLINKED: usize = 40;
pub const UNLINKED_BUCKETS: u32 = 64;

/// The AGI of `agno`, joined to the transaction, after a sanity check of
/// the fields inode allocation relies on.
pub fn read(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<BufId> {
    read_inner(tx, agno, false).map(|b| b.expect("a blocking read always joins"))
}

/// [`read`] if no other transaction holds the AGI (`None` then): for an
/// AGI joined against the lock order, which must not wait.
pub fn try_read(tx: &mut dyn MetaTx, agno: AgNumber) -> Result<Option<BufId>> {
    read_inner(tx, agno, true)
}

fn read_inner(tx: &mut dyn MetaTx, agno: AgNumber, try_only: bool) -> Result<Option<BufId>> {
    let geo = tx.geo();
    let daddr = geo.ag_header_daddr(agno, 2);
    let len = geo.sectsize as usize;
    let ag_len = geo.ag_size(agno);
    let max_inodes = (ag_len as u64) << geo.inopblog;
    let b = if try_only {
        match tx.try_read_buf(daddr, len, BufKind::Agi)? {
            Some(b) => b,
            None => return Ok(None),
        }
    } else {
        tx.read_buf(daddr, len, BufKind::Agi)?
    };
    let buf = tx.buf(b);
    let bad = |d: String| Err(Error::corrupt("AGI", Location::Daddr(daddr.0), d));
    if buf.len() < 344 {
        return bad(format!("AGI buffer of {} bytes", buf.len()));
    }
    if be32(buf, SEQNO) != agno.0 || be32(buf, LENGTH) != ag_len {
        return bad(format!(
            "seqno {} length {} for AG {agno} of {ag_len} blocks",
            be32(buf, SEQNO),
            be32(buf, LENGTH)
        ));
    }
    let (count, free) = (be32(buf, COUNT), be32(buf, FREECOUNT));
    if count as u64 > max_inodes || free > count {
        return bad(format!("count {count} freecount {free}"));
    }
    Ok(Some(b))
}

pub fn get(tx: &dyn MetaTx, b: BufId, off: usize) -> u32 {
    be32(tx.buf(b), off)
}

/// Set a 32-bit field and log it.
pub fn set(tx: &mut dyn MetaTx, b: BufId, off: usize, v: u32) {
    put_be32(tx.buf_mut(b), off, v);
    tx.log_buf(b, off..off + 4);
}

/// Add `delta` to a counter; going negative or past `u32` is corruption
/// (the counters were checked against each other on read).
pub fn add(tx: &mut dyn MetaTx, b: BufId, agno: AgNumber, off: usize, delta: i64) -> Result<()> {
    let v = get(tx, b, off) as i64 + delta;
    if !(0..=u32::MAX as i64).contains(&v) {
        let daddr = tx.geo().ag_header_daddr(agno, 2);
        return Err(Error::corrupt(
            "AGI",
            Location::Daddr(daddr.0),
            format!("counter at {off} would become {v}"),
        ));
    }
    set(tx, b, off, v as u32);
    Ok(())
}

/// Head of unlinked bucket `i` (< 64).
pub fn unlinked(tx: &dyn MetaTx, b: BufId, i: u32) -> u32 {
    debug_assert!(i < UNLINKED_BUCKETS);
    get(tx, b, UNLINKED + 4 * i as usize)
}
