//! Extended attribute changes on a transaction: set (create / replace /
//! either) and remove, and lookup inside a transaction, on the inode's
//! attribute fork in whichever form it has (see [`crate::format::attr`]).
//!
//! Layers:
//! - [`forkoff`]: where the attr fork starts (`di_forkoff`), the kernel's
//!   rules;
//! - [`sf`]: pure edits of a decoded shortform list;
//! - this module: read the fork from the joined dinode, plan the change on
//!   copies, then write the dinode (fork bytes, forkoff, aformat, ctime,
//!   change count) in one go;
//! - [`acl`]: POSIX ACLs (Linux xattr format <-> XFS format, the mode
//!   rules, inheritance on create, permission checks).
//!
//! Forms handled:
//! ```text
//!  no fork:      forkoff 0, aformat EXTENTS, anextents 0
//!  empty fork:   forkoff != 0, aformat EXTENTS, anextents 0 (what the
//!                kernel leaves after some failures): becomes shortform
//!  shortform:    aformat LOCAL, the list at byte 176 + forkoff * 8
//!  blocks:       aformat EXTENTS/BTREE, a leaf or a DA node at attr fork
//!                block 0 (see [`blocks`]), remote values in other blocks
//! ```
//! A shortform list that no longer fits the inode (or an entry too long
//! for it) moves to a leaf block; a removal that leaves one leaf whose
//! entries fit inline moves back, as the kernel does. Adding an attr fork
//! moves the data fork's end ([`crate::bmap::fork::set_forkoff`]:
//! extent lists become a bmbt when they no longer fit); only an inline
//! (local) data fork that would not fit is `NotSupported`.
//!
//! Invariants kept: a shortform change is planned before the dinode is
//! touched; a block-form change may fail half way (`NoSpace` from an
//! allocation), and the caller then cancels the transaction, as it does
//! for every error. The shortform list keeps
//! at most one complete entry per (namespace, name); a replaced entry moves
//! to the end of the list (the kernel removes, then appends). The attr fork
//! never takes bytes the data fork uses (local bytes, extent records);
//! when the last attribute goes, the fork goes (forkoff 0) unless the data
//! fork is a btree (its root was laid out for the smaller fork: kept, with
//! an empty list, as the kernel does).

pub mod acl;
pub mod blocks;
pub mod forkoff;
pub mod read;
pub mod sf;

use blocks::Tree;

use crate::error::{Error, Location, Result};
use crate::format::attr::{self, AttrEntry, AttrValue, Namespace, ATTR_NAME_MAX, XATTR_SIZE_MAX};
use crate::format::dinode_edit as di;
use crate::format::inode::{Timestamp, FMT_BTREE, FMT_DEV, FMT_EXTENTS, FMT_LOCAL};
use crate::types::Ino;
use crate::xact::{InodeId, MetaTx};

/// setxattr(2) flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XattrSet {
    /// Create or replace.
    #[default]
    Any,
    /// XATTR_CREATE: fail with `Exists` when the name exists.
    Create,
    /// XATTR_REPLACE: fail with `NoAttr` when it does not.
    Replace,
}

/// The attr fork of a joined inode, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Form {
    /// forkoff 0.
    None,
    /// A fork with no attribute in it (empty extents or empty list).
    Empty,
    Short(Vec<AttrEntry>),
    /// Leaf or node blocks.
    Blocks,
}

fn corrupt(ino: u64, detail: impl Into<String>) -> Error {
    Error::corrupt("attr fork", Location::Ino(ino), detail)
}

/// Read the attr fork of `ip`.
fn load(tx: &dyn MetaTx, ip: InodeId) -> Result<Form> {
    let d = tx.inode(ip);
    let ino = di::ino(d);
    if di::forkoff(d) == 0 {
        if di::aformat(d) == FMT_LOCAL || di::anextents(d) != 0 {
            return Err(corrupt(ino, "attr fork contents without a fork offset"));
        }
        return Ok(Form::None);
    }
    if di::forkoff(d) as usize * 8 >= forkoff::litino(d) {
        return Err(corrupt(ino, format!("fork offset {}", di::forkoff(d))));
    }
    match di::aformat(d) {
        FMT_LOCAL => {
            let list = attr::decode_shortform(di::attr_fork(d), crate::types::Ino(ino))?;
            Ok(if list.is_empty() {
                Form::Empty
            } else {
                Form::Short(list)
            })
        }
        FMT_EXTENTS if di::anextents(d) == 0 => Ok(Form::Empty),
        FMT_EXTENTS | FMT_BTREE => Ok(Form::Blocks),
        f => Err(corrupt(ino, format!("attr fork format {f}"))),
    }
}

