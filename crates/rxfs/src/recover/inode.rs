//! Recovery of inode items.
//!
//! An inode item holds the whole inode core as the kernel had it in memory
//! (`xfs_log_dinode`: the on-disk layout, but every field in the host byte
//! order of the logging machine), plus the forks that changed:
//!
//! ```text
//!  region 0  inode format: fields mask, fork sizes, ino, cluster (blkno, len, boffset)
//!  region 1  log dinode (176 bytes for v3)
//!  region 2  data fork: local bytes | extent records | in-memory bmbt root  (if logged)
//!  region 2/3 attr fork: the same three shapes                             (if logged)
//! ```
//!
//! Replay rebuilds the on-disk inode from the log dinode (converting each
//! field to big-endian, keeping the on-disk `di_next_unlinked`, which only
//! inode-buffer items change, and stamping `di_lsn` with the transaction
//! LSN), copies the logged forks (a btree root is converted from the
//! in-memory long-format block to the on-disk `bmdr` root), and recomputes
//! the CRC. v5 rule: an inode whose `di_lsn` is past the transaction LSN
//! is already newer and is skipped; an equal `di_lsn` is replayed, since
//! checkpoints starting in the same log record share one LSN.

use super::{inode_is_newer, Replay};
use crate::error::{Error, Location, Result};

use crate::format::inode::{DINODE_CRC_OFF, DINODE_LSN_OFF, DINODE_MAGIC};
use crate::format::log_dinode::{
    log_dinode_to_disk, ILOG_ABROOT, ILOG_AFORK, ILOG_CORE, ILOG_DBROOT, ILOG_DEV, ILOG_DFORK,
};
use crate::format::log_items::{InodeFormat, LOG_DINODE_SIZE};
use crate::format::log_ops::LogItem;
use crate::format::{be16, be64, crc, put_be16, put_be32};
use crate::types::Lsn;

/// Bytes of the v3 inode core (where the data fork starts).
const CORE_V3: usize = 176;
/// Header of a v5 long-format btree block (the in-memory bmbt root).
const LBLOCK_CRC_LEN: usize = 72;

/// Convert an in-memory bmbt root block (`src`, long v5 header) into the
/// on-disk fork root (`dst`: level, numrecs, keys, pointers).
pub fn bmbt_to_bmdr(src: &[u8], dst: &mut [u8], at: Location) -> Result<()> {
    let bad = |d: String| Err(Error::corrupt("logged bmap btree root", at, d));
    if src.len() < LBLOCK_CRC_LEN + 16 || dst.len() < 4 + 16 {
        return bad(format!("root of {} bytes into {}", src.len(), dst.len()));
    }
    let level = be16(src, 4);
    let numrecs = be16(src, 6) as usize;
    let src_max = (src.len() - LBLOCK_CRC_LEN) / 16;
    let dst_max = (dst.len() - 4) / 16;
    if level == 0 || numrecs == 0 || numrecs > src_max || numrecs > dst_max {
        return bad(format!(
            "level {level}, {numrecs} records (room for {src_max} / {dst_max})"
        ));
    }
    dst.fill(0);
    put_be16(dst, 0, level);
    put_be16(dst, 2, numrecs as u16);
    let (skeys, sptrs) = (LBLOCK_CRC_LEN, LBLOCK_CRC_LEN + src_max * 8);
    let (dkeys, dptrs) = (4, 4 + dst_max * 8);
    dst[dkeys..dkeys + numrecs * 8].copy_from_slice(&src[skeys..skeys + numrecs * 8]);
    dst[dptrs..dptrs + numrecs * 8].copy_from_slice(&src[sptrs..sptrs + numrecs * 8]);
    Ok(())
}

