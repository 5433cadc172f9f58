//! Idmapped mounts of an rxfs mount (issue 14: `FUSE_ALLOW_IDMAP`, what
//! fstests generic/644 645 689 698 699 need): a bind mount of the FUSE
//! mount with an id mapping (host ids 10000-75535 for the filesystem's
//! 0-65535) shows the filesystem's owners shifted, and a file a process
//! with host uid/gid 11000 creates through it is stored with owner 1000
//! on disk (what the kernel and `xfs_repair -n` read back); a caller whose
//! ids have no mapping gets EOVERFLOW, as on any filesystem.
//!
//! The idmapped mount is made with the new mount API (open_tree,
//! mount_setattr with MOUNT_ATTR_IDMAP and a user namespace, move_mount):
//! util-linux 2.38 cannot make one. Root only; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::*;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn check(r: libc::c_long, what: &str) -> libc::c_long {
    assert!(r >= 0, "{what}: {}", std::io::Error::last_os_error());
    r
}

/// A user namespace mapping ids 0-65535 inside to 10000-75535 outside:
/// a child process unshares one and waits; its namespace file is opened
/// once the maps are written; then the child goes.
fn userns() -> OwnedFd {
    let mut pipe = [0i32; 2];
    // SAFETY: pipe(2) fills two descriptors; the child only makes
    // async-signal-safe calls (unshare, read, _exit).
    unsafe {
        check(libc::pipe(pipe.as_mut_ptr()) as _, "pipe");
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::close(pipe[1]);
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                libc::_exit(1);
            }
            let mut b = [0u8; 1];
            // Parent closes its end when done: read returns 0.
            libc::read(pipe[0], b.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
        libc::close(pipe[0]);
        // Wait until the child has its namespace.
        let me = fs::read_link("/proc/self/ns/user").unwrap();
        assert!(
            wait_until(std::time::Duration::from_secs(10), || {
                fs::read_link(format!("/proc/{pid}/ns/user")).is_ok_and(|l| l != me)
            }),
            "child never unshared its user namespace"
        );
        fs::write(format!("/proc/{pid}/uid_map"), "0 10000 65536\n").unwrap();
        fs::write(format!("/proc/{pid}/setgroups"), "deny").unwrap();
        fs::write(format!("/proc/{pid}/gid_map"), "0 10000 65536\n").unwrap();
        let ns = File::open(format!("/proc/{pid}/ns/user")).unwrap();
        libc::close(pipe[1]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        OwnedFd::from(ns)
    }
}

/// Bind `src` at `dst` with the id mapping of `ns`.
fn idmapped_bind(src: &Path, dst: &Path, ns: &OwnedFd) {
    let (s, d) = (cpath(src), cpath(dst));
    let empty = c"";
    // SAFETY: the new mount API's system calls with NUL-terminated paths
    // and a mount_attr struct that lives across the call.
    unsafe {
        let tree = check(
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                s.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
            ),
            "open_tree",
        ) as i32;
        let tree = OwnedFd::from_raw_fd(tree);
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_IDMAP,
            attr_clr: 0,
            propagation: 0,
            userns_fd: ns.as_raw_fd() as u64,
        };
        check(
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                empty.as_ptr(),
                libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            ),
            "mount_setattr(MOUNT_ATTR_IDMAP)",
        );
        check(
            libc::syscall(
                libc::SYS_move_mount,
                tree.as_raw_fd(),
                empty.as_ptr(),
                libc::AT_FDCWD,
                d.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            ),
            "move_mount",
        );
    }
}

/// Create `path` in a child running with uid/gid `id`; its errno (0 ok).
fn create_as(path: &Path, id: u32) -> i32 {
    let c = cpath(path);
    errno_in_child_as(id, || {
        // SAFETY: a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL,
                0o644,
            )
        };
        if fd >= 0 {
            0
        } else {
            last_errno()
        }
    })
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn idmapped_bind_mounts_shift_owners() {
    require_root();
    let s = Scratch::new("mount_idmap");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    fs::create_dir_all(&mnt).unwrap();
    rxfs_ok(&[
        OsStr::new("mount"),
        img.as_os_str(),
        mnt.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("rw,allow_other"),
    ]);
    let guard = KernelMount::adopt(&mnt);
    fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    fs::write(mnt.join("rootfile"), b"x").unwrap();
    let ns = userns();
    let idm = s.path("idm");
    fs::create_dir_all(&idm).unwrap();
    idmapped_bind(&mnt, &idm, &ns);
    let idm_guard = KernelMount::adopt(&idm);
    let st = fs::metadata(idm.join("rootfile")).unwrap();
    assert_eq!(
        (st.uid(), st.gid()),
        (10000, 10000),
        "root's file through the mapping"
    );
    assert_eq!(
        create_as(&idm.join("mapped"), 11000),
        0,
        "create as host uid 11000"
    );
    let st = fs::metadata(idm.join("mapped")).unwrap();
    assert_eq!((st.uid(), st.gid()), (11000, 11000));
    let st = fs::metadata(mnt.join("mapped")).unwrap();
    assert_eq!((st.uid(), st.gid()), (1000, 1000), "stored unshifted");
    // An id outside the mapping cannot own a new file.
    assert_eq!(create_as(&idm.join("unmapped"), 5000), libc::EOVERFLOW);
    run_output("umount", &[idm.as_os_str()]);
    idm_guard.disarm();
    rxfs_umount(&mnt, guard);
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let st = fs::metadata(k.dir.join("mapped")).unwrap();
    assert_eq!((st.uid(), st.gid()), (1000, 1000), "the kernel's view");
    assert!(!k.dir.join("unmapped").exists());
    k.umount();
}