/// Check a name (without namespace prefix) and value given to a change.
pub fn check_args(name: &[u8], value_len: usize) -> Result<()> {
    if name.is_empty() {
        return Err(Error::Invalid("empty attribute name".into()));
    }
    if name.len() > ATTR_NAME_MAX {
        return Err(Error::Range);
    }
    if value_len > XATTR_SIZE_MAX as usize {
        return Err(Error::Range);
    }
    Ok(())
}

/// The value of the complete attribute `name` in `ns`, if present.
pub fn attr_get(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ns: Namespace,
    name: &[u8],
) -> Result<Option<Vec<u8>>> {
    match load(tx, ip)? {
        Form::None | Form::Empty => Ok(None),
        Form::Short(list) => {
            Ok(list
                .into_iter()
                .find(|e| e.matches(ns, name))
                .map(|e| match e.value {
                    AttrValue::Local(v) => v,
                    AttrValue::Remote { .. } => Vec::new(),
                }))
        }
        Form::Blocks => {
            let ino = Ino(di::ino(tx.inode(ip)));
            let t = Tree::load(tx, ip, ino)?;
            match t.find(ns, name) {
                None => Ok(None),
                Some((li, ei)) => {
                    let e = t.entries_of(li)[ei].clone();
                    t.value(tx, ip, &e).map(Some)
                }
            }
        }
    }
}

/// A leaf entry for `name` in `ns` with `value`: local, or written to
/// remote value blocks of `ip` when too big for a leaf.
fn new_entry(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ino: Ino,
    ns: Namespace,
    name: &[u8],
    value: &[u8],
) -> Result<AttrEntry> {
    let bs = tx.geo().blocksize as usize;
    let v = if blocks::value_is_local(name.len(), value.len(), bs) {
        AttrValue::Local(value.to_vec())
    } else {
        let blk = blocks::write_remote(tx, ip, ino, value)?;
        AttrValue::Remote {
            blk,
            len: value.len() as u32,
        }
    };
    Ok(AttrEntry {
        flags: ns.flags(),
        name: name.to_vec(),
        hashval: crate::format::da::hashname(name),
        value: v,
    })
}

