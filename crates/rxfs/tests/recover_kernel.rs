//! Log recovery against the kernel: seeded workloads on a kernel mount end
//! in `xfs_io -x -c 'shutdown -f'`; then the same dirty image is recovered
//! three ways and must show the same tree:
//!
//! - A: the kernel (mount rw, umount, walk a ro mount) — the oracle;
//! - B: rxfs read-only open, recovering in memory (library walk);
//! - C: rxfs `recover_to_device`, then `xfs_repair -n` must exit 0 and a
//!   kernel mount must show A's tree.
//!
//! Needs root; fails (never skips) unless RXFS_SKIP_KERNEL_TESTS=1.
//! RXFS_RECOVER_SEEDS=N changes the seed count. Failing seeds are printed.

mod common;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rxfs::fs::recover::RecoveryStats;
use rxfs::Filesystem;

/// One file as seen by a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: char,
    mode: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    size: u64,
    mtime: (i64, u32),
    /// Content hash, or the symlink target.
    body: String,
    xattrs: BTreeMap<String, u64>,
}

type Manifest = BTreeMap<String, Entry>;

fn fnv(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn kernel_xattrs(p: &Path) -> BTreeMap<String, u64> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut names = vec![0u8; 65536];
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr() as *mut _, names.len()) };
    assert!(n >= 0, "llistxattr {p:?}");
    let mut out = BTreeMap::new();
    for name in names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
    {
        let cn = CString::new(name).unwrap();
        let mut v = vec![0u8; 65536];
        let m =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr() as *mut _, v.len()) };
        assert!(m >= 0, "lgetxattr {p:?}");
        out.insert(
            String::from_utf8_lossy(name).into_owned(),
            fnv(&v[..m as usize], FNV0),
        );
    }
    out
}

fn kernel_walk(root: &Path) -> Manifest {
    let mut m = Manifest::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let p = root.join(&rel);
        let md = std::fs::symlink_metadata(&p).unwrap();
        let ft = md.file_type();
        let (kind, body) = if ft.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(rel.join(e.unwrap().file_name()));
            }
            ('d', String::new())
        } else if ft.is_symlink() {
            let t = std::fs::read_link(&p).unwrap();
            (
                'l',
                String::from_utf8_lossy(t.as_os_str().as_bytes()).into_owned(),
            )
        } else if ft.is_file() {
            ('f', format!("{:x}", fnv(&std::fs::read(&p).unwrap(), FNV0)))
        } else {
            ('o', String::new())
        };
        m.insert(
            format!("/{}", rel.display()),
            Entry {
                kind,
                mode: md.mode(),
                uid: md.uid(),
                gid: md.gid(),
                nlink: md.nlink() as u32,
                size: md.size(),
                mtime: (md.mtime(), md.mtime_nsec() as u32),
                body,
                xattrs: kernel_xattrs(&p),
            },
        );
    }
    m
}

