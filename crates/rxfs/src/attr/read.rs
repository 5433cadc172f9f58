//! Extended attributes of a mounted filesystem: listing and lookup in every
//! attribute fork shape, remote values, and POSIX ACLs, with the answers the
//! Linux kernel gives (seen by a privileged caller).
//!
//! Fork shapes (see [`crate::format::attr`]): no fork or an empty one;
//! shortform (inline); leaf (attr block 0 is a leaf); node (attr block 0 is
//! a DA node over leaves chained by `forw`). A btree-format attr fork is
//! flattened into extents at inode load and handled like the others.
//!
//! What Linux shows:
//! - names are "user.", "trusted." or "security." plus the on-disk name;
//!   parent pointers and INCOMPLETE entries are never shown;
//! - the ACL attributes `trusted.SGI_ACL_FILE` / `trusted.SGI_ACL_DEFAULT`
//!   are listed twice: as `system.posix_acl_access` / `..._default` (just
//!   before the trusted name), and under their trusted name;
//! - the list comes in on-disk order (shortform order, then hash order
//!   leaf by leaf);
//! - `trusted.*` names are visible only to privileged callers: this layer
//!   lists them all, and the FUSE edge filters with
//!   [`xattr_needs_privilege`].
//!
//! Bounds: every walk visits each attr fork block at most once (visited
//! set) and at most as many blocks as the fork maps; node descents stop at
//! the DA depth limit with levels strictly decreasing; values are at most
//! 64 KiB.

use std::collections::HashSet;

use crate::error::{Error, Location, Result};
use crate::format::attr::{self, AttrEntry, AttrValue, Leaf, Namespace};
use crate::format::attr_acl;
use crate::format::attr_remote;
use crate::format::da::{self, DA3_NODE_MAGIC, DA_NODE_MAXDEPTH};
use crate::inode::{Fork, Inode, ReadCtx};
use crate::types::{Daddr, FileBlock, FileType, ForkKind};

/// Longest full xattr name Linux accepts (prefix included).
pub const XATTR_NAME_MAX: usize = 255;

/// Whether Linux shows the attribute `name` only to privileged callers
/// (CAP_SYS_ADMIN): the trusted namespace.
pub fn xattr_needs_privilege(name: &[u8]) -> bool {
    name.starts_with(b"trusted.")
}

/// The block-based part of an attr fork: block 0 decoded, or nothing.
enum Root {
    Leaf(Leaf),
    Node(Daddr, Vec<u8>),
}

/// Full names of every attribute, as `listxattr(2)` run by root shows
/// them (see the module docs for the rules).
pub fn listxattr(fs: &(impl ReadCtx + ?Sized), ip: &Inode) -> Result<Vec<Vec<u8>>> {
    let held = fs.read_locked(ip)?;
    let ip: &Inode = &held;
    let mut out = Vec::new();
    for_each_attr(fs, ip, &mut |e| {
        if e.incomplete() {
            return;
        }
        let ns = e.namespace();
        if ns == Namespace::Trusted {
            if let Some(acl) = attr_acl::acl_xattr_name(&e.name) {
                out.push(acl.to_vec());
            }
        }
        if let Some(full) = attr::full_name(ns, &e.name) {
            out.push(full);
        }
    })?;
    Ok(out)
}

/// Value of attribute `name` (full name, e.g. b"user.foo" or
/// b"system.posix_acl_access"), as `getxattr(2)` run by root returns it.
/// `Err(NoAttr)` when absent; `Err(NotSupported)` for a namespace Linux
/// does not know here; `Err(Invalid)` for an empty name after the
/// prefix; `Err(Range)` for a name over 255 bytes.
pub fn getxattr(fs: &(impl ReadCtx + ?Sized), ip: &Inode, name: &[u8]) -> Result<Vec<u8>> {
    if name.len() > XATTR_NAME_MAX {
        return Err(Error::Range);
    }
    let held = fs.read_locked(ip)?;
    let ip: &Inode = &held;
    if let Some(disk) = attr_acl::acl_disk_name(name) {
        if ip.file_type() == Some(FileType::Symlink) {
            return Err(Error::NotSupported("ACLs on a symlink".into()));
        }
        let e = lookup_attr(fs, ip, Namespace::Trusted, disk)?.ok_or(Error::NoAttr)?;
        let v = attr_value(fs, ip, &e)?;
        return attr_acl::xfs_acl_to_xattr(&v, ip.ino);
    }
    let (ns, short) = attr::split_name(name).ok_or_else(|| {
        Error::NotSupported(format!(
            "xattr namespace of {:?}",
            String::from_utf8_lossy(name)
        ))
    })?;
    if short.is_empty() {
        return Err(Error::Invalid("empty attribute name".into()));
    }
    // Linux hides user attributes of anything but files and directories.
    if ns == Namespace::User
        && !matches!(
            ip.file_type(),
            Some(FileType::Regular | FileType::Directory)
        )
    {
        return Err(Error::NoAttr);
    }
    let e = lookup_attr(fs, ip, ns, short)?.ok_or(Error::NoAttr)?;
    attr_value(fs, ip, &e)
}

