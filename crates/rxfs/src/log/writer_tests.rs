use super::*;
use crate::bdev::MemDevice;
use crate::error::Error;
use crate::format::log::{OP_CONTINUE, OP_WAS_CONT};
use crate::format::log_ops::Transaction;
use crate::log::find::Log;
use crate::log::NoPusher;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

const UUID: Uuid = [0x42; 16];

/// A memory device whose writes take `delay` (I/O in flight for real).
struct SlowDev {
    mem: MemDevice,
    delay: Duration,
    flushes: AtomicU64,
}

impl BlockDevice for SlowDev {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.mem.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        std::thread::sleep(self.delay);
        self.mem.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_only(&self) -> bool {
        false
    }
}

fn dev(bbs: u32, delay_us: u64) -> Arc<SlowDev> {
    Arc::new(SlowDev {
        mem: MemDevice::new(vec![0u8; bbs as usize * 512]),
        delay: Duration::from_micros(delay_us),
        flushes: AtomicU64::new(0),
    })
}

fn cfg(bbs: u32, logbufs: usize, logbsize: u32, head: Lsn) -> LogConfig {
    LogConfig {
        start: Daddr(0),
        size_bbs: bbs,
        uuid: UUID,
        logbufs,
        logbsize,
        head,
        tail: head,
        prev_block: u32::MAX,
        order: HostOrder::native(),
        sunit: BBSIZE as u32,
    }
}

/// An item of `regions` regions: a fake BUF-like format header, then data.
fn item(seed: u8, sizes: &[usize]) -> Vec<Vec<u8>> {
    let o = HostOrder::native();
    let mut fmt = vec![0u8; 24];
    o.put_u16(&mut fmt, 0, 0x123c);
    o.put_u16(&mut fmt, 2, sizes.len() as u16 + 1);
    let mut v = vec![fmt];
    for (i, &s) in sizes.iter().enumerate() {
        v.push((0..s).map(|k| seed ^ (k as u8) ^ (i as u8 * 17)).collect());
    }
    v
}

fn checkpoint(lw: &LogWriter, items: &[Vec<Vec<u8>>]) -> CheckpointLsns {
    // Errors if the checkpoint overran its reservation.
    lw.write_standalone_checkpoint(items).unwrap()
}

fn read_back(d: &SlowDev, bbs: u32) -> (crate::log::find::LogState, Vec<Transaction>) {
    let log = Log::from_parts(&d.mem, Daddr(0), bbs, UUID).unwrap();
    let st = log.find_state().unwrap();
    let c = log.contents(&st).unwrap();
    assert_eq!(c.unset_crcs, 0);
    (st, c.transactions)
}

fn same_items(t: &Transaction, items: &[Vec<Vec<u8>>]) {
    assert_eq!(t.header.num_items as usize, items.len());
    assert_eq!(t.items.len(), items.len());
    for (a, b) in t.items.iter().zip(items) {
        assert_eq!(&a.regions, b);
    }
}

