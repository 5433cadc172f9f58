//! A read-write mount: the write path's parts and how they are wired,
//! and its counters a user can read ([`FsStats`], `rxfs stats`).
//!
//! ```text
//!  Trans (fs::trans) --commit--> Cil (cil) --push--> LogWriter (log) --> device
//!      |                              ^ force (fsync)        | checkpoint stable
//!      v                              |                      v
//!  BufCache / InodeTable (cache) <--- Ail (ail): write-back, tail --> grant heads
//!      |
//!      v
//!  CacheDevice (cache::view): what the read path reads
//! ```
//!
//! Opening read-write: refuse what rxfs cannot write yet (realtime with
//! reverse mapping, external logs, unaligned inode chunks) and a realtime
//! section without its device, recover a dirty log onto the device
//! first, then continue the (now clean) log.
//!
//! Unmount: stop new transactions, force the CIL, drain the AIL, log the
//! superblock with exact counters (lazy counters are written only here),
//! drain again, write the unmount record. `xfs_repair -n` is clean after.

use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{Filesystem, MountOptions};
use crate::ail::Ail;
use crate::bdev::BlockDevice;
use crate::cache::ilock::LockStats;
use crate::cache::inode_item::{ILockExcl, ILockShared};
use crate::cache::{BufCache, CacheDevice, InodeTable};
use crate::cil::Cil;
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::format::put_be64;
use crate::format::sb::Superblock;
use crate::fs::trans::Trans;
use crate::geometry::Geometry;
use crate::log::{LogConfig, LogStats, LogWriter};
use crate::recover::finish::Unfreeable;
use crate::types::{Daddr, Ino};
use crate::xact::{MetaTx, Resv};

/// Buffers kept in the cache (clean ones beyond this are dropped).
const BUF_CAPACITY: usize = 65536;

/// In-core superblock counters (lazy: exact in memory, on disk at unmount).
#[derive(Debug, Clone, Copy)]
pub struct SbCounters {
    pub fdblocks: i64,
    pub icount: i64,
    pub ifree: i64,
    /// Free realtime extents (`sb_frextents`).
    pub frextents: i64,
}

/// What [`Filesystem::shutdown`] makes stable before it stops (the flags
/// of XFS's `XFS_IOC_GOINGDOWN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownFlush {
    /// Data, the log, and every logged change written back in place
    /// (`XFS_FSOP_GOING_FLAGS_DEFAULT`: the kernel freezes first).
    All,
    /// Data and the log, nothing written back (`..._LOGFLUSH`).
    Log,
    /// Nothing: the device holds what a power cut at this instant would
    /// leave (`..._NOLOGFLUSH`).
    Nothing,
}

pub struct RwCore {
    pub(crate) raw: Arc<dyn BlockDevice>,
    pub(crate) bufs: Arc<BufCache>,
    pub(crate) inodes: InodeTable,
    pub(crate) log: Arc<LogWriter>,
    pub(crate) cil: Arc<Cil>,
    pub(crate) ail: Arc<Ail>,
    counters: Mutex<SbCounters>,
    next_id: AtomicU64,
    shut: AtomicBool,
    unmounted: AtomicBool,
    cancels: AtomicU64,
    /// Transactions begun (log space reserved).
    allocs: AtomicU64,
    /// AG header joins against the lock order (see [`crate::xact`]):
    /// an AGI after an AGF or a higher AGI, an AGF after a higher AGF.
    pub(crate) lock_order_violations: AtomicU64,
    /// The directory rotor of this mount (see [`crate::ialloc`]).
    pub(crate) dir_rotor: std::sync::atomic::AtomicU32,
    /// Open references and O_TMPFILE inodes (see [`super::ops_link`]).
    pub(crate) open: super::ops_link::OpenRefs,
    /// Serialises renames between directories (the VFS's rename mutex):
    /// the check that a directory is not moved into its own subtree reads
    /// ancestors no other such rename can change meanwhile.
    pub(crate) rename_lock: Mutex<()>,
    /// Free-space btree blocks at the last count (see
    /// [`RwCore::unavailable_blocks`]).
    allocbt_hint: AtomicU64,
    /// Inodes with speculative preallocation (see [`crate::bmap::prealloc`]).
    pub(crate) prealloc: crate::bmap::prealloc::Prealloc,
    /// The realtime lock and the allocator's in-core state (`None`
    /// without a realtime section; see [`crate::cache::rtsum`]).
    pub(crate) rt: Option<Mutex<crate::cache::rtsum::RtSumCache>>,
}

