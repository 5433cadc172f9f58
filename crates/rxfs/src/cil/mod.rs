//! The Committed Item List: delayed logging.
//!
//! A transaction's commit does not write the log. It formats each changed
//! item into a log vector and inserts it into the current CIL *context*;
//! many transactions accumulate there, an item changed by many of them
//! being carried once. A *push* turns a whole context into one checkpoint
//! (one START, every item's vector, one COMMIT) written by the log writer
//! ([`crate::log`]); when the checkpoint is stable its items are unpinned
//! and move to the AIL ([`crate::ail`]) at the checkpoint's start LSN.
//!
//! ## The insertion path (seed 000)
//! 1. Outside any CIL lock, for each item: ask its size (bytes, vectors),
//!    reuse its previous vector if its allocation is big enough, else one
//!    allocation ([`LogVec`]); format into it; compute the space delta.
//! 2. One grab of the CIL lock: append the new items (relogged ones keep
//!    their place: they are in the context already), add the space delta,
//!    count the transaction. The ticket space the delta needs is moved
//!    ("stolen") from the transaction's ticket to the context's checkpoint
//!    ticket under the same lock grab, so a checkpoint always has the space
//!    it writes (the concern left open in seed 000).
//! 3. Outside the lock: give back the transaction's unused reservation;
//!    ask for a background push when the context passed its space limit.
//!
//! ## Forces (fsync)
//! A force of the open sequence waits at the log's commit gate first
//! ([`crate::log::CommitTurn`]): while a commit record is being written,
//! the context gathers the commits of every other forcer and one of them
//! pushes it all, so one checkpoint (not one per fsync) goes into each
//! commit record and shared items are logged once. Forcers of a sequence
//! being pushed wait for that push (`push_order`) instead of pushing again.
//!
//! ## Locks (outermost first)
//! 0. the log's commit turn (held across a forcer's push; not a lock of
//!    this module, and never taken by commits);
//! 1. `push_order`: one push at a time, so checkpoints (and their commit
//!    records) reach the log in sequence order. Commits never take it.
//! 2. `ctx_lock` (RwLock): commits hold it shared across format + insert; a
//!    push holds it exclusively only to switch contexts and detach the
//!    vectors.
//! 3. an item's state mutex (format, pin, publish);
//! 4. `ctx` (the CIL lock proper: list and accounting).
//!
//! ## Invariants
//! - An item is in at most one open context; `ItemLog::cil_seq` names it.
//! - An item in a context is pinned once for it; the pin is dropped when
//!   that context's checkpoint is stable (or the log is shut down).
//! - Checkpoint `n`'s commit record is written after checkpoint `n-1`'s.

mod busy;
pub mod format;

use crate::log::LogVec;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::ail::{Ail, AilItem, IntentItem};
use crate::cache::{Buf, CacheDevice, InodeItem};
use crate::error::{Error, Result};
use crate::format::log::{HostOrder, OP_HEADER_SIZE};
use crate::format::log_items::BLF_CHUNK;
use crate::format::meta_header::meta_header;
use crate::format::{crc, Uuid};
use crate::geometry::Geometry;
use crate::log::{LogWriter, Ticket};
use crate::types::{AgBlock, AgNumber, Lsn};

/// A buffer as a transaction hands it to commit.
pub struct TxBuf {
    pub buf: Arc<Buf>,
    pub data: Vec<u8>,
    pub kind: crate::format::bufkind::BufKind,
    /// Chunks this transaction changed.
    pub map: Vec<u32>,
    pub stale: bool,
    pub ordered: bool,
    /// The bytes passed the structure checks of this kind (see
    /// [`crate::cache::buf::BufState::verified`]).
    pub verified: Option<crate::format::bufkind::BufKind>,
    /// The committed bytes the transaction started from (their CRC
    /// valid), when it joined them from the cache: the new CRC is then
    /// computed over the chunks that differ ([`crc::restamp`]).
    pub base: Option<Arc<Vec<u8>>>,
}

/// An inode as a transaction hands it to commit.
pub struct TxInode {
    pub item: Arc<InodeItem>,
    pub data: Vec<u8>,
    /// Only timestamps changed: `fdatasync` need not force this change
    /// (see [`crate::cache::ItemLog::last_dsync_seq`]).
    pub timestamps_only: bool,
}

