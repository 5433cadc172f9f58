//! Space a removed file gave back is there for the next allocation
//! (fstests generic/371): two threads each preallocate (or write) a file
//! of 30% of the free space through the default mount, remove it,
//! and start over. Two such files and a removed one always fit; neither
//! thread may ever see ENOSPC.
//!
//! Both ways it once did: a removed file's blocks are freed when the
//! kernel's FORGET reaches rxfs, which may come while the other thread's
//! allocation runs; and freed blocks stay busy until their checkpoint is
//! on disk, while an allocation that took what little non-busy space a
//! high AG had could not go back to lower AGs. At ENOSPC rxfs now waits
//! for frees running or about to run, forces busy extents out, and
//! retries, as XFS flushes its inode and block garbage collection.
//!
//! With one retry after the first free ended, about one run in four (over
//! io_uring; one in twelve over `/dev/fuse`) still failed: the other
//! thread took what that free gave back before the retry, or a free
//! ended between the failed allocation and the wait, which then found
//! nothing to wait for. Now the wait covers every free pending when it
//! starts, a free that ended since the allocation began counts, and the
//! retry is repeated (a bounded number of times) while space comes back.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::os::fd::AsRawFd;
use std::path::Path;

use common::*;

const FS_SIZE: u64 = 512 << 20;

/// 30% of the free space of the filesystem at `mnt`, in whole MiB:
/// two files and the blocks of a removed one fit.
fn file_size(mnt: &Path) -> u64 {
    let c = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a zeroed statvfs filled by the call; c is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    let free = st.f_bavail * st.f_frsize;
    ((free * 3 / 10) >> 20) << 20
}

fn falloc_loop(path: &Path, len: u64, rounds: usize) -> Vec<String> {
    let mut errs = Vec::new();
    for i in 0..rounds {
        let f = std::fs::File::create(path).unwrap();
        // SAFETY: a valid descriptor; mode 0 allocates and extends.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) };
        if r != 0 {
            errs.push(format!(
                "{}: round {i}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        drop(f);
        std::fs::remove_file(path).unwrap();
    }
    errs
}

fn write_loop(path: &Path, len: u64, rounds: usize) -> Vec<String> {
    use std::io::Write;
    let chunk = vec![0x6bu8; 1 << 20];
    let mut errs = Vec::new();
    for i in 0..rounds {
        let mut f = std::fs::File::create(path).unwrap();
        for _ in 0..len / chunk.len() as u64 {
            if let Err(e) = f.write_all(&chunk) {
                errs.push(format!("{}: round {i}: {e}", path.display()));
                break;
            }
        }
        drop(f);
        std::fs::remove_file(path).unwrap();
    }
    errs
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn removed_files_space_is_reused_at_once() {
    require_root();
    let s = Scratch::new("mount_enospc_reuse");
    let img = s.path("img");
    mkfs(&img, FS_SIZE, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "rw");
    let (a, b, c) = (mnt.join("a"), mnt.join("b"), mnt.join("c"));
    let len = file_size(&mnt);
    let errs: Vec<String> = std::thread::scope(|sc| {
        let t1 = sc.spawn(|| falloc_loop(&a, len, 400));
        let t2 = sc.spawn(|| falloc_loop(&b, len, 400));
        let mut e = t1.join().unwrap();
        e.extend(t2.join().unwrap());
        e
    });
    assert!(errs.is_empty(), "preallocations failed: {errs:?}");
    let errs: Vec<String> = std::thread::scope(|sc| {
        let t1 = sc.spawn(|| write_loop(&a, len, 6));
        let t2 = sc.spawn(|| falloc_loop(&c, len, 60));
        let mut e = t1.join().unwrap();
        e.extend(t2.join().unwrap());
        e
    });
    assert!(errs.is_empty(), "writes or preallocations failed: {errs:?}");
    rxfs_umount(&mnt, guard);
    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
}
