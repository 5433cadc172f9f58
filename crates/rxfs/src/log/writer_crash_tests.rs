//! Crash-simulator tests of the log writer.

use super::*;

/// Power cuts at every point of a run of forced checkpoints, in every crash
/// mode: the log always reads back (head, tail, contents), and every
/// checkpoint whose force returned before the cut is there, whole. Run with
/// one writer, and with four concurrent writers (commits batched, several
/// buffers in flight).
#[test]
fn crash_at_every_point_keeps_forced_checkpoints() {
    for threads in [1, 4] {
        crash_run(threads, 24 / threads as u8);
    }
}

type Forced = Vec<(usize, u32, Vec<Vec<Vec<u8>>>)>;

fn crash_run(threads: usize, per: u8) {
    use crate::bdev::{for_each_crash_image, CrashDevice, CrashMode};
    let bbs = 2048;
    let crash = Arc::new(CrashDevice::new(vec![0u8; bbs as usize * 512], 64 << 20));
    let lw = LogWriter::new(
        crash.clone(),
        cfg(bbs, 4, 16384, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    // (events issued when the force returned, tid, items)
    let forced: Mutex<Forced> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for w in 0..threads {
            let (lw, crash, forced) = (&lw, &crash, &forced);
            s.spawn(move || {
                for k in 0..per {
                    // Tiny to several buffers, so bodies span records.
                    let size = [100, 3000, 20_000, 40_000][(k as usize + w) % 4];
                    let seed = k.wrapping_mul(7).wrapping_add(w as u8 * 64);
                    let items = vec![item(seed, &[size]), item(seed ^ 0x55, &[64])];
                    let lens: Vec<usize> = items
                        .iter()
                        .flatten()
                        .map(Vec::len)
                        .chain([0, 16, 0])
                        .collect();
                    let mut t = lw.reserve(lw.unit_bytes_for(&lens), 1, false).unwrap();
                    let tid = t.tid;
                    let l = lw.write_checkpoint(&mut t, &items).unwrap();
                    lw.grant().ungrant(t);
                    if k % 3 != 2 {
                        lw.force(l.commit).unwrap();
                        forced
                            .lock()
                            .unwrap()
                            .push((crash.event_count(), tid, items));
                    }
                }
            });
        }
    });
    lw.close().unwrap();
    let forced = forced.into_inner().unwrap();
    let points = crash.crash_points();
    let n = for_each_crash_image(&crash, &points, &CrashMode::EVERY, 0x10c, |img| {
        let dev = img.device();
        let log = Log::from_parts(dev.as_ref(), Daddr(0), bbs, UUID).unwrap();
        let st = log.find_state().unwrap_or_else(|e| panic!("{img}: {e}"));
        let c = log
            .contents(&st)
            .unwrap_or_else(|e| panic!("{img}: {st}: {e}"));
        for (issued, tid, items) in &forced {
            if *issued <= img.point {
                let t = c
                    .transactions
                    .iter()
                    .find(|t| t.tid == *tid)
                    .unwrap_or_else(|| panic!("{img}: forced checkpoint {tid:#x} lost ({st})"));
                same_items(t, items);
            }
        }
    })
    .unwrap();
    assert!(forced.iter().all(|f| f.0 > 0));
    eprintln!(
        "{threads} writer(s): {n} crash images ({} points x 4 modes), {} forced checkpoints",
        points.len(),
        forced.len()
    );
}

/// After a crash, a writer that continues the log (as a read-write mount
/// after recovery does) and unmounts must leave a clean log that ends at its
/// unmount record. Torn pieces of records cut by the crash lie ahead of the
/// recovered head with the current cycle; without clearing them first
/// (`clear_stale_blocks`), the next head search ran into them and found a
/// dirty log after the clean unmount (seen by `crash_workload`: seed 1016,
/// point 6, Torn; `xfs_repair -n` exit 1).
#[test]
fn continuing_after_a_crash_ends_clean() {
    use crate::bdev::{for_each_crash_image, CrashDevice, CrashMode};
    let bbs = 2048;
    let crash = Arc::new(CrashDevice::new(vec![0u8; bbs as usize * 512], 64 << 20));
    let lw = LogWriter::new(
        crash.clone(),
        cfg(bbs, 4, 16384, Lsn::new(1, 0)),
        Arc::new(NoPusher),
    )
    .unwrap();
    for k in 0..10u8 {
        let size = [100, 3000, 20_000, 40_000][k as usize % 4];
        let items = vec![item(k, &[size])];
        let l = lw.write_standalone_checkpoint(&items).unwrap();
        if k % 2 == 0 {
            lw.force(l.commit).unwrap();
        }
    }
    lw.close().unwrap();
    let points = crash.crash_points();
    let mut cleared = 0u64;
    let n = for_each_crash_image(&crash, &points, &CrashMode::EVERY, 0x5ca1e, |img| {
        let dev = img.device();
        let st = Log::from_parts(dev.as_ref(), Daddr(0), bbs, UUID)
            .unwrap()
            .find_state()
            .unwrap_or_else(|e| panic!("{img}: {e}"));
        let mut c = LogConfig::from_state(&st, UUID, 4, 16384);
        c.order = HostOrder::native();
        let lw = LogWriter::new(dev.clone(), c, Arc::new(NoPusher)).unwrap();
        cleared += lw.clear_stale_blocks().unwrap() as u64;
        let items = vec![item(0xee, &[700])];
        let l = lw.write_standalone_checkpoint(&items).unwrap();
        lw.force(l.commit).unwrap();
        let head = {
            lw.unmount_record().unwrap();
            lw.head()
        };
        lw.close().unwrap();
        let after = Log::from_parts(dev.as_ref(), Daddr(0), bbs, UUID)
            .unwrap()
            .find_state()
            .unwrap_or_else(|e| panic!("{img}: after the unmount: {e}"));
        assert!(
            after.clean && after.head == head,
            "{img}: recovered {st}, continued and unmounted at {head}; the log now reads {after}"
        );
    })
    .unwrap();
    eprintln!("{n} crash images continued and unmounted clean ({cleared} stale BBs cleared)");
}
