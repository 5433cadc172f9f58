//! Directories: lookup and iteration over every on-disk form (see
//! [`crate::format::dir`] for the forms and the address space).
//!
//! - The form is told by the data fork: local = shortform; an extent list
//!   ending right after directory block 0 = block form; anything else has
//!   data blocks plus a hash index at the leaf offset, whose first block's
//!   magic says leaf1 (leaf form), leafn (node form, one leaf) or DA node.
//!   Btree-format forks arrive flattened into extents, so they take the
//!   same road.
//! - readdir walks the data blocks in address order; it never needs the
//!   index. The cookie of an entry is its data pointer (byte offset in the
//!   data segment >> 3); an entry is returned when its cookie is >= the one
//!   asked for, so a walk resumes exactly where it stopped.
//! - lookup hashes the name, finds the run of index entries with that hash
//!   (walking DA nodes down to a leaf, then following `forw` while the run
//!   continues into the next leaf), and compares names in the data blocks
//!   those entries point at; collisions just make the run longer.
//!
//! Bounds: every block read from disk goes through a verifier; a block of
//! the read-write mount's buffer cache that passed its decoder before
//! (its verified mark, see [`ReadCtx::note_verified`]) skips the CRC and,
//! for leaves, the entry checks, and its leaf entries are searched in
//! place with their bounds checked again; loops run over blocks
//! that the extent list maps (so the disk cannot make them longer than the
//! directory really is); DA descents are capped at the maximum tree depth and
//! must go down one level per step; leaf sibling walks remember the blocks
//! they visited.

use std::collections::HashSet;

use crate::error::{Error, Location, Result};
use crate::format::bufkind::BufKind;
use crate::format::crc::Sum;
use crate::format::da::{self, hashname, DA3_NODE_MAGIC};
use crate::format::dir::{
    name_valid, DirGeo, DATA_FIRST_OFFSET, DOTDOT_COOKIE, DOT_COOKIE, LEAF_OFFSET_BYTES, MAXNAMELEN,
};
use crate::format::dir_data::{DataBlock, DataEntry};
use crate::format::dir_leaf::{
    decode_leaf, hash_range, LeafEntry, LeafView, LEAF1_MAGIC, LEAFN_MAGIC,
};
use crate::format::dir_sf::decode_sf;
use crate::inode::{Fork, ForkBlock, Inode, ReadCtx};
use crate::types::{FileBlock, FileType, ForkKind, Ino};

/// Entries read per hold of the directory's shared ilock (see
/// [`readdir`]).
pub const READDIR_BATCH: usize = 256;

/// One directory entry as readdir returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    /// From the entry's ftype byte (None on filesystems without ftype).
    pub ftype: Option<FileType>,
    /// The cookie to pass to `readdir` to continue after this entry.
    pub next_cookie: u64,
}

/// The shapes a directory's data fork can take.
enum Form<'a> {
    Short(&'a [u8]),
    Block,
    /// Data blocks plus a hash index (leaf or node form).
    Multi,
}

/// A data block kept between the entries of one lookup: (db, block).
type BlockCache = Option<(u64, ForkBlock)>;

/// How to check the CRC of `blk` as `kind`: not again when it passed that
/// kind's whole decoder (its CRC was checked when it was read from disk,
/// and rxfs stamps every block it changes at write-back).
fn sum_for(blk: &ForkBlock, kind: BufKind) -> Sum {
    if blk.trusted_as(kind) {
        Sum::InCore
    } else {
        Sum::Verify
    }
}

/// Directory geometry for the format decoders.
pub fn dir_geo(fs: &(impl ReadCtx + ?Sized)) -> DirGeo {
    DirGeo::new(fs.geo().blocklog, fs.geo().dirblklog, fs.sb().has_ftype())
}

/// Look `name` up in directory `dir`. `Err(NotFound)` when absent.
/// Under the directory's shared ilock (see `fs::read`).
pub fn lookup(fs: &(impl ReadCtx + ?Sized), dir: &Inode, name: &[u8]) -> Result<Ino> {
    let dir = fs.read_locked(dir)?;
    lookup_in(fs, &dir, name)
}

