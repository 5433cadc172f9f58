//! Leaf and node directories on a transaction: the in-memory model
//! [`BigDir`], loaded from the fork, edited, then written back by
//! [`BigDir::commit`] (see [`super::index`] for the hash index layout).
//!
//! The model holds:
//! - the fork's extent map (as loaded and as edited);
//! - the hash index: the live leaf entries, grouped in leaf blocks in hash
//!   order (one leaf1 block in leaf form; leafn blocks under DA nodes in
//!   node form). Stale entries are never kept: a removal takes the entry
//!   out of its leaf block;
//! - `bests`: the longest unused slot of each data block (`NULL_DATAOFF`
//!   for a hole in the data segment);
//! - the data blocks touched, decoded ([`DataBuf`]).
//!
//! Nothing reaches a buffer before [`BigDir::commit`], and commit performs
//! every block allocation before its first buffer write, so an `Err` from
//! planning leaves the transaction unchanged (allocator errors aside, as
//! for the other forms).
//!
//! Data blocks are added at the first hole of the data segment when no
//! block has room (entries go at the start of a block's longest unused
//! slot); a data block other than block 0 that becomes empty is freed
//! (its buffer cancelled, the extent freed as a deferred operation), and
//! trailing holes are trimmed from `bests` and from the directory size.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::block::BlockState;
use super::data::data_decode_tx;
use super::skel::{fingerprint, DirSkel};
use crate::alloc::{alloc_extent, AllocReq};
use crate::bmap::fork;
use crate::bmap::map::ExtentMap;
use crate::error::{Error, Location, Result};
use crate::format::bmbt::Extent;
use crate::format::bufkind::BufKind;
use crate::format::crc::Sum;
use crate::format::da::hashname;
use crate::format::dinode_edit as di;
use crate::format::dir::DirGeo;
use crate::format::dir_leaf::{
    decode_leaf_as, hash_range, LeafEntry, LeafView, LEAFN_MAGIC, NULL_DATAOFF,
};
use crate::format::Uuid;
use crate::types::WhichFork;
use crate::types::{AgNumber, Daddr, FileBlock, FsBlock, Ino};
use crate::xact::{BufId, InodeId, MetaTx};

/// One leaf block of the hash index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafBlk {
    /// Fork block; `u64::MAX` for a block not placed yet.
    pub dablk: u64,
    /// Upper bound of the block's hashes: its parent node's entry (the
    /// exact last hash) as loaded, raised when an entry past it is
    /// inserted into the last block. The block's entries lie between the
    /// previous block's bound and this one.
    pub hash: u32,
    /// Live entries, sorted by hash; `None` while the block is not read
    /// in this operation (see [`BigDir::load_leaf`]).
    pub ents: Option<Vec<LeafEntry>>,
    /// Sibling pointers (back, forw) as on disk; `None` for a block not
    /// on disk yet.
    pub chain: Option<(u64, u64)>,
}

impl LeafBlk {
    /// A leaf block read in full.
    pub fn loaded(dablk: u64, ents: Vec<LeafEntry>) -> LeafBlk {
        LeafBlk {
            dablk,
            hash: ents.last().map_or(0, |e| e.hashval),
            ents: Some(ents),
            chain: None,
        }
    }

    /// The last hash now: `None` for a block emptied in this operation.
    pub fn last_hash(&self) -> Option<u32> {
        match &self.ents {
            Some(e) => e.last().map(|x| x.hashval),
            None => Some(self.hash),
        }
    }

    /// The block as the kept index holds it (see [`super::skel`]): not
    /// read, its bound the hash its node entry has once written.
    pub fn bare(&self) -> LeafBlk {
        LeafBlk {
            dablk: self.dablk,
            hash: self.last_hash().unwrap_or(self.hash),
            ents: None,
            chain: self.chain,
        }
    }

    /// The entries of a block read in this operation.
    pub fn ents(&self) -> &[LeafEntry] {
        self.ents.as_deref().expect("leaf block read")
    }

    pub fn ents_mut(&mut self) -> &mut Vec<LeafEntry> {
        self.ents.as_mut().expect("leaf block read")
    }
}

/// A data block read (and maybe edited) in this operation.
pub struct DataBuf {
    pub daddr: Daddr,
    pub bytes: Vec<u8>,
    pub st: BlockState,
    /// The joined buffer (None for a block allocated in this operation).
    pub buf: Option<BufId>,
    /// The buffer holds another kind (a single block becoming data block 0).
    pub rekind: bool,
    pub dirty: bool,
    /// Emptied: to be freed at commit.
    pub freed: bool,
    /// `st.entries` holds the block's live entries. A block read for an
    /// add alone is decoded without them ([`BigDir::data_block`]); its
    /// slots, bestfree table and `bytes` are always current, and
    /// [`BigDir::data_block_full`] decodes the entries from `bytes` when an
    /// edit needs them.
    pub entries_ok: bool,
}

