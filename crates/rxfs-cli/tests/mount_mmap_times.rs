//! A store through a shared writable mapping changes the file's mtime and
//! ctime, as on the kernel's XFS (fstests generic/080), with the
//! write-back cache off (the default) and on. Without the cache the kernel
//! keeps no times: the write-back of the mapping's pages reaches rxfs as a
//! WRITE marked as coming from the page cache, and rxfs must stamp the
//! times for it (it once left them alone, as it must with the cache on,
//! where the kernel stamps them itself). The times `stat` shows through
//! the mount are those the kernel's XFS reads from the image afterwards.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use common::*;

const LEN: usize = 8192;

/// (mtime, ctime) in nanoseconds.
fn times(m: &std::fs::Metadata) -> (i128, i128) {
    let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
    (ns(m.mtime(), m.mtime_nsec()), ns(m.ctime(), m.ctime_nsec()))
}

/// Write `f` through a shared mapping, sync it, unmap, close.
fn store_through_mapping(path: &std::path::Path) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    // SAFETY: a fresh shared mapping of LEN bytes of a file of LEN bytes;
    // unmapped below, no other reference to it.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
    // SAFETY: the mapping is LEN bytes, readable and writable.
    let m = unsafe { std::slice::from_raw_parts_mut(map as *mut u8, LEN) };
    m[100..200].fill(0xab);
    // SAFETY: map/LEN as mapped.
    assert_eq!(unsafe { libc::msync(map, LEN, libc::MS_SYNC) }, 0);
    assert_eq!(unsafe { libc::munmap(map, LEN) }, 0);
}

fn mapping_stamps_times(opts: &str, name: &str) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new(name);
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, opts);
    let path = mnt.join("f");
    let mut want = pattern(3, LEN);
    std::fs::write(&path, &want).unwrap();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let before = times(&std::fs::metadata(&path).unwrap());
    // Past the kernel's coarse clock granularity (a jiffy).
    std::thread::sleep(Duration::from_millis(50));
    store_through_mapping(&path);
    want[100..200].fill(0xab);
    let after = times(&std::fs::metadata(&path).unwrap());
    assert!(
        after.0 > before.0 && after.1 > before.1,
        "{opts}: (mtime, ctime) ns before the mapped store {before:?}, after {after:?}"
    );
    assert!(std::fs::read(&path).unwrap() == want);
    rxfs_umount(&mnt, guard);

    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let kf = k.dir.join("f");
    let on_disk = times(&std::fs::metadata(&kf).unwrap());
    let got = std::fs::read(&kf).unwrap();
    k.umount();
    assert!(got == want, "{opts}: the kernel reads the mapped store");
    assert!(
        on_disk.0 >= after.0 && on_disk.1 >= after.1,
        "{opts}: times on disk {on_disk:?} older than those the mount showed {after:?}"
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mapped_store_stamps_times_default_mount() {
    mapping_stamps_times("rw", "mount_mmap_times_default");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mapped_store_stamps_times_writeback_cache() {
    mapping_stamps_times("rw,writeback_cache=on", "mount_mmap_times_wbc");
}