enum CtxItem {
    Buf(Arc<Buf>),
    Inode(Arc<InodeItem>),
    Raw(LogVec, Option<AilItem>),
}

/// An item a transaction built itself: plain (ICREATE), an intent that
/// enters the AIL, or a done item that releases its intent.
pub enum RawItem {
    Plain(Vec<Vec<u8>>),
    Intent(Arc<IntentItem>, Vec<Vec<u8>>),
    Done(Arc<IntentItem>, Vec<Vec<u8>>),
}

struct Ctx {
    seq: u64,
    /// When the first transaction entered this context.
    opened: Option<std::time::Instant>,
    items: Vec<CtxItem>,
    /// Formatted bytes (payload + op headers) in this context.
    space: usize,
    ticket: Ticket,
    trans: u64,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    items: AtomicU64,
    relogged: AtomicU64,
    checkpoints: AtomicU64,
    ckpt_bytes: AtomicU64,
    ckpt_max: AtomicU64,
    ckpt_trans: AtomicU64,
    bg_pushes: AtomicU64,
    forces: AtomicU64,
    resv_short: AtomicU64,
}

#[derive(Default)]
struct Done {
    /// Commit LSN of each pushed sequence (pruned once stable).
    commit_lsn: BTreeMap<u64, Lsn>,
    /// Every sequence below this one is pushed.
    pushed_below: u64,
    /// Every sequence up to this one is stable.
    stable: u64,
}

pub struct Cil {
    log: Arc<LogWriter>,
    ail: Arc<Ail>,
    view: Arc<CacheDevice>,
    geo: Geometry,
    uuid: Uuid,
    order: HostOrder,
    push_order: Mutex<()>,
    ctx_lock: RwLock<()>,
    ctx: Mutex<Ctx>,
    cur_seq: AtomicU64,
    done: Mutex<Done>,
    done_cv: Condvar,
    busy: Mutex<busy::BusyList>,
    /// Push when a context holds more than this many bytes.
    space_limit: usize,
    /// Ticket overhead per payload byte: record headers per buffer.
    hdr_bytes: usize,
    capacity: usize,
    /// Benchmarks: push after every commit.
    ablate: bool,
    bg: Mutex<bool>,
    bg_cv: Condvar,
    exit: AtomicBool,
    c: Counters,
}

/// CIL counters (see [`crate::fs::rw::FsStats`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CilStats {
    pub commits: u64,
    pub items: u64,
    pub relogged: u64,
    pub checkpoints: u64,
    pub ckpt_bytes: u64,
    pub ckpt_max: u64,
    pub ckpt_trans: u64,
    pub bg_pushes: u64,
    pub forces: u64,
    /// Commits whose reservation was smaller than what they logged.
    pub resv_short: u64,
}

impl Cil {
    pub fn new(
        log: Arc<LogWriter>,
        ail: Arc<Ail>,
        view: Arc<CacheDevice>,
        geo: Geometry,
        uuid: Uuid,
        ablate: bool,
    ) -> Arc<Self> {
        let logbsize = log.config().logbsize;
        let log_bytes = log.config().size_bbs as usize * 512;
        let ticket = log.empty_ticket();
        let order = log.config().order;
        let cil = Arc::new(Cil {
            ail,
            view,
            geo,
            uuid,
            order,
            push_order: Mutex::new(()),
            ctx_lock: RwLock::new(()),
            ctx: Mutex::new(Ctx {
                seq: 1,
                opened: None,
                items: Vec::new(),
                space: 0,
                ticket,
                trans: 0,
            }),
            cur_seq: AtomicU64::new(1),
            done: Mutex::new(Done {
                pushed_below: 1,
                ..Default::default()
            }),
            done_cv: Condvar::new(),
            busy: Mutex::new(busy::BusyList::default()),
            space_limit: (log_bytes / 8).max(64 * 1024),
            hdr_bytes: crate::log::iclog::header_bbs(logbsize) as usize * 512,
            capacity: crate::log::iclog::payload_capacity(logbsize),
            ablate,
            bg: Mutex::new(false),
            bg_cv: Condvar::new(),
            exit: AtomicBool::new(false),
            c: Counters::default(),
            log,
        });
        let w = Arc::downgrade(&cil);
        std::thread::Builder::new()
            .name("rxfs-cil-push".into())
            .spawn(move || background(w))
            .expect("spawn CIL push thread");
        cil
    }

