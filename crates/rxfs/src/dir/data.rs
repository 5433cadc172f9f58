//! Data blocks (`XDD3`) of leaf and node directories, pure edits on their
//! bytes, reusing the slot and bestfree model of [`super::block`]
//! ([`BlockState`] with no leaf and no tail), plus the conversions between
//! the single block (`XDB3`) and data block 0 of a leaf directory.
//!
//! Invariants after every edit: slots tile `[64, n)`, no two unused slots
//! adjacent, bestfree = the three longest unused slots (kept as the kernel
//! keeps it), tags equal offsets.

use super::block::{put_entry, slots_of, BlockEntry, BlockState};
use crate::error::Result;
use crate::format::crc::Sum;
use crate::format::dir::{DirGeo, DIR3_HDR_SIZE};
use crate::format::dir_data::{DataBlock, BLOCK_MAGIC, BLOCK_TAIL_SIZE, DATA_MAGIC};
use crate::format::dir_leaf::{LeafEntry, LEAF_ENTRY_SIZE};
use crate::format::Uuid;
use crate::types::{Daddr, Ino};

/// Decode a verified-or-stamped data block: its unused slots, bestfree
/// table and, with `names`, its live entries. Without `names` the
/// entries are left empty (an edit that only adds needs the slots; see
/// [`super::big::DataBuf::entries_ok`]): no allocation per entry.
pub fn data_decode(
    buf: &[u8],
    geo: &DirGeo,
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    names: bool,
    sum: Sum,
) -> Result<BlockState> {
    let blk = DataBlock::data_as(buf, geo, daddr, owner, uuid, sum)?;
    walked_state(&blk, geo, names, buf.len())
}

/// The state of an opened block, every slot walked.
fn walked_state(blk: &DataBlock, geo: &DirGeo, names: bool, n: usize) -> Result<BlockState> {
    let (entries, free) = slots_of(blk, geo, names)?;
    Ok(BlockState {
        n,
        free,
        bf: blk.bestfree.map(|(o, l)| (o as usize, l as usize)),
        entries,
        leaf: Vec::new(),
        stale: 0,
        tail: 0,
    })
}

/// [`data_decode_tx`] of a trusted block with no names wanted, without
/// its fallback: None when the bestfree table cannot stand in for the walk
/// (tests compare it with the walk).
#[cfg(test)]
pub fn data_decode_trusted(
    buf: &[u8],
    geo: &DirGeo,
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
) -> Result<Option<BlockState>> {
    let blk = DataBlock::data_as(buf, geo, daddr, owner, uuid, Sum::InCore)?;
    Ok(state_from_bestfree(&blk, buf.len()))
}

/// The unused slots of an opened block from its bestfree table, for a
/// block that passed [`data_decode`] before and was changed only by the
/// edits of this module since (whose invariants keep bestfree the three
/// longest unused slots): when the table has an empty entry it lists
/// every unused slot, so they are taken from it without walking the
/// block. None when the table is full (a walk is needed).
fn state_from_bestfree(blk: &DataBlock, n: usize) -> Option<BlockState> {
    let bf = blk.bestfree.map(|(o, l)| (o as usize, l as usize));
    if bf[2].1 != 0 {
        return None;
    }
    let mut free: Vec<(usize, usize)> = bf.iter().copied().filter(|&(_, l)| l != 0).collect();
    free.sort_unstable();
    Some(BlockState {
        n,
        free,
        bf,
        entries: Vec::new(),
        leaf: Vec::new(),
        stale: 0,
        tail: 0,
    })
}

/// Decode a transaction's copy of a data block (CRC not checked: see
/// [`Sum::InCore`]), its header checked once: from the bestfree table
/// when `trusted` (the block passed the walk before) and no names are
/// wanted and the table allows it (`state_from_bestfree`), else walked.
pub fn data_decode_tx(
    buf: &[u8],
    geo: &DirGeo,
    daddr: Daddr,
    owner: Ino,
    uuid: &Uuid,
    names: bool,
    trusted: bool,
) -> Result<BlockState> {
    let blk = DataBlock::data_as(buf, geo, daddr, owner, uuid, Sum::InCore)?;
    if trusted && !names {
        if let Some(st) = state_from_bestfree(&blk, buf.len()) {
            return Ok(st);
        }
    }
    walked_state(&blk, geo, names, buf.len())
}

