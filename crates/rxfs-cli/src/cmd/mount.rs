//! `rxfs mount`: a FUSE mount (read-write, or read-only with `-o ro`), as
//! a daemon or in the foreground; also the mount(8) helper argument forms.
//!
//! Daemon mode: the process forks while still single-threaded; the child
//! starts a new session, opens the image, mounts, and writes one line to a
//! pipe: `OK`, or `ERR <exit code> <message>`. The parent waits for that
//! line and exits with it, so `rxfs mount` returns only once the kernel
//! has the mount, and mount errors reach the caller with a non-zero exit.
//! The child then points its stdio at /dev/null and serves.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::cli_error::{EXIT_MOUNT_FAILURE, EXIT_USAGE};
use crate::fuse::pidfile::normalize_mountpoint;
use crate::fuse::serve::{serve, ServeConfig};
use crate::opts::{open_image, parse, write_protected, ImageArgs, Opts};
use crate::sys;
use crate::{CliError, CliResult};

/// Mount an image with FUSE (read-write unless -o ro).
///
/// Without -f, returns once the mount is ready and serves in the
/// background; `rxfs umount MNT` (or fusermount3 -u, umount, SIGTERM) ends
/// it, and the daemon unmounts the filesystem cleanly (log forced, metadata
/// written back, unmount record) before it exits; `rxfs umount` waits for
/// that. `rxfs stats MNT` shows its counters.
///
/// Options (-o, comma-separated): rw (the default) or ro; norecovery (only
/// with ro, as the kernel requires); logbufs=N (2-8 in-core log buffers);
/// logbsize=SIZE (16k, 32k, 64k, 128k or 256k; default 256k where the
/// log holds 64 of them, the kernel's 32k otherwise); ablate_delaylog (for
/// benchmarks only: a checkpoint per transaction, as before delayed
/// logging); rtdev=FILE (the realtime device: needed to mount a filesystem
/// with a realtime section read-write; `xfs_io chattr +t DIR` then makes
/// the files created in DIR realtime, and `df DIR` shows the realtime
/// section); rtsumcache=none|minlevel|memory (benchmarks: how the realtime
/// allocator reads its summary); wait=SECS (a read-write mount of an
/// image that another writer owns, i.e. another rxfs, a kernel mount
/// through a loop device, or a mounted block device, fails at once naming
/// it; with wait= it waits up to SECS, saying so); odirect, allow_other, auto_unmount, fsname=NAME,
/// threads=N, fuse_uring=auto|on|off (serve requests over FUSE io_uring:
/// auto, the default, when the kernel offers it, i.e. with
/// /sys/module/fuse/parameters/enable_uring on), writeback_cache[=on|off]
/// (off by default: every write(2) reaches rxfs before it returns, as on
/// the kernel's XFS; on: the kernel caches writes and sends them at
/// writeback, fsync or close; fsync'd data is durable either way, but with
/// the cache a write(2) past free space succeeds and only fsync or close
/// reports ENOSPC, and `stat` shows the kernel's times of regular files),
/// and the kernel flags dev,
/// nodev, suid, nosuid, exec, noexec,
/// atime, noatime, sync, dirsync; generic mount(8) options (defaults,
/// nofail, _netdev, x-*, ...) are ignored. The mount always uses
/// default_permissions (the kernel checks permissions). A read-write
/// mount needs an image it can write.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device.
    pub image: PathBuf,
    /// Where to mount it (an existing directory).
    pub mountpoint: PathBuf,
    /// Stay in the foreground (errors of requests are printed to stderr).
    #[arg(short = 'f', long)]
    pub foreground: bool,
    #[command(flatten)]
    pub img: ImageArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    if let Some(ro) = remount_of(&a.img.options) {
        return remount(&a.mountpoint, ro);
    }
    let opts = a.img.parse(true)?;
    mount(&a.image, &a.mountpoint, opts, a.foreground, false)
}

/// `-o remount[,ro|rw]`: Some(read-only wanted) (what `mount -o remount`
/// asks of a helper, fstests among its users).
fn remount_of(lists: &[String]) -> Option<bool> {
    let opts: Vec<&str> = lists.iter().flat_map(|l| l.split(',')).collect();
    if !opts.contains(&"remount") {
        return None;
    }
    let ro = opts.iter().rev().find_map(|o| match *o {
        "ro" => Some(true),
        "rw" => Some(false),
        _ => None,
    });
    Some(ro.unwrap_or(false))
}

