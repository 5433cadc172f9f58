//! Helpers for tests that use the kernel's XFS as the oracle.
//!
//! These tests need root, mkfs.xfs and loop mounts: they are marked
//! `#[ignore = "kernel oracle: ..."]`, so a plain `cargo test` lists them as
//! ignored, and `cargo test -- --include-ignored` (scripts/test-all) runs
//! them; run, they fail (never skip) when their tools are missing. A few
//! tests with kernel and non-kernel parts still check
//! RXFS_SKIP_KERNEL_TESTS=1 to leave the kernel part out.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether kernel tests were explicitly disabled.
pub fn kernel_tests_disabled() -> bool {
    std::env::var("RXFS_SKIP_KERNEL_TESTS").as_deref() == Ok("1")
}

/// Fail unless running as root (loop and FUSE mounts need it).
pub fn require_root() {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "these tests need root (set RXFS_SKIP_KERNEL_TESTS=1 to disable them)"
    );
}

/// Fail unless every tool is on PATH.
pub fn require_tools(tools: &[&str]) {
    for tool in tools {
        let ok = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(ok, "{tool} is missing (or set RXFS_SKIP_KERNEL_TESTS=1)");
    }
}

/// Environment under which mkfs.xfs accepts filesystems (and logs) smaller
/// than it otherwise supports: the variables fstests sets.
pub const FSTESTS_ENV: &[(&str, &str)] = &[
    ("TEST_DIR", "/tmp"),
    ("TEST_DEV", "/dev/null"),
    ("QA_CHECK_FS", "xfs"),
];

pub fn run(cmd: &str, args: &[&str]) {
    run_retry(cmd, args, 1);
}

/// Run a command, retrying transient failures (loop device allocation races
/// between parallel tests, a briefly busy mount point).
pub fn run_retry(cmd: &str, args: &[&str], tries: u32) {
    run_with(cmd, args, &[], tries);
}

/// Run a command once; returns its output (stdout for parsing).
pub fn run_output<S: AsRef<OsStr>>(cmd: &str, args: &[S]) -> Output {
    run_with(cmd, args, &[], 1)
}

/// Run a command with `env` added to its environment, up to `tries` times
/// (200 ms more pause before each retry); returns the output of the run
/// that succeeded, panics with the last failure's output.
pub fn run_with<S: AsRef<OsStr>>(
    cmd: &str,
    args: &[S],
    env: &[(&str, &str)],
    tries: u32,
) -> Output {
    let args: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
    let mut last = String::new();
    for attempt in 0..tries {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(200 * attempt as u64));
        }
        let out = Command::new(cmd)
            .args(&args)
            .envs(env.iter().copied())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd}: {e} (is it installed?)"));
        if out.status.success() {
            return out;
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
        // RXFS_KEEP_SCRATCH=1 keeps a failing test's images for a post-mortem.
        if std::thread::panicking() && std::env::var_os("RXFS_KEEP_SCRATCH").is_some() {
            eprintln!("kept scratch {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Make an image with mkfs.xfs.
pub fn mkfs(img: &Path, size: u64, opts: &[&str]) {
    mkfs_with(img, size, opts, &[]);
}

/// [`mkfs`] with `env` added to mkfs.xfs's environment (e.g.
/// [`FSTESTS_ENV`] for small logs on small filesystems).
pub fn mkfs_with(img: &Path, size: u64, opts: &[&str], env: &[(&str, &str)]) {
    let f = std::fs::File::create(img).unwrap();
    f.set_len(size).unwrap();
    drop(f);
    let mut args: Vec<&str> = vec!["-f", "-q"];
    args.extend_from_slice(opts);
    args.push(img.to_str().unwrap());
    run_with("mkfs.xfs", &args, env, 1);
}

/// A mount (a kernel loop mount, or any mount taken over with
/// [`KernelMount::adopt`]), unmounted on drop: plainly, else lazily.
pub struct KernelMount {
    pub dir: PathBuf,
    mounted: bool,
    /// The loop device [`KernelMount::on_rw_loop`] attached: detached on
    /// drop, after the unmount.
    loopdev: Option<String>,
}

impl KernelMount {
    pub fn new(img: &Path, dir: &Path, opts: &str) -> Self {
        require_root();
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
        KernelMount::adopt(dir)
    }

    /// Mount `img` with `opts` (read-only ones) through a loop device
    /// attached read-write: log recovery on a read-only mount still writes
    /// to the device, which the read-only loop of `mount -o loop,ro`
    /// refuses.
    pub fn on_rw_loop(img: &Path, dir: &Path, opts: &str) -> Self {
        require_root();
        std::fs::create_dir_all(dir).unwrap();
        let out = run_output("losetup", &["-f", "--show", img.to_str().unwrap()]);
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let mut m = KernelMount {
            dir: dir.to_path_buf(),
            mounted: false,
            loopdev: Some(dev),
        };
        let dev = m.loopdev.as_deref().unwrap();
        run("mount", &["-o", opts, dev, dir.to_str().unwrap()]);
        m.mounted = true;
        m
    }

    /// Take responsibility for a mount made some other way (e.g. FUSE).
    pub fn adopt(dir: &Path) -> Self {
        KernelMount {
            dir: dir.to_path_buf(),
            mounted: true,
            loopdev: None,
        }
    }

    /// Unmount, retrying for about 9 s while it is busy (udev, a slow
    /// daemon).
    pub fn umount(mut self) {
        self.do_umount();
    }

    /// Forget the mount (someone else unmounted it).
    pub fn disarm(mut self) {
        self.mounted = false;
    }

    fn do_umount(&mut self) {
        if self.mounted {
            self.mounted = false;
            run_retry("umount", &[self.dir.to_str().unwrap()], 10);
        }
    }
}

impl Drop for KernelMount {
    fn drop(&mut self) {
        if self.mounted {
            self.mounted = false;
            let plain = Command::new("umount").arg(&self.dir).output();
            if !plain.is_ok_and(|o| o.status.success()) {
                let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            }
        }
        if let Some(dev) = self.loopdev.take() {
            let _ = Command::new("losetup").args(["-d", &dev]).status();
        }
    }
}

/// statvfs(2) of a path (on a mount point: the kernel's counters).
pub fn statvfs(p: &Path) -> libc::statvfs {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::statvfs(c.as_ptr(), &mut st) },
        0,
        "statvfs {}",
        p.display()
    );
    st
}

/// Deterministic pseudo-random bytes (xorshift64) for file contents.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
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

/// Open an image and its realtime device read-only through rxfs.
pub fn open_ro_rt(img: &Path, rt: &Path) -> std::sync::Arc<rxfs::Filesystem> {
    rxfs::Filesystem::open_path(
        img,
        Some(rt),
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

/// A path as a C string, for libc calls.
pub fn cpath(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// lsetxattr, asserting success.
pub fn set_xattr(p: &Path, name: &str, value: &[u8]) {
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: both strings are NUL-terminated and value is a live slice.
    let rc = unsafe {
        libc::lsetxattr(
            cpath(p).as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(
        rc,
        0,
        "setxattr {name} on {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
}

/// mknod, asserting success.
pub fn mknod(p: &Path, mode: libc::mode_t, dev: libc::dev_t) {
    // SAFETY: the path is NUL-terminated.
    let rc = unsafe { libc::mknod(cpath(p).as_ptr(), mode, dev) };
    assert_eq!(
        rc,
        0,
        "mknod {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
}