    pub fn log(&self) -> &Arc<LogWriter> {
        &self.log
    }

    pub fn stats(&self) -> CilStats {
        let r = |a: &AtomicU64| a.load(Relaxed);
        CilStats {
            commits: r(&self.c.commits),
            items: r(&self.c.items),
            relogged: r(&self.c.relogged),
            checkpoints: r(&self.c.checkpoints),
            ckpt_bytes: r(&self.c.ckpt_bytes),
            ckpt_max: r(&self.c.ckpt_max),
            ckpt_trans: r(&self.c.ckpt_trans),
            bg_pushes: r(&self.c.bg_pushes),
            forces: r(&self.c.forces),
            resv_short: r(&self.c.resv_short),
        }
    }

    /// The open context's sequence.
    pub fn current_seq(&self) -> u64 {
        self.cur_seq.load(Relaxed)
    }

    /// Ticket bytes a context growth of `delta` payload bytes in `nvecs`
    /// more regions needs (op headers, record headers, padding).
    fn steal_for(&self, delta: usize, nvecs: usize, first: bool) -> u32 {
        let body = delta + nvecs * OP_HEADER_SIZE;
        let hdrs = (body * self.hdr_bytes).div_ceil(self.capacity.max(1));
        let fixed = if first {
            // START, TRAN header, COMMIT ops; two record headers; padding.
            3 * OP_HEADER_SIZE + 16 + 2 * self.hdr_bytes + 1024
        } else {
            0
        };
        (body + hdrs + fixed) as u32
    }