/// Remount the FUSE mount at `mnt` read-only or read-write, as the kernel
/// does for any filesystem: its per-mount flags (nosuid, nodev, noexec,
/// noatime...) are kept. A read-only remount makes the kernel refuse
/// writes; the daemon keeps serving (and flushes nothing: everything it
/// was given is committed). A read-write remount of a mount rxfs opened
/// read-only gets EROFS from rxfs for every change.
fn remount(mnt: &Path, ro: bool) -> CliResult<()> {
    if !is_rxfs_mount(mnt) {
        return Err(mount_fail(CliError::new(format!(
            "{}: not an rxfs mount",
            mnt.display()
        ))));
    }
    let c = std::ffi::CString::new(mnt.as_os_str().as_bytes())
        .map_err(|_| CliError::usage("mount point with a NUL byte"))?;
    // SAFETY: statvfs fills the struct we own from a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(mount_fail(CliError::new(format!("{}: {e}", mnt.display()))));
    }
    let keep = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    let mut flags = libc::MS_REMOUNT;
    for (st_bit, ms_bit) in keep {
        if st.f_flag & st_bit != 0 {
            flags |= ms_bit;
        }
    }
    if ro {
        flags |= libc::MS_RDONLY;
    }
    // SAFETY: mount(2) with a NUL-terminated target and no source, type
    // or data.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            c.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(mount_fail(CliError::new(format!(
            "remount of {}: {e}",
            mnt.display()
        ))));
    }
    Ok(())
}

/// Arguments of the mount-helper forms.
#[derive(Debug, PartialEq, Eq)]
pub struct HelperArgs {
    pub image: PathBuf,
    pub mountpoint: PathBuf,
    pub options: Vec<String>,
    /// mount -f: do everything but the mount.
    pub fake: bool,
}

/// Whether `name` is one of `rxfs`'s subcommands (taken from the clap
/// definition, so a new subcommand is never mistaken for an image path).
fn is_subcommand(name: &[u8]) -> bool {
    name == b"help"
        || <crate::Cli as clap::CommandFactory>::command()
            .get_subcommands()
            .any(|c| c.get_name().as_bytes() == name)
}

/// Recognise the mount-helper argument forms:
/// - started as `mount.fuse.rxfs` / `mount.rxfs`: `IMAGE MNT [-o OPTS] [-n -s -v -f]`;
/// - `rxfs IMAGE MNT -o OPTS` (Debian's mount.fuse3 runs the subtype's
///   program this way): the first argument is not a subcommand and not
///   an option, and an `-o` list follows (without one, `rxfs chek IMG` is
///   a mistyped subcommand).
pub fn helper_argv(argv: &[OsString]) -> Option<CliResult<HelperArgs>> {
    let prog = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    let as_helper = prog.starts_with(b"mount.");
    let first = argv.get(1)?;
    let fb = first.as_bytes();
    // mount.fuse3 always passes `-o` (mount(8) hands it `rw` at least):
    // without one, `rxfs WORD PATH` is a mistyped subcommand, which clap
    // then names, not a mount.
    let has_o = argv[2..].iter().any(|a| a.as_bytes().starts_with(b"-o"));
    let looks_like_source = !fb.starts_with(b"-") && !is_subcommand(fb) && argv.len() >= 3 && has_o;
    if !as_helper && !looks_like_source {
        return None;
    }
    Some(parse_helper_args(&argv[1..]))
}

fn parse_helper_args(args: &[OsString]) -> CliResult<HelperArgs> {
    let mut pos = Vec::new();
    let mut options = Vec::new();
    let mut fake = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_bytes();
        match a {
            b"-o" => {
                let v = args
                    .get(i + 1)
                    .ok_or_else(|| CliError::usage("-o needs an option list"))?;
                options.push(v.to_string_lossy().into_owned());
                i += 1;
            }
            _ if a.starts_with(b"-o") => {
                options.push(String::from_utf8_lossy(&a[2..]).into_owned());
            }
            b"-n" | b"-s" | b"-v" => {}
            b"-f" => fake = true,
            // mount.fuse3 may pass the type: `-t fuse.rxfs`.
            b"-t" => i += 1,
            _ if a.starts_with(b"-") => {
                return Err(CliError::usage(format!(
                    "unknown mount helper option '{}'",
                    String::from_utf8_lossy(a)
                )))
            }
            _ => pos.push(PathBuf::from(&args[i])),
        }
        i += 1;
    }
    if pos.len() != 2 {
        return Err(CliError::usage(
            "usage: mount.fuse.rxfs IMAGE MOUNTPOINT [-o OPTIONS]",
        ));
    }
    let mountpoint = pos.pop().unwrap_or_default();
    let image = pos.pop().unwrap_or_default();
    Ok(HelperArgs {
        image,
        mountpoint,
        options,
        fake,
    })
}

