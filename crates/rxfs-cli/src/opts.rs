//! `-o` option lists and opening images with them.
//!
//! Every subcommand that reads an image takes `-o OPTS` (repeatable,
//! comma-separated, spelled like mount options) and `--rtdev FILE`.
//! Image options: `ro`, `norecovery` (read a dirty log's pre-replay
//! state; only with `ro`, as the kernel requires), `rtdev=FILE`, `odirect`
//! (open devices with O_DIRECT), and the log options `logbufs=N` (2..8),
//! `logbsize=SIZE` (16k, 32k, 64k, 128k or 256k; bytes or a k/K suffix) and
//! `ablate_delaylog` (benchmarks only: a checkpoint per transaction), and
//! `allocsize=SIZE` (EOF preallocation size, a power of two from 4k to 1g;
//! `allocsize=0` turns it off), and `inject_latency_us=N` (benchmarks
//! only: every device write and flush waits N more microseconds).
//! The inspection subcommands always open images read-only (`rw` is
//! refused there); `rxfs mount` mounts read-write unless `ro` is given, and
//! additionally takes FUSE and generic mount(8) options, see [`FuseOpts`].

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rxfs::fs::atime::AtimeMode;
use rxfs::inode::Inode;
use rxfs::{Filesystem, MountOptions};

use crate::{CliError, CliResult};

/// Options common to every image-reading subcommand.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ImageArgs {
    /// Comma-separated options: ro, norecovery, rtdev=FILE, odirect
    /// (mount also takes rw, log and FUSE options, see `rxfs mount --help`).
    #[arg(short = 'o', value_name = "OPTS", action = clap::ArgAction::Append)]
    pub options: Vec<String>,
    /// The realtime device or image of a filesystem with a realtime section.
    #[arg(long, value_name = "FILE")]
    pub rtdev: Option<PathBuf>,
}

/// Options of the subcommands that change an image (`put`, `rm`, `mkdir`,
/// `populate`, `recover`): opened read-write, so `ro` and `norecovery`
/// are refused and `rw` is implied.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WriteArgs {
    /// Comma-separated options: rtdev=FILE (the realtime device, needed to
    /// write a filesystem with a realtime section), odirect, logbufs=N,
    /// logbsize=SIZE, allocsize=SIZE, rtsumcache=none|minlevel|memory,
    /// wait=SECS (when another writer owns the image, wait up to SECS for it
    /// instead of failing at once).
    #[arg(short = 'o', value_name = "OPTS", action = clap::ArgAction::Append)]
    pub options: Vec<String>,
    /// The realtime device or image of a filesystem with a realtime section.
    #[arg(long, value_name = "FILE")]
    pub rtdev: Option<PathBuf>,
}

