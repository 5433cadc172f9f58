//! statfs, exactly as the kernel reports it for a read-only mount.
//!
//! The kernel's numbers come from in-memory summary counters (free blocks
//! `fdblocks`, allocated inodes `icount`, free inodes `ifree`) set up at
//! mount time, minus blocks it will never hand out:
//!
//! - Counters: with a clean log the kernel trusts the superblock's
//!   `fdblocks/icount/ifree` (written at unmount). When the log was dirty
//!   (or zeroed, or not looked at: `norecovery`), or those values are
//!   impossible, it recomputes them from the AG headers: `fdblocks = sum(freeblks + flcount + btreeblks)`,
//!   `icount = sum(agi count)`, `ifree = sum(agi freecount)`. (On a clean
//!   filesystem both give the same numbers; `ag_summary` computes the
//!   second.)
//! - Unavailable blocks: the allocation set-aside, `agcount * 8` (4 AGFL
//!   refill blocks plus 4 for a bmbt split per AG), plus the blocks of the
//!   free-space btrees of every AG whose AGF the mount has read. The mount
//!   reads every AGF when it recomputes the counters, and also when it
//!   builds its temporary per-AG metadata reservations, which exist when
//!   finobt, reflink or rmapbt is enabled. Per AG that is `btreeblks`
//!   minus the non-root rmapbt blocks (`rmap_blocks - 1`), when positive.
//! - Read-only mounts make no reserve pool and keep no per-AG
//!   reservations (those are dropped right after log recovery), so nothing
//!   else is subtracted. Checked against this machine's kernel for
//!   defaults, rmapbt, no reflink/finobt, small blocks, many AGs.
//!
//! Then: `blocks = dblocks - logblocks` (internal log), `bfree = bavail =
//! max(0, fdblocks - unavailable)`, `files = min(icount + (bfree <<
//! inopblog), maxicount)` but at least `icount`, where `maxicount` is
//! `imax_pct`% of the data blocks rounded down to whole inode chunks, and
//! `ffree = files - (icount - ifree)`.
//!
//! The realtime section: statfs is asked about a path, and XFS answers
//! for the inode the path names. When that inode has the rtinherit or
//! the realtime flag and the mount has a realtime device, the block
//! numbers are the realtime section's instead: `blocks = rblocks`,
//! `bfree = bavail = free rt extents * rextsize` (the inode numbers stay
//! the data device's). [`Filesystem::statfs_of`] does this per inode
//! (FUSE's STATFS carries the node of the path); [`Filesystem::statfs`]
//! answers for the root directory. Free rt extents are `sb_frextents` on
//! a read-only mount and the in-core counter on a read-write one (the
//! superblock's is a lazy counter, written back only at unmount).
//!
//! `XFS_IOC_FSCOUNTS` ([`Filesystem::fs_counts`]) reports the same data
//! device numbers (free blocks as `bfree`, inodes as counted here) and the
//! free realtime extents. On a read-write mount the kernel also holds
//! back its per-AG metadata reservations from both; rxfs makes none, so
//! there its free blocks are higher by their size.

use super::Filesystem;
use crate::error::{Error, Location, Result};
use crate::format::fsop_geom::{encode_geometry, FsCounts, GeomVersion};
use crate::format::inode::{DIFLAG_REALTIME, DIFLAG_RTINHERIT};
use crate::types::{AgNumber, Ino};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatFs {
    pub bsize: u32,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u32,
    pub frsize: u32,
}

/// Sums over every AG's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgSummary {
    /// Free blocks as the kernel counts them: free extents, blocks on the
    /// free lists and non-root free-space/rmap btree blocks.
    pub fdblocks: u64,
    pub icount: u64,
    pub ifree: u64,
    /// Blocks of the free-space btrees the kernel keeps out of statfs once
    /// it has read the AGFs.
    pub allocbt_blocks: u64,
}

/// Per-AG set-aside: blocks to refill an empty AGFL, plus a bmbt split.
const ALLOC_SET_ASIDE_PER_AG: u64 = 4 + 4;

/// Blocks the kernel sets aside from the free count (never allocated to
/// ordinary requests): per AG, the AGFL reserve and a few btree blocks.
pub fn alloc_set_aside(geo: &crate::geometry::Geometry) -> u64 {
    geo.agcount as u64 * ALLOC_SET_ASIDE_PER_AG
}
/// Longest name in a directory entry.
const NAME_MAX: u32 = 255;
/// Largest inode number (56 bits).
const MAX_INUMBER: u64 = (1 << 56) - 1;

