//! The Active Item List: logged items in LSN order, written back so the
//! log tail can move.
//!
//! An item enters the AIL when the checkpoint holding it is stable, at the
//! checkpoint's start LSN (relogging moves it later). The tail of the log
//! is the smallest LSN in the AIL (or the last stable record when it is
//! empty): everything before it is written back and recovery need not
//! replay it.
//!
//! The pusher (one thread, xfsaild's role) writes back items at or below
//! its target: the grant heads ask for a target when log space runs low
//! ([`crate::log::TailPusher`]), unmount and sync ask for everything, and
//! an idle AIL is pushed in the background. A pass:
//! 1. takes up to [`BATCH`] items in LSN order; pinned ones (changed in a
//!    checkpoint not yet stable) are skipped and the log is forced after
//!    the pass, as the kernel's pusher does;
//! 2. buffers: the committed snapshot with the item's LSN stamped and the
//!    CRC recomputed, the buffer's transaction lock held (try-locked) from
//!    the check until it is marked clean, so that a transaction freeing
//!    its block (staling it) waits for the write instead of the write
//!    landing on the block after its reuse; inodes: copied into their
//!    cluster buffer (di_lsn, CRC), one write per cluster; a buffer or
//!    cluster locked by a transaction is skipped (the pusher never waits
//!    on a transaction);
//! 3. writes sorted by address, adjacent ones merged into one I/O; one
//!    device flush; then
//! 4. items whose snapshot is still the committed one are clean and leave
//!    the AIL; the tail moves.
//!
//! The tail moves only to where everything older is written back: the
//! oldest item's LSN, or, with the AIL empty and no checkpoint between its
//! log write and its insertion here ([`Ail::checkpoint_begin`]), the last
//! record on disk.
//!
//! Lock order: the AIL lock, then an item's state, or the log's core lock
//! (read once by [`Ail::move_tail`]; the log calls into the AIL with none
//! of its locks held). Nothing waits on a transaction while holding either.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::bdev::BlockDevice;
use crate::cache::{Buf, BufCache, CacheDevice, InodeItem};
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::format::meta_header::stamp_committed;
use crate::format::{crc, put_be64, Uuid};
use crate::geometry::Geometry;
use crate::log::{LogWriter, TailPusher};
use crate::types::Lsn;

/// Items taken per pass.
pub const BATCH: usize = 4096;
/// An AIL untouched for this long is written back in the background.
pub const IDLE_PUSH: Duration = Duration::from_millis(500);

/// How the AIL makes pinned items writable: force everything committed
/// so far into the log (the CIL above implements it; the AIL owns the
/// trait so that it need not know the CIL).
pub trait LogForce: Send + Sync {
    fn force_committed(self: Arc<Self>) -> Result<()>;
}

/// An intent (EFI) logged by a transaction whose follow-up (the EFD) is
/// still to come: it holds the log tail until its done item is stable.
#[derive(Debug)]
pub struct IntentItem {
    pub id: u64,
    pub st: Mutex<IntentState>,
}

#[derive(Debug, Default)]
pub struct IntentState {
    pub ail_lsn: Option<Lsn>,
    pub done: bool,
}

impl IntentItem {
    pub fn new(id: u64) -> Arc<Self> {
        Arc::new(IntentItem {
            id,
            st: Mutex::new(IntentState::default()),
        })
    }
}

#[derive(Clone)]
pub enum AilItem {
    Buf(Arc<Buf>),
    Inode(Arc<InodeItem>),
    /// An intent entering the AIL (its checkpoint is stable).
    Intent(Arc<IntentItem>),
    /// The done item of an intent is stable: the intent leaves the AIL.
    Done(Arc<IntentItem>),
}

impl AilItem {
    fn id(&self) -> u64 {
        match self {
            AilItem::Buf(b) => b.id,
            AilItem::Inode(i) => i.id | (1 << 63),
            AilItem::Intent(i) | AilItem::Done(i) => i.id | (1 << 62),
        }
    }
}

type Key = (Lsn, u64);
/// Inodes of one cluster to flush: (AIL key, item, snapshot).
type ClusterInodes = Vec<(Key, Arc<InodeItem>, Arc<Vec<u8>>)>;

#[derive(Default)]
struct Inner {
    map: BTreeMap<Key, AilItem>,
    target: Option<Lsn>,
    push_all: bool,
    last_activity: Option<Instant>,
    error: Option<String>,
    /// Checkpoints being written whose items are not in the AIL yet
    /// ([`Ail::checkpoint_begin`] .. [`Ail::checkpoint_done`]).
    inflight: usize,
}

