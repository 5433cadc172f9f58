//! The realtime allocator: free space of the realtime device, in realtime
//! extents, kept in the bitmap file and counted by run size in the
//! summary file (formats: [`crate::format::rt`]; in-core state and the
//! seed-001 summary cache: [`crate::cache::rtsum`]).
//!
//! Every change is a logged buffer change of a bitmap or summary block
//! (`XFS_BLFT_RTBITMAP_BUF` / `_RTSUMMARY_BUF`), made in the transaction
//! that maps or unmaps the extents, as the kernel without rtgroups does:
//! there is no intent item for realtime frees, the unmapping and the free
//! commit together. Every call takes the realtime lock first
//! ([`MetaTx::rt_lock`]; lock order in [`crate::xact`]).
//!
//! ## Invariants (after every committed transaction)
//! - bit `x` of the bitmap is 1 iff rt extent `x` is mapped by no file;
//! - counter `(log, b)` of the summary = the number of maximal free runs
//!   of `[2^log, 2^(log+1))` extents whose first extent is in bitmap block
//!   `b`; allocating or freeing a range removes the counts of the runs it
//!   touches and adds those of the runs it leaves;
//! - `sb_frextents` (in-core, lazy) = the number of 1 bits;
//! - an extent freed is busy until the freeing checkpoint is on disk, and
//!   is not handed out before (its old owner's mapping could still be
//!   recovered, and would then see the new owner's data). Busy realtime
//!   ranges share the CIL's busy list under keys no AG uses
//!   ([`busy_key`]).
//!
//! ## Search (the kernel's policy)
//! - `near` given: exactly there if free, else bitmap blocks in order of
//!   distance from its block, each one tried only if the summary says a
//!   run of at least `minlen` starts in it;
//! - no `near`: by size: levels from `log2(maxlen)` up, every bitmap block
//!   whose counter at that level is non-zero; then levels below, down to
//!   `log2(minlen)`.
//!
//! Inside a bitmap block the first free run of `maxlen` wins, else the
//! longest of at least `minlen`.

mod bits;
mod choose;
mod runs;
#[cfg(test)]
mod tests;

use crate::cache::rtsum::NoPiece;
use bits::RtBits;
pub use bits::{file_blocks, level_of};
#[cfg(test)]
use choose::not_busy_piece;
use choose::{choose, unbusy, with_busy, BusyView};

use crate::error::{Error, Location, Result};
use crate::types::{AgBlock, AgNumber};
use crate::xact::{MetaTx, SbCounter};

/// First AG number of the busy keys of realtime extents: above every real
/// AG (read-write mounts of realtime filesystems refuse `agcount >=`
/// this, see `fs::rw::check_writable`; mkfs makes a few dozen).
pub const RT_BUSY_AG: u32 = 1 << 31;
/// Extents per busy key "AG".
const RT_BUSY_SPAN: u64 = 1 << 30;

/// The busy-list key of rt extent `x`: a pseudo-AG and block. Ranges are
/// split at multiples of `RT_BUSY_SPAN`, so that no key range
/// overflows a u32.
pub fn busy_key(x: u64) -> (AgNumber, AgBlock) {
    (
        AgNumber(RT_BUSY_AG + (x / RT_BUSY_SPAN) as u32),
        AgBlock((x % RT_BUSY_SPAN) as u32),
    )
}

/// The rt extent of busy key (`agno`, `agbno`): the inverse of
/// [`busy_key`]. `agno` must be at least [`RT_BUSY_AG`].
pub(crate) fn extent_of_key(agno: AgNumber, agbno: AgBlock) -> u64 {
    (agno.0 - RT_BUSY_AG) as u64 * RT_BUSY_SPAN + agbno.0 as u64
}

fn busy_pieces(x: u64, n: u64) -> impl Iterator<Item = (AgNumber, AgBlock, u32)> {
    let mut p = x;
    let end = x + n;
    std::iter::from_fn(move || {
        if p >= end {
            return None;
        }
        let (a, b) = busy_key(p);
        let len = (RT_BUSY_SPAN - p % RT_BUSY_SPAN).min(end - p);
        p += len;
        Some((a, b, len as u32))
    })
}