/// Set attribute `name` in `ns` of the joined inode `ip` to `value`
/// (`how` says whether it must or must not exist). ctime = `now`.
pub fn attr_set(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ns: Namespace,
    name: &[u8],
    value: &[u8],
    how: XattrSet,
    now: Timestamp,
) -> Result<()> {
    check_args(name, value.len())?;
    let ino = Ino(di::ino(tx.inode(ip)));
    let list = match load(tx, ip)? {
        Form::None | Form::Empty => Vec::new(),
        Form::Short(l) => l,
        Form::Blocks => {
            prelock_attr_agfs(tx, ip)?;
            let mut t = Tree::load(tx, ip, ino)?;
            let old = t.find(ns, name);
            match (how, old.is_some()) {
                (XattrSet::Create, true) => return Err(Error::Exists),
                (XattrSet::Replace, false) => return Err(Error::NoAttr),
                _ => {}
            }
            if let Some(at) = old {
                if let AttrValue::Remote { blk, len } = t.take(at).value {
                    blocks::free_remote(tx, ip, ino, blk, len)?;
                }
            }
            let e = new_entry(tx, ip, ino, ns, name, value)?;
            t.insert(e);
            t.store(tx, ip)?;
            touch(tx, ip, now);
            return Ok(());
        }
    };
    let present = list.iter().any(|e| e.matches(ns, name));
    match (how, present) {
        (XattrSet::Create, true) => return Err(Error::Exists),
        (XattrSet::Replace, false) => return Err(Error::NoAttr),
        _ => {}
    }
    let new = sf::set(&list, ns, name, value);
    if let Some(fo) = sf::fits(tx.inode(ip), &new) {
        place_fork(tx, ip, fo)?;
        store_short(tx, ip, &new, fo);
        touch(tx, ip, now);
        return Ok(());
    }
    // Shortform -> leaf: an attr fork first if there is none (where the
    // kernel puts it), then the list and the new entry in a leaf block.
    if di::forkoff(tx.inode(ip)) == 0 {
        let d = tx.inode(ip);
        let want = attr::SF_HDR_SIZE + attr::sf_entsize(name.len(), value.len());
        let fo = match forkoff::bytes_fit(d, want) {
            0 => (forkoff::default_offset(d) / 8) as u8,
            fo => fo,
        };
        place_fork(tx, ip, fo)?;
    }
    let d = tx.inode_mut(ip);
    di::attr_fork_mut(d).fill(0);
    di::set_aformat(d, FMT_EXTENTS);
    di::set_anextents(d, 0);
    let mut t = Tree::empty(tx, ino);
    for e in list.into_iter().filter(|e| !e.matches(ns, name)) {
        let v = match &e.value {
            AttrValue::Local(v) => v.clone(),
            AttrValue::Remote { .. } => return Err(corrupt(ino.0, "remote value in shortform")),
        };
        let x = new_entry(tx, ip, ino, e.namespace(), &e.name, &v)?;
        t.insert(x);
    }
    let e = new_entry(tx, ip, ino, ns, name, value)?;
    t.insert(e);
    t.store(tx, ip)?;
    touch(tx, ip, now);
    Ok(())
}

/// Remove attribute `name` in `ns` of `ip`; `NoAttr` when absent.
pub fn attr_remove(
    tx: &mut dyn MetaTx,
    ip: InodeId,
    ns: Namespace,
    name: &[u8],
    now: Timestamp,
) -> Result<()> {
    check_args(name, 0)?;
    let ino = Ino(di::ino(tx.inode(ip)));
    let list = match load(tx, ip)? {
        Form::None | Form::Empty => return Err(Error::NoAttr),
        Form::Short(l) => l,
        Form::Blocks => {
            prelock_attr_agfs(tx, ip)?;
            let mut t = Tree::load(tx, ip, ino)?;
            let at = t.find(ns, name).ok_or(Error::NoAttr)?;
            if let AttrValue::Remote { blk, len } = t.take(at).value {
                blocks::free_remote(tx, ip, ino, blk, len)?;
            }
            blocks_to_short_or_store(tx, ip, t)?;
            touch(tx, ip, now);
            return Ok(());
        }
    };
    let Some(new) = sf::remove(&list, ns, name) else {
        return Err(Error::NoAttr);
    };
    if new.is_empty() && di::format(tx.inode(ip)) != FMT_BTREE {
        remove_fork(tx, ip);
    } else {
        let fo = di::forkoff(tx.inode(ip));
        store_short(tx, ip, &new, fo);
    }
    touch(tx, ip, now);
    Ok(())
}

/// After a removal from a leaf/node fork: back to shortform when a single
/// leaf remains whose entries all fit inline (the kernel's rule), the fork
/// removed when nothing remains, else the blocks written.
fn blocks_to_short_or_store(tx: &mut dyn MetaTx, ip: InodeId, mut t: Tree) -> Result<()> {
    let list: Vec<AttrEntry> = t
        .entries()
        .map(|e| AttrEntry {
            flags: e.flags & attr::ATTR_NSP_ONDISK_MASK,
            hashval: 0,
            ..e.clone()
        })
        .collect();
    let fo = di::forkoff(tx.inode(ip));
    let short_ok = t.is_leaf_form()
        && sf::entries_inline(&list)
        && attr::sf_totsize(&list) <= forkoff::litino(tx.inode(ip)) - fo as usize * 8;
    if !short_ok {
        return t.store(tx, ip);
    }
    t.free_all(tx, ip)?;
    if list.is_empty() && di::format(tx.inode(ip)) != FMT_BTREE {
        remove_fork(tx, ip);
    } else {
        store_short(tx, ip, &list, fo);
    }
    Ok(())
}