#[derive(Default)]
struct Counters {
    pushes: AtomicU64,
    written: AtomicU64,
    ios: AtomicU64,
    pinned: AtomicU64,
    unlogged: AtomicU64,
}

/// AIL counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct AilStats {
    pub pushes: u64,
    pub written: u64,
    pub ios: u64,
    pub pinned: u64,
    /// Buffers whose committed image failed its CRC at write-back: a
    /// transaction changed bytes outside the chunks it logged (the CIL
    /// computes the CRC from those); a bug to report.
    pub unlogged: u64,
}

pub struct Ail {
    inner: Mutex<Inner>,
    cv: Condvar,
    idle_cv: Condvar,
    dev: Arc<dyn BlockDevice>,
    view: Arc<CacheDevice>,
    bufs: Arc<BufCache>,
    geo: Geometry,
    uuid: Uuid,
    log: OnceLock<Weak<LogWriter>>,
    cil: OnceLock<Weak<dyn LogForce>>,
    exit: AtomicBool,
    c: Counters,
}

/// A write verifier's refusal: the block stays in memory, unwritten.
fn write_verifier_failed(e: Error) -> Error {
    tracing::error!("metadata write verifier failed, write refused: {e}");
    e
}

impl TailPusher for Ail {
    fn push_tail(&self, target: Lsn) {
        let mut i = self.inner.lock();
        if i.target.is_none_or(|t| t < target) {
            i.target = Some(target);
        }
        self.cv.notify_one();
    }
}

impl Ail {
    /// `dev` is the real device (writes), `view` the read view to clear.
    pub fn new(
        dev: Arc<dyn BlockDevice>,
        view: Arc<CacheDevice>,
        bufs: Arc<BufCache>,
        geo: Geometry,
        uuid: Uuid,
    ) -> Arc<Self> {
        Arc::new(Ail {
            inner: Mutex::new(Inner::default()),
            cv: Condvar::new(),
            idle_cv: Condvar::new(),
            dev,
            view,
            bufs,
            geo,
            uuid,
            log: OnceLock::new(),
            cil: OnceLock::new(),
            exit: AtomicBool::new(false),
            c: Counters::default(),
        })
    }