/// A transaction's own frees (`(AG, block, length)` busy keys) that are
/// realtime extents, as (first extent, count).
pub fn own_rt_busy(own: &[(AgNumber, AgBlock, u32)]) -> Vec<(u64, u64)> {
    own.iter()
        .filter(|(a, _, _)| a.0 >= RT_BUSY_AG)
        .map(|&(a, b, l)| (extent_of_key(a, b), l as u64))
        .collect()
}

/// The transaction holding `rt` committed its realtime frees `freed`
/// into checkpoint `seq`: they enter the busy mirror (`cache::rtbusy`).
pub fn busy_committed(
    rt: &mut crate::cache::rtsum::RtSumCache,
    sb: &crate::format::sb::Superblock,
    freed: &[(u64, u64)],
    seq: u64,
) {
    let bpb = crate::format::rt::RtLayout::of(sb).bits_per_block();
    for &(x, n) in freed {
        rt.busy.committed(bpb, x, n, seq);
    }
}

/// Allocate between `minlen` and `maxlen` free rt extents (see the module
/// doc for where); returns `(first extent, count)`. `NoSpace` when no
/// free run of `minlen` exists.
pub fn alloc(
    tx: &mut dyn MetaTx,
    near: Option<u64>,
    minlen: u64,
    maxlen: u64,
) -> Result<(u64, u64)> {
    if minlen == 0 || maxlen < minlen {
        return Err(Error::Invalid(format!(
            "realtime allocation of {minlen}..={maxlen} extents"
        )));
    }
    let t0 = std::time::Instant::now();
    let mut forced = false;
    let mut forced_ns = 0u64;
    loop {
        let mut b = RtBits::new(tx)?;
        let maxlen = maxlen.min(b.l.rextents);
        if minlen > maxlen {
            return Err(Error::NoSpace);
        }
        let near = near.filter(|&t| t < b.l.rextents);
        // Whether the search stepped over busy extents.
        let mut busy_seen = false;
        let Some((x, n)) = search(&mut b, &mut busy_seen, near, minlen, maxlen)? else {
            if forced || !busy_seen {
                return Err(Error::NoSpace);
            }
            // Only extents freed moments ago were left: make every free
            // stable (a log force) and search once more.
            drop(b);
            let f0 = std::time::Instant::now();
            tx.force_busy()?;
            let waited = f0.elapsed().as_nanos() as u64;
            let st = &mut tx.rt_lock()?.stats;
            st.busy_forces += 1;
            st.force_ns += waited;
            forced_ns += waited;
            forced = true;
            continue;
        };
        take(&mut b, x, n)?;
        let st = &mut b.tx.rt_lock()?.stats;
        st.allocs += 1;
        st.alloc_ns += (t0.elapsed().as_nanos() as u64).saturating_sub(forced_ns);
        return Ok((x, n));
    }
}

/// Where the first extent of a new realtime file should go (the kernel's
/// `xfs_rtpick_extent`): a sequence number kept in the bitmap inode's
/// atime (seconds; the inode gets NEWRTBM when it starts) spreads new
/// files over the device at 0, 1/2, 1/4, 3/4, 1/8, 3/8... of it, so that
/// files can grow in place. The bitmap inode is logged; the realtime lock
/// is its lock. Returns the target extent (0 for the first file: then the
/// search is by size).
pub fn pick_start(tx: &mut dyn MetaTx, len: u64) -> Result<u64> {
    use crate::format::dinode_edit as di;
    use crate::format::inode::{Timestamp, DIFLAG_NEWRTBM};
    tx.rt_lock()?;
    let rextents = tx.sb().rextents;
    if rextents == 0 {
        // No realtime section (a hostile superblock could claim files on
        // one): nothing to place.
        return Err(Error::NoSpace);
    }
    let ip = tx.ijoin(crate::types::Ino(tx.sb().rbmino))?;
    let d = tx.inode_mut(ip);
    let mut seq = di::atime(d).sec.max(0) as u64;
    if di::flags(d) & DIFLAG_NEWRTBM == 0 {
        di::set_flags(d, di::flags(d) | DIFLAG_NEWRTBM);
        seq = 0;
    }
    let b = if seq == 0 {
        0
    } else {
        let log2 = 63 - seq.leading_zeros();
        let resid = (seq - (1u64 << log2)) as u128;
        let b = ((rextents as u128 * ((resid << 1) + 1)) >> (log2 + 1)) as u64;
        let b = if b >= rextents { b % rextents } else { b };
        b.min(rextents.saturating_sub(len))
    };
    di::set_atime(
        d,
        Timestamp {
            sec: (seq + 1) as i64,
            nsec: 0,
        },
    );
    Ok(b)
}