/// Where a name was found: (leaf block, entry in it, data block, byte
/// offset in the data block, inode).
pub type Found = (usize, usize, u64, usize, Ino);

/// A leaf or node directory being edited (see the module doc).
pub struct BigDir {
    pub geo: DirGeo,
    pub dp: InodeId,
    pub owner: Ino,
    pub uuid: Uuid,
    pub old_map: ExtentMap,
    pub map: ExtentMap,
    pub leaf_form: bool,
    pub leaves: Vec<LeafBlk>,
    pub bests: Vec<u16>,
    /// Index blocks joined in this operation: fork block -> (buffer, kind).
    pub bufs: BTreeMap<u64, (BufId, BufKind)>,
    /// The index as on disk when this operation started (or as its last
    /// commit left it): commit rewrites only what differs, and keeps each
    /// index block under the DA node it was under, so a change touches one
    /// path.
    pub base: Arc<DirSkel>,
    pub data: BTreeMap<u64, DataBuf>,
    /// Filesystem blocks allocated minus freed.
    pub delta: i64,
}

pub(super) fn corrupt(owner: Ino, d: impl Into<String>) -> Error {
    Error::corrupt("directory", Location::Ino(owner.0), d)
}

impl BigDir {
    /// Disk address of the directory block at fork block `dablk` (it must
    /// be mapped by one extent).
    pub fn daddr(&self, tx: &dyn MetaTx, dablk: u64) -> Result<Daddr> {
        let fsbs = self.geo.fsbs() as u64;
        let e = self
            .map
            .lookup(dablk)
            .ok_or_else(|| corrupt(self.owner, format!("directory block {dablk:#x} unmapped")))?;
        if e.off.0 + e.len < dablk + fsbs {
            return Err(Error::NotSupported(
                "a directory block in discontiguous extents".into(),
            ));
        }
        if e.unwritten {
            return Err(corrupt(self.owner, "unwritten directory block"));
        }
        Ok(tx.geo().fsb_to_daddr(FsBlock(e.start + (dablk - e.off.0))))
    }

    /// The data block `db` with its entries decoded (see
    /// [`DataBuf::entries_ok`]).
    pub fn data_block_full(&mut self, tx: &mut dyn MetaTx, db: u64) -> Result<&mut DataBuf> {
        let (geo, owner, uuid) = (self.geo, self.owner, self.uuid);
        let d = self.data_block(tx, db)?;
        if !d.entries_ok {
            // The bytes may be edited since they were read.
            d.st.entries =
                data_decode_tx(&d.bytes, &geo, d.daddr, owner, &uuid, true, false)?.entries;
            d.entries_ok = true;
        }
        Ok(d)
    }

    /// The data block `db`, read and decoded once per operation (its
    /// entries only if an earlier call asked for them: see
    /// [`DataBuf::entries_ok`]).
    pub fn data_block(&mut self, tx: &mut dyn MetaTx, db: u64) -> Result<&mut DataBuf> {
        if !self.data.contains_key(&db) {
            if self
                .bests
                .get(db as usize)
                .is_none_or(|&b| b == NULL_DATAOFF)
            {
                return Err(corrupt(self.owner, format!("no data block {db}")));
            }
            let daddr = self.daddr(tx, self.geo.db_to_dablk(db))?;
            let buf = tx.read_buf(daddr, self.geo.blksize as usize, BufKind::DirData)?;
            let bytes = tx.buf(buf).to_vec();
            let trusted = tx.buf_verified(buf, BufKind::DirData);
            let st = data_decode_tx(
                &bytes, &self.geo, daddr, self.owner, &self.uuid, false, trusted,
            )?;
            if !trusted {
                tx.set_buf_verified(buf, BufKind::DirData);
            }
            if st.bf[0].1 as u16 != self.bests[db as usize] {
                return Err(corrupt(
                    self.owner,
                    format!("data block {db}: bests table disagrees with bestfree"),
                ));
            }
            self.data.insert(
                db,
                DataBuf {
                    daddr,
                    bytes,
                    st,
                    buf: Some(buf),
                    rekind: false,
                    dirty: false,
                    freed: false,
                    entries_ok: false,
                },
            );
        }
        Ok(self.data.get_mut(&db).unwrap())
    }

