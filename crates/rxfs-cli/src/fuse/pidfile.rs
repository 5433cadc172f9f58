//! The pidfile a mount daemon holds, so `rxfs umount` can wait for it.
//!
//! One file per mount point, `<runtime dir>/<hash of the mount point>.pid`,
//! holding "pid\nmount point\nimage\n". The daemon keeps an exclusive
//! flock on it for its whole life and unlinks it just before exiting; the
//! kernel drops the lock when the process ends, however it ends. So
//! `rxfs umount` opens the file, unmounts, and then waits for a shared lock:
//! once it has it, the daemon has closed the image.
//!
//! Invariant: the file at the path is the one whose lock the live daemon
//! holds. A daemon that wins the lock re-checks that the path still names
//! the inode it locked (an exiting daemon may just have unlinked it) and
//! retries otherwise.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::sys;

/// How long a new daemon waits for an old one on the same mount point.
const ACQUIRE_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

pub fn runtime_dir() -> PathBuf {
    if sys::is_root() {
        return PathBuf::from("/run/rxfs");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("rxfs"),
        // SAFETY: getuid has no preconditions.
        _ => std::env::temp_dir().join(format!("rxfs-{}", unsafe { libc::getuid() })),
    }
}

/// The pidfile of a (normalized) mount point.
pub fn path_for(mountpoint: &Path) -> PathBuf {
    let h = Sha256::digest(mountpoint.as_os_str().as_encoded_bytes());
    let name: String = h[..12].iter().map(|b| format!("{b:02x}")).collect();
    runtime_dir().join(format!("{name}.pid"))
}

/// An absolute mount point path that names the same place before and after
/// the mount (and while a dead daemon leaves it unreadable): the parent is
/// canonicalized, the last component is kept.
pub fn normalize_mountpoint(p: &Path) -> io::Result<PathBuf> {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    };
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) if name != ".." => Ok(parent.canonicalize()?.join(name)),
        _ => abs.canonicalize(),
    }
}

pub struct PidFile {
    /// None once handed over to `release_at_exit`.
    file: Option<File>,
    path: PathBuf,
}

impl PidFile {
    /// Create and lock the pidfile of `mountpoint` for this process.
    pub fn acquire(mountpoint: &Path, image: &Path) -> io::Result<PidFile> {
        let path = path_for(mountpoint);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let deadline = Instant::now() + ACQUIRE_WAIT;
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            if !sys::flock(file.as_raw_fd(), libc::LOCK_EX, true)? {
                if Instant::now() > deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!(
                            "another rxfs daemon still serves {} ({})",
                            mountpoint.display(),
                            path.display()
                        ),
                    ));
                }
                std::thread::sleep(POLL);
                continue;
            }
            // Still the file at the path? (Its last owner may have
            // unlinked it between our open and our lock.)
            let same = match std::fs::metadata(&path) {
                Ok(m) => {
                    let mine = file.metadata()?;
                    m.ino() == mine.ino() && m.dev() == mine.dev()
                }
                Err(_) => false,
            };
            if !same {
                continue;
            }
            file.set_len(0)?;
            let mut f = &file;
            writeln!(
                f,
                "{}\n{}\n{}",
                std::process::id(),
                mountpoint.display(),
                image.display()
            )?;
            return Ok(PidFile {
                file: Some(file),
                path,
            });
        }
    }
}

impl PidFile {
    /// Unlink the pidfile but keep its locked descriptor open until the
    /// process exits, so a waiting `rxfs umount` returns only once this
    /// process is gone (the kernel releases the lock when it closes the
    /// descriptors of an exiting process). Call as the very last step.
    pub fn release_at_exit(mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(f) = self.file.take() {
            let _ = std::os::fd::IntoRawFd::into_raw_fd(f);
        }
    }
}

impl Drop for PidFile {
    /// On an error path: unlink while still holding the lock; the lock
    /// goes with the fd.
    fn drop(&mut self) {
        if let Some(f) = self.file.take() {
            let _ = std::fs::remove_file(&self.path);
            let _ = sys::flock(f.as_raw_fd(), libc::LOCK_UN, false);
        }
    }
}

/// Open the pidfile of a mount point, if a daemon left one.
pub fn open_existing(mountpoint: &Path) -> Option<File> {
    File::open(path_for(mountpoint)).ok()
}

/// Wait until no daemon holds `file`'s lock. Returns false on timeout.
pub fn wait_released(file: &File, timeout: Duration) -> io::Result<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        if sys::flock(file.as_raw_fd(), libc::LOCK_SH, true)? {
            let _ = sys::flock(file.as_raw_fd(), libc::LOCK_UN, false);
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        std::thread::sleep(POLL);
    }
}

/// Whether a daemon still holds `file`'s lock.
pub fn daemon_alive(file: &File) -> io::Result<bool> {
    if sys::flock(file.as_raw_fd(), libc::LOCK_SH, true)? {
        let _ = sys::flock(file.as_raw_fd(), libc::LOCK_UN, false);
        return Ok(false);
    }
    Ok(true)
}

/// The pid a pidfile names (for messages).
pub fn read_pid(file: &File) -> Option<u32> {
    let mut s = String::new();
    let mut f = file;
    io::Read::read_to_string(&mut f, &mut s).ok()?;
    s.lines().next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_keeps_last_component() {
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert_eq!(normalize_mountpoint(Path::new("x")).unwrap(), cwd.join("x"));
        assert_eq!(
            normalize_mountpoint(Path::new("/tmp/./x")).unwrap(),
            Path::new("/tmp").canonicalize().unwrap().join("x")
        );
        assert_ne!(path_for(Path::new("/a")), path_for(Path::new("/b")));
    }
}
