//! Recovery of ICREATE items (inode chunk initialisation).
//!
//! A v5 filesystem does not log new inode chunks block by block: it logs
//! one ICREATE item (AG, first AG block, inode count, inode size, length in
//! blocks, generation; all big-endian) and recovery writes the chunk:
//!
//! ```text
//!  every inode of every cluster:  magic "IN", version 3, di_gen = gen,
//!  di_next_unlinked = NULLAGINO, di_ino = its number, di_uuid = sb uuid,
//!  everything else zero, CRC computed.
//! ```
//!
//! If any cluster buffer of the chunk was cancelled (the chunk was freed
//! later in the log), the whole item is skipped, as the kernel does.
//! Changes logged to the new inodes afterwards replay on top of this.

use super::Replay;
use crate::error::{Error, Location, Result};
use crate::format::log_items::IcreateFormat;
use crate::format::{crc, put_be16, put_be32, put_be64};
use crate::types::{AgBlock, AgNumber};

const INODE_MAGIC: u16 = 0x494e;
const NULLAGINO: u32 = 0xffff_ffff;

/// Replay one ICREATE item.
pub(super) fn replay(r: &mut Replay<'_>, c: &IcreateFormat) -> Result<()> {
    let geo = r.geo;
    let at = Location::Daddr(geo.agb_to_daddr(AgNumber(c.ag), AgBlock(c.agbno)).0);
    let bad = |d: String| Err(Error::corrupt("log icreate item", at, d));
    let bpc = geo.inode_cluster_blocks.max(1);
    let inopb = geo.inopblock;
    if c.ag >= geo.agcount
        || c.length == 0
        || !c.length.is_multiple_of(bpc)
        || c.agbno as u64 + c.length as u64 > geo.agblocks as u64
    {
        return bad(format!(
            "chunk of {} blocks at AG {} block {} (cluster {bpc} blocks)",
            c.length, c.ag, c.agbno
        ));
    }
    if c.isize != geo.inodesize
        || c.count == 0
        || c.count as u64 * c.isize as u64 != (c.length as u64) << geo.blocklog
        || c.count > 256
    {
        return bad(format!(
            "{} inodes of {} bytes in {} blocks",
            c.count, c.isize, c.length
        ));
    }
    let nbufs = c.length / bpc;
    let bb_per_cluster = bpc << (geo.blocklog - 9);
    let daddr_of = |j: u32| {
        geo.agb_to_daddr(AgNumber(c.ag), AgBlock(c.agbno + j * bpc))
            .0
    };
    if (0..nbufs).any(|j| r.is_cancelled(daddr_of(j), bb_per_cluster)) {
        r.stats.icreate_cancelled += 1;
        return Ok(());
    }
    let isize = geo.inodesize as usize;
    let uuid = r.uuid();
    let agino_shift = geo.agblklog as u32 + geo.inopblog as u32;
    for j in 0..nbufs {
        let mut buf = vec![0u8; (bpc as usize) << geo.blocklog];
        for (i, ip) in buf.chunks_exact_mut(isize).enumerate() {
            let i = i as u32;
            let agbno = c.agbno + j * bpc + i / inopb;
            let agino = (agbno << geo.inopblog) | (i % inopb);
            let ino = ((c.ag as u64) << agino_shift) | agino as u64;
            put_be16(ip, 0, INODE_MAGIC);
            ip[4] = 3;
            put_be32(ip, 92, c.gen);
            put_be32(ip, 96, NULLAGINO);
            put_be64(ip, 152, ino);
            ip[160..176].copy_from_slice(&uuid);
            crc::update(ip, 100);
        }
        r.write(daddr_of(j), &buf)?;
    }
    r.stats.icreate_replayed += 1;
    Ok(())
}