    /// Commit a transaction's changes into the open context (see the
    /// module doc). Returns the context's sequence (force it for fsync).
    pub fn commit(
        self: &Arc<Self>,
        ticket: &mut Ticket,
        bufs: Vec<TxBuf>,
        inodes: Vec<TxInode>,
        raw: Vec<RawItem>,
        busy: Vec<(AgNumber, AgBlock, u32)>,
    ) -> Result<u64> {
        let _shared = self.ctx_lock.read();
        let seq = self.cur_seq.load(Relaxed);
        let mut new_items: Vec<CtxItem> = Vec::new();
        let mut delta: isize = 0;
        let mut dvecs: isize = 0;
        let mut relogged = 0u64;
        let mut stale_ranges = Vec::new();
        for tb in bufs {
            let mut st = tb.buf.st.lock();
            let fresh = st.log.cil_seq != seq;
            if fresh {
                st.ordered = false;
            }
            // The map keeps every chunk changed since the buffer was last
            // written back (the AIL clears it then), not only this
            // checkpoint's: relogging moves the item's AIL position to this
            // checkpoint, which lets the tail pass the earlier ones, so
            // this checkpoint must carry their changes too.
            format::map_union(&mut st.dirty_map, &tb.map);
            st.kind = tb.kind;
            st.verified = tb.verified.filter(|_| !tb.stale);
            st.stale = tb.stale;
            st.ordered = tb.ordered && !tb.stale;
            if tb.stale {
                st.alloc_pending = false;
            } else if st.ordered {
                st.alloc_pending = true;
            }
            let old = st.log.lv.take();
            let (ob, on) = old.as_ref().map_or((0, 0), |v| (v.bytes(), v.nvecs()));
            let lv = if st.ordered && st.dirty_map.iter().all(|w| *w == 0) {
                LogVec::default()
            } else {
                let (bytes, n) = format::buf_size(tb.data.len(), &st.dirty_map, tb.stale);
                let (mut lv, _) = LogVec::start(old, bytes, n);
                format::format_buf(
                    &mut lv,
                    self.order,
                    tb.buf.daddr,
                    &tb.data,
                    tb.kind.blft(),
                    &st.dirty_map,
                    tb.stale,
                );
                lv
            };
            delta += lv.bytes() as isize - ob as isize;
            dvecs += lv.nvecs() as isize - on as isize;
            st.log.lv = Some(lv);
            st.log.last_seq = seq;
            // Pin before publishing (see crate::cache).
            if fresh {
                st.log.pin += 1;
                st.log.cil_seq = seq;
                new_items.push(CtxItem::Buf(tb.buf.clone()));
            } else {
                relogged += 1;
            }
            let off = tb.buf.daddr.bytes();
            if tb.stale {
                st.committed = Arc::new(Vec::new());
                st.on_disk = false;
                self.view.clear_buf(off, None);
                stale_ranges.push((off, tb.data.len() as u64));
            } else {
                let mut data = tb.data;
                if let Some(h) = meta_header(&data).filter(|_| tb.kind.has_header()) {
                    // Every byte the transaction changed lies in the chunks
                    // it logged (the MetaTx contract).
                    match &tb.base {
                        Some(b) => {
                            let changed: Vec<_> = format::map_runs(&tb.map)
                                .into_iter()
                                .map(|(c, k)| c * BLF_CHUNK..(c + k) * BLF_CHUNK)
                                .collect();
                            crc::restamp(b, &mut data, h.crc_off, &changed)
                        }
                        None => crc::update(&mut data, h.crc_off),
                    }
                }
                let snap = Arc::new(data);
                st.committed = snap.clone();
                st.on_disk = false;
                self.view.set_buf(off, snap);
            }
        }
        for ti in inodes {
            let mut st = ti.item.st.lock();
            let fresh = st.log.cil_seq != seq;
            let old = st.log.lv.take();
            let (ob, on) = old.as_ref().map_or((0, 0), |v| (v.bytes(), v.nvecs()));
            let isize = self.geo.inodesize as usize;
            let (bytes, n) = format::inode_size(&ti.data, isize);
            let (mut lv, _) = LogVec::start(old, bytes, n);
            let lsn = st.log.ail_lsn.map_or(0, |l| l.0 as u64);
            format::format_inode(&mut lv, self.order, &self.geo, ti.item.ino, &ti.data, lsn);
            delta += lv.bytes() as isize - ob as isize;
            dvecs += lv.nvecs() as isize - on as isize;
            st.log.lv = Some(lv);
            st.log.last_seq = seq;
            if !ti.timestamps_only {
                st.log.last_dsync_seq = seq;
            }
            if fresh {
                st.log.pin += 1;
                st.log.cil_seq = seq;
                new_items.push(CtxItem::Inode(ti.item.clone()));
            } else {
                relogged += 1;
            }
            let mut data = ti.data;
            crc::update(&mut data, crate::format::inode::DINODE_CRC_OFF);
            let snap = Arc::new(data);
            st.committed = snap.clone();
            st.on_disk = false;
            st.stale = false;
            let (daddr, ioff) = self.geo.ino_location(ti.item.ino);
            self.view.set_inode(daddr.bytes() + ioff as u64, snap);
        }
        // A cancelled inode cluster takes its inodes' images along (after
        // the inodes above: an inode freed with its chunk was just shown).
        for (off, len) in stale_ranges {
            self.view.clear_inodes_in(off, len);
        }
        for ri in raw {
            let (regions, ail) = match ri {
                RawItem::Plain(r) => (r, None),
                RawItem::Intent(x, r) => (r, Some(AilItem::Intent(x))),
                RawItem::Done(x, r) => (r, Some(AilItem::Done(x))),
            };
            let bytes: usize = regions.iter().map(|r| r.len()).sum();
            let (mut lv, _) = LogVec::start(None, bytes, regions.len());
            for r in &regions {
                lv.push(r);
            }
            delta += bytes as isize;
            dvecs += regions.len() as isize;
            new_items.push(CtxItem::Raw(lv, ail));
        }
        let nitems = new_items.len() as u64;
        let over = {
            let mut ctx = self.ctx.lock();
            let first = ctx.trans == 0;
            let d = delta.max(0) as usize;
            let steal = self.steal_for(d, dvecs.max(0) as usize, first);
            if ticket.steal_into(&mut ctx.ticket, steal) < steal {
                self.c.resv_short.fetch_add(1, Relaxed);
            }
            ctx.items.extend(new_items);
            ctx.opened.get_or_insert_with(std::time::Instant::now);
            ctx.space += d + dvecs.max(0) as usize * OP_HEADER_SIZE;
            ctx.trans += 1;
            ctx.space > self.space_limit
        };
        if !busy.is_empty() {
            let mut b = self.busy.lock();
            for (agno, agbno, len) in busy {
                b.insert(agno, agbno, len, seq);
            }
        }
        drop(_shared);
        self.c.commits.fetch_add(1, Relaxed);
        self.c.items.fetch_add(nitems + relogged, Relaxed);
        self.c.relogged.fetch_add(relogged, Relaxed);
        if self.ablate {
            self.push(seq)?;
        } else if over {
            let mut g = self.bg.lock();
            *g = true;
            self.bg_cv.notify_one();
        }
        Ok(seq)
    }

