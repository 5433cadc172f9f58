//! The logged transaction of a read-write mount ([`Trans`]).
//!
//! A transaction holds a log reservation (a grant ticket) taken before it
//! locks anything, the buffers it joined (each locked to it, with a
//! private working copy made at the first change: `super::tx_copy`)
//! and the inodes it joined (working copies; the caller holds their
//! inode locks). Commit hands the working copies to the
//! CIL ([`crate::cil::Cil::commit`]), which publishes them; cancel drops
//! them. Because changes are made to private copies, cancelling a
//! transaction that already changed things is always safe (the kernel must
//! shut down instead).

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use crate::ail::IntentItem;
use crate::cache::buf::TxGuard;
use crate::cache::{Buf, InodeItem};
use crate::cil::format::map_set;
use crate::cil::{RawItem, TxBuf, TxInode};
use crate::error::{Error, Location, Result};
use crate::format::bufkind::BufKind;
use crate::format::log::HostOrder;
use crate::format::log_items::{FreeExtent, LI_EFD, LI_EFI};
use crate::format::sb::Superblock;
use crate::format::{be16, crc};
use crate::fs::tx_copy::TxCopy;
use crate::fs::Filesystem;
use crate::geometry::Geometry;
use crate::log::Ticket;
use crate::types::{AgBlock, AgNumber, Daddr, Ino};
use crate::xact::{BufId, ForkCache, InodeId, MetaTx, Resv, SbCounter};

struct TBuf {
    buf: Arc<Buf>,
    _guard: TxGuard,
    data: TxCopy,
    kind: BufKind,
    map: Vec<u32>,
    dirty: bool,
    stale: bool,
    ordered: bool,
    /// See [`crate::cache::buf::BufState::verified`].
    verified: Option<BufKind>,
    /// See [`crate::cil::TxBuf::base`].
    base: Option<Arc<Vec<u8>>>,
}

struct TInode {
    item: Arc<InodeItem>,
    data: Vec<u8>,
    dirty: bool,
    /// The fork cache this transaction set ([`MetaTx::set_fork_cache`]):
    /// `Some(None)` drops it at commit.
    cache: Option<Option<ForkCache>>,
}

/// A logged transaction (see the module doc and [`MetaTx`]).
pub struct Trans<'a> {
    fs: &'a Filesystem,
    ticket: Option<Ticket>,
    bufs: Vec<TBuf>,
    by_addr: HashMap<u64, BufId>,
    inodes: Vec<TInode>,
    by_ino: HashMap<u64, InodeId>,
    sb_delta: [i64; 4],
    busy: Vec<(AgNumber, AgBlock, u32)>,
    raw: Vec<RawItem>,
    /// Extents to free after commit (EFI now, EFD in follow-ups).
    deferred: Vec<(AgNumber, AgBlock, u32)>,
    /// The caller changes only inode timestamps (see
    /// [`Trans::timestamps_only`]).
    timestamps_only: bool,
    /// The realtime lock, from the first [`MetaTx::rt_lock`] to commit
    /// or cancel.
    rt: Option<parking_lot::MutexGuard<'a, crate::cache::rtsum::RtSumCache>>,
    _open: crate::cache::ilock::OpenMark,
}

/// An EFI (`done == false`) or EFD region: 16-byte header, then 16-byte
/// `(start u64, len u32, pad u32)` extents, host order.
fn free_extents_region(o: HostOrder, done: bool, id: u64, ext: &[FreeExtent]) -> Vec<u8> {
    let mut b = vec![0u8; 16 + 16 * ext.len()];
    o.put_u16(&mut b, 0, if done { LI_EFD } else { LI_EFI });
    o.put_u16(&mut b, 2, 1);
    o.put_u32(&mut b, 4, ext.len() as u32);
    o.put_u64(&mut b, 8, id);
    for (i, e) in ext.iter().enumerate() {
        o.put_u64(&mut b, 16 + 16 * i, e.start);
        o.put_u32(&mut b, 24 + 16 * i, e.len);
    }
    b
}

/// Extents per EFI (one follow-up transaction frees them all).
pub const EFI_MAX_EXTENTS: usize = 16;

/// Directory blocks one directory change may log, per directory range
/// (see [`reservation`]): a path of 7 and a sibling for each.
const DIR_PATH_BLOCKS: usize = 14;

