//! Helpers for tests that use the kernel's XFS as the oracle.
//!
//! These tests need root, mkfs.xfs and loop mounts. They fail (never skip)
//! when those are missing, unless RXFS_SKIP_KERNEL_TESTS=1 is set explicitly.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether kernel tests were explicitly disabled.
pub fn kernel_tests_disabled() -> bool {
    std::env::var("RXFS_SKIP_KERNEL_TESTS").as_deref() == Ok("1")
}

pub fn run(cmd: &str, args: &[&str]) {
    run_retry(cmd, args, 1);
}

/// Run a command, retrying transient failures (loop device allocation races
/// between parallel tests, a briefly busy mount point).
pub fn run_retry(cmd: &str, args: &[&str], tries: u32) {
    let mut last = String::new();
    for attempt in 0..tries {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(200 * attempt as u64));
        }
        let out = Command::new(cmd)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd}: {e} (is it installed?)"));
        if out.status.success() {
            return;
        }
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    panic!("{cmd} {args:?} failed ({tries} tries): {last}");
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("rxfs-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    pub fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Make an image with mkfs.xfs.
pub fn mkfs(img: &Path, size: u64, opts: &[&str]) {
    let f = std::fs::File::create(img).unwrap();
    f.set_len(size).unwrap();
    drop(f);
    let mut args: Vec<&str> = vec!["-f", "-q"];
    args.extend_from_slice(opts);
    args.push(img.to_str().unwrap());
    run("mkfs.xfs", &args);
}

/// A kernel loop mount, unmounted on drop.
pub struct KernelMount {
    pub dir: PathBuf,
    mounted: bool,
}

impl KernelMount {
    pub fn new(img: &Path, dir: &Path, opts: &str) -> Self {
        assert!(
            unsafe { libc::geteuid() } == 0,
            "kernel oracle tests need root (set RXFS_SKIP_KERNEL_TESTS=1 to disable them)"
        );
        std::fs::create_dir_all(dir).unwrap();
        let o = if opts.is_empty() {
            "loop".to_string()
        } else {
            format!("loop,{opts}")
        };
        run(
            "mount",
            &["-o", &o, img.to_str().unwrap(), dir.to_str().unwrap()],
        );
        KernelMount {
            dir: dir.to_path_buf(),
            mounted: true,
        }
    }

    pub fn umount(mut self) {
        self.do_umount();
    }

    fn do_umount(&mut self) {
        if self.mounted {
            self.mounted = false;
            run_retry("umount", &[self.dir.to_str().unwrap()], 5);
        }
    }
}

impl Drop for KernelMount {
    fn drop(&mut self) {
        if self.mounted {
            self.mounted = false;
            let _ = Command::new("umount").arg(&self.dir).status();
        }
    }
}

/// Open an image read-only through rxfs.
pub fn open_ro(img: &Path) -> std::sync::Arc<rxfs::Filesystem> {
    rxfs::Filesystem::open_path(
        img,
        None,
        rxfs::MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Rewrite `len` bytes at `daddr` of `img` through `edit`, then restore the
/// CRC at `crc_off` so only the structural checks can catch the damage.
/// Returns the original bytes (for [`restore`]).
pub fn patch(
    img: &Path,
    daddr: u64,
    len: usize,
    crc_off: usize,
    edit: impl FnOnce(&mut [u8]),
) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut b = vec![0u8; len];
    f.seek(SeekFrom::Start(daddr << 9)).unwrap();
    f.read_exact(&mut b).unwrap();
    let orig = b.clone();
    edit(&mut b);
    rxfs::format::crc::update(&mut b, crc_off);
    f.seek(SeekFrom::Start(daddr << 9)).unwrap();
    f.write_all(&b).unwrap();
    orig
}

/// Put back bytes saved by [`patch`].
pub fn restore(img: &Path, daddr: u64, orig: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    f.seek(SeekFrom::Start(daddr << 9)).unwrap();
    f.write_all(orig).unwrap();
}

/// Assert `r` is a corruption error.
pub fn assert_corrupt<T>(r: rxfs::Result<T>, what: &str) {
    match r {
        Err(e) if e.is_corrupt() => {}
        Err(e) => panic!("{what}: expected a corruption error, got {e:?}"),
        Ok(_) => panic!("{what}: expected a corruption error, got a result"),
    }
}
