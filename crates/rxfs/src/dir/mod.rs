//! Directory modification on a transaction: shortform, block (XDB3),
//! leaf and node directories. The namespace operations built on them are
//! in [`crate::ns`].
//!
//! Layers:
//! - [`sf`] and [`block`]: pure edits of a decoded shortform directory and
//!   of the bytes of a directory block (no I/O);
//! - this module: find the directory's form from its dinode, read its
//!   block through the transaction, run the pure edit, write back and log;
//!   convert shortform -> block when an entry no longer fits the inode,
//!   and block -> shortform when the entries fit the inode again (as the
//!   kernel does after a removal);
//! - [`crate::ns`] (the layer above): create, mkdir, unlink, rmdir, link,
//!   rename.
//!
//! Forms handled:
//! ```text
//!  shortform: format LOCAL, di_size = bytes of the sf directory
//!  block:     format EXTENTS, mappings covering exactly fork blocks
//!             [0, dir_fsbs) and physically contiguous, di_size = dirblksize
//! ```
//! Anything else (leaf, node, btree forks, a discontiguous block) is
//! `NotSupported` (issue 4), as is an addition that would need the leaf
//! form; in both cases nothing has been changed.
//!
//! Invariants: every change is planned on copies first (including the
//! block an sf->block conversion would build), so an `Err` leaves the
//! transaction's buffers and inodes as they were, except for errors of
//! the allocator itself. The directory block is allocated with
//! [`crate::alloc::alloc_extent`] (one contiguous extent of `dir_fsbs`
//! blocks near the inode) and freed as a deferred operation
//! ([`MetaTx::defer_free`]: an extent-free intent in this transaction, the
//! free itself in a follow-up one, as the kernel does).
//!
//! Entry points: [`dir_init`], [`dir_lookup`], [`dir_add`], [`dir_remove`],
//! [`dir_is_empty`], and [`dir_can_add`] (the check before allocating an
//! inode). Names are checked by [`check_name`] (`NameTooLong` past 255
//! bytes, `Invalid` for empty names or names with '/' or NUL); adding "."
//! or ".." is `Exists`, removing them `Invalid`.
//!
//! Limits: case-insensitive (ascii-ci) filesystems refuse conversions
//! (`NotSupported`). With an rmapbt, the block's reverse mapping is added
//! and removed with the conversions. The directory block is
//! asked for in the directory's AG and then higher AGs only (from AG 0 on
//! with [`dir_add_from`], which the `Filesystem` wrappers use to retry in a
//! new transaction after `NoSpace`); when an earlier step of the same
//! transaction locked the AGF of a higher AG (a new inode chunk) the AGF
//! lock order may still be broken (the kernel tracks the highest AG a
//! transaction locked; [`MetaTx`] does not tell it yet).

pub mod big;
pub mod block;
pub mod data;
pub mod index;
pub mod leaf;
pub mod read;
pub mod sf;
pub mod skel;
#[cfg(test)]
mod tests;

use crate::alloc::{alloc_extent, AllocReq};
use crate::error::{Error, Location, Result};
use crate::format::bmbt::{Extent, EXTENT_REC_SIZE};
use crate::format::bufkind::BufKind;
use crate::format::crc::Sum;
use crate::format::dinode_edit as di;
use crate::format::dir::{DirGeo, MAXNAMELEN};
use crate::format::dir_sf::{decode_sf, encode_sf, SfDir};
use crate::format::inode::{FMT_BTREE, FMT_EXTENTS, FMT_LOCAL};
use crate::format::log_items::BLF_CHUNK;
use crate::types::{AgBlock, AgNumber, FileBlock, FsBlock, Ino};
use crate::xact::{BufId, InodeId, MetaTx};

use block::BlockState;
use sf::SfAdd;

/// `sb_versionnum` bit of case-insensitive (ASCII) directory names: they
/// hash differently.
const VERSION_BORGBIT: u16 = 0x4000;

/// Directory geometry of the transaction's filesystem.
pub fn dir_geo(tx: &dyn MetaTx) -> DirGeo {
    DirGeo::new(tx.geo().blocklog, tx.geo().dirblklog, tx.sb().has_ftype())
}

