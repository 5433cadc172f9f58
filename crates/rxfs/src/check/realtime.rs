//! The realtime section: realtime files' extents against the bitmap, the
//! bitmap against the summary file and `sb_frextents`.
//!
//! The inode phase claims, in a map of one bit per rt extent, every rt
//! extent a realtime file's data fork maps ([`Checker::claim_rt`]); this
//! phase then reads the bitmap and compares, and recomputes the summary
//! and the free count from the bitmap ([`crate::rt::check`]).
//!
//! Invariants checked:
//! - a realtime mapping lies inside the rt extents the bitmap describes
//!   (`rextents * rextsize` blocks; a shorter tail of the rt device has no
//!   bit and is never allocated): `rt-extent-out-of-range`;
//! - no rt extent is mapped by two files, or twice by one
//!   (`rt-extent-multiply-claimed`). One rt extent may be shared by
//!   consecutive mappings of the same file: records split a written and
//!   an unwritten part at any block, while the allocation unit stays the
//!   whole rt extent. A mapping that starts inside an rt extent must so
//!   continue the file's previous mapping (`rt-extent-partial`: xfs_repair
//!   stops with a fatal error there);
//! - every mapped rt extent is used in the bitmap
//!   (`rt-bitmap-free-claimed`) and every used one is mapped
//!   (`rt-bitmap-unclaimed`, not judged when some AG's inodes could not be
//!   read);
//! - each summary counter equals what the bitmap's free runs give
//!   (`rt-summary-mismatch`), and `sb_frextents` equals the bitmap's free
//!   bits (`sb-frextents`, not judged while the log is dirty: it is a lazy
//!   counter);
//! - the bitmap and summary inodes are what [`crate::rt::bitmap_inode`]
//!   demands (`rt-bitmap-bad`, `rt-summary-bad`); their blocks are claimed
//!   on the data device by the inode phase like any file's.
//!
//! The realtime device itself is never read: everything here lives on the
//! data device. Without it the check is the same (a note says the device's
//! size was not checked: that is done when it is opened).
//!
//! Memory: one bit per rt extent, refused above [`MAX_RT_CLAIM_EXTENTS`]
//! (a note then says the claims were not compared); one bitmap block at a
//! time; the summary, bounded by [`crate::rt::MAX_SUMMARY_LOAD_BYTES`].

use super::{Checker, Progress};
use crate::error::Error;
use crate::format::bmbt::Extent;
use crate::format::rt::{self as fmt, RtExtentNo, RtLayout};
use crate::rt as rtsec;
use crate::types::RtBlock;

/// Most rt extents the claim map covers (512 MiB of bits: 16 TiB of rt
/// device with 4 KiB rt extents).
pub const MAX_RT_CLAIM_EXTENTS: u64 = 1 << 32;

/// Summary counters reported one by one; the rest are counted in one more
/// finding.
const MAX_SUMMARY_FINDINGS: usize = 16;

/// One bit per rt extent, set when a realtime file maps it.
pub(crate) struct RtClaims {
    /// None: no realtime section, or too many rt extents to map.
    bits: Option<Vec<u64>>,
    layout: RtLayout,
    /// Rt extents claimed (each counted once).
    pub claimed: u64,
}

impl RtClaims {
    pub fn new(layout: RtLayout) -> Self {
        let fits = !layout.is_empty() && layout.rextents <= MAX_RT_CLAIM_EXTENTS;
        RtClaims {
            bits: fits.then(|| vec![0u64; layout.rextents.div_ceil(64) as usize]),
            layout,
            claimed: 0,
        }
    }

    fn get(&self, x: RtExtentNo) -> bool {
        let x = x.0;
        self.bits
            .as_ref()
            .is_some_and(|b| b[(x / 64) as usize] & (1 << (x % 64)) != 0)
    }

    /// Set the bit of rt extent `x`; whether it was set already.
    fn set(&mut self, x: RtExtentNo) -> bool {
        let x = x.0;
        let Some(b) = self.bits.as_mut() else {
            return false;
        };
        let w = &mut b[(x / 64) as usize];
        let was = *w & (1 << (x % 64)) != 0;
        *w |= 1 << (x % 64);
        if !was {
            self.claimed += 1;
        }
        was
    }

    /// 32 claim bits from rt extent `x` (a multiple of 32).
    fn word(&self, x: RtExtentNo) -> u32 {
        let x = x.0;
        debug_assert_eq!(x % 32, 0);
        self.bits.as_ref().map_or(0, |b| {
            let w = b.get((x / 64) as usize).copied().unwrap_or(0);
            (w >> (x % 64)) as u32
        })
    }
}

