//! End-to-end tests of the FUSE driver: the mount lifecycle (daemon,
//! readiness, `rxfs umount` waiting for the daemon, plain `fusermount3 -u`
//! and `umount` ending it too, signals in the foreground), attributes and
//! contents equal to the kernel's view, read-only (`-o ro`) behaviour, xattr size
//! probing, statfs, SEEK_DATA/SEEK_HOLE, the mount(8) helper forms, and
//! mount errors.

mod common;

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

fn errno_of(r: std::io::Result<impl Sized>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn fuse_view_equals_kernel_view() {
    require_root();
    let s = Scratch::new("fuseview");
    let img = populated_image(&s);
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let kernel = walk_manifest(&k.dir);
    let kblk = std::fs::metadata(k.dir.join("big")).unwrap().blksize();
    let kst = statvfs(&k.dir);
    k.umount();

    let mnt = s.path("m");
    let m = rxfs_mount(&img, &mnt, "ro");
    let line = mount_line(&mnt).expect("mounted");
    assert!(line.contains(" fuse.rxfs ro,"), "{line}");
    assert!(line.starts_with(img.to_str().unwrap()), "{line}");
    let fuse = walk_manifest(&mnt);
    assert_same_manifest("FUSE vs kernel", &kernel, &fuse);
    // rxfs debug manifest says the same.
    let ours = rxfs_manifest(&img);
    assert_same_manifest("manifest vs kernel", &kernel, &ours);

    assert_eq!(std::fs::metadata(mnt.join("big")).unwrap().blksize(), kblk);
    let st = statvfs(&mnt);
    assert_eq!(
        (
            st.f_blocks,
            st.f_bfree,
            st.f_bavail,
            st.f_files,
            st.f_ffree,
            st.f_bsize,
            st.f_namemax
        ),
        (
            kst.f_blocks,
            kst.f_bfree,
            kst.f_bavail,
            kst.f_files,
            kst.f_ffree,
            kst.f_bsize,
            kst.f_namemax
        )
    );

    // Missing names (negative entries are cached; ask twice).
    for _ in 0..2 {
        assert_eq!(
            errno_of(std::fs::metadata(mnt.join("nope"))),
            Some(libc::ENOENT)
        );
    }
    assert_eq!(
        errno_of(std::fs::metadata(mnt.join("empty/x"))),
        Some(libc::ENOTDIR)
    );
    // Read-only: every kind of write is EROFS.
    assert_eq!(
        errno_of(std::fs::write(mnt.join("new"), b"x")),
        Some(libc::EROFS)
    );
    assert_eq!(
        errno_of(
            std::fs::OpenOptions::new()
                .write(true)
                .open(mnt.join("big"))
        ),
        Some(libc::EROFS)
    );
    assert_eq!(
        errno_of(std::fs::create_dir(mnt.join("d2"))),
        Some(libc::EROFS)
    );
    assert_eq!(
        errno_of(std::fs::remove_file(mnt.join("empty"))),
        Some(libc::EROFS)
    );
    assert_eq!(
        errno_of(std::fs::rename(mnt.join("empty"), mnt.join("e2"))),
        Some(libc::EROFS)
    );

    // xattr size probing and ERANGE.
    let p = CString::new(mnt.join("xattrs").as_os_str().as_bytes()).unwrap();
    let n = CString::new("user.small").unwrap();
    let len = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    assert_eq!(len, 5);
    let mut small = [0u8; 2];
    let r = unsafe {
        libc::lgetxattr(
            p.as_ptr(),
            n.as_ptr(),
            small.as_mut_ptr() as *mut libc::c_void,
            2,
        )
    };
    assert_eq!(
        (r, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::ERANGE))
    );
    let missing = CString::new("user.missing").unwrap();
    let r = unsafe { libc::lgetxattr(p.as_ptr(), missing.as_ptr(), std::ptr::null_mut(), 0) };
    assert_eq!(
        (r, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::ENODATA))
    );
    let r = unsafe { libc::llistxattr(p.as_ptr(), small.as_mut_ptr() as *mut libc::c_char, 2) };
    assert_eq!(
        (r, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::ERANGE))
    );

    // SEEK_DATA / SEEK_HOLE follow the extent map.
    let f = std::fs::File::open(mnt.join("sparse")).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    assert_eq!(unsafe { libc::lseek(fd, 0, libc::SEEK_HOLE) }, 8192);
    assert_eq!(unsafe { libc::lseek(fd, 8192, libc::SEEK_DATA) }, 10 << 20);
    assert_eq!(
        unsafe { libc::lseek(fd, (10 << 20) + 4096, libc::SEEK_DATA) },
        -1
    );
    drop(f);

    // Concurrent readers and lookups.
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let mnt = mnt.clone();
            std::thread::spawn(move || {
                for _ in 0..3 {
                    assert_eq!(std::fs::read(mnt.join("big")).unwrap(), pattern(1, 3 << 20));
                    let n = format!("many/entry-{:04}", i * 7);
                    assert_eq!(
                        std::fs::read_to_string(mnt.join(n)).unwrap(),
                        (i * 7).to_string()
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }

    let pid = daemon_pid(&mnt);
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    m.disarm();
    assert!(!is_mounted(&mnt));
    // `rxfs umount` returns only after the daemon is done with the image.
    assert!(
        process_gone(pid),
        "daemon {pid} still running after rxfs umount"
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn plain_unmounts_end_the_daemon() {
    require_root();
    let s = Scratch::new("plainumount");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    for how in ["fusermount3", "umount"] {
        let mnt = s.path(how);
        let m = rxfs_mount(&img, &mnt, "ro,norecovery");
        std::fs::read_dir(&mnt).unwrap().for_each(drop);
        let pid = daemon_pid(&mnt);
        if how == "umount" {
            // A second mount on the same mount point is refused.
            let out = rxfs(&[OsStr::new("mount"), img.as_os_str(), mnt.as_os_str()]);
            assert!(!out.status.success());
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("already an rxfs mount point"), "{err}");
        }
        let args: Vec<&OsStr> = match how {
            "fusermount3" => vec![OsStr::new("-u"), mnt.as_os_str()],
            _ => vec![mnt.as_os_str()],
        };
        // Retried: right after a mount, something (udev, a scanner) may
        // hold the mount point for a moment.
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        run_retry(how, &args, 10);
        m.disarm();
        assert!(
            wait_until(Duration::from_secs(10), || process_gone(pid)),
            "daemon {pid} survived {how}"
        );
        assert!(!is_mounted(&mnt));
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn foreground_mount_ends_on_sigterm() {
    require_root();
    let s = Scratch::new("fg");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("m");
    std::fs::create_dir(&mnt).unwrap();
    let mut child = Command::new(RXFS)
        .args([
            OsStr::new("mount"),
            OsStr::new("-f"),
            img.as_os_str(),
            mnt.as_os_str(),
            OsStr::new("-o"),
            OsStr::new("ro"),
        ])
        .spawn()
        .unwrap();
    let _guard = KernelMount::adopt(&mnt);
    assert!(wait_until(Duration::from_secs(10), || is_mounted(&mnt)));
    assert!(std::fs::metadata(&mnt).unwrap().is_dir());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&mnt));
    _guard.disarm();
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mount_helper_forms() {
    require_root();
    let s = Scratch::new("helper");
    let img = populated_image(&s);
    // The form Debian's mount.fuse3 uses: `rxfs SOURCE MNT -o OPTS`.
    let mnt = s.path("direct");
    std::fs::create_dir(&mnt).unwrap();
    rxfs_ok(&[
        img.as_os_str(),
        mnt.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("ro,dev,suid"),
    ]);
    let m = KernelMount::adopt(&mnt);
    assert_eq!(std::fs::read(mnt.join("dir/file")).unwrap(), b"hello\n");
    let line = mount_line(&mnt).expect("mounted");
    assert!(line.contains(" fuse.rxfs ro,"), "{line}");
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    m.disarm();

    // fsname= and an empty subtype= (plain `fuse`, as fstests' FSTYP=fuse
    // looks for it), and a subtype of one's own.
    for (opts, want) in [
        ("ro,fsname=rxtest,subtype=", "rxtest MNT fuse ro,"),
        ("ro,subtype=xfsish", "SRC MNT fuse.xfsish ro,"),
    ] {
        rxfs_ok(&[
            img.as_os_str(),
            mnt.as_os_str(),
            OsStr::new("-o"),
            OsStr::new(opts),
        ]);
        let m = KernelMount::adopt(&mnt);
        let line = mount_line(&mnt).expect("mounted");
        let want = want
            .replace("SRC", img.to_str().unwrap())
            .replace("MNT", mnt.to_str().unwrap());
        assert!(line.starts_with(&want), "-o {opts}: {line}");
        assert_eq!(std::fs::read(mnt.join("dir/file")).unwrap(), b"hello\n");
        // A remount finds the mount whatever its type (the helper form).
        rxfs_ok(&[
            img.as_os_str(),
            mnt.as_os_str(),
            OsStr::new("-o"),
            OsStr::new("remount,ro"),
        ]);
        rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
        m.disarm();
    }

    // mount(8) with the helper installed.
    // A helper left installed by another build (a link to another binary,
    // maybe gone) is set aside for the test's own and put back after.
    let helper = PathBuf::from("/sbin/mount.fuse.rxfs");
    let old_link = std::fs::read_link(&helper).ok();
    let preexisting = match &old_link {
        Some(t) => t == Path::new(RXFS),
        None => helper.symlink_metadata().is_ok(),
    };
    if !preexisting {
        if old_link.is_some() {
            std::fs::remove_file(&helper).unwrap();
        }
        rxfs_ok(&[OsStr::new("install-helper")]);
    }
    let mnt = s.path("viamount");
    std::fs::create_dir(&mnt).unwrap();
    let out = Command::new("mount")
        .args([
            OsStr::new("-t"),
            OsStr::new("fuse.rxfs"),
            img.as_os_str(),
            mnt.as_os_str(),
        ])
        .args(["-o", "rw"])
        .output()
        .unwrap();
    let m = KernelMount::adopt(&mnt);
    let ok = out.status.success();
    let listing = ok.then(|| std::fs::read_dir(&mnt).map(|d| d.count()));
    // mount(8) passes no `dev` or `suid` (kernel defaults); root's mount
    // must still honour device nodes and set-id bits, as a kernel XFS
    // mount does (generic/184).
    let vfs_flags = ok.then(|| statvfs(&mnt).f_flag & (libc::ST_NODEV | libc::ST_NOSUID));
    // Remounts through the helper (`mount -o remount,ro|rw`, as fstests
    // does): the kernel refuses writes while read-only.
    let mut remounts = Vec::new();
    if ok {
        for o in ["remount,rw", "remount,ro", "remount,rw"] {
            let r = Command::new("mount")
                .args(["-o", o])
                .arg(&mnt)
                .output()
                .unwrap();
            let w = std::fs::write(mnt.join("remount-probe"), b"x");
            remounts.push((o, r.status.success(), errno_of(w)));
        }
        rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    }
    m.disarm();
    if !preexisting {
        rxfs_ok(&[OsStr::new("install-helper"), OsStr::new("--remove")]);
        if let Some(t) = &old_link {
            std::os::unix::fs::symlink(t, &helper).unwrap();
        }
    }
    assert!(
        ok,
        "mount -t fuse.rxfs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(listing.unwrap().unwrap(), 17);
    assert_eq!(
        vfs_flags,
        Some(0),
        "root's mount -t fuse.rxfs: nodev/nosuid set"
    );
    assert_eq!(
        remounts,
        vec![
            ("remount,rw", true, None),
            ("remount,ro", true, Some(libc::EROFS)),
            ("remount,rw", true, None)
        ]
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mount_errors_reach_the_caller() {
    require_root();
    let s = Scratch::new("mounterr");
    let mnt = s.path("m");
    std::fs::create_dir(&mnt).unwrap();
    let junk = s.path("junk");
    std::fs::write(&junk, vec![0u8; 1 << 20]).unwrap();
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let (missing, nomnt) = (s.path("missing"), s.path("nomnt"));
    let cases: Vec<(Vec<&OsStr>, &str)> = vec![
        (
            vec![missing.as_os_str(), mnt.as_os_str()],
            "No such file or directory",
        ),
        (
            vec![junk.as_os_str(), mnt.as_os_str()],
            "not an XFS filesystem",
        ),
        (
            vec![img.as_os_str(), nomnt.as_os_str()],
            "No such file or directory",
        ),
        (vec![img.as_os_str(), junk.as_os_str()], "not a directory"),
        (
            vec![
                img.as_os_str(),
                mnt.as_os_str(),
                OsStr::new("-o"),
                OsStr::new("norecovery"),
            ],
            "norecovery needs a read-only mount",
        ),
        (
            vec![
                img.as_os_str(),
                mnt.as_os_str(),
                OsStr::new("-o"),
                OsStr::new("frob"),
            ],
            "unknown mount option",
        ),
    ];
    for (args, msg) in cases {
        let mut a = vec![OsStr::new("mount")];
        a.extend(args.iter());
        let out = rxfs(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(!is_mounted(&mnt), "{args:?} left a mount");
    }
    // Unmounting something that is not mounted fails.
    let out = rxfs(&[OsStr::new("umount"), mnt.as_os_str()]);
    assert!(!out.status.success());
}
