//! Transactions: the one way metadata changes.
//!
//! Every metadata change is made inside a transaction ([`MetaTx`]): the
//! algorithm joins the buffers and inodes it changes, changes them, says
//! which bytes it changed, and the transaction commits all of it atomically
//! through the log (the CIL aggregates many commits into one checkpoint,
//! see [`crate::log`]), or cancels and nothing happened.
//!
//! Algorithms (allocation, inode allocation, directories, bmap) are written
//! against the [`MetaTx`] trait only, so they run unchanged on
//! - the real, logged transaction of a mounted filesystem
//!   (`fs::trans::Trans`, above this layer), and
//! - `recover::memtx::MemTx`, an *unlogged* transaction applied straight
//!   to a device at commit: for recovery's finishing steps and algorithm
//!   tests (kernel oracle: apply changes to an mkfs image, then
//!   `xfs_repair -n`).
//!
//! This module is the contract only: it sits below every algorithm and
//! above the log layer. What the algorithms below the allocator need from
//! it (AGFL fix-ups, inode btree blocks) comes through [`AgSpace`], which
//! every transaction hands out.
//!
//! ## Rules for algorithm code
//! - Read metadata with [`MetaTx::read_buf`]: the buffer is verified (magic,
//!   CRC, self-describing address) and stays locked to this transaction
//!   until commit or cancel; reading it again returns the same [`BufId`].
//! - Change bytes through [`MetaTx::buf_mut`] and cover every changed byte
//!   with [`MetaTx::log_buf`]. Never change the CRC or LSN fields: the
//!   write-back path stamps them.
//! - A block just allocated for metadata is [`MetaTx::new_buf`] (zeroed, not
//!   read); initialise the whole header and log what you wrote.
//! - A metadata block being freed is [`MetaTx::stale_buf`]: its buffer is
//!   cancelled (recovery will not replay older changes into it).
//! - Inodes: [`MetaTx::ijoin`] (the caller holds the inode lock), then
//!   [`MetaTx::inode_mut`] for the dinode bytes (on-disk layout, big
//!   endian, core + forks): the whole inode is logged. Never write di_crc or
//!   di_lsn.
//! - Freed extents are busy until the freeing checkpoint is on disk:
//!   allocators must not hand out busy blocks ([`MetaTx::busy_overlap`]),
//!   and may call [`MetaTx::force_busy`] to wait them out.
//! - Superblock counters (free blocks, inodes) are changed with
//!   [`MetaTx::mod_sb`], never by logging the superblock (lazy counters:
//!   the AGF/AGI are the truth; the sb is written exactly at unmount).
//!
//! ## Lock order (outermost first)
//! 1. inode locks (`ilock`), several in ascending inode number;
//! 2. the realtime lock ([`MetaTx::rt_lock`], held to commit or cancel;
//!    it guards every realtime bitmap and summary buffer; a namespace
//!    transaction that may free a realtime file takes it first, before
//!    its AGI: only recovery, alone at mount, takes it after an AGI);
//! 3. AGI buffers, ascending AG;
//! 4. AGF buffers, ascending AG (an allocation that must move to another
//!    AG only moves to a higher one within one transaction, else it
//!    commits/rolls first);
//! 5. btree, AGFL, directory and other buffers (guarded by the AG header or
//!    inode lock above them);
//! 6. the CIL's internal locks, then the log's (see [`crate::log`]).

use crate::error::Result;
use crate::format::bufkind::BufKind;
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::types::{AgBlock, AgNumber, Daddr, Ino};

/// A layer's in-core cache of an inode's metadata, kept between
/// transactions (see [`MetaTx::fork_cache`]); the owner downcasts it.
pub type ForkCache = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// A buffer joined to a transaction (index into the transaction's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

/// An inode joined to a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InodeId(pub u32);