    /// Push every context up to `seq` into the log (not waiting for I/O).
    pub fn push(self: &Arc<Self>, seq: u64) -> Result<()> {
        let _order = self.push_order.lock();
        let (ctx, lvs) = {
            let _excl = self.ctx_lock.write();
            let mut ctx = self.ctx.lock();
            if ctx.seq > seq || ctx.items.is_empty() {
                if ctx.seq <= seq && ctx.items.is_empty() {
                    // Nothing to write: the sequence is trivially done.
                    let s = ctx.seq;
                    drop(ctx);
                    let mut d = self.done.lock();
                    d.pushed_below = d.pushed_below.max(s);
                    return Ok(());
                }
                return Ok(());
            }
            let next = Ctx {
                seq: ctx.seq + 1,
                opened: None,
                items: Vec::new(),
                space: 0,
                ticket: self.log.empty_ticket(),
                trans: 0,
            };
            let old = std::mem::replace(&mut *ctx, next);
            self.cur_seq.store(old.seq + 1, Relaxed);
            let mut lvs = Vec::with_capacity(old.items.len());
            for it in &old.items {
                let lv = match it {
                    CtxItem::Buf(b) => b.st.lock().log.lv.take().unwrap_or_default(),
                    CtxItem::Inode(i) => i.st.lock().log.lv.take().unwrap_or_default(),
                    CtxItem::Raw(v, _) => v.clone(),
                };
                lvs.push(lv);
            }
            (old, lvs)
        };
        let seq = ctx.seq;
        let mut ticket = ctx.ticket;
        let regions: Vec<Vec<&[u8]>> = lvs.iter().map(|v| v.regions()).collect();
        let bytes: usize = lvs.iter().map(|v| v.bytes()).sum();
        // The tail must not pass this checkpoint before its items are in
        // the AIL (its commit may complete before `on_stable` below).
        self.ail.checkpoint_begin();
        let r = self.log.write_checkpoint_regions(&mut ticket, &regions);
        self.log.grant().ungrant(ticket);
        let lsns = match r {
            Ok(l) => l,
            Err(e) => {
                self.ail.checkpoint_abandoned();
                self.log.shutdown();
                return Err(e);
            }
        };
        self.c.checkpoints.fetch_add(1, Relaxed);
        self.c.ckpt_bytes.fetch_add(bytes as u64, Relaxed);
        self.c.ckpt_max.fetch_max(bytes as u64, Relaxed);
        self.c.ckpt_trans.fetch_add(ctx.trans, Relaxed);
        {
            let mut d = self.done.lock();
            d.commit_lsn.insert(seq, lsns.commit);
            d.pushed_below = seq + 1;
        }
        let items: Vec<AilItem> = ctx
            .items
            .into_iter()
            .filter_map(|i| match i {
                CtxItem::Buf(b) => Some(AilItem::Buf(b)),
                CtxItem::Inode(i) => Some(AilItem::Inode(i)),
                CtxItem::Raw(_, a) => a,
            })
            .collect();
        let ail = self.ail.clone();
        let me = Arc::downgrade(self);
        let start = lsns.start;
        self.log.on_stable(
            lsns.commit,
            Box::new(move |res| {
                ail.checkpoint_done(start, items, res.is_ok());
                if let Some(cil) = me.upgrade() {
                    cil.checkpoint_stable(seq);
                }
            }),
        );
        Ok(())
    }

    /// Whether every change committed up to sequence `seq` is stable.
    pub fn is_stable(&self, seq: u64) -> bool {
        self.done.lock().stable >= seq
    }

    /// Called when checkpoint `seq` is stable: busy extents of it are free.
    pub fn checkpoint_stable(&self, seq: u64) {
        self.busy.lock().retire(seq);
        let mut d = self.done.lock();
        d.stable = d.stable.max(seq);
        d.commit_lsn.retain(|s, _| *s > seq);
        self.done_cv.notify_all();
    }

