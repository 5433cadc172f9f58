//! Crash simulator: a block device that records every write and flush and
//! produces the images a power cut could leave behind.
//!
//! # Model
//!
//! [`CrashDevice`] starts from a base image and records the I/O stream as a
//! sequence of events. Reads see every write so far, like a disk with a
//! volatile write cache. A *crash point* `p` is an index into the event
//! sequence: the power fails after events `0..p` completed and before event
//! `p` was issued (`p == event_count()` crashes after everything).
//!
//! ```text
//!  events:  W0 W1 F2 W3 W4 F5 W6 W7 W8 | W9 ...
//!                          ^^          ^
//!            durable prefix: every     crash point p = 9
//!            write before the last     unflushed window: W6 W7 W8
//!            flush preceding p (F5)
//! ```
//!
//! The image at `p` is the base, plus every write before the last flush
//! preceding `p` (the *durable prefix*: a completed flush makes every write
//! that completed before it durable), plus part of the *unflushed window*
//! (the writes after that flush and before `p`) chosen by [`CrashMode`]:
//!
//! - `Lost`: nothing of the window (a cache that lost everything).
//! - `All`: the whole window in order: the live image at `p`.
//! - `Subset`: a seeded random subset of the window writes, each applied
//!   whole, in a seeded random order. This covers a cache destaging writes
//!   in any order, including an older write to a sector persisting after a
//!   newer one was lost.
//! - `Torn`: like `Subset`, but some writes are applied only in part: a
//!   prefix of their sectors, or a random subset of them. Sectors (512 bytes,
//!   at absolute 512-byte boundaries of the device) are atomic; anything
//!   larger is not. On a disk with 4 KiB physical sectors this tears more
//!   finely than the disk would: a conservative choice (whatever survives
//!   512-byte tearing survives 4 KiB tearing; XFS stamps its log per 512-byte
//!   basic block for this reason).
//!
//! What the simulator guarantees: each crash image holds every durable write;
//! every 512-byte sector holds either its durable contents or the contents
//! some window write gave it (no invented bytes, no torn sectors); one
//! `(point, mode, seed)` always gives the same image.
//!
//! What real disks may do beyond this model, and the simulator does not:
//! misdirected writes (data landing at the wrong address), bit rot and
//! torn *sectors* (drives promise sector atomicity; some flash does not keep
//! it), writes lost although a flush covered them (lying caches), reads that
//! return stale data before a crash, and a crash *during* a flush (the
//! simulator treats a flush as instantaneous: a crash at the flush's index
//! precedes it, at the next index follows it). Errors of the device itself
//! are [`super::FaultDevice`]'s job.
//!
//! # Memory
//!
//! The device keeps the base image, the live image as an overlay of the
//! sectors written so far, and every write's bytes
//! (capped by `max_recorded_bytes`: a write or flush that would pass the cap
//! fails with `Error::Io` (`ENOBUFS`) and is not applied, so a runaway test
//! fails instead of eating the machine; [`CrashDevice::rebase`] folds the
//! durable prefix into the base to free the recording). [`for_each_crash_image`]
//! makes many crash images without copying the disk for each: it advances one
//! durable image from flush to flush and hands out [`CowDevice`]s that share
//! it, each carrying only its window sectors.

use std::sync::{Arc, RwLock};

use super::cow::{CowDevice, SECTOR_SIZE};
use super::simrng::{self, SimRng};
use super::BlockDevice;
use crate::error::{Error, Result};

/// Bytes charged against the recording cap for each event, on top of data.
const EVENT_OVERHEAD: usize = 32;

/// One recorded I/O event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Write { offset: u64, data: Arc<[u8]> },
    Flush,
}

/// How much of the unflushed window a crash image keeps (see module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CrashMode {
    Lost,
    All,
    Subset,
    Torn,
}

impl CrashMode {
    /// Every mode, for loops over all of them.
    pub const EVERY: [CrashMode; 4] = [
        CrashMode::Lost,
        CrashMode::All,
        CrashMode::Subset,
        CrashMode::Torn,
    ];
}