/// In-core superblock counters changed by transactions (lazy counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SbCounter {
    /// `sb_fdblocks`: free data blocks (btree blocks of the free-space
    /// btrees and the AGFL count as free, as the kernel counts them).
    FreeBlocks,
    /// `sb_icount`: allocated inodes (inodes in allocated chunks).
    ICount,
    /// `sb_ifree`: free inodes in allocated chunks.
    IFree,
    /// `sb_frextents`: free realtime extents (the bitmap is the truth;
    /// recovery recounts it, as the kernel does).
    FreeRtExtents,
}

/// Space reservations, by operation (sizes decided by the implementation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resv {
    Create,
    Mkdir,
    Remove,
    Write,
    Truncate,
    SetAttr,
    /// Small changes (superblock, one inode).
    Misc,
    /// rename (up to four inodes, two directories).
    Rename,
    /// link (one new entry, nlink + 1).
    Link,
    /// symlink (create plus remote target blocks).
    Symlink,
    /// Set an extended attribute (shortform/leaf/node edits, remote value
    /// blocks, fork conversions).
    AttrSet,
    /// Remove an extended attribute.
    AttrRemove,
    /// fallocate modes, data fork shifts (collapse/insert range).
    Fallocate,
    /// Every AG's superblock (the label change).
    AllSuperblocks,
}

/// Rotor for the AG of new directories of transactions that have no
/// mount of their own (unlogged test transactions); a mounted filesystem
/// has its own ([`MetaTx::dir_rotor`]).
pub(crate) static DIR_ROTOR: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// What metadata algorithms need from a transaction. See the module doc
/// for the rules.
/// What the lower algorithm layers (the generic btree editor, reverse
/// mapping) need from the allocator above them, handed out by every
/// transaction ([`MetaTx::ag_space`]); [`crate::alloc`] implements it.
/// (libxfs's btree ops' `alloc_block`/`free_block` and the rmap code's
/// free list fix-up, without an upward import.)
pub trait AgSpace: Sync {
    /// Bring the AGFL of `agno` to its minimum before a reverse-mapping
    /// edit (a refill that finds no space is not an error here: the edit
    /// then fails with `NoSpace` only if it needs a block).
    fn fix_freelist_for_rmap(&self, tx: &mut dyn MetaTx, agno: AgNumber) -> Result<()>;
    /// A block for an inode btree of `agno`, near `near`, recorded as
    /// OWN_INOBT in the rmapbt.
    fn alloc_inobt_block(
        &self,
        tx: &mut dyn MetaTx,
        agno: AgNumber,
        near: AgBlock,
    ) -> Result<AgBlock>;
    /// Give back an inode btree block (its rmap record goes too).
    fn free_inobt_block(&self, tx: &mut dyn MetaTx, agno: AgNumber, agbno: AgBlock) -> Result<()>;
}

pub trait MetaTx {
    fn geo(&self) -> &Geometry;
    fn sb(&self) -> &Superblock;
    /// The allocator's services for the layers below it (see [`AgSpace`]).
    fn ag_space(&self) -> &'static dyn AgSpace;