impl RwCore {
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    pub(crate) fn apply_sb_delta(&self, d: [i64; 4]) {
        let mut c = self.counters.lock();
        c.fdblocks += d[0];
        c.icount += d[1];
        c.ifree += d[2];
        c.frextents += d[3];
    }

    pub(crate) fn count_commit(&self) {}

    pub(crate) fn count_cancel(&self) {
        self.cancels.fetch_add(1, Relaxed);
    }

    pub fn counters(&self) -> SbCounters {
        *self.counters.lock()
    }

    /// Free blocks ordinary allocations must leave alone: the kernel's
    /// set-aside per AG plus the blocks of the free-space btrees (as its
    /// `xfs_fdblocks_unavailable`). The btree part is recounted from the
    /// AGFs when `free` comes within a margin of the last count, so that
    /// the refusal happens exactly where the kernel's would.
    pub(crate) fn unavailable_blocks(&self, fs: &Filesystem, free: i64) -> u64 {
        const MARGIN: i64 = 256;
        let set_aside = super::statfs::alloc_set_aside(fs.geo());
        let last = self.allocbt_hint.load(Relaxed);
        if free - ((set_aside + last) as i64) < MARGIN {
            if let Ok(s) = fs.ag_summary() {
                self.allocbt_hint.store(s.allocbt_blocks, Relaxed);
                return set_aside + s.allocbt_blocks;
            }
        }
        set_aside + last
    }
}

/// The log stripe unit records are padded to, in bytes (512 without one;
/// `sb_logsunit` is in bytes and only meaningful on v2 logs).
pub(crate) fn log_sunit(sb: &Superblock) -> u32 {
    if sb.logsunit > 1 && sb.logsunit.is_multiple_of(512) {
        sb.logsunit
    } else {
        512
    }
}

/// Refuse filesystems rxfs cannot change safely yet.
pub(crate) fn check_writable(sb: &Superblock, geo: &Geometry, dev: &dyn BlockDevice) -> Result<()> {
    let no = |what: &str| {
        Err(Error::NotSupported(format!(
            "read-write mounts of {what}: mount with -o ro"
        )))
    };
    if dev.read_only() {
        return Err(Error::ReadOnly(
            "the device is read-only: mount with -o ro".into(),
        ));
    }
    if sb.rextents > 0 && sb.has_rmapbt() {
        return no("realtime filesystems with reverse mapping (rtgroups)");
    }
    if sb.rextents > 0 && sb.agcount >= crate::rtalloc::RT_BUSY_AG {
        return no("realtime filesystems of 2^31 AGs or more");
    }
    if sb.logstart == 0 {
        return no("filesystems with an external log");
    }
    let bpc = geo.inode_cluster_blocks.max(1);
    if geo.inoalignmt == 0 || !geo.inoalignmt.is_multiple_of(bpc) {
        return no("filesystems whose inode chunks are not cluster-aligned");
    }
    if sb.unknown_ro_compat() != 0 {
        return Err(Error::ReadOnly(
            "unknown read-only-compatible features".into(),
        ));
    }
    Ok(())
}