    /// Read leaf block `li` of the node form if this operation has not.
    /// Its hashes must lie within its bounds (see [`LeafBlk::hash`]).
    pub fn load_leaf(&mut self, tx: &mut dyn MetaTx, li: usize) -> Result<()> {
        if self.leaves[li].ents.is_some() {
            return Ok(());
        }
        let dablk = self.leaves[li].dablk;
        let daddr = self.daddr(tx, dablk)?;
        let (owner, uuid) = (self.owner, self.uuid);
        let b = tx.read_buf(daddr, self.geo.blksize as usize, BufKind::DirLeafN)?;
        let ents = leaf_entries(tx, b, daddr, owner, &uuid)?;
        let lo = if li > 0 { self.leaves[li - 1].hash } else { 0 };
        let hi = self.leaves[li].hash;
        if ents.first().is_some_and(|e| e.hashval < lo)
            || ents.last().is_some_and(|e| e.hashval > hi)
        {
            return Err(corrupt(
                owner,
                format!("leaf block {dablk:#x}: hashes outside its node entry's range"),
            ));
        }
        self.bufs.insert(dablk, (b, BufKind::DirLeafN));
        self.leaves[li].ents = Some(ents);
        Ok(())
    }

    /// Read every leaf block (small directories: conversions, counts).
    pub fn load_all_leaves(&mut self, tx: &mut dyn MetaTx) -> Result<()> {
        for li in 0..self.leaves.len() {
            self.load_leaf(tx, li)?;
        }
        Ok(())
    }

    /// Find `name`: (leaf block, entry index, data block, offset, inode).
    /// Reads only the leaf blocks whose hash range holds the name's hash.
    pub fn find(&mut self, tx: &mut dyn MetaTx, name: &[u8]) -> Result<Option<Found>> {
        let hash = hashname(name);
        let mut cands = Vec::new();
        let mut next = self.leaves.iter().position(|l| l.hash >= hash);
        while let Some(li) = next {
            self.load_leaf(tx, li)?;
            let l = &self.leaves[li];
            for ei in hash_range(l.ents(), hash) {
                cands.push((li, ei, l.ents()[ei].address));
            }
            // A run of equal hashes may go on in the next block.
            next = (l.hash == hash && li + 1 < self.leaves.len()).then_some(li + 1);
        }
        for (li, ei, addr) in cands {
            let (db, off) = self.geo.dataptr_split(addr as u64);
            let owner = self.owner;
            let d = self.data_block_full(tx, db)?;
            let e =
                d.st.entries
                    .binary_search_by_key(&off, |e| e.off)
                    .map_err(|_| corrupt(owner, format!("leaf address {addr:#x} is no entry")))?;
            let e = &d.st.entries[e];
            if hashname(&e.name) != hash {
                return Err(corrupt(
                    owner,
                    format!("leaf address {addr:#x}: wrong hash"),
                ));
            }
            if e.name == name {
                return Ok(Some((li, ei, db, off, e.ino)));
            }
        }
        Ok(None)
    }

    /// Entries in the hash index ("." and ".." included); reads every
    /// leaf block.
    pub fn count_all(&mut self, tx: &mut dyn MetaTx) -> Result<usize> {
        self.load_all_leaves(tx)?;
        Ok(self.leaves.iter().map(|l| l.ents().len()).sum())
    }

    /// Insert a leaf entry in hash order: into the first block whose bound
    /// is at or past its hash, else the last block (raising its bound).
    pub fn insert_leaf(&mut self, tx: &mut dyn MetaTx, e: LeafEntry) -> Result<()> {
        let li = match self.leaves.iter().position(|l| l.hash >= e.hashval) {
            Some(li) => li,
            None => {
                let li = self.leaves.len() - 1;
                self.leaves[li].hash = e.hashval;
                li
            }
        };
        self.load_leaf(tx, li)?;
        let ents = self.leaves[li].ents_mut();
        let at = ents.partition_point(|x| x.hashval <= e.hashval);
        ents.insert(at, e);
        Ok(())
    }

    /// Allocate one directory block for fork block `dablk` and map it.
    pub fn alloc_block(&mut self, tx: &mut dyn MetaTx, dablk: u64) -> Result<Daddr> {
        let fsbs = self.geo.fsbs();
        let g = tx.geo();
        let (agno, near) = match self.map.target_near(dablk) {
            Some(t) if g.fsb_extent_valid(FsBlock(t), 1) => {
                (g.fsb_agno(FsBlock(t)), Some(g.fsb_agbno(FsBlock(t))))
            }
            _ => {
                let agno = g.ino_agno(self.owner);
                (agno, Some(g.agino_agbno(g.ino_agino(self.owner))))
            }
        };
        let req = AllocReq {
            agno: AgNumber(agno.0),
            near,
            minlen: fsbs,
            maxlen: fsbs,
            align: 1,
            any_ag: true,
            meta: true,
        };
        let ext = alloc_extent(tx, &req)?;
        if ext.len != fsbs {
            return Err(Error::Invalid(format!(
                "allocator gave {} blocks for a {fsbs}-block directory block",
                ext.len
            )));
        }
        // The reverse mapping follows from the map change when the fork is
        // stored (`fork::store` maps the difference).
        let fsb = tx.geo().agb_to_fsb(ext.agno, ext.agbno);
        self.map.insert(Extent {
            off: FileBlock(dablk),
            start: fsb.0,
            len: fsbs as u64,
            unwritten: false,
        });
        self.delta += fsbs as i64;
        Ok(tx.geo().fsb_to_daddr(fsb))
    }