/// Check a name given to a directory operation.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > MAXNAMELEN {
        return Err(Error::NameTooLong);
    }
    if !crate::format::dir::name_valid(name) {
        return Err(Error::Invalid(format!(
            "bad file name {:?}",
            String::from_utf8_lossy(name)
        )));
    }
    Ok(())
}

/// A block directory as read through the transaction.
struct BlockDir {
    buf: BufId,
    st: BlockState,
    /// First filesystem block of the directory block.
    fsb: FsBlock,
}

enum Dir {
    Short(SfDir),
    Block(BlockDir),
    Big(big::BigDir),
}

fn corrupt(dp_ino: u64, detail: impl Into<String>) -> Error {
    Error::corrupt("directory", Location::Ino(dp_ino), detail)
}

/// Read the directory `dp` in whichever form it has.
fn load(tx: &mut dyn MetaTx, dp: InodeId) -> Result<Dir> {
    if tx.sb().versionnum & VERSION_BORGBIT != 0 {
        return Err(Error::NotSupported(
            "directories with case-insensitive names".into(),
        ));
    }
    let geo = dir_geo(tx);
    let d = tx.inode(dp);
    let ino = Ino(di::ino(d));
    if di::mode(d) as u32 & di::S_IFMT != di::S_IFDIR {
        return Err(Error::NotDir);
    }
    let size = di::size(d);
    match di::format(d) {
        FMT_LOCAL => {
            let fork = di::data_fork(d);
            if size > fork.len() as u64 {
                return Err(corrupt(ino.0, format!("shortform size {size}")));
            }
            Ok(Dir::Short(decode_sf(&fork[..size as usize], &geo, ino)?))
        }
        FMT_EXTENTS => {
            let fork = di::data_fork(d);
            let n = di::nextents(d);
            if n == 0 || n > (fork.len() / EXTENT_REC_SIZE) as u64 {
                return Err(corrupt(ino.0, format!("{n} extents")));
            }
            let exts: Vec<Extent> = (0..n as usize)
                .map(|i| Extent::decode(&fork[i * EXTENT_REC_SIZE..]))
                .collect();
            let fsbs = geo.fsbs() as u64;
            let last = exts[exts.len() - 1];
            if last.end() != fsbs || size != geo.blksize as u64 {
                return Ok(Dir::Big(leaf::load(tx, dp)?));
            }
            // One contiguous run mapping [0, fsbs).
            let mut expect_off = 0;
            let mut expect_start = exts[0].start;
            for e in &exts {
                if e.off.0 != expect_off || e.start != expect_start || e.unwritten {
                    return Err(Error::NotSupported(
                        "a directory block in discontiguous extents".into(),
                    ));
                }
                expect_off += e.len;
                expect_start += e.len;
            }
            let fsb = FsBlock(exts[0].start);
            if !tx.geo().fsb_extent_valid(fsb, fsbs) {
                return Err(corrupt(ino.0, format!("block at fsblock {}", fsb.0)));
            }
            let daddr = tx.geo().fsb_to_daddr(fsb);
            let buf = tx.read_buf(daddr, geo.blksize as usize, BufKind::DirBlock)?;
            let uuid = tx.sb().metadata_uuid();
            // The transaction verified the block (CRC included) when it
            // joined it; a block changed earlier in this transaction is
            // stamped only at write-back: check all but the CRC.
            let st = BlockState::decode_as(tx.buf(buf), &geo, daddr, ino, &uuid, Sum::InCore)?;
            Ok(Dir::Block(BlockDir { buf, st, fsb }))
        }
        FMT_BTREE => Ok(Dir::Big(leaf::load(tx, dp)?)),
        f => Err(corrupt(ino.0, format!("data fork format {f}"))),
    }
}

/// Write `sf` as the data fork of `dp` (format LOCAL, size set).
fn store_sf(tx: &mut dyn MetaTx, dp: InodeId, sf: &SfDir) {
    let geo = dir_geo(tx);
    let bytes = encode_sf(sf, &geo);
    let d = tx.inode_mut(dp);
    di::set_format(d, FMT_LOCAL);
    let fork = di::data_fork_mut(d);
    debug_assert!(bytes.len() <= fork.len());
    fork.fill(0);
    fork[..bytes.len()].copy_from_slice(&bytes);
    di::set_nextents(d, 0);
    di::set_size(d, bytes.len() as u64);
}

