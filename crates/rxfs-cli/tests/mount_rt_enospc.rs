//! A realtime file written through a FUSE mount whose realtime device
//! runs out of space in the middle of one WRITE (issue 38): the writer
//! must be told (ENOSPC from write(2), fsync or close), never left with
//! a file shorter on disk than what it wrote and no error.
//!
//! With the write-back cache on, the pages reach the daemon at fsync in
//! one WRITE that only partly fits. The kernel's write-back takes no
//! short count: it records only an error, so a short answer there lost
//! the rest of the pages silently (`cp -a` into a nearly full realtime
//! section left truncated files and exited 0 for them). With the cache
//! off the short count goes back to write(2), whose retry gets ENOSPC:
//! checked too, as the reference.
//!
//! Oracles: the errno the writer saw, `xfs_repair -n -r`, and the
//! library read-only (the file's bytes on disk are a prefix of what was
//! written, the realtime bitmap agrees with the summary).
//!
//! Root, FUSE, mkfs.xfs, xfs_repair, xfs_io and fallocate; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::io::Write;
use std::os::fd::IntoRawFd;
use std::path::Path;

use common::rt::*;
use common::*;

/// Realtime extents of one block.
const REXT: u32 = 4096;
const BLOCK: u64 = 4096;
/// Free realtime blocks left before the write.
const LEFT_BLOCKS: u64 = 16;
/// The file written: more than is left, less than one WRITE (1 MiB).
const FILE_BYTES: usize = 256 << 10;

fn sh_ok(dir: &Path, cmd: &str) {
    let out = sh_in(dir, None, cmd);
    assert!(
        out.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The errno of `r`, or 0.
fn errno_of<T>(r: std::io::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// Fill the realtime section of a fresh filesystem mounted with
/// `writeback_cache=cache` to [`LEFT_BLOCKS`] free blocks, write a file
/// of [`FILE_BYTES`]; the write(2), fsync or close must fail with ENOSPC.
fn enospc_is_reported(cache: &str) {
    let s = Scratch::new(&format!("mount_rt_enospc_{cache}"));
    let img = s.path("img");
    let rt = mkfs_rt(&img, 512 << 20, REXT, &[]);
    let mnt = s.path("m");
    let opts = format!("rtdev={},writeback_cache={cache}", rt.display());
    let guard = rxfs_mount(&img, &mnt, &opts);
    sh_ok(&mnt, "mkdir rt && xfs_io -c 'chattr +t' rt");
    let st = statvfs(&mnt.join("rt"));
    assert_eq!(st.f_frsize, BLOCK);
    let fill = (st.f_bfree - LEFT_BLOCKS) * BLOCK;
    sh_ok(&mnt, &format!("fallocate -l {fill} rt/filler"));
    assert_eq!(statvfs(&mnt.join("rt")).f_bfree, LEFT_BLOCKS);

    let data = pattern(38, FILE_BYTES);
    let mut f = std::fs::File::create(mnt.join("rt/cut")).unwrap();
    let wrote = errno_of(f.write_all(&data));
    let synced = errno_of(f.sync_all());
    // SAFETY: close(2) of the descriptor `into_raw_fd` gave up.
    let closed = match unsafe { libc::close(f.into_raw_fd()) } {
        0 => 0,
        _ => last_errno(),
    };
    let seen = [wrote, synced, closed];
    assert!(
        seen.contains(&libc::ENOSPC) && seen.iter().all(|&e| e == 0 || e == libc::ENOSPC),
        "writeback_cache={cache}: {FILE_BYTES} bytes into {LEFT_BLOCKS} free realtime \
         blocks: errno of write, fsync, close: {seen:?} (want ENOSPC)"
    );
    rxfs_umount(&mnt, guard);

    repair_clean_rt(&img, &rt);
    let fs = open_ro_rt(&img, &rt);
    rt_clean_free(&fs);
    assert!(is_realtime(&fs, "/rt/cut"));
    let got = read_image_file(&fs, "/rt/cut");
    assert!(
        got.len() < data.len() && data.starts_with(&got),
        "writeback_cache={cache}: the file on disk ({} bytes) is not a prefix",
        got.len()
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn enospc_in_a_cached_realtime_write_is_reported() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_io", "fallocate"]);
    enospc_is_reported("on");
    enospc_is_reported("off");
}
