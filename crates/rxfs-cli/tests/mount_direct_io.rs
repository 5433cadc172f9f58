//! `O_DIRECT` through `rxfs mount`: such opens are served with
//! `FOPEN_DIRECT_IO` (every read and write a request of its own, several
//! writers in parallel), and must still behave as on a local filesystem:
//! aligned overwrites and reads that bypass the page cache agree with
//! buffered reads, and a file opened `O_DIRECT` can be mapped `MAP_SHARED`
//! (fstests generic/091 mixes the two; without FUSE_DIRECT_IO_ALLOW_MMAP
//! the kernel answers ENODEV). What was written through the mapping, the
//! `O_DIRECT` writes and the buffered ones must all be in the image the
//! kernel then mounts, and the image must pass `xfs_repair -n`.
//!
//! Root only; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};

use common::*;

const LEN: usize = 256 * 1024;

/// A 4 KiB-aligned buffer of `len` bytes (O_DIRECT needs aligned memory).
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: len > 0; freed in Drop with the same layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Aligned { ptr, len }
    }

    fn buf(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to len bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len, 4096).unwrap();
        // SAFETY: allocated in new with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) }
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn direct_io_overwrites_reads_and_shared_mappings() {
    require_root();
    let s = Scratch::new("mount_direct_io");
    let img = s.path("img");
    mkfs(&img, 1 << 30, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "rw");
    let path = mnt.join("f");
    let mut want = pattern(7, LEN);
    std::fs::write(&path, &want).unwrap();

    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap();
    // Aligned O_DIRECT overwrites of written blocks.
    let mut a = Aligned::new(8192);
    for (i, off) in [0usize, 12288, 65536, LEN - 8192].into_iter().enumerate() {
        let b = a.buf();
        b.fill(0x40 + i as u8);
        f.write_all_at(b, off as u64).unwrap();
        want[off..off + 8192].fill(0x40 + i as u8);
    }
    // O_DIRECT reads see them.
    let mut r = Aligned::new(LEN);
    f.read_exact_at(r.buf(), 0).unwrap();
    assert!(r.buf() == &want[..], "O_DIRECT read after O_DIRECT writes");

    // A shared mapping of the O_DIRECT descriptor: written through, synced.
    // SAFETY: a fresh shared mapping of LEN bytes of an open file of LEN
    // bytes; unmapped below, no other reference to it.
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
    assert_ne!(
        map,
        libc::MAP_FAILED,
        "mmap of an O_DIRECT open: {}",
        std::io::Error::last_os_error()
    );
    {
        // SAFETY: the mapping is LEN bytes, readable and writable.
        let m = unsafe { std::slice::from_raw_parts_mut(map as *mut u8, LEN) };
        assert!(m == &want[..], "the mapping shows the O_DIRECT writes");
        for off in (1000..LEN).step_by(50_000) {
            m[off..off + 100].fill(0xee);
            want[off..off + 100].fill(0xee);
        }
        // SAFETY: map/LEN as mapped.
        assert_eq!(unsafe { libc::msync(map, LEN, libc::MS_SYNC) }, 0);
        assert_eq!(unsafe { libc::munmap(map, LEN) }, 0);
    }
    drop(f);
    // Buffered reads agree with everything written.
    assert!(std::fs::read(&path).unwrap() == want, "buffered read");
    rxfs_umount(&mnt, guard);

    run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let got = std::fs::read(k.dir.join("f")).unwrap();
    k.umount();
    assert!(
        got == want,
        "the kernel reads what was written through rxfs"
    );
}