pub fn run_helper(h: CliResult<HelperArgs>) -> CliResult<()> {
    let h = h?;
    if let Some(ro) = remount_of(&h.options) {
        return match h.fake {
            true => Ok(()),
            false => remount(&h.mountpoint, ro),
        };
    }
    let mut opts = parse(&h.options, true)?;
    // SAFETY: geteuid has no preconditions.
    helper_defaults(&mut opts.fuse.flags, unsafe { libc::geteuid() } == 0);
    if h.fake {
        return Ok(());
    }
    mount(&h.image, &h.mountpoint, opts, false, true)
}

/// mount(8) leaves out the flags that are a kernel mount's defaults (it
/// passes `nosuid` or `nodev` when asked for, never `suid` or `dev`), while
/// a FUSE mount is nosuid,nodev unless told otherwise. So when root mounts
/// through the helper, rxfs gets a kernel filesystem's defaults (device
/// nodes and set-id bits honoured, as the kernel's XFS mount honours them:
/// fstests generic/184 writes to a device node it made); `-o nosuid` and
/// `-o nodev` still turn them off. Anyone else keeps FUSE's safe defaults.
fn helper_defaults(flags: &mut Vec<String>, root: bool) {
    if !root {
        return;
    }
    for (on, off) in [("dev", "nodev"), ("suid", "nosuid")] {
        if !flags.iter().any(|f| f == on || f == off) {
            flags.push(on.to_string());
        }
    }
}

fn mount_fail(e: CliError) -> CliError {
    if e.code == EXIT_USAGE {
        e
    } else {
        e.with_code(EXIT_MOUNT_FAILURE)
    }
}

/// Mount `image` on `mountpoint`; `helper`: called as mount(8)'s helper.
fn mount(
    image: &Path,
    mountpoint: &Path,
    opts: Opts,
    foreground: bool,
    helper: bool,
) -> CliResult<()> {
    crate::alloc_tuning::keep_freed_memory();
    let image_abs = image
        .canonicalize()
        .map_err(|e| mount_fail(CliError::io(image.display(), &e)))?;
    let mnt = normalize_mountpoint(mountpoint)
        .map_err(|e| mount_fail(CliError::io(mountpoint.display(), &e)))?;
    match std::fs::metadata(&mnt) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(mount_fail(CliError::new(format!(
                "{}: not a directory",
                mnt.display()
            ))))
        }
        Err(e) => return Err(mount_fail(CliError::io(mnt.display(), &e))),
    }
    if is_rxfs_mount(&mnt) {
        return Err(mount_fail(CliError::new(format!(
            "{}: already an rxfs mount point",
            mnt.display()
        ))));
    }
    let rtdev = match &opts.rtdev {
        Some(r) => Some(
            r.canonicalize()
                .map_err(|e| mount_fail(CliError::io(r.display(), &e)))?,
        ),
        None => None,
    };
    let mut opts = Opts { rtdev, ..opts };
    // As mount(8) does for the kernel's filesystems: a read-write mount of
    // a write-protected block device becomes read-only, with a warning,
    // unless read-write was asked for explicitly. (mount(8) hands every
    // helper an explicit `rw`, so the helper forms always fall back.)
    let protected = !opts.read_only
        && (write_protected(image) || opts.rtdev.as_deref().is_some_and(write_protected));
    let protected = protected && (!opts.rw_explicit || helper);
    if protected {
        opts.read_only = true;
    }
    opts.check_norecovery()?;
    let cfg = ServeConfig {
        image: image_abs,
        mountpoint: mnt,
        fuse: opts.fuse.clone(),
        read_only: opts.read_only,
    };
    if foreground {
        // Block the signals the serving loop waits for before opening:
        // a read-write open starts the log's threads, which inherit the
        // mask (an unblocked SIGUSR1 in any thread would kill us).
        let _ = sys::block_term_signals();
        let fs = open_for_mount(&cfg, &opts, protected)?;
        return serve(fs, &cfg, &mut |_| {});
    }
    let (rd, wr) = sys::pipe().map_err(|e| CliError::io("pipe", &e))?;
    match sys::fork().map_err(|e| CliError::io("fork", &e))? {
        sys::Forked::Parent { child } => {
            drop(wr);
            let mut msg = String::new();
            let _ = std::fs::File::from(rd).read_to_string(&mut msg);
            sys::waitpid_nohang(child);
            parent_result(&msg)
        }
        sys::Forked::Child => {
            drop(rd);
            sys::setsid();
            // Every path is absolute by now; do not hold the caller's
            // working directory busy.
            let _ = std::env::set_current_dir("/");
            let mut pipe = Some(std::fs::File::from(wr));
            let mut ready = |r: Result<(), &CliError>| {
                if let Some(mut p) = pipe.take() {
                    let line = match r {
                        Ok(()) => "OK\n".to_string(),
                        Err(e) => format!("ERR {} {}\n", e.code, e.msg),
                    };
                    let _ = p.write_all(line.as_bytes());
                    drop(p);
                    if r.is_ok() {
                        sys::detach_stdio();
                        crate::fuse::errlog::detached();
                    }
                }
            };
            // As above: the mask before the log's threads start.
            let _ = sys::block_term_signals();
            let code = match open_for_mount(&cfg, &opts, protected) {
                Ok(fs) => match serve(fs, &cfg, &mut ready) {
                    Ok(()) => 0,
                    Err(e) => e.code,
                },
                Err(e) => {
                    ready(Err(&e));
                    e.code
                }
            };
            std::process::exit(code);
        }
    }
}

