//! The space map: one bit per block of every AG, set when some structure
//! claims the block.
//!
//! Invariants checked: every block is claimed exactly once, except blocks
//! that the refcountbt records as shared, which any number of file data
//! mappings may claim (a second bitmap remembers which claims were file
//! data, on reflink filesystems only), and exactly as many as the record's
//! refcount (`refcountbt-count`). A second claim is reported as
//! `block-multiply-claimed`, once per claiming extent; blocks nobody
//! claims as `block-unclaimed`, one finding per run
//! (`inobt-chunk-missing` for the inode chunks inside a run: chunks the
//! inobt lost). On rmapbt filesystems the blocks in use must be exactly
//! those the rmapbt covers (`rmapbt-missing`, `rmapbt-extra`). An AG whose
//! trees could not all be walked is not reported for unclaimed blocks (the
//! missing tree's blocks would all show up as noise).
//!
//! Memory: one to four bits per block, the refcountbt's shared records,
//! and a counter per shared block.

use std::collections::HashMap;

use super::Checker;
use crate::format::btree_rec::RmapRec;
use crate::geometry::Geometry;
use crate::types::{AgBlock, AgNumber};

/// What claims a block; used in messages and for the reflink rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Headers,
    Log,
    Free,
    Agfl,
    Btree(&'static str),
    Inodes,
    /// File data: inode, file offset of the first block, unwritten.
    Data(u64, u64, bool),
    /// Attr fork blocks: inode, fork offset of the first block.
    Attr(u64, u64),
    /// bmbt blocks: inode, whether of the attr fork.
    Bmbt(u64, bool),
    Cow,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Headers => write!(f, "the AG headers"),
            Owner::Log => write!(f, "the log"),
            Owner::Free => write!(f, "free space (bnobt)"),
            Owner::Agfl => write!(f, "the AGFL"),
            Owner::Btree(n) => write!(f, "a {n} block"),
            Owner::Inodes => write!(f, "an inode chunk"),
            Owner::Data(i, ..) => write!(f, "data of inode {i}"),
            Owner::Attr(i, _) => write!(f, "attr fork of inode {i}"),
            Owner::Bmbt(i, _) => write!(f, "a bmbt block of inode {i}"),
            Owner::Cow => write!(f, "CoW staging (refcountbt)"),
        }
    }
}

struct Bits(Vec<u64>);

impl Bits {
    fn new(n: u32) -> Self {
        Bits(vec![0; (n as usize).div_ceil(64)])
    }
    fn get(&self, i: u32) -> bool {
        self.0[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    fn set(&mut self, i: u32) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }
}

struct AgMap {
    len: u32,
    used: Bits,
    /// Claimed by file data (reflink filesystems only).
    data: Option<Bits>,
    /// Shared according to the refcountbt (reflink filesystems only).
    shared: Option<Bits>,
    /// Free according to the bnobt, and covered by some rmapbt record
    /// (rmapbt filesystems only; `rmapped` set once the rmapbt was read).
    free: Option<Bits>,
    rmapped: Option<Bits>,
    /// Shared extents as the refcountbt records them (start, len, refcount),
    /// and how many file data mappings claimed each shared block.
    shared_recs: Vec<(u32, u32, u32)>,
    data_refs: HashMap<u32, u32>,
    /// Some tree of this AG could not be walked.
    incomplete: bool,
}

pub(crate) struct SpaceMap {
    ags: Vec<AgMap>,
    /// rmapbt filesystems: per AG, the reverse mappings the claims imply,
    /// and the rmapbt's records (once read).
    pub rmap_want: Option<Vec<Vec<RmapRec>>>,
    pub rmap_have: Vec<Option<Vec<RmapRec>>>,
}

impl SpaceMap {
    pub fn new(geo: &Geometry, reflink: bool, rmapbt: bool) -> Self {
        let ags = (0..geo.agcount)
            .map(|a| {
                let len = geo.ag_size(AgNumber(a));
                AgMap {
                    len,
                    used: Bits::new(len),
                    data: reflink.then(|| Bits::new(len)),
                    shared: reflink.then(|| Bits::new(len)),
                    free: rmapbt.then(|| Bits::new(len)),
                    rmapped: None,
                    shared_recs: Vec::new(),
                    data_refs: HashMap::new(),
                    incomplete: false,
                }
            })
            .collect();
        SpaceMap {
            ags,
            rmap_want: rmapbt.then(|| vec![Vec::new(); geo.agcount as usize]),
            rmap_have: vec![None; geo.agcount as usize],
        }
    }

    pub fn ag_incomplete(&self, agno: u32) -> bool {
        self.ags.get(agno as usize).is_none_or(|m| m.incomplete)
    }

    pub fn mark_incomplete(&mut self, agno: u32) {
        if let Some(m) = self.ags.get_mut(agno as usize) {
            m.incomplete = true;
        }
    }