/// A new empty data block at `daddr`: one unused slot.
pub fn data_new(geo: &DirGeo, daddr: Daddr, owner: Ino, uuid: &Uuid) -> (Vec<u8>, BlockState) {
    let n = geo.blksize as usize;
    let mut buf = vec![0u8; n];
    buf[0..4].copy_from_slice(&DATA_MAGIC.to_be_bytes());
    buf[8..16].copy_from_slice(&daddr.0.to_be_bytes());
    buf[24..40].copy_from_slice(uuid);
    buf[40..48].copy_from_slice(&owner.0.to_be_bytes());
    let mut st = BlockState {
        n,
        free: vec![(DIR3_HDR_SIZE, n - DIR3_HDR_SIZE)],
        bf: [(0, 0); 3],
        entries: Vec::new(),
        leaf: Vec::new(),
        stale: 0,
        tail: 0,
    };
    st.bf_scan();
    st.write(&mut buf);
    (buf, st)
}

/// Add an entry at the start of the longest unused slot (the caller
/// checked it is long enough); returns its offset. `entries`: whether
/// `st.entries` holds the block's entries (then the new one joins them);
/// when not, they stay empty, to be decoded from `buf` when needed.
pub fn data_add(
    geo: &DirGeo,
    buf: &mut [u8],
    st: &mut BlockState,
    entry: (&[u8], Ino, u8),
    entries: bool,
) -> usize {
    let (name, ino, ftype) = entry;
    let len = geo.data_entsize(name.len());
    let ftype = if geo.ftype { ftype } else { 0 };
    let off = st.bf[0].0;
    debug_assert!(st.bf[0].1 >= len);
    st.use_free(off, len);
    if entries {
        let ei = st.entries.partition_point(|e| e.off < off);
        st.entries.insert(
            ei,
            BlockEntry {
                off,
                name: name.to_vec(),
                ino,
                ftype,
            },
        );
    }
    put_entry(geo, buf, off, name, ino, ftype);
    st.write(buf);
    off
}

/// Remove the entry at `off`; returns it (None when there is none).
pub fn data_remove(
    geo: &DirGeo,
    buf: &mut [u8],
    st: &mut BlockState,
    off: usize,
) -> Option<BlockEntry> {
    let i = st.entries.binary_search_by_key(&off, |e| e.off).ok()?;
    let e = st.entries.remove(i);
    st.make_free(e.off, geo.data_entsize(e.name.len()));
    st.write(buf);
    Some(e)
}

/// Turn a single directory block into data block 0 of a leaf directory:
/// the leaf entries and tail become unused space. Returns the live leaf
/// entries (stale ones dropped).
pub fn block_to_data(buf: &mut [u8], st: &mut BlockState) -> Vec<LeafEntry> {
    let ls = st.leaf_start();
    let live: Vec<LeafEntry> = st.leaf.iter().copied().filter(|l| !l.is_stale()).collect();
    st.leaf.clear();
    st.stale = 0;
    st.tail = 0;
    st.make_free(ls, st.n - ls);
    buf[0..4].copy_from_slice(&DATA_MAGIC.to_be_bytes());
    st.write(buf);
    live
}

/// Whether data block 0 can take back the leaf entries `leaf` as a single
/// block (an unused slot at its end long enough for them and the tail).
pub fn data_fits_block(st: &BlockState, nleaf: usize) -> bool {
    let need = nleaf * LEAF_ENTRY_SIZE + BLOCK_TAIL_SIZE;
    matches!(st.free.last(), Some(&(o, l)) if o + l == st.n && l >= need)
}

/// Turn data block 0 back into a single block holding `leaf` (sorted, no
/// stale entries); [`data_fits_block`] must hold.
pub fn data_to_block(buf: &mut [u8], st: &mut BlockState, leaf: Vec<LeafEntry>) {
    let need = leaf.len() * LEAF_ENTRY_SIZE + BLOCK_TAIL_SIZE;
    st.use_free(st.n - need, need);
    st.leaf = leaf;
    st.stale = 0;
    st.tail = BLOCK_TAIL_SIZE;
    buf[0..4].copy_from_slice(&BLOCK_MAGIC.to_be_bytes());
    st.write(buf);
}