/// Copy the edited block `new` into the buffer and log what changed. The
/// log records whole chunks of [`BLF_CHUNK`] bytes, so the blocks are
/// compared chunk by chunk and each run of changed chunks is copied and
/// logged as one range.
pub(crate) fn store_block(tx: &mut dyn MetaTx, buf: BufId, new: &[u8]) {
    for r in block::changed_chunks(tx.buf(buf), new, BLF_CHUNK) {
        tx.buf_mut(buf)[r.clone()].copy_from_slice(&new[r.clone()]);
        tx.log_buf(buf, r);
    }
}

/// Initialise the data fork of the new directory `dp` as an empty
/// shortform directory whose parent is `parent`.
pub fn dir_init(tx: &mut dyn MetaTx, dp: InodeId, parent: Ino) -> Result<()> {
    store_sf(tx, dp, &sf::sf_empty(parent));
    Ok(())
}

/// Look `name` up in directory `dp` ("." and ".." included).
pub fn dir_lookup(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8]) -> Result<Option<Ino>> {
    check_name(name)?;
    let dir = load(tx, dp)?;
    if name == b"." {
        return Ok(Some(Ino(di::ino(tx.inode(dp)))));
    }
    let geo = dir_geo(tx);
    Ok(match dir {
        Dir::Short(s) => sf::sf_lookup(&s, name),
        Dir::Block(b) => b.st.find(&geo, name).map(|(_, i)| b.st.entries[i].ino),
        Dir::Big(mut d) => d.find(tx, name)?.map(|f| f.4),
    })
}

/// True when `dp` has no entries besides "." and "..".
pub fn dir_is_empty(tx: &mut dyn MetaTx, dp: InodeId) -> Result<bool> {
    Ok(match load(tx, dp)? {
        Dir::Short(s) => s.entries.is_empty(),
        Dir::Block(b) => b.st.user_entries().next().is_none(),
        Dir::Big(mut d) => d.count_all(tx)? <= 2,
    })
}

/// What adding an entry will do, decided before anything changes.
enum AddPlan {
    Short(SfDir),
    /// Convert to a block directory, then add in the block.
    Convert(SfDir),
    /// Convert to a block directory whose free space (the shortform
    /// offsets kept, holes and all) has no room for the entry: on to the
    /// leaf form, then add (the kernel's sf -> block -> leaf in one
    /// transaction).
    ConvertToLeaf(SfDir),
    Block(BlockDir),
    /// The block is full: convert it to the leaf form, then add.
    BlockToLeaf(BlockDir),
    Big(Box<big::BigDir>),
}

/// Plan the addition of `name -> ino`; `Err` when it cannot be done
/// (exists, needs the leaf form...).
fn plan_add(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], ino: Ino, ftype: u8) -> Result<AddPlan> {
    check_name(name)?;
    if name == b"." || name == b".." {
        return Err(Error::Exists);
    }
    let geo = dir_geo(tx);
    let dir = load(tx, dp)?;
    let dp_ino = Ino(di::ino(tx.inode(dp)));
    let fork_size = di::data_fork_size(tx.inode(dp));
    match dir {
        Dir::Short(s) => {
            if sf::sf_lookup(&s, name).is_some() {
                return Err(Error::Exists);
            }
            match sf::sf_add(&geo, &s, fork_size, name, ino, ftype) {
                SfAdd::Fits(n) => Ok(AddPlan::Short(n)),
                SfAdd::ToBlock => {
                    // Try the whole conversion on a scratch block.
                    let uuid = tx.sb().metadata_uuid();
                    let (mut buf, mut st) =
                        block::block_from_sf(&geo, &s, dp_ino, crate::types::Daddr(0), &uuid)?;
                    match block::block_add(&geo, &mut buf, &mut st, name, ino, ftype) {
                        Ok(()) => Ok(AddPlan::Convert(s)),
                        Err(Error::NotSupported(_)) => Ok(AddPlan::ConvertToLeaf(s)),
                        Err(e) => Err(e),
                    }
                }
            }
        }
        Dir::Block(b) => {
            if b.st.find(&geo, name).is_some() {
                return Err(Error::Exists);
            }
            if block::block_can_add(&geo, &b.st, name.len()) {
                Ok(AddPlan::Block(b))
            } else {
                Ok(AddPlan::BlockToLeaf(b))
            }
        }
        Dir::Big(mut d) => {
            if d.find(tx, name)?.is_some() {
                return Err(Error::Exists);
            }
            Ok(AddPlan::Big(Box::new(d)))
        }
    }
}

