//! Data fork editing (`rxfs::bmap`) against the kernel oracle: files the
//! kernel wrote are extended, overwritten, converted from unwritten and
//! truncated through unlogged transactions ([`MemTx`]); then `xfs_repair
//! -n` must find nothing, and both the kernel and rxfs's read path must
//! read exactly the bytes of an in-memory model (sha256 and length).

mod common;

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::bmap::data::SetAttr;
use rxfs::bmap::{self, data};
use rxfs::format::dinode_edit as di;
use rxfs::recover::memtx::MemTx;
use rxfs::types::{FileBlock, FsBlock, Ino};
use rxfs::xact::{InodeId, MetaTx};
use rxfs::{Filesystem, MountOptions};
use sha2::{Digest, Sha256};

struct Img {
    s: Scratch,
    img: PathBuf,
    /// name -> (inode number, expected contents)
    files: BTreeMap<String, (Ino, Vec<u8>)>,
}

/// Files the kernel writes: empty, small, big (3 MiB), sparse (4 KiB
/// every 8 KiB, `sparse_n` times), prealloc (64 KiB fallocated =
/// unwritten, with 1000 bytes written at 10000).
fn populate(name: &str, sparse_n: u64) -> Img {
    let s = Scratch::new(name);
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let mut files = BTreeMap::new();
    let mut put = |n: &str, content: Vec<u8>| {
        let p = mnt.join(n);
        let ino = Ino(std::fs::metadata(&p).unwrap().ino());
        files.insert(n.to_string(), (ino, content));
    };
    std::fs::write(mnt.join("empty"), b"").unwrap();
    put("empty", vec![]);
    std::fs::write(mnt.join("small"), pattern(1, 5000)).unwrap();
    put("small", pattern(1, 5000));
    std::fs::write(mnt.join("big"), pattern(2, 3 << 20)).unwrap();
    put("big", pattern(2, 3 << 20));
    let f = std::fs::File::create(mnt.join("sparse")).unwrap();
    let mut model = Vec::new();
    for i in 0..sparse_n {
        let d = pattern(10 + i, 4096);
        f.write_at(&d, i * 8192).unwrap();
        write_model(&mut model, i * 8192, &d);
    }
    drop(f);
    put("sparse", model);
    let f = std::fs::File::create(mnt.join("prealloc")).unwrap();
    assert_eq!(unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 65536) }, 0);
    let d = pattern(3, 1000);
    f.write_at(&d, 10000).unwrap();
    drop(f);
    let mut model = vec![0u8; 65536];
    write_model(&mut model, 10000, &d);
    put("prealloc", model);
    m.umount();
    Img { s, img, files }
}

fn write_model(m: &mut Vec<u8>, off: u64, d: &[u8]) {
    let end = off as usize + d.len();
    if m.len() < end {
        m.resize(end, 0);
    }
    m[off as usize..end].copy_from_slice(d);
}

fn open_dev(img: &Path) -> Arc<dyn BlockDevice> {
    Arc::new(FileDevice::open(img, false, false).unwrap())
}

/// Run `f` on inode `ino` in one MemTx; commit only if it succeeds.
fn in_tx<T>(
    dev: &Arc<dyn BlockDevice>,
    ino: Ino,
    f: impl FnOnce(&mut MemTx, InodeId) -> rxfs::Result<T>,
) -> rxfs::Result<T> {
    let mut tx = MemTx::new(dev.clone())?;
    let ip = tx.ijoin(ino)?;
    let r = f(&mut tx, ip)?;
    tx.commit()?;
    Ok(r)
}

/// Write all of `d` at `off` in bounded steps, one transaction each.
/// Returns the transaction count, or the bytes committed before an error.
fn write_all(
    dev: &Arc<dyn BlockDevice>,
    ino: Ino,
    off: u64,
    d: &[u8],
) -> Result<u32, (usize, rxfs::Error)> {
    let mut done = 0usize;
    let mut txs = 0;
    while done < d.len() {
        let n = in_tx(dev, ino, |tx, ip| {
            data::write_step(
                tx,
                &**dev,
                ip,
                ino,
                off + done as u64,
                &d[done..],
                data::WriteOpts::now(),
            )
        })
        .map_err(|e| (done, e))?;
        assert!(n > 0);
        done += n;
        txs += 1;
    }
    Ok(txs)
}