/// Open the image for a mount. A write-protected device (`protected`:
/// the mount was made read-only for it, said with a warning)
/// whose log needs recovery is refused, as the kernel refuses it: its
/// recovery must write. (rxfs could replay the log in memory, as its
/// read-only image commands and a read-only mount of a writable image do,
/// but a mount behaves as XFS's.)
fn open_for_mount(
    cfg: &ServeConfig,
    opts: &Opts,
    protected: bool,
) -> CliResult<std::sync::Arc<rxfs::fs::Filesystem>> {
    if opts.read_only {
        // An rxfs that had it read-write may still be finishing its
        // unmount (the kernel's umount of a FUSE mount returns before the
        // daemon is done): read its log once it is final.
        for dev in std::iter::once(&cfg.image).chain(opts.rtdev.as_ref()) {
            if !rxfs::bdev::wait_for_writer(dev, rxfs::bdev::OWNER_WAIT) {
                errln!(
                    "rxfs: mount: {}: still open read-write elsewhere after {} s; \
                     mounting read-only what is on it now",
                    dev.display(),
                    rxfs::bdev::OWNER_WAIT.as_secs()
                );
            }
        }
    }
    let fs = open_image(&cfg.image, opts).map_err(mount_fail)?;
    check_root(&fs).map_err(|why| {
        mount_fail(CliError::new(format!(
            "mount: {}: cannot mount {}: {why}",
            cfg.mountpoint.display(),
            cfg.image.display()
        )))
    })?;
    if protected && fs.recovery_stats().is_some() {
        return Err(mount_fail(CliError::new(format!(
            "mount: {}: cannot mount {} read-only: its log needs recovery, which must write, \
             and the device is write-protected",
            cfg.mountpoint.display(),
            cfg.image.display()
        ))));
    }
    if protected {
        // (After the refusal above, which says it all, as mount(8)'s does.)
        errln!(
            "rxfs: mount: {}: WARNING: source write-protected, mounted read-only.",
            cfg.mountpoint.display()
        );
    }
    Ok(fs)
}

