//! Through the default mount (no write-back cache), a write past free
//! space fails in write(2) itself with ENOSPC, as on the kernel's XFS, and
//! `stat` never shows bytes that are not stored: the size is what the
//! writes reported, fsync and close succeed, and after unmount the kernel
//! reads back exactly that size and those bytes. (With `-o
//! writeback_cache=on` the kernel accepts cached writes without asking
//! rxfs, so ENOSPC comes at fsync or close instead: a documented weaker
//! promise of that option, not tested here.)
//!
//! Root, FUSE, mkfs.xfs, loop mounts; fails unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;

use common::*;

const CHUNK: usize = 1 << 20;

fn chunk(i: u64) -> Vec<u8> {
    (0..CHUNK)
        .map(|j| (i as usize * 7 + j / 4096) as u8)
        .collect()
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn write_past_free_space_fails_in_write_and_stat_shows_what_is_stored() {
    require_root();
    let s = Scratch::new("enospc-write");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let mnt = s.path("m");
    let guard = rxfs_mount(&img, &mnt, "");
    let path = mnt.join("big");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut written = 0u64;
    let mut i = 0u64;
    // write(2) by hand, as a program sees it: short counts, then an error.
    let err = 'fill: loop {
        let data = chunk(i);
        let mut off = 0;
        while off < data.len() {
            match f.write(&data[off..]) {
                Ok(0) => panic!("write returned 0"),
                Ok(n) => {
                    off += n;
                    written += n as u64;
                }
                Err(e) => break 'fill e,
            }
        }
        i += 1;
        assert!(
            written < 400 << 20,
            "wrote {written} bytes into a 300 MiB filesystem"
        );
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(written > 200 << 20, "ENOSPC after only {written} bytes");
    // What stat shows is what is stored.
    assert_eq!(f.metadata().unwrap().len(), written, "fstat after ENOSPC");
    f.sync_all().expect("fsync after ENOSPC");
    drop(f);
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!(m.len(), written, "stat");
    assert!(
        m.blocks() * 512 >= written,
        "{} blocks for {written} bytes",
        m.blocks()
    );
    rxfs_umount(&mnt, guard);

    // The kernel reads the same size and bytes.
    let k = s.path("k");
    let km = KernelMount::new(&img, &k, "ro");
    let mut back = std::fs::File::open(k.join("big")).unwrap();
    assert_eq!(back.metadata().unwrap().len(), written);
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    let mut idx = 0u64;
    while at < written {
        let want = chunk(idx);
        let n = (written - at).min(CHUNK as u64) as usize;
        back.read_exact(&mut buf[..n]).unwrap();
        assert!(buf[..n] == want[..n], "bytes differ in MiB {idx}");
        at += n as u64;
        idx += 1;
    }
    drop(back);
    km.umount();
    let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(r.status.success());
}