    /// Record what an rmapbt record covers (clipped to the AG).
    pub fn mark_rmapped(&mut self, agno: u32, start: u32, len: u32) {
        if let Some(m) = self.ags.get_mut(agno as usize) {
            let end = (start as u64 + len as u64).min(m.len as u64) as u32;
            let r = m.rmapped.get_or_insert_with(|| Bits::new(m.len));
            (start..end).for_each(|b| r.set(b));
        }
    }

    pub fn mark_shared(&mut self, agno: u32, start: u32, len: u32, refcount: u32) {
        if let Some(m) = self.ags.get_mut(agno as usize) {
            m.shared_recs.push((start, len, refcount));
            let end = (start as u64 + len as u64).min(m.len as u64) as u32;
            if let Some(s) = &mut m.shared {
                (start..end).for_each(|b| s.set(b));
            }
        }
    }
}

impl Checker<'_> {
    /// Claim `len` blocks from `agbno` of AG `agno` for `owner`.
    pub fn claim(&mut self, agno: u32, agbno: u32, len: u64, owner: Owner) {
        let Some(m) = self.space.ags.get_mut(agno as usize) else {
            let msg = format!("{owner} claims blocks in AG {agno}, which does not exist");
            self.add(
                "block-out-of-range",
                Some(agno),
                Some(agbno as u64),
                None,
                msg,
            );
            return;
        };
        let end = agbno as u64 + len;
        if end > m.len as u64 {
            let msg = format!(
                "{owner} claims blocks {agbno}..{end}, past the AG's {} blocks",
                m.len
            );
            self.add(
                "block-out-of-range",
                Some(agno),
                Some(agbno as u64),
                None,
                msg,
            );
            return;
        }
        let is_data = matches!(owner, Owner::Data(..));
        if let Some(want) = self.space.rmap_want.as_mut() {
            if let Some(r) = super::rmap::expected(owner, agbno, len as u32) {
                want[agno as usize].push(r);
            }
        }
        let mut dup: Option<(u32, u32)> = None;
        for b in agbno..end as u32 {
            let shared = is_data && m.shared.as_ref().is_some_and(|s| s.get(b));
            if shared {
                *m.data_refs.entry(b).or_default() += 1;
            }
            let shared_ok = shared && m.data.as_ref().is_some_and(|d| d.get(b));
            if m.used.get(b) && !shared_ok {
                dup = Some(match dup {
                    None => (b, 1),
                    Some((s, n)) => (s, n + 1),
                });
            }
            m.used.set(b);
            if owner == Owner::Free {
                if let Some(f) = &mut m.free {
                    f.set(b);
                }
            }
            if is_data {
                if let Some(d) = &mut m.data {
                    d.set(b);
                }
            }
        }
        if let Some((first, n)) = dup {
            let msg = format!(
                "{n} block(s) of {owner} ({agbno}+{len}) from {first} were already claimed"
            );
            self.add(
                "block-multiply-claimed",
                Some(agno),
                Some(first as u64),
                None,
                msg,
            );
        }
    }

    /// Claim a filesystem-block extent (may be reported out of range).
    pub fn claim_fsb(&mut self, fsb: u64, len: u64, owner: Owner) {
        let geo = self.fs.geo();
        let agno = (fsb >> geo.agblklog) as u32;
        let agbno = (fsb & ((1u64 << geo.agblklog) - 1)) as u32;
        self.claim(agno, agbno, len, owner);
    }
}

/// Runs `(start, len)` of blocks of `m` where `pred` holds.
fn runs(m: &AgMap, pred: impl Fn(u32) -> bool) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut b = 0u32;
    while b < m.len {
        if !pred(b) {
            b += 1;
            continue;
        }
        let start = b;
        while b < m.len && pred(b) {
            b += 1;
        }
        out.push((start, b - start));
    }
    out
}

/// Compare the rmapbt's coverage with the space map: every block in use
/// (claimed and not free) has a reverse mapping, no free or unclaimed
/// block has one.
pub(crate) fn report_rmap(c: &mut Checker) {
    let mut out = Vec::new();
    for (agno, m) in c.space.ags.iter().enumerate() {
        let (Some(free), Some(rm)) = (&m.free, &m.rmapped) else {
            continue;
        };
        if m.incomplete {
            continue;
        }
        let in_use = |b| m.used.get(b) && !free.get(b);
        for (s, n) in runs(m, |b| in_use(b) && !rm.get(b)) {
            out.push((
                "rmapbt-missing",
                agno as u32,
                s,
                n,
                "in use but no rmapbt record covers",
            ));
        }
        for (s, n) in runs(m, |b| !in_use(b) && rm.get(b)) {
            out.push((
                "rmapbt-extra",
                agno as u32,
                s,
                n,
                "free or unclaimed but an rmapbt record covers",
            ));
        }
    }
    for (code, agno, s, n, what) in out {
        let msg = format!("{n} block(s) from {s}: {what} them");
        c.add_ag(code, agno, Some(s as u64), msg);
    }
}

