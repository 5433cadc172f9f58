//! [`ReadGate`]: how many event loops wait in `read(2)` on `/dev/fuse`.
//!
//! The kernel hands a request to the loop that has waited longest in
//! `read` (its waiters are first in, first out). With every idle loop
//! waiting there, one caller's requests visit all 32-64 loops in turn,
//! each with a cold stack, cold caches and its own allocator heap to grow.
//! Fewer loops would starve the requests that wait (log forces, whose
//! batching needs many fsyncs in flight; parallel direct I/O), so the
//! gate keeps every loop but, on a lightly used mount, lets only `limit`
//! wait in `read`; the others park, last in first out, so the loops that
//! just worked are the ones that work next.
//!
//! How many may wait (`allowed`): `limit` while the
//! last [`RECENT`] requests came from one caller (its next request finds
//! a loop while the last one answers), twice `limit` while they came
//! from several (the caller's `pid` in the request header; 0, the
//! kernel's own requests, counts as none). With two callers and two
//! loops reading, both readers are often running when a caller comes
//! back, and its request waits for a parked loop's wake-up.
//!
//! A loop counts as running a request from the moment it takes it until
//! its answer is about to be written ([`ReadGate::answered`], through the
//! reply), or until it is back at the gate when nothing is answered
//! (FORGET). Counting it until its return made two creating callers look
//! like a crowd: the answer wakes the caller, which on a small machine
//! often takes the loop's CPU before the loop is back.
//!
//! A mount is loaded once more than twice `limit` loops have been running
//! requests at once for [`LOADED_AFTER`] requests taken in a row, and
//! stays so for the next [`LOADED_FOR`] requests: then every loop reads
//! (and each request taken wakes one parked loop), as with no gate.
//! Without that, 32 threads fsyncing lost 20%: each burst of callers back
//! from a log force waited for parked loops woken one by one. Eight
//! fsyncing threads keep more than four loops running for runs of tens
//! of requests, 32 threads for the whole run.
//!
//! Measured, 2026-11-28 (2 vCPUs, fresh copies of one 4 GiB image in
//! `/dev/shm`, binaries interleaved, medians of 4 rounds): before, with a
//! loop counted as running until its return and a single request with
//! more than four running enough to load the mount, two creating callers
//! had the mount loaded most of the time and their requests went round
//! all 32 loops (perf: every loop ran a share, each with a cold allocator
//! heap; `malloc`'s time was the miss on the free block it hands out).
//! Two threads making 10,000 files each: 6.8k creates/s before, 8.2k with
//! the answer ending the count, 9.0k with twice the readers for two
//! callers too; fio 4 KiB `O_DIRECT` random overwrites, two jobs: 58.5k,
//! 49.8k, 63.1k IOPS; one thread creating: 6.0k, 6.7k, 6.0k (within the
//! spread of its rounds, 5.4k-7.4k).
//!
//! Measured (2 vCPUs, `loadgen` on a fresh 4 GiB image through
//! `/dev/fuse`, 32 loops, runs interleaved, medians; "open" is the same
//! build with a limit of 64): creates/s of one thread 8.3k open, 9.5k
//! gated (6 rounds) and 4.6k, 5.8k (7 rounds, another hour); two threads
//! 11.2k, 12.4k and 7.7k, 7.8k; 32 threads each creating, writing 4 KiB
//! and fsyncing 7.0k, 6.9k fsyncs/s; fio 4 KiB `O_DIRECT` random
//! overwrites, one job 37.5k, 39.6k IOPS, two jobs 86.0k, 87.1k.
//!
//! Invariant (under the gate's lock): `readers` counts the loops that are
//! in `read` or about to enter it. A loop that takes a request leaves the
//! count; if that leaves it at zero, it wakes the most recently parked
//! loop and counts it in, before it runs its request: while any loop is
//! parked, at least one loop is reading, so a request never waits for a
//! loop that is free. A loop done with its request reads again if fewer
//! than `allowed` are reading (or the mount is loaded), and parks
//! otherwise. Once the connection ends, every parked loop is woken and
//! told to stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Requests a mount stays loaded for once it is found loaded.
const LOADED_FOR: u64 = 256;