impl Filesystem {
    /// statfs of the root directory as the kernel shows it for a mount of
    /// this image with the same options (see [`Filesystem::statfs_of`]).
    pub fn statfs(&self) -> Result<StatFs> {
        self.statfs_of(self.root_ino())
    }

    /// statfs as the kernel shows it for a path naming inode `ino`: the
    /// realtime section's blocks when `ino` has the rtinherit or realtime
    /// flag and the realtime device is open (see the module doc). The
    /// kernel trusts the superblock counters only when it found a clean
    /// log: not with `norecovery` (it never looks at the log then), not for
    /// a zeroed log, not after recovery.
    pub fn statfs_of(&self, ino: Ino) -> Result<StatFs> {
        let clean =
            !self.options().norecovery && self.log_state().is_some_and(|s| s.clean && !s.zeroed);
        self.statfs_at(ino, clean)
    }

    /// statfs of the root directory as the kernel shows it for a read-only
    /// mount, given whether the log was clean when mounted (a dirty log
    /// makes the kernel recompute its counters from the AG headers after
    /// recovery).
    pub fn statfs_with(&self, log_was_clean: bool) -> Result<StatFs> {
        self.statfs_at(self.root_ino(), log_was_clean)
    }

    fn statfs_at(&self, ino: Ino, log_was_clean: bool) -> Result<StatFs> {
        let (mut st, _) = self.data_space(log_was_clean)?;
        let sb = self.sb();
        if self.rtdev().is_some() && sb.rblocks > 0 {
            let ip = self.iget(ino)?;
            if ip.core.flags & (DIFLAG_RTINHERIT | DIFLAG_REALTIME) != 0 {
                st.blocks = sb.rblocks;
                st.bfree = self.free_rtextents().saturating_mul(sb.rextsize as u64);
            }
        }
        st.bavail = st.bfree;
        Ok(st)
    }

    /// Free realtime extents: the in-core counter of a read-write mount,
    /// else the superblock's.
    fn free_rtextents(&self) -> u64 {
        match self.rw() {
            Some(rw) => rw.counters().frextents.max(0) as u64,
            None => self.sb().frextents,
        }
    }

    /// The `XFS_IOC_FSCOUNTS` answer: free data blocks as statfs counts
    /// them for the data device, free realtime extents, free and allocated
    /// inodes, from the same counters as [`Filesystem::statfs`].
    pub fn fs_counts(&self) -> Result<FsCounts> {
        let clean =
            !self.options().norecovery && self.log_state().is_some_and(|s| s.clean && !s.zeroed);
        let (st, (icount, ifree)) = self.data_space(clean)?;
        Ok(FsCounts {
            freedata: st.bfree,
            freertx: self.free_rtextents(),
            freeino: ifree,
            allocino: icount,
        })
    }

    /// statfs of the data device, and the inode counters (allocated,
    /// free) it was computed from.
    fn data_space(&self, log_was_clean: bool) -> Result<(StatFs, (u64, u64))> {
        let sb = self.sb();
        let geo = self.geo();
        let recompute = !log_was_clean || !self.sb_counters_sane();
        let agfs_read = recompute || sb.has_finobt() || sb.has_reflink() || sb.has_rmapbt();
        let (fdblocks, icount, ifree, allocbt) = if let Some(rw) = self.rw() {
            // A read-write mount: the in-core counters, exact at every
            // commit (the kernel's rw statfs also holds back per-AG
            // reservations, which rxfs does not make).
            let c = rw.counters();
            let allocbt = if agfs_read {
                self.ag_summary()?.allocbt_blocks
            } else {
                0
            };
            (
                c.fdblocks.max(0) as u64,
                c.icount.max(0) as u64,
                c.ifree.max(0) as u64,
                allocbt,
            )
        } else if agfs_read {
            let s = self.ag_summary()?;
            if recompute {
                if s.fdblocks > sb.dblocks || s.ifree > s.icount {
                    return Err(Error::corrupt(
                        "AG headers",
                        Location::Unknown,
                        format!(
                            "summed counters impossible: {} free blocks of {}, {} free inodes of {}",
                            s.fdblocks, sb.dblocks, s.ifree, s.icount
                        ),
                    ));
                }
                (s.fdblocks, s.icount, s.ifree, s.allocbt_blocks)
            } else {
                (sb.fdblocks, sb.icount, sb.ifree, s.allocbt_blocks)
            }
        } else {
            (sb.fdblocks, sb.icount, sb.ifree, 0)
        };

        let log_blocks = if sb.logstart != 0 {
            sb.logblocks as u64
        } else {
            0
        };
        let unavailable = geo.agcount as u64 * ALLOC_SET_ASIDE_PER_AG + allocbt;
        let mut st = StatFs {
            bsize: geo.blocksize,
            frsize: geo.blocksize,
            namelen: NAME_MAX,
            blocks: sb.dblocks - log_blocks,
            bfree: fdblocks.saturating_sub(unavailable),
            ..StatFs::default()
        };

        let fake_inodes = st
            .bfree
            .checked_shl(geo.inopblog as u32)
            .unwrap_or(u64::MAX);
        st.files = icount.saturating_add(fake_inodes).min(MAX_INUMBER);
        let maxicount = self.max_icount();
        if maxicount != 0 {
            st.files = st.files.min(maxicount);
        }
        st.files = st.files.max(icount);
        st.ffree = st.files.saturating_sub(icount.saturating_sub(ifree));
        st.bavail = st.bfree;
        Ok((st, (icount, ifree)))
    }