#[test]
fn checkpoint_spanning_buffers_reads_back() {
    let bbs = 4096;
    let d = dev(bbs, 0);
    let lw = LogWriter::new(
        d.clone(),
        cfg(bbs, 4, 32768, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    // 100 KiB region: split over four 32 KiB buffers.
    let items = vec![item(1, &[100 * 1024, 300]), item(2, &[4096])];
    let l = checkpoint(&lw, &items);
    lw.force(l.commit).unwrap();
    assert!(l.commit > l.start);
    let s = lw.stats();
    assert!(s.records >= 4, "{s:?}");
    lw.close().unwrap();
    let (st, txs) = read_back(&d, bbs);
    assert!(!st.clean, "no unmount record: dirty");
    assert_eq!(txs.len(), 1);
    assert_eq!(txs[0].lsn, l.start);
    assert_eq!(txs[0].commit_lsn, l.commit);
    same_items(&txs[0], &items);
    // Split pieces carry CONTINUE / WAS_CONT.
    let raw = d.mem.snapshot();
    let log = Log::from_parts(&d.mem, Daddr(0), bbs, UUID).unwrap();
    let mut r = log.read_record(0).unwrap();
    r.unpack(crate::error::Location::Unknown).unwrap();
    let ops: Vec<_> = crate::format::log_ops::record_ops(
        &r.data,
        r.header.num_logops,
        crate::error::Location::Unknown,
    )
    .map(|o| o.unwrap().header.flags)
    .collect();
    assert_eq!(*ops.last().unwrap(), OP_CONTINUE);
    drop(raw);
    let r2 = log.read_record(r.header.total_blocks()).unwrap();
    assert_eq!(r2.header.prev_block, 0);
    let mut r2 = r2;
    r2.unpack(crate::error::Location::Unknown).unwrap();
    assert_eq!(r2.data[9] & OP_WAS_CONT, OP_WAS_CONT);
}

#[test]
fn unmount_record_reads_clean() {
    let bbs = 1024;
    let d = dev(bbs, 0);
    let lw = LogWriter::new(
        d.clone(),
        cfg(bbs, 2, 16384, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    let l = checkpoint(&lw, &[item(3, &[1000])]);
    lw.force(l.commit).unwrap();
    lw.grant().move_tail(l.commit);
    let u = lw.unmount().unwrap();
    let (st, _) = read_back(&d, bbs);
    assert!(st.clean, "{st}");
    let r = st.last_record.unwrap();
    assert!(r.unmount);
    assert_eq!(r.lsn, u);
    assert_eq!(st.head.block(), u.block() + 2);
}

/// A fake AIL that moves the tail to the last synced LSN when asked.
struct TailMover {
    target: Mutex<Option<Lsn>>,
    cv: Condvar,
}

impl TailPusher for TailMover {
    fn push_tail(&self, target: Lsn) {
        *self.target.lock().unwrap() = Some(target);
        self.cv.notify_all();
    }
}

fn ail_thread<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    ail: &'s TailMover,
    lw: &'s LogWriter,
    stop: &'s std::sync::atomic::AtomicBool,
) {
    s.spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let t = {
                let g = ail.target.lock().unwrap();
                let (mut g, _) = ail.cv.wait_timeout(g, Duration::from_millis(5)).unwrap();
                g.take()
            };
            if t.is_some() {
                // A slow AIL: writeback takes a while, so writers queue.
                // Then everything up to the last stable record is written
                // back: the tail moves to that record (a record boundary,
                // as the oldest item's LSN always is).
                std::thread::sleep(Duration::from_millis(10));
                lw.grant().move_tail(lw.last_sync_lsn());
            }
        }
    });
}