/// Call `f` for every attribute entry in on-disk order (INCOMPLETE and
/// parent entries included; callers filter).
fn for_each_attr(
    fs: &(impl ReadCtx + ?Sized),
    ip: &Inode,
    f: &mut dyn FnMut(&AttrEntry),
) -> Result<()> {
    match &ip.attr {
        None => Ok(()),
        Some(Fork::Local(b)) => {
            attr::decode_shortform(b, ip.ino)?.iter().for_each(f);
            Ok(())
        }
        Some(Fork::Dev(_)) => Err(attr_corrupt(ip, "device-format attr fork")),
        Some(Fork::Extents { list, .. }) if list.is_empty() => Ok(()),
        Some(Fork::Extents { .. }) => match attr_root(fs, ip)? {
            Root::Leaf(l) => {
                l.entries.iter().for_each(f);
                Ok(())
            }
            Root::Node(daddr, buf) => {
                let mut seen = HashSet::new();
                let (mut blk, mut leaf) = descend(fs, ip, daddr, buf, None, &mut seen)?;
                loop {
                    leaf.entries.iter().for_each(&mut *f);
                    let next = leaf.hdr.info.forw;
                    if next == 0 {
                        return Ok(());
                    }
                    leaf =
                        read_leaf(fs, ip, next, &mut seen).map_err(|e| chain_error(ip, blk, e))?;
                    blk = next;
                }
            }
        },
    }
}

/// Find the complete attribute `name` in namespace `ns`.
fn lookup_attr(
    fs: &(impl ReadCtx + ?Sized),
    ip: &Inode,
    ns: Namespace,
    name: &[u8],
) -> Result<Option<AttrEntry>> {
    let find = |entries: Vec<AttrEntry>| entries.into_iter().find(|e| e.matches(ns, name));
    match &ip.attr {
        None => Ok(None),
        Some(Fork::Local(b)) => Ok(find(attr::decode_shortform(b, ip.ino)?)),
        Some(Fork::Dev(_)) => Err(attr_corrupt(ip, "device-format attr fork")),
        Some(Fork::Extents { list, .. }) if list.is_empty() => Ok(None),
        Some(Fork::Extents { .. }) => match attr_root(fs, ip)? {
            Root::Leaf(l) => Ok(find(l.entries)),
            Root::Node(daddr, buf) => {
                let hash = da::hashname(name);
                let mut seen = HashSet::new();
                let (_, mut leaf) = descend(fs, ip, daddr, buf, Some(hash), &mut seen)?;
                loop {
                    let last = leaf.last_hash();
                    let next = leaf.hdr.info.forw;
                    if let Some(e) = leaf
                        .entries
                        .into_iter()
                        .find(|e| e.hashval == hash && e.matches(ns, name))
                    {
                        return Ok(Some(e));
                    }
                    // Equal hashes may continue in the next leaf.
                    if last != hash || next == 0 {
                        return Ok(None);
                    }
                    leaf = read_leaf(fs, ip, next, &mut seen)?;
                }
            }
        },
    }
}

/// The value of an attribute entry, reading remote blocks if needed.
fn attr_value(fs: &(impl ReadCtx + ?Sized), ip: &Inode, e: &AttrEntry) -> Result<Vec<u8>> {
    let (blk, len) = match &e.value {
        AttrValue::Local(v) => return Ok(v.clone()),
        AttrValue::Remote { blk, len } => (*blk, *len),
    };
    let bs = fs.geo().blocksize;
    let nblocks = attr_remote::rmt_blocks(len, bs);
    if blk == 0 || blk as u64 + nblocks as u64 > attr_fork_end(ip) {
        return Err(attr_corrupt(
            ip,
            format!("remote value of {len} bytes at attr block {blk}"),
        ));
    }
    let uuid = fs.sb().metadata_uuid();
    let mut value = Vec::with_capacity(len as usize);
    for i in 0..nblocks {
        let (daddr, buf) = read_attr_block(fs, ip, blk + i)?;
        let off = value.len() as u32;
        let part = attr_remote::verify_attr_rmt_block(&buf, daddr, ip.ino, &uuid, off, len - off)?;
        value.extend_from_slice(part);
    }
    debug_assert_eq!(value.len(), len as usize);
    Ok(value)
}