/// FUSE-side options of `rxfs mount` (the defaults: all off or unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FuseOpts {
    pub allow_other: bool,
    pub auto_unmount: bool,
    /// Kernel mount flags: dev, suid, exec, noexec, atime, noatime, sync...
    pub flags: Vec<String>,
    pub fsname: Option<String>,
    /// The mount type's subtype (`fuse.SUBTYPE` in the mount table);
    /// None: "rxfs"; empty: none (the type shows as plain `fuse`).
    pub subtype: Option<String>,
    /// FUSE event loops, each on its own clone of `/dev/fuse`.
    pub threads: Option<usize>,
    /// `fuse_uring=on|off|auto`: serve requests over io_uring
    /// (`FUSE_OVER_IO_URING`). None (auto): when the kernel offers it
    /// (the fuse module's `enable_uring` parameter); on: the mount fails
    /// if it does not; off: never.
    pub uring: Option<bool>,
    /// `writeback_cache` (`=on`; off by default, also `=off` or
    /// `nowriteback_cache`): the kernel's page cache keeps dirty pages
    /// and sends them later (`FUSE_WRITEBACK_CACHE`). Off by default: with
    /// it a write(2) past free space succeeds (ENOSPC only at fsync or
    /// close) and `stat` shows the kernel's times, not those stored; see
    /// the promises in [`crate::fuse`].
    pub writeback_cache: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Opts {
    /// Open read-only: `ro`, or any subcommand but `mount`.
    pub read_only: bool,
    /// `rw` was the last of `ro`/`rw` given: a read-write mount was asked
    /// for in so many words, so a write-protected device fails it instead
    /// of falling back to read-only (see [`write_protected`]).
    pub rw_explicit: bool,
    pub norecovery: bool,
    pub direct_io: bool,
    pub rtdev: Option<PathBuf>,
    /// `logbufs=N`: in-core log buffers (2..=8).
    pub logbufs: Option<usize>,
    /// `logbsize=SIZE` in bytes (16 KiB..256 KiB, a power of two).
    pub logbsize: Option<u32>,
    /// `ablate_delaylog`: benchmarks only.
    pub ablate_delaylog: bool,
    /// `allocsize=SIZE`: EOF preallocation size in bytes (0: none).
    pub allocsize: Option<u64>,
    /// `inject_latency_us=N`: benchmarks only.
    pub inject_latency_us: Option<u64>,
    /// `noatime` / `atime`: the last given.
    pub noatime: bool,
    /// `strictatime` / `nostrictatime`: the last given.
    pub strictatime: bool,
    /// `nodiratime` / `diratime`: the last given.
    pub nodiratime: bool,
    /// `rtsumcache=none|minlevel|memory` (benchmarks; default memory).
    pub rtsumcache: rxfs::cache::rtsum::RtSumMode,
    /// `wait=SECS`: a read-write open of an image that another writer
    /// owns waits up to SECS for it (saying so) instead of failing at once.
    pub busy_wait: Option<u64>,
    /// `offset=BYTES` or `partition=N`: the filesystem inside a larger
    /// image (a whole-disk image with a partition table).
    pub within: Option<rxfs::fs::Within>,
    pub fuse: FuseOpts,
}

/// A byte count with an optional k, m, g or t suffix (powers of 1024).
fn parse_bytes(v: &str) -> Option<u64> {
    let (num, shift) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 10),
        (i, 'm' | 'M') => (&v[..i], 20),
        (i, 'g' | 'G') => (&v[..i], 30),
        (i, 't' | 'T') => (&v[..i], 40),
        _ => (v, 0),
    };
    num.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Log buffer sizes the kernel accepts for `logbsize` (v2 logs).
const LOGBSIZES: &[u32] = &[16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10];

/// `logbsize=SIZE`: bytes, or a number with a k/K suffix.
fn parse_logbsize(v: &str) -> CliResult<u32> {
    let bad = || {
        CliError::usage(format!(
            "bad logbsize '{v}': use 16k, 32k, 64k, 128k or 256k (bytes or a k suffix)"
        ))
    };
    let (num, mult) = match v.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1024u64),
        None => (v, 1),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(mult).ok_or_else(bad)?;
    LOGBSIZES
        .iter()
        .copied()
        .find(|&s| s as u64 == bytes)
        .ok_or_else(bad)
}

