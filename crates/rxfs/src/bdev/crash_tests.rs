//! Tests of the crash simulator against a simple model: a list of writes and
//! flushes replayed by hand.

use super::*;
use proptest::prelude::*;

const SECTORS: u64 = 48;
const IMG: usize = (SECTORS * SECTOR_SIZE) as usize;

#[derive(Debug, Clone)]
enum Op {
    /// Write `n` sectors at sector `s`.
    Write {
        s: u64,
        n: u64,
    },
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..SECTORS, 1u64..9).prop_map(|(s, n)| Op::Write { s, n: n.min(SECTORS - s) }),
        1 => Just(Op::Flush),
    ]
}

fn base() -> Vec<u8> {
    (0..IMG).map(|i| (i % 241) as u8).collect()
}

/// Data of write number `k`: every byte names the write (and its position),
/// so a crash image can show whose bytes it holds.
fn payload(k: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k * 37 + i / 512 + 1) as u8 | 1).collect()
}

/// Run `ops` on a crash device; return it with the writes as the model sees
/// them: (event index, offset, data).
fn run(ops: &[Op]) -> (CrashDevice, Vec<(usize, u64, Vec<u8>)>) {
    let dev = CrashDevice::new(base(), 1 << 30);
    let mut writes = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write { s, n } => {
                let data = payload(i, (n * SECTOR_SIZE) as usize);
                dev.write_at(&data, s * SECTOR_SIZE).unwrap();
                writes.push((i, s * SECTOR_SIZE, data));
            }
            Op::Flush => dev.flush().unwrap(),
        }
    }
    (dev, writes)
}

/// Writes of the unflushed window: (offset, data).
type Window = Vec<(u64, Vec<u8>)>;

/// The model: (durable image, live image, window writes) at `point`.
fn model(ops: &[Op], writes: &[(usize, u64, Vec<u8>)], point: usize) -> (Vec<u8>, Vec<u8>, Window) {
    let mut durable = base();
    let mut live = base();
    let mut pending: Window = Vec::new();
    for (i, op) in ops.iter().enumerate().take(point) {
        match op {
            Op::Write { .. } => {
                let (_, off, data) = writes.iter().find(|w| w.0 == i).unwrap();
                live[*off as usize..*off as usize + data.len()].copy_from_slice(data);
                pending.push((*off, data.clone()));
            }
            Op::Flush => {
                for (off, data) in pending.drain(..) {
                    durable[off as usize..off as usize + data.len()].copy_from_slice(&data);
                }
            }
        }
    }
    (durable, live, pending)
}