/// Read attr fork block 0 and tell a leaf from a node.
fn attr_root(fs: &(impl ReadCtx + ?Sized), ip: &Inode) -> Result<Root> {
    let (daddr, buf) = read_attr_block(fs, ip, 0)?;
    match attr::block_magic(&buf) {
        Some(attr::ATTR3_LEAF_MAGIC) => Ok(Root::Leaf(verify_leaf(fs, ip, daddr, &buf)?)),
        Some(DA3_NODE_MAGIC) => Ok(Root::Node(daddr, buf)),
        m => Err(Error::corrupt(
            "attr fork",
            Location::Daddr(daddr.0),
            format!("block 0 has magic {m:#x?}, neither a leaf nor a node"),
        )),
    }
}

/// Walk down from the node `buf` (attr block 0 at `daddr`) to a leaf:
/// the leftmost one, or with `hash`, the one that would hold it.
/// Returns the leaf's attr block number and the leaf.
fn descend(
    fs: &(impl ReadCtx + ?Sized),
    ip: &Inode,
    mut daddr: Daddr,
    mut buf: Vec<u8>,
    hash: Option<u32>,
    seen: &mut HashSet<u32>,
) -> Result<(u32, Leaf)> {
    let uuid = fs.sb().metadata_uuid();
    let mut blk = 0u32;
    seen.insert(0);
    let mut want_level: Option<u16> = None;
    for _ in 0..=DA_NODE_MAXDEPTH {
        if want_level == Some(0) {
            let leaf = verify_leaf(fs, ip, daddr, &buf)?;
            return Ok((blk, leaf));
        }
        let node = da::decode_node(&buf, daddr, ip.ino, &uuid)?;
        if want_level.is_some_and(|l| l != node.level) {
            return Err(Error::corrupt(
                "attr da node",
                Location::Daddr(daddr.0),
                format!("level {}, parent expects {want_level:?}", node.level),
            ));
        }
        want_level = Some(node.level - 1);
        let pick = match hash {
            None => node.entries[0],
            Some(h) => *node
                .entries
                .iter()
                .find(|e| e.hashval >= h)
                .unwrap_or(&node.entries[node.entries.len() - 1]),
        };
        blk = pick.before;
        if !seen.insert(blk) {
            return Err(attr_corrupt(ip, format!("attr block {blk} reached twice")));
        }
        (daddr, buf) = read_attr_block(fs, ip, blk)?;
    }
    Err(attr_corrupt(
        ip,
        "attr DA tree deeper than the format allows",
    ))
}

/// Read and verify the leaf at attr block `blk`, refusing a block the
/// walk has already visited.
fn read_leaf(
    fs: &(impl ReadCtx + ?Sized),
    ip: &Inode,
    blk: u32,
    seen: &mut HashSet<u32>,
) -> Result<Leaf> {
    if !seen.insert(blk) || seen.len() as u64 > attr_fork_blocks(ip) {
        return Err(attr_corrupt(
            ip,
            format!("leaf chain loops at attr block {blk}"),
        ));
    }
    let (daddr, buf) = read_attr_block(fs, ip, blk)?;
    verify_leaf(fs, ip, daddr, &buf)
}

fn verify_leaf(fs: &(impl ReadCtx + ?Sized), ip: &Inode, daddr: Daddr, buf: &[u8]) -> Result<Leaf> {
    attr::decode_leaf(buf, daddr, ip.ino, &fs.sb().metadata_uuid())
}

/// One attr fork block; a hole where a block must be is corruption.
fn read_attr_block(fs: &(impl ReadCtx + ?Sized), ip: &Inode, blk: u32) -> Result<(Daddr, Vec<u8>)> {
    fs.read_fork_blocks(ip, ForkKind::Attr, FileBlock(blk as u64), 1)?
        .ok_or_else(|| attr_corrupt(ip, format!("attr block {blk} is a hole")))
}

/// One past the last attr fork block mapped (the fork may have holes
/// where blocks were freed).
fn attr_fork_end(ip: &Inode) -> u64 {
    ip.attr
        .as_ref()
        .and_then(|f| f.extents().last().map(|e| e.off.0 + e.len))
        .unwrap_or(0)
}

/// Blocks the attr fork maps (a bound for every walk).
fn attr_fork_blocks(ip: &Inode) -> u64 {
    ip.attr
        .as_ref()
        .map_or(0, |f| f.extents().iter().map(|e| e.len).sum())
}

fn attr_corrupt(ip: &Inode, detail: impl Into<String>) -> Error {
    Error::corrupt("attr fork", Location::Ino(ip.ino.0), detail)
}

/// Name the link that led to a bad leaf when following `forw`.
fn chain_error(ip: &Inode, from: u32, e: Error) -> Error {
    match e {
        Error::Corrupt { what, at, detail } => Error::Corrupt {
            what,
            at,
            detail: format!(
                "{detail} (reached from attr block {from} of inode {})",
                ip.ino.0
            ),
        },
        e => e,
    }
}
