//! Mounting and serving: pidfile, signals, stats, the fuser session.
//!
//! Order matters: the caller forks (daemon mode) before anything here
//! runs; we block the termination signals and SIGUSR1 (so every thread
//! created after inherits the mask and only the signal thread receives
//! them, and a stats request can never kill us), take the pidfile lock,
//! start the stats file, mount (fuser's handshake), and only then report
//! ready. The session loop ends when the kernel drops the connection: on
//! `rxfs umount`, `fusermount3 -u`, `umount`, or a SIGINT/SIGTERM/SIGHUP,
//! which we turn into a lazy unmount. Then every event loop ends (each
//! answers the request it is running), the filesystem is unmounted
//! ([`Filesystem::unmount`]: log forced, metadata written back, unmount
//! record, so the log is clean), the final stats file is written, and only
//! then is the pidfile released, which is what `rxfs umount` waits for.
//! A `kill -9` skips all of this and leaves a dirty log for recovery.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Config, MountOption, Session, SessionACL};
use rxfs::Filesystem;

use super::pidfile::PidFile;
use super::stats_file::StatsWriter;
use super::RxFuse;
use crate::cli_error::EXIT_MOUNT_FAILURE;
use crate::opts::FuseOpts;
use crate::sys;
use crate::{CliError, CliResult};

pub struct ServeConfig {
    pub image: PathBuf,
    pub mountpoint: PathBuf,
    pub fuse: FuseOpts,
    pub foreground: bool,
    /// Mount read-only (the kernel's RO flag; the filesystem was opened so).
    pub read_only: bool,
}

/// Event loops: eight per CPU, 32 to 64. A loop spends most of a request
/// waiting (for the device, or for a log force), and both parallel
/// direct I/O (several overwrites of one file at once, see
/// `fuse::ops::open_flags`) and log batching (seed 002: one log write for
/// the fsyncs of every thread waiting) need as many loops as requests
/// in flight: with 8 of them, 16 or 32 fsyncing threads got ~7.7 fsyncs
/// per log write, with 32 of them 11-12.5.
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    (cpus * 8).clamp(32, 64)
}

/// The fuser session configuration: mount options, who may use the
/// mount, and `threads` event loops, each on its own clone of the
/// `/dev/fuse` descriptor.
pub fn session_config(cfg: &ServeConfig) -> Config {
    let fsname = cfg
        .fuse
        .fsname
        .clone()
        .unwrap_or_else(|| cfg.image.display().to_string());
    let subtype = cfg.fuse.subtype.as_deref().unwrap_or("rxfs");
    let mut o = vec![
        MountOption::FSName(fsname),
        if cfg.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        },
        MountOption::DefaultPermissions,
    ];
    if !subtype.is_empty() {
        o.push(MountOption::CUSTOM(format!("subtype={subtype}")));
    }
    if cfg.fuse.auto_unmount {
        o.push(MountOption::AutoUnmount);
    }
    for f in &cfg.fuse.flags {
        o.push(match f.as_str() {
            "dev" => MountOption::Dev,
            "nodev" => MountOption::NoDev,
            "suid" => MountOption::Suid,
            "nosuid" => MountOption::NoSuid,
            "exec" => MountOption::Exec,
            "noexec" => MountOption::NoExec,
            "atime" => MountOption::Atime,
            "noatime" => MountOption::NoAtime,
            "sync" => MountOption::Sync,
            "dirsync" => MountOption::DirSync,
            other => MountOption::CUSTOM(other.to_string()),
        });
    }
    let mut c = Config::default();
    c.mount_options = o;
    c.acl = if cfg.fuse.allow_other {
        SessionACL::All
    } else if cfg.fuse.auto_unmount {
        // fuser 0.18 refuses auto_unmount with the owner-only ACL; root
        // and the owner is the nearest it accepts (the kernel mount gets
        // allow_other, fuser answers other users EACCES; a non-root owner
        // needs user_allow_other in /etc/fuse.conf).
        SessionACL::RootAndOwner
    } else {
        SessionACL::Owner
    };
    c.n_threads = Some(cfg.fuse.threads.unwrap_or_else(default_threads));
    c.clone_fd = true;
    c
}

