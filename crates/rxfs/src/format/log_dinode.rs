//! The inode core as the log carries it (`xfs_log_dinode`): the on-disk
//! v3 core's layout with every field in the host byte order of the
//! logging machine, and the `XFS_ILOG_*` bits saying which parts of an
//! inode an inode item logs. The CIL formats inodes with
//! [`disk_to_log_dinode`]; recovery replays them with
//! [`log_dinode_to_disk`]; each is the other's inverse (but for
//! `di_next_unlinked`, which recovery keeps from disk: only inode-buffer
//! items change it).

use crate::format::inode as dinode;
use crate::format::log::HostOrder;
use crate::format::log_items::LOG_DINODE_SIZE;
use crate::format::{be16, be32, be64, put_be16, put_be32, put_be64};
use crate::types::Lsn;

pub const ILOG_CORE: u32 = 0x001;
pub const ILOG_DDATA: u32 = 0x002;
pub const ILOG_DEXT: u32 = 0x004;
pub const ILOG_DBROOT: u32 = 0x008;
pub const ILOG_DEV: u32 = 0x010;
pub const ILOG_ADATA: u32 = 0x040;
pub const ILOG_AEXT: u32 = 0x080;
pub const ILOG_ABROOT: u32 = 0x100;
/// Every data fork bit.
pub const ILOG_DFORK: u32 = ILOG_DDATA | ILOG_DEXT | ILOG_DBROOT;
/// Every attr fork bit.
pub const ILOG_AFORK: u32 = ILOG_ADATA | ILOG_AEXT | ILOG_ABROOT;

/// Offset of `di_lsn` in the core.
const LSN_OFF: usize = 112;
/// Bytes of the v3 inode core.
const CORE_V3: usize = 176;

/// The inverse of recovery's log-dinode conversion: on-disk (big endian)
/// core to the host-order `xfs_log_dinode`.
pub fn disk_to_log_dinode(d: &[u8], o: HostOrder, ld: &mut [u8], lsn: u64) {
    ld.fill(0);
    for off in [0usize, 2, 6, 20, 22, 80, 88, 90] {
        o.put_u16(ld, off, be16(d, off));
    }
    for off in [8usize, 12, 16, 72, 76, 84, 92, 96, 128] {
        o.put_u32(ld, off, be32(d, off));
    }
    for off in [24usize, 56, 64, 104, 120, 152] {
        o.put_u64(ld, off, be64(d, off));
    }
    ld[4] = d[4];
    ld[5] = d[5];
    ld[82] = d[82];
    ld[83] = d[83];
    let bigtime = be64(d, 120) & dinode::DIFLAG2_BIGTIME != 0;
    for off in [32usize, 40, 48, 144] {
        if bigtime {
            o.put_u64(ld, off, be64(d, off));
        } else {
            o.put_u32(ld, off, be32(d, off));
            o.put_u32(ld, off + 4, be32(d, off + 4));
        }
    }
    ld[132..144].copy_from_slice(&d[132..144]);
    ld[160..176].copy_from_slice(&d[160..176]);
    o.put_u64(ld, 112, lsn);
}

/// Convert a host-order log dinode into the on-disk core (big-endian) of
/// `dip`, keeping `di_next_unlinked` and stamping `di_lsn = lsn`.
pub fn log_dinode_to_disk(ld: &[u8], o: HostOrder, dip: &mut [u8], lsn: Lsn) {
    debug_assert!(ld.len() >= LOG_DINODE_SIZE && dip.len() >= CORE_V3);
    let u16s = [0usize, 2, 6, 20, 22, 80, 88, 90];
    let u32s = [8usize, 12, 16, 72, 76, 84, 92, 128];
    let u64s = [24usize, 56, 64, 104, 120, 152];
    for off in u16s {
        put_be16(dip, off, o.u16(ld, off));
    }
    for off in u32s {
        put_be32(dip, off, o.u32(ld, off));
    }
    for off in u64s {
        put_be64(dip, off, o.u64(ld, off));
    }
    dip[4] = ld[4];
    dip[5] = ld[5];
    dip[82] = ld[82];
    dip[83] = ld[83];
    let bigtime = o.u64(ld, 120) & dinode::DIFLAG2_BIGTIME != 0;
    for off in [32usize, 40, 48, 144] {
        if bigtime {
            put_be64(dip, off, o.u64(ld, off));
        } else {
            put_be32(dip, off, o.u32(ld, off));
            put_be32(dip, off + 4, o.u32(ld, off + 4));
        }
    }
    dip[132..144].copy_from_slice(&ld[132..144]);
    dip[160..176].copy_from_slice(&ld[160..176]);
    put_be64(dip, LSN_OFF, lsn.0 as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dinode_conversion_little_endian() {
        let o = HostOrder::Little;
        let mut ld = vec![0u8; LOG_DINODE_SIZE];
        o.put_u16(&mut ld, 0, dinode::DINODE_MAGIC);
        o.put_u16(&mut ld, 2, 0o100644);
        ld[4] = 3;
        ld[5] = 2;
        o.put_u32(&mut ld, 16, 1);
        o.put_u64(&mut ld, 56, 12345);
        o.put_u32(&mut ld, 32, 77); // legacy seconds
        o.put_u32(&mut ld, 36, 5); // nanoseconds
        o.put_u32(&mut ld, 96, 0xdead); // must not be copied
        o.put_u64(&mut ld, 152, 131);
        let mut dip = vec![0u8; 512];
        put_be32(&mut dip, 96, 0xffff_ffff);
        log_dinode_to_disk(&ld, o, &mut dip, Lsn::new(2, 10));
        assert_eq!(be16(&dip, 0), dinode::DINODE_MAGIC);
        assert_eq!(be16(&dip, 2), 0o100644);
        assert_eq!(be64(&dip, 56), 12345);
        assert_eq!(crate::format::be32(&dip, 32), 77);
        assert_eq!(crate::format::be32(&dip, 36), 5);
        assert_eq!(crate::format::be32(&dip, 96), 0xffff_ffff);
        assert_eq!(be64(&dip, 152), 131);
        assert_eq!(be64(&dip, LSN_OFF), Lsn::new(2, 10).0 as u64);
        // Bigtime: one 64-bit counter.
        o.put_u64(&mut ld, 120, dinode::DIFLAG2_BIGTIME);
        o.put_u64(&mut ld, 32, 0x1_0000_0002);
        log_dinode_to_disk(&ld, o, &mut dip, Lsn::new(2, 10));
        assert_eq!(be64(&dip, 32), 0x1_0000_0002);
    }
}
