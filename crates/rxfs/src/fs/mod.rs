//! A mounted filesystem: opening and mounting, and the operations of a
//! mounted filesystem. What each structure is and how it is read or
//! changed lives in that structure's module (`inode`, `bmap`, `dir`,
//! `attr`, `rt`, ...); log recovery in `recover`. Here:
//!
//! - this file: [`Filesystem::open`] (superblock and feature checks, the
//!   realtime and log checks, in-memory recovery of a dirty log for a
//!   read-only mount) and [`recover_to_device`] (`rxfs recover`);
//! - [`rw`]: the read-write mount (the write path wired together,
//!   recovery of a dirty log through it, unmount, shutdown, counters);
//!   [`trans`]: its logged transaction;
//! - [`inode`]: the inode cache and `iget`; [`read`]: the read path's
//!   locks and entry points (the [`crate::inode::ReadCtx`] the structure
//!   modules read through), path resolution; [`atime`]; [`statfs`];
//! - the operations of a read-write mount: [`ops_data`] (write, with
//!   speculative preallocation; setattr; fsync), [`overwrite`] (its
//!   transaction-free fast path), [`ops_falloc`], [`ops_ns`],
//!   [`ops_link`], [`ops_rename`], [`ops_attr`] (xattrs), [`ops_flags`]
//!   (inode flags, fsxattr, the label).
//!
//! [`Filesystem`] is `Send + Sync`; every method takes `&self` and may be
//! called from many threads at once. Metadata reaches algorithm code only
//! after its verifier has passed.

pub mod atime;
pub mod inode;
pub mod ops_attr;
pub mod ops_data;
pub mod ops_falloc;
pub mod ops_flags;
pub mod ops_link;
pub mod ops_ns;
pub mod ops_rename;
pub mod overwrite;
pub mod read;
pub mod rw;
pub mod statfs;
pub mod trans;
mod tx_copy;

pub use statfs::StatFs;

use std::path::Path;
use std::sync::Arc;

use crate::bdev::{BlockDevice, FileDevice};
use crate::error::{Error, Location, Result};
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::types::Daddr;

/// Options of `rxfs mount` and [`Filesystem::open`], spelled as the kernel does.
#[derive(Debug, Clone, Default)]
pub struct MountOptions {
    pub read_only: bool,
    pub norecovery: bool,
    /// Open devices with O_DIRECT.
    pub direct_io: bool,
    /// In-core log buffers (`logbufs=N`, 2..=8; default 8).
    pub logbufs: Option<usize>,
    /// Size of each log buffer (`logbsize=SIZE`, 16 KiB..256 KiB, a power
    /// of two; default 256 KiB where the log is large enough, see
    /// `rw::default_logbsize`; the kernel's default is 32 KiB).
    pub logbsize: Option<u32>,
    /// Benchmarks only: push a checkpoint after every transaction (the
    /// behaviour before delayed logging), to measure what the CIL saves.
    pub ablate_delaylog: bool,
    /// Speculative preallocation past EOF (`allocsize=SIZE`): `None`
    /// grows it with the file (see [`crate::bmap::prealloc`]), `Some(bytes)` fixes its
    /// size as the kernel's option does, `Some(0)` turns it off (an rxfs
    /// extension, for tests that count extents).
    pub allocsize: Option<u64>,
    /// Benchmarks only: every write and flush of the devices waits this
    /// much longer (see [`crate::bdev::LatencyDevice`]), to measure
    /// batching and parallelism when the device is the bottleneck.
    pub inject_latency: Option<std::time::Duration>,
    /// When reads update atime (`noatime`, `relatime`, `strictatime`;
    /// see [`atime`]).
    pub atime: atime::AtimeMode,
    /// `nodiratime`: reads of directories never update atime.
    pub nodiratime: bool,
    /// Benchmarks only: how the realtime allocator searches the summary
    /// (`rtsumcache=none|minlevel|memory`, see [`crate::cache::rtsum`]).
    pub rtsumcache: crate::cache::rtsum::RtSumMode,
    /// Where the filesystem is inside the data device (a partition of a
    /// whole-disk image); None: the whole device.
    pub within: Option<Within>,
}

/// A filesystem inside a larger device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    /// From this byte to the end.
    Offset(u64),
    /// Partition N (from 1) of the device's GPT or DOS table.
    Partition(u32),
}

impl Within {
    /// `dev` narrowed to the range.
    pub fn apply(self, dev: Arc<dyn BlockDevice>) -> Result<Arc<dyn BlockDevice>> {
        let (start, len) = match self {
            Within::Offset(o) => (o, None),
            Within::Partition(n) => {
                let (s, l) = crate::bdev::partition(dev.as_ref(), n)?;
                (s, Some(l))
            }
        };
        Ok(Arc::new(crate::bdev::RangeDevice::new(dev, start, len)?))
    }
}

