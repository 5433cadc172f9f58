//! Recovery of buffer (BUF) items.
//!
//! A BUF item names a buffer (daddr, length in BBs) and a bitmap of which
//! 128-byte chunks of it were logged; each following region holds one run
//! of consecutive set bits:
//!
//! ```text
//!  bitmap  0 0 1 1 1 0 0 1 ...      regions: [chunks 2..5) [chunk 7] ...
//!  buffer  |..|..|##|##|##|..|..|##|
//! ```
//!
//! Ordinary buffers: the runs are copied into the block, unless the block
//! carries an LSN at or past the transaction's (v5 rule; an LSN in a
//! block whose CRC fails, torn by a crash, is not trusted); the block then
//! gets the transaction LSN and a fresh CRC. Inode buffers (`INODE_BUF`)
//! only carry `di_next_unlinked` updates of the inodes in the cluster: only
//! those 4-byte fields are copied, and the CRC of each changed inode is
//! recomputed. CANCEL items and cancelled buffers are skipped.

use super::{buf_is_newer, Replay};
use crate::error::{Error, Location, Result};
use crate::format::log_items::{BufFormat, BLF_CHUNK};
use crate::format::log_ops::LogItem;
use crate::format::meta_header::{block_lsn, meta_header, stamp_and_verify};
use crate::format::{be16, be32, crc, put_be32};
use crate::types::Lsn;

/// Offset of `di_next_unlinked` in an on-disk inode.
const NEXT_UNLINKED_OFF: usize = 96;
/// Offset of the inode CRC.
const INODE_CRC_OFF: usize = 100;
const INODE_MAGIC: u16 = 0x494e;
const SB_MAGIC: u32 = 0x5846_5342;