/// Realtime bitmap and summary blocks one data transaction may change:
/// [`crate::bmap::RT_TX_EXTENTS`] extents allocated or freed, each of up to
/// the longest mapping (its bits spread over that many bitmap blocks, plus
/// the neighbours' first and last), three summary counters each; never
/// more than the files hold. 0 without a realtime section.
fn rt_blocks(geo: &Geometry) -> usize {
    if geo.rextents == 0 {
        return 0;
    }
    let bits = geo.blocksize as u64 * 8;
    let per_ext = crate::format::bmbt::MAX_EXTLEN / geo.rextsize.max(1) as u64 / bits + 2;
    let n = crate::bmap::RT_TX_EXTENTS as u64;
    let bitmap = (n * per_ext).min(geo.rbmblocks as u64);
    (bitmap + 3 * n) as usize
}

/// Log bytes one transaction of kind `r` may need (generous: whole
/// buffers of every block an operation of that kind can touch).
pub fn reservation(geo: &Geometry, r: Resv) -> u32 {
    let blk = geo.blocksize as usize + 256;
    let ino = geo.inodesize as usize + 256;
    // A directory operation may change a block at every level of a
    // maximal da-btree path (5 node levels, the leaf, the data block) and
    // a new sibling of each when it splits, in each of its three ranges
    // (data, leaf/node, free index); and a checkpoint logs every buffer
    // with all its changes since it was last written back (see
    // crate::cil::format), which can be the whole block.
    let dir = (geo.dirblksize as usize + 256) * DIR_PATH_BLOCKS;
    let n = match r {
        Resv::Misc => 2 * blk + 2 * ino,
        Resv::AllSuperblocks => geo.agcount as usize * (geo.sectsize as usize + 256) + blk,
        Resv::SetAttr => blk * 2 + ino * 2,
        Resv::Create | Resv::Mkdir => 24 * blk + 4 * ino + 3 * dir,
        Resv::Remove => 24 * blk + 4 * ino + 3 * dir + rt_blocks(geo) * blk,
        Resv::Write | Resv::Truncate | Resv::Fallocate => 64 * blk + 2 * ino + rt_blocks(geo) * blk,
        Resv::Link => 24 * blk + 2 * ino + 3 * dir,
        Resv::Symlink => 32 * blk + 4 * ino + 3 * dir,
        Resv::Rename => 48 * blk + 4 * ino + 6 * dir,
        // A remote value of the largest size, logged block by block (the
        // old one freed), plus leaf and node blocks.
        Resv::AttrSet | Resv::AttrRemove => {
            let rmt = 65536 / (geo.blocksize as usize - 56) + 2;
            (rmt + 48) * blk + 2 * ino + 4 * dir
        }
    };
    n as u32
}

impl<'a> Trans<'a> {
    pub(crate) fn new(fs: &'a Filesystem, ticket: Ticket) -> Self {
        Trans {
            fs,
            ticket: Some(ticket),
            bufs: Vec::new(),
            by_addr: HashMap::default(),
            inodes: Vec::new(),
            by_ino: HashMap::default(),
            sb_delta: [0; 4],
            busy: Vec::new(),
            raw: Vec::new(),
            deferred: Vec::new(),
            timestamps_only: false,
            rt: None,
            _open: crate::cache::ilock::OpenMark::new(),
        }
    }

