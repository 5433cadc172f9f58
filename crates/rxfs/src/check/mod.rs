//! A read-only consistency checker in the spirit of `xfs_repair -n`.
//!
//! [`check`] walks every metadata structure of an image opened read-only
//! and turns each inconsistency into a [`Finding`] with a stable kebab-case
//! code. It never writes, never panics on what the disk says, and keeps
//! going after a failure: a structure that cannot be read becomes a finding
//! and the checks that depend on it are skipped (their own findings would
//! only repeat it).
//!
//! Phases, in order (each in its own file):
//! 1. `sb`: the primary superblock against every secondary one.
//! 2. `ag`: per AG, the AGF/AGI/AGFL and every short-format btree (the
//!    tree walker verifies shape, keys, siblings, CRCs; this adds counts,
//!    ordering across leaves, bnobt = cntbt, AGF/AGI counters).
//! 3. `inodes`: every inode chunk against its inodes (free bits vs
//!    mode), the finobt, every in-use inode with its forks and its bmbt
//!    (`bmbt`: keys, siblings, levels), its core fields (`core`).
//! 4. `dirs`: every directory's entries, `.`/`..`, the hash index
//!    (`dirindex`), link counts, reachability, and every attribute fork.
//! 5. `space`: the space map: every block of every AG claimed exactly
//!    once by the phases above; the rmapbt covering exactly the blocks in
//!    use, and (`rmap`) holding exactly the reverse mappings the claims
//!    imply; each shared extent's refcount equal to the file mappings of its
//!    blocks; then the superblock counters.
//! 6. `realtime` (filesystems with a realtime section): the rt extents the
//!    inode phase saw realtime files map, each once and inside the device,
//!    against the bitmap; the summary and `sb_frextents` against the
//!    bitmap.
//!
//! Bounds: one to four bits per data-device block for the space map, a
//! counter per shared block (reflink), one record per extent for the rmap
//! comparison (rmapbt), a few bytes per in-use inode for link counting,
//! one bit per realtime extent (up to a limit, see `realtime`),
//! and at most [`MAX_FINDINGS`] findings kept (the rest only counted).
//! `fs` must be opened read-only; with `norecovery` the on-disk state is
//! checked (a dirty log is reported as `log-dirty`, and the superblock
//! counters and unlinked lists are then not judged).
//!
//! Finding codes are listed in the README (`rxfs check`); each phase's
//! module documentation says what its codes mean. What was left unchecked
//! and why (a limit, a missing realtime device) goes to [`Report::notes`],
//! which are not findings.

mod ag;
mod bmbt;
mod core;
mod dirindex;
mod dirs;
mod inodes;
mod realtime;
mod rmap;
mod sb;
mod space;

use std::collections::{HashMap, HashSet};

use crate::fs::Filesystem;
use crate::types::FileType;

/// Findings kept in memory; past this they are only counted.
pub const MAX_FINDINGS: usize = 10_000;

/// One inconsistency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Stable kebab-case code (see the README's list).
    pub code: &'static str,
    /// AG number, when the problem is inside one AG.
    pub ag: Option<u32>,
    /// AG block number (with `ag`), or a filesystem block number without.
    pub block: Option<u64>,
    /// Inode number, when the problem belongs to an inode.
    pub ino: Option<u64>,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code)?;
        let located = self.ag.is_some() || self.block.is_some() || self.ino.is_some();
        if located {
            write!(f, ":")?;
        }
        if let Some(a) = self.ag {
            write!(f, " ag {a}")?;
        }
        if let Some(b) = self.block {
            write!(f, " block {b}")?;
        }
        if let Some(i) = self.ino {
            write!(f, " inode {i}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// What the checker counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckStats {
    pub ags: u64,
    pub inodes_used: u64,
    pub inodes_free: u64,
    pub directories: u64,
    pub dir_entries: u64,
    pub btree_blocks: u64,
    pub free_blocks: u64,
    pub extents: u64,
    pub xattrs: u64,
    /// Free rt extents counted in the realtime bitmap.
    pub rt_free_extents: u64,
    pub findings: u64,
}

impl CheckStats {
    pub fn lines(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("ags", self.ags),
            ("inodes_used", self.inodes_used),
            ("inodes_free", self.inodes_free),
            ("directories", self.directories),
            ("dir_entries", self.dir_entries),
            ("btree_blocks", self.btree_blocks),
            ("free_blocks", self.free_blocks),
            ("extents", self.extents),
            ("xattrs", self.xattrs),
            ("rt_free_extents", self.rt_free_extents),
            ("findings", self.findings),
        ]
    }
}

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub stats: CheckStats,
    /// What was not checked, and why (not findings: a clean report may
    /// carry notes).
    pub notes: Vec<String>,
}

