//! Operations on leaf and node directories ([`BigDir`]), and the
//! conversions block -> leaf (a full single block, on add) and leaf ->
//! block (on remove, when data block 0 alone remains and can take the hash
//! index back), as the kernel does them.

use super::big::{corrupt, BigDir, DataBuf, LeafBlk};
use super::block::BlockState;
use super::data::{block_to_data, data_add, data_fits_block, data_new, data_remove, data_to_block};
use super::index::load_big;
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::format::da::hashname;
use crate::format::dinode_edit as di;
use crate::format::dir_leaf::{LeafEntry, NULL_DATAOFF};
use crate::types::Ino;
use crate::xact::{BufId, InodeId, MetaTx};

/// Load `dp` (leaf or node form).
pub fn load(tx: &mut dyn MetaTx, dp: InodeId) -> Result<BigDir> {
    load_big(tx, dp)
}

/// Plan the addition on the model (no I/O but reads): the data block and
/// slot it goes to (`None`: a new data block at `db`).
fn pick_block(d: &BigDir, len: usize) -> (u64, bool) {
    if let Some(db) = d
        .bests
        .iter()
        .position(|&b| b != NULL_DATAOFF && b as usize >= len)
    {
        return (db as u64, true);
    }
    let hole = d.bests.iter().position(|&b| b == NULL_DATAOFF);
    (hole.unwrap_or(d.bests.len()) as u64, false)
}

/// Add `name -> ino` to the leaf/node directory `d` and commit it.
pub fn add(tx: &mut dyn MetaTx, d: &mut BigDir, name: &[u8], ino: Ino, ftype: u8) -> Result<()> {
    if d.find(tx, name)?.is_some() {
        return Err(Error::Exists);
    }
    let geo = d.geo;
    let len = geo.data_entsize(name.len());
    let (db, exists) = pick_block(d, len);
    if !exists {
        if db >= geo.max_data_blocks() {
            return Err(Error::NoSpace);
        }
        let daddr = d.alloc_block(tx, geo.db_to_dablk(db))?;
        let (bytes, st) = data_new(&geo, daddr, d.owner, &d.uuid);
        d.data.insert(
            db,
            DataBuf {
                daddr,
                bytes,
                st,
                buf: None,
                rekind: true,
                dirty: true,
                freed: false,
                entries_ok: true,
            },
        );
        if d.bests.len() <= db as usize {
            d.bests.resize(db as usize + 1, NULL_DATAOFF);
        }
        d.bests[db as usize] = (geo.blksize as usize - crate::format::dir::DIR3_HDR_SIZE) as u16;
    }
    let blk = d.data_block(tx, db)?;
    let off = data_add(
        &geo,
        &mut blk.bytes,
        &mut blk.st,
        (name, ino, ftype),
        blk.entries_ok,
    );
    blk.dirty = true;
    let best = blk.st.bf[0].1 as u16;
    d.bests[db as usize] = best;
    d.insert_leaf(
        tx,
        LeafEntry {
            hashval: hashname(name),
            address: geo.dataptr(db, off) as u32,
        },
    )?;
    d.commit(tx)
}

/// Remove `name`; returns the inode it named. Converts back to a single
/// block when that fits.
pub fn remove(tx: &mut dyn MetaTx, d: &mut BigDir, name: &[u8]) -> Result<Ino> {
    let (li, ei, db, off, ino) = d.find(tx, name)?.ok_or(Error::NotFound)?;
    let geo = d.geo;
    let owner = d.owner;
    let blk = d.data_block_full(tx, db)?;
    data_remove(&geo, &mut blk.bytes, &mut blk.st, off)
        .ok_or_else(|| corrupt(owner, "entry vanished"))?;
    blk.dirty = true;
    let empty = blk.st.entries.is_empty();
    let best = blk.st.bf[0].1 as u16;
    if empty && db != 0 {
        blk.freed = true;
        d.bests[db as usize] = NULL_DATAOFF;
        let last = d
            .bests
            .iter()
            .rposition(|&b| b != NULL_DATAOFF)
            .unwrap_or(0);
        d.bests.truncate(last + 1);
    } else {
        d.bests[db as usize] = best;
    }
    d.leaves[li].ents_mut().remove(ei);
    // Back to a single block?
    if d.bests.len() == 1 {
        let count = d.count_all(tx)?;
        let blk0 = d.data_block_full(tx, 0)?;
        if data_fits_block(&blk0.st, count) {
            to_block(tx, d)?;
            return Ok(ino);
        }
    }
    d.commit(tx)?;
    Ok(ino)
}