/// The free rt extents as the bitmap says (what `sb_frextents`, a lazy
/// counter, must be after a log recovery; the kernel recounts too).
/// Reads every bitmap block once; changes nothing.
pub fn count_free(tx: &mut dyn MetaTx) -> Result<u64> {
    if crate::format::rt::RtLayout::of(tx.sb()).is_empty() {
        return Ok(0);
    }
    let mut b = RtBits::new(tx)?;
    let n = b.l.rextents;
    let (mut x, mut free) = (0u64, 0u64);
    while x < n {
        let f = b.run_end(x, n, true)?;
        free += f - x;
        // A used run follows (at least one extent, or the end).
        x = if f < n { b.run_end(f, n, false)? } else { n };
    }
    Ok(free)
}

/// Free `n` rt extents from `x` (all must be in use).
pub fn free(tx: &mut dyn MetaTx, x: u64, n: u64) -> Result<()> {
    let mut b = RtBits::new(tx)?;
    let end = x.checked_add(n).filter(|&e| n > 0 && e <= b.l.rextents);
    let Some(end) = end else {
        return Err(Error::Invalid(format!(
            "freeing rt extents {x}+{n} of {}",
            b.l.rextents
        )));
    };
    if b.run_end(x, end, false)? != end {
        return Err(Error::corrupt(
            "rt bitmap inode",
            Location::Daddr(0),
            format!("freeing rt extents {x}+{n}, some already free"),
        ));
    }
    let bpb = b.l.bits_per_block();
    let first = if x > 0 && b.is_free(x - 1)? {
        b.run_start(x - 1, true)?
    } else {
        x
    };
    let last = if end < b.l.rextents {
        b.run_end(end, b.l.rextents, true)?
    } else {
        end
    };
    if first < x {
        b.sum_add(level_of(x - first), first / bpb, -1)?;
    }
    if last > end {
        b.sum_add(level_of(last - end), end / bpb, -1)?;
    }
    b.sum_add(level_of(last - first), first / bpb, 1)?;
    b.set_range(x, n, true)?;
    b.tx.mod_sb(SbCounter::FreeRtExtents, n as i64);
    for (a, k, l) in busy_pieces(x, n) {
        b.tx.mark_busy(a, k, l);
    }
    b.tx.rt_lock()?.stats.frees += 1;
    Ok(())
}

/// Mark free extents `[x, x + n)` used: the run holding them loses its
/// count, what is left of it on either side gains one.
fn take(b: &mut RtBits<'_>, x: u64, n: u64) -> Result<()> {
    let bpb = b.l.bits_per_block();
    let end = x + n;
    if !b.is_free(x)? || b.run_end(x, b.l.rextents, true)? < end {
        return Err(Error::corrupt(
            "rt bitmap inode",
            Location::Daddr(0),
            format!("allocating rt extents {x}+{n}, not all free"),
        ));
    }
    let first = b.run_start(x, true)?;
    let last = b.run_end(end, b.l.rextents, true)?;
    b.sum_add(level_of(last - first), first / bpb, -1)?;
    if first < x {
        b.sum_add(level_of(x - first), first / bpb, 1)?;
    }
    if last > end {
        b.sum_add(level_of(last - end), end / bpb, 1)?;
    }
    b.set_range(x, n, false)?;
    b.tx.mod_sb(SbCounter::FreeRtExtents, -(n as i64));
    Ok(())
}