    /// Connect the log and the CIL, and start the pusher thread.
    pub fn start<F: LogForce + 'static>(self: &Arc<Self>, log: &Arc<LogWriter>, cil: &Arc<F>) {
        let _ = self.log.set(Arc::downgrade(log));
        let w: Weak<dyn LogForce> = Arc::downgrade(cil) as Weak<dyn LogForce>;
        let _ = self.cil.set(w);
        let me = self.clone();
        std::thread::Builder::new()
            .name("rxfs-ail".into())
            .spawn(move || me.run())
            .expect("spawn AIL thread");
    }

    pub fn stats(&self) -> AilStats {
        let r = |a: &AtomicU64| a.load(Relaxed);
        AilStats {
            pushes: r(&self.c.pushes),
            written: r(&self.c.written),
            ios: r(&self.c.ios),
            pinned: r(&self.c.pinned),
            unlogged: r(&self.c.unlogged),
        }
    }

    /// The AIL positions of its items, in order (tests).
    #[cfg(test)]
    pub(crate) fn positions(&self) -> Vec<Lsn> {
        self.inner.lock().map.keys().map(|k| k.0).collect()
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A checkpoint is about to be written: until its items are in the
    /// AIL ([`Ail::checkpoint_done`]) an empty AIL does not mean that
    /// everything up to `last_sync_lsn` is written back, so the tail stays
    /// where it is (see [`Ail::move_tail`]). Call before any of its records
    /// can reach the log.
    pub fn checkpoint_begin(&self) {
        self.inner.lock().inflight += 1;
    }

    /// A checkpoint announced by [`Ail::checkpoint_begin`] was never
    /// written (the log failed first).
    pub fn checkpoint_abandoned(&self) {
        let mut i = self.inner.lock();
        i.inflight = i.inflight.saturating_sub(1);
    }

    /// A checkpoint starting at `start` is stable (`ok`) or failed: unpin
    /// its items and (if stable) move them to `start`.
    pub fn checkpoint_done(&self, start: Lsn, items: Vec<AilItem>, ok: bool) {
        let mut i = self.inner.lock();
        i.inflight = i.inflight.saturating_sub(1);
        for it in items {
            let id = it.id();
            let (old, stale) = match &it {
                AilItem::Buf(b) => {
                    let mut st = b.st.lock();
                    st.log.pin = st.log.pin.saturating_sub(1);
                    let old = st.log.ail_lsn;
                    if st.stale {
                        st.log.ail_lsn = None;
                    } else if ok && st.alloc_pending && old.is_some() {
                        // A new inode cluster keeps its place (see
                        // BufState::alloc_pending).
                        continue;
                    } else if ok {
                        st.log.ail_lsn = Some(start);
                    }
                    (old, st.stale)
                }
                AilItem::Inode(ip) => {
                    let mut st = ip.st.lock();
                    st.log.pin = st.log.pin.saturating_sub(1);
                    let old = st.log.ail_lsn;
                    if ok {
                        st.log.ail_lsn = Some(start);
                    }
                    (old, false)
                }
                AilItem::Intent(x) => {
                    let mut st = x.st.lock();
                    if !ok || st.done {
                        continue;
                    }
                    st.ail_lsn = Some(start);
                    (None, false)
                }
                AilItem::Done(x) => {
                    let mut st = x.st.lock();
                    if !ok {
                        continue;
                    }
                    st.done = true;
                    if let Some(l) = st.ail_lsn.take() {
                        i.map.remove(&(l, id));
                    }
                    continue;
                }
            };
            if !ok {
                continue;
            }
            if let Some(o) = old {
                i.map.remove(&(o, id));
            }
            if !stale {
                i.map.insert((start, id), it);
            }
        }
        i.last_activity = Some(Instant::now());
        self.cv.notify_one();
    }

    /// Ask the pusher to write back everything.
    pub fn push_all(&self) {
        let mut i = self.inner.lock();
        i.push_all = true;
        self.cv.notify_one();
    }

    /// Write back everything and wait until the AIL is empty.
    pub fn drain(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let mut i = self.inner.lock();
        loop {
            if let Some(e) = &i.error {
                return Err(Error::Invalid(format!("metadata write-back failed: {e}")));
            }
            if i.map.is_empty() {
                return Ok(());
            }
            i.push_all = true;
            self.cv.notify_one();
            if self.idle_cv.wait_until(&mut i, deadline).timed_out() {
                return Err(Error::Invalid(format!(
                    "AIL did not drain: {} items left",
                    i.map.len()
                )));
            }
        }
    }

    pub fn stop(&self) {
        self.exit.store(true, Relaxed);
        let _i = self.inner.lock();
        self.cv.notify_all();
    }

    fn run(self: Arc<Self>) {
        loop {
            let target = {
                let mut i = self.inner.lock();
                loop {
                    if self.exit.load(Relaxed) {
                        return;
                    }
                    let idle = i.last_activity.is_some_and(|t| t.elapsed() >= IDLE_PUSH)
                        && !i.map.is_empty();
                    if i.push_all || idle {
                        break Lsn(i64::MAX);
                    }
                    if let Some(t) = i.target {
                        if i.map.first_key_value().is_some_and(|(k, _)| k.0 <= t) {
                            break t;
                        }
                    }
                    self.idle_cv.notify_all();
                    self.cv.wait_for(&mut i, Duration::from_millis(100));
                }
            };
            match self.push_pass(target) {
                Ok(progress) => {
                    let mut i = self.inner.lock();
                    if i.map.is_empty()
                        || i.map.first_key_value().is_some_and(|(k, _)| k.0 > target)
                    {
                        i.push_all = false;
                        i.last_activity = None;
                    }
                    self.idle_cv.notify_all();
                    if !progress {
                        // Only pinned or locked items: let the force land.
                        self.cv.wait_for(&mut i, Duration::from_millis(2));
                    }
                }
                Err(e) => {
                    tracing::error!("AIL write-back failed: {e}");
                    let mut i = self.inner.lock();
                    i.error = Some(e.to_string());
                    i.push_all = false;
                    i.target = None;
                    self.idle_cv.notify_all();
                    if let Some(log) = self.log.get().and_then(|w| w.upgrade()) {
                        log.shutdown();
                    }
                    return;
                }
            }
        }
    }

    /// One pass (see the module doc). Returns whether anything was written.
    fn push_pass(&self, target: Lsn) -> Result<bool> {
        self.c.pushes.fetch_add(1, Relaxed);
        let cands: Vec<(Key, AilItem)> = {
            let i = self.inner.lock();
            i.map
                .range(..=(target, u64::MAX))
                .take(BATCH)
                .map(|(k, v)| (*k, v.clone()))
                .collect()
        };
        let mut need_force = false;
        // (offset, bytes) to write; (key, item, snapshot) to mark clean.
        let mut writes: Vec<(u64, Arc<Vec<u8>>)> = Vec::new();
        let mut clean: Vec<(Key, AilItem, Arc<Vec<u8>>)> = Vec::new();
        let mut clusters: HashMap<u64, ClusterInodes> = HashMap::new();
        let mut cluster_views = Vec::new();
        // Transaction locks of the buffers being written, held until they
        // are marked clean: a transaction that would stale one (its block
        // freed, then maybe reused for file data) waits for the write
        // instead of having it land on the reused block afterwards.
        let mut buf_guards = Vec::new();
        for (key, it) in cands {
            match &it {
                AilItem::Buf(b) => {
                    let Some(g) = b.tx_try_lock() else {
                        // A transaction holds it: next pass.
                        continue;
                    };
                    buf_guards.push(g);
                    let st = b.st.lock();
                    let snap = st.committed.clone();
                    if st.log.pin > 0 {
                        need_force = true;
                        self.c.pinned.fetch_add(1, Relaxed);
                        continue;
                    }
                    if !st.on_disk && !st.stale {
                        let mut data = (*snap).clone();
                        drop(st);
                        let kind = b.st.lock().kind;
                        if kind != BufKind::Dino && kind.has_header() {
                            let ok =
                                stamp_committed(&mut data, &snap, b.daddr.0, key.0, &self.uuid)?;
                            if !ok {
                                self.c.unlogged.fetch_add(1, Relaxed);
                            }
                        }
                        // The write verifier: what reaches the disk is a
                        // well-formed block of its kind (magic, CRC, this
                        // block of this filesystem). A failure is memory
                        // corruption: nothing of this pass is written and
                        // the caller shuts the filesystem down, as XFS does.
                        if kind != BufKind::Dino {
                            kind.verify(&data, b.daddr, &self.uuid)
                                .map_err(write_verifier_failed)?;
                        }
                        writes.push((b.daddr.bytes(), Arc::new(data)));
                    }
                    clean.push((key, it.clone(), snap));
                }
                // Intents wait for their done item; nothing to write.
                AilItem::Intent(_) | AilItem::Done(_) => {}
                AilItem::Inode(ip) => {
                    let st = ip.st.lock();
                    if st.log.pin > 0 {
                        need_force = true;
                        self.c.pinned.fetch_add(1, Relaxed);
                        continue;
                    }
                    let snap = st.committed.clone();
                    drop(st);
                    let (cd, _, _) = self.geo.inode_cluster(ip.ino);
                    clusters
                        .entry(cd.0)
                        .or_default()
                        .push((key, ip.clone(), snap));
                }
            }
        }
        for (cd, inodes) in clusters {
            if inodes.iter().any(|(_, ip, _)| ip.st.lock().stale) {
                // The chunk was freed: nothing to write (its blocks may
                // hold something else by now).
                for (key, ip, snap) in inodes {
                    clean.push((key, AilItem::Inode(ip), snap));
                }
                continue;
            }
            let (_, clen, _) = self.geo.inode_cluster(inodes[0].1.ino);
            let cb = self.bufs.get(
                &*self.dev,
                &self.uuid,
                crate::types::Daddr(cd),
                clen as usize * 512,
                BufKind::Dino,
                true,
            )?;
            let Some(_g) = cb.tx_try_lock() else {
                continue;
            };
            let mut st = cb.st.lock();
            if st.log.pin > 0 {
                need_force = true;
                continue;
            }
            if st.stale || st.committed.len() != clen as usize * 512 {
                // The chunk was freed (its cluster buffers cancelled): the
                // inodes went with it and have nothing left to write, as
                // the kernel's stale inodes.
                drop(st);
                for (key, ip, snap) in inodes {
                    clean.push((key, AilItem::Inode(ip), snap));
                }
                continue;
            }
            let mut base = (*st.committed).clone();
            for (key, ip, snap) in &inodes {
                let (_, _, boff) = self.geo.inode_cluster(ip.ino);
                let b = boff as usize;
                let n = snap.len();
                base[b..b + n].copy_from_slice(snap);
                put_be64(&mut base[b..b + n], 112, key.0 .0 as u64);
                crc::update(&mut base[b..b + n], crate::format::inode::DINODE_CRC_OFF);
                // The inode's write verifier (the read verifier's checks:
                // magic, version, self-describing number and UUID, forks).
                crate::format::inode::decode_core(&base[b..b + n], ip.ino, &self.uuid, true)
                    .map_err(write_verifier_failed)?;
            }
            let snapc = Arc::new(base);
            st.committed = snapc.clone();
            st.on_disk = true;
            // The cluster's own AIL entry (a new chunk's ordered buffer):
            // this write carries its bytes too.
            if let Some(l) = st.log.ail_lsn {
                clean.push(((l, cb.id), AilItem::Buf(cb.clone()), snapc.clone()));
            }
            drop(st);
            // The read view may still show the cluster as the transaction
            // that created it left it: drop that layer once written (the
            // tx lock is held until then, so nobody changes the cluster).
            cluster_views.push((cd * 512, _g));
            writes.push((cd * 512, snapc.clone()));
            for (key, ip, snap) in inodes {
                clean.push((key, AilItem::Inode(ip), snap));
            }
        }
        writes.sort_by_key(|w| w.0);
        let mut ios = 0u64;
        let mut i = 0;
        while i < writes.len() {
            // A run of adjacent blocks: one vectored write, no copy.
            let start = writes[i].0;
            let mut end = start + writes[i].1.len() as u64;
            let mut j = i + 1;
            while j < writes.len() && writes[j].0 == end {
                end += writes[j].1.len() as u64;
                j += 1;
            }
            let run: Vec<&[u8]> = writes[i..j].iter().map(|w| w.1.as_slice()).collect();
            self.dev.write_vectored_at(&run, start)?;
            ios += 1;
            i = j;
        }
        if ios > 0 {
            self.dev.flush()?;
        }
        for (off, guard) in cluster_views {
            self.view.clear_buf(off, None);
            drop(guard);
        }
        self.c.ios.fetch_add(ios, Relaxed);
        let mut written = 0u64;
        {
            let mut inner = self.inner.lock();
            for (key, it, snap) in clean {
                let done = match &it {
                    AilItem::Buf(b) => {
                        let mut st = b.st.lock();
                        let same = Arc::ptr_eq(&st.committed, &snap) || st.stale;
                        if same && st.log.ail_lsn == Some(key.0) {
                            st.on_disk = true;
                            st.alloc_pending = false;
                            st.log.ail_lsn = None;
                            // Every logged change is on the device now:
                            // the next checkpoint logs only new ones.
                            st.dirty_map.clear();
                            self.view.clear_buf(b.daddr.bytes(), Some(&snap));
                            true
                        } else {
                            false
                        }
                    }
                    AilItem::Intent(_) | AilItem::Done(_) => false,
                    AilItem::Inode(ip) => {
                        let mut st = ip.st.lock();
                        if Arc::ptr_eq(&st.committed, &snap) && st.log.ail_lsn == Some(key.0) {
                            st.on_disk = true;
                            st.log.ail_lsn = None;
                            let (d, o) = self.geo.ino_location(ip.ino);
                            self.view.clear_inode(d.bytes() + o as u64, &snap);
                            true
                        } else {
                            false
                        }
                    }
                };
                if done {
                    inner.map.remove(&key);
                    written += 1;
                }
            }
        }
        drop(buf_guards);
        self.c.written.fetch_add(written, Relaxed);
        self.move_tail();
        if need_force {
            if let Some(cil) = self.cil.get().and_then(|w| w.upgrade()) {
                cil.force_committed()?;
            }
        }
        Ok(written > 0)
    }

    /// Tell the grant heads where the tail is now: the oldest item's LSN;
    /// with the AIL empty, the last record on disk, but only when no
    /// checkpoint is between its write and its insertion here: such a
    /// checkpoint may already be below `last_sync_lsn` (its commit record
    /// completed) while its items are not in the AIL yet, and a tail past
    /// its start would drop it from recovery before its items are written
    /// back. Everything is read under the AIL lock (then the log's core
    /// lock), so an insertion cannot slip between the two reads.
    pub fn move_tail(&self) {
        let Some(log) = self.log.get().and_then(|w| w.upgrade()) else {
            return;
        };
        let tail = {
            let i = self.inner.lock();
            match i.map.first_key_value() {
                Some((k, _)) => Some(k.0),
                None if i.inflight == 0 => Some(log.last_sync_lsn()),
                None => None,
            }
        };
        if let Some(t) = tail {
            log.grant().move_tail(t);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