/// A piece of a window write that a crash image keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub offset: u64,
    pub data: Vec<u8>,
}

struct State {
    base: Arc<Vec<u8>>,
    /// What reads see: the base plus every recorded write, as an overlay
    /// of changed sectors (lock order: `state`, then the overlay's lock).
    live: CowDevice,
    events: Vec<Event>,
    recorded_bytes: usize,
}

pub struct CrashDevice {
    state: RwLock<State>,
    max_recorded_bytes: usize,
}

fn err(op: &'static str, offset: u64, len: usize, errno: i32) -> Error {
    Error::io(op, offset, len, std::io::Error::from_raw_os_error(errno))
}

impl CrashDevice {
    /// A device whose contents start as `base`. At most `max_recorded_bytes`
    /// of write data (plus a small per-event overhead) are recorded.
    pub fn new(base: Vec<u8>, max_recorded_bytes: usize) -> Self {
        let base = Arc::new(base);
        CrashDevice {
            state: RwLock::new(State {
                live: CowDevice::new(base.clone()),
                base,
                events: Vec::new(),
                recorded_bytes: 0,
            }),
            max_recorded_bytes,
        }
    }

    fn read_state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of recorded events; crash points run from 0 to this.
    pub fn event_count(&self) -> usize {
        self.read_state().events.len()
    }

    /// The recorded events (cheap: write data is shared).
    pub fn events(&self) -> Vec<Event> {
        self.read_state().events.clone()
    }

    /// Bytes charged against the recording cap so far.
    pub fn recorded_bytes(&self) -> usize {
        self.read_state().recorded_bytes
    }

    /// The current contents (what reads see), copied.
    pub fn live_image(&self) -> Vec<u8> {
        self.read_state().live.to_vec()
    }

    /// Fold the durable prefix at the current point into the base and drop
    /// its events; the unflushed window stays recorded. Crash points are
    /// renumbered from 0. Use between phases of a long workload.
    pub fn rebase(&self) {
        let mut st = self.write_state();
        let end = st.events.len();
        let keep_from = durable_end(&st.events, end);
        // Drop the live overlay's reference first so the base is usually
        // not shared and is updated in place.
        st.live = CowDevice::new(Arc::new(Vec::new()));
        let base = std::mem::take(&mut st.base);
        let mut base = Arc::try_unwrap(base).unwrap_or_else(|a| (*a).clone());
        apply_writes(&mut base, &st.events[..keep_from]);
        st.base = Arc::new(base);
        st.events.drain(..keep_from);
        st.live = CowDevice::new(st.base.clone());
        for e in &st.events {
            if let Event::Write { offset, data } = e {
                // In range: it was checked when the write was recorded.
                let r = st.live.write_at(data, *offset);
                debug_assert!(r.is_ok());
            }
        }
        st.recorded_bytes = st.events.iter().map(event_cost).sum();
    }

    /// Crash points worth trying: every point, except those that repeat
    /// another (a point right after two flushes in a row equals the point
    /// between them).
    pub fn crash_points(&self) -> Vec<usize> {
        let st = self.read_state();
        let ev = &st.events;
        (0..=ev.len())
            .filter(|&p| {
                !(p >= 2 && matches!(ev[p - 1], Event::Flush) && matches!(ev[p - 2], Event::Flush))
            })
            .collect()
    }

    /// The window pieces a crash at `point` keeps in `mode`, in the order
    /// they are applied on top of the durable prefix.
    pub fn crash_plan(&self, point: usize, mode: CrashMode, seed: u64) -> Result<Vec<Piece>> {
        let st = self.read_state();
        check_point(&st.events, point)?;
        Ok(plan(&st.events, point, mode, seed))
    }