/// Whether `name` could be added to `dp` now (pointing at an inode number
/// like `ino`): the check namespace operations make before allocating.
pub fn dir_can_add(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], ino: Ino) -> Result<()> {
    plan_add(tx, dp, name, ino, 0).map(|_| ())
}

/// An addition checked by [`dir_prepare_add`], with the directory as it
/// was loaded then, so that [`dir_add_prepared`] does not load and decode
/// it again.
pub struct PreparedAdd(AddPlan);

/// [`dir_can_add`], keeping what it loaded for [`dir_add_prepared`].
pub fn dir_prepare_add(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    ino: Ino,
) -> Result<PreparedAdd> {
    plan_add(tx, dp, name, ino, 0).map(PreparedAdd)
}

/// [`dir_add_from`] of the addition `p` prepared for `name`. Contract:
/// nothing changed `dp`'s entries or fork since [`dir_prepare_add`] (a
/// namespace operation allocating the new inode in between). Shortform
/// plans depend on the inode number's width and are planned again.
pub fn dir_add_prepared(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    p: PreparedAdd,
    name: &[u8],
    ino: Ino,
    ftype: u8,
    from_ag0: bool,
) -> Result<()> {
    match p.0 {
        AddPlan::Block(b) => add_to_block(tx, b, name, ino, ftype),
        AddPlan::BlockToLeaf(b) => leaf::from_block(tx, dp, b.buf, &b.st, name, ino, ftype),
        AddPlan::Big(mut d) => leaf::add(tx, &mut d, name, ino, ftype),
        AddPlan::Short(_) | AddPlan::Convert(_) | AddPlan::ConvertToLeaf(_) => {
            dir_add_from(tx, dp, name, ino, ftype, from_ag0)
        }
    }
}

fn add_to_block(
    tx: &mut dyn MetaTx,
    mut b: BlockDir,
    name: &[u8],
    ino: Ino,
    ftype: u8,
) -> Result<()> {
    let geo = dir_geo(tx);
    let mut bytes = tx.buf(b.buf).to_vec();
    block::block_add(&geo, &mut bytes, &mut b.st, name, ino, ftype)?;
    store_block(tx, b.buf, &bytes);
    Ok(())
}

/// Whether adding `name` to `dp` would leave (or find) the directory in
/// leaf or node form, i.e. past shortform and single-block forms.
pub fn dir_add_needs_leaf(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], ino: Ino) -> Result<bool> {
    Ok(matches!(
        plan_add(tx, dp, name, ino, 0)?,
        AddPlan::BlockToLeaf(_) | AddPlan::Big(_) | AddPlan::ConvertToLeaf(_)
    ))
}

/// Add the entry `name -> ino` (with directory-entry file type `ftype`).
/// `Err(Exists)` when the name is there.
pub fn dir_add(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], ino: Ino, ftype: u8) -> Result<()> {
    dir_add_from(tx, dp, name, ino, ftype, false)
}