fn rxfs_walk(fs: &Filesystem) -> Manifest {
    let mut m = Manifest::new();
    let mut stack = vec![(String::new(), fs.root_ino())];
    while let Some((rel, ino)) = stack.pop() {
        let ip = fs.iget(ino).unwrap();
        let c = &ip.core;
        let fmt = c.mode & 0o170000;
        let (kind, body) = match fmt {
            0o040000 => {
                fs.readdir(&ip, 0, &mut |e| {
                    if e.name != b"." && e.name != b".." {
                        let n = String::from_utf8_lossy(&e.name).into_owned();
                        stack.push((format!("{rel}/{n}"), e.ino));
                    }
                    true
                })
                .unwrap();
                ('d', String::new())
            }
            0o120000 => (
                'l',
                String::from_utf8_lossy(&fs.readlink(&ip).unwrap()).into_owned(),
            ),
            0o100000 => {
                let mut h = FNV0;
                let mut off = 0u64;
                let mut buf = vec![0u8; 1 << 20];
                while off < c.size {
                    let n = fs.read_file(&ip, off, &mut buf).unwrap();
                    assert!(n > 0, "short read of {rel}");
                    h = fnv(&buf[..n], h);
                    off += n as u64;
                }
                ('f', format!("{h:x}"))
            }
            _ => ('o', String::new()),
        };
        let mut xattrs = BTreeMap::new();
        for name in fs.listxattr(&ip).unwrap() {
            let v = fs.getxattr(&ip, &name).unwrap();
            xattrs.insert(String::from_utf8_lossy(&name).into_owned(), fnv(&v, FNV0));
        }
        let key = if rel.is_empty() {
            "/".to_string()
        } else {
            rel.clone()
        };
        m.insert(
            key,
            Entry {
                kind,
                mode: c.mode as u32,
                uid: c.uid,
                gid: c.gid,
                nlink: c.nlink,
                size: c.size,
                mtime: (c.mtime.sec, c.mtime.nsec),
                body,
                xattrs,
            },
        );
    }
    m
}

fn diff(a: &Manifest, b: &Manifest) -> Option<String> {
    if a == b {
        return None;
    }
    let mut out = String::new();
    for (k, v) in a {
        match b.get(k) {
            None => out += &format!("only in kernel: {k}\n"),
            Some(w) if w != v => out += &format!("{k}:\n  kernel {v:?}\n  rxfs   {w:?}\n"),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out += &format!("only in rxfs: {k}\n");
    }
    out.truncate(4000);
    Some(out)
}

fn set_xattr(p: &Path, name: &str, val: &[u8]) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            val.as_ptr() as *const _,
            val.len(),
            0,
        )
    };
}

/// A seeded workload on the mounted filesystem at `mnt`.
/// `ops` bounds the operation count (the crash point is random below it);
/// a sync comes once in `sync_one_in` operations on average. Some files
/// are unlinked while still open (they stay on the AGI unlinked lists).
fn workload(
    mnt: &Path,
    seed: u64,
    ops: usize,
    sync_one_in: u64,
    freeze: bool,
) -> Vec<std::fs::File> {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let ops = ops / 2 + r.below(ops as u64 / 2 + 1) as usize;
    let mut open_unlinked = Vec::new();
    let dirs = ["", "d1", "d2", "d1/sub", "big"];
    for d in &dirs[1..] {
        let _ = std::fs::create_dir_all(mnt.join(d));
    }
    let path = |r: &mut Rng| {
        let d = dirs[r.below(dirs.len() as u64) as usize];
        mnt.join(d).join(format!("f{}", r.below(40)))
    };
    for i in 0..ops {
        let p = path(&mut r);
        match r.below(12) {
            0..=2 => {
                let cap = if r.below(4) == 0 { 300_000 } else { 5000 };
                let len = r.below(cap) as usize;
                let byte = r.below(256) as u8;
                let _ = std::fs::write(&p, vec![byte; len]);
            }
            3 => {
                let _ = std::fs::remove_file(&p);
            }
            4 => {
                let q = path(&mut r);
                let _ = std::fs::rename(&p, &q);
            }
            5 => {
                let v = vec![b'x'; r.below(3000) as usize + 1];
                set_xattr(&p, &format!("user.a{}", r.below(6)), &v);
            }
            6 => {
                if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&p) {
                    let _ = f.set_len(r.below(100_000));
                }
            }
            7 => {
                let _ = std::fs::set_permissions(
                    &p,
                    std::fs::Permissions::from_mode(0o600 + r.below(0o177) as u32),
                );
            }
            8 => {
                let t = "t".repeat(r.below(900) as usize + 1);
                let _ = std::os::unix::fs::symlink(&t, &p);
            }
            9 => {
                let d = mnt.join("big").join(format!("n{}", r.below(400)));
                let _ = std::fs::write(&d, b"x");
            }
            10 => {
                let d = mnt.join("d2").join(format!("dir{}", r.below(10)));
                let _ = std::fs::create_dir(&d).or_else(|_| std::fs::remove_dir(&d));
            }
            _ => {
                if seed.is_multiple_of(3) && r.below(8) == 0 {
                    if let Ok(f) = std::fs::File::open(&p) {
                        if std::fs::remove_file(&p).is_ok() {
                            open_unlinked.push(f);
                        }
                    }
                }
            }
        }
        if r.below(sync_one_in) == 0 {
            unsafe { libc::sync() };
        }
        if freeze && i % 500 == 499 && r.below(2) == 0 {
            // Freezing writes all metadata back (the AIL empties), so later
            // replays meet blocks that carry LSNs.
            run("xfs_freeze", &["-f", mnt.to_str().unwrap()]);
            run("xfs_freeze", &["-u", mnt.to_str().unwrap()]);
        }
    }
    open_unlinked
}