    /// Read and verify the metadata buffer of `len` bytes at `daddr` and
    /// join it to this transaction (locked until commit or cancel). The
    /// same `(daddr, len)` joined twice gives the same id; a different
    /// length at the same address is `Err(Invalid)`.
    fn read_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<BufId>;
    /// [`MetaTx::read_buf`] only if no other transaction holds the buffer
    /// (`Ok(None)` then): for a join against the lock order, which must
    /// never wait (the kernel's trylock).
    fn try_read_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<Option<BufId>> {
        self.read_buf(daddr, len, kind).map(Some)
    }
    /// Whether joining the AG header `kind` (AGI or AGF) of `agno` now
    /// would go against the lock order (an AGI after any AGF or a higher
    /// AGI; an AGF after a higher AGF).
    fn ag_join_out_of_order(&self, kind: BufKind, agno: AgNumber) -> bool {
        let _ = (kind, agno);
        false
    }
    /// The next value of the filesystem's directory rotor (the AG a new
    /// directory's inode is looked for in first, round robin).
    fn dir_rotor(&self) -> u32 {
        DIR_ROTOR.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
    /// Join a buffer for a block just allocated: zeroed, not read.
    fn new_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<BufId>;
    fn buf(&self, b: BufId) -> &[u8];
    /// The bytes to change; every changed byte must be covered by
    /// [`MetaTx::log_buf`] before commit.
    fn buf_mut(&mut self, b: BufId) -> &mut [u8];
    /// Whether the buffer's bytes passed the structure checks of `kind`
    /// (see [`crate::cache::buf::BufState::verified`]): then a decoder may
    /// trust the summaries the block keeps of itself. False unless known.
    fn buf_verified(&self, _b: BufId, _kind: BufKind) -> bool {
        false
    }
    /// The buffer's bytes just passed the structure checks of `kind`.
    fn set_buf_verified(&mut self, _b: BufId, _kind: BufKind) {}
    /// Mark `range` of the buffer as changed (logged at commit).
    fn log_buf(&mut self, b: BufId, range: std::ops::Range<usize>);
    /// The block under this buffer was freed: cancel the buffer (not
    /// written back; recovery skips older logged changes to it).
    fn stale_buf(&mut self, b: BufId);
    /// A new inode-chunk buffer, initialised by the caller, covered by an
    /// ICREATE item ([`MetaTx::log_icreate`]) instead of being logged; it
    /// is written back before the log tail moves past this transaction.
    fn ordered_buf(&mut self, b: BufId);
    /// Log an inode-chunk creation: `count` inodes of `isize` bytes at
    /// `agbno` in `agno`, `length` blocks, generation `gen`.
    fn log_icreate(&mut self, agno: AgNumber, agbno: AgBlock, count: u32, length: u32, gen: u32);

    /// Join an allocated inode (the caller holds its inode lock): reads and
    /// verifies its dinode.
    fn ijoin(&mut self, ino: Ino) -> Result<InodeId>;
    /// Join a just-allocated inode with its complete initial dinode bytes
    /// (`inodesize` bytes, mode != 0; CRC and LSN are set at write-back).
    /// `before`: the slot's bytes as [`MetaTx::read_dinode_raw`] gave them
    /// in this transaction, when the caller read them (else read here).
    fn ijoin_new(&mut self, ino: Ino, dinode: Vec<u8>, before: Option<Vec<u8>>) -> Result<InodeId>;
    /// The on-disk bytes of a (free) inode, unverified, as of the last
    /// commit: for reading the old generation number before reuse.
    fn read_dinode_raw(&mut self, ino: Ino) -> Result<Vec<u8>>;
    fn inode(&self, i: InodeId) -> &[u8];
    /// The dinode bytes to change (the inode is logged whole at commit).
    fn inode_mut(&mut self, i: InodeId) -> &mut [u8];
    /// The inode was freed in this transaction (mode 0 written by the
    /// caller); the implementation drops it from its caches at commit.
    fn ifree_done(&mut self, i: InodeId);

    /// The in-core cache kept for joined inode `i` between transactions
    /// ([`ForkCache`]): what this transaction set, else the one installed
    /// by the last commit. `None` when there is none (an implementation
    /// may keep none at all).
    fn fork_cache(&self, i: InodeId) -> Option<ForkCache> {
        let _ = i;
        None
    }
    /// Set the cache of joined inode `i` to describe the inode as this
    /// transaction leaves it (`None`: drop it). The contract: commit
    /// installs what was set last; a commit that changed the inode
    /// (`inode_mut`) without setting its cache drops it; cancel installs
    /// nothing. So code that changes what a cache describes must change
    /// the inode too (directory changes always do: timestamps, size).
    fn set_fork_cache(&mut self, i: InodeId, c: Option<ForkCache>) {
        let _ = (i, c);
    }

    /// Log a whole item this transaction built itself (intent and done
    /// items: EFI/EFD...): `regions[0]` is its format header. Logged once,
    /// in this transaction's checkpoint, after the items joined above.
    fn log_raw_item(&mut self, regions: Vec<Vec<u8>>);

    /// Free an extent as a deferred operation: the transaction logs an
    /// extent-free intent (EFI) for it, and at commit a follow-up
    /// transaction frees it and logs the done item (EFD), so a crash in
    /// between leaves an intent recovery finishes. `recover::memtx::MemTx` frees
    /// at once.
    fn defer_free(&mut self, agno: AgNumber, agbno: AgBlock, len: u32) -> Result<()>;

    /// Change an in-core superblock counter by `delta` at commit.
    fn mod_sb(&mut self, c: SbCounter, delta: i64);
    /// Take the realtime lock for the rest of this transaction (see the
    /// lock order above; taking it again returns the same state) and
    /// return the realtime allocator's in-core state. A cancel of a
    /// transaction that held it invalidates that state
    /// ([`crate::cache::rtsum`]). Transactions without realtime support
    /// refuse.
    fn rt_lock(&mut self) -> Result<&mut crate::cache::rtsum::RtSumCache> {
        Err(crate::error::Error::NotSupported(
            "realtime allocation in this kind of transaction".into(),
        ))
    }
    /// `len` blocks at `agbno` were freed: busy until this transaction's
    /// checkpoint is on disk.
    fn mark_busy(&mut self, agno: AgNumber, agbno: AgBlock, len: u32);
    /// The first busy range overlapping `[agbno, agbno + len)`, if any.
    fn busy_overlap(&self, agno: AgNumber, agbno: AgBlock, len: u32) -> Option<(AgBlock, u32)>;
    /// Every busy range of committed transactions overlapping `[agbno,
    /// agbno + len)`, in order of first block, with the sequence of the
    /// first checkpoint that may make it (or part of it) reusable: for an
    /// allocator that weighs many candidates of one region (this
    /// transaction's own frees are [`Self::own_busy_ranges`]).
    fn committed_busy_ranges(
        &self,
        agno: AgNumber,
        agbno: AgBlock,
        len: u32,
    ) -> Vec<(AgBlock, u32, u64)>;
    /// This transaction's own frees (not yet committed) overlapping
    /// `[agbno, agbno + len)`.
    fn own_busy_ranges(&self, agno: AgNumber, agbno: AgBlock, len: u32) -> Vec<(AgBlock, u32)>;
    /// Force the log so that every busy extent becomes free to reuse.
    fn force_busy(&mut self) -> Result<()>;
    /// Busy ranges of every checkpoint up to this sequence have become
    /// reusable: a range [`Self::committed_busy_ranges`] gave with a greater
    /// sequence is busy still.
    fn busy_stable_seq(&self) -> u64;

    /// The highest AG whose AGF this transaction holds (the allocator
    /// starts there when it may choose the AG: AGFs are locked in
    /// ascending order).
    fn highest_agf(&self) -> Option<AgNumber> {
        None
    }

    /// Blocks an allocation may still take: the free-block counter (with
    /// this transaction's changes) minus what the filesystem holds back
    /// (the kernel's set-aside and free-space btree blocks, which ordinary
    /// allocations never dip into). `None`: no limit (unlogged test
    /// transactions).
    fn space_left(&self) -> Option<i64> {
        None
    }
}

/// The entries of a transaction's own list of frees `own` that overlap
/// `[agbno, agbno + len)` of `agno` (in the list's order; sums in u64, so
/// no range at the top of the block space wraps).
pub(crate) fn own_busy(
    own: &[(AgNumber, AgBlock, u32)],
    agno: AgNumber,
    agbno: AgBlock,
    len: u32,
) -> impl Iterator<Item = (AgBlock, u32)> + '_ {
    let (lo, hi) = (agbno.0 as u64, agbno.0 as u64 + len as u64);
    own.iter()
        .filter(move |(a, b, l)| *a == agno && (b.0 as u64) < hi && lo < b.0 as u64 + *l as u64)
        .map(|&(_, b, l)| (b, l))
}