/// Requests taken in a row with more than twice `limit` loops running
/// that make a mount loaded.
const LOADED_AFTER: usize = 8;

/// Requests whose callers tell whether one caller or several are being
/// served.
const RECENT: usize = 8;

/// One loop's place to park, and whether it counts as running a request.
#[derive(Default)]
pub struct Parking {
    woken: Mutex<Wake>,
    cv: Condvar,
    /// Set when the loop takes a request, cleared (and `busy` counted
    /// down) by whichever comes first: the answer ([`ReadGate::answered`])
    /// or the loop's return to the gate.
    running: AtomicBool,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Wake {
    #[default]
    No,
    Read,
    Stop,
}

struct State {
    readers: usize,
    /// Loops running a request.
    busy: usize,
    /// Requests taken so far.
    takes: u64,
    /// The mount counts as loaded until `takes` reaches this.
    loaded_until: u64,
    /// Requests taken in a row with more than twice `limit` loops running.
    crowded: usize,
    /// The callers (process ids, 0: none) of the last requests taken.
    recent: [u32; RECENT],
    /// Where the next one goes in `recent`.
    recent_at: usize,
    /// Loops that may wait in `read` at once: `limit`, twice that while
    /// the recent requests came from more than one caller.
    allowed: usize,
    parked: Vec<Arc<Parking>>,
    stopped: bool,
}

pub struct ReadGate {
    limit: usize,
    st: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ReadGate {
    /// A gate letting at most `limit` (at least 1) loops wait in `read`.
    pub fn new(limit: usize) -> Self {
        ReadGate {
            limit: limit.max(1),
            st: Mutex::new(State {
                readers: 0,
                busy: 0,
                takes: 0,
                loaded_until: 0,
                crowded: 0,
                recent: [0; RECENT],
                recent_at: 0,
                allowed: limit.max(1),
                parked: Vec::new(),
                stopped: false,
            }),
        }
    }

    /// Before `read`: true to go and read, false once the connection has
    /// ended. Parks while `limit` loops are reading, unless the mount is
    /// loaded: more than twice `limit` loops were running requests for
    /// `LOADED_AFTER` requests in a row, within the last `LOADED_FOR`
    /// requests taken (then every loop reads).
    pub fn enter(&self, me: &Arc<Parking>) -> bool {
        {
            let mut st = lock(&self.st);
            if me.running.swap(false, Ordering::AcqRel) {
                st.busy = st.busy.saturating_sub(1);
            }
            if st.stopped {
                return false;
            }
            if st.readers < st.allowed || st.takes < st.loaded_until {
                st.readers += 1;
                return true;
            }
            *lock(&me.woken) = Wake::No;
            st.parked.push(me.clone());
        }
        let mut w = lock(&me.woken);
        while *w == Wake::No {
            w = me.cv.wait(w).unwrap_or_else(|e| e.into_inner());
        }
        *w == Wake::Read
    }

    /// After `read` returned a request: this loop stops counting as a
    /// reader and counts as running one; if no reader is left, or the
    /// mount is loaded, the most recently parked loop is woken to read.
    pub fn taken(&self, me: &Parking, pid: u32) {
        let mut st = lock(&self.st);
        me.running.store(true, Ordering::Release);
        if pid != 0 {
            let at = st.recent_at;
            st.recent[at] = pid;
            st.recent_at = (at + 1) % RECENT;
            let first = st.recent.iter().copied().find(|&p| p != 0);
            let several = st.recent.iter().any(|&p| p != 0 && Some(p) != first);
            st.allowed = if several { 2 * self.limit } else { self.limit };
        }
        st.busy += 1;
        st.takes += 1;
        if st.busy > 2 * self.limit {
            st.crowded += 1;
            if st.crowded >= LOADED_AFTER {
                st.loaded_until = st.takes + LOADED_FOR;
            }
        } else {
            st.crowded = 0;
        }
        let loaded = st.takes < st.loaded_until;
        Self::reader_left(&mut st, loaded);
    }

    /// The request `me` took is answered (its reply is about to be
    /// written): the loop no longer counts as running one. The caller
    /// the answer wakes often takes the loop's CPU before the loop is
    /// back at the gate; counting it as running until then made two
    /// creating callers look like a crowd.
    pub fn answered(&self, me: &Parking) {
        if me.running.swap(false, Ordering::AcqRel) {
            let mut st = lock(&self.st);
            st.busy = st.busy.saturating_sub(1);
        }
    }

    /// This loop's `read` failed and the loop ends; the others serve on.
    pub fn leave(&self) {
        Self::reader_left(&mut lock(&self.st), false);
    }

    /// A reader left; `loaded`: wake a parked loop even if others are
    /// still reading.
    fn reader_left(st: &mut State, loaded: bool) {
        st.readers = st.readers.saturating_sub(1);
        if (st.readers == 0 || loaded) && !st.stopped {
            if let Some(p) = st.parked.pop() {
                st.readers += 1;
                *lock(&p.woken) = Wake::Read;
                p.cv.notify_one();
            }
        }
    }

    /// The connection ended: wake every parked loop to stop.
    pub fn stop(&self) {
        let mut st = lock(&self.st);
        st.stopped = true;
        for p in st.parked.drain(..) {
            *lock(&p.woken) = Wake::Stop;
            p.cv.notify_one();
        }
    }

    /// Loops parked now (for tests).
    #[cfg(test)]
    fn parked(&self) -> usize {
        lock(&self.st).parked.len()
    }

    /// Loops counted as running a request now (for tests).
    #[cfg(test)]
    fn busy(&self) -> usize {
        lock(&self.st).busy
    }

    /// Loops that may wait in `read` now (for tests).
    #[cfg(test)]
    fn allowed(&self) -> usize {
        lock(&self.st).allowed
    }

    /// Whether the mount counts as loaded now (for tests).
    #[cfg(test)]
    fn loaded(&self) -> bool {
        let st = lock(&self.st);
        st.takes < st.loaded_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn wait_parked(g: &ReadGate, n: usize) {
        for _ in 0..2000 {
            if g.parked() == n {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("{} parked, want {n}", g.parked());
    }

    fn park() -> Arc<Parking> {
        Arc::new(Parking::default())
    }

    /// A loop that reads and takes a request (and keeps running it).
    fn take_one(g: &ReadGate) -> Arc<Parking> {
        let p = park();
        assert!(g.enter(&p));
        g.taken(&p, 1);
        p
    }

    #[test]
    fn only_the_limit_reads_and_the_last_parked_goes_first() {
        let g = Arc::new(ReadGate::new(1));
        let a = park();
        assert!(g.enter(&a));
        // Two more loops park behind the one reader.
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut hs = Vec::new();
        for i in 0..2 {
            let (g2, order) = (g.clone(), order.clone());
            hs.push(std::thread::spawn(move || {
                let ok = g2.enter(&park());
                lock(&order).push(i);
                ok
            }));
            wait_parked(&g, i + 1);
        }
        assert!(lock(&order).is_empty());
        // The reader takes a request: the last parked loop reads.
        g.taken(&a, 1);
        assert!(hs.pop().unwrap().join().unwrap());
        assert_eq!(*lock(&order), vec![1]);
        assert_eq!(g.parked(), 1);
        // That one takes a request too: no reader left, the next wakes.
        g.taken(&park(), 1);
        assert!(hs.pop().unwrap().join().unwrap());
        assert_eq!(*lock(&order), vec![1, 0]);
        // The end of the connection turns every loop away.
        g.stop();
        assert!(!g.enter(&a));
    }

    #[test]
    fn a_reader_is_always_left_while_loops_are_parked() {
        // Many loops, each taking a request as soon as it reads and never
        // coming back: every parked loop must be let in, one at a time.
        let g = Arc::new(ReadGate::new(2));
        let served = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..16)
            .map(|_| {
                let (g, served) = (g.clone(), served.clone());
                std::thread::spawn(move || {
                    let me = park();
                    if g.enter(&me) {
                        served.fetch_add(1, Ordering::SeqCst);
                        g.taken(&me, 1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(served.load(Ordering::SeqCst), 16);
    }

    #[test]
    fn an_answer_ends_the_count_once() {
        let g = ReadGate::new(1);
        let p = take_one(&g);
        assert_eq!(g.busy(), 1);
        g.answered(&p);
        assert_eq!(g.busy(), 0);
        // Answered already: neither another answer nor the loop's return
        // counts it down again.
        g.answered(&p);
        assert!(g.enter(&p));
        assert_eq!(g.busy(), 0);
        // Not answered (FORGET): the return to the gate counts it down.
        g.taken(&p, 1);
        assert_eq!(g.busy(), 1);
        assert!(g.enter(&p));
        assert_eq!(g.busy(), 0);
    }

    #[test]
    fn a_loaded_mount_parks_nobody_until_it_is_quiet_again() {
        let g = Arc::new(ReadGate::new(1));
        // One reader; a second loop parks.
        let first = park();
        assert!(g.enter(&first));
        let parked = {
            let g = g.clone();
            std::thread::spawn(move || g.enter(&park()))
        };
        wait_parked(&g, 1);
        // The reader takes a request: the parked loop is woken to read.
        g.taken(&first, 1);
        assert!(parked.join().unwrap());
        let mut running = vec![first, park()];
        g.taken(&running[1], 1);
        // More than twice the limit running, for LOADED_AFTER requests in
        // a row: loaded.
        for _ in 0..LOADED_AFTER {
            assert!(!g.loaded());
            running.push(take_one(&g));
        }
        assert!(g.loaded());
        for _ in 0..4 {
            assert!(g.enter(&park()));
        }
        // The running ones finish; they read too.
        for p in &running {
            assert!(g.enter(p));
        }
        assert_eq!(g.parked(), 0);
        assert_eq!(g.busy(), 0);
        // LOADED_FOR requests with one running at a time: quiet again, so
        // the loop done with the last one parks.
        let q = park();
        for _ in 1..LOADED_FOR {
            g.taken(&q, 1);
            assert!(g.enter(&q));
        }
        g.taken(&q, 1);
        let back = {
            let g = g.clone();
            std::thread::spawn(move || g.enter(&q))
        };
        wait_parked(&g, 1);
        g.stop();
        assert!(!back.join().unwrap());
    }

    #[test]
    fn a_crowd_must_last_to_load_the_mount() {
        let g = ReadGate::new(1);
        // Two running, then one short of LOADED_AFTER requests taken with
        // more than two running: not loaded.
        let running: Vec<_> = (0..1 + LOADED_AFTER).map(|_| take_one(&g)).collect();
        assert!(!g.loaded());
        // All but one answered, and a request taken with two running: the
        // run is broken.
        for p in &running[1..] {
            g.answered(p);
        }
        take_one(&g);
        assert_eq!(g.busy(), 2);
        assert!(!g.loaded());
        // More than two running again: one short of LOADED_AFTER in a row
        // is not enough, LOADED_AFTER is.
        for _ in 0..LOADED_AFTER - 1 {
            take_one(&g);
        }
        assert!(!g.loaded());
        take_one(&g);
        assert!(g.loaded());
    }

    #[test]
    fn several_callers_let_twice_the_limit_read() {
        let g = ReadGate::new(1);
        // One caller (and requests of none, pid 0): one loop reads.
        for pid in [7, 0, 7] {
            let p = park();
            assert!(g.enter(&p));
            g.taken(&p, pid);
        }
        assert_eq!(g.allowed(), 1);
        assert!(g.enter(&park()));
        // A second caller: two loops may read.
        g.taken(&park(), 8);
        assert_eq!(g.allowed(), 2);
        assert!(g.enter(&park()));
        assert!(g.enter(&park()));
        // RECENT requests from one caller again: back to one.
        for _ in 0..RECENT {
            g.taken(&park(), 7);
        }
        assert_eq!(g.allowed(), 1);
    }
}