    fn core(&self) -> &'a crate::fs::rw::RwCore {
        self.fs
            .rw()
            .expect("a transaction exists only on a read-write mount")
    }

    /// AG of a header buffer address.
    fn ag_of(&self, d: Daddr) -> u64 {
        let geo = self.fs.geo();
        d.0 / (geo.agblocks as u64 * geo.bb_per_block() as u64)
    }

    /// See [`MetaTx::ag_join_out_of_order`].
    fn out_of_order(&self, kind: BufKind, agno: u64) -> bool {
        self.bufs.iter().any(|b| match (kind, b.kind) {
            (BufKind::Agi, BufKind::Agf) => true,
            (BufKind::Agi, BufKind::Agi) | (BufKind::Agf, BufKind::Agf) => {
                self.ag_of(b.buf.daddr) > agno
            }
            _ => false,
        })
    }

    /// Count (and log) a blocking join of AG header `kind` at `daddr`
    /// against the lock order: AGIs before AGFs, each ascending.
    fn check_ag_order(&self, daddr: Daddr, kind: BufKind) {
        let agno = self.ag_of(daddr);
        if self.out_of_order(kind, agno) {
            self.core()
                .lock_order_violations
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!("{} of AG {agno} joined out of lock order", kind.name());
        }
    }

    fn join(&mut self, daddr: Daddr, len: usize, kind: BufKind, read: bool) -> Result<BufId> {
        self.join_inner(daddr, len, kind, read, false)
            .map(|b| b.expect("a blocking join always joins"))
    }

    /// Join a buffer; with `try_only`, `Ok(None)` when another transaction
    /// holds it (never waits).
    fn join_inner(
        &mut self,
        daddr: Daddr,
        len: usize,
        kind: BufKind,
        read: bool,
        try_only: bool,
    ) -> Result<Option<BufId>> {
        if let Some(&id) = self.by_addr.get(&daddr.0) {
            let b = &mut self.bufs[id.0 as usize];
            if b.data.len() != len {
                return Err(Error::Invalid(format!(
                    "buffer at daddr {} joined with length {} and {len}",
                    daddr.0,
                    b.data.len()
                )));
            }
            if !read {
                b.data = TxCopy::Owned(vec![0u8; len]);
                b.kind = kind;
                b.stale = false;
                b.dirty = true;
                b.verified = Some(kind);
                b.base = None;
            }
            return Ok(Some(id));
        }
        if !try_only && matches!(kind, BufKind::Agf | BufKind::Agi) {
            self.check_ag_order(daddr, kind);
        }
        let rw = self.core();
        let uuid = self.fs.sb().metadata_uuid();
        let buf = rw.bufs.get(&*rw.raw, &uuid, daddr, len, kind, read)?;
        let guard = if try_only {
            match buf.tx_try_lock() {
                Some(g) => g,
                None => return Ok(None),
            }
        } else {
            buf.tx_lock()
        };
        let (data, verified, base) = {
            let st = buf.st.lock();
            if !read {
                // Built whole by the caller.
                (TxCopy::Owned(vec![0u8; len]), Some(kind), None)
            } else if st.stale || st.committed.len() != len {
                drop(st);
                let mut d = vec![0u8; len];
                rw.raw.read_at(&mut d, daddr.bytes())?;
                kind.verify(&d, daddr, &uuid)?;
                (TxCopy::Owned(d), None, None)
            } else {
                let d = TxCopy::Shared(st.committed.clone());
                if !kind.magic_ok(d.bytes()) {
                    return Err(Error::corrupt(
                        kind.name(),
                        Location::Daddr(daddr.0),
                        format!("cached as {}", st.kind.name()),
                    ));
                }
                let base = Some(st.committed.clone());
                (d, st.verified.filter(|&k| k == kind), base)
            }
        };
        let id = BufId(self.bufs.len() as u32);
        self.bufs.push(TBuf {
            buf,
            _guard: guard,
            data,
            kind,
            map: Vec::new(),
            dirty: !read,
            stale: false,
            ordered: false,
            verified,
            base,
        });
        self.by_addr.insert(daddr.0, id);
        Ok(Some(id))
    }

    fn item(&self, ino: Ino, fresh: Option<&[u8]>) -> Result<Arc<InodeItem>> {
        let rw = self.core();
        if let Some(ip) = rw.inodes.get(ino) {
            return Ok(ip);
        }
        let data = match fresh {
            Some(d) => d.to_vec(),
            None => self.read_disk_dinode(ino)?,
        };
        Ok(rw.inodes.get_or_insert(ino, rw.next_id(), || data))
    }

    fn read_disk_dinode(&self, ino: Ino) -> Result<Vec<u8>> {
        let geo = self.fs.geo();
        if !geo.ino_valid(ino) {
            return Err(Error::Invalid(format!(
                "inode number {} out of range",
                ino.0
            )));
        }
        let (daddr, off) = geo.ino_location(ino);
        let mut d = vec![0u8; geo.inodesize as usize];
        self.fs.dev().read_at(&mut d, daddr.bytes() + off as u64)?;
        Ok(d)
    }

    /// Commit: hand everything to the CIL. Returns the CIL sequence of
    /// this transaction (force it with [`Filesystem::log_force_seq`]).
    ///
    /// Deferred frees ([`MetaTx::defer_free`]): this transaction carries
    /// an EFI for them (at most [`EFI_MAX_EXTENTS`] extents each); then one
    /// follow-up transaction per EFI frees its extents and logs the EFD.
    /// The EFI holds the log tail until its EFD is stable, so a crash
    /// anywhere in the chain is finished by recovery. A follow-up that
    /// fails leaves the filesystem shut down (the intent stays in the log
    /// for recovery), as the kernel does.
    pub fn commit(mut self) -> Result<u64> {
        let mut deferred = std::mem::take(&mut self.deferred);
        if deferred.is_empty() {
            return self.commit_one();
        }
        // Each follow-up transaction frees in ascending AG order (AGF
        // lock order).
        deferred.sort_by_key(|&(a, b, _)| (a.0, b.0));
        let rw = self.core();
        let o = rw.cil.log().config().order;
        let geo = self.fs.geo();
        let mut chain = Vec::new();
        for group in deferred.chunks(EFI_MAX_EXTENTS) {
            let ext: Vec<FreeExtent> = group
                .iter()
                .map(|(a, b, l)| FreeExtent {
                    start: geo.agb_to_fsb(*a, *b).0,
                    len: *l,
                })
                .collect();
            let intent = IntentItem::new(rw.next_id());
            let efi = free_extents_region(o, false, intent.id, &ext);
            self.raw.push(RawItem::Intent(intent.clone(), vec![efi]));
            chain.push((intent, group.to_vec(), ext));
        }
        let fs = self.fs;
        let mut seq = self.commit_one()?;
        for (intent, group, ext) in chain {
            let r = (|| {
                let mut tp = fs.trans_alloc(Resv::Truncate)?;
                for (a, b, l) in &group {
                    crate::alloc::free_extent(&mut tp, *a, *b, *l)?;
                }
                let efd = free_extents_region(o, true, intent.id, &ext);
                tp.raw.push(RawItem::Done(intent.clone(), vec![efd]));
                tp.commit_one()
            })();
            match r {
                Ok(s) => seq = s,
                Err(e) => {
                    tracing::error!("deferred free failed, shutting down: {e}");
                    fs.abandon();
                    return Err(e);
                }
            }
        }
        Ok(seq)
    }

    /// Log `region`, the done item of `intent` (an intent recovery found
    /// unfinished and put in the AIL at its record's LSN): the intent
    /// leaves the AIL, and stops holding the log tail, once this
    /// transaction's checkpoint is stable.
    pub(crate) fn log_intent_done(&mut self, intent: Arc<IntentItem>, region: Vec<u8>) {
        self.raw.push(RawItem::Done(intent, vec![region]));
    }

    fn commit_one(mut self) -> Result<u64> {
        let rw = self.core();
        let mut ticket = self.ticket.take().expect("ticket");
        // The buffers stay locked to this transaction until the CIL has
        // published their new contents (and the busy extents): a
        // transaction waiting for one of them must not read the old ones.
        let mut guards = Vec::new();
        let stale_clusters: Vec<(Daddr, usize)> = self
            .bufs
            .iter()
            .filter(|b| b.stale && b.kind == BufKind::Dino)
            .map(|b| (b.buf.daddr, b.data.len()))
            .collect();
        let bufs: Vec<TxBuf> = std::mem::take(&mut self.bufs)
            .into_iter()
            .filter_map(|b| {
                guards.push(b._guard);
                b.dirty.then_some(TxBuf {
                    buf: b.buf,
                    data: b.data.into_vec(),
                    kind: b.kind,
                    map: b.map,
                    stale: b.stale,
                    ordered: b.ordered,
                    verified: b.verified,
                    base: b.base,
                })
            })
            .collect();
        let mut changed = Vec::new();
        let ts_only = self.timestamps_only;
        // Fork caches to install once the commit is published: what was
        // set, or nothing for an inode changed without setting one.
        let mut caches = Vec::new();
        for i in &mut self.inodes {
            match i.cache.take() {
                Some(c) => caches.push((i.item.clone(), c)),
                None if i.dirty => caches.push((i.item.clone(), None)),
                None => {}
            }
        }
        let inodes: Vec<TxInode> = std::mem::take(&mut self.inodes)
            .into_iter()
            .filter(|i| i.dirty)
            .map(|i| {
                changed.push(i.item.ino);
                TxInode {
                    item: i.item,
                    data: i.data,
                    timestamps_only: ts_only,
                }
            })
            .collect();
        // Readers take an inode's committed bytes and its cache together
        // (`Filesystem::decode_in_core`): drop the old cache before the
        // new bytes are published, install the new one after.
        for (item, _) in &caches {
            item.st.lock().fork_cache = None;
        }
        let raw = std::mem::take(&mut self.raw);
        let empty = bufs.is_empty() && inodes.is_empty() && raw.is_empty();
        // Realtime frees enter the realtime lock's busy mirror with the
        // checkpoint they commit into, before the lock is dropped
        // (`cache::rtbusy`).
        let rt_busy = if self.rt.is_some() {
            crate::rtalloc::own_rt_busy(&self.busy)
        } else {
            Vec::new()
        };
        let r = if empty {
            Ok(rw.cil.current_seq())
        } else {
            rw.cil.commit(
                &mut ticket,
                bufs,
                inodes,
                raw,
                std::mem::take(&mut self.busy),
            )
        };
        rw.cil.log().grant().ungrant(ticket);
        let seq = r?;
        if let (false, Some(rt)) = (empty, self.rt.as_mut()) {
            crate::rtalloc::busy_committed(rt, self.fs.sb(), &rt_busy, seq);
        }
        // Still under the callers' inode locks (they are dropped after
        // commit), so no other transaction of these inodes ran between.
        for (item, c) in caches {
            item.st.lock().fork_cache = c;
        }
        if !empty {
            rw.apply_sb_delta(self.sb_delta);
            for ino in changed {
                self.fs.invalidate_inode(ino);
            }
            for (daddr, len) in stale_clusters {
                self.mark_inodes_stale(daddr, len);
            }
            rw.count_commit();
        }
        drop(guards);
        Ok(seq)
    }

    /// The inodes of a cancelled cluster buffer (a freed chunk): their
    /// items are not written back any more (see [`crate::cache::IState`]).
    fn mark_inodes_stale(&self, daddr: Daddr, len: usize) {
        let geo = self.fs.geo();
        let rw = self.core();
        // Daddr -> (AG, AG block): linear blocks of agblocks per AG.
        let lin = daddr.0 >> (geo.blocklog - 9);
        let agno = AgNumber((lin / geo.agblocks as u64) as u32);
        let agbno = AgBlock((lin % geo.agblocks as u64) as u32);
        let first = geo.agino_to_ino(agno, geo.agbno_to_agino(agbno, 0));
        for i in 0..(len / geo.inodesize as usize) as u64 {
            if let Some(ip) = rw.inodes.get(Ino(first.0 + i)) {
                ip.st.lock().stale = true;
            }
        }
    }

    /// Declare that this transaction changes nothing but inode
    /// timestamps: `fdatasync` of its inodes does not wait for it.
    pub fn timestamps_only(&mut self) {
        self.timestamps_only = true;
    }

    /// Drop every change.
    pub fn cancel(mut self) {
        self.release();
    }

    fn release(&mut self) {
        if let Some(t) = self.ticket.take() {
            if let Some(rw) = self.fs.rw() {
                rw.cil.log().grant().ungrant(t);
                rw.count_cancel();
            }
        }
        self.bufs.clear();
        self.inodes.clear();
        if let Some(mut rt) = self.rt.take() {
            // What this transaction changed or read under the lock is
            // gone with it (see crate::cache::rtsum).
            rt.invalidate();
        }
    }
}