impl Img {
    fn ino(&self, n: &str) -> Ino {
        self.files[n].0
    }
    fn model(&mut self, n: &str) -> &mut Vec<u8> {
        &mut self.files.get_mut(n).unwrap().1
    }

    /// Write through bmapop and into the model.
    fn write(&mut self, dev: &Arc<dyn BlockDevice>, n: &str, off: u64, d: &[u8]) -> u32 {
        let txs = write_all(dev, self.ino(n), off, d)
            .map_err(|e| e.1)
            .unwrap();
        write_model(self.model(n), off, d);
        txs
    }

    fn truncate(&mut self, dev: &Arc<dyn BlockDevice>, n: &str, size: u64) {
        in_tx(dev, self.ino(n), |tx, ip| {
            data::set_file_size(tx, &**dev, ip, size)
        })
        .unwrap();
        self.model(n).resize(size as usize, 0);
    }

    /// xfs_repair -n clean; the kernel and rxfs read the model's bytes.
    fn verify(&self) {
        let out = std::process::Command::new("xfs_repair")
            .args(["-n", self.img.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "xfs_repair -n: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mnt = self.s.path("ro");
        let m = KernelMount::new(&self.img, &mnt, "ro");
        for (n, (_, want)) in &self.files {
            let got = std::fs::read(mnt.join(n)).unwrap();
            assert_eq!(got.len(), want.len(), "{n}: kernel size");
            assert_eq!(sha(&got), sha(want), "{n}: kernel contents");
        }
        m.umount();
        let fs = open_ro(&self.img);
        for (n, (ino, want)) in &self.files {
            let ip = fs.iget(*ino).unwrap();
            let mut got = vec![0u8; want.len() + 4096];
            let k = fs.read_file(&ip, 0, &mut got).unwrap();
            assert_eq!(k, want.len(), "{n}: rxfs size");
            assert_eq!(sha(&got[..k]), sha(want), "{n}: rxfs contents");
        }
    }
}

fn sha(d: &[u8]) -> [u8; 32] {
    Sha256::digest(d).into()
}

fn nextents(dev: &Arc<dyn BlockDevice>, ino: Ino) -> u64 {
    let mut tx = MemTx::new(dev.clone()).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    di::nextents(tx.inode(ip))
}

fn skip() -> bool {
    if kernel_tests_disabled() {
        return true;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    false
}

/// No allocation: in-place overwrites (partial blocks), writes into
/// unwritten extents (converted), size growth inside mapped blocks.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn overwrite_and_convert_unwritten() {
    if skip() {
        return;
    }
    let mut im = populate("bmapop-overwrite", 3);
    let dev = open_dev(&im.img);
    im.write(&dev, "big", 1000, &pattern(20, 7000));
    im.write(&dev, "big", (3 << 20) - 10, &pattern(21, 10));
    im.write(&dev, "small", 4000, &pattern(22, 1000));
    let before = nextents(&dev, im.ino("prealloc"));
    im.write(&dev, "prealloc", 30000, &pattern(23, 10000));
    im.write(&dev, "prealloc", 0, &pattern(24, 100));
    assert!(nextents(&dev, im.ino("prealloc")) >= before);
    im.write(&dev, "sparse", 100, &pattern(25, 300));
    im.verify();
}

/// Growing files (allocation, several transactions for a large write,
/// zeroed gaps), the direct alloc_range path, truncation (tail zeroing,
/// freeing), growth by setattr, and chown dropping setuid.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn extend_and_punch_tail() {
    if skip() {
        return;
    }
    let mut im = populate("bmapop-extend", 3);
    let dev = open_dev(&im.img);
    let bs = 4096u64;
    im.write(&dev, "small", 5000, &pattern(30, 10000));
    im.write(&dev, "small", 100_000, &pattern(31, 3000));
    // A write of 6 MiB: 1536 blocks, more than one transaction.
    let txs = im.write(&dev, "empty", 0, &pattern(32, 6 << 20));
    assert!(txs >= 2, "{txs} transactions");
    // Sparse: fill a hole, then append past a gap.
    im.write(&dev, "sparse", 4096, &pattern(33, 4096));
    im.write(&dev, "sparse", 200_000, &pattern(34, 5000));
    // The direct path: alloc_range, data to the mapped daddrs, set_size.
    let ino = im.ino("prealloc");
    let d = pattern(35, 10 * bs as usize);
    let base = 1 << 20;
    in_tx(&dev, ino, |tx, ip| {
        let new = bmap::alloc_range(tx, ip, ino, FileBlock(base / bs), 10)?;
        assert_eq!(new.iter().map(|e| e.len).sum::<u64>(), 10);
        for e in &new {
            let at = tx.geo().fsb_to_daddr(FsBlock(e.start)).bytes();
            let s = ((e.off.0 - base / bs) * bs) as usize;
            dev.write_at(&d[s..s + (e.len * bs) as usize], at)?;
        }
        bmap::set_size(tx, ip, base + d.len() as u64 - 100);
        Ok(())
    })
    .unwrap();
    write_model(im.model("prealloc"), base, &d[..d.len() - 100]);
    // Truncations: mid-block (tail zeroed), then grow again (zeros).
    im.truncate(&dev, "big", 1_000_001);
    im.truncate(&dev, "big", 2_000_000);
    im.truncate(&dev, "small", 0);
    im.write(&dev, "small", 3, &pattern(36, 5));
    im.truncate(&dev, "prealloc", 70_000);
    // chown of a setuid file drops setuid.
    let ino = im.ino("sparse");
    in_tx(&dev, ino, |tx, ip| {
        let a = SetAttr {
            mode: Some(0o4755),
            ..Default::default()
        };
        data::setattr(tx, &*dev, ip, &a, data::now())
    })
    .unwrap();
    in_tx(&dev, ino, |tx, ip| {
        let a = SetAttr {
            uid: Some(1234),
            gid: Some(99),
            ..Default::default()
        };
        data::setattr(tx, &*dev, ip, &a, data::now())
    })
    .unwrap();
    im.verify();
    let fs = open_ro(&im.img);
    let ip = fs.iget(ino).unwrap();
    assert_eq!((ip.core.uid, ip.core.gid), (1234, 99));
    assert_eq!(ip.core.mode & 0o7777, 0o755);
    let ip = fs.iget(im.ino("big")).unwrap();
    assert_eq!(ip.core.nblocks, 1_000_001u64.div_ceil(bs));
}

/// More extents than the inode's literal area holds: the fork becomes a
/// bmbt (BTREE format) and every write succeeds; the image stays
/// consistent. (Before issue 4 these writes were refused.)
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn many_extents_become_btree() {
    if skip() {
        return;
    }
    let mut im = populate("bmapop-limit", 10);
    let dev = open_dev(&im.img);
    let ino = im.ino("sparse");
    // Fill holes one block at a time, back to front, each from a far
    // away place: every fill is a new extent.
    for i in (0..10u64).rev() {
        let off = i * 8192 + 4096;
        let d = pattern(40 + i, 4096);
        in_tx(&dev, ino, |tx, ip| {
            data::write_step(tx, &*dev, ip, ino, off, &d, data::WriteOpts::now())
        })
        .unwrap();
        write_model(im.model("sparse"), off, &d);
    }
    // Past EOF, far away: more extents than fit inline.
    for i in 0..30u64 {
        let off = (1 << 22) + i * 65536;
        let d = pattern(60 + i, 100);
        in_tx(&dev, ino, |tx, ip| {
            data::write_step(tx, &*dev, ip, ino, off, &d, data::WriteOpts::now())
        })
        .unwrap();
        write_model(im.model("sparse"), off, &d);
    }
    let mut tx = MemTx::new(dev.clone()).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    assert_eq!(di::format(tx.inode(ip)), rxfs::format::inode::FMT_BTREE);
    drop(tx);
    im.verify();
}

/// Seeded random writes and size changes over all files, against the
/// model; a write refused for the extent limit changes nothing.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_workload_matches_model() {
    if skip() {
        return;
    }
    use rand::{Rng, SeedableRng};
    for seed in 0..3u64 {
        let mut im = populate(&format!("bmapop-random{seed}"), 4);
        let dev = open_dev(&im.img);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let names: Vec<String> = im.files.keys().cloned().collect();
        let (mut writes, mut refused) = (0, 0);
        for step in 0..60 {
            let n = &names[rng.gen_range(0..names.len())];
            let size = im.files[n].1.len() as u64;
            match rng.gen_range(0..6) {
                0 => {
                    let to = rng.gen_range(0..size + 1);
                    im.truncate(&dev, n, to);
                }
                1 => {
                    let to = size + rng.gen_range(0..200_000);
                    im.truncate(&dev, n, to);
                }
                _ => {
                    // Mostly near the end, sometimes anywhere up to 8 MiB.
                    let off = if rng.gen_bool(0.5) {
                        size.saturating_sub(rng.gen_range(0..10_000))
                    } else {
                        rng.gen_range(0..8 << 20)
                    };
                    let len = rng.gen_range(1..300_000);
                    let d = pattern(seed * 1000 + step, len);
                    match write_all(&dev, im.ino(n), off, &d) {
                        Ok(_) => {
                            write_model(im.model(n), off, &d);
                            writes += 1;
                        }
                        Err((done, rxfs::Error::NotSupported(m))) if m.contains("btree") => {
                            // The steps before the refused one committed.
                            if done > 0 {
                                write_model(im.model(n), off, &d[..done]);
                            }
                            refused += 1;
                        }
                        Err((_, e)) => panic!("seed {seed} step {step}: {e}"),
                    }
                }
            }
        }
        eprintln!("seed {seed}: {writes} writes, {refused} refused");
        assert!(
            writes > 20,
            "seed {seed}: only {writes} writes went through"
        );
        im.verify();
    }
}