fn mount_err(msg: String) -> CliError {
    CliError::new(msg).with_code(EXIT_MOUNT_FAILURE)
}

/// Unmount lazily: what a termination signal does.
pub fn lazy_unmount(mnt: &Path) {
    if sys::umount(mnt, libc::MNT_DETACH).is_ok() {
        return;
    }
    let _ = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(mnt)
        .status();
}

/// Mount `fs` and serve it until it is unmounted. `ready` is called once,
/// when the kernel has the mount (or with the error if mounting failed).
pub fn serve(
    fs: Arc<Filesystem>,
    cfg: &ServeConfig,
    ready: &mut dyn FnMut(Result<(), &CliError>),
) -> CliResult<()> {
    let fail = |e: CliError, ready: &mut dyn FnMut(Result<(), &CliError>)| {
        ready(Err(&e));
        Err(e)
    };
    let sigset = sys::block_term_signals();
    let pid = match PidFile::acquire(&cfg.mountpoint, &cfg.image) {
        Ok(p) => p,
        Err(e) => return fail(mount_err(format!("pidfile: {e}")), ready),
    };
    let stats = match StatsWriter::start(fs.clone(), &cfg.mountpoint) {
        Ok(s) => s,
        Err(e) => return fail(mount_err(format!("stats file: {e}")), ready),
    };
    let rx = RxFuse::new(fs.clone(), cfg.foreground).with_idmap(cfg.fuse.allow_other);
    let core = rx.core();
    let session = match Session::new(rx, &cfg.mountpoint, &session_config(cfg)) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                mount_err(format!("mounting on {}: {e}", cfg.mountpoint.display())),
                ready,
            )
        }
    };
    let _ = core.notifier.set(session.notifier());
    let _ = core.mountpoint.set(cfg.mountpoint.clone());
    drop(core);
    ready(Ok(()));
    let mnt = cfg.mountpoint.clone();
    let request_stats = stats.requester();
    let _ = std::thread::Builder::new()
        .name("rxfs-signals".into())
        .spawn(move || loop {
            match sys::sigwait(&sigset) {
                libc::SIGUSR1 => request_stats(),
                _ => lazy_unmount(&mnt),
            }
        });
    // `run` returns when every event loop has ended (each answered the
    // requests it read) and drops the request handlers: then nothing but
    // `fs` refers to the filesystem.
    let r = session.run();
    let unmounted = fs.unmount();
    let err = unmounted.as_ref().err().map(|e| e.to_string());
    stats.finish(&fs, err.clone());
    drop(fs);
    // The pidfile lock lasts until process exit.
    pid.release_at_exit();
    r.map_err(|e| CliError::new(format!("FUSE session: {e}")))?;
    match err {
        Some(e) => Err(CliError::new(format!(
            "unmounting {}: {e}",
            cfg.image.display()
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl_of(allow_other: bool, auto_unmount: bool) -> SessionACL {
        let cfg = ServeConfig {
            image: "img".into(),
            mountpoint: "mnt".into(),
            fuse: FuseOpts {
                allow_other,
                auto_unmount,
                threads: Some(3),
                ..FuseOpts::default()
            },
            foreground: true,
            read_only: false,
        };
        let c = session_config(&cfg);
        assert_eq!(c.n_threads, Some(3));
        assert!(c.clone_fd);
        c.acl
    }

    #[test]
    fn who_may_use_the_mount() {
        assert_eq!(acl_of(false, false), SessionACL::Owner);
        assert_eq!(acl_of(true, false), SessionACL::All);
        assert_eq!(acl_of(true, true), SessionACL::All);
        // fuser 0.18 refuses auto_unmount with Owner.
        assert_eq!(acl_of(false, true), SessionACL::RootAndOwner);
    }
}