/// Leaf/node -> block: data block 0 takes the hash index; every index
/// block is freed.
fn to_block(tx: &mut dyn MetaTx, d: &mut BigDir) -> Result<()> {
    d.load_all_leaves(tx)?;
    let mut leaf: Vec<LeafEntry> = d
        .leaves
        .drain(..)
        .flat_map(|l| l.ents.unwrap_or_default())
        .collect();
    leaf.sort_by_key(|e| e.hashval);
    d.drop_index(tx)?;
    let blk0 = d.data.get_mut(&0).unwrap();
    data_to_block(&mut blk0.bytes, &mut blk0.st, leaf);
    let (daddr, bytes) = (blk0.daddr, std::mem::take(&mut blk0.bytes));
    d.data.remove(&0);
    super::big::write_buf(tx, None, true, daddr, BufKind::DirBlock, &bytes)?;
    // Data blocks other than 0 emptied by this removal.
    d.commit_data_and_fork(tx)?;
    di::set_size(tx.inode_mut(d.dp), d.geo.blksize as u64);
    // A block directory now: nothing of the index is kept.
    tx.set_fork_cache(d.dp, None);
    Ok(())
}

/// Block -> leaf: the full single block `st` in buffer `buf` becomes data
/// block 0 of a leaf directory; then `name` is added in that form.
pub fn from_block(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    buf: BufId,
    st: &BlockState,
    name: &[u8],
    ino: Ino,
    ftype: u8,
) -> Result<()> {
    let geo = super::dir_geo(tx);
    let owner = Ino(di::ino(tx.inode(dp)));
    let uuid = tx.sb().metadata_uuid();
    let (map, _) = crate::bmap::fork::load(tx, dp, crate::types::WhichFork::Data)?;
    let daddr = crate::types::Daddr(crate::format::be64(tx.buf(buf), 8));
    let mut bytes = tx.buf(buf).to_vec();
    let mut st = st.clone();
    let ents = block_to_data(&mut bytes, &mut st);
    let best = st.bf[0].1 as u16;
    let mut data = std::collections::BTreeMap::new();
    data.insert(
        0,
        DataBuf {
            daddr,
            bytes,
            st,
            buf: Some(buf),
            rekind: true,
            dirty: true,
            freed: false,
            entries_ok: true,
        },
    );
    let map_base = map.clone();
    let mut d = BigDir {
        geo,
        dp,
        owner,
        uuid,
        old_map: map.clone(),
        map,
        leaf_form: true,
        leaves: vec![LeafBlk::loaded(geo.leaf_dablk(), ents)],
        bests: vec![best],
        bufs: Default::default(),
        base: std::sync::Arc::new(super::skel::DirSkel::empty(map_base)),
        data,
        delta: 0,
    };
    add(tx, &mut d, name, ino, ftype)
}

/// Point `name` at `ino` (file type `ftype`); returns the old inode.
pub fn replace(
    tx: &mut dyn MetaTx,
    d: &mut BigDir,
    name: &[u8],
    ino: Ino,
    ftype: u8,
) -> Result<Ino> {
    let (_, _, db, off, old) = d.find(tx, name)?.ok_or(Error::NotFound)?;
    let geo = d.geo;
    let blk = d.data_block_full(tx, db)?;
    crate::format::put_be64(&mut blk.bytes, off, ino.0);
    let i = blk
        .st
        .entries
        .binary_search_by_key(&off, |e| e.off)
        .unwrap();
    blk.st.entries[i].ino = ino;
    if geo.ftype {
        blk.bytes[off + 9 + name.len()] = ftype;
        blk.st.entries[i].ftype = ftype;
    }
    blk.dirty = true;
    d.commit_data_and_fork(tx)?;
    Ok(old)
}
