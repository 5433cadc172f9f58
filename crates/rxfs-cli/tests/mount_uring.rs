//! FUSE over io_uring (`-o fuse_uring=on`): the same filesystem through
//! the rings as through `/dev/fuse`.
//!
//! The kernel offers the rings only when the fuse module's `enable_uring`
//! parameter is on; the test turns it on for its mounts and restores it.
//! Through a ring-served mount: a populated tree reads back identically
//! through rxfs and through the kernel's XFS afterwards (the manifest
//! oracle), O_TMPFILE and statx's birth time work, parallel O_DIRECT
//! overwrites land, and `rxfs stats` shows the requests went through the
//! rings (and, with `fuse_uring=off`, none did). `fuse_uring=on` fails
//! the mount when the kernel does not offer rings.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1. Needs a kernel with
//! FUSE over io_uring (6.14+): the machine this project targets has it.

mod common;

use std::ffi::OsStr;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

use common::*;

use common::matrix::UringParam;

/// The `fuse_*_requests` counters of a live mount.
fn transport_counters(mnt: &Path) -> (u64, u64) {
    let out = rxfs_ok(&[OsStr::new("stats"), mnt.as_os_str()]);
    let text = String::from_utf8(out).unwrap();
    let get = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in rxfs stats:\n{text}"))
    };
    (get("fuse_dev_requests "), get("fuse_uring_requests "))
}

/// O_TMPFILE: written unnamed, then linked in; one more left unnamed
/// (freed at close).
fn tmpfiles(mnt: &Path) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(mnt)
        .unwrap();
    f.write_all_at(b"made unnamed", 0).unwrap();
    name_tmpfile(&f, &mnt.join("named")).unwrap();
    drop(f);
    let g = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(mnt.join("dir"))
        .unwrap();
    g.write_all_at(&pattern(9, 100_000), 0).unwrap();
    drop(g);
    assert_eq!(std::fs::read(mnt.join("named")).unwrap(), b"made unnamed");
}

/// Four threads overwrite their own 4 KiB blocks of one file with
/// O_DIRECT at once; every block must hold its thread's last write.
fn parallel_direct_overwrites(mnt: &Path) -> Vec<u8> {
    let path = mnt.join("dio");
    let len = 1 << 20;
    std::fs::write(&path, vec![0u8; len]).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let path = &path;
            s.spawn(move || {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(path)
                    .unwrap();
                let layout = std::alloc::Layout::from_size_align(4096, 4096).unwrap();
                // SAFETY: a 4 KiB aligned allocation, freed below.
                let p = unsafe { std::alloc::alloc(layout) };
                // SAFETY: p is 4096 writable bytes.
                let buf = unsafe { std::slice::from_raw_parts_mut(p, 4096) };
                for round in 0..50u8 {
                    buf.fill(t * 60 + round % 60);
                    for blk in (t as usize..256).step_by(4) {
                        f.write_all_at(buf, (blk * 4096) as u64).unwrap();
                    }
                }
                // SAFETY: allocated above with this layout.
                unsafe { std::alloc::dealloc(p, layout) };
            });
        }
    });
    let mut want = vec![0u8; len];
    for blk in 0..256 {
        let t = (blk % 4) as u8;
        want[blk * 4096..(blk + 1) * 4096].fill(t * 60 + 49);
    }
    assert!(std::fs::read(&path).unwrap() == want, "O_DIRECT overwrites");
    want
}

/// The number after `"name":` in a manifest line.
fn field(line: &str, name: &str) -> i128 {
    let key = format!("\"{name}\":");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + key.len();
    let end = line[at..].find([',', '}']).unwrap() + at;
    line[at..end].parse().unwrap()
}

