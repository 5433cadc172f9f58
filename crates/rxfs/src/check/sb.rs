//! Superblock checks: every secondary superblock against the primary, and
//! the primary's summary counters against what the AG trees hold.
//!
//! Secondaries are compared on the geometry and feature fields only, as
//! `xfs_repair` does: their counters, root inode numbers and the feature
//! bits the kernel turns on at run time (versionnum's ATTR/QUOTA bits,
//! features2's ATTR2) are not kept up to date by the kernel. The summary counters are compared only when
//! the log is clean (a clean unmount writes them; with lazy counters they
//! are stale while a log is dirty).

use super::Checker;
use crate::format::sb::Superblock;
use crate::types::AgNumber;

/// versionnum bit: quotas were enabled once.
const VERSION_QUOTABIT: u16 = 0x0040;

/// The fields compared, by name.
fn geometry(sb: &Superblock) -> Vec<(&'static str, u64)> {
    vec![
        ("blocksize", sb.blocksize as u64),
        ("dblocks", sb.dblocks),
        ("rblocks", sb.rblocks),
        ("rextents", sb.rextents),
        ("logstart", sb.logstart),
        ("rextsize", sb.rextsize as u64),
        ("agblocks", sb.agblocks as u64),
        ("agcount", sb.agcount as u64),
        ("rbmblocks", sb.rbmblocks as u64),
        ("logblocks", sb.logblocks as u64),
        // The feature bits of versionnum and features2 (ATTR, QUOTA,
        // ATTR2) are set on the primary at run time, not on secondaries.
        ("version", (sb.versionnum & 0xf) as u64),
        ("sectsize", sb.sectsize as u64),
        ("inodesize", sb.inodesize as u64),
        ("inopblock", sb.inopblock as u64),
        ("blocklog", sb.blocklog as u64),
        ("sectlog", sb.sectlog as u64),
        ("inodelog", sb.inodelog as u64),
        ("inopblog", sb.inopblog as u64),
        ("agblklog", sb.agblklog as u64),
        ("rextslog", sb.rextslog as u64),
        ("imax_pct", sb.imax_pct as u64),
        ("inoalignmt", sb.inoalignmt as u64),
        ("unit", sb.unit as u64),
        ("width", sb.width as u64),
        ("dirblklog", sb.dirblklog as u64),
        ("logsectlog", sb.logsectlog as u64),
        ("logsectsize", sb.logsectsize as u64),
        ("logsunit", sb.logsunit as u64),
        ("features_compat", sb.features_compat as u64),
        ("features_ro_compat", sb.features_ro_compat as u64),
        ("features_incompat", sb.features_incompat as u64),
        ("spino_align", sb.spino_align as u64),
    ]
}

pub(crate) fn check_superblocks(c: &mut Checker) {
    let fs = c.fs;
    let primary = geometry(fs.sb());
    let sectsize = fs.geo().sectsize as usize;
    for agno in 1..fs.geo().agcount {
        let daddr = fs.geo().ag_header_daddr(AgNumber(agno), 0);
        let sb = fs
            .read_raw(daddr, sectsize)
            .and_then(|b| Superblock::decode(&b, daddr.0));
        let sb = match sb {
            Ok(sb) => sb,
            Err(e) => {
                c.add_ag("sb-secondary-bad", agno, Some(0), e.to_string());
                continue;
            }
        };
        if sb.uuid != fs.sb().uuid {
            let msg = "secondary superblock UUID differs from the primary's".to_string();
            c.add_ag("sb-secondary-mismatch", agno, Some(0), msg);
        }
        // Without the quota bit, the quota inode fields hold nothing.
        if sb.versionnum & VERSION_QUOTABIT == 0 {
            for (name, q) in [
                ("uquotino", sb.uquotino),
                ("gquotino", sb.gquotino),
                ("pquotino", sb.pquotino),
            ] {
                if q != 0 && q != u64::MAX {
                    let msg = format!("secondary superblock {name} = {q} without quotas");
                    c.add_ag("sb-secondary-mismatch", agno, Some(0), msg);
                }
            }
        }
        for ((name, p), (_, s)) in primary.iter().zip(geometry(&sb)) {
            if *p != s {
                let msg = format!("secondary superblock {name} = {s:#x}, primary has {p:#x}");
                c.add_ag("sb-secondary-mismatch", agno, Some(0), msg);
            }
        }
    }
}

/// Compare the primary superblock's counters with the sums of the AGs.
pub(crate) fn check_counters(c: &mut Checker) {
    if !c.sums_complete {
        return;
    }
    let sb = c.fs.sb().clone();
    let pairs = [
        ("sb-icount", "icount", sb.icount, c.sum_icount),
        ("sb-ifree", "ifree", sb.ifree, c.sum_ifree),
        ("sb-fdblocks", "fdblocks", sb.fdblocks, c.sum_fdblocks),
    ];
    for (code, name, disk, counted) in pairs {
        if disk != counted {
            let msg = format!("superblock {name} {disk}, counted {counted}");
            c.add(code, None, None, None, msg);
        }
    }
}