/// [`dir_add`]; with `from_ag0` a directory block is searched for from AG
/// 0 on (not from the directory's AG): the retry after `NoSpace`, in a new
/// transaction that has locked no AGF before (AGF lock order).
pub fn dir_add_from(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    ino: Ino,
    ftype: u8,
    from_ag0: bool,
) -> Result<()> {
    match plan_add(tx, dp, name, ino, ftype)? {
        AddPlan::Short(n) => {
            store_sf(tx, dp, &n);
            Ok(())
        }
        AddPlan::Block(b) => add_to_block(tx, b, name, ino, ftype),
        AddPlan::Convert(s) => sf_to_block(tx, dp, &s, Some((name, ino, ftype)), from_ag0),
        AddPlan::ConvertToLeaf(s) => {
            sf_to_block(tx, dp, &s, None, from_ag0)?;
            match plan_add(tx, dp, name, ino, ftype)? {
                AddPlan::BlockToLeaf(b) => leaf::from_block(tx, dp, b.buf, &b.st, name, ino, ftype),
                _ => Err(corrupt(
                    di::ino(tx.inode(dp)),
                    "a block made from a full shortform directory took another entry",
                )),
            }
        }
        AddPlan::BlockToLeaf(b) => leaf::from_block(tx, dp, b.buf, &b.st, name, ino, ftype),
        AddPlan::Big(mut d) => leaf::add(tx, &mut d, name, ino, ftype),
    }
}

/// Turn the shortform directory `dp` into a block directory with the same
/// entries (the room its inline data took is needed, e.g. by a new attr
/// fork, as the kernel does).
pub fn dir_sf_to_block(tx: &mut dyn MetaTx, dp: InodeId) -> Result<()> {
    match load(tx, dp)? {
        Dir::Short(s) => sf_to_block(tx, dp, &s, None, false),
        _ => Ok(()),
    }
}

/// Allocate the directory block, build it from `s` plus the new entry
/// `add` (name, inode, file type) if any, and switch the fork to one
/// extent.
fn sf_to_block(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    s: &SfDir,
    add: Option<(&[u8], Ino, u8)>,
    from_ag0: bool,
) -> Result<()> {
    let geo = dir_geo(tx);
    let dp_ino = Ino(di::ino(tx.inode(dp)));
    let fsbs = geo.fsbs();
    let g = tx.geo();
    let agno = g.ino_agno(dp_ino);
    let near = g.agino_agbno(g.ino_agino(dp_ino));
    let (agno, near) = if from_ag0 && agno.0 != 0 {
        (AgNumber(0), None)
    } else {
        (agno, Some(near))
    };
    let req = AllocReq {
        agno,
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
    crate::rmap::rmap_alloc(tx, ext.agno, ext.agbno, fsbs, &dir_owner(dp_ino))?;
    let fsb = tx.geo().agb_to_fsb(ext.agno, ext.agbno);
    let daddr = tx.geo().fsb_to_daddr(fsb);
    let uuid = tx.sb().metadata_uuid();
    let (mut bytes, mut st) = block::block_from_sf(&geo, s, dp_ino, daddr, &uuid)?;
    if let Some((name, ino, ftype)) = add {
        block::block_add(&geo, &mut bytes, &mut st, name, ino, ftype)?;
    }
    let buf = tx.new_buf(daddr, bytes.len(), BufKind::DirBlock)?;
    tx.buf_mut(buf).copy_from_slice(&bytes);
    tx.log_buf(buf, 0..bytes.len());
    let d = tx.inode_mut(dp);
    di::set_format(d, FMT_EXTENTS);
    let fork = di::data_fork_mut(d);
    fork.fill(0);
    Extent {
        off: FileBlock(0),
        start: fsb.0,
        len: fsbs as u64,
        unwritten: false,
    }
    .encode(&mut fork[..EXTENT_REC_SIZE]);
    di::set_nextents(d, 1);
    di::set_size(d, geo.blksize as u64);
    let nb = di::nblocks(d) + fsbs as u64;
    di::set_nblocks(d, nb);
    Ok(())
}

/// The rmap owner of a single-block directory's block (file block 0).
fn dir_owner(dp: Ino) -> crate::rmap::RmapOwner {
    crate::rmap::RmapOwner::File {
        ino: dp,
        fork: crate::types::WhichFork::Data,
        offset: 0,
        bmbt: false,
        unwritten: false,
    }
}

/// Remove the entry `name`; returns the inode it named. A block directory
/// whose entries then fit the inode goes back to shortform (its block is
/// freed).
pub fn dir_remove(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8]) -> Result<Ino> {
    check_name(name)?;
    if name == b"." || name == b".." {
        return Err(Error::Invalid("cannot remove . or ..".into()));
    }
    let geo = dir_geo(tx);
    match load(tx, dp)? {
        Dir::Short(s) => {
            let (n, ino) = sf::sf_remove(&s, name).ok_or(Error::NotFound)?;
            store_sf(tx, dp, &n);
            Ok(ino)
        }
        Dir::Block(mut b) => {
            let mut bytes = tx.buf(b.buf).to_vec();
            let ino =
                block::block_remove(&geo, &mut bytes, &mut b.st, name).ok_or(Error::NotFound)?;
            let fork_size = di::data_fork_size(tx.inode(dp));
            match block::block_to_sf(&geo, &b.st, fork_size) {
                Some(s) => {
                    let g = tx.geo();
                    let (agno, agbno): (AgNumber, AgBlock) =
                        (g.fsb_agno(b.fsb), g.fsb_agbno(b.fsb));
                    let dp_ino = Ino(di::ino(tx.inode(dp)));
                    // The mapping goes now: its rmap record with it.
                    crate::rmap::rmap_free(tx, agno, agbno, geo.fsbs(), &dir_owner(dp_ino))?;
                    // Deferred like the kernel's: an EFI here, the free in
                    // a follow-up transaction.
                    tx.defer_free(agno, agbno, geo.fsbs())?;
                    tx.stale_buf(b.buf);
                    store_sf(tx, dp, &s);
                    let d = tx.inode_mut(dp);
                    let nb = di::nblocks(d).saturating_sub(geo.fsbs() as u64);
                    di::set_nblocks(d, nb);
                }
                _ => store_block(tx, b.buf, &bytes),
            }
            Ok(ino)
        }
        Dir::Big(mut d) => leaf::remove(tx, &mut d, name),
    }
}