impl Drop for Trans<'_> {
    fn drop(&mut self) {
        if self.ticket.is_some() {
            self.release();
        }
    }
}

impl MetaTx for Trans<'_> {
    fn ag_space(&self) -> &'static dyn crate::xact::AgSpace {
        &crate::alloc::ALLOCATOR
    }
    fn geo(&self) -> &Geometry {
        self.fs.geo()
    }
    fn sb(&self) -> &Superblock {
        self.fs.sb()
    }
    fn read_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<BufId> {
        self.join(daddr, len, kind, true)
    }
    fn try_read_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<Option<BufId>> {
        self.join_inner(daddr, len, kind, true, true)
    }
    fn dir_rotor(&self) -> u32 {
        self.core()
            .dir_rotor
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
    fn ag_join_out_of_order(&self, kind: BufKind, agno: AgNumber) -> bool {
        self.out_of_order(kind, agno.0 as u64)
    }
    fn new_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<BufId> {
        self.join(daddr, len, kind, false)
    }
    fn buf(&self, b: BufId) -> &[u8] {
        self.bufs[b.0 as usize].data.bytes()
    }
    fn buf_mut(&mut self, b: BufId) -> &mut [u8] {
        self.bufs[b.0 as usize].data.bytes_mut()
    }
    fn buf_verified(&self, b: BufId, kind: BufKind) -> bool {
        self.bufs[b.0 as usize].verified == Some(kind)
    }
    fn set_buf_verified(&mut self, b: BufId, kind: BufKind) {
        self.bufs[b.0 as usize].verified = Some(kind);
    }
    fn log_buf(&mut self, b: BufId, range: std::ops::Range<usize>) {
        let tb = &mut self.bufs[b.0 as usize];
        let len = tb.data.len();
        let end = range.end.min(len);
        map_set(&mut tb.map, len, range.start.min(end), end);
        tb.dirty = true;
    }
    fn stale_buf(&mut self, b: BufId) {
        let tb = &mut self.bufs[b.0 as usize];
        tb.stale = true;
        tb.dirty = true;
    }
    fn ordered_buf(&mut self, b: BufId) {
        let tb = &mut self.bufs[b.0 as usize];
        tb.ordered = true;
        tb.dirty = true;
    }
    fn log_icreate(&mut self, agno: AgNumber, agbno: AgBlock, count: u32, length: u32, gen: u32) {
        let o = self.core().cil.log().config().order;
        let mut r = vec![0u8; 28];
        o.put_u16(&mut r, 0, crate::format::log_items::LI_ICREATE);
        o.put_u16(&mut r, 2, 1);
        let isize = self.fs.geo().inodesize;
        for (i, v) in [agno.0, agbno.0, count, isize, length, gen]
            .into_iter()
            .enumerate()
        {
            crate::format::put_be32(&mut r, 4 + 4 * i, v);
        }
        self.raw.push(RawItem::Plain(vec![r]));
    }
    fn ijoin(&mut self, ino: Ino) -> Result<InodeId> {
        if let Some(&id) = self.by_ino.get(&ino.0) {
            return Ok(id);
        }
        let item = self.item(ino, None)?;
        let data = (*item.st.lock().committed).clone();
        if data.len() < 176
            || be16(&data, 0) != crate::format::inode::DINODE_MAGIC
            || !crc::verify(&data, crate::format::inode::DINODE_CRC_OFF)
        {
            return Err(Error::corrupt(
                "inode",
                Location::Ino(ino.0),
                "bad magic or CRC",
            ));
        }
        let id = InodeId(self.inodes.len() as u32);
        self.inodes.push(TInode {
            item,
            data,
            dirty: false,
            cache: None,
        });
        self.by_ino.insert(ino.0, id);
        Ok(id)
    }
    fn ijoin_new(&mut self, ino: Ino, dinode: Vec<u8>, before: Option<Vec<u8>>) -> Result<InodeId> {
        if dinode.len() != self.fs.geo().inodesize as usize {
            return Err(Error::Invalid("new dinode has the wrong size".into()));
        }
        if let Some(&id) = self.by_ino.get(&ino.0) {
            let ti = &mut self.inodes[id.0 as usize];
            ti.data = dinode;
            ti.dirty = true;
            return Ok(id);
        }
        // The item's committed state is the inode as it was before this
        // transaction (free), never the new dinode: a cancelled
        // transaction must leave the inode free for the next allocation.
        let before = match before {
            Some(b) => b,
            None => self.read_dinode_raw(ino)?,
        };
        let item = self.item(ino, Some(&before))?;
        let id = InodeId(self.inodes.len() as u32);
        self.inodes.push(TInode {
            item,
            data: dinode,
            dirty: true,
            cache: Some(None),
        });
        self.by_ino.insert(ino.0, id);
        Ok(id)
    }
    fn read_dinode_raw(&mut self, ino: Ino) -> Result<Vec<u8>> {
        if let Some(&id) = self.by_ino.get(&ino.0) {
            return Ok(self.inodes[id.0 as usize].data.clone());
        }
        // A new chunk initialised in this transaction.
        let geo = self.fs.geo();
        if geo.ino_valid(ino) {
            let (daddr, off) = geo.ino_location(ino);
            let at = daddr.bytes() + off as u64;
            let n = geo.inodesize as usize;
            for b in &self.bufs {
                let s = b.buf.daddr.bytes();
                if b.kind == BufKind::Dino && s <= at && at + n as u64 <= s + b.data.len() as u64 {
                    let o = (at - s) as usize;
                    return Ok(b.data.bytes()[o..o + n].to_vec());
                }
            }
        }
        if let Some(ip) = self.core().inodes.get(ino) {
            return Ok((*ip.st.lock().committed).clone());
        }
        self.read_disk_dinode(ino)
    }
    fn inode(&self, i: InodeId) -> &[u8] {
        &self.inodes[i.0 as usize].data
    }
    fn inode_mut(&mut self, i: InodeId) -> &mut [u8] {
        let t = &mut self.inodes[i.0 as usize];
        t.dirty = true;
        &mut t.data
    }
    fn ifree_done(&mut self, i: InodeId) {
        self.inodes[i.0 as usize].dirty = true;
    }
    fn fork_cache(&self, i: InodeId) -> Option<ForkCache> {
        let t = &self.inodes[i.0 as usize];
        match &t.cache {
            Some(c) => c.clone(),
            None => t.item.st.lock().fork_cache.clone(),
        }
    }
    fn set_fork_cache(&mut self, i: InodeId, c: Option<ForkCache>) {
        self.inodes[i.0 as usize].cache = Some(c);
    }
    fn log_raw_item(&mut self, regions: Vec<Vec<u8>>) {
        self.raw.push(RawItem::Plain(regions));
    }
    fn defer_free(&mut self, agno: AgNumber, agbno: AgBlock, len: u32) -> Result<()> {
        if len == 0 || !self.fs.geo().agbno_valid(agno, agbno) {
            return Err(Error::Invalid(format!(
                "deferred free of {len} blocks at AG {} block {}",
                agno.0, agbno.0
            )));
        }
        self.deferred.push((agno, agbno, len));
        Ok(())
    }
    fn mod_sb(&mut self, c: SbCounter, delta: i64) {
        let i = match c {
            SbCounter::FreeBlocks => 0,
            SbCounter::ICount => 1,
            SbCounter::IFree => 2,
            SbCounter::FreeRtExtents => 3,
        };
        self.sb_delta[i] += delta;
    }
    fn mark_busy(&mut self, agno: AgNumber, agbno: AgBlock, len: u32) {
        self.busy.push((agno, agbno, len));
    }
    fn rt_lock(&mut self) -> Result<&mut crate::cache::rtsum::RtSumCache> {
        if self.rt.is_none() {
            let m = self.core().rt.as_ref().ok_or_else(|| {
                Error::Invalid("realtime allocation without a realtime section".into())
            })?;
            self.rt = Some(m.lock());
        }
        Ok(self.rt.as_mut().expect("rt lock held"))
    }
    fn busy_overlap(&self, agno: AgNumber, agbno: AgBlock, len: u32) -> Option<(AgBlock, u32)> {
        crate::xact::own_busy(&self.busy, agno, agbno, len)
            .next()
            .or_else(|| self.core().cil.busy_overlap(agno, agbno, len))
    }
    fn committed_busy_ranges(
        &self,
        agno: AgNumber,
        agbno: AgBlock,
        len: u32,
    ) -> Vec<(AgBlock, u32, u64)> {
        let mut out = Vec::new();
        self.core().cil.busy_ranges(agno, agbno, len, &mut out);
        out
    }
    fn own_busy_ranges(&self, agno: AgNumber, agbno: AgBlock, len: u32) -> Vec<(AgBlock, u32)> {
        crate::xact::own_busy(&self.busy, agno, agbno, len).collect()
    }
    fn force_busy(&mut self) -> Result<()> {
        self.core().cil.force_busy()
    }
    fn busy_stable_seq(&self) -> u64 {
        self.core().cil.busy_stable_seq()
    }
    fn space_left(&self) -> Option<i64> {
        let rw = self.core();
        let free = rw.counters().fdblocks + self.sb_delta[0];
        Some(free - rw.unavailable_blocks(self.fs, free) as i64)
    }
    fn highest_agf(&self) -> Option<AgNumber> {
        let geo = self.fs.geo();
        self.bufs
            .iter()
            .filter(|b| b.kind == BufKind::Agf)
            .map(|b| {
                AgNumber((b.buf.daddr.0 / (geo.agblocks as u64 * geo.bb_per_block() as u64)) as u32)
            })
            .max()
    }
}