/// Lock order on rmapbt filesystems: a change may free attr fork blocks
/// (reverse-mapping edits in their AGs) after allocating new ones; join
/// the AGFs of every AG the attr fork has blocks in first, ascending, so
/// allocations then only move upwards.
fn prelock_attr_agfs(tx: &mut dyn MetaTx, ip: InodeId) -> Result<()> {
    if !tx.sb().has_rmapbt() {
        return Ok(());
    }
    let map = crate::bmap::attrfork::attr_map(tx, ip)?;
    let geo = tx.geo();
    let ags: std::collections::BTreeSet<u32> = map
        .exts
        .iter()
        .map(|e| geo.fsb_agno(crate::types::FsBlock(e.start)).0)
        .collect();
    for a in ags {
        crate::alloc::lock_agf(tx, crate::types::AgNumber(a))?;
    }
    Ok(())
}

/// Put the data/attr fork boundary at `fo`, keeping the data fork valid
/// (extent lists that no longer fit become a bmbt, bmbt roots are laid out
/// again; see [`crate::bmap::fork::set_forkoff`]).
fn place_fork(tx: &mut dyn MetaTx, ip: InodeId, fo: u8) -> Result<()> {
    let d = tx.inode(ip);
    if di::forkoff(d) == fo {
        return Ok(());
    }
    let is_dir = di::mode(d) as u32 & di::S_IFMT == di::S_IFDIR;
    if di::format(d) == FMT_LOCAL && is_dir && forkoff::data_bytes(d) > fo as usize * 8 {
        // The shortform directory no longer fits: it becomes a block
        // directory (as the kernel does when it adds an attr fork).
        crate::dir::dir_sf_to_block(tx, ip)?;
    }
    let d = tx.inode(ip);
    match di::format(d) {
        FMT_EXTENTS | FMT_BTREE => crate::bmap::fork::set_forkoff(tx, ip, fo),
        _ => {
            check_data_fits(d, fo)?;
            di::set_forkoff(tx.inode_mut(ip), fo);
            Ok(())
        }
    }
}

/// The data fork must keep what it uses when the attr fork starts at
/// `fo` * 8 (a fork that would have to change form is not done here).
fn check_data_fits(d: &[u8], fo: u8) -> Result<()> {
    let room = fo as usize * 8;
    match di::format(d) {
        FMT_DEV => Ok(()),
        FMT_LOCAL | FMT_EXTENTS if forkoff::data_bytes(d) <= room => Ok(()),
        FMT_BTREE if di::forkoff(d) == fo => Ok(()),
        _ => Err(Error::NotSupported(
            "an extended attribute on this inode: its data fork would have to change form to make room".into(),
        )),
    }
}

/// Write `list` as the shortform attr fork starting at `fo`.
fn store_short(tx: &mut dyn MetaTx, ip: InodeId, list: &[AttrEntry], fo: u8) {
    let bytes = attr::encode_shortform(list);
    let d = tx.inode_mut(ip);
    let old = di::forkoff(d);
    if old != 0 {
        di::attr_fork_mut(d).fill(0);
    }
    di::set_forkoff(d, fo);
    di::set_aformat(d, FMT_LOCAL);
    di::set_anextents(d, 0);
    let fork = di::attr_fork_mut(d);
    debug_assert!(bytes.len() <= fork.len());
    fork.fill(0);
    fork[..bytes.len()].copy_from_slice(&bytes);
}

/// Drop the attr fork: forkoff 0, the bytes it held zeroed.
fn remove_fork(tx: &mut dyn MetaTx, ip: InodeId) {
    let d = tx.inode_mut(ip);
    di::attr_fork_mut(d).fill(0);
    di::set_forkoff(d, 0);
    di::set_aformat(d, FMT_EXTENTS);
    di::set_anextents(d, 0);
}

fn touch(tx: &mut dyn MetaTx, ip: InodeId, now: Timestamp) {
    let d = tx.inode_mut(ip);
    di::set_ctime(d, now);
    di::bump_changecount(d, 1);
}