impl Checker<'_> {
    /// Claim the rt extents that data-fork mapping `e` of realtime inode
    /// `ino` touches. `prev` carries, from one mapping of the fork to the
    /// next (in file order), the last rt extent the previous one touched.
    pub fn claim_rt(&mut self, ino: u64, e: &Extent, prev: &mut Option<RtExtentNo>) {
        let l = self.rt.layout;
        let usable = l.rextents * l.rextsize as u64;
        let last = *prev;
        *prev = None;
        let end = e.start.checked_add(e.len);
        if e.len == 0 || end.is_none_or(|end| end > usable) {
            let msg = format!(
                "mapping {e:?} outside the realtime device's {usable} usable blocks (rblocks {})",
                l.rblocks
            );
            self.add_ino("rt-extent-out-of-range", ino, msg);
            return;
        }
        let (first, count) = l.rtx_span(RtBlock(e.start), e.len);
        let end = first.0 + count;
        *prev = Some(RtExtentNo(end - 1));
        let mut x = first.0;
        if !e.start.is_multiple_of(l.rextsize as u64) {
            if last == Some(first) {
                // Continues the file's previous mapping inside rt extent
                // `first`, which that mapping claimed.
                x += 1;
            } else if self.rt.bits.is_some() && !self.rt.get(first) {
                let msg = format!(
                    "mapping {e:?} starts inside rt extent {}, which no earlier mapping of the file covers",
                    first.0
                );
                self.add_ino("rt-extent-partial", ino, msg);
            }
        }
        let mut dup: Option<(u64, u64)> = None;
        for rtx in x..end {
            if self.rt.set(RtExtentNo(rtx)) {
                dup = Some(dup.map_or((rtx, 1), |(s, n)| (s, n + 1)));
            }
        }
        if let Some((at, n)) = dup {
            let msg = format!(
                "{n} rt extent(s) from {at} of mapping {e:?} are already mapped by another file or mapping"
            );
            self.add_ino("rt-extent-multiply-claimed", ino, msg);
        }
    }

    pub fn note(&mut self, msg: impl Into<String>) {
        self.report.notes.push(msg.into());
    }
}

/// The realtime phase (after the inode phase has claimed every realtime
/// mapping). Nothing to do without a realtime section.
pub(crate) fn check_rt(c: &mut Checker, progress: Progress) {
    let fs = c.fs;
    let l = rtsec::layout(fs);
    if l.is_empty() {
        return;
    }
    if fs.rtdev().is_none() {
        c.note(
            "no realtime device given: the realtime section's metadata (bitmap, summary, \
             realtime file mappings) lives on the data device and was checked; the realtime \
             device itself (its size) was not",
        );
    }
    let (rbmino, rsumino) = (fs.sb().rbmino, fs.sb().rsumino);
    let bmp = match rtsec::bitmap_inode(fs) {
        Ok(ip) => Some(ip),
        Err(e) => {
            c.add_ino("rt-bitmap-bad", rbmino, e.to_string());
            None
        }
    };
    let summary_ok = match rtsec::summary(fs) {
        Ok(_) => true,
        Err(Error::NotSupported(m)) => {
            c.note(format!(
                "realtime summary and sb_frextents not checked: {m}"
            ));
            false
        }
        Err(e) => {
            c.add_ino("rt-summary-bad", rsumino, e.to_string());
            false
        }
    };
    let Some(bmp) = bmp else {
        return;
    };
    if !compare_claims(c, &bmp, &l, progress) {
        return;
    }
    if summary_ok {
        check_summary(c);
    }
}

/// A run of rt extents in one state, being extended.
#[derive(Default)]
struct Run(Option<(u64, u64)>);

impl Run {
    /// Extend with extent `x` when `on`, else end the run (returned).
    fn step(&mut self, x: u64, on: bool) -> Option<(u64, u64)> {
        match (&mut self.0, on) {
            (Some((_, n)), true) => {
                *n += 1;
                None
            }
            (None, true) => {
                self.0 = Some((x, 1));
                None
            }
            (_, false) => self.0.take(),
        }
    }
}