    /// The image a power cut at event index `point` leaves, in `mode`, with
    /// the random choices of `seed` (a full copy of the disk; see
    /// [`for_each_crash_image`] for many images of a large disk).
    pub fn crash_image(&self, point: usize, mode: CrashMode, seed: u64) -> Result<Vec<u8>> {
        let st = self.read_state();
        check_point(&st.events, point)?;
        let mut img = (*st.base).clone();
        apply_writes(&mut img, &st.events[..durable_end(&st.events, point)]);
        for p in plan(&st.events, point, mode, seed) {
            let o = p.offset as usize;
            img[o..o + p.data.len()].copy_from_slice(&p.data);
        }
        Ok(img)
    }

    fn record(&self, st: &mut State, ev: Event, op: &'static str, offset: u64) -> Result<()> {
        let cost = event_cost(&ev);
        if st.recorded_bytes + cost > self.max_recorded_bytes {
            let len = cost - EVENT_OVERHEAD;
            return Err(err(op, offset, len, libc::ENOBUFS));
        }
        st.recorded_bytes += cost;
        st.events.push(ev);
        Ok(())
    }
}

fn event_cost(ev: &Event) -> usize {
    EVENT_OVERHEAD
        + match ev {
            Event::Write { data, .. } => data.len(),
            Event::Flush => 0,
        }
}

fn check_point(events: &[Event], point: usize) -> Result<()> {
    if point > events.len() {
        return Err(Error::Invalid(format!(
            "crash point {point} past the last event ({})",
            events.len()
        )));
    }
    Ok(())
}

/// Index just past the last flush before `point` (0 if none): the events
/// before it are durable at `point`.
fn durable_end(events: &[Event], point: usize) -> usize {
    events[..point]
        .iter()
        .rposition(|e| matches!(e, Event::Flush))
        .map_or(0, |i| i + 1)
}

fn apply_writes(img: &mut [u8], events: &[Event]) {
    for e in events {
        if let Event::Write { offset, data } = e {
            let o = *offset as usize;
            img[o..o + data.len()].copy_from_slice(data);
        }
    }
}

/// Split a write at absolute sector boundaries: the device's atomic units.
fn sector_pieces(offset: u64, data: &[u8]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        let abs = offset + pos as u64;
        let room = (SECTOR_SIZE - abs % SECTOR_SIZE) as usize;
        let n = room.min(data.len() - pos);
        out.push(Piece {
            offset: abs,
            data: data[pos..pos + n].to_vec(),
        });
        pos += n;
    }
    out
}

/// Choose the window pieces (see [`CrashMode`]).
fn plan(events: &[Event], point: usize, mode: CrashMode, seed: u64) -> Vec<Piece> {
    let window = events[durable_end(events, point)..point]
        .iter()
        .filter_map(|e| match e {
            Event::Write { offset, data } => Some((*offset, data)),
            Event::Flush => None,
        });
    let mut rng = SimRng::new(seed);
    let mut chosen: Vec<Vec<Piece>> = Vec::new();
    for (offset, data) in window {
        let whole = || {
            vec![Piece {
                offset,
                data: data.to_vec(),
            }]
        };
        match mode {
            CrashMode::Lost => {}
            CrashMode::All => chosen.push(whole()),
            CrashMode::Subset => {
                if rng.chance(1, 2) {
                    chosen.push(whole());
                }
            }
            CrashMode::Torn => match rng.below(4) {
                0 => {}
                1 => chosen.push(whole()),
                2 => {
                    // A write cut short: its first k sectors made it.
                    let mut s = sector_pieces(offset, data);
                    let k = rng.below(s.len() as u64 + 1) as usize;
                    s.truncate(k);
                    chosen.push(s);
                }
                _ => {
                    let s = sector_pieces(offset, data);
                    chosen.push(s.into_iter().filter(|_| rng.chance(1, 2)).collect());
                }
            },
        }
    }
    if matches!(mode, CrashMode::Subset | CrashMode::Torn) {
        rng.shuffle(&mut chosen);
    }
    chosen.into_iter().flatten().collect()
}