/// `allocsize=SIZE`: a power of two from 4 KiB to 1 GiB (bytes or a
/// k/m/g suffix, as the kernel takes it), or 0 for no preallocation.
fn parse_allocsize(v: &str) -> CliResult<u64> {
    let bad = || {
        CliError::usage(format!(
            "bad allocsize '{v}': use a power of two from 4k to 1g, or 0 for none"
        ))
    };
    let (num, mult) = match v.char_indices().last() {
        Some((i, 'k' | 'K')) => (&v[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&v[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(mult).ok_or_else(bad)?;
    if bytes == 0 || (bytes.is_power_of_two() && (4096..=1 << 30).contains(&bytes)) {
        Ok(bytes)
    } else {
        Err(bad())
    }
}

/// `logbufs=N`, N in 2..=8.
fn parse_logbufs(v: &str) -> CliResult<usize> {
    v.parse()
        .ok()
        .filter(|n| (2..=8).contains(n))
        .ok_or_else(|| CliError::usage(format!("bad logbufs '{v}': use a number from 2 to 8")))
}

/// mount(8) options that mean nothing to a FUSE image mount; accepted and
/// ignored so `mount -t fuse.rxfs` with an fstab line works.
const IGNORED: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "nofail",
    "loop",
    "silent",
    "loud",
    "lazytime",
    "nolazytime",
    "async",
    "nosymfollow",
    "symfollow",
    "default_permissions",
];

/// Kernel flags passed through to the FUSE mount.
const FLAGS: &[&str] = &[
    "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime", "sync", "dirsync",
];

/// Parse `-o` lists. `mount` says whether `rw`, FUSE and mount(8) options
/// are allowed; image-only subcommands refuse them. Like mount(8), the last
/// of `ro` and `rw` wins; a mount is read-write unless `ro` is given.
pub fn parse(lists: &[String], mount: bool) -> CliResult<Opts> {
    let mut o = Opts::default();
    let mut ro = !mount;
    let mut rw_explicit = false;
    for opt in lists.iter().flat_map(|l| l.split(',')) {
        let (key, val) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        match (key, val) {
            ("", None) => {}
            ("ro", None) => {
                ro = true;
                rw_explicit = false;
            }
            ("rw", None) if mount => {
                ro = false;
                rw_explicit = true;
            }
            ("rw", None) => {
                return Err(CliError::usage(
                    "this subcommand reads images only: 'rw' is for rxfs mount",
                ))
            }
            ("norecovery", None) => o.norecovery = true,
            ("odirect", None) => o.direct_io = true,
            ("rtdev", Some(v)) if !v.is_empty() => o.rtdev = Some(PathBuf::from(v)),
            ("logbufs", Some(v)) => o.logbufs = Some(parse_logbufs(v)?),
            ("logbsize", Some(v)) => o.logbsize = Some(parse_logbsize(v)?),
            ("ablate_delaylog", None) => o.ablate_delaylog = true,
            ("allocsize", Some(v)) => o.allocsize = Some(parse_allocsize(v)?),
            ("inject_latency_us", Some(v)) => {
                let us = v
                    .parse::<u64>()
                    .ok()
                    .filter(|&u| u <= 1_000_000)
                    .ok_or_else(|| {
                        CliError::usage(format!(
                            "bad inject_latency_us '{v}': microseconds, 0..1000000"
                        ))
                    })?;
                o.inject_latency_us = Some(us);
            }
            ("offset", Some(v)) => {
                let off = parse_bytes(v).ok_or_else(|| {
                    CliError::usage(format!("bad offset '{v}': bytes, or a k, m or g suffix"))
                })?;
                if off % 512 != 0 {
                    return Err(CliError::usage(format!(
                        "offset={v}: a multiple of 512 bytes"
                    )));
                }
                o.within = Some(rxfs::fs::Within::Offset(off));
            }
            ("partition", Some(v)) => {
                let n = v.parse::<u32>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                    CliError::usage(format!("partition={v}: a partition number from 1"))
                })?;
                o.within = Some(rxfs::fs::Within::Partition(n));
            }
            ("wait", Some(v)) => {
                o.busy_wait = Some(v.parse::<u64>().ok().filter(|&s| s <= 86_400).ok_or_else(
                    || CliError::usage(format!("bad wait '{v}': seconds, 0..86400")),
                )?);
            }
            ("rtsumcache", Some(v)) => {
                o.rtsumcache = rxfs::cache::rtsum::RtSumMode::parse(v).ok_or_else(|| {
                    CliError::usage(format!("bad rtsumcache '{v}' (none, minlevel or memory)"))
                })?;
            }
            _ if !mount => {
                return Err(CliError::usage(format!(
                    "unknown option '{opt}' (known: ro, norecovery, rtdev=FILE, odirect, \
                     logbufs=N, logbsize=SIZE, allocsize=SIZE, ablate_delaylog, \
                     inject_latency_us=N, rtsumcache=MODE, wait=SECS, offset=BYTES, partition=N)"
                )))
            }
            ("allow_other", None) => o.fuse.allow_other = true,
            ("auto_unmount", None) => o.fuse.auto_unmount = true,
            ("writeback_cache", None) => o.fuse.writeback_cache = true,
            ("nowriteback_cache", None) => o.fuse.writeback_cache = false,
            ("writeback_cache", Some(v)) => {
                o.fuse.writeback_cache = match v {
                    "on" => true,
                    "off" => false,
                    _ => {
                        return Err(CliError::usage(format!(
                            "bad writeback_cache '{v}' (on or off)"
                        )))
                    }
                }
            }
            ("fsname", Some(v)) => o.fuse.fsname = Some(v.to_string()),
            ("subtype", Some(v)) => {
                if v.contains([',', ' ', '\t', '\n']) {
                    return Err(CliError::usage(format!("bad subtype '{v}'")));
                }
                o.fuse.subtype = Some(v.to_string())
            }
            ("fuse_uring", Some(v)) => {
                o.fuse.uring = match v {
                    "auto" => None,
                    "on" => Some(true),
                    "off" => Some(false),
                    _ => {
                        return Err(CliError::usage(format!(
                            "bad fuse_uring '{v}' (on, off or auto)"
                        )))
                    }
                }
            }
            ("threads", Some(v)) => {
                let n: usize = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=256).contains(n))
                    .ok_or_else(|| CliError::usage(format!("bad thread count '{v}' (1-256)")))?;
                o.fuse.threads = Some(n);
            }
            // The atime options: the daemon updates atime (FUSE inodes
            // never have the kernel do it), so it keeps them; noatime and
            // atime also go to the kernel as mount flags.
            ("relatime" | "norelatime", None) => {}
            ("strictatime", None) => o.strictatime = true,
            ("nostrictatime", None) => o.strictatime = false,
            ("nodiratime", None) => o.nodiratime = true,
            ("diratime", None) => o.nodiratime = false,
            ("noatime" | "atime", None) if mount => {
                o.noatime = key == "noatime";
                o.fuse.flags.push(key.to_string());
            }
            (k, None) if FLAGS.contains(&k) => o.fuse.flags.push(k.to_string()),
            (k, None) if IGNORED.contains(&k) => {}
            (k, _) if k.starts_with("x-") || k == "comment" => {}
            ("allow_root", None) => {
                return Err(CliError::usage(
                    "allow_root is not supported: use allow_other",
                ))
            }
            ("noquota", None) => {}
            (
                "quota" | "usrquota" | "grpquota" | "prjquota" | "uquota" | "gquota" | "pquota"
                | "uqnoenforce" | "gqnoenforce" | "pqnoenforce" | "qnoenforce",
                None,
            ) => {
                return Err(CliError::usage(format!(
                    "'{key}': disk quotas are not supported (rxfs neither counts nor enforces \
                     XFS quotas, so EDQUOT is never reported)"
                )))
            }
            _ => return Err(CliError::usage(format!("unknown mount option '{opt}'"))),
        }
    }
    o.read_only = ro;
    o.rw_explicit = rw_explicit;
    if !mount {
        o.check_norecovery()?;
    }
    Ok(o)
}

