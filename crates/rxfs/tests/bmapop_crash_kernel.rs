//! Crash consistency of file data written through a read-write mount: the
//! device records every write and flush ([`CrashDevice`]); at sampled
//! power-cut points the kernel recovers the image, `xfs_repair -n` is
//! clean, and every file (written append-only) holds a prefix of its final
//! contents: at least what the last fsync before the cut covered, never
//! bytes that were not written (data reaches the disk before the size and
//! mapping that expose it).

mod common;

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use common::*;
use rxfs::bdev::{for_each_crash_image, sample_points, BlockDevice, CrashDevice, CrashMode};
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

const FILES: usize = 3;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn appended_data_survives_power_cuts_in_order() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    use rand::{Rng, SeedableRng};
    let s = Scratch::new("bmapop-crash");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let mut inos = Vec::new();
    for i in 0..FILES {
        let p = mnt.join(format!("f{i}"));
        std::fs::write(&p, b"").unwrap();
        inos.push(Ino(std::fs::metadata(&p).unwrap().ino()));
    }
    m.umount();

    let dev = Arc::new(CrashDevice::new(std::fs::read(&img).unwrap(), 1 << 30));
    let fs = Filesystem::open(
        dev.clone() as Arc<dyn BlockDevice>,
        None,
        MountOptions {
            read_only: false,
            ..Default::default()
        },
    )
    .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); FILES];
    // (event count when fsync returned, file, size it made durable)
    let mut synced: Vec<(usize, usize, usize)> = Vec::new();
    for step in 0..40u64 {
        let f = rng.gen_range(0..FILES);
        let d = pattern(step + 1, rng.gen_range(1..150_000));
        let off = model[f].len() as u64;
        assert_eq!(fs.write(inos[f], off, &d).unwrap(), d.len());
        model[f].extend_from_slice(&d);
        if rng.gen_range(0..3) == 0 {
            fs.fsync(inos[f], false).unwrap();
            synced.push((dev.event_count(), f, model[f].len()));
        }
    }
    assert!(synced.len() >= 5, "only {} fsyncs", synced.len());
    fs.abandon();
    drop(fs);

    let points = sample_points(&dev.crash_points(), 6, 11);
    let mut checked = 0;
    let crash = s.path("crash");
    let cm = s.path("cmnt");
    for_each_crash_image(
        &dev,
        &points,
        &[CrashMode::Subset, CrashMode::Torn],
        5,
        |ci| {
            std::fs::write(&crash, ci.to_vec()).unwrap();
            let m = KernelMount::new(&crash, &cm, "");
            for (f, want) in model.iter().enumerate() {
                let got = std::fs::read(cm.join(format!("f{f}"))).unwrap();
                let durable = synced
                    .iter()
                    .filter(|(at, g, _)| *at <= ci.point && *g == f)
                    .map(|(_, _, n)| *n)
                    .max()
                    .unwrap_or(0);
                assert!(
                    got.len() >= durable && got.len() <= want.len(),
                    "{ci}: f{f} has {} bytes, fsync made {durable} durable, {} written",
                    got.len(),
                    want.len()
                );
                assert!(
                    got[..] == want[..got.len()],
                    "{ci}: f{f} is not a prefix of what was written"
                );
            }
            m.umount();
            let out = std::process::Command::new("xfs_repair")
                .args(["-n", crash.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{ci}: xfs_repair -n: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            checked += 1;
        },
    )
    .unwrap();
    assert_eq!(checked, points.len() * 2);
}