/// Inodes kept decoded in memory.
const INODE_CACHE_CAPACITY: usize = 65536;

pub struct Filesystem {
    dev: Arc<dyn BlockDevice>,
    rtdev: Option<Arc<dyn BlockDevice>>,
    sb: Superblock,
    geo: Geometry,
    opts: MountOptions,
    /// The log state found at open (see [`crate::log::find::LogState`]).
    log_state: Option<crate::log::find::LogState>,
    /// What log recovery replayed at open (read-only mounts of a dirty log).
    recovery: Option<crate::recover::RecoveryStats>,
    icache: inode::InodeCache,
    /// The write path (read-write mounts only).
    rw: Option<rw::RwCore>,
    /// Bumped at every commit that changes an inode: a reader caches a
    /// decoded inode only if no commit happened while it read.
    epoch: std::sync::atomic::AtomicU64,
    /// Set by [`Self::shutdown`]: every operation, reads included, fails
    /// with `Shutdown` (EIO) from then on.
    shut_down: std::sync::atomic::AtomicBool,
    /// The label (see [`ops_flags`]).
    label: parking_lot::Mutex<[u8; 12]>,
}

impl Filesystem {
    /// Open an image file or block device (and an optional realtime device).
    pub fn open_path(path: &Path, rtdev: Option<&Path>, opts: MountOptions) -> Result<Arc<Self>> {
        let mut dev: Arc<dyn BlockDevice> =
            Arc::new(FileDevice::open(path, opts.read_only, opts.direct_io)?);
        if let Some(w) = opts.within {
            dev = w.apply(dev)?;
        }
        if let Some(d) = opts.inject_latency {
            dev = Arc::new(crate::bdev::LatencyDevice::new(dev, d, false));
        }
        let rt = match rtdev {
            Some(p) => Some(
                Arc::new(FileDevice::open(p, opts.read_only, opts.direct_io)?)
                    as Arc<dyn BlockDevice>,
            ),
            None => None,
        };
        Self::open(dev, rt, opts)
    }

    /// Open a filesystem: read and verify the primary superblock, check the
    /// features, and check the log state.
    pub fn open(
        dev: Arc<dyn BlockDevice>,
        rtdev: Option<Arc<dyn BlockDevice>>,
        opts: MountOptions,
    ) -> Result<Arc<Self>> {
        let sb = crate::geometry::read_primary_sb(&*dev)?;
        let unknown = sb.unknown_incompat();
        if unknown != 0 {
            return Err(Error::UnknownIncompat {
                bits: unknown,
                names: crate::format::sb::incompat_names(unknown),
            });
        }
        if sb.has_incompat(crate::format::sb::INCOMPAT_NEEDSREPAIR) {
            return Err(Error::NotSupported(
                "filesystem is marked needsrepair: run xfs_repair first".into(),
            ));
        }
        if sb.unknown_ro_compat() != 0 && !opts.read_only {
            return Err(Error::ReadOnly(format!(
                "unknown read-only-compatible features {:#x}: mount with -o ro",
                sb.unknown_ro_compat()
            )));
        }
        if !opts.read_only {
            return Self::open_rw(dev, rtdev, opts);
        }
        let geo = Geometry::new(&sb);
        let need = geo.dblocks << geo.blocklog;
        if dev.size() < need {
            return Err(Error::corrupt(
                "superblock",
                Location::Daddr(0),
                format!("device has {} bytes, filesystem needs {need}", dev.size()),
            ));
        }
        crate::rt::check_at_open(&sb, rtdev.as_deref())?;
        let log_state = crate::recover::mount::check_at_open(
            &*dev,
            &geo,
            &sb,
            opts.read_only,
            opts.norecovery,
        )?;
        let mut recovery = None;
        let (dev, sb, geo) = match &log_state {
            Some(st) if st.needs_recovery() && !opts.norecovery => {
                // Read-only mount of a dirty log: replay it in memory and
                // read through the replayed blocks.
                let rec = crate::recover::finish::recover_and_finish(
                    &dev,
                    &geo,
                    &sb,
                    st,
                    crate::recover::finish::Unfreeable::Keep,
                )?;
                tracing::info!("log recovered in memory: {}", rec.stats);
                let dev: Arc<dyn BlockDevice> =
                    Arc::new(crate::bdev::OverlayDevice::new(dev, rec.overlay));
                recovery = Some(rec.stats);
                let sb = crate::geometry::read_primary_sb(&*dev)?;
                let geo = Geometry::new(&sb);
                (dev, sb, geo)
            }
            _ => (dev, sb, geo),
        };
        let fname = sb.fname;
        Ok(Arc::new(Filesystem {
            recovery,
            dev,
            rtdev,
            sb,
            geo,
            opts,
            log_state,
            icache: inode::InodeCache::new(INODE_CACHE_CAPACITY),
            rw: None,
            epoch: std::sync::atomic::AtomicU64::new(0),
            shut_down: std::sync::atomic::AtomicBool::new(false),
            label: parking_lot::Mutex::new(fname),
        }))
    }