impl BlockDevice for CrashDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.read_state().live.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut st = self.write_state();
        offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= st.live.size())
            .ok_or_else(|| err("write", offset, buf.len(), libc::EIO))?;
        let ev = Event::Write {
            offset,
            data: Arc::from(buf),
        };
        self.record(&mut st, ev, "write", offset)?;
        st.live.write_at(buf, offset)
    }

    fn flush(&self) -> Result<()> {
        let mut st = self.write_state();
        self.record(&mut st, Event::Flush, "flush", 0)
    }

    fn size(&self) -> u64 {
        self.read_state().live.size()
    }

    fn read_only(&self) -> bool {
        false
    }
}

/// One crash image handed out by [`for_each_crash_image`].
pub struct CrashImage {
    pub point: usize,
    pub mode: CrashMode,
    /// The seed of this image alone: `dev.crash_image(point, mode, seed)`
    /// rebuilds it.
    pub seed: u64,
    dev: Arc<CowDevice>,
}

impl CrashImage {
    /// The image as a writable device (writes stay private to this image).
    pub fn device(&self) -> Arc<CowDevice> {
        self.dev.clone()
    }

    /// The image as one vector (a full copy).
    pub fn to_vec(&self) -> Vec<u8> {
        self.dev.to_vec()
    }
}

impl std::fmt::Display for CrashImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "crash point {} mode {:?} seed {:#x} (replay: crash_image({}, CrashMode::{:?}, {:#x}))",
            self.point, self.mode, self.seed, self.point, self.mode, self.seed
        )
    }
}

/// The seed of one crash image of a run seeded with `seed`.
pub fn case_seed(seed: u64, point: usize, mode: CrashMode) -> u64 {
    simrng::derive(simrng::derive(seed, point as u64), mode as u64)
}

/// Up to `n` of `points`, chosen by `seed`, in ascending order (all of them
/// when there are no more than `n`).
pub fn sample_points(points: &[usize], n: usize, seed: u64) -> Vec<usize> {
    let mut v = points.to_vec();
    if v.len() > n {
        SimRng::new(seed).shuffle(&mut v);
        v.truncate(n);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Call `f` with the crash image of every point in `points` (any order;
/// duplicates are dropped) in every mode of `modes`, each with its own seed
/// derived from `seed`. Returns how many images `f` saw.
///
/// Cost per image: the size of its unflushed window, plus one pass over the
/// writes of each flush epoch; the disk is copied at most once per epoch
/// while `f` keeps a device of the previous epoch alive, and not at all
/// otherwise (beyond the first durable image). If `f` panics, the case
/// (point, mode, seed) is printed to stderr before the panic continues.
pub fn for_each_crash_image(
    dev: &CrashDevice,
    points: &[usize],
    modes: &[CrashMode],
    seed: u64,
    mut f: impl FnMut(&CrashImage),
) -> Result<usize> {
    let (events, mut durable) = {
        let st = dev.read_state();
        (st.events.clone(), st.base.clone())
    };
    let mut pts = points.to_vec();
    pts.sort_unstable();
    pts.dedup();
    if let Some(&p) = pts.last() {
        check_point(&events, p)?;
    }
    let mut applied = 0usize;
    let mut count = 0usize;
    for p in pts {
        let end = durable_end(&events, p);
        if end > applied {
            let img: &mut Vec<u8> = Arc::make_mut(&mut durable);
            apply_writes(img, &events[applied..end]);
            applied = end;
        }
        for &mode in modes {
            let s = case_seed(seed, p, mode);
            let cow = CowDevice::new(durable.clone());
            for piece in plan(&events, p, mode, s) {
                cow.write_at(&piece.data, piece.offset)?;
            }
            let img = CrashImage {
                point: p,
                mode,
                seed: s,
                dev: Arc::new(cow),
            };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&img)));
            if let Err(panic) = r {
                eprintln!("failed on {img}");
                std::panic::resume_unwind(panic);
            }
            count += 1;
        }
    }
    Ok(count)
}

#[cfg(test)]
#[path = "crash_tests.rs"]
mod tests;
