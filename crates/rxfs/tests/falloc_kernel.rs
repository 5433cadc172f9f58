//! fallocate modes and SEEK_DATA/SEEK_HOLE through a read-write rxfs
//! mount, against a byte model and against the kernel: the same
//! operations are applied by the kernel (`xfs_io falloc/fpunch/fzero/
//! fcollapse/finsert`) to a copy of the same image. Both images must pass
//! `xfs_repair -n`, read back as the model, and report the same
//! SEEK_DATA/SEEK_HOLE answers (kernel lseek on both images, and rxfs's
//! own seek_data/seek_hole).

mod common;

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;

use common::*;
use rand::{Rng, SeedableRng};
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::fs::ops_falloc::*;
use rxfs::types::Ino;
use rxfs::Filesystem;

const BS: u64 = 4096;

fn skip() -> bool {
    if kernel_tests_disabled() {
        return true;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_io"]);
    false
}

fn open_rw(img: &Path) -> Arc<Filesystem> {
    let dev: Arc<dyn BlockDevice> = Arc::new(FileDevice::open(img, false, false).unwrap());
    let opts = rxfs::MountOptions {
        read_only: false,
        ..Default::default()
    };
    Filesystem::open(dev, None, opts).unwrap()
}

fn repair_ok(img: &Path) {
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n {}: {}{}",
        img.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Alloc { keep: bool, off: u64, len: u64 },
    Punch { off: u64, len: u64 },
    Zero { keep: bool, off: u64, len: u64 },
    Collapse { off: u64, len: u64 },
    Insert { off: u64, len: u64 },
}

impl Op {
    fn xfs_io(&self) -> String {
        match *self {
            Op::Alloc { keep, off, len } => {
                format!("falloc {}{off} {len}", if keep { "-k " } else { "" })
            }
            Op::Punch { off, len } => format!("fpunch {off} {len}"),
            Op::Zero { keep, off, len } => {
                format!("fzero {}{off} {len}", if keep { "-k " } else { "" })
            }
            Op::Collapse { off, len } => format!("fcollapse {off} {len}"),
            Op::Insert { off, len } => format!("finsert {off} {len}"),
        }
    }

    fn rxfs(&self, fs: &Filesystem, ino: Ino) -> rxfs::Result<()> {
        let k = |keep: bool| if keep { FALLOC_FL_KEEP_SIZE } else { 0 };
        match *self {
            Op::Alloc { keep, off, len } => fs.fallocate(ino, k(keep), off, len),
            Op::Punch { off, len } => {
                fs.fallocate(ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len)
            }
            Op::Zero { keep, off, len } => {
                fs.fallocate(ino, FALLOC_FL_ZERO_RANGE | k(keep), off, len)
            }
            Op::Collapse { off, len } => fs.fallocate(ino, FALLOC_FL_COLLAPSE_RANGE, off, len),
            Op::Insert { off, len } => fs.fallocate(ino, FALLOC_FL_INSERT_RANGE, off, len),
        }
    }

    fn model(&self, m: &mut Vec<u8>) {
        let grow = |m: &mut Vec<u8>, end: u64| {
            if (m.len() as u64) < end {
                m.resize(end as usize, 0);
            }
        };
        match *self {
            Op::Alloc { keep, off, len } => {
                if !keep {
                    grow(m, off + len)
                }
            }
            Op::Punch { off, len }
            | Op::Zero {
                keep: true,
                off,
                len,
            } => {
                let a = (off as usize).min(m.len());
                let b = ((off + len) as usize).min(m.len());
                m[a..b].fill(0);
            }
            Op::Zero {
                keep: false,
                off,
                len,
            } => {
                grow(m, off + len);
                m[off as usize..(off + len) as usize].fill(0);
            }
            Op::Collapse { off, len } => {
                m.drain(off as usize..(off + len) as usize);
            }
            Op::Insert { off, len } => {
                let z = vec![0u8; len as usize];
                m.splice(off as usize..off as usize, z);
            }
        }
    }
}

/// A file made by the kernel before the images split: data blocks with
/// holes between, and a preallocated (unwritten) region partly written.
fn initial(mnt: &Path, name: &str, seed: u64) -> Vec<u8> {
    if name.starts_with("bt") {
        return initial_btree(mnt, name, seed);
    }
    let f = std::fs::File::create(mnt.join(name)).unwrap();
    let mut m = Vec::new();
    let mut put = |off: u64, d: &[u8]| {
        f.write_at(d, off).unwrap();
        let end = off as usize + d.len();
        if m.len() < end {
            m.resize(end, 0);
        }
        m[off as usize..end].copy_from_slice(d);
    };
    put(0, &pattern(seed, 20000));
    put(40960, &pattern(seed + 1, 8192));
    put(65536 + 100, &pattern(seed + 2, 30000));
    assert_eq!(
        unsafe { libc::fallocate(f.as_raw_fd(), FALLOC_FL_KEEP_SIZE, 120 * 1024, 64 * 1024) },
        0
    );
    put(130 * 1024, &pattern(seed + 3, 5000));
    put(200 * 1024 + 7, &pattern(seed + 4, 10000));
    f.sync_all().unwrap();
    m
}

/// A kernel-made file with a bmbt data fork: 300 blocks, one every other
/// block, the last 100 of them preallocated (unwritten) between.
fn initial_btree(mnt: &Path, name: &str, seed: u64) -> Vec<u8> {
    let f = std::fs::File::create(mnt.join(name)).unwrap();
    let mut m = Vec::new();
    for i in 0..300u64 {
        let d = pattern(seed + i, BS as usize);
        f.write_at(&d, 2 * i * BS).unwrap();
        m.resize((2 * i * BS) as usize, 0);
        m.extend_from_slice(&d);
    }
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            FALLOC_FL_KEEP_SIZE,
            (400 * BS) as i64,
            (200 * BS) as i64,
        )
    };
    assert_eq!(r, 0);
    f.sync_all().unwrap();
    m
}