    /// Unmap and free (deferred) the directory block at fork block `dablk`;
    /// the caller cancels its buffer.
    pub fn free_block(&mut self, tx: &mut dyn MetaTx, dablk: u64) -> Result<()> {
        let fsbs = self.geo.fsbs() as u64;
        for (start, len) in self.map.remove_range(dablk, dablk + fsbs) {
            let g = tx.geo();
            let (agno, agbno) = (g.fsb_agno(FsBlock(start)), g.fsb_agbno(FsBlock(start)));
            // Unmapped from the rmapbt by `fork::store` (the map change).
            tx.defer_free(agno, agbno, len as u32)?;
            self.delta -= len as i64;
        }
        Ok(())
    }

    /// Write the data blocks touched (freeing the emptied ones), then the
    /// fork map, size and block count.
    pub(super) fn commit_data_and_fork(&mut self, tx: &mut dyn MetaTx) -> Result<()> {
        let dbs: Vec<u64> = self.data.keys().copied().collect();
        for db in dbs {
            let d = self.data.get(&db).unwrap();
            if d.freed {
                let b = d.buf;
                if let Some(b) = b {
                    tx.stale_buf(b);
                }
                self.free_block(tx, self.geo.db_to_dablk(db))?;
                continue;
            }
            if !d.dirty {
                continue;
            }
            write_buf(tx, d.buf, d.rekind, d.daddr, BufKind::DirData, &d.bytes)?;
        }
        if self.map != self.old_map || self.delta != 0 {
            fork::store(
                tx,
                self.dp,
                WhichFork::Data,
                &self.old_map,
                &self.map,
                self.delta,
            )?;
            self.old_map = self.map.clone();
            self.delta = 0;
        }
        let last = self
            .bests
            .iter()
            .rposition(|&b| b != NULL_DATAOFF)
            .unwrap_or(0);
        di::set_size(
            tx.inode_mut(self.dp),
            (last as u64 + 1) * self.geo.blksize as u64,
        );
        self.save(tx);
        Ok(())
    }

    /// Keep the index as this operation leaves it in core for the next
    /// ones (node form; see [`super::skel`]), or drop what was kept.
    fn save(&mut self, tx: &mut dyn MetaTx) {
        if self.leaf_form {
            tx.set_fork_cache(self.dp, None);
            return;
        }
        let fp = fingerprint(tx.inode(self.dp));
        let s = Arc::make_mut(&mut self.base);
        s.map.clone_from(&self.map);
        s.bests.clone_from(&self.bests);
        s.fp = fp;
        tx.set_fork_cache(self.dp, Some(self.base.clone()));
    }
}

/// Write `bytes` as the block at `daddr`: through its buffer when it holds
/// the same kind (logging the bytes that changed), else as a new buffer of
/// `kind`, logged whole.
pub(super) fn write_buf(
    tx: &mut dyn MetaTx,
    buf: Option<BufId>,
    rekind: bool,
    daddr: Daddr,
    kind: BufKind,
    bytes: &[u8],
) -> Result<()> {
    match buf {
        Some(b) if !rekind => super::store_block(tx, b, bytes),
        _ => {
            let b = tx.new_buf(daddr, bytes.len(), kind)?;
            tx.buf_mut(b).copy_from_slice(bytes);
            tx.log_buf(b, 0..bytes.len());
        }
    }
    Ok(())
}

/// The live entries of leafn buffer `b`: read in place when the block
/// passed the decoder before (the buffer's verified mark), else decoded
/// and checked whole, and the buffer marked (what this transaction
/// writes back into it is rxfs's own encoding).
fn leaf_entries(
    tx: &mut dyn MetaTx,
    b: BufId,
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
) -> Result<Vec<LeafEntry>> {
    if tx.buf_verified(b, BufKind::DirLeafN) {
        if let Some(v) = LeafView::open(tx.buf(b), LEAFN_MAGIC) {
            return Ok(v.live());
        }
    }
    let leaf = decode_leaf_as(tx.buf(b), LEAFN_MAGIC, daddr, owner, uuid, Sum::InCore)?;
    tx.set_buf_verified(b, BufKind::DirLeafN);
    Ok(leaf.entries.into_iter().filter(|e| !e.is_stale()).collect())
}