/// Replay one inode item of the transaction at `lsn`.
pub(super) fn replay(r: &mut Replay<'_>, lsn: Lsn, f: &InodeFormat, item: &LogItem) -> Result<()> {
    let at = Location::Ino(f.ino);
    let bad = |d: String| Err(Error::corrupt("log inode item", at, d));
    if f.len <= 0 || f.boffset < 0 {
        return bad(format!("cluster length {} offset {}", f.len, f.boffset));
    }
    if f.fields & ILOG_CORE == 0 {
        return bad(format!("fields {:#x} without the core", f.fields));
    }
    if r.is_cancelled(f.blkno, f.len as u32) {
        r.stats.inode_cancelled += 1;
        return Ok(());
    }
    if !r.v5() {
        return Err(Error::NotSupported("recovery of v4 inodes".into()));
    }
    let isize = r.geo.inodesize as usize;
    let mut buf = r.read(f.blkno, f.len as u32, "log inode item")?;
    let off = f.boffset as usize;
    if off + isize > buf.len() {
        return bad(format!(
            "inode at byte {off} past its {}-byte cluster",
            buf.len()
        ));
    }
    let Some(ld) = item.regions.get(1) else {
        return bad("no log dinode region".into());
    };
    if ld.len() < LOG_DINODE_SIZE || ld.len() > isize {
        return bad(format!("log dinode of {} bytes", ld.len()));
    }
    let o = r.order;
    if o.u16(ld, 0) != DINODE_MAGIC || ld[4] < 3 {
        return bad(format!(
            "log dinode magic {:#x} version {}",
            o.u16(ld, 0),
            ld[4]
        ));
    }
    let dip = &mut buf[off..off + isize];
    if be16(dip, 0) != DINODE_MAGIC {
        return Err(Error::corrupt(
            "inode",
            at,
            format!("bad magic {:#x} in the inode being recovered", be16(dip, 0)),
        ));
    }
    if dip[4] >= 3 && inode_is_newer(be64(dip, DINODE_LSN_OFF) as i64, lsn) {
        r.stats.inode_skipped_lsn += 1;
        return Ok(());
    }
    if o.u64(ld, 152) != f.ino {
        return bad(format!("log dinode says inode {}", o.u64(ld, 152)));
    }
    let forkoff = ld[82] as usize * 8;
    if CORE_V3 + forkoff > isize {
        return bad(format!("fork offset {forkoff} past the inode"));
    }
    log_dinode_to_disk(ld, o, dip, lsn);
    let dsize = if forkoff != 0 {
        forkoff
    } else {
        isize - CORE_V3
    };
    let mut next = 2;
    if f.fields & ILOG_DFORK != 0 && f.regions > 2 {
        let Some(src) = item.regions.get(next) else {
            return bad("data fork region missing".into());
        };
        next += 1;
        let len = (f.dsize as usize).min(src.len());
        copy_fork(
            f.fields & ILOG_DFORK,
            &src[..len],
            &mut dip[CORE_V3..CORE_V3 + dsize],
            at,
        )?;
    } else if f.fields & ILOG_DEV != 0 {
        put_be32(dip, CORE_V3, f.rdev);
    }
    if f.fields & ILOG_AFORK != 0 && (f.regions as usize) > next {
        if forkoff == 0 {
            return bad("attr fork logged but the inode has none".into());
        }
        let Some(src) = item.regions.get(next) else {
            return bad("attr fork region missing".into());
        };
        let len = (f.asize as usize).min(src.len());
        let start = CORE_V3 + forkoff;
        copy_fork(f.fields & ILOG_AFORK, &src[..len], &mut dip[start..], at)?;
    }
    crc::update(dip, DINODE_CRC_OFF);
    r.stats.inode_replayed += 1;
    r.write(f.blkno, &buf)
}

/// Copy one logged fork into its on-disk area.
fn copy_fork(kind: u32, src: &[u8], dst: &mut [u8], at: Location) -> Result<()> {
    if kind & (ILOG_DBROOT | ILOG_ABROOT) != 0 {
        return bmbt_to_bmdr(src, dst, at);
    }
    if src.len() > dst.len() {
        return Err(Error::corrupt(
            "log inode item",
            at,
            format!(
                "{}-byte fork logged into a {}-byte fork",
                src.len(),
                dst.len()
            ),
        ));
    }
    dst[..src.len()].copy_from_slice(src);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::put_be64;

    #[test]
    fn bmbt_root_conversion() {
        let mut src = vec![0u8; LBLOCK_CRC_LEN + 4 * 16];
        put_be16(&mut src, 4, 1);
        put_be16(&mut src, 6, 2);
        put_be64(&mut src, 72, 0); // key 0
        put_be64(&mut src, 80, 100); // key 1
        put_be64(&mut src, 72 + 32, 7); // ptr 0
        put_be64(&mut src, 72 + 40, 9); // ptr 1
        let mut dst = vec![0xffu8; 4 + 5 * 16];
        bmbt_to_bmdr(&src, &mut dst, Location::Unknown).unwrap();
        assert_eq!((be16(&dst, 0), be16(&dst, 2)), (1, 2));
        assert_eq!(be64(&dst, 12), 100);
        assert_eq!(be64(&dst, 4 + 40), 7);
        assert_eq!(be64(&dst, 4 + 48), 9);
        put_be16(&mut src, 6, 9);
        assert!(bmbt_to_bmdr(&src, &mut dst, Location::Unknown).is_err());
    }
}