/// The bitmap against the claims, block by block. Returns false when the
/// bitmap could not be read (reported).
fn compare_claims(
    c: &mut Checker,
    bmp: &crate::inode::Inode,
    l: &RtLayout,
    progress: Progress,
) -> bool {
    let fs = c.fs;
    let judge_unclaimed = c.inode_ags_bad.is_empty();
    let compare = c.rt.bits.is_some();
    if !compare {
        c.note(format!(
            "realtime bitmap not compared with the files' mappings: {} rt extents, more than the {MAX_RT_CLAIM_EXTENTS} the checker maps",
            l.rextents
        ));
    }
    let (mut free_claimed, mut unclaimed) = (Run::default(), Run::default());
    let mut out: Vec<(&'static str, u64, u64)> = Vec::new();
    let bpb = l.bits_per_block();
    for b in 0..l.rbmblocks as u64 {
        progress("realtime", b, l.rbmblocks as u64);
        let blk = match rtsec::bitmap_block(fs, bmp, b) {
            Ok(blk) => blk,
            Err(e) => {
                c.add_ino("rt-bitmap-bad", bmp.ino.0, e.to_string());
                return false;
            }
        };
        if !compare {
            continue;
        }
        let nbits = l.bits_in_block(b);
        for wi in 0..nbits.div_ceil(fmt::RTWORD_BITS) {
            let base = b * bpb + wi * fmt::RTWORD_BITS;
            let valid = (nbits - wi * fmt::RTWORD_BITS).min(fmt::RTWORD_BITS);
            let mask = if valid == 32 {
                u32::MAX
            } else {
                (1u32 << valid) - 1
            };
            let free = fmt::word(&blk, wi as usize) & mask;
            let claimed = c.rt.word(RtExtentNo(base)) & mask;
            let bad_free = free & claimed;
            let bad_used = !free & !claimed & mask;
            let idle = free_claimed.0.is_none() && unclaimed.0.is_none();
            if bad_free == 0 && (bad_used == 0 || !judge_unclaimed) && idle {
                continue;
            }
            for i in 0..valid {
                let x = base + i;
                if let Some((s, n)) = free_claimed.step(x, bad_free >> i & 1 != 0) {
                    out.push(("rt-bitmap-free-claimed", s, n));
                }
                let on = judge_unclaimed && bad_used >> i & 1 != 0;
                if let Some((s, n)) = unclaimed.step(x, on) {
                    out.push(("rt-bitmap-unclaimed", s, n));
                }
            }
        }
    }
    for (code, r) in [
        ("rt-bitmap-free-claimed", free_claimed.0),
        ("rt-bitmap-unclaimed", unclaimed.0),
    ] {
        if let Some((s, n)) = r {
            out.push((code, s, n));
        }
    }
    for (code, s, n) in out {
        let msg = if code == "rt-bitmap-free-claimed" {
            format!(
                "{n} rt extent(s) from {s} are free in the bitmap but mapped by a realtime file"
            )
        } else {
            format!(
                "{n} rt extent(s) from {s} are in use in the bitmap but no realtime file maps them"
            )
        };
        c.add_ino(code, bmp.ino.0, msg);
    }
    true
}

/// The summary counters and sb_frextents against the bitmap.
fn check_summary(c: &mut Checker) {
    let fs = c.fs;
    let rsumino = fs.sb().rsumino;
    let r = match rtsec::check(fs) {
        Ok(r) => r,
        Err(e) => {
            c.add_ino("rt-summary-bad", rsumino, e.to_string());
            return;
        }
    };
    c.report.stats.rt_free_extents = r.free_extents;
    let n = r.summary_mismatches.len();
    for &(log, bbno, disk, want) in r.summary_mismatches.iter().take(MAX_SUMMARY_FINDINGS) {
        let msg = format!(
            "counter for free runs of 2^{log} to 2^{}-1 rt extents starting in bitmap block {bbno}: {disk}, the bitmap gives {want}",
            log + 1
        );
        c.add_ino("rt-summary-mismatch", rsumino, msg);
    }
    if n > MAX_SUMMARY_FINDINGS {
        let msg = format!("{} more summary counters differ", n - MAX_SUMMARY_FINDINGS);
        c.add_ino("rt-summary-mismatch", rsumino, msg);
    }
    if r.runs_outside_summary > 0 {
        let msg = format!(
            "{} free run(s) of the bitmap are longer than the summary's levels hold",
            r.runs_outside_summary
        );
        c.add_ino("rt-summary-mismatch", rsumino, msg);
    }
    let log_dirty = fs.log_state().is_some_and(|s| s.needs_recovery());
    if !log_dirty && r.sb_frextents != r.free_extents {
        let msg = format!(
            "superblock frextents {}, the bitmap counts {} free rt extents",
            r.sb_frextents, r.free_extents
        );
        c.add("sb-frextents", None, None, None, msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(rextsize: u32, rextents: u64) -> RtLayout {
        RtLayout::compute(4096, rextsize, rextents * rextsize as u64)
    }

    #[test]
    fn claim_bits_and_words() {
        let mut r = RtClaims::new(layout(1, 200));
        let x = RtExtentNo;
        assert!(!r.get(x(0)) && !r.set(x(0)) && r.get(x(0)) && r.set(x(0)));
        for i in [31, 32, 63, 64, 95, 199] {
            assert!(!r.set(x(i)));
        }
        assert_eq!(r.claimed, 7);
        assert_eq!(r.word(x(0)), 1 | 1 << 31);
        assert_eq!(r.word(x(32)), 1 | 1 << 31);
        assert_eq!(r.word(x(64)), 1 | 1 << 31);
        assert_eq!(r.word(x(192)), 1 << 7);
        assert_eq!(r.word(x(224)), 0, "past the map");
    }

    #[test]
    fn no_section_no_map() {
        let r = RtClaims::new(RtLayout::compute(4096, 1, 0));
        assert!(r.bits.is_none());
        assert_eq!(r.word(RtExtentNo(0)), 0);
    }

    #[test]
    fn runs_end_where_the_state_changes() {
        let mut r = Run::default();
        let got: Vec<_> = [true, true, false, true, false, false]
            .iter()
            .enumerate()
            .filter_map(|(i, &on)| r.step(i as u64, on))
            .collect();
        assert_eq!(got, vec![(0, 2), (3, 1)]);
        assert!(r.0.is_none());
    }
}
