//! Shortform directory edits, pure: on a decoded [`SfDir`] (see
//! [`crate::format::dir_sf`] for the layout), no I/O.
//!
//! Offsets: every shortform entry carries the byte offset it will take in
//! the block-form data block, so readdir cookies survive the conversion.
//! A new entry gets, like the kernel gives it:
//! - the offset right after the last entry ("append") when the directory,
//!   converted to a block with the new entry appended, would still fit one
//!   directory block and no inode-number widening is needed;
//! - otherwise the first gap between entries (in offset order, starting at
//!   [`DATA_FIRST_OFFSET`]) large enough for its data-block entry, or the
//!   append position when there is none ("insert");
//! - and when even that block would overflow, or the fork is too small,
//!   the directory must become a block directory ([`SfAdd::ToBlock`]).
//!
//! Invariants kept: entries sorted by strictly increasing offset, each
//! offset 8-aligned and its data-block entry inside the block; 8-byte inode
//! numbers exactly when the parent or some entry needs more than 32 bits.

use crate::format::dir::{DirGeo, DATA_FIRST_OFFSET};
use crate::format::dir_data::BLOCK_TAIL_SIZE;
use crate::format::dir_leaf::LEAF_ENTRY_SIZE;
use crate::format::dir_sf::{SfDir, SfEntry, MAX_SHORT_INUM};
use crate::types::Ino;

/// Bytes of a shortform header.
pub fn sf_hdr_size(wide: bool) -> usize {
    2 + if wide { 8 } else { 4 }
}

/// Bytes of one shortform entry with a name of `namelen` bytes.
pub fn sf_entsize(geo: &DirGeo, wide: bool, namelen: usize) -> usize {
    3 + namelen + geo.ftype as usize + if wide { 8 } else { 4 }
}

/// Encoded size of a shortform directory.
pub fn sf_size(geo: &DirGeo, sf: &SfDir) -> usize {
    sf_hdr_size(sf.wide)
        + sf.entries
            .iter()
            .map(|e| sf_entsize(geo, sf.wide, e.name.len()))
            .sum::<usize>()
}

/// Whether some inode number of the directory needs 8 bytes.
pub fn needs_wide(sf: &SfDir) -> bool {
    sf.parent.0 > MAX_SHORT_INUM || sf.entries.iter().any(|e| e.ino.0 > MAX_SHORT_INUM)
}

/// An empty shortform directory whose parent is `parent`.
pub fn sf_empty(parent: Ino) -> SfDir {
    SfDir {
        parent,
        wide: parent.0 > MAX_SHORT_INUM,
        entries: Vec::new(),
    }
}

/// The outcome of planning an addition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SfAdd {
    /// The new shortform directory.
    Fits(SfDir),
    /// It does not fit: convert to a block directory, then add there.
    ToBlock,
}

/// Plan adding `name -> ino` to `sf` whose fork has `fork_size` bytes.
/// The caller has checked that the name is valid and absent.
pub fn sf_add(
    geo: &DirGeo,
    sf: &SfDir,
    fork_size: usize,
    name: &[u8],
    ino: Ino,
    ftype: u8,
) -> SfAdd {
    let widen = ino.0 > MAX_SHORT_INUM && !sf.wide;
    let new_wide = sf.wide || widen;
    let new_size = sf_size(geo, sf)
        + sf_entsize(geo, sf.wide, name.len())
        + if widen {
            // The parent, the old entries and the new one grow by 4 bytes.
            (sf.entries.len() + 2) * 4
        } else {
            0
        };
    if new_size > fork_size {
        return SfAdd::ToBlock;
    }
    let size = geo.data_entsize(name.len());
    // Find the first gap that fits and the end of the last entry.
    let mut end = DATA_FIRST_OFFSET;
    let mut hole: Option<(usize, usize)> = None; // (index, offset)
    for (i, e) in sf.entries.iter().enumerate() {
        if hole.is_none() && end + size <= e.offset as usize {
            hole = Some((i, end));
        }
        end = e.offset as usize + geo.data_entsize(e.name.len());
    }
    // Bytes a block directory would use without the new entry: the data
    // up to `end`, a leaf entry for each entry plus "." and ".." and the
    // new one, and the tail.
    let used = end + (sf.entries.len() + 3) * LEAF_ENTRY_SIZE + BLOCK_TAIL_SIZE;
    let blk = geo.blksize as usize;
    if used + if hole.is_some() { 0 } else { size } > blk {
        return SfAdd::ToBlock;
    }
    let append = !widen && used + size <= blk;
    let (index, offset) = match (append, hole) {
        (false, Some(h)) => h,
        _ => (sf.entries.len(), end),
    };
    let mut out = sf.clone();
    out.wide = new_wide;
    out.entries.insert(
        index,
        SfEntry {
            name: name.to_vec(),
            offset: offset as u16,
            ftype,
            ino,
        },
    );
    debug_assert_eq!(sf_size(geo, &out), new_size);
    SfAdd::Fits(out)
}

/// Remove `name`; returns the new directory and the inode it named, or
/// None when absent. Narrows the inode numbers when no 8-byte one is left.
pub fn sf_remove(sf: &SfDir, name: &[u8]) -> Option<(SfDir, Ino)> {
    let i = sf.entries.iter().position(|e| e.name == name)?;
    let mut out = sf.clone();
    let e = out.entries.remove(i);
    out.wide = needs_wide(&out);
    Some((out, e.ino))
}

/// Look `name` up ("." is the caller's; ".." is the parent).
pub fn sf_lookup(sf: &SfDir, name: &[u8]) -> Option<Ino> {
    if name == b".." {
        return Some(sf.parent);
    }
    sf.entries.iter().find(|e| e.name == name).map(|e| e.ino)
}
