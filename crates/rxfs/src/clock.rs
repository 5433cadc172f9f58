//! A fixed clock for reproducible images.
//!
//! Image builders set `SOURCE_DATE_EPOCH` (reproducible-builds.org) so
//! that two builds of the same input give the same bytes. With
//! [`set_fixed`], every time the library would take from the system clock
//! ("now": change and birth times, the times of a new filesystem) is that
//! time instead, and the values XFS draws at random (inode generation
//! numbers) come from a deterministic sequence seeded by it. The setting is
//! process-wide: it is meant for a build tool's process, before it opens
//! anything.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use crate::format::inode::Timestamp;

static FIXED: AtomicBool = AtomicBool::new(false);
static FIXED_SEC: AtomicI64 = AtomicI64::new(0);
static SEQ: AtomicU64 = AtomicU64::new(0);

/// Use `sec` (seconds since the epoch, nanoseconds 0) as "now" from here
/// on, and a deterministic sequence for random values.
pub fn set_fixed(sec: i64) {
    FIXED_SEC.store(sec, Ordering::Relaxed);
    SEQ.store(0, Ordering::Relaxed);
    FIXED.store(true, Ordering::Release);
}

/// The fixed time, if one is set.
pub fn fixed() -> Option<Timestamp> {
    FIXED.load(Ordering::Acquire).then(|| Timestamp {
        sec: FIXED_SEC.load(Ordering::Relaxed),
        nsec: 0,
    })
}

/// The next value of the deterministic sequence (SplitMix64 over a counter
/// seeded by the fixed time), or None without a fixed clock.
pub fn next_random() -> Option<u64> {
    if !FIXED.load(Ordering::Acquire) {
        return None;
    }
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut z = (FIXED_SEC.load(Ordering::Relaxed) as u64)
        .wrapping_add(n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    Some(z ^ (z >> 31))
}