/// SEEK_DATA and SEEK_HOLE answers at a set of offsets (errno on error).
type SeekMap = Vec<(u64, i64, i64)>;

fn probes(size: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut p = 0;
    while p < size + 2 * BS {
        v.push(p);
        v.push(p + 1000);
        p += BS;
    }
    v
}

fn kernel_seek(p: &Path) -> SeekMap {
    let f = std::fs::File::open(p).unwrap();
    let size = f.metadata().unwrap().size();
    let fd = f.as_raw_fd();
    let call = |pos: u64, wh: i32| {
        let r = unsafe { libc::lseek(fd, pos as i64, wh) };
        if r < 0 {
            -(std::io::Error::last_os_error().raw_os_error().unwrap() as i64)
        } else {
            r
        }
    };
    probes(size)
        .into_iter()
        .map(|pos| (pos, call(pos, libc::SEEK_DATA), call(pos, libc::SEEK_HOLE)))
        .collect()
}

fn rxfs_seek(fs: &Filesystem, ino: Ino, size: u64) -> SeekMap {
    let conv = |r: rxfs::Result<u64>| match r {
        Ok(v) => v as i64,
        Err(e) => -(e.errno() as i64),
    };
    probes(size)
        .into_iter()
        .map(|pos| {
            (
                pos,
                conv(fs.seek_data(ino, pos)),
                conv(fs.seek_hole(ino, pos)),
            )
        })
        .collect()
}