fn open_rw(img: &Path) -> Arc<Filesystem> {
    Filesystem::open_path(
        img,
        None,
        MountOptions {
            read_only: false,
            ..Default::default()
        },
    )
    .unwrap()
}

/// What rxfs's own read path of the mounted filesystem reads.
fn read_back(fs: &Filesystem, ino: Ino) -> Vec<u8> {
    let ip = fs.iget(ino).unwrap();
    let mut got = vec![0u8; ip.core.size as usize + 4096];
    let k = fs.read_file(&ip, 0, &mut got).unwrap();
    got.truncate(k);
    got
}

/// The same operations through a read-write mount: `Filesystem::write`,
/// `setattr` (truncate, grow, chown), `fsync`; the mounted read path sees
/// every change at once; after unmount the kernel and xfs_repair agree.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn filesystem_write_setattr_fsync() {
    if skip() {
        return;
    }
    let mut im = populate("bmapop-fs", 3);
    let fs = open_rw(&im.img);
    let bs = 4096u64;
    let w = |im: &mut Img, n: &str, off: u64, d: &[u8]| {
        assert_eq!(fs.write(im.ino(n), off, d).unwrap(), d.len());
        write_model(im.model(n), off, d);
        assert_eq!(sha(&read_back(&fs, im.ino(n))), sha(&im.files[n].1), "{n}");
    };
    w(&mut im, "small", 5000, &pattern(50, 10000));
    w(&mut im, "small", 100_000, &pattern(51, 3000));
    w(&mut im, "empty", 0, &pattern(52, 6 << 20));
    w(&mut im, "sparse", 4096, &pattern(53, 4096));
    w(&mut im, "prealloc", 30000, &pattern(54, 10000));
    w(&mut im, "big", 12345, &pattern(55, 70000));
    let setsize = |im: &mut Img, n: &str, size: u64| {
        let ip = fs
            .setattr(
                im.ino(n),
                &SetAttr {
                    size: Some(size),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(ip.core.size, size);
        im.model(n).resize(size as usize, 0);
        assert_eq!(sha(&read_back(&fs, im.ino(n))), sha(&im.files[n].1), "{n}");
    };
    setsize(&mut im, "big", 1_000_001);
    setsize(&mut im, "big", 2_000_000);
    setsize(&mut im, "prealloc", 20_000);
    let ino = im.ino("sparse");
    fs.setattr(
        ino,
        &SetAttr {
            mode: Some(0o6775),
            ..Default::default()
        },
    )
    .unwrap();
    let ip = fs
        .setattr(
            ino,
            &SetAttr {
                uid: Some(4321),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        ip.core.mode & 0o7777,
        0o775,
        "chown drops setuid and setgid (g+x)"
    );
    assert_eq!(ip.core.uid, 4321);
    for n in im.files.keys() {
        fs.fsync(im.files[n].0, false).unwrap();
    }
    // Directories are not written as files.
    assert!(matches!(
        fs.write(fs.root_ino(), 0, b"x"),
        Err(rxfs::Error::IsDir)
    ));
    let big = fs.iget(im.ino("big")).unwrap();
    assert_eq!(big.core.nblocks, 1_000_001u64.div_ceil(bs));
    fs.unmount().unwrap();
    drop(fs);
    im.verify();
}

/// The seeded random workload through a read-write mount, checked after
/// unmount.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn filesystem_random_workload() {
    if skip() {
        return;
    }
    use rand::{Rng, SeedableRng};
    for seed in 0..2u64 {
        let mut im = populate(&format!("bmapop-fsrandom{seed}"), 4);
        let fs = open_rw(&im.img);
        let mut rng = rand::rngs::StdRng::seed_from_u64(100 + seed);
        let names: Vec<String> = im.files.keys().cloned().collect();
        let mut writes = 0;
        for step in 0..60 {
            let n = &names[rng.gen_range(0..names.len())];
            let ino = im.ino(n);
            let size = im.files[n].1.len() as u64;
            match rng.gen_range(0..6) {
                0 | 1 => {
                    let to = if rng.gen_bool(0.5) {
                        rng.gen_range(0..size + 1)
                    } else {
                        size + rng.gen_range(0..200_000)
                    };
                    let a = SetAttr {
                        size: Some(to),
                        ..Default::default()
                    };
                    fs.setattr(ino, &a).unwrap();
                    im.model(n).resize(to as usize, 0);
                }
                _ => {
                    let off = if rng.gen_bool(0.5) {
                        size.saturating_sub(rng.gen_range(0..10_000))
                    } else {
                        rng.gen_range(0..8 << 20)
                    };
                    let d = pattern(seed * 1000 + step, rng.gen_range(1..300_000));
                    match fs.write(ino, off, &d) {
                        Ok(k) => {
                            write_model(im.model(n), off, &d[..k]);
                            writes += 1;
                        }
                        Err(rxfs::Error::NotSupported(m)) if m.contains("btree") => {}
                        Err(e) => panic!("seed {seed} step {step}: {e}"),
                    }
                }
            }
            if step % 10 == 0 {
                fs.fsync(ino, false).unwrap();
            }
            assert_eq!(
                sha(&read_back(&fs, ino)),
                sha(&im.files[n].1),
                "seed {seed} step {step}: {n} read back"
            );
        }
        assert!(writes > 20, "seed {seed}: only {writes} writes");
        fs.unmount().unwrap();
        drop(fs);
        im.verify();
    }
}

/// Filling the filesystem: a write larger than the free space is cut
/// short at ENOSPC (earlier transactions stay), the next write fails with
/// NoSpace, a truncate gives the space back (busy until its checkpoint is
/// on disk; the allocator forces the log), and the image is consistent.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn filesystem_enospc_short_write_then_truncate() {
    if skip() {
        return;
    }
    let s = Scratch::new("bmapop-enospc");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::write(mnt.join("fill"), b"").unwrap();
    let ino = Ino(std::fs::metadata(mnt.join("fill")).unwrap().ino());
    m.umount();
    let fs = open_rw(&img);
    let free = fs.statfs().unwrap().bfree;
    let d = pattern(70, 80 << 20);
    let n = fs.write(ino, 0, &d).unwrap();
    assert!(n > 0 && n < d.len(), "wrote {n} of {}", d.len());
    // The write filled the space (AGFL minimums and btree blocks aside,
    // and the small reserve data allocations leave to bmbt splits).
    let reserve =
        4 * rxfs::fs::ops_falloc::DATA_RESERVE_PER_AG + rxfs::fs::ops_falloc::DATA_RESERVE_MIN;
    assert!(
        n as u64 / 4096 + 64 + reserve >= free,
        "wrote {n} bytes, {free} blocks were free"
    );
    let r = fs.write(ino, n as u64, &d[..1 << 20]);
    assert!(matches!(
        r,
        Err(rxfs::Error::NoSpace) | Err(rxfs::Error::NotSupported(_))
    ));
    assert_eq!(sha(&read_back(&fs, ino)), sha(&d[..n]));
    let keep = 1_000_000u64;
    fs.setattr(
        ino,
        &SetAttr {
            size: Some(keep),
            ..Default::default()
        },
    )
    .unwrap();
    let more = pattern(71, 4 << 20);
    assert_eq!(fs.write(ino, keep, &more).unwrap(), more.len());
    let mut want = d[..keep as usize].to_vec();
    want.extend_from_slice(&more);
    assert_eq!(sha(&read_back(&fs, ino)), sha(&want));
    fs.unmount().unwrap();
    drop(fs);
    let im = Img {
        s,
        img,
        files: [("fill".to_string(), (ino, want))].into_iter().collect(),
    };
    im.verify();
}