fn search(
    b: &mut RtBits<'_>,
    seen: &mut bool,
    near: Option<u64>,
    minlen: u64,
    maxlen: u64,
) -> Result<Option<(u64, u64)>> {
    let top = b.l.rextslog as u32;
    let rbm = b.l.rbmblocks as u64;
    if let Some(t) = near {
        if b.is_free(t)? {
            let e = b.run_end(t, (t + maxlen).min(b.l.rextents), true)?;
            if e - t >= minlen {
                let view = BusyView::of(b, t, e - t)?;
                let r = unbusy(&view, seen, t, e - t, minlen, maxlen);
                if r.is_some() {
                    return Ok(r);
                }
            }
        }
        let home = t / b.l.bits_per_block();
        let low = level_of(minlen);
        for d in 0..rbm {
            let mut tried = false;
            for i in [home.checked_add(d), home.checked_sub(d)] {
                let Some(i) = i.filter(|&i| i < rbm) else {
                    continue;
                };
                if d == 0 && tried {
                    continue;
                }
                tried = true;
                if any_run(b, low, top, i)? {
                    if let Some(r) = in_block(b, seen, i, minlen, maxlen)? {
                        return Ok(Some(r));
                    }
                }
            }
            if !tried {
                break;
            }
        }
        return Ok(None);
    }
    let hi = level_of(maxlen);
    for l in hi..=top {
        for i in 0..rbm {
            if has_run(b, l, i)? {
                if let Some(r) = in_block(b, seen, i, minlen, maxlen)? {
                    return Ok(Some(r));
                }
            }
        }
    }
    for l in (level_of(minlen)..hi).rev() {
        for i in 0..rbm {
            if has_run(b, l, i)? {
                if let Some(r) = in_block(b, seen, i, minlen, maxlen)? {
                    return Ok(Some(r));
                }
            }
        }
    }
    Ok(None)
}

/// Whether counter `(l, i)` is non-zero, skipping the read when the
/// min-level bound says it is zero and raising the bound when a read at
/// the bound finds zero.
fn has_run(b: &mut RtBits<'_>, l: u32, i: u64) -> Result<bool> {
    let st = b.tx.rt_lock()?;
    if let Some(mask) = st.mem_levels(i) {
        st.stats.summary_skips += 1;
        return Ok(mask >> l & 1 != 0);
    }
    let bounds = st.use_bounds();
    let bound = st.min_level(i);
    if bounds && l < bound {
        st.stats.summary_skips += 1;
        return Ok(false);
    }
    let v = b.sum_get(l, i)?;
    if v == 0 && bounds && l == bound {
        b.tx.rt_lock()?.tighten(i, l + 1);
    }
    Ok(v > 0)
}