impl Opts {
    /// The atime mode of the options, as the kernel derives a mount's:
    /// `noatime` wins, then `strictatime`, else `relatime`.
    pub fn atime_mode(&self) -> AtimeMode {
        if self.noatime {
            AtimeMode::NoAtime
        } else if self.strictatime {
            AtimeMode::StrictAtime
        } else {
            AtimeMode::Relatime
        }
    }

    /// The library's options for these.
    pub fn mount_options(&self) -> MountOptions {
        MountOptions {
            read_only: self.read_only,
            norecovery: self.norecovery,
            direct_io: self.direct_io,
            logbufs: self.logbufs,
            logbsize: self.logbsize,
            ablate_delaylog: self.ablate_delaylog,
            allocsize: self.allocsize,
            inject_latency: self.inject_latency_us.map(std::time::Duration::from_micros),
            atime: self.atime_mode(),
            nodiratime: self.nodiratime,
            rtsumcache: self.rtsumcache,
            within: self.within,
        }
    }

    /// `norecovery` only with a read-only mount, as the kernel requires.
    /// (A mount checks this after a write-protected device has made it
    /// read-only, so `-o norecovery` on such a device mounts.)
    pub fn check_norecovery(&self) -> CliResult<()> {
        if self.norecovery && !self.read_only {
            return Err(CliError::usage(
                "norecovery needs a read-only mount: use -o ro,norecovery (as the kernel requires)",
            ));
        }
        Ok(())
    }
}

