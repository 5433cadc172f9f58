//! The checker's library API ([`rxfs::check::check`]) on kernel-made
//! images: a clean image gives no findings and reports progress through
//! every phase in order; a damaged image gives findings whose locations
//! point where the damage is; a dirty log is a finding of its own.
//! The CLI tests (`crates/rxfs-cli/tests/check.rs`) hold the comparison
//! with `xfs_repair -n` over many corruptions.

mod common;

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::*;
use rxfs::check::{check, Report};
use rxfs::{Filesystem, MountOptions};

fn open_norecovery(img: &Path) -> std::sync::Arc<Filesystem> {
    Filesystem::open_path(
        img,
        None,
        MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Run the check, recording the progress calls.
fn run(img: &Path) -> (Report, Vec<(String, u64, u64)>) {
    let fs = open_norecovery(img);
    let mut calls = Vec::new();
    let r = check(&fs, &mut |phase, done, total| {
        calls.push((phase.to_string(), done, total))
    });
    (r, calls)
}

/// A small kernel-made tree; returns the inode number of `f`.
fn make_image(s: &Scratch) -> (std::path::PathBuf, u64) {
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    std::fs::create_dir(m.dir.join("d")).unwrap();
    for i in 0..300 {
        std::fs::write(m.dir.join(format!("d/file-{i}")), pattern(i, 5000)).unwrap();
    }
    std::fs::write(m.dir.join("f"), b"f").unwrap();
    for i in 0..50 {
        set_xattr(&m.dir.join("f"), &format!("user.a{i}"), &pattern(i, 30));
    }
    let ino = std::fs::metadata(m.dir.join("f")).unwrap().ino();
    m.umount();
    (img, ino)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn clean_image_no_findings_and_ordered_progress() {
    require_root();
    let s = Scratch::new("check-api-clean");
    let (img, _) = make_image(&s);
    let (r, calls) = run(&img);
    assert!(r.clean(), "findings on a clean image: {:?}", r.findings);
    assert!(r.findings.is_empty());
    assert_eq!(r.stats.findings, 0);
    assert_eq!(r.stats.ags, 4);
    assert!(r.stats.inodes_used >= 303, "{:?}", r.stats);
    assert!(r.stats.xattrs >= 50, "{:?}", r.stats);
    assert!(r.stats.directories >= 2, "{:?}", r.stats);
    // Phases in order, each call within its bounds, ending with "done".
    let order = [
        "superblocks",
        "AG headers and btrees",
        "inodes",
        "directories",
        "space map",
        "realtime",
        "done",
    ];
    let mut at = 0;
    for (phase, done, total) in &calls {
        assert!(done <= total, "{phase}: {done} > {total}");
        let i = order
            .iter()
            .position(|p| p == phase)
            .unwrap_or_else(|| panic!("unknown phase {phase}"));
        assert!(i >= at, "phase {phase} after {}", order[at]);
        at = i;
    }
    assert_eq!(calls.last().map(|c| c.0.as_str()), Some("done"));
    assert_eq!(at, order.len() - 1);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn damaged_inode_is_located() {
    require_root();
    let s = Scratch::new("check-api-damage");
    let (img, ino) = make_image(&s);
    // Bump di_nlink (offset 16) of inode `f` and restamp its CRC.
    let fs = open_norecovery(&img);
    let (daddr, off) = fs.geo().ino_location(rxfs::types::Ino(ino));
    let isize = fs.geo().inodesize as usize;
    drop(fs);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&img)
        .unwrap();
    let mut buf = vec![0u8; isize];
    let pos = daddr.0 * 512 + off as u64;
    f.read_exact_at(&mut buf, pos).unwrap();
    let nlink = u32::from_be_bytes(buf[16..20].try_into().unwrap());
    buf[16..20].copy_from_slice(&(nlink + 3).to_be_bytes());
    rxfs::format::crc::update(&mut buf, rxfs::format::inode::DINODE_CRC_OFF);
    f.write_all_at(&buf, pos).unwrap();
    drop(f);
    let (r, _) = run(&img);
    let got: Vec<_> = r.findings.iter().map(|f| (f.code, f.ino)).collect();
    assert_eq!(got, vec![("inode-nlink", Some(ino))], "{:?}", r.findings);
    assert!(r.findings[0]
        .message
        .contains(&format!("nlink {}", nlink + 3)));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirty_log_is_a_finding() {
    require_root();
    let s = Scratch::new("check-api-dirty");
    let (img, _) = make_image(&s);
    {
        let m = KernelMount::new(&img, &s.path("mnt2"), "");
        std::fs::write(m.dir.join("new"), b"n").unwrap();
        // Forced to the log (not written back), then the log is cut off.
        run_retry("sync", &[], 1);
        std::fs::write(m.dir.join("newer"), b"n").unwrap();
        run_retry(
            "xfs_io",
            &["-x", "-c", "shutdown", m.dir.to_str().unwrap()],
            1,
        );
        m.umount();
    }
    let (r, _) = run(&img);
    assert!(
        r.findings.iter().any(|f| f.code == "log-dirty"),
        "{:?}",
        r.findings
    );
    // The superblock counters are stale while the log is dirty: not judged.
    assert!(!r.findings.iter().any(|f| f.code.starts_with("sb-")));
}

/// Metadata structures of a kernel-made image: (byte offset, length, CRC
/// offset), found by their magic numbers.
fn metadata_items(img: &[u8]) -> Vec<(usize, usize, usize)> {
    let short_btrees: [&[u8; 4]; 6] = [b"AB3B", b"AB3C", b"IAB3", b"FIB3", b"RMB3", b"R3FC"];
    let mut items = Vec::new();
    for off in (0..img.len()).step_by(4096) {
        let b = &img[off..off + 4096];
        let magic = &b[..4];
        let da_magic = u16::from_be_bytes([b[8], b[9]]);
        if magic == b"XFSB" {
            items.extend([
                (off, 512, 224),
                (off + 512, 512, 216),
                (off + 1024, 512, 312),
                (off + 1536, 512, 32),
            ]);
        } else if short_btrees.iter().any(|m| &m[..] == magic) {
            items.push((off, 4096, 52));
        } else if magic == b"BMA3" {
            items.push((off, 4096, 64));
        } else if [&b"XDB3"[..], b"XDD3", b"XDF3"].contains(&magic) {
            items.push((off, 4096, 4));
        } else if [0x3ebe, 0x3df1, 0x3dff, 0x3bee].contains(&da_magic) {
            items.push((off, 4096, 12));
        } else if &b[..2] == b"IN" && b[4] == 3 {
            for i in 0..8 {
                if &b[i * 512..i * 512 + 2] == b"IN" {
                    items.push((off + i * 512, 512, 100));
                }
            }
        }
    }
    items
}

/// Random damage to metadata structures, their CRCs restamped so the
/// structural checks see it: the checker never panics, and it reports
/// findings for most of the damage (a byte may also land where nothing
/// reads it). A failing seed is printed.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_metadata_damage_never_panics() {
    use rand::{Rng, SeedableRng};
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new("check-api-fuzz");
    let (img, _) = make_image(&s);
    let base = std::sync::Arc::new(std::fs::read(&img).unwrap());
    let items = metadata_items(&base);
    assert!(
        items.len() > 100,
        "only {} metadata structures",
        items.len()
    );
    let seeds = 150u64;
    let mut flagged = 0;
    for seed in 0..seeds {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dev = rxfs::bdev::CowDevice::new(base.clone());
        for _ in 0..rng.gen_range(1..=3) {
            let (off, len, crc_off) = items[rng.gen_range(0..items.len())];
            let mut buf = base[off..off + len].to_vec();
            for _ in 0..rng.gen_range(1..=4) {
                let p = rng.gen_range(0..len);
                buf[p] ^= 1 << rng.gen_range(0..8);
            }
            rxfs::format::crc::update(&mut buf, crc_off);
            rxfs::bdev::BlockDevice::write_at(&dev, &buf, off as u64).unwrap();
        }
        let opts = MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        };
        let r = std::panic::catch_unwind(|| {
            let dev: std::sync::Arc<dyn rxfs::bdev::BlockDevice> = std::sync::Arc::new(dev);
            match Filesystem::open(dev, None, opts) {
                Ok(fs) => check(&fs, &mut |_, _, _| {}).clean(),
                Err(_) => false, // unreadable primary superblock: `sb-bad`
            }
        });
        match r {
            Ok(clean) => flagged += !clean as u32,
            Err(_) => panic!("rxfs check panicked on damage seed {seed}"),
        }
    }
    eprintln!("{flagged} of {seeds} damaged images have findings");
    assert!(
        flagged as u64 > seeds / 2,
        "only {flagged} of {seeds} flagged"
    );
}
