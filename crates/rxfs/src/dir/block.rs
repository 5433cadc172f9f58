//! Single-block (XDB3) directory edits, pure: on the bytes of the block,
//! no I/O. The caller logs the chunks that changed ([`changed_chunks`]).
//!
//! ```text
//!  0      64            (slots, 8-aligned)                 leaf_start    n-8   n
//!  | hdr  | "." | ".." | entry | unused | entry ... unused | leaf[count] | tail |
//!  hdr: magic crc blkno lsn uuid owner bestfree[3] pad   tail: count stale
//!  leaf_start = n - 8 - 8 * count
//! ```
//! (See [`crate::format::dir_data`] for slot layouts.)
//!
//! The editor decodes the block into [`BlockState`] (free slots in offset
//! order, leaf entries, stale count), changes that model, then writes back
//! only the structural bytes: the headers and tags of every unused slot,
//! the leaf entries and tail, bestfree, and the bytes of a new entry. Bytes
//! inside unused slots are left as they were (the kernel does the same).
//!
//! Placement follows the kernel so that images stay alike:
//! - add without stale leaf entries: the leaf grows by one entry at its
//!   front, taken from the unused slot just before it (which must exist);
//!   the entry goes at the start of the largest unused slot (the second
//!   largest when the largest is that end slot and cannot hold both);
//! - add with stale leaf entries: the entry goes into the largest unused
//!   slot and reuses the nearest stale leaf entry; when the largest slot is
//!   too small, all stale entries but one are squeezed out of the leaf and
//!   the room they leave (merged with the slot before the leaf) is used;
//! - remove: the entry becomes unused (merged with unused neighbours) and
//!   its leaf entry goes stale (address 0, `stale` + 1).
//! - otherwise the directory needs the leaf form: [`Error::NotSupported`],
//!   with the block unchanged.
//!
//! The bestfree table is kept the way the kernel keeps it, incrementally
//! (a slot that grows or shrinks is taken out and put back in; a new entry
//! goes before the first strictly shorter one, so among equal lengths the
//! older entry stays first), with a full rescan in offset order whenever
//! the kernel would rescan; the new-entry leaf slot reuses the stale entry
//! the kernel would pick. Together with the placement rules this makes our
//! blocks byte-identical to the kernel's for the same operations
//! (`tests/dirop_parity_kernel.rs`).
//!
//! Invariants after every edit (checked by the read-path decoder in the
//! tests): slots tile `[64, leaf_start)`, no two unused slots adjacent,
//! bestfree = three longest unused slots (longest first), leaf sorted by
//! hash, `stale` = number of address-0 entries.

use std::ops::Range;

use crate::error::{Error, Location, Result};
use crate::format::crc::Sum;
use crate::format::da::hashname;
use crate::format::dir::{DirGeo, DATA_ALIGN, DIR3_HDR_SIZE};
use crate::format::dir_data::{DataBlock, BLOCK_MAGIC, BLOCK_TAIL_SIZE, FREETAG};
use crate::format::dir_leaf::{LeafEntry, LEAF_ENTRY_SIZE, NULL_DATAPTR};
use crate::format::dir_sf::{SfDir, SfEntry};
use crate::format::Uuid;
use crate::types::{Daddr, Ino};

const WHAT: &str = "directory block";
const BESTFREE_OFF: usize = 48;
/// File type byte of a directory.
pub const FT_DIR: u8 = 2;

/// Error returned when an addition needs the leaf form.
pub fn need_leaf() -> Error {
    Error::NotSupported(
        "a block directory too full for this entry (converted to leaf form by the caller)".into(),
    )
}

/// One live entry, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEntry {
    pub off: usize,
    pub name: Vec<u8>,
    pub ino: Ino,
    pub ftype: u8,
}

/// The decoded structure of a block directory (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockState {
    /// Block size in bytes.
    pub n: usize,
    /// Unused slots `(offset, length)`, in offset order.
    pub free: Vec<(usize, usize)>,
    /// The bestfree table `(offset, length)` as it is (or will be) on disk.
    pub bf: [(usize, usize); 3],
    /// Live entries in offset order ("." and ".." included).
    pub entries: Vec<BlockEntry>,
    pub leaf: Vec<LeafEntry>,
    pub stale: usize,
    /// Bytes of the tail after the leaf entries: 8 for an XDB3 block, 0 for
    /// an XDD3 data block of a leaf/node directory (no leaf, no tail).
    pub tail: usize,
}

