use super::*;
use std::sync::atomic::AtomicU64;

/// A fake AIL: records push requests.
#[derive(Default)]
struct FakeAil {
    pushes: Mutex<Vec<Lsn>>,
    calls: AtomicU64,
}

impl TailPusher for FakeAil {
    fn push_tail(&self, target: Lsn) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.pushes.lock().unwrap().push(target);
    }
}

const BBS: u32 = 1000;
const USABLE: u64 = (BBS as u64 - HEADROOM_BBS) * 512;

fn heads(ail: Arc<FakeAil>) -> GrantHeads {
    GrantHeads::new(BBS, Lsn::new(1, 0), Lsn::new(1, 0), ail)
}

#[test]
fn reserve_write_ungrant_accounting() {
    let g = heads(Arc::default());
    assert_eq!(g.free_bytes(), USABLE);
    let mut t = g.reserve(7, 10_000, 1, false).unwrap();
    assert_eq!(g.free_bytes(), USABLE - 10_000);
    t.consume(4_000);
    assert_eq!(t.remaining(), 6_000);
    g.ungrant(t);
    // What was written stays until the tail passes it.
    assert_eq!(g.free_bytes(), USABLE - 4_000);
    assert_eq!(g.write_free_bytes(), USABLE - 4_000);
    g.move_tail(Lsn::new(1, 4));
    assert_eq!(g.free_bytes(), USABLE - 4_000 + 4 * 512);
    // The tail never moves back.
    g.move_tail(Lsn::new(1, 2));
    assert_eq!(g.tail(), Lsn::new(1, 4));
    assert!(g.reserve(1, (USABLE + 1) as u32, 1, false).is_err());
}

#[test]
fn rolling_ticket_regrants() {
    let g = heads(Arc::default());
    let mut t = g.reserve(1, 1000, 3, true).unwrap();
    assert_eq!(g.free_bytes(), USABLE - 3000);
    t.consume(300);
    g.roll(&mut t).unwrap(); // 700 unused back; 2 units left
    assert_eq!((t.count(), t.remaining()), (2, 1000));
    assert_eq!(g.free_bytes(), USABLE - 2300);
    t.consume(100);
    g.roll(&mut t).unwrap();
    t.consume(100);
    // Pre-reserved units exhausted: this roll regrants a unit.
    g.roll(&mut t).unwrap();
    assert_eq!((t.count(), t.remaining()), (1, 1000));
    assert_eq!(g.free_bytes(), USABLE - 300 - 100 - 100 - 1000);
    g.ungrant(t);
    assert_eq!(g.free_bytes(), USABLE - 500);
    let ((rc, rb), (wc, wb)) = g.heads();
    assert_eq!((rc, rb, wc, wb), (1, 500, 1, 500));
}

#[test]
fn full_log_waiters_fifo_each_woken_once() {
    let ail = Arc::new(FakeAil::default());
    let g = Arc::new(heads(ail.clone()));
    // Fill the log: one ticket writes everything it reserved.
    let mut t = g.reserve(1, USABLE as u32, 1, false).unwrap();
    t.consume(USABLE as u32);
    g.ungrant(t);
    assert_eq!(g.free_bytes(), 0);
    let order = Arc::new(Mutex::new(Vec::new()));
    let n = 16u32;
    let unit = 20 * 512;
    let mut hs = Vec::new();
    for k in 0..n {
        let (gc, order) = (g.clone(), order.clone());
        hs.push(std::thread::spawn(move || {
            let mut t = gc.reserve(k, unit, 1, false).unwrap();
            order.lock().unwrap().push(k);
            t.consume(unit);
            gc.ungrant(t);
        }));
        // Let each queue in turn so FIFO order is known.
        while g.stats().waits < k as u64 + 1 {
            std::thread::yield_now();
        }
    }
    assert!(
        ail.calls.load(Ordering::Relaxed) > 0,
        "the AIL was asked to push"
    );
    // Move the tail a little at a time: each step frees room for one
    // waiter (plus change), so each wakeup is one grant.
    let mut blk = 0;
    while order.lock().unwrap().len() < n as usize {
        blk += 7;
        g.move_tail(Lsn::new(1 + blk / BBS, blk % BBS));
        // Let the granted waiter record itself before the next grant.
        while (order.lock().unwrap().len() as u64) < g.stats().wakeups {
            std::thread::yield_now();
        }
    }
    for h in hs {
        h.join().unwrap();
    }
    let s = g.stats();
    assert_eq!(s.waits, n as u64);
    assert_eq!(s.wakeups, n as u64, "each waiter woken exactly once");
    assert_eq!(*order.lock().unwrap(), (0..n).collect::<Vec<_>>(), "FIFO");
    // Push targets never pass the last synced LSN (the head, here).
    assert!(ail
        .pushes
        .lock()
        .unwrap()
        .iter()
        .all(|&l| l <= Lsn::new(1, 0)));
}

#[test]
fn new_requests_queue_behind_waiters() {
    let g = Arc::new(heads(Arc::default()));
    let mut t = g.reserve(1, USABLE as u32 - 1000, 1, false).unwrap();
    t.consume(USABLE as u32 - 1000);
    g.ungrant(t);
    // A big waiter queues; a small one that would fit must not barge.
    let g2 = g.clone();
    let big = std::thread::spawn(move || g2.reserve(2, 5000, 1, false).map(|t| g2.ungrant(t)));
    while g.stats().waits < 1 {
        std::thread::yield_now();
    }
    let g3 = g.clone();
    let small = std::thread::spawn(move || g3.reserve(3, 500, 1, false).map(|t| g3.ungrant(t)));
    while g.stats().waits < 2 {
        std::thread::yield_now();
    }
    assert_eq!(g.stats().wakeups, 0);
    g.move_tail(Lsn::new(1, 20));
    big.join().unwrap().unwrap();
    small.join().unwrap().unwrap();
    assert_eq!(g.stats().wakeups, 2);
}

#[test]
fn shutdown_fails_waiters() {
    let g = Arc::new(heads(Arc::default()));
    let mut t = g.reserve(1, USABLE as u32, 1, false).unwrap();
    t.consume(USABLE as u32);
    g.ungrant(t);
    let g2 = g.clone();
    let w = std::thread::spawn(move || g2.reserve(2, 512, 1, false).map(|_| ()));
    while g.stats().waits < 1 {
        std::thread::yield_now();
    }
    g.shutdown();
    assert!(matches!(w.join().unwrap(), Err(Error::Shutdown)));
    assert!(matches!(g.reserve(3, 1, 1, false), Err(Error::Shutdown)));
}

#[test]
fn push_target_asked_when_low() {
    let ail = Arc::new(FakeAil::default());
    let g = GrantHeads::new(BBS, Lsn::new(1, 0), Lsn::new(1, 900), ail.clone());
    // 900 of 1000 BBs used: a reservation asks for a push.
    let t = g.reserve(1, 512, 1, false).unwrap();
    g.ungrant(t);
    let p = ail.pushes.lock().unwrap().clone();
    assert_eq!(p.len(), 1);
    assert!(
        p[0] > Lsn::new(1, 0) && p[0] <= Lsn::new(1, 900),
        "{:?}",
        p[0]
    );
}
