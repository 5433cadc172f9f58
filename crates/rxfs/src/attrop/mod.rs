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
//! ```
//! Leaf and node forms (attr fork blocks) are `NotSupported` for now, as
//! is a change that would need them (a name or value of 255 bytes or more,
//! or a list that does not fit the inode); nothing has changed then.
//!
//! Invariants kept: every change is planned before the dinode is touched,
//! so an `Err` leaves the transaction as it was. The shortform list keeps
//! at most one complete entry per (namespace, name); a replaced entry moves
//! to the end of the list (the kernel removes, then appends). The attr fork
//! never takes bytes the data fork uses (local bytes, extent records);
//! when the last attribute goes, the fork goes (forkoff 0) unless the data
//! fork is a btree (its root was laid out for the smaller fork: kept, with
//! an empty list, as the kernel does).

pub mod acl;
pub mod forkoff;
pub mod sf;

use crate::error::{Error, Location, Result};
use crate::format::attr::{self, AttrEntry, AttrValue, Namespace, ATTR_NAME_MAX, XATTR_SIZE_MAX};
use crate::format::dinode_edit as di;
use crate::format::inode::{Timestamp, FMT_BTREE, FMT_DEV, FMT_EXTENTS, FMT_LOCAL};
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

fn not_yet(what: &str) -> Error {
    Error::NotSupported(format!("{what}: attr leaf/node forms (issue 4)"))
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
        Form::Blocks => Err(not_yet("attribute lookup")),
    }
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
    let form = load(tx, ip)?;
    let list = match form {
        Form::None | Form::Empty => Vec::new(),
        Form::Short(l) => l,
        Form::Blocks => return Err(not_yet("setxattr")),
    };
    let present = list.iter().any(|e| e.matches(ns, name));
    match (how, present) {
        (XattrSet::Create, true) => return Err(Error::Exists),
        (XattrSet::Replace, false) => return Err(Error::NoAttr),
        _ => {}
    }
    let new = sf::set(&list, ns, name, value);
    let d = tx.inode(ip);
    let Some(fo) = sf::fits(d, &new) else {
        return Err(not_yet("an attribute list too big for the inode"));
    };
    check_data_fits(d, fo)?;
    store_short(tx, ip, &new, fo);
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
    let list = match load(tx, ip)? {
        Form::None | Form::Empty => return Err(Error::NoAttr),
        Form::Short(l) => l,
        Form::Blocks => return Err(not_yet("removexattr")),
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

/// The data fork must keep what it uses when the attr fork starts at
/// `fo` * 8 (a fork that would have to change form is not done here).
fn check_data_fits(d: &[u8], fo: u8) -> Result<()> {
    let room = fo as usize * 8;
    match di::format(d) {
        FMT_DEV => Ok(()),
        FMT_LOCAL | FMT_EXTENTS if forkoff::data_bytes(d) <= room => Ok(()),
        FMT_BTREE if di::forkoff(d) == fo => Ok(()),
        _ => Err(Error::NotSupported(
            "adding an attr fork that needs the data fork converted (issue 4)".into(),
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
