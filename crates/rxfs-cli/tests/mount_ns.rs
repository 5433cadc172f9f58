//! Namespace changes through a read-write FUSE mount (`rxfs mount`):
//! symlinks (inline and remote), hard links, rename across directories,
//! over files and empty directories, RENAME_NOREPLACE and
//! RENAME_EXCHANGE (renameat2), and a file unlinked while open (written
//! and read through its descriptor, freed when the kernel forgets it).
//!
//! The oracle: after `rxfs umount`, `xfs_repair -n` exits 0 and a kernel
//! loop mount shows the same manifest (tests/manifest.py) as the FUSE
//! mount did before the unmount, and what the test expects by name.
//!
//! Root only; these FAIL unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::{CString, OsStr};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use common::*;

fn renameat2(from: &Path, to: &Path, flags: u32) -> Option<i32> {
    let (f, t) = (
        CString::new(from.as_os_str().as_bytes()).unwrap(),
        CString::new(to.as_os_str().as_bytes()).unwrap(),
    );
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            flags,
        )
    };
    (r != 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap())
}

fn errno_of<T>(r: std::io::Result<T>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn fuse_links_symlinks_renames_and_open_unlinked_files() {
    require_root();
    let s = Scratch::new("mountns");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let m = s.path("m");
    let guard = rxfs_mount(&img, &m, "rw");

    std::fs::create_dir_all(m.join("x/sub")).unwrap();
    std::fs::create_dir(m.join("y")).unwrap();
    std::fs::create_dir(m.join("y/empty")).unwrap();
    std::fs::write(m.join("x/a"), pattern(1, 10_000)).unwrap();
    std::fs::write(m.join("x/b"), b"bee").unwrap();
    std::fs::write(m.join("y/c"), b"sea").unwrap();
    // Symlinks: inline and a 900-byte remote target.
    std::os::unix::fs::symlink("x/a", m.join("s1")).unwrap();
    let long = "d/".repeat(450);
    std::os::unix::fs::symlink(&long, m.join("s2")).unwrap();
    assert_eq!(
        std::fs::read_link(m.join("s2")).unwrap().as_os_str().len(),
        900
    );
    // Hard links.
    std::fs::hard_link(m.join("x/a"), m.join("y/a2")).unwrap();
    assert_eq!(std::fs::metadata(m.join("x/a")).unwrap().nlink(), 2);
    // Renames.
    std::fs::rename(m.join("x/b"), m.join("y/b")).unwrap();
    std::fs::rename(m.join("y/c"), m.join("y/b")).unwrap();
    std::fs::rename(m.join("x/sub"), m.join("y/empty")).unwrap();
    assert_eq!(std::fs::metadata(m.join("x")).unwrap().nlink(), 2);
    assert_eq!(
        renameat2(&m.join("s1"), &m.join("y/a2"), libc::RENAME_NOREPLACE),
        Some(libc::EEXIST)
    );
    assert_eq!(
        renameat2(&m.join("s1"), &m.join("y/empty"), libc::RENAME_EXCHANGE),
        None
    );
    assert!(std::fs::symlink_metadata(m.join("y/empty"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::metadata(m.join("s1")).unwrap().is_dir());
    assert_eq!(
        errno_of(std::fs::rename(m.join("y"), m.join("s1/inside"))),
        None,
        "y is not below s1"
    );
    assert_eq!(
        errno_of(std::fs::rename(m.join("s1"), m.join("s1/inside/x"))),
        Some(libc::EINVAL)
    );
    std::fs::rename(m.join("s1/inside"), m.join("y")).unwrap();

    // A file unlinked while open: still usable through its descriptor.
    // The free count first settles: an earlier file's preallocation past
    // EOF is given back after its RELEASE is answered.
    let mut before = statvfs(&m);
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let now = statvfs(&m);
        if now.f_bfree == before.f_bfree {
            break;
        }
        before = now;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(m.join("tmp"))
        .unwrap();
    f.write_all(&pattern(2, 300_000)).unwrap();
    std::fs::remove_file(m.join("tmp")).unwrap();
    f.write_all(&pattern(3, 100_000)).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 400_000);
    assert_eq!(&back[..300_000], &pattern(2, 300_000)[..]);
    assert_eq!(f.metadata().unwrap().nlink(), 0);
    // With the write-back cache the data reaches rxfs (and takes blocks)
    // at writeback: force it.
    f.sync_data().unwrap();
    assert!(statvfs(&m).f_bfree < before.f_bfree, "blocks still held");
    drop(f);
    // The kernel forgets the inode after the close: blocks come back.
    assert!(
        wait_until(Duration::from_secs(10), || statvfs(&m).f_bfree
            == before.f_bfree),
        "space of the unlinked file not freed: {} vs {}",
        statvfs(&m).f_bfree,
        before.f_bfree
    );

    let fuse = walk_manifest(&m);
    rxfs_ok(&[OsStr::new("umount"), m.as_os_str()]);
    guard.disarm();
    run_output("xfs_repair", &[OsStr::new("-n"), img.as_os_str()]);
    let k = KernelMount::new(&img, &s.path("k"), "ro");
    let kernel = walk_manifest(&k.dir);
    assert_eq!(
        std::fs::read_link(k.dir.join("s2"))
            .unwrap()
            .as_os_str()
            .len(),
        900
    );
    assert_eq!(std::fs::read(k.dir.join("y/b")).unwrap(), b"sea");
    assert_eq!(
        std::fs::read(k.dir.join("y/a2")).unwrap(),
        pattern(1, 10_000)
    );
    assert_eq!(std::fs::metadata(k.dir.join("y/a2")).unwrap().nlink(), 2);
    assert_eq!(
        std::fs::read_link(k.dir.join("y/empty")).unwrap(),
        Path::new("x/a")
    );
    k.umount();
    assert_same_manifest("kernel after rxfs umount vs FUSE before", &fuse, &kernel);
}