/// Whether some free run of level `low..=high` starts in bitmap block `i`:
/// one test of the block's non-zero-level mask when the in-memory summary
/// is loaded, else [`has_run`] level by level, with the levels below the
/// min-level bound skipped at once (and counted as skipped reads).
fn any_run(b: &mut RtBits<'_>, low: u32, high: u32, i: u64) -> Result<bool> {
    let st = b.tx.rt_lock()?;
    if let Some(mask) = st.mem_levels(i) {
        if low > high || low > 63 {
            return Ok(false);
        }
        let upto = if high >= 63 {
            u64::MAX
        } else {
            (1u64 << (high + 1)) - 1
        };
        let hits = mask & upto & !((1u64 << low) - 1);
        // The counters a search without the cache reads: up to the first
        // non-zero one.
        st.stats.summary_skips += if hits != 0 {
            (hits.trailing_zeros() - low + 1) as u64
        } else {
            (high - low + 1) as u64
        };
        return Ok(hits != 0);
    }
    let mut from = low;
    if st.use_bounds() {
        let bound = st.min_level(i);
        if bound > low {
            st.stats.summary_skips += (bound.min(high + 1) - low) as u64;
            from = bound;
        }
    }
    for l in from..=high {
        if has_run(b, l, i)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The first free run of `maxlen` starting in bitmap block `i` (cut to
/// `maxlen`), else the longest of at least `minlen` (the kernel's
/// `xfs_rtallocate_extent_block` choice), stepping over busy extents.
/// The block's runs come from the free-run index (one pass over its words
/// when it is not there); its busy ranges are fetched once and weighed in
/// one sweep ([`choose`]); a block with nothing clear is remembered
/// ([`NoPiece`], see `cache::rtsum`).
fn in_block(
    b: &mut RtBits<'_>,
    seen: &mut bool,
    i: u64,
    minlen: u64,
    maxlen: u64,
) -> Result<Option<(u64, u64)>> {
    let bpb = b.l.bits_per_block();
    let end = ((i + 1) * bpb).min(b.l.rextents);
    let stable = b.tx.busy_stable_seq();
    let indexed = b.tx.rt_lock()?.block_runs(i).cloned();
    let all = match indexed {
        Some(e) => {
            b.tx.rt_lock()?.stats.runs_indexed += 1;
            if let Some(np) = e.no_piece {
                let st = b.tx.rt_lock()?;
                let r = reach(&b.l, &e.runs, end, maxlen);
                if memo_holds(&np, stable, minlen, r, end, bpb, |j| {
                    st.changed_since(j, np.stamp)
                }) {
                    // Nothing clear there when last looked, and nothing
                    // became clear since (see cache::rtsum).
                    *seen |= np.busy;
                    b.tx.rt_lock()?.stats.memo_skips += 1;
                    return Ok(None);
                }
            }
            e.runs
        }
        None => {
            let mut all = Vec::new();
            let id = b.bitmap_buf(i)?;
            let mut sc = crate::format::rt::FreeRunScanner::at(&b.l, i);
            sc.feed(b.tx.buf(id), |s, n| all.push((s, n)));
            sc.finish(|s, n| all.push((s, n)));
            let all: std::sync::Arc<[(u64, u64)]> = all.into();
            b.tx.rt_lock()?.set_block_runs(i, all.clone());
            all
        }
    };
    // A run reaching the block's end may go on (up to four times what is
    // asked, so that busy extents in it can be stepped over).
    let reach = reach(&b.l, &all, end, maxlen);
    let mut last = all.last().copied();
    if let Some(l) = last.as_mut() {
        if reach > end {
            l.1 = b.run_end(end, reach, true)? - l.0;
        }
    }
    let k = all.len().saturating_sub(1);
    let runs = || all[..k].iter().copied().chain(last);
    let (Some((lo, _)), Some((hf, hn))) = (
        runs().find(|r| r.1 >= minlen),
        runs().rfind(|r| r.1 >= minlen),
    ) else {
        return Ok(None);
    };
    let mut busy = false;
    let (r, oldest) = with_busy(b, lo, hf + hn - lo, |rs, oldest| {
        (choose(runs(), rs, minlen, maxlen, &mut busy), oldest)
    })?;
    *seen |= busy;
    // Nothing clear: remembered with how far the last run was followed and
    // the change clock, so that a later request is answered by the memo
    // only if it would look no further and nothing it would look at
    // changed (`memo_holds`).
    if r.is_none() {
        let stamp = b.tx.rt_lock()?.clock();
        let np = NoPiece {
            until: oldest,
            minlen,
            reach,
            stamp,
            busy,
        };
        b.tx.rt_lock()?.note_no_piece(i, np);
    }
    Ok(r)
}

/// Whether memo `np` of the block ending at extent `end` answers a
/// request for `minlen` that follows the block's last run to `reach`, with
/// `stable` checkpoints stable and `changed(j)` saying whether bitmap block
/// `j` changed since the memo (see `cache::rtsum`): the busy ranges in the
/// way not yet reusable, the request no smaller and following the run no
/// further, and no block the run was followed into changed.
fn memo_holds(
    np: &NoPiece,
    stable: u64,
    minlen: u64,
    reach: u64,
    end: u64,
    bpb: u64,
    changed: impl Fn(u64) -> bool,
) -> bool {
    stable < np.until
        && minlen >= np.minlen
        && reach <= np.reach
        && (end..np.reach)
            .step_by(bpb as usize)
            .all(|x| !changed(x / bpb))
}

/// How far past its block's `end` a search for `maxlen` follows the last
/// free run of the block (`runs`): up to four times `maxlen` from the
/// run's start when it reaches the block's end, else not at all (`end`).
fn reach(l: &crate::format::rt::RtLayout, runs: &[(u64, u64)], end: u64, maxlen: u64) -> u64 {
    match runs.last() {
        Some(&(f, n)) if f + n == end && end < l.rextents => f
            .saturating_add(maxlen.saturating_mul(4))
            .max(end)
            .min(l.rextents),
        _ => end,
    }
}