/// Point the existing entry `name` at `ino` (file type `ftype`); returns
/// the inode it named before. Used by rename over an existing target and
/// to retarget ".." of a moved directory (`name` = ".." is allowed here).
/// Shortform and block forms (leaf and node: `NotSupported`, issue 4).
pub fn dir_replace(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    ino: Ino,
    ftype: u8,
) -> Result<Ino> {
    check_name(name)?;
    if name == b"." {
        return Err(Error::Invalid("cannot retarget .".into()));
    }
    let geo = dir_geo(tx);
    match load(tx, dp)? {
        Dir::Short(s) => {
            let mut n = s.clone();
            let old = if name == b".." {
                std::mem::replace(&mut n.parent, ino)
            } else {
                let e = n
                    .entries
                    .iter_mut()
                    .find(|e| e.name == name)
                    .ok_or(Error::NotFound)?;
                e.ftype = if geo.ftype { ftype } else { 0 };
                std::mem::replace(&mut e.ino, ino)
            };
            n.wide = sf::needs_wide(&n);
            let fork_size = di::data_fork_size(tx.inode(dp));
            if sf::sf_size(&geo, &n) <= fork_size {
                store_sf(tx, dp, &n);
                return Ok(old);
            }
            // Wider inode numbers no longer fit the inode: through the
            // block form.
            if name == b".." {
                return Err(Error::NotSupported(
                    "retargeting .. of a full shortform directory to a 64-bit inode".into(),
                ));
            }
            let e = s
                .entries
                .iter()
                .find(|e| e.name == name)
                .ok_or(Error::NotFound)?;
            let old = e.ino;
            dir_remove(tx, dp, name)?;
            dir_add(tx, dp, name, ino, ftype)?;
            Ok(old)
        }
        Dir::Block(b) => {
            let i = if name == b".." {
                b.st.entries.iter().position(|e| e.name == b"..")
            } else {
                b.st.find(&geo, name).map(|(_, i)| i)
            }
            .ok_or(Error::NotFound)?;
            let e = &b.st.entries[i];
            let old = e.ino;
            let mut bytes = tx.buf(b.buf).to_vec();
            crate::format::put_be64(&mut bytes, e.off, ino.0);
            if geo.ftype {
                bytes[e.off + 9 + e.name.len()] = ftype;
            }
            store_block(tx, b.buf, &bytes);
            Ok(old)
        }
        Dir::Big(mut d) => leaf::replace(tx, &mut d, name, ino, ftype),
    }
}