/// The manifests with `/dio`'s mtime and ctime taken out, after checking
/// them: with the write-back cache (the default) the kernel owns a
/// regular file's times and stamps none for writes through a
/// direct-I/O open (FOPEN_DIRECT_IO), so `stat` through the mount shows
/// the times of the cached write that made the file while the daemon
/// stamped the O_DIRECT overwrites' on disk (the fuse module comment).
/// Either both agree (a kernel that stamps them) or the disk is later.
fn dio_times_apart(kernel: Vec<String>, rxfs: Vec<String>) -> (Vec<String>, Vec<String>) {
    let strip = |v: Vec<String>| -> (Vec<String>, (i128, i128)) {
        let mut times = None;
        let out = v
            .into_iter()
            .map(|l| {
                if !l.starts_with("{\"path\":\"/dio\"") {
                    return l;
                }
                let (m, c) = (field(&l, "mtime"), field(&l, "ctime"));
                times = Some((m, c));
                l.replace(&format!("\"mtime\":{m},"), "")
                    .replace(&format!("\"ctime\":{c},"), "")
            })
            .collect();
        (out, times.expect("no /dio in the manifest"))
    };
    let (kernel, (km, kc)) = strip(kernel);
    let (rxfs, (rm, rc)) = strip(rxfs);
    assert!(
        (km, kc) == (rm, rc) || (km > rm && kc > rc),
        "/dio: on disk mtime {km} ctime {kc}, through the mount {rm} {rc}"
    );
    (kernel, rxfs)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn a_tree_through_the_rings_reads_back_through_the_kernel() {
    require_root();
    let _p = UringParam::set(true);
    let s = Scratch::new("mount_uring");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "rw,fuse_uring=on,suid,dev");
    populate(&mnt);
    tmpfiles(&mnt);
    let dio = parallel_direct_overwrites(&mnt);
    let born = btime(&mnt.join("dir/file"));
    assert!(born.0 > 1_600_000_000, "birth time {born:?}");
    let through_rxfs = walk_manifest(&mnt);
    let (dev, ring) = transport_counters(&mnt);
    eprintln!("requests: /dev/fuse {dev}, io_uring {ring}");
    assert!(
        ring > 5_000,
        "the rings served {ring} requests (/dev/fuse {dev})"
    );
    rxfs_umount(&mnt, guard);

    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let through_kernel = walk_manifest(&k.dir);
    let dio_k = std::fs::read(k.dir.join("dio")).unwrap();
    k.umount();
    let (through_kernel, through_rxfs) = dio_times_apart(through_kernel, through_rxfs);
    assert_same_manifest(
        "rxfs (io_uring) vs the kernel",
        &through_kernel,
        &through_rxfs,
    );
    assert!(dio_k == dio, "the kernel reads the O_DIRECT overwrites");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rings_only_when_asked_and_offered() {
    require_root();
    let s = Scratch::new("mount_uring_off");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    {
        // Offered but refused: everything through /dev/fuse.
        let _p = UringParam::set(true);
        let guard = rxfs_mount(&img, &mnt, "rw,fuse_uring=off");
        std::fs::write(mnt.join("f"), b"x").unwrap();
        let (dev, ring) = transport_counters(&mnt);
        assert_eq!(ring, 0);
        assert!(dev > 0);
        rxfs_umount(&mnt, guard);
    }
    {
        // Asked for but not offered: the mount fails, saying why.
        let _p = UringParam::set(false);
        std::fs::create_dir_all(&mnt).unwrap();
        let out = rxfs(&[
            OsStr::new("mount"),
            img.as_os_str(),
            mnt.as_os_str(),
            OsStr::new("-o"),
            OsStr::new("fuse_uring=on"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "mounted without rings: {err}");
        assert!(err.contains("io_uring"), "{err}");
        assert!(!is_mounted(&mnt), "left a mount behind");
        // auto, not offered: /dev/fuse.
        let guard = rxfs_mount(&img, &mnt, "rw");
        assert_eq!(std::fs::read(mnt.join("f")).unwrap(), b"x");
        assert_eq!(transport_counters(&mnt).1, 0);
        rxfs_umount(&mnt, guard);
    }
    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
}

/// Requests that arrive while the rings are being registered (the
/// caller starts right after `rxfs mount` returns, which is before INIT):
/// every one is answered. A completion that came in during a loop's
/// registration was once dropped, leaving its caller waiting forever;
/// each burst runs under `timeout`.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn requests_racing_the_rings_setup_are_all_answered() {
    require_root();
    let _p = UringParam::set(true);
    let s = Scratch::new("mount_uring_race");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    std::fs::create_dir_all(&mnt).unwrap();
    let m = mnt.to_str().unwrap();
    for round in 0..15 {
        // Four shells stat and list the root as fast as they can while
        // the daemon starts.
        let script = format!(
            "{rxfs} mount {img} {m} -o fuse_uring=on && \
             for j in 1 2 3 4; do \
               (i=0; while [ $i -lt 300 ]; do stat -t {m} >/dev/null && ls {m} >/dev/null || exit 1; \
                i=$((i+1)); done) & \
             done; wait",
            rxfs = RXFS,
            img = img.display()
        );
        // Its own process group, so a hang kills every shell and stat.
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break Some(st);
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: signals the child's own process group.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let guard = KernelMount::adopt(&mnt);
        assert!(
            status.is_some_and(|s| s.success()),
            "round {round}: {status:?} (None: requests still unanswered after 60 s)"
        );
        let (_, ring) = transport_counters(&mnt);
        assert!(ring > 0, "round {round}: nothing went through the rings");
        rxfs_umount(&mnt, guard);
    }
    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
}