    /// The `XFS_IOC_FSGEOMETRY` structure of version `v` (see
    /// [`crate::format::fsop_geom`]).
    pub fn fs_geometry(&self, v: GeomVersion) -> Vec<u8> {
        encode_geometry(self.sb(), v)
    }

    /// Free blocks and inode counts summed over every AG's headers.
    pub fn ag_summary(&self) -> Result<AgSummary> {
        let rmapbt = self.sb().has_rmapbt();
        let mut s = AgSummary::default();
        for agno in 0..self.geo().agcount {
            let agf = self.read_agf(AgNumber(agno))?;
            let agi = self.read_agi(AgNumber(agno))?;
            s.fdblocks += agf.freeblks as u64 + agf.flcount as u64 + agf.btreeblks as u64;
            s.icount += agi.count as u64;
            s.ifree += agi.freecount as u64;
            let mut allocbt = agf.btreeblks as i64;
            if rmapbt {
                allocbt -= agf.rmap_blocks as i64 - 1;
            }
            s.allocbt_blocks += allocbt.max(0) as u64;
        }
        Ok(s)
    }

    /// Whether the superblock's summary counters are plausible enough for
    /// the kernel to use them as they are.
    fn sb_counters_sane(&self) -> bool {
        let sb = self.sb();
        let (min, max) = self.icount_range();
        sb.fdblocks <= sb.dblocks && sb.icount >= min && sb.icount <= max && sb.ifree <= sb.icount
    }

    /// Smallest and largest inode count the geometry allows: the first
    /// chunk (root and realtime inodes) up to every inode slot between the
    /// first cluster-aligned block after the AG headers and the last
    /// aligned block of each AG.
    fn icount_range(&self) -> (u64, u64) {
        let geo = self.geo();
        let align = if geo.inoalignmt > 0 && geo.inoalignmt >= geo.inode_cluster_blocks {
            geo.inoalignmt as u64
        } else {
            1
        };
        let first_block = crate::format::ag::first_usable_agbno(geo.sectsize, geo.blocklog) as u64;
        let first = first_block.div_ceil(align) * align;
        let mut max = 0u64;
        for agno in 0..geo.agcount {
            let last = geo.ag_size(AgNumber(agno)) as u64 / align * align;
            if last > first {
                max += (last - first) << geo.inopblog;
            }
        }
        (64, max)
    }

    /// The kernel's inode limit: `imax_pct` percent of the data blocks,
    /// rounded down to whole inode chunks, in inodes (0 = no limit).
    fn max_icount(&self) -> u64 {
        let sb = self.sb();
        let geo = self.geo();
        let chunk_inodes = (geo.inodes_per_chunk as u64).max(geo.inopblock as u64);
        let chunk_blocks = chunk_inodes >> geo.inopblog;
        if sb.imax_pct == 0 || chunk_blocks == 0 {
            return 0;
        }
        let blocks = sb.dblocks * sb.imax_pct as u64 / 100;
        (blocks / chunk_blocks * chunk_blocks) << geo.inopblog
    }
}