/// Runs of set bits in the item's bitmap: (first chunk, chunk count).
pub fn dirty_runs(map: &[u32]) -> Vec<(usize, usize)> {
    let bits = map.len() * 32;
    let set = |i: usize| map[i / 32] & (1 << (i % 32)) != 0;
    let mut out = Vec::new();
    let mut i = 0;
    while i < bits {
        if !set(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bits && set(i) {
            i += 1;
        }
        out.push((start, i - start));
    }
    out
}

/// The logged runs of `item` as (byte offset in the buffer, region bytes),
/// checked against the buffer length `len`.
fn logged_runs<'a>(f: &BufFormat, item: &'a LogItem, len: usize) -> Result<Vec<(usize, &'a [u8])>> {
    let at = Location::Daddr(f.blkno);
    let runs = dirty_runs(&f.data_map);
    let regions = item.regions.get(1..).unwrap_or(&[]);
    if regions.len() != runs.len() {
        return Err(Error::corrupt(
            "log buffer item",
            at,
            format!(
                "{} dirty runs in the bitmap but {} data regions",
                runs.len(),
                regions.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(runs.len());
    for (&(first, n), reg) in runs.iter().zip(regions) {
        let off = first * BLF_CHUNK;
        let bytes = (n * BLF_CHUNK).min(reg.len());
        if off + bytes > len {
            return Err(Error::corrupt(
                "log buffer item",
                at,
                format!("logged chunk at byte {off} (+{bytes}) past the {len}-byte buffer"),
            ));
        }
        out.push((off, &reg[..bytes]));
    }
    Ok(out)
}

/// Replay one BUF item of the transaction at `lsn`.
pub(super) fn replay(r: &mut Replay<'_>, lsn: Lsn, f: &BufFormat, item: &LogItem) -> Result<()> {
    if r.cancelled(f.blkno, f.len as u32, f.is_cancel()) {
        if f.is_cancel() {
            r.stats.buf_cancel_items += 1;
        } else {
            r.stats.buf_cancelled += 1;
        }
        return Ok(());
    }
    if f.is_cancel() {
        // Cancel items are always in the table (pass 1).
        r.stats.buf_cancel_items += 1;
        return Ok(());
    }
    let mut buf = r.read(f.blkno, f.len as u32, "log buffer item")?;
    let runs = logged_runs(f, item, buf.len())?;
    if f.is_inode_buf() {
        replay_inode_buf(r, f, &runs, &mut buf)?;
        r.stats.inode_buf_replayed += 1;
        return r.write(f.blkno, &buf);
    }
    if crate::format::bufkind::BufKind::raw_from_blft(f.buf_type()).is_some() {
        // Raw realtime bitmap/summary words: no LSN to compare, no header
        // to stamp; the kernel replays these unconditionally too.
        for (off, data) in &runs {
            buf[*off..*off + data.len()].copy_from_slice(data);
        }
        r.stats.buf_replayed += 1;
        return r.write(f.blkno, &buf);
    }
    let uuid = r.uuid();
    if r.v5() {
        // A block whose CRC fails was torn by a crash during its write
        // back (its first sector, with the new LSN, landed; others did
        // not): its LSN proves nothing, and replaying every item of the
        // window over it rebuilds it, since every change since its last
        // complete write is in the window. (The kernel trusts the LSN.)
        let intact = meta_header(&buf).is_none_or(|h| crc::verify(&buf, h.crc_off));
        if let Some(disk) = block_lsn(&buf, &uuid).filter(|_| intact) {
            if buf_is_newer(disk, r.stamped.get(&f.blkno).copied(), lsn) {
                r.stats.buf_skipped_lsn += 1;
                return Ok(());
            }
        }
    }
    for (off, data) in &runs {
        buf[*off..*off + data.len()].copy_from_slice(data);
    }
    if be32(&buf, 0) == SB_MAGIC && f.blkno == 0 {
        r.stats.sb_replayed += 1;
    }
    if be16(&buf, 0) == INODE_MAGIC {
        // An inode cluster logged as an ordinary buffer: refresh the CRC of
        // every inode in it.
        refresh_inode_crcs(r, &mut buf);
    } else if r.v5() {
        stamp_and_verify(&mut buf, f.blkno, lsn, &uuid)?;
        r.stamped.insert(f.blkno, lsn);
    }
    r.stats.buf_replayed += 1;
    r.write(f.blkno, &buf)
}

fn refresh_inode_crcs(r: &Replay<'_>, buf: &mut [u8]) {
    if !r.v5() {
        return;
    }
    let isize = r.geo.inodesize as usize;
    for ip in buf.chunks_exact_mut(isize) {
        if be16(ip, 0) == INODE_MAGIC && ip[4] >= 3 {
            crc::update(ip, INODE_CRC_OFF);
        }
    }
}

/// Copy the logged `di_next_unlinked` fields into an inode cluster buffer.
fn replay_inode_buf(
    r: &Replay<'_>,
    f: &BufFormat,
    runs: &[(usize, &[u8])],
    buf: &mut [u8],
) -> Result<()> {
    let isize = r.geo.inodesize as usize;
    let at = Location::Daddr(f.blkno);
    for i in 0..buf.len() / isize {
        let field = i * isize + NEXT_UNLINKED_OFF;
        let Some((off, data)) = runs
            .iter()
            .find(|(off, d)| field >= *off && field < *off + d.len())
        else {
            continue;
        };
        let rel = field - off;
        if rel + 4 > data.len() {
            return Err(Error::corrupt(
                "log inode buffer item",
                at,
                format!("next_unlinked of inode {i} split across logged regions"),
            ));
        }
        let v = be32(data, rel);
        if v == 0 {
            return Err(Error::corrupt(
                "log inode buffer item",
                at,
                format!("logged next_unlinked of inode {i} is zero"),
            ));
        }
        let ip = &mut buf[i * isize..(i + 1) * isize];
        if be16(ip, 0) != INODE_MAGIC {
            return Err(Error::corrupt(
                "inode",
                at,
                format!("inode {i} of a replayed inode buffer has bad magic"),
            ));
        }
        put_be32(ip, NEXT_UNLINKED_OFF, v);
        if r.v5() && ip[4] >= 3 {
            crc::update(ip, INODE_CRC_OFF);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_bits() {
        assert_eq!(dirty_runs(&[0b1110_0100]), vec![(2, 1), (5, 3)]);
        assert_eq!(dirty_runs(&[0x8000_0000, 1]), vec![(31, 2)]);
        assert_eq!(dirty_runs(&[0, 0]), vec![]);
    }
}