/// Several threads writing and truncating their own files at once through
/// one mount (inode locks, AGF lock order, shared log); a watchdog turns a
/// deadlock into a failure.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn filesystem_concurrent_writers() {
    if skip() {
        return;
    }
    use rand::{Rng, SeedableRng};
    let s = Scratch::new("bmapop-threads");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let mut files = BTreeMap::new();
    for t in 0..4 {
        let n = format!("t{t}");
        std::fs::write(mnt.join(&n), b"").unwrap();
        let ino = Ino(std::fs::metadata(mnt.join(&n)).unwrap().ino());
        files.insert(n, (ino, Vec::<u8>::new()));
    }
    m.umount();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dog = {
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..600 {
                std::thread::sleep(std::time::Duration::from_millis(200));
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
            }
            eprintln!("concurrent writers: no progress in 120 s (deadlock?)");
            std::process::abort();
        })
    };
    let fs = open_rw(&img);
    let models: Vec<(String, Ino, Vec<u8>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(t, (n, (ino, _)))| {
                let fs = &fs;
                sc.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64);
                    let mut model = Vec::new();
                    for step in 0..40u64 {
                        if rng.gen_range(0..8) == 0 {
                            let to = rng.gen_range(0..model.len() as u64 + 1);
                            let a = SetAttr {
                                size: Some(to),
                                ..Default::default()
                            };
                            fs.setattr(*ino, &a).unwrap();
                            model.resize(to as usize, 0);
                        } else {
                            let off = rng.gen_range(0..model.len() as u64 + 50_000);
                            let d = pattern(t as u64 * 100 + step, rng.gen_range(1..400_000));
                            // Interleaving decides the layout: the
                            // extent limit may refuse a write (or its end).
                            match fs.write(*ino, off, &d) {
                                Ok(k) => write_model(&mut model, off, &d[..k]),
                                Err(rxfs::Error::NotSupported(m)) if m.contains("btree") => {}
                                Err(e) => panic!("t{t} step {step}: {e}"),
                            }
                        }
                        if step % 7 == 0 {
                            fs.fsync(*ino, false).unwrap();
                        }
                    }
                    (n.clone(), *ino, model)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (n, ino, model) in &models {
        assert_eq!(sha(&read_back(&fs, *ino)), sha(model), "{n}");
    }
    fs.unmount().unwrap();
    drop(fs);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    dog.join().unwrap();
    let im = Img {
        s,
        img,
        files: models.into_iter().map(|(n, i, m)| (n, (i, m))).collect(),
    };
    im.verify();
}