/// A block's live entries and its unused slots `(offset, length)`, both
/// in offset order.
pub(super) type Slots = (Vec<BlockEntry>, Vec<(usize, usize)>);

/// Walk the slots of a verified block: its unused slots and, with
/// `names`, its live entries (else none: no allocation per entry).
pub(super) fn slots_of(blk: &DataBlock<'_>, geo: &DirGeo, names: bool) -> Result<Slots> {
    let mut entries = Vec::new();
    let mut free = Vec::new();
    let mut at = DIR3_HDR_SIZE;
    // The walk checks the tiling: the gaps between entries are single
    // unused slots.
    blk.walk(0, |e| {
        if e.off > at {
            free.push((at, e.off - at));
        }
        at = e.off + geo.data_entsize(e.name.len());
        if names {
            entries.push(BlockEntry {
                off: e.off,
                name: e.name.to_vec(),
                ino: Ino(e.ino),
                ftype: e.ftype,
            });
        }
        true
    })?;
    if blk.end() > at {
        free.push((at, blk.end() - at));
    }
    Ok((entries, free))
}

impl BlockState {
    /// Start of the leaf entries (end of the slots).
    pub fn leaf_start(&self) -> usize {
        self.n - self.tail - self.leaf.len() * LEAF_ENTRY_SIZE
    }

    /// Verify and decode `buf`, the block of directory `owner` at `daddr`.
    pub fn decode(buf: &[u8], geo: &DirGeo, daddr: Daddr, owner: Ino, uuid: &Uuid) -> Result<Self> {
        Self::decode_as(buf, geo, daddr, owner, uuid, Sum::Verify)
    }

    /// [`BlockState::decode`], the CRC checked as `sum` says.
    pub fn decode_as(
        buf: &[u8],
        geo: &DirGeo,
        daddr: Daddr,
        owner: Ino,
        uuid: &Uuid,
        sum: Sum,
    ) -> Result<Self> {
        let blk = DataBlock::block_as(buf, geo, daddr, owner, uuid, sum)?;
        let (entries, free) = slots_of(&blk, geo, true)?;
        let stale = blk.leaf.iter().filter(|l| l.is_stale()).count();
        let bf = blk.bestfree.map(|(o, l)| (o as usize, l as usize));
        let st = BlockState {
            n: buf.len(),
            free,
            bf,
            entries,
            leaf: blk.leaf.clone(),
            stale,
            tail: BLOCK_TAIL_SIZE,
        };
        st.check_leaf(geo, owner)?;
        Ok(st)
    }