#[test]
fn wraparound_full_log_waiters_progress() {
    let bbs = 600;
    let d = dev(bbs, 50);
    let ail = Arc::new(TailMover {
        target: Mutex::new(None),
        cv: Condvar::new(),
    });
    let lw = LogWriter::new(d.clone(), cfg(bbs, 4, 16384, Lsn::new(1, 0)), ail.clone()).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let writers = 4;
    let per = 60;
    let last = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        ail_thread(s, &ail, &lw, &stop);
        let hs: Vec<_> = (0..writers)
            .map(|w| {
                let (lw, last) = (&lw, &last);
                s.spawn(move || {
                    for k in 0..per {
                        let items = vec![item((w * 50 + k) as u8, &[2000 + k * 10])];
                        let l = checkpoint(lw, &items);
                        if k == per - 1 {
                            lw.force(l.commit).unwrap();
                            last.lock().unwrap().push((l, items));
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let s = lw.stats();
    // ~4*60*2 KB = 480+ KB through a 300 KB log: it wrapped, writers waited.
    assert!(lw.head().cycle() >= 2, "{}", lw.head());
    assert!(s.grant_waits > 0, "{s:?}");
    assert_eq!(
        s.grant_waits, s.grant_wakeups,
        "each waiter woken once: {s:?}"
    );
    assert!(
        s.writes > s.records,
        "some record wrapped the log end: {s:?}"
    );
    eprintln!("wraparound: {s:?}");
    lw.close().unwrap();
    // The log reads back: the newest checkpoints are there, intact.
    let (st, txs) = read_back(&d, bbs);
    assert!(!st.clean);
    let last = last.into_inner().unwrap();
    let newest = last.iter().max_by_key(|(l, _)| l.commit).unwrap();
    let found = txs.iter().any(|t| {
        t.commit_lsn == newest.0.commit
            && t.items.len() == newest.1.len()
            && t.items.iter().zip(&newest.1).all(|(a, b)| &a.regions == b)
    });
    assert!(found, "newest checkpoint read back intact");
}

#[test]
fn commits_batch_while_io_in_flight() {
    // Device write latency 0, 200 us, 2 ms: the slower the log I/O, the
    // more synchronous commits share one record (seed 002).
    for delay_us in [0, 200, 2000] {
        // Prints the numbers; asserts only bounds no timing can break.
        let s = sync_commits(delay_us, 8, 25);
        assert!(s.records >= 1 && s.records <= 4 * 200, "{s:?}");
    }
}

/// `threads` threads each commit `per` checkpoints and force each one
/// (fsync-like); returns the writer's counters.
fn sync_commits(delay_us: u64, threads: usize, per: usize) -> crate::log::LogStats {
    let bbs = 8192;
    let d = dev(bbs, delay_us);
    let lw = LogWriter::new(
        d.clone(),
        cfg(bbs, 8, 32768, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    std::thread::scope(|s| {
        for w in 0..threads {
            let lw = &lw;
            s.spawn(move || {
                for k in 0..per {
                    let l = checkpoint(lw, &[item((w * 31 + k) as u8, &[200])]);
                    lw.force(l.commit).unwrap();
                }
            });
        }
    });
    let s = lw.stats();
    let commits = (threads * per) as u64;
    eprintln!(
        "{commits} synchronous commits, {threads} threads, write latency {delay_us} us: \
         {} records, {} log writes, {:.1} commits per write, {} completion passes, \
         {} piggybacked forces",
        s.records,
        s.writes,
        commits as f64 / s.writes.max(1) as f64,
        s.completion_batches,
        s.force_piggybacks
    );
    assert!(s.completed_records >= s.completion_batches);
    // Every commit record was flushed before and after (PREFLUSH + FUA).
    assert!(d.flushes.load(Ordering::Relaxed) >= 2 * s.completion_batches.min(1));
    lw.close().unwrap();
    let (_, txs) = read_back(&d, bbs);
    assert_eq!(txs.len() as u64, commits, "every commit reads back");
    s
}

/// Seed 002's batching through the commit gate (gate.rs), as the CIL uses
/// it: each of `threads` closed-loop committers adds an item to a shared
/// context, waits at the gate, and the first through writes the whole
/// context as one checkpoint (the others force its commit LSN).
///
/// Bound from the design, not from time: every batch holds all the
/// forcers except at start-up and when the gate opens by its quiet gap
/// (twice a record's write time: here 1 ms or more, far longer than a
/// committer's turn-around), so commits per record stay above half the
/// threads even if a few gaps expire.
#[test]
fn commit_gate_batches_closed_loop_forcers() {
    let (threads, per) = (8usize, 30usize);
    let bbs = 8192;
    let d = dev(bbs, 500);
    let lw = LogWriter::new(
        d.clone(),
        cfg(bbs, 8, 32768, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    // The open context: (sequence, items); the push lock: commit LSN of
    // each pushed sequence.
    let ctx = Mutex::new((0u64, Vec::<Vec<Vec<u8>>>::new()));
    let pushed = Mutex::new(std::collections::HashMap::<u64, Lsn>::new());
    std::thread::scope(|s| {
        for w in 0..threads {
            let (lw, ctx, pushed) = (&lw, &ctx, &pushed);
            s.spawn(move || {
                for k in 0..per {
                    let seq = {
                        let mut c = ctx.lock().unwrap();
                        c.1.push(item((w * 31 + k) as u8, &[200]));
                        c.0
                    };
                    let turn = lw.commit_turn().unwrap();
                    let lsn = {
                        let mut p = pushed.lock().unwrap();
                        match p.get(&seq) {
                            Some(l) => *l,
                            None => {
                                let items = {
                                    let mut c = ctx.lock().unwrap();
                                    c.0 += 1;
                                    std::mem::take(&mut c.1)
                                };
                                let l = checkpoint(lw, &items).commit;
                                p.insert(seq, l);
                                l
                            }
                        }
                    };
                    drop(turn);
                    lw.force(lsn).unwrap();
                }
            });
        }
    });
    let s = lw.stats();
    let commits = (threads * per) as u64;
    let checkpoints = pushed.lock().unwrap().len() as u64;
    eprintln!(
        "{commits} commits through the gate, {threads} threads: {checkpoints} checkpoints, \
         {} records, {:.1} commits per record; {s:?}",
        s.records,
        commits as f64 / s.records as f64
    );
    assert_eq!(s.records, s.writes, "no record wrapped or spilled");
    assert!(
        s.records * (threads as u64 / 2) < commits,
        "commits per record above threads / 2: {s:?}"
    );
    lw.close().unwrap();
    let (_, txs) = read_back(&d, bbs);
    assert_eq!(txs.len() as u64, checkpoints, "every checkpoint reads back");
    let items: u64 = txs.iter().map(|t| t.header.num_items as u64).sum();
    assert_eq!(items, commits, "every commit reads back");
}

#[test]
fn bad_buffer_options_rejected() {
    let d = dev(1024, 0);
    for (n, s) in [(1, 32768), (9, 32768), (4, 1000), (4, 48 * 1024)] {
        assert!(LogWriter::new(
            d.clone(),
            cfg(1024, n, s, Lsn::new(1, 0)),
            Arc::new(NoPusher)
        )
        .is_err());
    }
}

#[test]
fn force_all_and_callbacks_in_order() {
    let bbs = 2048;
    let d = dev(bbs, 300);
    let lw = LogWriter::new(
        d.clone(),
        cfg(bbs, 3, 16384, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    for k in 0..10u8 {
        let l = checkpoint(&lw, &[item(k, &[5000])]);
        let seen = seen.clone();
        lw.on_stable(
            l.commit,
            Box::new(move |r| seen.lock().unwrap().push(r.unwrap())),
        );
    }
    let last = lw.force_all().unwrap();
    assert!(lw.last_sync_lsn() >= last);
    let v = seen.lock().unwrap().clone();
    assert_eq!(v.len(), 10);
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "callbacks in LSN order");
    assert_eq!(lw.force_all().unwrap(), lw.last_sync_lsn());
    lw.close().unwrap();
}

/// A device whose write at offset 0 waits for a gate (while `first_slow`) and whose writes fail once `fail` is set.
struct OddDev {
    mem: MemDevice,
    first_slow: std::sync::atomic::AtomicBool,
    fail: std::sync::atomic::AtomicBool,
    gate: Mutex<bool>,
    gate_cv: Condvar,
}

impl BlockDevice for OddDev {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.mem.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.fail.load(Ordering::Relaxed) {
            return Err(Error::io(
                "write",
                offset,
                buf.len(),
                std::io::Error::from_raw_os_error(5),
            ));
        }
        if offset == 0 && self.first_slow.load(Ordering::Relaxed) {
            // The write at log block 0 waits for the test to open the gate.
            let mut g = self.gate.lock().unwrap();
            while !*g {
                g = self.gate_cv.wait(g).unwrap();
            }
        }
        self.mem.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read_only(&self) -> bool {
        false
    }
}

fn odd_dev(bbs: u32) -> Arc<OddDev> {
    Arc::new(OddDev {
        mem: MemDevice::new(vec![0u8; bbs as usize * 512]),
        first_slow: std::sync::atomic::AtomicBool::new(true),
        fail: std::sync::atomic::AtomicBool::new(false),
        gate: Mutex::new(false),
        gate_cv: Condvar::new(),
    })
}

#[test]
fn completions_in_ring_order_and_batched() {
    let bbs = 4096;
    let d = odd_dev(bbs);
    let lw = LogWriter::new(
        d.clone(),
        cfg(bbs, 8, 32768, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    // Seven full buffers: the first write is slow, the next six finish
    // first and wait (DONE_SYNC) for it; one pass then completes them all.
    let items = [item(9, &[7 * 32 * 1024 - 4096])];
    let lens: Vec<usize> = items
        .iter()
        .flatten()
        .map(Vec::len)
        .chain([0, 16, 0])
        .collect();
    let mut t = lw.reserve(lw.unit_bytes_for(&lens), 1, false).unwrap();
    let tid = t.tid;
    let start = lw
        .write(
            &mut t,
            &[LogOp {
                tid,
                clientid: CLIENT_TRANSACTION,
                flags: OP_START,
                data: &[],
            }],
        )
        .unwrap();
    let seen2 = seen.clone();
    lw.on_stable(
        start,
        Box::new(move |r| seen2.lock().unwrap().push(r.unwrap())),
    );
    let regions: Vec<LogOp<'_>> = items[0]
        .iter()
        .map(|r| LogOp {
            tid,
            clientid: CLIENT_TRANSACTION,
            flags: 0,
            data: r,
        })
        .collect();
    let body = lw.write(&mut t, &regions).unwrap();
    // Records 1.. finish; record 0 (log block 0) is still in flight.
    let t0 = std::time::Instant::now();
    let n = lw.stats().records as usize;
    assert!(n >= 6, "six full buffers switched out");
    while lw.sh.lock().written.len() < n - 1 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        lw.stats().completed_records,
        0,
        "nothing completes before record 0"
    );
    *d.gate.lock().unwrap() = true;
    d.gate_cv.notify_all();
    let last = lw.force_all().unwrap();
    assert!(last >= body);
    lw.grant().ungrant(t);
    let s = lw.stats();
    assert!(s.records >= 7, "{s:?}");
    eprintln!("batched completions: {s:?}");
    assert!(
        s.completion_batches < s.completed_records,
        "completions were batched: {s:?}"
    );
    assert_eq!(*seen.lock().unwrap(), vec![start]);
    lw.close().unwrap();
}

#[test]
fn write_error_shuts_the_log_down() {
    let bbs = 2048;
    let d = odd_dev(bbs);
    d.first_slow.store(false, Ordering::Relaxed);
    let lw = LogWriter::new(
        d.clone(),
        cfg(bbs, 2, 16384, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    let l = checkpoint(&lw, &[item(1, &[100])]);
    lw.force(l.commit).unwrap();
    // A callback on a buffer that is still ACTIVE fails at shutdown.
    let mut t0 = lw.reserve(4096, 1, false).unwrap();
    let tid = t0.tid;
    let open = lw
        .write(
            &mut t0,
            &[LogOp {
                tid,
                clientid: CLIENT_TRANSACTION,
                flags: OP_START,
                data: &[],
            }],
        )
        .unwrap();
    let (tx0, rx0) = std::sync::mpsc::channel();
    lw.on_stable(open, Box::new(move |r| tx0.send(r.is_err()).unwrap()));
    d.fail.store(true, Ordering::Relaxed);
    let lens = [100usize, 24, 0, 16, 0];
    let mut t = lw.reserve(lw.unit_bytes_for(&lens), 1, false).unwrap();
    let r = lw
        .write_checkpoint(&mut t, &[item(2, &[100])])
        .and_then(|l| lw.force(l.commit));
    assert!(matches!(r, Err(Error::Shutdown)), "{r:?}");
    assert!(matches!(lw.force_all(), Err(Error::Shutdown)));
    assert!(matches!(lw.reserve(100, 1, false), Err(Error::Shutdown)));
    let (tx, rx) = std::sync::mpsc::channel();
    lw.on_stable(
        Lsn::new(9, 9),
        Box::new(move |r| tx.send(r.is_err()).unwrap()),
    );
    assert!(rx.recv().unwrap());
    assert!(rx0.recv().unwrap(), "the pending callback failed");
    lw.grant().ungrant(t0);
    drop(lw); // must not hang
}

#[test]
fn rolling_tickets_regrant_through_a_small_log() {
    let bbs = 400;
    let d = dev(bbs, 20);
    let ail = Arc::new(TailMover {
        target: Mutex::new(None),
        cv: Condvar::new(),
    });
    let lw = LogWriter::new(d.clone(), cfg(bbs, 2, 16384, Lsn::new(1, 0)), ail.clone()).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        ail_thread(s, &ail, &lw, &stop);
        let hs: Vec<_> = (0..3u8)
            .map(|w| {
                let lw = &lw;
                s.spawn(move || {
                    let items = vec![item(w, &[3000])];
                    let lens: Vec<usize> = items
                        .iter()
                        .flatten()
                        .map(Vec::len)
                        .chain([0, 16, 0])
                        .collect();
                    // A rolling ticket of 2 units, rolled 40 times: 120 KB
                    // through a 200 KB log, with the other writers.
                    let mut t = lw.reserve(lw.unit_bytes_for(&lens), 2, true).unwrap();
                    for _ in 0..40 {
                        let l = lw.write_checkpoint(&mut t, &items).unwrap();
                        assert_eq!(t.overrun_bytes, 0);
                        lw.force(l.commit).unwrap();
                        lw.grant().roll(&mut t).unwrap();
                    }
                    lw.grant().ungrant(t);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let s = lw.stats();
    eprintln!("rolling: head {} {s:?}", lw.head());
    assert!(lw.head().cycle() >= 2, "the log wrapped");
    assert_eq!(s.grant_waits, s.grant_wakeups);
    lw.close().unwrap();
    read_back(&d, bbs);
}

#[path = "writer_crash_tests.rs"]
mod crash;