fn lookup_in(fs: &(impl ReadCtx + ?Sized), dir: &Inode, name: &[u8]) -> Result<Ino> {
    let form = dir_form(fs, dir)?;
    if name.len() > MAXNAMELEN {
        return Err(Error::NameTooLong);
    }
    if !name_valid(name) {
        return Err(Error::Invalid(format!(
            "bad file name {:?}",
            String::from_utf8_lossy(name)
        )));
    }
    if name == b"." {
        return Ok(dir.ino);
    }
    let ino = match form {
        Form::Short(fork) => {
            let sf = decode_sf(fork, &dir_geo(fs), dir.ino)?;
            if name == b".." {
                Some(sf.parent)
            } else {
                sf.entries.iter().find(|e| e.name == name).map(|e| e.ino)
            }
        }
        Form::Block => lookup_block(fs, dir, name)?,
        Form::Multi => lookup_multi(fs, dir, name)?,
    };
    let ino = ino.ok_or(Error::NotFound)?;
    check_entry_ino(fs, dir, ino)?;
    Ok(ino)
}

/// Iterate entries starting at `cookie` (0 = start, "." and ".." first).
/// `f` returns false to stop early.
///
/// On a read-write mount the entries are read in batches of
/// [`READDIR_BATCH`] under the directory's shared ilock, and `f` runs
/// between batches with no lock held (it may call back into the
/// filesystem); each batch resumes at its predecessor's last cookie,
/// as a user's next `getdents` would.
pub fn readdir(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    cookie: u64,
    f: &mut dyn FnMut(&DirEntry) -> bool,
) -> Result<()> {
    if !fs.reads_take_locks() {
        return readdir_in(fs, dir, cookie, f);
    }
    let mut cookie = cookie;
    loop {
        let mut batch: Vec<DirEntry> = Vec::new();
        {
            let dir = fs.read_locked(dir)?;
            readdir_in(fs, &dir, cookie, &mut |e| {
                batch.push(e.clone());
                batch.len() < READDIR_BATCH
            })?;
        }
        let full = batch.len() >= READDIR_BATCH;
        for e in &batch {
            if !f(e) {
                return Ok(());
            }
        }
        match batch.last() {
            Some(last) if full => cookie = last.next_cookie,
            _ => return Ok(()),
        }
    }
}

fn readdir_in(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    cookie: u64,
    f: &mut dyn FnMut(&DirEntry) -> bool,
) -> Result<()> {
    match dir_form(fs, dir)? {
        Form::Short(fork) => readdir_sf(fs, dir, fork, cookie, f),
        Form::Block => readdir_blocks(fs, dir, true, cookie, f),
        Form::Multi => readdir_blocks(fs, dir, false, cookie, f),
    }
}

fn dir_form<'a>(fs: &(impl ReadCtx + ?Sized), dir: &'a Inode) -> Result<Form<'a>> {
    if !dir.is_dir() {
        return Err(Error::NotDir);
    }
    let at = Location::Ino(dir.ino.0);
    match &dir.data {
        Fork::Local(b) => Ok(Form::Short(b)),
        Fork::Extents { list, .. } => {
            let dg = dir_geo(fs);
            let last = list
                .last()
                .ok_or_else(|| Error::corrupt("directory", at, "no blocks"))?;
            if last.end() == dg.fsbs() as u64 {
                if dir.core.size != dg.blksize as u64 {
                    return Err(Error::corrupt(
                        "directory",
                        at,
                        format!("block-form directory of size {}", dir.core.size),
                    ));
                }
                Ok(Form::Block)
            } else {
                Ok(Form::Multi)
            }
        }
        Fork::Dev(_) => Err(Error::corrupt("directory", at, "device fork")),
    }
}

/// Corruption unless `ino` may be an entry's target.
fn check_entry_ino(fs: &(impl ReadCtx + ?Sized), dir: &Inode, ino: Ino) -> Result<()> {
    if fs.geo().ino_valid(ino) {
        Ok(())
    } else {
        Err(Error::corrupt(
            "directory entry",
            Location::Ino(dir.ino.0),
            format!("inode number {} out of range", ino.0),
        ))
    }
}

fn make_entry(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    name: &[u8],
    ino: u64,
    ftype: u8,
    next: u64,
) -> Result<DirEntry> {
    let ino = Ino(ino);
    check_entry_ino(fs, dir, ino)?;
    Ok(DirEntry {
        name: name.to_vec(),
        ino,
        ftype: if fs.sb().has_ftype() {
            FileType::from_ftype(ftype)
        } else {
            None
        },
        next_cookie: next,
    })
}

