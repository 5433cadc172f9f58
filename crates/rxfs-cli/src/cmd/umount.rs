//! `rxfs umount`: unmount and wait until the daemon has let go of the image.
//!
//! The daemon unmounts the filesystem (log forced, metadata written back,
//! unmount record) before it releases its pidfile, so once the wait is
//! over the image is clean; a failure of that unmount is read back from
//! the daemon's final stats file and reported here.

use std::path::PathBuf;
use std::time::Duration;

use crate::fuse::pidfile::{normalize_mountpoint, open_existing, read_pid, wait_released};
use crate::fuse::stats_file::{self, Snapshot};
use crate::sys;
use crate::{CliError, CliResult};

/// Unmount an rxfs mount and wait for its daemon to exit.
///
/// When this returns, the daemon has exited: everything is on disk, the log
/// is clean and the image is closed. Uses fusermount3 -u (umount(2) if
/// fusermount3 is missing).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The mount point.
    pub mountpoint: PathBuf,
    /// Lazy unmount: detach now, finish when the last user is gone
    /// (then the wait may time out).
    #[arg(short = 'z', long)]
    pub lazy: bool,
    /// Seconds to wait for the daemon to exit.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

pub fn run(a: Args) -> CliResult<()> {
    let mnt = normalize_mountpoint(&a.mountpoint)
        .map_err(|e| CliError::io(a.mountpoint.display(), &e))?;
    let pidfile = open_existing(&mnt);
    let mut cmd = std::process::Command::new("fusermount3");
    cmd.arg("-u");
    if a.lazy {
        cmd.arg("-z");
    }
    cmd.arg(&mnt);
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(_) => {
            return Err(CliError::new(format!(
                "{}: unmount failed (see the fusermount3 message above)",
                mnt.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let flags = if a.lazy { libc::MNT_DETACH } else { 0 };
            sys::umount(&mnt, flags).map_err(|e| CliError::io(mnt.display(), &e))?;
        }
        Err(e) => return Err(CliError::io("fusermount3", &e)),
    }
    if let Some(f) = pidfile {
        let pid = read_pid(&f);
        let released = wait_released(&f, Duration::from_secs(a.timeout))
            .map_err(|e| CliError::io("pidfile", &e))?;
        if !released {
            return Err(CliError::new(format!(
                "{}: unmounted, but the daemon (pid {}) has not exited after {} s",
                mnt.display(),
                pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
                a.timeout
            )));
        }
        let last = Snapshot::read(&stats_file::path_for(&mnt));
        if let Some(Snapshot {
            pid: spid,
            live: false,
            error: Some(e),
            ..
        }) = last
        {
            if Some(spid) == pid {
                return Err(CliError::new(format!(
                    "{}: unmounted, but the filesystem was not unmounted cleanly: {e}",
                    mnt.display()
                )));
            }
        }
    }
    Ok(())
}
