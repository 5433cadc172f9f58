//! File handles through `rxfs mount` (issue 14: FUSE_EXPORT_SUPPORT, what
//! fstests generic/426, 467, 477 exercise and NFS export needs):
//! `name_to_handle_at` handles of a file and a directory open again with
//! `open_by_handle_at` after the kernel dropped its inodes (drop_caches)
//! and after an unmount and a new mount; the handle of a removed file is
//! stale (ESTALE).
//!
//! Root only (open_by_handle_at needs CAP_DAC_READ_SEARCH); fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

use common::*;

const MAX_HANDLE_SZ: usize = 128;

/// `struct file_handle` with room for the largest handle.
#[repr(C)]
#[derive(Clone, Copy)]
struct Handle {
    bytes: u32,
    kind: i32,
    data: [u8; MAX_HANDLE_SZ],
}

fn handle_of(p: &Path) -> Handle {
    let mut h = Handle {
        bytes: MAX_HANDLE_SZ as u32,
        kind: 0,
        data: [0; MAX_HANDLE_SZ],
    };
    let mut mount_id: libc::c_int = 0;
    let c = cpath(p);
    // SAFETY: `c` is a NUL-terminated path, `h` a file_handle with
    // `bytes` of room, `mount_id` an int: all valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            c.as_ptr(),
            &mut h as *mut Handle,
            &mut mount_id as *mut libc::c_int,
            0,
        )
    };
    assert_eq!(
        r,
        0,
        "name_to_handle_at {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    h
}

fn open_by_handle(mnt: &Path, h: &Handle, flags: i32) -> std::io::Result<File> {
    let m = File::open(mnt)?;
    let mut h = *h;
    // SAFETY: `m` is an open descriptor and `h` a file_handle as
    // name_to_handle_at filled it; the call returns a new descriptor.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            m.as_raw_fd(),
            &mut h as *mut Handle,
            flags,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just gave us, owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

fn drop_caches() {
    fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
}

fn check_handles(mnt: &Path, file: &Handle, dir: &Handle, gone: &Handle, what: &str) {
    let mut f = open_by_handle(mnt, file, libc::O_RDONLY)
        .unwrap_or_else(|e| panic!("{what}: open_by_handle_at of a file: {e}"));
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    assert_eq!(
        got,
        pattern(7, 50_000),
        "{what}: file content through its handle"
    );
    let d = open_by_handle(mnt, dir, libc::O_RDONLY | libc::O_DIRECTORY)
        .unwrap_or_else(|e| panic!("{what}: open_by_handle_at of a directory: {e}"));
    // The directory's handle leads to the directory: its entry is there.
    let st = fs::metadata(format!("/proc/self/fd/{}/f", d.as_raw_fd())).unwrap();
    assert_eq!(
        st.len(),
        50_000,
        "{what}: d/f through the directory's handle"
    );
    let e = open_by_handle(mnt, gone, libc::O_RDONLY)
        .err()
        .and_then(|e| e.raw_os_error());
    assert_eq!(e, Some(libc::ESTALE), "{what}: handle of a removed file");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn handles_survive_cache_eviction_and_remount() {
    require_root();
    let s = Scratch::new("mount_handles");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    fs::create_dir_all(&mnt).unwrap();
    let m = rxfs_mount(&img, &mnt, "rw");
    fs::create_dir(mnt.join("d")).unwrap();
    fs::write(mnt.join("d/f"), pattern(7, 50_000)).unwrap();
    fs::write(mnt.join("gone"), b"soon removed\n").unwrap();
    let file = handle_of(&mnt.join("d/f"));
    let dir = handle_of(&mnt.join("d"));
    let gone = handle_of(&mnt.join("gone"));
    assert_ne!(
        file.data[..file.bytes as usize],
        dir.data[..dir.bytes as usize]
    );
    fs::remove_file(mnt.join("gone")).unwrap();
    // The kernel forgets every inode it does not hold: the handles must
    // be resolved by rxfs.
    drop_caches();
    check_handles(&mnt, &file, &dir, &gone, "after drop_caches");
    rxfs_umount(&mnt, m);
    // A new mount resolves the old handles (node ids are inode numbers).
    let m = rxfs_mount(&img, &mnt, "rw");
    check_handles(&mnt, &file, &dir, &gone, "after a new mount");
    rxfs_umount(&mnt, m);
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
}