/// mkfs.xfs of a filesystem under 300 MB with a small log: mkfs 6.1
/// allows that only for fstests, which it recognises by these variables.
fn small_mkfs(img: &Path, size: u64, opts: &[&str]) {
    std::fs::File::create(img).unwrap().set_len(size).unwrap();
    let out = Command::new("mkfs.xfs")
        .args(["-f", "-q"])
        .args(opts)
        .arg(img)
        .envs([("TEST_DIR", "1"), ("TEST_DEV", "1"), ("QA_CHECK_FS", "1")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mkfs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Recover one seed three ways; returns the stats and the log head's cycle.
fn recover_seed(
    scr: &Scratch,
    seed: u64,
    mkfs_opts: &[&str],
    mount_opts: &str,
    ops: usize,
    sync_one_in: u64,
    crash_after_ms: Option<u64>,
) -> (RecoveryStats, u32) {
    let img = scr.path("img");
    // Below 300 MB mkfs allows logs under 64 MiB (the wrapped-log case).
    let small_log = mkfs_opts.iter().any(|o| o.starts_with("size="));
    if small_log {
        small_mkfs(&img, 200 << 20, mkfs_opts);
    } else {
        mkfs(&img, 512 << 20, mkfs_opts);
    }
    let mnt = scr.path("mnt");
    let m = KernelMount::new(&img, &mnt, mount_opts);
    if let Some(ms) = crash_after_ms {
        // Crash mid-operation: the workload runs on while the shutdown hits.
        let dir = mnt.clone();
        let t = std::thread::spawn(move || workload(&dir, seed, ops, sync_one_in, false));
        std::thread::sleep(std::time::Duration::from_millis(ms));
        run(
            "xfs_io",
            &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
        );
        drop(t.join().unwrap());
    } else {
        let held = workload(&mnt, seed, ops, sync_one_in, true);
        run(
            "xfs_io",
            &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
        );
        drop(held);
    }
    m.umount();
    let (a, b, c) = (scr.path("a"), scr.path("b"), scr.path("c"));
    for x in [&a, &b, &c] {
        run(
            "cp",
            &[
                "--sparse=always",
                img.to_str().unwrap(),
                x.to_str().unwrap(),
            ],
        );
    }
    // A: the kernel's recovery.
    KernelMount::new(&a, &mnt, "").umount();
    let ma = KernelMount::new(&a, &mnt, "ro");
    let want = kernel_walk(&mnt);
    ma.umount();
    // B: rxfs in memory.
    let opened = Filesystem::open_path(
        &b,
        None,
        rxfs::MountOptions {
            read_only: true,
            ..Default::default()
        },
    );
    let fs = match opened {
        Err(rxfs::Error::NotSupported(msg)) if msg.contains("unfinished intents") => {
            // The crash cut a deferred operation chain: the kernel finishes
            // it; rxfs refuses (no write path yet), on both paths, and
            // writes nothing.
            let dev = rxfs::bdev::FileDevice::open(&c, false, false).unwrap();
            let e = rxfs::fs::recover_write::recover_to_device(&dev).unwrap_err();
            assert!(
                e.to_string().contains("unfinished intents"),
                "seed {seed}: {e}"
            );
            drop(dev);
            let same = Command::new("cmp").args([&img, &c]).status().unwrap();
            assert!(
                same.success(),
                "seed {seed}: a refused recovery wrote the device"
            );
            eprintln!("seed {seed}: {msg}");
            for x in [&a, &b, &c, &img] {
                let _ = std::fs::remove_file(x);
            }
            return (RecoveryStats::default(), 0);
        }
        r => r.unwrap(),
    };
    let stats = fs.recovery_stats().cloned().unwrap_or_default();
    let cycle = fs.log_state().map(|s| s.head.cycle()).unwrap_or(0);
    let got = rxfs_walk(&fs);
    drop(fs);
    if let Some(d) = diff(&want, &got) {
        panic!("seed {seed}: rxfs in-memory recovery differs from the kernel's:\n{d}");
    }
    // C: rxfs recovery onto the device.
    let dev = rxfs::bdev::FileDevice::open(&c, false, false).unwrap();
    if stats.unlinked_buckets > 0 {
        let e = rxfs::fs::recover_write::recover_to_device(&dev).unwrap_err();
        assert!(e.to_string().contains("unlinked"), "seed {seed}: {e}");
        drop(dev);
        let same = Command::new("cmp").args([&img, &c]).status().unwrap();
        assert!(
            same.success(),
            "seed {seed}: a refused recovery wrote the device"
        );
        for x in [&a, &b, &c, &img] {
            let _ = std::fs::remove_file(x);
        }
        return (stats, cycle);
    }
    let st2 = rxfs::fs::recover_write::recover_to_device(&dev).unwrap();
    // Recovered: the log is clean now, a second run replays nothing.
    let again = rxfs::fs::recover_write::recover_to_device(&dev).unwrap();
    assert_eq!(
        again,
        RecoveryStats::default(),
        "seed {seed}: second recovery"
    );
    drop(dev);
    let fs_c = open_ro(&c);
    assert!(
        fs_c.recovery_stats().is_none(),
        "seed {seed}: log still dirty"
    );
    if let Some(d) = diff(&want, &rxfs_walk(&fs_c)) {
        panic!("seed {seed}: rxfs view after recover_to_device differs:\n{d}");
    }
    drop(fs_c);
    assert_eq!(st2, stats, "seed {seed}: both recoveries replay the same");
    let out = Command::new("xfs_repair")
        .args(["-n", c.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "seed {seed}: xfs_repair -n after rxfs recovery:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mc = KernelMount::new(&c, &mnt, "ro");
    let got_c = kernel_walk(&mnt);
    mc.umount();
    if let Some(d) = diff(&want, &got_c) {
        panic!("seed {seed}: kernel view after rxfs recover_to_device differs:\n{d}");
    }
    for x in [&a, &b, &c, &img] {
        let _ = std::fs::remove_file(x);
    }
    (stats, cycle)
}

fn add(t: &mut RecoveryStats, s: &RecoveryStats) {
    t.records += s.records;
    t.transactions += s.transactions;
    t.items += s.items;
    t.buf_replayed += s.buf_replayed;
    t.buf_skipped_lsn += s.buf_skipped_lsn;
    t.buf_cancelled += s.buf_cancelled;
    t.buf_cancel_items += s.buf_cancel_items;
    t.inode_buf_replayed += s.inode_buf_replayed;
    t.sb_replayed += s.sb_replayed;
    t.inode_replayed += s.inode_replayed;
    t.inode_skipped_lsn += s.inode_skipped_lsn;
    t.inode_cancelled += s.inode_cancelled;
    t.icreate_replayed += s.icreate_replayed;
    t.icreate_cancelled += s.icreate_cancelled;
    t.intents_done += s.intents_done;
    t.unfinished_intents += s.unfinished_intents;
    t.overlay_bytes += s.overlay_bytes;
    t.unlinked_buckets += s.unlinked_buckets;
}

/// Run seeds; returns the largest log cycle seen.
fn run_seeds(
    name: &str,
    seeds: std::ops::Range<u64>,
    mkfs_opts: &[&str],
    mount_opts: &str,
    ops: usize,
    sync_one_in: u64,
    crash_after_ms: Option<u64>,
) -> u32 {
    if kernel_tests_disabled() {
        return u32::MAX;
    }
    let scr = Scratch::new(name);
    let mut total = RecoveryStats::default();
    let mut max_cycle = 0;
    let (mut compared, mut refused) = (0u32, 0u32);
    for seed in seeds {
        let (s, cycle) = recover_seed(
            &scr,
            seed,
            mkfs_opts,
            mount_opts,
            ops,
            sync_one_in,
            crash_after_ms.map(|ms| ms + seed * 37 % ms),
        );
        if s == RecoveryStats::default() {
            refused += 1;
            continue;
        }
        compared += 1;
        max_cycle = max_cycle.max(cycle);
        eprintln!("{name} seed {seed} (log cycle {cycle}): {s}");
        add(&mut total, &s);
    }
    eprintln!("{name} TOTAL ({compared} seeds compared, {refused} refused for intents): {total}");
    assert!(
        compared >= 2 * refused,
        "too few seeds without unfinished intents"
    );
    assert!(
        total.buf_replayed > 0 && total.inode_replayed > 0,
        "nothing replayed: {total}"
    );
    max_cycle
}

fn seed_count() -> u64 {
    std::env::var("RXFS_RECOVER_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

#[test]
fn recover_default_seeds() {
    run_seeds("recover-default", 0..seed_count(), &[], "", 1500, 40, None);
}

#[test]
fn recover_logbsize_256k() {
    run_seeds(
        "recover-256k",
        1000..1004,
        &[],
        "logbsize=256k",
        1500,
        40,
        None,
    );
}

#[test]
fn recover_crash_mid_operation() {
    // The shutdown lands while the workload is running (50-100 ms in).
    run_seeds("recover-mid", 3000..3010, &[], "", 4000, 20, Some(50));
}

#[test]
fn recover_wrapped_log() {
    // A small log and enough work to wrap it several times.
    let cycle = run_seeds(
        "recover-wrap",
        2000..2003,
        &["-l", "size=1368b"],
        "",
        12000,
        3,
        None,
    );
    assert!(cycle > 1, "the log never wrapped");
}

/// The v5 LSN rule on a kernel log: stamp the head LSN into one block and
/// one inode that the log changes (as if they had been written back after
/// the last checkpoint); recovery must skip every item for them and leave
/// their on-disk bytes alone, while replaying the rest.
#[test]
fn lsn_rule_skips_newer_metadata() {
    use rxfs::format::log_items::ItemFormat;
    use rxfs::fs::recover::meta_header;
    if kernel_tests_disabled() {
        return;
    }
    let scr = Scratch::new("recover-lsn");
    let img = scr.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = scr.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let held = workload(&mnt, 77, 400, 1000, false);
    run(
        "xfs_io",
        &["-x", "-c", "shutdown -f", mnt.to_str().unwrap()],
    );
    drop(held);
    m.umount();
    let norec = Filesystem::open_path(
        &img,
        None,
        rxfs::MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        },
    )
    .unwrap();
    let st = norec.log_state().unwrap().clone();
    let c = norec.log().unwrap().contents(&st).unwrap();
    let order = c.order.unwrap();
    let head = st.head;
    // Items per target.
    let mut bufs: BTreeMap<(u64, u16), u64> = BTreeMap::new();
    let mut inodes: BTreeMap<(u64, i32, i32, u64), u64> = BTreeMap::new();
    // Chunks (re)initialised by ICREATE items: their inodes lose the LSN.
    let mut fresh: Vec<(u64, u64)> = Vec::new();
    for t in &c.transactions {
        for it in &t.items {
            match it.format(order, rxfs::error::Location::Unknown).unwrap() {
                ItemFormat::Buf(b) if !b.is_cancel() && !b.is_inode_buf() => {
                    *bufs.entry((b.blkno, b.len)).or_default() += 1
                }
                ItemFormat::Icreate(ic) => {
                    let g = norec.geo();
                    let d = g
                        .agb_to_daddr(rxfs::types::AgNumber(ic.ag), rxfs::types::AgBlock(ic.agbno))
                        .0;
                    fresh.push((d, d + ((ic.length as u64) << (g.blocklog - 9))));
                }
                ItemFormat::Inode(i) => {
                    *inodes
                        .entry((i.blkno, i.len, i.boffset, i.ino))
                        .or_default() += 1
                }
                _ => {}
            }
        }
    }
    let baseline = open_ro(&img).recovery_stats().cloned().unwrap();
    // A logged metadata block that already exists on disk with our header.
    let (&(daddr, len), &nbuf) = bufs
        .iter()
        .find(|((d, l), _)| {
            let b = norec
                .read_raw(rxfs::types::Daddr(*d), *l as usize * 512)
                .unwrap();
            meta_header(&b).is_some() && *d != 0
        })
        .expect("a logged metadata block");
    let h = meta_header(
        &norec
            .read_raw(rxfs::types::Daddr(daddr), len as usize * 512)
            .unwrap(),
    )
    .unwrap();
    patch(&img, daddr, len as usize * 512, h.crc_off, |b| {
        b[h.lsn_off..h.lsn_off + 8].copy_from_slice(&(head.0 as u64).to_be_bytes())
    });
    // A logged inode that is initialised on disk.
    let (&(iblk, _, boff, ino), &nino) = inodes
        .iter()
        .find(|((b, l, o, _), _)| {
            if fresh.iter().any(|&(s, e)| *b >= s && *b < e) {
                return false;
            }
            let c = norec
                .read_raw(rxfs::types::Daddr(*b), *l as usize * 512)
                .unwrap();
            c[*o as usize..*o as usize + 2] == *b"IN" && c[*o as usize + 4] == 3
        })
        .expect("a logged inode");
    let isize = norec.geo().inodesize as usize;
    drop(norec);
    let idaddr = iblk + (boff as u64 >> 9);
    let ioff = boff as usize & 511;
    patch(
        &img,
        idaddr,
        512.max(ioff + isize).next_multiple_of(512),
        ioff + 100,
        |b| b[ioff + 112..ioff + 120].copy_from_slice(&(head.0 as u64).to_be_bytes()),
    );
    let want_blk = std::fs::read(&img).unwrap();
    let fs = open_ro(&img);
    let s = fs.recovery_stats().cloned().unwrap();
    eprintln!("baseline: {baseline}\npatched:  {s}");
    assert_eq!(s.buf_skipped_lsn, baseline.buf_skipped_lsn + nbuf, "{s}");
    assert_eq!(
        s.inode_skipped_lsn,
        baseline.inode_skipped_lsn + nino,
        "{s}"
    );
    let got = fs
        .read_raw(rxfs::types::Daddr(daddr), len as usize * 512)
        .unwrap();
    let at = daddr as usize * 512;
    assert_eq!(
        &got[..],
        &want_blk[at..at + got.len()],
        "skipped block changed"
    );
    let got = fs.read_raw(rxfs::types::Daddr(idaddr), 512).unwrap();
    let at = idaddr as usize * 512;
    assert_eq!(&got[ioff..ioff + 2], b"IN");
    assert_eq!(
        &got[..],
        &want_blk[at..at + 512],
        "skipped inode {ino} changed"
    );
}
