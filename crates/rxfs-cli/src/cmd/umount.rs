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
    if crate::fuse::mount_table::types_at(&mnt).is_empty() {
        // (Only now look at the path: a mount whose daemon died or shut
        // down answers stat with an error.)
        if let Err(e) = std::fs::symlink_metadata(&mnt) {
            return Err(CliError::io(mnt.display(), &e).with_code(32));
        }
        return Err(CliError::new(format!("{}: not mounted", mnt.display())).with_code(32));
    }
    let pidfile = open_existing(&mnt);
    let mut cmd = std::process::Command::new("fusermount3");
    cmd.arg("-u");
    if a.lazy {
        cmd.arg("-z");
    }
    cmd.arg(&mnt);
    match cmd.output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            // fusermount3's own words, in our one line.
            let said = String::from_utf8_lossy(&o.stderr);
            let why = said
                .trim()
                .rsplit(": ")
                .next()
                .filter(|w| !w.is_empty())
                .unwrap_or("fusermount3 failed");
            return Err(
                CliError::new(format!("{}: unmount failed: {why}", mnt.display())).with_code(32),
            );
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let flags = if a.lazy { libc::MNT_DETACH } else { 0 };
            sys::umount(&mnt, flags).map_err(|e| CliError::io(mnt.display(), &e))?;
        }
        Err(e) => return Err(CliError::io("fusermount3", &e)),
    }
    wait_daemon(&mnt, pidfile, a.timeout)
}

/// The name umount(8) runs for a `fuse.rxfs` mount: `/sbin/umount.fuse.rxfs`
/// (installed by `rxfs install-helper` beside `mount.fuse.rxfs`).
pub const HELPER_NAME: &str = "umount.fuse.rxfs";

/// Whether the binary was started as umount(8)'s helper.
pub fn is_helper_name(argv: &[std::ffi::OsString]) -> bool {
    argv.first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == HELPER_NAME)
}

/// umount(8)'s helper: `umount.fuse.rxfs MNT [-flnrv] [-t TYPE]`. Unmounts
/// (umount(2); fusermount3 -u when that is not permitted, for a user's
/// own mount) and, unless lazy, returns only when the daemon has written
/// everything, left the log clean and closed the image, so that a plain
/// `umount MNT` gives what `rxfs umount MNT` gives.
pub fn run_helper(args: &[std::ffi::OsString]) -> CliResult<()> {
    use std::os::unix::ffi::OsStrExt;
    let mut target = None;
    let (mut lazy, mut force) = (false, false);
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_bytes();
        match a {
            b"-t" => i += 1,
            b"-N" => {
                return Err(CliError::usage(
                    "umount.fuse.rxfs: -N (another mount namespace) is not supported",
                ))
            }
            _ if a.starts_with(b"-") => {
                for c in &a[1..] {
                    match c {
                        b'l' => lazy = true,
                        b'f' => force = true,
                        // -n (no mtab), -r (remount ro on failure), -v,
                        // -i (no helpers): nothing to do here.
                        b'n' | b'r' | b'v' | b'i' | b'd' => {}
                        _ => {
                            return Err(CliError::usage(format!(
                                "umount.fuse.rxfs: unknown option '-{}'",
                                *c as char
                            )))
                        }
                    }
                }
            }
            _ if target.is_none() => target = Some(PathBuf::from(&args[i])),
            _ => {
                return Err(CliError::usage(
                    "usage: umount.fuse.rxfs MOUNTPOINT [-flnrv] [-t TYPE]",
                ))
            }
        }
        i += 1;
    }
    let target =
        target.ok_or_else(|| CliError::usage("usage: umount.fuse.rxfs MOUNTPOINT [-flnrv]"))?;
    let mnt = normalize_mountpoint(&target).map_err(|e| CliError::io(target.display(), &e))?;
    let pidfile = open_existing(&mnt);
    let mut flags = 0;
    if lazy {
        flags |= libc::MNT_DETACH;
    }
    if force {
        flags |= libc::MNT_FORCE;
    }
    match sys::umount(&mnt, flags) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            // A user's own FUSE mount: fusermount3 may unmount it.
            let mut cmd = std::process::Command::new("fusermount3");
            cmd.arg("-u");
            if lazy {
                cmd.arg("-z");
            }
            let ok = cmd.arg(&mnt).status().is_ok_and(|s| s.success());
            if !ok {
                return Err(CliError::io(mnt.display(), &e).with_code(32));
            }
        }
        Err(e) => return Err(CliError::io(mnt.display(), &e).with_code(32)),
    }
    // A helper keeps the mount tables: the daemon would drop the entry
    // too, but only once it has finished.
    crate::fuse::utab::remove(&mnt);
    if lazy {
        // Detached: the daemon finishes when the last user lets go.
        return Ok(());
    }
    wait_daemon(&mnt, pidfile, 60).map_err(|e| e.with_code(32))
}

/// Wait for the daemon of `mnt` (its pidfile) to exit, then report a
/// failed unmount from its final stats file.
fn wait_daemon(
    mnt: &std::path::Path,
    pidfile: Option<std::fs::File>,
    timeout: u64,
) -> CliResult<()> {
    if let Some(f) = pidfile {
        let pid = read_pid(&f);
        let released = wait_released(&f, Duration::from_secs(timeout))
            .map_err(|e| CliError::io("pidfile", &e))?;
        if !released {
            return Err(CliError::new(format!(
                "{}: unmounted, but the daemon (pid {}) has not exited after {} s",
                mnt.display(),
                pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
                timeout
            )));
        }
        let last = Snapshot::read(&stats_file::path_for(mnt));
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