impl Filesystem {
    /// Open read-write (see the module doc). Called by [`Filesystem::open`].
    pub(super) fn open_rw(
        dev: Arc<dyn BlockDevice>,
        rtdev: Option<Arc<dyn BlockDevice>>,
        opts: MountOptions,
    ) -> Result<Arc<Self>> {
        if opts.norecovery {
            return Err(Error::Invalid(
                "norecovery requires a read-only mount (-o ro,norecovery), as in the kernel".into(),
            ));
        }
        let sb = crate::geometry::read_primary_sb(&*dev)?;
        let geo = Geometry::new(&sb);
        check_writable(&sb, &geo, &*dev)?;
        if sb.rextents > 0 && rtdev.is_none() {
            return Err(Error::Invalid(
                "the filesystem has a realtime section: give its device with -o rtdev=FILE \
                 (or mount read-only)"
                    .into(),
            ));
        }
        let need = geo.dblocks << geo.blocklog;
        if dev.size() < need {
            return Err(Error::corrupt(
                "superblock",
                crate::error::Location::Daddr(0),
                format!("device has {} bytes, filesystem needs {need}", dev.size()),
            ));
        }
        let st = crate::log::find::Log::new(&*dev, &geo, &sb)?.find_state()?;
        // A dirty log: checked in memory (refused with nothing written),
        // replayed onto the device, then continued and finished through
        // logged transactions below (see crate::recover::logged).
        let (recovery, pending) = if st.needs_recovery() {
            let check = crate::recover::finish::recover_and_finish(
                &dev,
                &geo,
                &sb,
                &st,
                Unfreeable::Refuse,
            )?;
            let pending = crate::recover::logged::replay_onto_device(&*dev, &geo, &sb, &st)?;
            (Some(check.stats), Some(pending))
        } else {
            (None, None)
        };
        let sb = crate::geometry::read_primary_sb(&*dev)?;
        let geo = Geometry::new(&sb);
        let sunit = log_sunit(&sb);
        let logbufs = opts.logbufs.unwrap_or(8);
        let logbsize = match opts.logbsize {
            Some(b) if b < sunit => {
                return Err(Error::Invalid(format!(
                    "logbsize {b} is smaller than the log stripe unit {sunit}, as the kernel \
                     refuses"
                )))
            }
            Some(b) => b,
            None => default_logbsize(st.size_bbs, logbufs, sunit),
        };
        let mut cfg = LogConfig::from_state(&st, sb.uuid, logbufs, logbsize);
        cfg.sunit = sunit;
        let view = Arc::new(CacheDevice::new(dev.clone()));
        let bufs = Arc::new(BufCache::new(BUF_CAPACITY));
        let uuid = sb.metadata_uuid();
        let ail = Ail::new(dev.clone(), view.clone(), bufs.clone(), geo.clone(), uuid);
        let log = Arc::new(LogWriter::new(dev.clone(), cfg, ail.clone())?);
        // Torn remnants of a crash ahead of the head go first (see there).
        log.clear_stale_blocks()?;
        let cil = Cil::new(
            log.clone(),
            ail.clone(),
            view.clone(),
            geo.clone(),
            uuid,
            opts.ablate_delaylog,
        );
        ail.start(&log, &cil);
        let counters = SbCounters {
            fdblocks: sb.fdblocks as i64,
            icount: sb.icount as i64,
            ifree: sb.ifree as i64,
            frextents: sb.frextents as i64,
        };
        let core = RwCore {
            raw: dev,
            bufs,
            inodes: InodeTable::default(),
            log,
            cil,
            ail,
            counters: Mutex::new(counters),
            next_id: AtomicU64::new(1),
            shut: AtomicBool::new(false),
            unmounted: AtomicBool::new(false),
            cancels: AtomicU64::new(0),
            allocs: AtomicU64::new(0),
            lock_order_violations: AtomicU64::new(0),
            dir_rotor: Default::default(),
            open: Default::default(),
            rename_lock: Mutex::new(()),
            allocbt_hint: AtomicU64::new(0),
            prealloc: Default::default(),
            rt: (sb.rextents > 0).then(|| {
                Mutex::new(crate::cache::rtsum::RtSumCache::new(
                    opts.rtsumcache,
                    sb.rextslog as u32 + 1,
                    sb.rbmblocks,
                ))
            }),
        };
        let dev: Arc<dyn BlockDevice> = view;
        let fname = sb.fname;
        let fs = Arc::new(Filesystem {
            recovery,
            dev,
            rtdev,
            sb,
            geo,
            opts,
            log_state: Some(st),
            icache: super::inode::InodeCache::new(super::INODE_CACHE_CAPACITY),
            rw: Some(core),
            epoch: AtomicU64::new(0),
            shut_down: AtomicBool::new(false),
            label: Mutex::new(fname),
        });
        if let (Some(p), Some(want)) = (pending, fs.recovery.as_ref()) {
            if let Err(e) = crate::recover::logged::finish_logged(&*fs, p, want) {
                // The log stays dirty with whatever was finished: the next
                // recovery (ours or the kernel's) finishes the rest.
                tracing::error!("finishing log recovery failed: {e}");
                fs.abandon();
                return Err(e);
            }
            tracing::info!("log recovered: {want}");
        }
        if fs.sb.rextents > 0 {
            if let Err(e) = fs.init_rt() {
                fs.abandon();
                return Err(e);
            }
        }
        Ok(fs)
    }

