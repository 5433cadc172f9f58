//! Mounting and serving: pidfile, signals, stats, the FUSE session.
//!
//! Order matters: the caller forks (daemon mode) before anything here
//! runs; we block the termination signals and SIGUSR1 (so every thread
//! created after inherits the mask and only the signal thread receives
//! them, and a stats request can never kill us), take the pidfile lock,
//! start the stats file, mount, and only then report
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

use super::wire::{Acl, MountSpec, Session};
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

/// What to mount, and who may use it beyond the kernel's checks.
pub fn mount_spec(cfg: &ServeConfig) -> (MountSpec, Acl) {
    let fsname = cfg
        .fuse
        .fsname
        .clone()
        .unwrap_or_else(|| cfg.image.display().to_string());
    let subtype = cfg.fuse.subtype.as_deref().unwrap_or("rxfs");
    let acl = if cfg.fuse.allow_other {
        Acl::All
    } else if cfg.fuse.auto_unmount {
        // auto_unmount needs fusermount3, which mounts with allow_other
        // only if asked; root and the owner is what a private mount that
        // outlives a crash can offer (a non-root owner needs
        // user_allow_other in /etc/fuse.conf), other users get EACCES.
        Acl::RootAndOwner
    } else {
        Acl::Owner
    };
    let spec = MountSpec {
        fsname,
        subtype: (!subtype.is_empty()).then(|| subtype.to_string()),
        read_only: cfg.read_only,
        allow_other: acl != Acl::Owner,
        default_permissions: true,
        auto_unmount: cfg.fuse.auto_unmount,
        options: cfg.fuse.flags.clone(),
    };
    (spec, acl)
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
    let rx = RxFuse::new(fs.clone())
        .with_idmap(cfg.fuse.allow_other)
        .with_uring(cfg.fuse.uring)
        .with_writeback_cache(cfg.fuse.writeback_cache && !fs.options().read_only);
    let core = rx.core();
    if cfg.fuse.uring == Some(true) {
        if let Err(m) = super::wire::uring::offered() {
            return fail(mount_err(format!("fuse_uring=on: {m}")), ready);
        }
    }
    let (spec, acl) = mount_spec(cfg);
    let threads = cfg.fuse.threads.unwrap_or_else(default_threads);
    let session = match Session::mount(&cfg.mountpoint, &spec, threads, acl) {
        Ok(s) => s,
        Err(e) => {
            return fail(
                mount_err(format!("mounting on {}: {e}", cfg.mountpoint.display())),
                ready,
            )
        }
    };
    let _ = core.notifier.set(session.notifier());
    let _ = core
        .mountpoint
        .set(super::mount_table::ReadOnlyWatch::new(&cfg.mountpoint));
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
    let r = session.run(Arc::new(rx));
    if r.is_err() {
        // The session failed (INIT refused): no mount without a daemon.
        lazy_unmount(&cfg.mountpoint);
    }
    let unmounted = fs.unmount();
    let err = unmounted.as_ref().err().map(|e| e.to_string());
    stats.finish(&fs, err.clone());
    drop(fs);
    super::utab::remove(&cfg.mountpoint);
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

    fn spec_of(allow_other: bool, auto_unmount: bool) -> (MountSpec, Acl) {
        let cfg = ServeConfig {
            image: "img".into(),
            mountpoint: "mnt".into(),
            fuse: FuseOpts {
                allow_other,
                auto_unmount,
                threads: Some(3),
                flags: vec!["suid".into()],
                ..FuseOpts::default()
            },
            read_only: false,
        };
        mount_spec(&cfg)
    }

    #[test]
    fn who_may_use_the_mount() {
        let (s, acl) = spec_of(false, false);
        assert_eq!(acl, Acl::Owner);
        assert!(!s.allow_other && s.default_permissions);
        assert_eq!(
            (s.fsname.as_str(), s.subtype.as_deref()),
            ("img", Some("rxfs"))
        );
        assert_eq!(s.options, ["suid"]);
        assert_eq!(spec_of(true, false).1, Acl::All);
        assert_eq!(spec_of(true, true).1, Acl::All);
        let (s, acl) = spec_of(false, true);
        assert_eq!(acl, Acl::RootAndOwner);
        assert!(s.allow_other && s.auto_unmount);
    }
}