fn readdir_sf(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    fork: &[u8],
    cookie: u64,
    f: &mut dyn FnMut(&DirEntry) -> bool,
) -> Result<()> {
    let dg = dir_geo(fs);
    let sf = decode_sf(fork, &dg, dir.ino)?;
    let dir_ft = FileType::Directory.to_ftype();
    let first = (DATA_FIRST_OFFSET >> 3) as u64;
    if cookie <= DOT_COOKIE
        && !f(&make_entry(
            fs,
            dir,
            b".",
            dir.ino.0,
            dir_ft,
            DOTDOT_COOKIE,
        )?)
    {
        return Ok(());
    }
    if cookie <= DOTDOT_COOKIE && !f(&make_entry(fs, dir, b"..", sf.parent.0, dir_ft, first)?) {
        return Ok(());
    }
    for e in &sf.entries {
        let pos = (e.offset >> 3) as u64;
        if pos < cookie {
            continue;
        }
        let next = (e.offset as u64 + dg.data_entsize(e.name.len()) as u64) >> 3;
        if !f(&make_entry(fs, dir, &e.name, e.ino.0, e.ftype, next)?) {
            return Ok(());
        }
    }
    Ok(())
}

/// Read directory block `db` of the data segment (None: a hole).
fn read_dir_data(fs: &(impl ReadCtx + ?Sized), dir: &Inode, db: u64) -> Result<Option<ForkBlock>> {
    let dg = dir_geo(fs);
    fs.read_fork_block(
        dir,
        ForkKind::Data,
        FileBlock(dg.db_to_dablk(db)),
        dg.fsbs(),
    )
}

/// Read and verify data block `db`: the XDB3 block of a block-form
/// directory, an XDD3 block otherwise. Returns None for a hole.
fn with_data_block<T>(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    db: u64,
    block_form: bool,
    f: impl FnOnce(&DataBlock) -> Result<T>,
) -> Result<Option<T>> {
    let dg = dir_geo(fs);
    let uuid = fs.sb().metadata_uuid();
    let Some(b) = read_dir_data(fs, dir, db)? else {
        return Ok(None);
    };
    let blk = if block_form {
        let sum = sum_for(&b, BufKind::DirBlock);
        DataBlock::block_as(&b.bytes, &dg, b.daddr, dir.ino, &uuid, sum)?
    } else {
        let sum = sum_for(&b, BufKind::DirData);
        DataBlock::data_as(&b.bytes, &dg, b.daddr, dir.ino, &uuid, sum)?
    };
    f(&blk).map(Some)
}