    /// Push and wait until every change committed in sequence `seq` or
    /// before is stable (fsync).
    ///
    /// A force of a sequence still open first waits at the log's commit
    /// gate ([`LogWriter::commit_turn`]): while a commit record is being
    /// written the context keeps gathering the commits of other forcers,
    /// and one of them pushes it all as one checkpoint (shared items such
    /// as the AG headers logged once, not once per fsync). A force of a
    /// sequence being pushed waits on `push_order` for that push instead
    /// of pushing again; one already pushed only forces its commit LSN.
    pub fn force_seq(self: &Arc<Self>, seq: u64) -> Result<()> {
        self.c.forces.fetch_add(1, Relaxed);
        if self.is_stable(seq) {
            return Ok(());
        }
        let turn = match seq >= self.current_seq() {
            true => Some(self.log.commit_turn()?),
            false => None,
        };
        self.push(seq)?;
        drop(turn);
        let lsn = {
            let d = self.done.lock();
            if d.stable >= seq {
                return Ok(());
            }
            // The last pushed sequence at or below `seq`.
            d.commit_lsn.range(..=seq).next_back().map(|(_, l)| *l)
        };
        match lsn {
            Some(l) => self.log.force(l),
            None => Ok(()),
        }
    }

    /// Force everything committed so far.
    pub fn force_all(self: &Arc<Self>) -> Result<()> {
        self.force_seq(self.current_seq())
    }

    /// The first busy extent overlapping the range, if any.
    pub fn busy_overlap(&self, agno: AgNumber, agbno: AgBlock, len: u32) -> Option<(AgBlock, u32)> {
        self.busy.lock().overlap(agno, agbno, len)
    }

    /// Every busy range overlapping `[agbno, agbno + len)` with its
    /// checkpoint sequence, appended to `out` in order (see
    /// `busy::BusyList::ranges`).
    pub fn busy_ranges(
        &self,
        agno: AgNumber,
        agbno: AgBlock,
        len: u32,
        out: &mut Vec<(AgBlock, u32, u64)>,
    ) {
        self.busy.lock().ranges(agno, agbno, len, out)
    }

    /// Busy ranges of every checkpoint up to this sequence have become
    /// reusable; a range of a newer checkpoint (or of a transaction not
    /// yet committed) is busy still.
    pub fn busy_stable_seq(&self) -> u64 {
        self.busy.lock().retired_upto()
    }

    /// Whether any freed extent is still busy (its checkpoint not stable).
    pub fn has_busy(&self) -> bool {
        self.busy.lock().max_seq().is_some()
    }

    /// Make every busy extent reusable: force the log until none is left.
    pub fn force_busy(self: &Arc<Self>) -> Result<()> {
        let max = self.busy.lock().max_seq();
        if let Some(s) = max {
            self.force_seq(s)?;
            // Completions run asynchronously: wait for the busy list.
            let mut d = self.done.lock();
            while d.stable < s {
                if self
                    .done_cv
                    .wait_for(&mut d, std::time::Duration::from_secs(5))
                    .timed_out()
                {
                    return Err(Error::Invalid("timed out waiting for busy extents".into()));
                }
            }
        }
        Ok(())
    }

    pub fn stop(&self) {
        self.exit.store(true, Relaxed);
        let mut g = self.bg.lock();
        *g = true;
        self.bg_cv.notify_all();
    }

    pub fn uuid(&self) -> &Uuid {
        &self.uuid
    }
}

impl crate::ail::LogForce for Cil {
    fn force_committed(self: Arc<Self>) -> Result<()> {
        self.force_all()
    }
}

fn background(w: std::sync::Weak<Cil>) {
    loop {
        let Some(cil) = w.upgrade() else { return };
        {
            let mut g = cil.bg.lock();
            if !*g {
                cil.bg_cv
                    .wait_for(&mut g, std::time::Duration::from_millis(100));
            }
            if cil.exit.load(Relaxed) {
                return;
            }
            if !*g {
                continue;
            }
            *g = false;
        }
        cil.c.bg_pushes.fetch_add(1, Relaxed);
        let seq = cil.current_seq();
        if let Err(e) = cil.push(seq) {
            tracing::error!("background CIL push failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests;
