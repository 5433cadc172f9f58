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
//! A mount is loaded once more than twice `limit` loops have been running
//! requests at once for [`LOADED_AFTER`] requests taken in a row, and
//! stays so for the next [`LOADED_FOR`] requests: then every loop reads
//! (and each request taken wakes one parked loop), as with no gate.
//! Without that, 32 threads fsyncing lost 20%: each burst of callers back
//! from a log force waited for parked loops woken one by one. The run of
//! requests filters out short spikes: a loop that has answered counts as
//! running until it is back at the gate, and its answer wakes the caller,
//! which on a small machine often takes the loop's CPU first. Two
//! callers creating files saw more than four loops running 217 times in
//! 80,000 requests, never for more than five requests in a row; with a
//! single request enough, the mount was loaded most of the time and the
//! callers' requests went round all 32 loops (perf: every loop ran a
//! share, each with a cold allocator heap; the time of `malloc` was the
//! miss on the free block it hands out). Eight in a row, measured
//! interleaved (8 rounds, medians, 20,000 creates by two threads): daemon
//! user time per create 89.5 -> 80.8 us, creates/s 7.3k -> 7.9k. Eight
//! fsyncing threads keep more than four loops running for runs of tens
//! of requests, 32 threads for the whole run: 3.1k -> 3.5k and 3.9k ->
//! 4.2k fsyncs/s in the same rounds (no loss); fio 4 KiB `O_DIRECT`
//! overwrites, 7 rounds: 4 jobs 70k -> 67k IOPS, 8 jobs 77k -> 75k
//! (runs spread over 55k-92k either way).
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
//! than the limit are reading (or the mount is loaded), and parks
//! otherwise. Once the connection ends, every parked loop is woken and
//! told to stop.

use std::sync::{Arc, Condvar, Mutex};

/// Requests a mount stays loaded for once it is found loaded.
const LOADED_FOR: u64 = 256;

/// Requests taken in a row with more than twice `limit` loops running
/// that make a mount loaded.
const LOADED_AFTER: usize = 8;

/// One loop's place to park.
#[derive(Default)]
pub struct Parking {
    woken: Mutex<Wake>,
    cv: Condvar,
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
                parked: Vec::new(),
                stopped: false,
            }),
        }
    }

    /// Before `read` (`done`: this loop just finished a request): true to
    /// go and read, false once the connection has ended. Parks while
    /// `limit` loops are reading, unless the mount is loaded: more than
    /// twice `limit` loops were running requests for `LOADED_AFTER`
    /// requests in a row, within the last `LOADED_FOR` requests taken
    /// (then every loop reads).
    pub fn enter(&self, me: &Arc<Parking>, done: bool) -> bool {
        {
            let mut st = lock(&self.st);
            if done {
                st.busy = st.busy.saturating_sub(1);
            }
            if st.stopped {
                return false;
            }
            if st.readers < self.limit || st.takes < st.loaded_until {
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
    pub fn taken(&self) {
        let mut st = lock(&self.st);
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
    use std::sync::atomic::{AtomicUsize, Ordering};
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

    #[test]
    fn only_the_limit_reads_and_the_last_parked_goes_first() {
        let g = Arc::new(ReadGate::new(1));
        let a = Arc::new(Parking::default());
        assert!(g.enter(&a, false));
        // Two more loops park behind the one reader.
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut hs = Vec::new();
        for i in 0..2 {
            let (g2, order) = (g.clone(), order.clone());
            hs.push(std::thread::spawn(move || {
                let ok = g2.enter(&Arc::new(Parking::default()), false);
                lock(&order).push(i);
                ok
            }));
            wait_parked(&g, i + 1);
        }
        assert!(lock(&order).is_empty());
        // The reader takes a request: the last parked loop reads.
        g.taken();
        assert!(hs.pop().unwrap().join().unwrap());
        assert_eq!(*lock(&order), vec![1]);
        assert_eq!(g.parked(), 1);
        // That one takes a request too: no reader left, the next wakes.
        g.taken();
        assert!(hs.pop().unwrap().join().unwrap());
        assert_eq!(*lock(&order), vec![1, 0]);
        // The end of the connection turns every loop away.
        g.stop();
        assert!(!g.enter(&a, true));
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
                    let me = Arc::new(Parking::default());
                    if g.enter(&me, false) {
                        served.fetch_add(1, Ordering::SeqCst);
                        g.taken();
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
    fn a_loaded_mount_parks_nobody_until_it_is_quiet_again() {
        let g = Arc::new(ReadGate::new(1));
        let me = || Arc::new(Parking::default());
        // One reader; a second loop parks.
        assert!(g.enter(&me(), false));
        let parked = {
            let g = g.clone();
            std::thread::spawn(move || g.enter(&Arc::new(Parking::default()), false))
        };
        wait_parked(&g, 1);
        // The reader takes a request: the parked loop is woken to read.
        g.taken();
        assert!(parked.join().unwrap());
        // More than twice the limit running, for LOADED_AFTER requests in
        // a row: loaded.
        g.taken();
        for _ in 0..LOADED_AFTER {
            assert!(!g.loaded());
            assert!(g.enter(&me(), false));
            g.taken();
        }
        assert!(g.loaded());
        for _ in 0..4 {
            assert!(g.enter(&me(), false));
        }
        // The running ones finish; they read too.
        for _ in 0..2 + LOADED_AFTER {
            assert!(g.enter(&me(), true));
        }
        assert_eq!(g.parked(), 0);
        // LOADED_FOR requests with one running at a time: quiet again, so
        // the loop done with the last one parks.
        for _ in 1..LOADED_FOR {
            g.taken();
            assert!(g.enter(&me(), true));
        }
        g.taken();
        let back = {
            let g = g.clone();
            std::thread::spawn(move || g.enter(&Arc::new(Parking::default()), true))
        };
        wait_parked(&g, 1);
        g.stop();
        assert!(!back.join().unwrap());
    }

    #[test]
    fn a_crowd_must_last_to_load_the_mount() {
        let g = ReadGate::new(1);
        let me = || Arc::new(Parking::default());
        // Two running, then one short of LOADED_AFTER requests taken with
        // more than two running: not loaded.
        for _ in 0..1 + LOADED_AFTER {
            assert!(g.enter(&me(), false));
            g.taken();
        }
        assert!(!g.loaded());
        // All but one finish (the first back reads, the others park),
        // and the reader takes a request with two running: the run is
        // broken.
        let mut back = Vec::new();
        let g = Arc::new(g);
        assert!(g.enter(&me(), true));
        for i in 0..LOADED_AFTER - 1 {
            let g2 = g.clone();
            back.push(std::thread::spawn(move || {
                g2.enter(&Arc::new(Parking::default()), true)
            }));
            wait_parked(&g, i + 1);
        }
        g.taken();
        assert!(!g.loaded());
        // More than two running again (each request taken wakes a parked
        // loop to read the next): one short of LOADED_AFTER in a row is
        // not enough, LOADED_AFTER is.
        for _ in 0..LOADED_AFTER - 1 {
            g.taken();
        }
        assert!(!g.loaded());
        g.taken();
        assert!(g.loaded());
        g.stop();
        for h in back {
            assert!(h.join().unwrap());
        }
    }
}