/// Compare each shared extent's refcount with the file data mappings
/// that claimed its blocks.
pub(crate) fn report_refcounts(c: &mut Checker) {
    let mut out = Vec::new();
    for (agno, m) in c.space.ags.iter().enumerate() {
        if m.incomplete {
            continue;
        }
        for &(start, len, refcount) in &m.shared_recs {
            let end = (start as u64 + len as u64).min(m.len as u64) as u32;
            let bad = (start..end)
                .map(|b| (b, m.data_refs.get(&b).copied().unwrap_or(0)))
                .find(|&(_, n)| n != refcount);
            if let Some((b, n)) = bad {
                out.push((agno as u32, start, len, refcount, b, n));
            }
        }
    }
    for (agno, start, len, refcount, b, n) in out {
        let msg = format!(
            "shared extent {start}+{len} has refcount {refcount}, but block {b} is mapped {n} time(s)"
        );
        c.add_ag("refcountbt-count", agno, Some(start as u64), msg);
    }
}

/// Report the runs of blocks nobody claimed.
pub(crate) fn report_unclaimed(c: &mut Checker) {
    let mut out = Vec::new();
    for (agno, m) in c.space.ags.iter().enumerate() {
        if m.incomplete {
            continue;
        }
        for (start, n) in runs(m, |b| !m.used.get(b)) {
            out.push((agno as u32, start, n));
        }
    }
    for (agno, start, n) in out {
        report_run(c, agno, start, n);
    }
}

/// Most inode-chunk positions probed in one unclaimed run.
const MAX_CHUNK_PROBES: u32 = 4096;

/// Report one unclaimed run, split where inode chunks lie in it: the
/// chunks (inodes no inobt record covers: a lost chunk record) as
/// `inobt-chunk-missing`, the rest as `block-unclaimed`. A lost chunk
/// lies next to blocks its inodes owned, which are unclaimed too, so the
/// chunk need not start the run; chunks start at multiples of the inode
/// alignment, the only places probed.
fn report_run(c: &mut Checker, agno: u32, start: u32, n: u32) {
    let geo = c.fs.geo();
    let chunk = (64 / geo.inopblock.max(1)).max(1);
    let align = geo.inoalignmt.max(1);
    let end = start + n;
    let mut rest = start; // first block not reported yet
    let mut b = start.next_multiple_of(align);
    let mut probes = 0;
    while b < end && probes < MAX_CHUNK_PROBES {
        probes += 1;
        if !holds_inodes(c, agno, b) {
            b += align;
            continue;
        }
        let chunk_end = (b + chunk).min(end);
        if rest < b {
            unclaimed(c, agno, rest, b - rest);
        }
        let msg = format!(
            "{} block(s) from {b} hold inodes no inobt record covers",
            chunk_end - b
        );
        c.add_ag("inobt-chunk-missing", agno, Some(b as u64), msg);
        rest = chunk_end;
        b = chunk_end.next_multiple_of(align);
    }
    if rest < end {
        unclaimed(c, agno, rest, end - rest);
    }
}

/// Whether block `agbno` starts with a v3 inode.
fn holds_inodes(c: &Checker, agno: u32, agbno: u32) -> bool {
    let daddr = c.fs.geo().agb_to_daddr(AgNumber(agno), AgBlock(agbno));
    c.fs.read_raw(daddr, 512).is_ok_and(|b| {
        crate::format::be16(&b, 0) == crate::format::inode::DINODE_MAGIC && b[4] == 3
    })
}

fn unclaimed(c: &mut Checker, agno: u32, start: u32, n: u32) {
    let msg = format!("{n} block(s) from {start} are neither free nor in use");
    c.add_ag("block-unclaimed", agno, Some(start as u64), msg);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(len: u32, set: &[u32]) -> AgMap {
        let mut used = Bits::new(len);
        set.iter().for_each(|&b| used.set(b));
        AgMap {
            len,
            used,
            data: None,
            shared: None,
            free: None,
            rmapped: None,
            shared_recs: Vec::new(),
            data_refs: HashMap::new(),
            incomplete: false,
        }
    }

    #[test]
    fn bits_across_words() {
        let mut b = Bits::new(130);
        for i in [0, 63, 64, 127, 129] {
            assert!(!b.get(i));
            b.set(i);
            assert!(b.get(i));
        }
        assert!(!b.get(1) && !b.get(65) && !b.get(128));
    }

    #[test]
    fn runs_of_unclaimed_blocks() {
        let m = map(10, &[0, 1, 4, 9]);
        assert_eq!(runs(&m, |b| !m.used.get(b)), vec![(2, 2), (5, 4)]);
        let full = map(3, &[0, 1, 2]);
        assert!(runs(&full, |b| !full.used.get(b)).is_empty());
        let empty = map(3, &[]);
        assert_eq!(runs(&empty, |b| !empty.used.get(b)), vec![(0, 3)]);
    }

    #[test]
    fn finding_display() {
        let f = super::super::Finding {
            code: "agf-freeblks",
            ag: Some(2),
            block: None,
            ino: None,
            message: "m".into(),
        };
        assert_eq!(f.to_string(), "agf-freeblks: ag 2: m");
        let g = super::super::Finding { ag: None, ..f };
        assert_eq!(g.to_string(), "agf-freeblks: m");
    }
}