/// Operations of each file (same on both sides).
fn plans() -> Vec<(&'static str, Vec<Op>)> {
    use Op::*;
    let mut v = vec![
        (
            "alloc",
            vec![
                Alloc {
                    keep: false,
                    off: 300 * 1024,
                    len: 100 * 1024,
                },
                Alloc {
                    keep: true,
                    off: 10 * 1024,
                    len: 130 * 1024,
                },
                Alloc {
                    keep: true,
                    off: 500 * 1024,
                    len: 8192,
                },
            ],
        ),
        (
            "punch",
            vec![
                Punch {
                    off: 5000,
                    len: 65000,
                },
                Punch {
                    off: 200 * 1024,
                    len: 4096,
                },
                Punch {
                    off: 125 * 1024 + 5,
                    len: 20 * 1024,
                },
                Punch {
                    off: 1000,
                    len: 100,
                },
            ],
        ),
        (
            "zero",
            vec![
                Zero {
                    keep: false,
                    off: 3000,
                    len: 47000,
                },
                Zero {
                    keep: true,
                    off: 200 * 1024,
                    len: 100 * 1024,
                },
                Zero {
                    keep: false,
                    off: 250 * 1024 + 3,
                    len: 20 * 1024,
                },
            ],
        ),
        (
            "collapse",
            vec![
                Collapse {
                    off: 16384,
                    len: 32768,
                },
                Collapse { off: 0, len: 4096 },
                Collapse {
                    off: 100 * 1024,
                    len: 40 * 1024,
                },
            ],
        ),
        (
            "insert",
            vec![
                Insert {
                    off: 8192,
                    len: 16384,
                },
                Insert { off: 0, len: 4096 },
                Insert {
                    off: 128 * 1024,
                    len: 12 * 1024,
                },
            ],
        ),
    ];
    v.push((
        "btree",
        vec![
            Collapse {
                off: 8 * BS,
                len: 40 * BS,
            },
            Insert {
                off: 4 * BS,
                len: 60 * BS,
            },
            Punch {
                off: 100 * BS + 7,
                len: 200 * BS,
            },
            Zero {
                keep: true,
                off: 10 * BS,
                len: 300 * BS,
            },
            Alloc {
                keep: false,
                off: 600 * BS,
                len: 100 * BS,
            },
            Collapse {
                off: 0,
                len: 3 * BS,
            },
            Punch {
                off: 350 * BS,
                len: 300 * BS,
            },
        ],
    ));
    // Seeded random mixes: valid arguments only (aligned where required).
    for seed in 0..3u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut size = 200 * 1024 + 10007u64;
        let mut ops = Vec::new();
        for _ in 0..25 {
            let off = rng.gen_range(0..size + 20000);
            let len = rng.gen_range(1..60000);
            let keep = rng.gen_bool(0.5);
            let op = match rng.gen_range(0..5) {
                0 => Alloc { keep, off, len },
                1 => Punch { off, len },
                2 => Zero { keep, off, len },
                3 => {
                    let blocks = size / BS;
                    if blocks < 4 {
                        continue;
                    }
                    let o = rng.gen_range(0..blocks - 2);
                    let n = rng.gen_range(1..(blocks - o).min(10));
                    Collapse {
                        off: o * BS,
                        len: n * BS,
                    }
                }
                _ => {
                    let o = rng.gen_range(0..size / BS);
                    Insert {
                        off: o * BS,
                        len: rng.gen_range(1..10) * BS,
                    }
                }
            };
            size = match op {
                Alloc {
                    keep: false,
                    off,
                    len,
                }
                | Zero {
                    keep: false,
                    off,
                    len,
                } => size.max(off + len),
                Collapse { len, .. } => size - len,
                Insert { len, .. } => size + len,
                _ => size,
            };
            ops.push(op);
        }
        let name: &'static str = Box::leak(format!("random{seed}").into_boxed_str());
        v.push((name, ops));
    }
    v
}