/// What the kernel reads before it lets a mount succeed: the root
/// directory's inode must be readable and a directory (XFS fails the mount
/// with "corrupted root inode"); a mount that would answer every access
/// with EUCLEAN is refused instead.
fn check_root(fs: &rxfs::fs::Filesystem) -> Result<(), String> {
    let root = fs.root_ino();
    match fs.iget(root) {
        Ok(ip) if ip.is_dir() => {}
        Ok(ip) => {
            return Err(format!(
                "corrupted root inode {}: not a directory (mode {:#o})",
                root.0, ip.core.mode
            ))
        }
        Err(e) => return Err(format!("cannot read the root inode {}: {e}", root.0)),
    }
    // With a realtime section the kernel also reads its bitmap and summary
    // inodes at mount.
    let sb = fs.sb();
    if sb.rextents > 0 {
        for (what, ino) in [("bitmap", sb.rbmino), ("summary", sb.rsumino)] {
            match fs.iget(rxfs::types::Ino(ino)) {
                Ok(ip) if ip.file_type() == Some(rxfs::types::FileType::Regular) => {}
                Ok(_) => return Err(format!("corrupted realtime {what} inode {ino}")),
                Err(e) => return Err(format!("cannot read the realtime {what} inode {ino}: {e}")),
            }
        }
    }
    Ok(())
}

/// Whether /proc/self/mounts has a fuse.rxfs mount at `mnt` (spaces
/// and other specials are octal-escaped there).
fn is_rxfs_mount(mnt: &Path) -> bool {
    // Type `fuse.rxfs`, or any FUSE type (`subtype=` changes it) served
    // by a live rxfs daemon of this mount point.
    let ours = || {
        normalize_mountpoint(mnt)
            .ok()
            .and_then(|m| crate::fuse::pidfile::open_existing(&m))
            .is_some_and(|f| crate::fuse::pidfile::daemon_alive(&f).unwrap_or(false))
    };
    crate::fuse::mount_table::types_at(mnt)
        .iter()
        .any(|t| t == b"fuse.rxfs" || t.starts_with(b"fuse") && ours())
}

/// The parent's exit, from the child's one-line report.
fn parent_result(msg: &str) -> CliResult<()> {
    let line = msg.lines().next().unwrap_or("");
    if line == "OK" {
        return Ok(());
    }
    if let Some(rest) = line.strip_prefix("ERR ") {
        let (code, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let code = code.parse().unwrap_or(EXIT_MOUNT_FAILURE);
        return Err(CliError {
            code,
            msg: text.to_string(),
        });
    }
    Err(
        CliError::new("the mount daemon exited before the mount was ready")
            .with_code(EXIT_MOUNT_FAILURE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn helper_defaults_for_root_only() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut f = v(&["noexec"]);
        helper_defaults(&mut f, true);
        assert_eq!(f, v(&["noexec", "dev", "suid"]));
        let mut f = v(&["nodev", "suid"]);
        helper_defaults(&mut f, true);
        assert_eq!(f, v(&["nodev", "suid"]));
        let mut f = v(&["nosuid"]);
        helper_defaults(&mut f, true);
        assert_eq!(f, v(&["nosuid", "dev"]));
        let mut f = Vec::new();
        helper_defaults(&mut f, false);
        assert!(f.is_empty());
    }

    #[test]
    fn helper_forms() {
        assert!(helper_argv(&argv(&["rxfs", "info", "img"])).is_none());
        assert!(helper_argv(&argv(&["rxfs", "--help"])).is_none());
        assert!(helper_argv(&argv(&["rxfs"])).is_none());
        let h = helper_argv(&argv(&["rxfs", "/img", "/mnt", "-o", "ro,allow_other"]))
            .unwrap()
            .unwrap();
        assert_eq!(
            h,
            HelperArgs {
                image: "/img".into(),
                mountpoint: "/mnt".into(),
                options: vec!["ro,allow_other".into()],
                fake: false
            }
        );
        let h = helper_argv(&argv(&[
            "/sbin/mount.fuse.rxfs",
            "i",
            "m",
            "-n",
            "-oro",
            "-f",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(h.options, vec!["ro".to_string()]);
        assert!(h.fake);
        assert!(helper_argv(&argv(&["/sbin/mount.fuse.rxfs", "i"]))
            .unwrap()
            .is_err());
        assert!(helper_argv(&argv(&["mount.fuse.rxfs", "i", "m", "-x"]))
            .unwrap()
            .is_err());
    }

    #[test]
    fn parent_reports() {
        assert!(parent_result("OK\n").is_ok());
        let e = parent_result("ERR 32 img: bad\n").unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (32, "img: bad"));
        assert_eq!(parent_result("").unwrap_err().code, EXIT_MOUNT_FAILURE);
    }
}