    /// Make completed writes to the realtime device stable (none: Ok).
    pub(crate) fn flush_rtdev(&self) -> Result<()> {
        match &self.rtdev {
            Some(d) => d.flush(),
            None => Ok(()),
        }
    }

    /// A realtime section: find the bitmap and summary blocks for the
    /// allocator and, after a recovery, recount `sb_frextents` from the
    /// bitmap (the kernel does the same at mount: the counter is lazy).
    fn init_rt(&self) -> Result<()> {
        let rw = self.rw_live()?;
        if let Some(d) = &self.rtdev {
            rw.log.add_data_device(d.clone());
        }
        let maps = crate::rt::maps(self)?;
        if let Some(m) = &rw.rt {
            m.lock().maps = Some(Arc::new(maps));
        }
        if self.recovery.is_some() {
            let free = crate::rt::free_extents(self)?;
            rw.counters.lock().frextents = free as i64;
        }
        Ok(())
    }

    /// The write path, on read-write mounts.
    pub fn rw(&self) -> Option<&RwCore> {
        self.rw.as_ref()
    }

    pub(super) fn rw_live(&self) -> Result<&RwCore> {
        let rw = self
            .rw
            .as_ref()
            .ok_or_else(|| Error::ReadOnly("mounted read-only".into()))?;
        if rw.shut.load(Relaxed) {
            return Err(Error::Shutdown);
        }
        Ok(rw)
    }