fn readdir_blocks(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    block_form: bool,
    cookie: u64,
    f: &mut dyn FnMut(&DirEntry) -> bool,
) -> Result<()> {
    let dg = dir_geo(fs);
    let end_byte = dir.core.size.min(LEAF_OFFSET_BYTES);
    if cookie >= end_byte >> 3 {
        return Ok(());
    }
    let end_db = end_byte.div_ceil(dg.blksize as u64);
    let (mut db, mut from) = dg.dataptr_split(cookie);
    let fsbs = dg.fsbs() as u64;
    while db < end_db {
        let (ext, run) = dir.data.map(FileBlock(dg.db_to_dablk(db)));
        if ext.is_none() {
            // Skip the hole; a directory block only partly mapped is
            // read anyway so that the fork reader reports it.
            let Some(next_fsb) = dg.db_to_dablk(db).checked_add(run) else {
                break;
            };
            let next = next_fsb / fsbs;
            if next > db {
                db = next;
                from = 0;
                continue;
            }
        }
        let mut stopped = false;
        let mut err = None;
        with_data_block(fs, dir, db, block_form, |blk| {
            blk.walk(from, |e: &DataEntry| {
                let next = dg.dataptr(db, e.off + e.size);
                match make_entry(fs, dir, e.name, e.ino, e.ftype, next) {
                    Ok(de) => stopped = !f(&de),
                    Err(e) => {
                        err = Some(e);
                        stopped = true;
                    }
                }
                !stopped
            })
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        if stopped {
            return Ok(());
        }
        db += 1;
        from = 0;
    }
    Ok(())
}

fn lookup_block(fs: &(impl ReadCtx + ?Sized), dir: &Inode, name: &[u8]) -> Result<Option<Ino>> {
    let dg = dir_geo(fs);
    let hash = hashname(name);
    let found = with_data_block(fs, dir, 0, true, |blk| {
        for i in hash_range(&blk.leaf, hash) {
            let le = blk.leaf[i];
            if le.is_stale() {
                continue;
            }
            let (db, off) = dg.dataptr_split(le.address as u64);
            if db != 0 {
                return Err(Error::corrupt(
                    "directory block",
                    Location::Ino(dir.ino.0),
                    format!("leaf address {:#x} outside the block", le.address),
                ));
            }
            let e = blk.entry_at(off)?;
            if e.name == name {
                return Ok(Some(Ino(e.ino)));
            }
        }
        Ok(None)
    })?;
    match found {
        Some(r) => Ok(r),
        None => Err(Error::corrupt(
            "directory",
            Location::Ino(dir.ino.0),
            "block-form directory without its block",
        )),
    }
}

/// Check the data entries that leaf entries `ents` point at for `name`.
/// `cache` keeps the last data block read.
fn match_leaf_entries(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    ents: &[LeafEntry],
    name: &[u8],
    cache: &mut BlockCache,
) -> Result<Option<Ino>> {
    let dg = dir_geo(fs);
    let at = Location::Ino(dir.ino.0);
    let uuid = fs.sb().metadata_uuid();
    let size_dbs = dir
        .core
        .size
        .min(LEAF_OFFSET_BYTES)
        .div_ceil(dg.blksize as u64);
    for le in ents.iter().filter(|e| !e.is_stale()) {
        let (db, off) = dg.dataptr_split(le.address as u64);
        if db >= size_dbs {
            return Err(Error::corrupt(
                "directory leaf",
                at,
                format!("address {:#x} past the data blocks", le.address),
            ));
        }
        if cache.as_ref().is_none_or(|c| c.0 != db) {
            let blk = read_dir_data(fs, dir, db)?.ok_or_else(|| {
                Error::corrupt(
                    "directory leaf",
                    at,
                    format!("address {:#x} points into a hole", le.address),
                )
            })?;
            *cache = Some((db, blk));
        }
        let Some((_, blk)) = cache.as_ref() else {
            unreachable!("the cache was just filled");
        };
        let sum = sum_for(blk, BufKind::DirData);
        let data = DataBlock::data_as(&blk.bytes, &dg, blk.daddr, dir.ino, &uuid, sum)?;
        let e = data.entry_at(off)?;
        if e.name == name {
            return Ok(Some(Ino(e.ino)));
        }
    }
    Ok(None)
}

/// Read a block of the leaf segment at fork block `dablk`.
fn read_leaf_seg(fs: &(impl ReadCtx + ?Sized), dir: &Inode, dablk: u64) -> Result<ForkBlock> {
    let dg = dir_geo(fs);
    let at = Location::Ino(dir.ino.0);
    if dablk < dg.leaf_dablk()
        || dablk >= dg.free_dablk()
        || !dablk.is_multiple_of(dg.fsbs() as u64)
    {
        return Err(Error::corrupt(
            "directory",
            at,
            format!("index block {dablk:#x} outside the leaf segment"),
        ));
    }
    fs.read_fork_block(dir, ForkKind::Data, FileBlock(dablk), dg.fsbs())?
        .ok_or_else(|| Error::corrupt("directory", at, format!("index block {dablk:#x} is a hole")))
}

/// Leaf blocks searched in place because they passed the decoder before
/// (for tests: the fast path is taken).
pub static LEAF_SEARCHES_IN_PLACE: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// What one leaf block holds of a hash's run of entries.
struct Run {
    ents: Vec<LeafEntry>,
    /// The block's last entry has the hash: the run may go on in `forw`.
    goes_on: bool,
    forw: u32,
}

/// The entries of `blk` (a leaf of magic `magic`, buffer kind `kind`)
/// whose hash is `hash`. A block that passed the decoder before is
/// searched in place; any other is decoded and checked whole, and the
/// filesystem told so.
fn leaf_run(
    fs: &(impl ReadCtx + ?Sized),
    dir: &Inode,
    blk: &ForkBlock,
    magic: u16,
    kind: BufKind,
    hash: u32,
) -> Result<Run> {
    if blk.trusted_as(kind) {
        if let Some(v) = LeafView::open(&blk.bytes, magic) {
            LEAF_SEARCHES_IN_PLACE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(Run {
                ents: v.hash_range(hash).map(|i| v.entry(i)).collect(),
                goes_on: !v.is_empty() && v.entry(v.len() - 1).hashval == hash,
                forw: v.forw(),
            });
        }
    }
    let uuid = fs.sb().metadata_uuid();
    let leaf = decode_leaf(&blk.bytes, magic, blk.daddr, dir.ino, &uuid)?;
    fs.note_verified(blk, kind);
    Ok(Run {
        ents: leaf.entries[hash_range(&leaf.entries, hash)].to_vec(),
        goes_on: leaf.entries.last().is_some_and(|e| e.hashval == hash),
        forw: leaf.info.forw,
    })
}

/// Lookup in leaf and node forms.
fn lookup_multi(fs: &(impl ReadCtx + ?Sized), dir: &Inode, name: &[u8]) -> Result<Option<Ino>> {
    let dg = dir_geo(fs);
    let uuid = fs.sb().metadata_uuid();
    let at = Location::Ino(dir.ino.0);
    let hash = hashname(name);
    let mut dablk = dg.leaf_dablk();
    let mut blk = read_leaf_seg(fs, dir, dablk)?;
    // Leaf form: the leaf1 block is the fork's last block. Node form
    // has a free index past it, and leafn/DA node blocks: a leaf1 magic
    // there (or any other magic in leaf form) is corruption.
    let leaf_form = dir
        .data
        .extents()
        .last()
        .is_some_and(|e| e.end() == dablk + dg.fsbs() as u64);
    if crate::format::be16(&blk.bytes, 8) == LEAF1_MAGIC && !leaf_form {
        return Err(Error::corrupt(
            "directory leaf1 block",
            Location::Daddr(blk.daddr.0),
            "leaf1 index block in a node-form directory",
        ));
    }
    if leaf_form {
        let run = leaf_run(fs, dir, &blk, LEAF1_MAGIC, BufKind::DirLeaf1, hash)?;
        return match_leaf_entries(fs, dir, &run.ents, name, &mut None);
    }
    // Descend DA nodes, one level per step (levels are 1..=5), to the
    // leftmost leaf that may hold `hash`.
    let mut level: Option<u16> = None;
    while crate::format::be16(&blk.bytes, 8) == DA3_NODE_MAGIC {
        let sum = sum_for(&blk, BufKind::DaNode);
        let node = da::decode_node_as(&blk.bytes, blk.daddr, dir.ino, &uuid, sum)?;
        if !blk.trusted_as(BufKind::DaNode) {
            fs.note_verified(&blk, BufKind::DaNode);
        }
        if level.is_some_and(|l| node.level + 1 != l) {
            return Err(Error::corrupt(
                "da node",
                Location::Daddr(blk.daddr.0),
                format!("level {} under level {}", node.level, level.unwrap_or(0)),
            ));
        }
        level = Some(node.level);
        let idx = node.entries.partition_point(|e| e.hashval < hash);
        dablk = node.entries[idx.min(node.entries.len() - 1)].before as u64;
        blk = read_leaf_seg(fs, dir, dablk)?;
    }
    if level.is_some_and(|l| l != 1) {
        return Err(Error::corrupt(
            "da node",
            at,
            format!("leaf found under a level-{} node", level.unwrap_or(0)),
        ));
    }
    // Walk leafn blocks while the run of equal hashes goes on.
    let mut cache = None;
    let mut visited = HashSet::new();
    let max_leaves = leaf_seg_blocks(fs, dir);
    loop {
        if !visited.insert(dablk) || visited.len() as u64 > max_leaves {
            return Err(Error::corrupt(
                "directory leafn block",
                Location::Daddr(blk.daddr.0),
                "sibling chain loops",
            ));
        }
        let run = leaf_run(fs, dir, &blk, LEAFN_MAGIC, BufKind::DirLeafN, hash)?;
        if let Some(ino) = match_leaf_entries(fs, dir, &run.ents, name, &mut cache)? {
            return Ok(Some(ino));
        }
        if !run.goes_on || run.forw == 0 {
            return Ok(None);
        }
        dablk = run.forw as u64;
        blk = read_leaf_seg(fs, dir, dablk)?;
    }
}

/// Directory blocks mapped in the leaf segment: a bound for walks there.
fn leaf_seg_blocks(fs: &(impl ReadCtx + ?Sized), dir: &Inode) -> u64 {
    let dg = dir_geo(fs);
    let (lo, hi) = (dg.leaf_dablk(), dg.free_dablk());
    let fsbs: u64 = dir
        .data
        .extents()
        .iter()
        .map(|e| e.end().min(hi).saturating_sub(e.off.0.max(lo)))
        .sum();
    fsbs / dg.fsbs() as u64
}
