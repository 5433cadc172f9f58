//! Thin safe wrappers over the few libc calls std does not offer:
//! ownership and times without following symlinks, mknod, xattrs, flock,
//! fork/pipe/setsid for the mount daemon, umount.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn lchown(p: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let c = cpath(p)?;
    // SAFETY: c is a valid NUL-terminated string.
    check(unsafe { libc::lchown(c.as_ptr(), uid, gid) })
}

/// Set atime and mtime with nanoseconds, not following a final symlink.
pub fn lutimens(p: &Path, atime: (i64, u32), mtime: (i64, u32)) -> io::Result<()> {
    let c = cpath(p)?;
    let ts = [
        libc::timespec {
            tv_sec: atime.0 as libc::time_t,
            tv_nsec: atime.1 as libc::c_long,
        },
        libc::timespec {
            tv_sec: mtime.0 as libc::time_t,
            tv_nsec: mtime.1 as libc::c_long,
        },
    ];
    // SAFETY: valid path and a two-element timespec array.
    check(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

pub fn mknod(p: &Path, mode: u32, major: u32, minor: u32) -> io::Result<()> {
    let c = cpath(p)?;
    let dev = libc::makedev(major, minor);
    // SAFETY: valid path.
    check(unsafe { libc::mknod(c.as_ptr(), mode as libc::mode_t, dev) })
}

pub fn lsetxattr(p: &Path, name: &[u8], value: &[u8]) -> io::Result<()> {
    let c = cpath(p)?;
    let n = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "xattr name has a NUL"))?;
    // SAFETY: valid strings; value pointer and length describe a live slice.
    check(unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr() as *const libc::c_void,
            value.len(),
            0,
        )
    })
}

/// Whether an open block device is read-only (BLKROGET). Opening such a
/// device for writing succeeds; only the writes fail.
pub fn blk_read_only(f: &std::fs::File) -> io::Result<bool> {
    /// `_IO(0x12, 94)`.
    const BLKROGET: libc::c_ulong = 0x125e;
    let mut ro: libc::c_int = 0;
    // SAFETY: BLKROGET writes one int through the pointer we pass.
    check(unsafe { libc::ioctl(f.as_raw_fd(), BLKROGET as _, &mut ro) })?;
    Ok(ro != 0)
}

/// flock(2); `nonblock` turns EWOULDBLOCK into `Ok(false)`.
pub fn flock(fd: RawFd, op: libc::c_int, nonblock: bool) -> io::Result<bool> {
    let op = if nonblock { op | libc::LOCK_NB } else { op };
    loop {
        // SAFETY: flock on a caller-owned fd.
        let r = unsafe { libc::flock(fd, op) };
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if nonblock => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

pub enum Forked {
    Parent { child: libc::pid_t },
    Child,
}

/// fork(2). Call only while the process is single-threaded.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: the caller guarantees no other threads exist, so the child
    // inherits a consistent heap and no held locks.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent { child }),
    }
}

pub fn setsid() {
    // SAFETY: no preconditions; failure (already a leader) is harmless.
    unsafe {
        libc::setsid();
    }
}

/// Point stdin, stdout and stderr at /dev/null (daemon after startup).
pub fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors.
            unsafe {
                libc::dup2(null.as_raw_fd(), fd);
            }
        }
    }
}

/// umount2(2) with `flags` (0 or MNT_DETACH).
pub fn umount(p: &Path, flags: libc::c_int) -> io::Result<()> {
    let c = cpath(p)?;
    // SAFETY: valid path.
    check(unsafe { libc::umount2(c.as_ptr(), flags) })
}

/// Block SIGINT, SIGTERM, SIGHUP and SIGUSR1 (the stats request) in this
/// thread (and threads it spawns later) and return the set, for a thread
/// that `sigwait`s on it.
pub fn block_term_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local set; pthread_sigmask on self.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Wait for one of the signals in `set`.
pub fn sigwait(set: &libc::sigset_t) -> libc::c_int {
    let mut sig: libc::c_int = 0;
    // SAFETY: set was initialised by block_term_signals.
    unsafe {
        libc::sigwait(set, &mut sig);
    }
    sig
}

/// kill(2).
pub fn kill(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: sending a signal has no memory-safety preconditions.
    check(unsafe { libc::kill(pid, sig) })
}

pub fn waitpid_nohang(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe {
        libc::waitpid(pid, &mut status, libc::WNOHANG);
    }
}

/// Make sure descriptors 0, 1 and 2 are open (on /dev/null if closed), so
/// later opens (/dev/fuse, pipes, images) never land on them.
/// Let SIGPIPE end the process, as it ends other Unix tools that write to
/// a closed pipe (Rust ignores it by default, so every write would fail
/// with EPIPE and `println!` would panic).
pub fn default_sigpipe() {
    // SAFETY: resetting a signal's disposition to its default.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

pub fn ensure_stdio() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            // open returns the lowest free descriptor: this one.
            if let Ok(f) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
            {
                let _ = std::os::fd::IntoRawFd::into_raw_fd(f);
            }
        }
    }
}