    /// Start a transaction with a log reservation for an operation of kind
    /// `r`. Take inode locks *before* this (the reservation may wait for
    /// log space, which needs the AIL, which never waits on inode locks).
    pub fn trans_alloc(&self, r: Resv) -> Result<Trans<'_>> {
        let rw = self.rw_live()?;
        let unit = crate::fs::trans::reservation(&self.geo, r);
        let t = rw.log.reserve(unit, 1, false)?;
        rw.allocs.fetch_add(1, Relaxed);
        Ok(Trans::new(self, t))
    }

    /// Lock inode `ino` exclusively (several: ascending inode number).
    pub fn ilock(&self, ino: Ino) -> Result<ILockExcl> {
        Ok(self.rw_live()?.inodes.ilock(ino))
    }

    pub fn ilock_shared(&self, ino: Ino) -> Result<ILockShared> {
        Ok(self.rw_live()?.inodes.ilock_shared(ino))
    }

    /// Make every transaction committed up to CIL sequence `seq` stable.
    pub fn log_force_seq(&self, seq: u64) -> Result<()> {
        self.rw_live()?.cil.force_seq(seq)
    }

    /// Make every committed transaction stable.
    pub fn log_force(&self) -> Result<()> {
        self.rw_live()?.cil.force_all()
    }

    /// Make the last committed change of inode `ino` stable (fsync); with
    /// `datasync`, its last change of more than timestamps (fdatasync).
    /// Nothing is forced when that change is stable already: returns
    /// whether a force was needed (then a log write issued after the
    /// change committed made it stable, with its cache flush).
    pub fn log_force_inode(&self, ino: Ino, datasync: bool) -> Result<bool> {
        let rw = self.rw_live()?;
        let seq = rw.inodes.get(ino).map(|ip| {
            let st = ip.st.lock();
            match datasync {
                true => st.log.last_dsync_seq,
                false => st.log.last_seq,
            }
        });
        match seq {
            Some(s) if s > 0 && !rw.cil.is_stable(s) => rw.cil.force_seq(s).map(|_| true),
            _ => Ok(false),
        }
    }

    /// sync(2): file data and every committed transaction on disk.
    pub fn sync(&self) -> Result<()> {
        let rw = self.rw_live()?;
        self.flush_rtdev()?;
        rw.raw.flush()?;
        rw.cil.force_all()
    }

    /// Write every logged change back in place and wait for it: file data
    /// flushed, the log forced, the AIL drained (the log tail reaches the
    /// head). What the kernel's `xfs_ail_push_all_sync` does for freeze;
    /// tests use it to put a known state on disk before a crash.
    pub fn flush_metadata(&self) -> Result<()> {
        let rw = self.rw_live()?;
        self.flush_rtdev()?;
        rw.raw.flush()?;
        rw.cil.force_all()?;
        rw.ail.drain(Duration::from_secs(120))
    }

    /// Counters of the write path (all zero on read-only mounts).
    pub fn stats(&self) -> FsStats {
        let Some(rw) = &self.rw else {
            return FsStats::default();
        };
        let c = rw.cil.stats();
        let a = rw.ail.stats();
        FsStats {
            trans_commits: c.commits,
            trans_cancels: rw.cancels.load(Relaxed),
            trans_allocs: rw.allocs.load(Relaxed),
            ag_lock_order_violations: rw.lock_order_violations.load(Relaxed),
            trans_resv_overruns: c.resv_short,
            cil_items: c.items,
            cil_relogged: c.relogged,
            checkpoints: c.checkpoints,
            checkpoint_bytes: c.ckpt_bytes,
            checkpoint_max_bytes: c.ckpt_max,
            checkpoint_trans: c.ckpt_trans,
            cil_background_pushes: c.bg_pushes,
            cil_forces: c.forces,
            ail_pushes: a.pushes,
            ail_items_written: a.written,
            ail_write_ios: a.ios,
            ail_pinned_skips: a.pinned,
            unlogged_changes: a.unlogged,
            log: rw.log.stats(),
            locks: rw.inodes.locks.stats(),
            rt: rw.rt.as_ref().map(|m| m.lock().stats).unwrap_or_default(),
        }
    }

    /// Clean unmount (see the module doc). After [`Self::shutdown`] it
    /// writes nothing. Later calls do nothing; later
    /// transactions fail with `Shutdown`.
    pub fn unmount(&self) -> Result<()> {
        let Some(rw) = &self.rw else {
            return Ok(());
        };
        if rw.unmounted.swap(true, Relaxed) {
            return Ok(());
        }
        let r = self.unmount_inner(rw);
        rw.shut.store(true, Relaxed);
        rw.cil.stop();
        rw.ail.stop();
        r
    }

    fn unmount_inner(&self, rw: &RwCore) -> Result<()> {
        let drain = Duration::from_secs(120);
        // Unused preallocation goes back; open files whose last link
        // went: their last close is now.
        self.trim_all_eof(None)?;
        self.free_open_orphans()?;
        self.flush_rtdev()?;
        rw.raw.flush()?;
        rw.cil.force_all()?;
        rw.ail.drain(drain)?;
        // The superblock with exact counters, through the log.
        let c = rw.counters();
        let mut tp = self.trans_alloc(Resv::Misc)?;
        let sect = self.geo.sectsize as usize;
        let b = tp.read_buf(Daddr(0), sect, BufKind::Sb)?;
        let d = tp.buf_mut(b);
        put_be64(d, 128, c.icount.max(0) as u64);
        put_be64(d, 136, c.ifree.max(0) as u64);
        put_be64(d, 144, c.fdblocks.max(0) as u64);
        put_be64(d, 152, c.frextents.max(0) as u64);
        tp.log_buf(b, 128..160);
        let seq = tp.commit()?;
        rw.cil.force_seq(seq)?;
        rw.ail.drain(drain)?;
        rw.log.unmount_record()?;
        rw.raw.flush()
    }

    /// Stop without unmounting: the log is left as it is (a crash, as far
    /// as the image is concerned). For tests and `kill -9` semantics.
    pub fn abandon(&self) {
        if let Some(rw) = &self.rw {
            rw.shut.store(true, Relaxed);
            rw.unmounted.store(true, Relaxed);
            rw.log.shutdown();
            rw.cil.stop();
            rw.ail.stop();
        }
    }

    /// Shut the filesystem down, as XFS's `XFS_IOC_GOINGDOWN` does: first
    /// what `how` says is made stable, then the log stops (no write
    /// reaches the device after this returns), and every later operation,
    /// reads included, fails with `Shutdown` (EIO). The unmount that
    /// follows writes nothing: the next mount (rxfs or the kernel)
    /// recovers the log. A second call does nothing.
    pub fn shutdown(&self, how: ShutdownFlush) -> Result<()> {
        if self.shut_down.swap(true, SeqCst) {
            return Ok(());
        }
        let mut r = Ok(());
        if let Some(rw) = self.rw.as_ref().filter(|rw| !rw.shut.load(Relaxed)) {
            r = match how {
                ShutdownFlush::All => self.flush_metadata(),
                ShutdownFlush::Log => self
                    .flush_rtdev()
                    .and_then(|()| rw.raw.flush())
                    .and_then(|()| rw.cil.force_all()),
                ShutdownFlush::Nothing => Ok(()),
            };
        }
        self.abandon();
        r
    }

    /// Whether [`Self::shutdown`] ran.
    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Relaxed)
    }

    /// `Err(Shutdown)` once the filesystem is shut down (the read path's
    /// check; the write path's is [`Self::trans_alloc`]'s).
    pub(crate) fn check_live(&self) -> Result<()> {
        match self.is_shut_down() {
            true => Err(Error::Shutdown),
            false => Ok(()),
        }
    }

    /// The read path's cached copy of `ino` is stale.
    pub(crate) fn invalidate_inode(&self, ino: Ino) {
        self.icache.remove_bump(ino, &self.epoch);
    }
}