/// Every mode, on kernel-made files, the kernel and rxfs side by side.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn falloc_modes_match_kernel() {
    if skip() {
        return;
    }
    let s = Scratch::new("falloc-modes");
    let img_k = s.path("kernel.img");
    let img_r = s.path("rxfs.img");
    mkfs_with(&img_k, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let plans = plans();
    let mut models = Vec::new();
    let mut inos = Vec::new();
    let m = KernelMount::new(&img_k, &mnt, "");
    for (i, (name, _)) in plans.iter().enumerate() {
        models.push(initial(&mnt, name, 10 * i as u64));
        inos.push(Ino(std::fs::metadata(mnt.join(name)).unwrap().ino()));
    }
    m.umount();
    std::fs::copy(&img_k, &img_r).unwrap();

    // Kernel side.
    let m = KernelMount::new(&img_k, &mnt, "");
    for (name, ops) in &plans {
        let p = mnt.join(name);
        for op in ops {
            let out = std::process::Command::new("xfs_io")
                .args(["-c", &op.xfs_io(), p.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(
                out.status.success() && out.stderr.is_empty() && out.stdout.is_empty(),
                "xfs_io {name} {op:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    m.umount();

    // rxfs side.
    let fs = open_rw(&img_r);
    for (i, (name, ops)) in plans.iter().enumerate() {
        for op in ops {
            op.rxfs(&fs, inos[i])
                .unwrap_or_else(|e| panic!("{name}: {op:?}: {e}"));
            op.model(&mut models[i]);
        }
    }
    let live: Vec<SeekMap> = plans
        .iter()
        .enumerate()
        .map(|(i, _)| rxfs_seek(&fs, inos[i], models[i].len() as u64))
        .collect();
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);

    repair_ok(&img_k);
    repair_ok(&img_r);
    let mk = s.path("mk");
    let mr = s.path("mr");
    let a = KernelMount::new(&img_k, &mk, "ro");
    let b = KernelMount::new(&img_r, &mr, "ro,nouuid");
    // Seeks first: no page cache yet (the kernel reports unwritten
    // extents that have cached pages as data).
    for (i, (name, _)) in plans.iter().enumerate() {
        let ks = kernel_seek(&mk.join(name));
        let rs = kernel_seek(&mr.join(name));
        assert_eq!(
            rs, ks,
            "{name}: SEEK_DATA/SEEK_HOLE, rxfs image vs kernel image"
        );
        assert_eq!(live[i], ks, "{name}: rxfs seek_data/seek_hole vs kernel");
    }
    for (i, (name, _)) in plans.iter().enumerate() {
        let want = &models[i];
        let kbytes = std::fs::read(mk.join(name)).unwrap();
        assert_eq!(kbytes.len(), want.len(), "{name}: kernel size vs model");
        assert!(
            kbytes == *want,
            "{name}: kernel bytes differ from the model"
        );
        let rbytes = std::fs::read(mr.join(name)).unwrap();
        assert_eq!(rbytes.len(), want.len(), "{name}: rxfs size vs model");
        assert!(rbytes == *want, "{name}: rxfs bytes differ from the model");
    }
    a.umount();
    b.umount();
}

/// Bad arguments are refused with the errno the kernel gives, and change
/// nothing; ENOSPC part way through a preallocation leaves the size and
/// contents as they were and a consistent filesystem.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn falloc_errors_and_enospc() {
    use rxfs::Error;
    if skip() {
        return;
    }
    let s = Scratch::new("falloc-enospc");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let mut model = initial(&mnt, "f", 77);
    std::fs::create_dir(mnt.join("d")).unwrap();
    let ino = Ino(std::fs::metadata(mnt.join("f")).unwrap().ino());
    let dino = Ino(std::fs::metadata(mnt.join("d")).unwrap().ino());
    m.umount();
    let fs = open_rw(&img);
    let size = model.len() as u64;
    let errno = |r: rxfs::Result<()>| r.map_err(|e| e.errno()).err();
    let cases: Vec<(i32, u64, u64, i32)> = vec![
        (FALLOC_FL_PUNCH_HOLE, 0, 4096, libc::EOPNOTSUPP),
        (0x40, 0, 4096, libc::EOPNOTSUPP),
        (0, 0, 0, libc::EINVAL),
        (FALLOC_FL_COLLAPSE_RANGE, 1000, 4096, libc::EINVAL),
        (FALLOC_FL_COLLAPSE_RANGE, 4096, 4000, libc::EINVAL),
        (
            FALLOC_FL_COLLAPSE_RANGE,
            0,
            size.div_ceil(BS) * BS,
            libc::EINVAL,
        ),
        (
            FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE,
            0,
            4096,
            libc::EINVAL,
        ),
        (
            FALLOC_FL_INSERT_RANGE,
            size.div_ceil(BS) * BS,
            4096,
            libc::EINVAL,
        ),
        (FALLOC_FL_INSERT_RANGE, 4096, 100, libc::EINVAL),
        (0, u64::MAX - 10, 100, libc::EINVAL),
    ];
    for (mode, off, len, want) in cases {
        assert_eq!(
            errno(fs.fallocate(ino, mode, off, len)),
            Some(want),
            "mode {mode:#x} {off}+{len}"
        );
    }
    assert!(matches!(fs.fallocate(dino, 0, 0, 4096), Err(Error::IsDir)));
    assert_eq!(fs.seek_data(ino, size).unwrap_err().errno(), libc::ENXIO);
    assert_eq!(
        fs.seek_hole(ino, size + 5).unwrap_err().errno(),
        libc::ENXIO
    );
    // More than the filesystem holds.
    let r = fs.fallocate(ino, 0, 1 << 20, 200 << 20);
    assert!(matches!(r, Err(Error::NoSpace)), "{r:?}");
    assert_eq!(
        fs.iget(ino).unwrap().core.size,
        size,
        "size changed by a failed fallocate"
    );
    let r = fs.fallocate(ino, FALLOC_FL_KEEP_SIZE, 300 << 20, 10 << 20);
    assert!(r.is_err(), "fallocate past the device end succeeded?");
    // The space comes back with a punch; the file is intact.
    fs.fallocate(
        ino,
        FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
        1 << 20,
        200 << 20,
    )
    .unwrap();
    fs.fallocate(ino, 0, size, 1 << 20).unwrap();
    model.resize(size as usize + (1 << 20), 0);
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    fs.unmount().unwrap();
    drop(fs);
    repair_ok(&img);
    let m = KernelMount::new(&img, &mnt, "ro");
    assert!(std::fs::read(mnt.join("f")).unwrap() == model, "contents");
    m.umount();
}

/// Power cuts during multi-transaction fallocate operations (collapse and
/// insert shift a bmbt-format file's mappings in steps, punch and zero
/// unmap in steps): after the kernel's and rxfs's log recovery the image
/// passes `xfs_repair -n` and the file reads without error; after the
/// last fsync it holds the model's bytes.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn falloc_survives_power_cuts() {
    use rxfs::bdev::{for_each_crash_image, sample_points, CrashDevice, CrashMode};
    if skip() {
        return;
    }
    let s = Scratch::new("falloc-crash");
    let img = s.path("img");
    mkfs_with(&img, 48 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let p = mnt.join("f");
    let mut model = Vec::new();
    {
        let fh = std::fs::File::create(&p).unwrap();
        for i in 0..300u64 {
            let d = pattern(i, BS as usize);
            fh.write_at(&d, 2 * i * BS).unwrap();
            model.resize((2 * i * BS) as usize, 0);
            model.extend_from_slice(&d);
        }
        fh.sync_all().unwrap();
    }
    let ino = Ino(std::fs::metadata(&p).unwrap().ino());
    m.umount();
    let dev = Arc::new(CrashDevice::new(std::fs::read(&img).unwrap(), 1 << 30));
    let opts = rxfs::MountOptions {
        read_only: false,
        ..Default::default()
    };
    let fs = Filesystem::open(dev.clone() as Arc<dyn BlockDevice>, None, opts).unwrap();
    use Op::*;
    let ops = [
        Collapse {
            off: 8 * BS,
            len: 40 * BS,
        },
        Insert {
            off: 4 * BS,
            len: 60 * BS,
        },
        Punch {
            off: 100 * BS + 7,
            len: 200 * BS,
        },
        Zero {
            keep: true,
            off: 10 * BS,
            len: 300 * BS,
        },
        Alloc {
            keep: false,
            off: 600 * BS,
            len: 100 * BS,
        },
        Collapse {
            off: 0,
            len: 3 * BS,
        },
    ];
    for op in ops {
        op.rxfs(&fs, ino).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        op.model(&mut model);
    }
    fs.fsync(ino, false).unwrap();
    let synced = dev.event_count();
    fs.abandon();
    drop(fs);
    let points = sample_points(&dev.crash_points(), 6, 5);
    let crash = s.path("crash");
    let cm = s.path("cmnt");
    let mut checked = 0;
    for_each_crash_image(
        &dev,
        &points,
        &[CrashMode::Subset, CrashMode::Torn],
        5,
        |ci| {
            std::fs::write(&crash, ci.to_vec()).unwrap();
            let m = KernelMount::new(&crash, &cm, "");
            let got = std::fs::read(cm.join("f")).unwrap();
            m.umount();
            if ci.point >= synced {
                assert!(got == model, "{ci}: after the fsync, contents differ");
            }
            repair_ok(&crash);
            std::fs::write(&crash, ci.to_vec()).unwrap();
            let fs = open_rw(&crash);
            let ip = fs.iget(ino).unwrap();
            let mut mine = vec![0u8; ip.core.size as usize];
            fs.read_file(&ip, 0, &mut mine).unwrap();
            fs.unmount().unwrap();
            drop(fs);
            repair_ok(&crash);
            checked += 1;
        },
    )
    .unwrap();
    assert_eq!(checked, points.len() * 2);
}