    /// Every live leaf entry points at a live entry with that hash, one
    /// leaf entry per data entry.
    fn check_leaf(&self, geo: &DirGeo, owner: Ino) -> Result<()> {
        let at = Location::Ino(owner.0);
        let mut seen = vec![false; self.entries.len()];
        for l in self.leaf.iter().filter(|l| !l.is_stale()) {
            let (db, off) = geo.dataptr_split(l.address as u64);
            let i = self.entries.binary_search_by_key(&off, |e| e.off);
            match i {
                Ok(i) if db == 0 && !seen[i] && hashname(&self.entries[i].name) == l.hashval => {
                    seen[i] = true
                }
                _ => {
                    return Err(Error::corrupt(
                        WHAT,
                        at,
                        format!("leaf entry {:#x}/{:#x} is wrong", l.hashval, l.address),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Index in `entries` of `name`, through the hash index.
    pub fn find(&self, geo: &DirGeo, name: &[u8]) -> Option<(usize, usize)> {
        let hash = hashname(name);
        let r = crate::format::dir_leaf::hash_range(&self.leaf, hash);
        for li in r {
            let l = self.leaf[li];
            if l.is_stale() {
                continue;
            }
            let (_, off) = geo.dataptr_split(l.address as u64);
            if let Ok(i) = self.entries.binary_search_by_key(&off, |e| e.off) {
                if self.entries[i].name == name {
                    return Some((li, i));
                }
            }
        }
        None
    }

    /// Entries other than "." and "..".
    pub fn user_entries(&self) -> impl Iterator<Item = &BlockEntry> {
        self.entries
            .iter()
            .filter(|e| e.name != b"." && e.name != b"..")
    }

    /// Index in the bestfree table of the unused slot `(off, len)`
    /// (looked up by offset; a slot shorter than the third entry is not
    /// there).
    fn bf_find(&self, off: usize, len: usize) -> Option<usize> {
        if len < self.bf[2].1 {
            return None;
        }
        for (i, &(o, _)) in self.bf.iter().enumerate() {
            if o == 0 {
                return None;
            }
            if o == off {
                return Some(i);
            }
        }
        None
    }

    /// Drop entry `i` of the bestfree table, moving the later ones up.
    fn bf_remove(&mut self, i: usize) {
        for j in i..2 {
            self.bf[j] = self.bf[j + 1];
        }
        self.bf[2] = (0, 0);
    }

    /// Insert a slot into the bestfree table: before the first entry it is
    /// strictly longer than (so ties keep the older entry first); returns
    /// where it went.
    fn bf_insert(&mut self, off: usize, len: usize) -> Option<usize> {
        let i = self.bf.iter().position(|&(_, l)| len > l)?;
        for j in (i + 1..3).rev() {
            self.bf[j] = self.bf[j - 1];
        }
        self.bf[i] = (off, len);
        Some(i)
    }

    /// Rebuild the bestfree table from all unused slots in offset order.
    pub(super) fn bf_scan(&mut self) {
        self.bf = [(0, 0); 3];
        for (o, l) in self.free.clone() {
            self.bf_insert(o, l);
        }
    }

    /// Take `[off, off + len)` out of the unused slot that holds it,
    /// keeping the bestfree table as the kernel does (incrementally while
    /// it can tell the result, else by a rescan).
    pub(super) fn use_free(&mut self, off: usize, len: usize) {
        let i = self
            .free
            .iter()
            .position(|&(o, l)| o <= off && off + len <= o + l)
            .expect("use_free outside an unused slot");
        let (o, l) = self.free[i];
        let dfp = self.bf_find(o, l);
        let front = o == off;
        let back = o + l == off + len;
        let needscan = match (front, back) {
            (true, true) => {
                self.free.remove(i);
                match dfp {
                    Some(d) if self.bf[2].1 == 0 => {
                        self.bf_remove(d);
                        false
                    }
                    Some(_) => true,
                    None => false,
                }
            }
            (true, false) | (false, true) => {
                let rest = if front {
                    (off + len, l - len)
                } else {
                    (o, off - o)
                };
                self.free[i] = rest;
                match dfp {
                    Some(d) => {
                        self.bf_remove(d);
                        self.bf_insert(rest.0, rest.1) == Some(2)
                    }
                    None => false,
                }
            }
            (false, false) => {
                let a = (o, off - o);
                let b = (off + len, o + l - off - len);
                self.free[i] = a;
                self.free.insert(i + 1, b);
                match dfp {
                    Some(d) if self.bf[2].1 == 0 => {
                        self.bf_remove(d);
                        self.bf_insert(a.0, a.1);
                        self.bf_insert(b.0, b.1);
                        false
                    }
                    Some(_) => true,
                    None => false,
                }
            }
        };
        if needscan {
            self.bf_scan();
        }
    }

    /// Make `[off, off + len)` unused, merging with unused neighbours,
    /// keeping the bestfree table as the kernel does.
    pub(super) fn make_free(&mut self, off: usize, len: usize) {
        let i = self.free.partition_point(|&(o, _)| o < off);
        let prev =
            (i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == off).then(|| self.free[i - 1]);
        let post = (i < self.free.len() && self.free[i].0 == off + len).then(|| self.free[i]);
        let needscan = match (prev, post) {
            (Some(p), Some(q)) => {
                let (d1, d2) = (self.bf_find(p.0, p.1), self.bf_find(q.0, q.1));
                let merged = (p.0, p.1 + len + q.1);
                self.free.splice(i - 1..i + 1, [merged]);
                if self.bf[2].1 != 0 || d1.is_none() || d2.is_none() {
                    true
                } else {
                    // Only these two are in the table: replace them.
                    self.bf = [(0, 0); 3];
                    self.bf_insert(merged.0, merged.1);
                    false
                }
            }
            (Some(p), None) => {
                let d = self.bf_find(p.0, p.1);
                let merged = (p.0, p.1 + len);
                self.free[i - 1] = merged;
                match d {
                    Some(d) => {
                        self.bf_remove(d);
                        self.bf_insert(merged.0, merged.1);
                        false
                    }
                    None => merged.1 > self.bf[2].1,
                }
            }
            (None, Some(q)) => {
                let d = self.bf_find(q.0, q.1);
                let merged = (off, len + q.1);
                self.free[i] = merged;
                match d {
                    Some(d) => {
                        self.bf_remove(d);
                        self.bf_insert(merged.0, merged.1);
                        false
                    }
                    None => merged.1 > self.bf[2].1,
                }
            }
            (None, None) => {
                self.free.insert(i, (off, len));
                self.bf_insert(off, len);
                false
            }
        };
        if needscan {
            self.bf_scan();
        }
    }

    /// The unused slot ending right at the leaf, if any.
    pub(super) fn end_free(&self) -> Option<(usize, usize)> {
        self.free
            .last()
            .copied()
            .filter(|&(o, l)| o + l == self.leaf_start())
    }

    /// Write the structure back into `buf`: unused slot headers and tags,
    /// leaf, tail, bestfree. Entries are written by their creators.
    pub(super) fn write(&self, buf: &mut [u8]) {
        for &(o, l) in &self.free {
            buf[o..o + 2].copy_from_slice(&FREETAG.to_be_bytes());
            buf[o + 2..o + 4].copy_from_slice(&(l as u16).to_be_bytes());
            buf[o + l - 2..o + l].copy_from_slice(&(o as u16).to_be_bytes());
        }
        let ls = self.leaf_start();
        for (i, l) in self.leaf.iter().enumerate() {
            let p = ls + i * LEAF_ENTRY_SIZE;
            buf[p..p + 4].copy_from_slice(&l.hashval.to_be_bytes());
            buf[p + 4..p + 8].copy_from_slice(&l.address.to_be_bytes());
        }
        if self.tail == 0 {
            self.write_bestfree(buf);
            return;
        }
        let t = self.n - BLOCK_TAIL_SIZE;
        buf[t..t + 4].copy_from_slice(&(self.leaf.len() as u32).to_be_bytes());
        buf[t + 4..t + 8].copy_from_slice(&(self.stale as u32).to_be_bytes());
        self.write_bestfree(buf);
    }

    fn write_bestfree(&self, buf: &mut [u8]) {
        for (i, (o, l)) in self.bf.iter().enumerate() {
            let p = BESTFREE_OFF + i * 4;
            buf[p..p + 2].copy_from_slice(&(*o as u16).to_be_bytes());
            buf[p + 2..p + 4].copy_from_slice(&(*l as u16).to_be_bytes());
        }
    }
}

/// Write a data entry at `off`.
pub(super) fn put_entry(
    geo: &DirGeo,
    buf: &mut [u8],
    off: usize,
    name: &[u8],
    ino: Ino,
    ftype: u8,
) {
    let size = geo.data_entsize(name.len());
    buf[off..off + 8].copy_from_slice(&ino.0.to_be_bytes());
    buf[off + 8] = name.len() as u8;
    buf[off + 9..off + 9 + name.len()].copy_from_slice(name);
    let mut p = off + 9 + name.len();
    if geo.ftype {
        buf[p] = ftype;
        p += 1;
    }
    // The padding up to the tag keeps whatever bytes were there, as the
    // kernel leaves it.
    debug_assert!(p <= off + size - 2);
    buf[off + size - 2..off + size].copy_from_slice(&(off as u16).to_be_bytes());
}

/// Whether [`block_add`] of a name of `name_len` bytes would succeed on
/// the block decoded as `st` (the same decision, without making it).
pub fn block_can_add(geo: &DirGeo, st: &BlockState, name_len: usize) -> bool {
    let len = geo.data_entsize(name_len);
    let bf = st.bf;
    if st.stale == 0 {
        let Some(end) = st.end_free() else {
            return false;
        };
        if bf[0] == end {
            end.1 >= len + LEAF_ENTRY_SIZE || bf[1].1 >= len
        } else {
            bf[0].1 >= len
        }
    } else if bf[0].1 >= len {
        true
    } else {
        // All stale entries but one squeezed out, next to the end slot.
        st.end_free().map_or(0, |e| e.1) + (st.stale - 1) * LEAF_ENTRY_SIZE >= len
    }
}

/// Plan and make the addition of `name -> ino` to the block in `buf`
/// (decoded as `st`). On `Err` nothing was changed.
pub fn block_add(
    geo: &DirGeo,
    buf: &mut [u8],
    st: &mut BlockState,
    name: &[u8],
    ino: Ino,
    ftype: u8,
) -> Result<()> {
    let len = geo.data_entsize(name.len());
    let ftype = if geo.ftype { ftype } else { 0 };
    let bf = st.bf;
    let mut next = st.clone();
    let slot = if st.stale == 0 {
        // The leaf grows into the slot before it.
        let end = st.end_free().ok_or_else(need_leaf)?;
        let slot = if bf[0] == end {
            if end.1 >= len + LEAF_ENTRY_SIZE {
                end.0
            } else if bf[1].1 >= len {
                bf[1].0
            } else {
                return Err(need_leaf());
            }
        } else if bf[0].1 >= len {
            bf[0].0
        } else {
            return Err(need_leaf());
        };
        next.use_free(end.0 + end.1 - LEAF_ENTRY_SIZE, LEAF_ENTRY_SIZE);
        next.leaf.insert(
            0,
            LeafEntry {
                hashval: 0,
                address: NULL_DATAPTR,
            },
        );
        next.stale = 1;
        slot
    } else if bf[0].1 >= len {
        bf[0].0
    } else {
        // Squeeze all stale leaf entries but one out of the leaf.
        let old_start = st.leaf_start();
        let drop = st.stale - 1;
        next.leaf.retain(|l| !l.is_stale());
        // One stale entry stays (at the front: hash 0 keeps the order); the
        // new entry takes its place below.
        next.leaf.insert(
            0,
            LeafEntry {
                hashval: 0,
                address: NULL_DATAPTR,
            },
        );
        next.stale = 1;
        if drop > 0 {
            next.make_free(old_start, drop * LEAF_ENTRY_SIZE);
        }
        match next.end_free() {
            Some((o, l)) if l >= len => o,
            _ => return Err(need_leaf()),
        }
    };
    // The new leaf entry replaces the stale entry nearest to its place in
    // hash order (the entries in between shift by one).
    let hash = hashname(name);
    let pos = next.leaf.partition_point(|l| l.hashval < hash);
    let si = nearest_stale(&next.leaf, pos).expect("a stale leaf entry to reuse");
    next.leaf.remove(si);
    let pos = if si < pos { pos - 1 } else { pos };
    next.leaf.insert(
        pos,
        LeafEntry {
            hashval: hash,
            address: geo.dataptr(0, slot) as u32,
        },
    );
    next.stale -= 1;
    next.use_free(slot, len);
    let ei = next.entries.partition_point(|e| e.off < slot);
    next.entries.insert(
        ei,
        BlockEntry {
            off: slot,
            name: name.to_vec(),
            ino,
            ftype,
        },
    );
    put_entry(geo, buf, slot, name, ino, ftype);
    next.write(buf);
    *st = next;
    Ok(())
}

/// The stale entry the kernel reuses for a new entry going to position
/// `pos` (in front of the first entry with an equal or higher hash): the
/// nearest stale entry below `pos - 1` or above it, the lower one on a tie
/// of distances measured from `pos - 1`.
fn nearest_stale(leaf: &[LeafEntry], pos: usize) -> Option<usize> {
    let pos = pos.min(leaf.len());
    let below = leaf[..pos].iter().rposition(|l| l.is_stale());
    let above = leaf[pos..]
        .iter()
        .position(|l| l.is_stale())
        .map(|i| i + pos);
    let mid = pos as isize - 1;
    match (below, above) {
        (Some(b), Some(a)) => Some(if mid - b as isize <= a as isize - mid {
            b
        } else {
            a
        }),
        (b, a) => b.or(a),
    }
}

/// Remove `name` from the block; returns the inode it named, None when
/// absent (nothing changed then).
pub fn block_remove(geo: &DirGeo, buf: &mut [u8], st: &mut BlockState, name: &[u8]) -> Option<Ino> {
    let (li, ei) = st.find(geo, name)?;
    let e = st.entries.remove(ei);
    st.leaf[li].address = NULL_DATAPTR;
    st.stale += 1;
    st.make_free(e.off, geo.data_entsize(e.name.len()));
    st.write(buf);
    Some(e.ino)
}

/// Build the block of a directory converted from shortform: "." and ".."
/// first, every entry at its shortform offset, unused slots in between.
/// `Err(NotSupported)` when the entries do not fit the block with their
/// leaf entries; corruption for misaligned offsets.
pub fn block_from_sf(
    geo: &DirGeo,
    sf: &SfDir,
    dir: Ino,
    daddr: Daddr,
    uuid: &Uuid,
) -> Result<(Vec<u8>, BlockState)> {
    let n = geo.blksize as usize;
    let ft = |t: u8| if geo.ftype { t } else { 0 };
    let mut buf = vec![0u8; n];
    buf[0..4].copy_from_slice(&BLOCK_MAGIC.to_be_bytes());
    buf[8..16].copy_from_slice(&daddr.0.to_be_bytes());
    buf[24..40].copy_from_slice(uuid);
    buf[40..48].copy_from_slice(&dir.0.to_be_bytes());
    let mut entries = vec![
        BlockEntry {
            off: DIR3_HDR_SIZE,
            name: b".".to_vec(),
            ino: dir,
            ftype: ft(FT_DIR),
        },
        BlockEntry {
            off: DIR3_HDR_SIZE + geo.data_entsize(1),
            name: b"..".to_vec(),
            ino: sf.parent,
            ftype: ft(FT_DIR),
        },
    ];
    entries.extend(sf.entries.iter().map(|e: &SfEntry| BlockEntry {
        off: e.offset as usize,
        name: e.name.clone(),
        ino: e.ino,
        ftype: ft(e.ftype),
    }));
    let count = entries.len();
    let leaf_start = n
        .checked_sub(BLOCK_TAIL_SIZE + count * LEAF_ENTRY_SIZE)
        .filter(|&s| s > DIR3_HDR_SIZE)
        .ok_or_else(need_leaf)?;
    let mut free = Vec::new();
    let mut at = DIR3_HDR_SIZE;
    for e in &entries {
        if e.off % DATA_ALIGN != 0 || e.off < at {
            return Err(Error::corrupt(
                "shortform directory",
                Location::Ino(dir.0),
                format!("entry offset {:#x} misplaced", e.off),
            ));
        }
        let end = e.off + geo.data_entsize(e.name.len());
        if end > leaf_start {
            return Err(need_leaf());
        }
        if e.off > at {
            free.push((at, e.off - at));
        }
        put_entry(geo, &mut buf, e.off, &e.name, e.ino, e.ftype);
        at = end;
    }
    if leaf_start > at {
        free.push((at, leaf_start - at));
    }
    let mut leaf: Vec<LeafEntry> = entries
        .iter()
        .map(|e| LeafEntry {
            hashval: hashname(&e.name),
            address: geo.dataptr(0, e.off) as u32,
        })
        .collect();
    leaf.sort_by_key(|l| (l.hashval, l.address));
    let mut st = BlockState {
        n,
        free,
        bf: [(0, 0); 3],
        entries,
        leaf,
        stale: 0,
        tail: BLOCK_TAIL_SIZE,
    };
    // The kernel inserts the unused slots one by one in offset order.
    st.bf_scan();
    st.write(&mut buf);
    Ok((buf, st))
}

/// The shortform directory this block would become, when it fits a data
/// fork of `fork_size` bytes (the kernel converts back then).
pub fn block_to_sf(geo: &DirGeo, st: &BlockState, fork_size: usize) -> Option<SfDir> {
    let parent = st.entries.iter().find(|e| e.name == b"..")?.ino;
    let mut sf = super::sf::sf_empty(parent);
    sf.entries = st
        .user_entries()
        .map(|e| SfEntry {
            name: e.name.clone(),
            offset: e.off as u16,
            ftype: e.ftype,
            ino: e.ino,
        })
        .collect();
    sf.wide = super::sf::needs_wide(&sf);
    (super::sf::sf_size(geo, &sf) <= fork_size).then_some(sf)
}

/// Runs of `chunk`-byte chunks where `old` and `new` differ (adjacent
/// changed chunks merged, the last chunk may be short): what a log that
/// records whole chunks must copy. One comparison per chunk.
pub fn changed_chunks(old: &[u8], new: &[u8], chunk: usize) -> Vec<Range<usize>> {
    debug_assert_eq!(old.len(), new.len());
    let n = old.len().min(new.len());
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut at = 0;
    while at < n {
        let end = (at + chunk).min(n);
        if old[at..end] != new[at..end] {
            match out.last_mut() {
                Some(r) if r.end == at => r.end = end,
                _ => out.push(at..end),
            }
        }
        at = end;
    }
    out
}