/// How recovery finishes through this mount's log (see
/// [`crate::recover::logged`]).
impl crate::recover::logged::LoggedMount for Filesystem {
    type Tx<'a> = Trans<'a>;
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn live_ail(&self) -> Result<&Ail> {
        Ok(&self.rw_live()?.ail)
    }
    fn trans_alloc(&self, r: Resv) -> Result<Trans<'_>> {
        Filesystem::trans_alloc(self, r)
    }
    fn commit(tx: Trans<'_>) -> Result<()> {
        tx.commit().map(|_| ())
    }
    fn cancel(tx: Trans<'_>) {
        tx.cancel()
    }
    fn log_intent_done(tx: &mut Trans<'_>, intent: Arc<crate::ail::IntentItem>, done: Vec<u8>) {
        tx.log_intent_done(intent, done)
    }
    fn log_force(&self) -> Result<()> {
        Filesystem::log_force(self)
    }
}

/// The log buffer size when `logbsize` is not given: the largest the
/// kernel allows (256 KiB) while all `logbufs` buffers fit in an eighth of
/// the log, never below 32 KiB or the log stripe unit. The kernel defaults
/// to 32 KiB (or the stripe unit) to spare kernel memory; a daemon has
/// memory to spare (8 x 256 KiB), and a checkpoint of many synchronous
/// commits then goes out as one write instead of several (seed 002's
/// batching: with 16 threads fsyncing, 15.8 fsyncs per log write instead
/// of 5.2, and 13% more fsyncs per second; `rxfs bench fsync --logbsize`).
/// `-o logbsize=32k` gives the kernel's choice.
fn default_logbsize(log_bbs: u32, logbufs: usize, sunit: u32) -> u32 {
    let log_bytes = u64::from(log_bbs) * crate::format::log::BBSIZE as u64;
    let mut b: u32 = 256 * 1024;
    while b > 32 * 1024 && (logbufs as u64) * u64::from(b) * 8 > log_bytes {
        b /= 2;
    }
    b.max(sunit)
}