impl Report {
    pub fn clean(&self) -> bool {
        self.stats.findings == 0
    }
}

/// Progress callback: (phase name, units done, units total).
pub type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// What the inode scan learns about an in-use inode, for the directory
/// phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InodeInfo {
    pub nlink: u32,
    pub ftype: Option<FileType>,
}

/// State shared by the phases.
pub(crate) struct Checker<'a> {
    pub fs: &'a Filesystem,
    pub report: Report,
    pub space: space::SpaceMap,
    /// Every in-use inode (from the inobt and the inode cores).
    pub inodes: HashMap<u64, InodeInfo>,
    /// Inodes on an AGI unlinked list.
    pub unlinked: HashSet<u64>,
    /// Directory inodes, in inode order.
    pub dirs: Vec<u64>,
    /// Sums of what the AG trees hold, for the superblock counters.
    pub sum_icount: u64,
    pub sum_ifree: u64,
    pub sum_fdblocks: u64,
    /// The AG headers/trees could all be read (counters comparable).
    pub sums_complete: bool,
    /// AGs whose AGI or inobt could not be read: their inodes are unknown,
    /// so entries naming them and link counts are not judged.
    pub inode_ags_bad: HashSet<u32>,
    /// The rt extents realtime files map.
    pub rt: realtime::RtClaims,
}

impl<'a> Checker<'a> {
    pub fn add(
        &mut self,
        code: &'static str,
        ag: Option<u32>,
        block: Option<u64>,
        ino: Option<u64>,
        message: impl Into<String>,
    ) {
        self.report.stats.findings += 1;
        if self.report.findings.len() < MAX_FINDINGS {
            self.report.findings.push(Finding {
                code,
                ag,
                block,
                ino,
                message: message.into(),
            });
        }
    }

    pub fn add_ag(&mut self, code: &'static str, ag: u32, block: Option<u64>, msg: String) {
        self.add(code, Some(ag), block, None, msg);
    }

    pub fn add_ino(&mut self, code: &'static str, ino: u64, msg: impl Into<String>) {
        self.add(code, None, None, Some(ino), msg);
    }
}

/// Check the whole filesystem. `fs` should be opened read-only with
/// `norecovery` (the on-disk state); a dirty log is reported as
/// `log-dirty`.
pub fn check(fs: &Filesystem, progress: Progress) -> Report {
    let mut c = Checker {
        fs,
        report: Report::default(),
        space: space::SpaceMap::new(fs.geo(), fs.sb().has_reflink(), fs.sb().has_rmapbt()),
        inodes: HashMap::new(),
        unlinked: HashSet::new(),
        dirs: Vec::new(),
        sum_icount: 0,
        sum_ifree: 0,
        sum_fdblocks: 0,
        sums_complete: true,
        inode_ags_bad: HashSet::new(),
        rt: realtime::RtClaims::new(crate::rt::layout(fs)),
    };
    let log_dirty = fs.log_state().is_some_and(|s| s.needs_recovery());
    if log_dirty {
        let st = fs.log_state().map(|s| s.to_string()).unwrap_or_default();
        c.add(
            "log-dirty",
            None,
            None,
            None,
            format!("the log needs recovery ({st}); checking the on-disk state without it"),
        );
    }
    c.report.stats.ags = fs.geo().agcount as u64;
    progress("superblocks", 0, 1);
    sb::check_superblocks(&mut c);
    let agcount = fs.geo().agcount as u64;
    for agno in 0..fs.geo().agcount {
        progress("AG headers and btrees", agno as u64, agcount);
        ag::check_ag(&mut c, agno);
    }
    for agno in 0..fs.geo().agcount {
        progress("inodes", agno as u64, agcount);
        inodes::check_ag_inodes(&mut c, agno);
    }
    progress("directories", 0, 1);
    dirs::check_dirs(&mut c, progress);
    progress("space map", 0, 1);
    space::report_unclaimed(&mut c);
    space::report_rmap(&mut c);
    rmap::report(&mut c);
    space::report_refcounts(&mut c);
    if !log_dirty {
        sb::check_counters(&mut c);
    }
    realtime::check_rt(&mut c, progress);
    progress("done", 1, 1);
    c.report
}