/// Parse the `-o` lists of a subcommand that changes the image: the image
/// options of [`parse`], read-write. `rw` is accepted (and changes
/// nothing); `ro` and `norecovery` are refused, since both forbid writing.
pub fn parse_write(lists: &[String]) -> CliResult<Opts> {
    let mut kept = Vec::new();
    for opt in lists.iter().flat_map(|l| l.split(',')) {
        match opt {
            "rw" => {}
            "ro" | "norecovery" => {
                return Err(CliError::usage(format!(
                    "'{opt}' is for reading: this subcommand changes the image"
                )))
            }
            _ => kept.push(opt.to_string()),
        }
    }
    let mut o = parse(&[kept.join(",")], false)?;
    o.read_only = false;
    Ok(o)
}

/// Whether `p` is a block device set read-only (`blockdev --setro`, a
/// write-protected medium).
pub fn write_protected(p: &Path) -> bool {
    let Ok(f) = std::fs::File::open(p) else {
        return false;
    };
    let is_blk = f
        .metadata()
        .map(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
        .unwrap_or(false);
    is_blk && crate::sys::blk_read_only(&f).unwrap_or(false)
}

impl ImageArgs {
    pub fn parse(&self, mount: bool) -> CliResult<Opts> {
        let mut o = parse(&self.options, mount)?;
        if let Some(r) = &self.rtdev {
            o.rtdev = Some(r.clone());
        }
        Ok(o)
    }

    /// Open `image` with these options (image options only: not for mount).
    pub fn open(&self, image: &Path) -> CliResult<Arc<Filesystem>> {
        open_image(image, &self.parse(false)?)
    }

    /// Open `image` and load the inode at `path` inside it (see [`resolve`]).
    pub fn open_path(&self, image: &Path, path: &Path) -> CliResult<(Arc<Filesystem>, Arc<Inode>)> {
        let fs = self.open(image)?;
        let ip = resolve(&fs, path)?;
        Ok((fs, ip))
    }
}

impl WriteArgs {
    pub fn parse(&self) -> CliResult<Opts> {
        let mut o = parse_write(&self.options)?;
        if let Some(r) = &self.rtdev {
            o.rtdev = Some(r.clone());
        }
        Ok(o)
    }
}

/// Resolve a path inside the image (lstat semantics) and load its inode.
pub fn resolve(fs: &Filesystem, path: &Path) -> CliResult<Arc<Inode>> {
    let shown = path.display();
    let ino = fs
        .resolve(path.as_os_str().as_bytes())
        .map_err(|e| CliError::fs(&shown, &e))?;
    fs.iget(ino).map_err(|e| CliError::fs(&shown, &e))
}

/// The first sector of `image`, or the error every subcommand gives for a
/// file that is missing, unreadable or not XFS at all (no superblock magic,
/// or too short to hold a superblock).
pub fn require_xfs(image: &Path, within: Option<rxfs::fs::Within>) -> CliResult<[u8; 512]> {
    let shown = image.display();
    let mut f = std::fs::File::open(image).map_err(|e| CliError::io(&shown, &e))?;
    let mut sector = [0u8; 512];
    if let Some(w) = within {
        // The superblock at the start of the range.
        let dev = rxfs::bdev::FileDevice::open(image, true, false)
            .map_err(|e| CliError::fs(&shown, &e))?;
        let dev = w
            .apply(std::sync::Arc::new(dev))
            .map_err(|e| CliError::fs(&shown, &e))?;
        return match dev.read_at(&mut sector, 0) {
            Ok(()) if &sector[..4] == b"XFSB" => Ok(sector),
            _ => Err(CliError::new(format!(
                "{shown}: not an XFS filesystem at {} (no XFSB superblock magic)",
                describe_within(w)
            ))),
        };
    }
    match f.read_exact(&mut sector) {
        Ok(()) if &sector[..4] == b"XFSB" => Ok(sector),
        Ok(()) | Err(_) => Err(CliError::new(format!(
            "{shown}: not an XFS filesystem (no XFSB superblock magic)"
        ))),
    }
}

/// "partition 2", "offset 1048576".
pub fn describe_within(w: rxfs::fs::Within) -> String {
    match w {
        rxfs::fs::Within::Offset(o) => format!("offset {o}"),
        rxfs::fs::Within::Partition(n) => format!("partition {n}"),
    }
}

/// Open an image with `opts` (read-only unless `opts.read_only` is false),
/// with messages that name the file: a missing file, a file that is not
/// XFS at all, an image that cannot be written for a read-write mount, and
/// a damaged or unsupported XFS are told apart.
pub fn open_image(image: &Path, opts: &Opts) -> CliResult<Arc<Filesystem>> {
    let shown = image.display();
    let sector = require_xfs(image, opts.within)?;
    let has_rt =
        rxfs::format::sb::Superblock::decode_unverified(&sector).is_ok_and(|sb| sb.rextents > 0);
    if has_rt && !opts.read_only && opts.rtdev.is_none() {
        return Err(CliError::new(format!(
            "{shown}: the filesystem has a realtime section: give its realtime device \
             (-o rtdev=FILE or --rtdev FILE) to write to it"
        )));
    }
    let writable = |p: &Path| {
        let refuse = |why: String| {
            CliError::new(format!(
                "{}: cannot open for writing: {why} (mount with -o ro to read it)",
                p.display()
            ))
        };
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(p)
            .map_err(|e| refuse(crate::cli_error::io_message(&e)))?;
        if write_protected(p) {
            return Err(refuse("read-only block device".into()));
        }
        Ok(())
    };
    if !opts.read_only {
        writable(image)?;
    }
    if let Some(rt) = &opts.rtdev {
        std::fs::metadata(rt).map_err(|e| CliError::io(rt.display(), &e))?;
        if !opts.read_only {
            writable(rt)?;
        }
    }
    open_waiting(image, opts).map_err(|e| CliError::fs(&shown, &e))
}

/// `Filesystem::open_path`; with `wait=SECS`, an image owned by another
/// writer is waited for (said once on stderr) instead of refused.
fn open_waiting(image: &Path, opts: &Opts) -> rxfs::error::Result<Arc<Filesystem>> {
    let open = || Filesystem::open_path(image, opts.rtdev.as_deref(), opts.mount_options());
    let Some(secs) = opts.busy_wait.filter(|_| !opts.read_only) else {
        return open();
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut told = false;
    loop {
        match open() {
            Err(rxfs::error::Error::InUse(why)) if std::time::Instant::now() < deadline => {
                if !told {
                    errln!(
                        "rxfs: {}: in use: {why}; waiting up to {secs} s (wait={secs})",
                        image.display()
                    );
                    told = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str], mount: bool) -> CliResult<Opts> {
        parse(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>(), mount)
    }

    #[test]
    fn image_options() {
        let o = p(&["ro,norecovery", "rtdev=/tmp/rt"], false).unwrap();
        assert!(o.norecovery);
        assert_eq!(o.rtdev, Some(PathBuf::from("/tmp/rt")));
        assert!(p(&["allow_other"], false).is_err());
        assert!(p(&["bogus"], false).is_err());
        assert!(p(&["rw"], false).is_err());
        assert!(o.read_only);
        // Image subcommands are read-only, so norecovery alone is fine.
        let o = p(&[""], false).unwrap();
        assert_eq!(
            o,
            Opts {
                read_only: true,
                ..Opts::default()
            }
        );
    }

    #[test]
    fn quota_options_say_quotas_are_not_supported() {
        for q in ["quota", "usrquota", "grpquota", "prjquota", "uqnoenforce"] {
            let e = p(&[q], true).unwrap_err();
            assert!(
                e.msg.contains("disk quotas are not supported"),
                "{q}: {}",
                e.msg
            );
        }
        assert!(p(&["noquota"], true).is_ok());
    }

    #[test]
    fn wait_option() {
        assert_eq!(p(&["wait=30"], true).unwrap().busy_wait, Some(30));
        assert_eq!(p(&["wait=0"], false).unwrap().busy_wait, Some(0));
        assert!(p(&["wait=-1"], true).is_err());
        assert!(p(&["wait=soon"], true).is_err());
    }

    #[test]
    fn write_options() {
        let w = |s: &[&str]| parse_write(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let o = w(&["rtdev=/tmp/rt,rw", "rtsumcache=minlevel"]).unwrap();
        assert!(!o.read_only);
        assert_eq!(o.rtdev, Some(PathBuf::from("/tmp/rt")));
        assert_eq!(o.rtsumcache, rxfs::cache::rtsum::RtSumMode::MinLevel);
        assert!(!w(&[]).unwrap().read_only);
        for bad in ["ro", "rw,norecovery", "allow_other", "bogus"] {
            assert!(w(&[bad]).is_err(), "{bad}");
        }
        assert!(w(&["ro"]).unwrap_err().msg.contains("changes the image"));
    }

    #[test]
    fn atime_options_as_the_kernel_combines_them() {
        let mode = |s: &str| p(&[s], true).unwrap().atime_mode();
        assert_eq!(mode(""), AtimeMode::Relatime);
        assert_eq!(mode("relatime"), AtimeMode::Relatime);
        assert_eq!(mode("norelatime"), AtimeMode::Relatime);
        assert_eq!(mode("strictatime"), AtimeMode::StrictAtime);
        assert_eq!(mode("strictatime,nostrictatime"), AtimeMode::Relatime);
        assert_eq!(mode("noatime"), AtimeMode::NoAtime);
        assert_eq!(mode("noatime,strictatime"), AtimeMode::NoAtime);
        assert_eq!(mode("noatime,atime,strictatime"), AtimeMode::StrictAtime);
        let o = p(&["nodiratime"], true).unwrap();
        assert!(o.nodiratime);
        assert!(!p(&["nodiratime,diratime"], true).unwrap().nodiratime);
        // noatime still reaches the kernel as a mount flag.
        assert_eq!(p(&["noatime"], true).unwrap().fuse.flags, vec!["noatime"]);
        assert!(p(&["strictatime"], false).is_err());
    }

    #[test]
    fn mount_options() {
        let o = p(
            &["ro,allow_other,noexec,defaults,x-systemd.automount,threads=3"],
            true,
        )
        .unwrap();
        assert!(o.fuse.allow_other);
        assert_eq!(o.fuse.flags, vec!["noexec".to_string()]);
        assert_eq!(o.fuse.threads, Some(3));
        assert!(p(&["threads=0"], true).is_err());
        assert_eq!(p(&["fuse_uring=on"], true).unwrap().fuse.uring, Some(true));
        assert_eq!(
            p(&["fuse_uring=off"], true).unwrap().fuse.uring,
            Some(false)
        );
        assert!(p(&["fuse_uring=maybe"], true).is_err());
        assert!(p(&["allow_root"], true).is_err());
        assert!(p(&["nonsense=1"], true).is_err());
        assert!(p(&["ro=1"], true).is_err());
        assert!(o.read_only);
        // The write-back cache: on unless turned off; the last word wins.
        let wb = |o: &str| p(&[o], true).unwrap().fuse.writeback_cache;
        assert!(!wb("rw"), "the write-back cache is off unless asked for");
        assert!(!wb("nowriteback_cache"));
        assert!(wb("nowriteback_cache,writeback_cache"));
        assert!(wb("writeback_cache"));
        assert!(wb("writeback_cache=on"));
        assert!(!wb("writeback_cache,nowriteback_cache"));
        assert!(!wb("writeback_cache=off"));
        assert!(p(&["writeback_cache=maybe"], true).is_err());
        assert!(p(&["writeback_cache"], false).is_err());
    }

    #[test]
    fn allocsize_option() {
        assert_eq!(
            p(&["allocsize=64k"], true).unwrap().allocsize,
            Some(64 << 10)
        );
        assert_eq!(p(&["allocsize=1g"], true).unwrap().allocsize, Some(1 << 30));
        assert_eq!(p(&["allocsize=0"], true).unwrap().allocsize, Some(0));
        assert_eq!(p(&["allocsize=8192"], true).unwrap().allocsize, Some(8192));
        for bad in [
            "allocsize=3k",
            "allocsize=2k",
            "allocsize=2g",
            "allocsize=",
            "allocsize=k",
        ] {
            assert!(p(&[bad], true).is_err(), "{bad}");
        }
    }

    #[test]
    fn read_write_by_default() {
        assert!(!p(&[], true).unwrap().read_only);
        assert!(!p(&["rw"], true).unwrap().read_only);
        assert!(p(&["ro"], true).unwrap().read_only);
        // The last of ro/rw wins, as with mount(8).
        assert!(!p(&["ro", "rw"], true).unwrap().read_only);
        assert!(p(&["rw,ro"], true).unwrap().read_only);
    }

    #[test]
    fn norecovery_needs_ro() {
        // A mount checks it once it knows whether a write-protected
        // device made it read-only.
        let e = p(&["norecovery"], true)
            .unwrap()
            .check_norecovery()
            .unwrap_err();
        assert!(e.msg.contains("ro,norecovery"), "{}", e.msg);
        let o = p(&["rw,norecovery"], true).unwrap();
        assert!(o.rw_explicit && o.check_norecovery().is_err());
        assert!(p(&["ro,norecovery"], true).unwrap().norecovery);
        let o = p(&["norecovery,ro"], true).unwrap();
        assert!(o.check_norecovery().is_ok() && !o.rw_explicit);
        assert!(!p(&["rw,ro"], true).unwrap().rw_explicit);
    }

    #[test]
    fn log_options() {
        let o = p(&["logbufs=2,logbsize=256k,ablate_delaylog"], true).unwrap();
        assert_eq!(
            (o.logbufs, o.logbsize, o.ablate_delaylog),
            (Some(2), Some(256 << 10), true)
        );
        assert_eq!(p(&["logbufs=8"], true).unwrap().logbufs, Some(8));
        for bad in [
            "logbufs=9",
            "logbufs=1",
            "logbufs=0",
            "logbufs=",
            "logbufs=x",
        ] {
            let e = p(&[bad], true).unwrap_err();
            assert!(e.msg.contains("logbufs"), "{bad}: {}", e.msg);
        }
        for (s, v) in [
            ("16k", 16 << 10),
            ("32K", 32 << 10),
            ("65536", 64 << 10),
            ("128k", 128 << 10),
            ("262144", 256 << 10),
        ] {
            let o = p(&[&format!("logbsize={s}")], true).unwrap();
            assert_eq!(o.logbsize, Some(v), "{s}");
        }
        for bad in [
            "48k",
            "8k",
            "512k",
            "1m",
            "32kk",
            "k",
            "",
            "-32k",
            "32 k",
            "16385",
            "99999999999999999k",
        ] {
            let e = p(&[&format!("logbsize={bad}")], true).unwrap_err();
            assert!(e.msg.contains("logbsize"), "{bad}: {}", e.msg);
        }
        // The log options are image options too (harmless read-only).
        assert_eq!(p(&["logbufs=4"], false).unwrap().logbufs, Some(4));
        assert!(p(&["logbufs=9"], false).is_err());
    }
}