/// Every sector of `img` is its durable contents or the contents a window
/// write gave it.
fn check_sectors(
    img: &[u8],
    durable: &[u8],
    window: &[(u64, Vec<u8>)],
) -> std::result::Result<(), String> {
    for s in 0..SECTORS {
        let r = (s * SECTOR_SIZE) as usize..((s + 1) * SECTOR_SIZE) as usize;
        if img[r.clone()] == durable[r.clone()] {
            continue;
        }
        let from_window = window.iter().any(|(off, data)| {
            let (o, e) = (*off as usize, *off as usize + data.len());
            o <= r.start && r.end <= e && data[r.start - o..r.end - o] == img[r.clone()]
        });
        if !from_window {
            return Err(format!(
                "sector {s} holds bytes no write of the window gave it"
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn crash_images_match_the_model(ops in proptest::collection::vec(op(), 0..24), seed in any::<u64>()) {
        let (dev, writes) = run(&ops);
        prop_assert_eq!(dev.event_count(), ops.len());
        prop_assert_eq!(dev.live_image(), model(&ops, &writes, ops.len()).1);
        for p in dev.crash_points() {
            let (durable, live, window) = model(&ops, &writes, p);
            prop_assert_eq!(&dev.crash_image(p, CrashMode::Lost, seed).unwrap(), &durable);
            prop_assert_eq!(&dev.crash_image(p, CrashMode::All, seed).unwrap(), &live);
            for mode in [CrashMode::Subset, CrashMode::Torn] {
                let img = dev.crash_image(p, mode, seed).unwrap();
                check_sectors(&img, &durable, &window)
                    .map_err(|e| TestCaseError::fail(format!("point {p} {mode:?}: {e}")))?;
                // Deterministic.
                prop_assert_eq!(&img, &dev.crash_image(p, mode, seed).unwrap());
            }
        }
    }

    /// The cheap iteration gives exactly the images `crash_image` gives.
    #[test]
    fn iteration_matches_crash_image(ops in proptest::collection::vec(op(), 0..24), seed in any::<u64>()) {
        let (dev, _) = run(&ops);
        let points = dev.crash_points();
        let mut seen = Vec::new();
        let n = for_each_crash_image(&dev, &points, &CrashMode::EVERY, seed, |img| {
            seen.push((img.point, img.mode, img.seed, img.to_vec()));
        }).unwrap();
        prop_assert_eq!(n, points.len() * 4);
        for (p, mode, s, img) in seen {
            prop_assert_eq!(s, case_seed(seed, p, mode));
            prop_assert_eq!(img, dev.crash_image(p, mode, s).unwrap());
        }
    }

    /// Writes that do not start or end on a sector boundary: every byte of a
    /// crash image is durable or written in the window, and Lost/All hold.
    #[test]
    fn unaligned_writes(
        ops in proptest::collection::vec((0usize..IMG, 1usize..1500, any::<bool>()), 0..16),
        seed in any::<u64>(),
    ) {
        let dev = CrashDevice::new(base(), 1 << 30);
        let mut events: Vec<Option<(usize, Vec<u8>)>> = Vec::new();
        for (k, (off, len, flush)) in ops.into_iter().enumerate() {
            if flush {
                dev.flush().unwrap();
                events.push(None);
            } else {
                let len = len.min(IMG - off);
                let data = payload(k, len);
                dev.write_at(&data, off as u64).unwrap();
                events.push(Some((off, data)));
            }
        }
        for p in dev.crash_points() {
            let last_flush = events[..p].iter().rposition(|e| e.is_none()).map_or(0, |i| i + 1);
            let mut durable = base();
            for (off, data) in events[..last_flush].iter().flatten() {
                durable[*off..*off + data.len()].copy_from_slice(data);
            }
            prop_assert_eq!(&dev.crash_image(p, CrashMode::Lost, seed).unwrap(), &durable);
            for mode in [CrashMode::Subset, CrashMode::Torn] {
                let img = dev.crash_image(p, mode, seed).unwrap();
                for (i, &b) in img.iter().enumerate() {
                    let ok = b == durable[i]
                        || events[last_flush..p].iter().flatten().any(|(off, data)| {
                            (*off..*off + data.len()).contains(&i) && data[i - off] == b
                        });
                    prop_assert!(ok, "point {} {:?}: byte {} invented", p, mode, i);
                }
            }
        }
    }
}

#[test]
fn subset_and_torn_produce_the_states_between() {
    // One flush, then four 8-sector writes to separate places.
    let dev = CrashDevice::new(vec![0u8; 1 << 16], 1 << 20);
    dev.write_at(&[0xaa; 512], 0).unwrap();
    dev.flush().unwrap();
    for k in 0..4u64 {
        dev.write_at(&vec![0x10 + k as u8; 4096], 4096 + k * 8192)
            .unwrap();
    }
    let p = dev.event_count();
    let lost = dev.crash_image(p, CrashMode::Lost, 0).unwrap();
    let all = dev.crash_image(p, CrashMode::All, 0).unwrap();
    assert_eq!(lost[..512], [0xaa; 512], "durable write missing");
    assert_ne!(lost, all);
    let (mut partial_subset, mut torn_write) = (false, false);
    for seed in 0..200 {
        let s = dev.crash_image(p, CrashMode::Subset, seed).unwrap();
        partial_subset |= s != lost && s != all;
        let t = dev.crash_image(p, CrashMode::Torn, seed).unwrap();
        for k in 0..4usize {
            let w = &t[4096 + k * 8192..4096 + k * 8192 + 4096];
            let new = w.chunks(512).filter(|c| c[0] == 0x10 + k as u8).count();
            torn_write |= new > 0 && new < 8;
        }
    }
    assert!(partial_subset, "Subset never kept part of the window");
    assert!(torn_write, "Torn never tore a write");
}

#[test]
fn crash_points_skip_repeated_flushes() {
    let dev = CrashDevice::new(base(), 1 << 20);
    dev.write_at(&[1; 512], 0).unwrap();
    dev.flush().unwrap();
    dev.flush().unwrap();
    dev.flush().unwrap();
    dev.write_at(&[2; 512], 512).unwrap();
    assert_eq!(dev.crash_points(), vec![0, 1, 2, 5]);
    assert!(dev.crash_image(6, CrashMode::Lost, 0).is_err());
    assert!(dev.crash_plan(6, CrashMode::All, 0).is_err());
    assert_eq!(dev.crash_plan(5, CrashMode::All, 0).unwrap().len(), 1);
    assert!(for_each_crash_image(&dev, &[7], &[CrashMode::All], 0, |_| {}).is_err());
}

#[test]
fn recording_cap_refuses_without_applying() {
    let dev = CrashDevice::new(vec![0u8; 8192], 4096);
    dev.write_at(&[1; 2048], 0).unwrap();
    let e = dev.write_at(&[2; 2048], 2048).unwrap_err();
    assert_eq!(e.errno(), libc::ENOBUFS);
    assert!(matches!(e, Error::Io { .. }));
    assert_eq!(dev.event_count(), 1);
    let mut b = [0u8; 1];
    dev.read_at(&mut b, 2048).unwrap();
    assert_eq!(b[0], 0, "a refused write reached the live image");
    // Out of range is EIO, also not recorded.
    assert_eq!(dev.write_at(&[1; 16], 8190).unwrap_err().errno(), libc::EIO);
    assert_eq!(dev.event_count(), 1);
}

#[test]
fn rebase_keeps_the_window_and_frees_the_prefix() {
    let dev = CrashDevice::new(vec![0u8; 4096], 1 << 20);
    dev.write_at(&[1; 1024], 0).unwrap();
    dev.flush().unwrap();
    dev.write_at(&[2; 512], 1024).unwrap();
    let before: Vec<Vec<u8>> = CrashMode::EVERY
        .iter()
        .map(|&m| dev.crash_image(3, m, 5).unwrap())
        .collect();
    dev.rebase();
    assert_eq!(dev.event_count(), 1);
    assert_eq!(dev.recorded_bytes(), 512 + EVENT_OVERHEAD);
    for (i, &m) in CrashMode::EVERY.iter().enumerate() {
        assert_eq!(dev.crash_image(1, m, 5).unwrap(), before[i], "{m:?}");
    }
    assert_eq!(
        dev.crash_image(0, CrashMode::Lost, 0).unwrap()[..1024],
        [1; 1024]
    );
}

#[test]
fn iteration_shares_the_durable_image() {
    let dev = CrashDevice::new(vec![0u8; 1 << 20], 1 << 20);
    for k in 0..10u64 {
        dev.write_at(&[k as u8 + 1; 4096], k * 4096).unwrap();
        if k % 3 == 2 {
            dev.flush().unwrap();
        }
    }
    let mut max_dirty = 0;
    let n = for_each_crash_image(&dev, &dev.crash_points(), &CrashMode::EVERY, 1, |img| {
        max_dirty = max_dirty.max(img.device().dirty_sectors());
    })
    .unwrap();
    assert_eq!(n, dev.crash_points().len() * 4);
    // At most three 4 KiB writes are ever unflushed: 24 sectors.
    assert!(max_dirty <= 24, "{max_dirty} dirty sectors");
    assert_eq!(sample_points(&[1, 2, 3], 5, 0), vec![1, 2, 3]);
    let s = sample_points(&(0..100).collect::<Vec<_>>(), 10, 3);
    assert_eq!(s.len(), 10);
    assert!(s.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn many_threads_record_one_consistent_stream() {
    let dev = Arc::new(CrashDevice::new(vec![0u8; 1 << 16], 1 << 20));
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    let off = (t as u64 * 50 + i) % 128 * 512;
                    dev.write_at(&[t + 1; 512], off).unwrap();
                    if i % 10 == 9 {
                        dev.flush().unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(dev.event_count(), 4 * 55);
    let end = dev.event_count();
    assert_eq!(
        dev.crash_image(end, CrashMode::All, 0).unwrap(),
        dev.live_image()
    );
    // The last flush covers everything before it, whichever thread wrote it.
    let last_flush = dev.events().iter().rposition(|e| matches!(e, Event::Flush));
    assert_eq!(
        dev.crash_image(last_flush.unwrap() + 1, CrashMode::Lost, 0)
            .unwrap(),
        dev.crash_image(last_flush.unwrap() + 1, CrashMode::All, 0)
            .unwrap()
    );
}
