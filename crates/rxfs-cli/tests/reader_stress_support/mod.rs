//! Parts of `reader_stress_fuse`: a foreground `rxfs mount` whose stderr
//! (where it reports corruption errors) is kept, a tally of system calls
//! and the errors they got, and thin libc wrappers that return the errno.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use super::common::*;

/// `rxfs mount -f IMG MNT`, its stderr in a file.
pub struct Daemon {
    pub mnt: PathBuf,
    log: PathBuf,
    child: Child,
    guard: Option<KernelMount>,
}

impl Daemon {
    /// With RXFS_READER_STRESS_OPTS set, `-o` those options (a cell of
    /// the mount-option matrix, e.g. `rw,writeback_cache=on,threads=1`).
    pub fn start(s: &Scratch, img: &Path) -> Daemon {
        let mnt = s.path("m");
        std::fs::create_dir_all(&mnt).unwrap();
        let log = s.path("daemon.log");
        let opts: Vec<String> = match std::env::var("RXFS_READER_STRESS_OPTS") {
            Ok(o) if !o.is_empty() => vec!["-o".into(), o],
            _ => Vec::new(),
        };
        let child = Command::new(RXFS)
            .args([OsStr::new("mount"), OsStr::new("-f")])
            .args([img.as_os_str(), mnt.as_os_str()])
            .args(&opts)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let guard = Some(KernelMount::adopt(&mnt));
        assert!(
            wait_until(Duration::from_secs(20), || is_mounted(&mnt)),
            "rxfs mount -f: not mounted after 20 s: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Daemon {
            mnt,
            log,
            child,
            guard,
        }
    }

    /// `rxfs umount`, wait for the daemon; returns the lines of its log
    /// that report corruption.
    pub fn stop(mut self) -> Vec<String> {
        rxfs_ok(&[OsStr::new("umount"), self.mnt.as_os_str()]);
        self.guard.take().unwrap().disarm();
        let status = self.child.wait().unwrap();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(status.success(), "rxfs mount -f exited {status}: {log}");
        log.lines()
            .filter(|l| l.to_ascii_lowercase().contains("corrupt"))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // A failed test: the mount goes (KernelMount's drop), then the
        // daemon ends with its connection.
        drop(self.guard.take());
        let _ = self.child.wait();
    }
}

/// System calls made and the errors they got, by call and errno.
#[derive(Default)]
pub struct Tally {
    calls: AtomicU64,
    errors: Mutex<BTreeMap<String, (u64, String)>>,
}

impl Tally {
    pub fn call(&self) {
        self.calls.fetch_add(1, Relaxed);
    }

    /// `what` failed with `errno`; `detail` says on what (the first one
    /// of each kind is kept).
    pub fn error(&self, what: &str, errno: i32, detail: String) {
        let key = format!("{what}: {}", errno_name(errno));
        let mut m = self.errors.lock().unwrap();
        m.entry(key).or_insert((0, detail)).0 += 1;
    }

    pub fn count(&self) -> u64 {
        self.errors.lock().unwrap().values().map(|v| v.0).sum()
    }

    /// How many got EUCLEAN.
    pub fn euclean(&self) -> u64 {
        let m = self.errors.lock().unwrap();
        m.iter()
            .filter(|(k, _)| k.ends_with("EUCLEAN"))
            .map(|(_, v)| v.0)
            .sum()
    }

    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} calls, {} errors ({} EUCLEAN)",
            self.calls.load(Relaxed),
            self.count(),
            self.euclean()
        );
        for (k, (n, first)) in self.errors.lock().unwrap().iter() {
            s += &format!("\n  {n:6} x {k}");
            if !first.is_empty() {
                s += &format!(" (first: {first})");
            }
        }
        s
    }
}

pub fn errno_name(e: i32) -> String {
    match e {
        libc::EUCLEAN => "EUCLEAN".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::ENODATA => "ENODATA".into(),
        libc::EIO => "EIO".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::ERANGE => "ERANGE".into(),
        e => format!("errno {e}"),
    }
}

/// Check a shape's outcome: no error, nothing corrupt in the daemon's
/// log. Prints the counts either way.
pub fn assert_clean(shape: &str, t: &Tally, log: &[String]) {
    eprintln!("{shape}: {}", t.summary());
    eprintln!("{shape}: {} daemon log lines report corruption", log.len());
    for l in log.iter().take(5) {
        eprintln!("  {l}");
    }
    assert!(
        t.count() == 0 && log.is_empty(),
        "{shape}: {} errors ({} EUCLEAN), {} corruption reports in the daemon log",
        t.count(),
        t.euclean(),
        log.len()
    );
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// lgetxattr: the value, or the errno.
pub fn getxattr(p: &Path, name: &str) -> Result<Vec<u8>, i32> {
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 65536];
    // SAFETY: NUL-terminated strings and a live buffer of the length given.
    let r = unsafe {
        libc::lgetxattr(
            cpath(p).as_ptr(),
            n.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r < 0 {
        return Err(errno());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

/// llistxattr: the names, or the errno.
pub fn listxattr(p: &Path) -> Result<Vec<Vec<u8>>, i32> {
    let mut buf = vec![0u8; 65536];
    // SAFETY: a NUL-terminated path and a live buffer of the length given.
    let r = unsafe { libc::llistxattr(cpath(p).as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(errno());
    }
    buf.truncate(r as usize);
    Ok(buf
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// lsetxattr (0: create or replace), or the errno.
pub fn setxattr(p: &Path, name: &str, value: &[u8]) -> Result<(), i32> {
    let n = CString::new(name).unwrap();
    // SAFETY: NUL-terminated strings and a live value slice.
    let r = unsafe {
        libc::lsetxattr(
            cpath(p).as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// lremovexattr, or the errno.
pub fn removexattr(p: &Path, name: &str) -> Result<(), i32> {
    let n = CString::new(name).unwrap();
    // SAFETY: NUL-terminated strings.
    let r = unsafe { libc::lremovexattr(cpath(p).as_ptr(), n.as_ptr()) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// The errno of an io::Error (EIO when it has none).
pub fn os(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// statx with AT_STATX_FORCE_SYNC: the kernel asks the daemon (FUSE_GETATTR)
/// even while it holds attributes that are still valid.
pub fn stat_sync(p: &Path) -> Result<(), i32> {
    // SAFETY: a zeroed statx is a valid output buffer.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live output buffer.
    let r = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            cpath(p).as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_FORCE_SYNC,
            libc::STATX_BASIC_STATS,
            &mut st,
        )
    };
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}