/// A snapshot of the write path's counters (all zero on read-only mounts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsStats {
    /// Transactions committed, and cancelled.
    pub trans_commits: u64,
    pub trans_cancels: u64,
    /// Transactions begun ([`Filesystem::trans_alloc`]; one that changed
    /// nothing is neither committed nor cancelled).
    pub trans_allocs: u64,
    /// Commits that logged more than their reservation (a reservation
    /// too small for the operation: a bug to report; the CIL still writes
    /// them, from the log's headroom).
    pub trans_resv_overruns: u64,
    /// AGI/AGF joins out of lock order (AGIs before AGFs, each ascending):
    /// a deadlock waiting for the right interleaving; a bug to report.
    pub ag_lock_order_violations: u64,
    /// Log items inserted into the CIL (one per item per commit), and
    /// those that were already in the CIL (relogged in the same checkpoint).
    pub cil_items: u64,
    pub cil_relogged: u64,
    /// Checkpoints written, their total and largest size in bytes of log
    /// vectors, and the transactions they aggregated.
    pub checkpoints: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_max_bytes: u64,
    pub checkpoint_trans: u64,
    /// Background CIL pushes (space limit), and log forces asked of the CIL.
    pub cil_background_pushes: u64,
    pub cil_forces: u64,
    /// AIL: push passes, items written back, write I/Os (after merging
    /// adjacent buffers), items skipped because still pinned.
    pub ail_pushes: u64,
    pub ail_items_written: u64,
    pub ail_write_ios: u64,
    pub ail_pinned_skips: u64,
    /// Buffers written back whose committed image failed its CRC: a
    /// transaction changed bytes it did not log; a bug to report (the
    /// block is written with its CRC recomputed whole).
    pub unlogged_changes: u64,
    /// The log writer's counters (log writes, bytes, forces, grant waits).
    pub log: LogStats,
    /// Inode lock acquisitions (see [`crate::cache::ilock`]).
    pub locks: LockStats,
    /// The realtime allocator's work (see [`crate::cache::rtsum`]).
    pub rt: crate::cache::rtsum::RtAllocStats,
}

impl FsStats {
    /// `name value` lines, stable names (the stats file format).
    pub fn lines(&self) -> Vec<(&'static str, u64)> {
        let l = &self.log;
        vec![
            ("trans_commits", self.trans_commits),
            ("trans_cancels", self.trans_cancels),
            ("trans_allocs", self.trans_allocs),
            ("trans_resv_overruns", self.trans_resv_overruns),
            ("ag_lock_order_violations", self.ag_lock_order_violations),
            ("cil_items", self.cil_items),
            ("cil_relogged", self.cil_relogged),
            ("checkpoints", self.checkpoints),
            ("checkpoint_bytes", self.checkpoint_bytes),
            ("checkpoint_max_bytes", self.checkpoint_max_bytes),
            ("checkpoint_trans", self.checkpoint_trans),
            ("cil_background_pushes", self.cil_background_pushes),
            ("cil_forces", self.cil_forces),
            ("ail_pushes", self.ail_pushes),
            ("ail_items_written", self.ail_items_written),
            ("ail_write_ios", self.ail_write_ios),
            ("ail_pinned_skips", self.ail_pinned_skips),
            ("unlogged_changes", self.unlogged_changes),
            ("log_records", l.records),
            ("log_writes", l.writes),
            ("log_bytes", l.bytes),
            ("log_flushes", l.flushes),
            ("log_forces", l.forces),
            ("log_force_piggybacks", l.force_piggybacks),
            ("log_iclog_waits", l.iclog_waits),
            ("log_gate_waits", l.gate_waits),
            ("log_gate_timeouts", l.gate_timeouts),
            ("log_deferred_pushes", l.deferred_pushes),
            ("log_overlapped_commits", l.overlapped_commits),
            ("log_completion_batches", l.completion_batches),
            ("grant_waits", l.grant_waits),
            ("grant_wakeups", l.grant_wakeups),
            ("tail_pushes", l.tail_pushes),
            ("iolock_shared", self.locks.iolock_shared),
            ("iolock_excl", self.locks.iolock_excl),
            ("iolock_waits", self.locks.iolock_waits),
            ("iolock_upgrades", self.locks.iolock_upgrades),
            ("ilock_shared", self.locks.ilock_shared),
            ("ilock_excl", self.locks.ilock_excl),
            ("ilock_waits", self.locks.ilock_waits),
            ("rt_allocs", self.rt.allocs),
            ("rt_frees", self.rt.frees),
            ("rt_summary_reads", self.rt.summary_reads),
            ("rt_summary_skips", self.rt.summary_skips),
            ("rt_bitmap_reads", self.rt.bitmap_reads),
            ("rt_runs_indexed", self.rt.runs_indexed),
            ("rt_memo_skips", self.rt.memo_skips),
            ("rt_cache_invalidations", self.rt.invalidations),
            ("rt_alloc_ns", self.rt.alloc_ns),
            ("rt_busy_forces", self.rt.busy_forces),
            ("rt_force_ns", self.rt.force_ns),
        ]
    }
}