    /// Read `len` bytes at `daddr` from the data device, unverified.
    /// Only format-aware callers that verify the result use this.
    pub fn read_raw(&self, daddr: Daddr, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.dev.read_at(&mut buf, daddr.bytes())?;
        Ok(buf)
    }

    pub fn sb(&self) -> &Superblock {
        &self.sb
    }
    pub fn geo(&self) -> &Geometry {
        &self.geo
    }
    pub fn dev(&self) -> &dyn BlockDevice {
        &*self.dev
    }
    pub fn rtdev(&self) -> Option<&dyn BlockDevice> {
        self.rtdev.as_deref()
    }

    /// The device holding the data of a file: the realtime device for a
    /// realtime file (`rt`), else the data device.
    pub(crate) fn file_dev(&self, rt: bool) -> Result<&dyn BlockDevice> {
        if !rt {
            return Ok(self.dev());
        }
        self.rtdev().ok_or_else(|| {
            Error::Invalid("a realtime file needs the realtime device (-o rtdev=FILE)".into())
        })
    }
    /// What log recovery replayed at open, if the log was dirty.
    pub fn recovery_stats(&self) -> Option<&crate::recover::RecoveryStats> {
        self.recovery.as_ref()
    }
    pub fn options(&self) -> &MountOptions {
        &self.opts
    }

    /// The log state found at open (None: external log, or not computed
    /// because the mount was `norecovery` and the log could not be read).
    pub fn log_state(&self) -> Option<&crate::log::find::LogState> {
        self.log_state.as_ref()
    }

    /// The internal log, for reading.
    pub fn log(&self) -> Result<crate::log::find::Log<'_>> {
        crate::log::find::Log::new(self.dev(), self.geo(), self.sb())
    }
}

/// Recover the filesystem on `dev` in place: replay the log, finish its
/// intents and unlinked inodes, write the resulting blocks, flush, then
/// write a clean log. Returns what was replayed (all zero for a log that
/// was already clean).
///
/// Filesystems rxfs can mount read-write recover as that mount does:
/// finishing through the log, crash-safe at every step
/// ([`crate::recover::logged`]); then a clean unmount. The others
/// (external log, realtime with reverse mapping, and a realtime section
/// whose device is not given: see [`recover_devices`]) take
/// [`crate::recover::clean::recover_in_place`].
pub fn recover_to_device(dev: Arc<dyn BlockDevice>) -> Result<crate::recover::RecoveryStats> {
    recover_devices(dev, None, MountOptions::default())
}

/// [`recover_to_device`] with the realtime device of a filesystem with a
/// realtime section, and the options of the read-write mount it recovers
/// through (`read_only` is ignored). Recovery never touches realtime data
/// (the bitmap and summary live on the data device), so without the
/// realtime device such a filesystem recovers in place; with it, through
/// its read-write mount. Both recount `sb_frextents` from the bitmap.
pub fn recover_devices(
    dev: Arc<dyn BlockDevice>,
    rtdev: Option<Arc<dyn BlockDevice>>,
    opts: MountOptions,
) -> Result<crate::recover::RecoveryStats> {
    if dev.read_only() || rtdev.as_ref().is_some_and(|d| d.read_only()) {
        return Err(Error::ReadOnly("recovery needs a writable device".into()));
    }
    let sb = crate::geometry::read_primary_sb(&*dev)?;
    let geo = Geometry::new(&sb);
    let log = crate::log::find::Log::new(&*dev, &geo, &sb)?;
    let st = log.find_state()?;
    if !st.needs_recovery() {
        return Ok(Default::default());
    }
    let rt_missing = sb.rextents > 0 && rtdev.is_none();
    if !rt_missing && rw::check_writable(&sb, &geo, &*dev).is_ok() {
        let fs = Filesystem::open(
            dev.clone(),
            rtdev,
            MountOptions {
                read_only: false,
                ..opts
            },
        )?;
        let stats = fs.recovery_stats().cloned().unwrap_or_default();
        fs.unmount()?;
        return Ok(stats);
    }
    crate::recover::clean::recover_in_place(&dev, &geo, &sb, &log, &st, rw::log_sunit(&sb))
}
