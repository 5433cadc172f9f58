//! Extended attributes on disk: namespaces, the shortform (inline) list and
//! the v3 attribute leaf block. Remote value blocks live in
//! [`super::attr_remote`], the POSIX ACL value format in [`super::attr_acl`],
//! and interior DA node blocks (shared with directories) in [`super::da`].
//!
//! An inode's attribute fork takes one of three shapes:
//! - **shortform** (fork format "local"): a small list inside the inode;
//! - **leaf**: attr fork block 0 is a leaf block (magic `0x3bee`), possibly
//!   followed by remote value blocks;
//! - **node**: attr fork block 0 is a DA node (magic `0x3ebe`) whose
//!   children are more nodes or leaf blocks, chained left to right by the
//!   blkinfo `forw`/`back` links.
//!
//! Attr fork blocks are always one filesystem block (unlike directories,
//! attributes ignore the directory block size).
//!
//! Shortform list (big-endian; no alignment, no hash):
//! ```text
//! 0 totsize u16 (header + all entries)   2 count u8   3 pad u8
//! 4 entry: namelen u8, valuelen u8, flags u8, name[namelen], value[valuelen]
//!   ... `count` entries packed back to back, ending exactly at totsize
//! ```
//!
//! v3 leaf block (header 80 bytes):
//! ```text
//!  0 blkinfo (56 bytes, see super::da)     56 count u16    58 usedbytes u16
//! 60 firstused u16 (0 = the block size, for 64 KiB blocks)  62 holes u8
//! 63 pad u8   64 freemap[3] {base u16, size u16}   76 pad u32
//! 80 entries[count] {hashval u32, nameidx u16, flags u8, pad u8}
//!    ... free space ...
//! firstused.. name/value records, each 4-byte aligned, at entry.nameidx:
//!   local  (flags & LOCAL): valuelen u16, namelen u8, name, value
//!          size = round_up(3 + namelen + valuelen, 4)
//!   remote (no LOCAL):      valueblk u32, valuelen u32, namelen u8, name
//!          size = round_up(11 + namelen, 4); the value lives in attr fork
//!          blocks valueblk.. (see super::attr_remote)
//! ```
//!
//! Entry flags: LOCAL 0x01, ROOT 0x02 ("trusted."), SECURE 0x04
//! ("security."), PARENT 0x08 (directory parent pointers, never shown to
//! users), INCOMPLETE 0x80 (an attribute whose value was still being written
//! when the system stopped: it does not exist yet). No namespace bit means
//! "user.". At most one namespace bit may be set.
//!
//! Invariants the decoders enforce (anything else is `Error::Corrupt`):
//! leaf entries are sorted by hashval; the entry table ends at or before
//! `firstused`; every name/value record starts in `[firstused, blocksize)`
//! and ends inside the block; names are non-empty and contain no NUL;
//! remote values are at most [`XATTR_SIZE_MAX`] bytes; shortform entries
//! fill exactly `totsize` bytes.

use super::crc::Sum;
use super::da::{self, BlkInfo};
use super::{be16, be32, Uuid};
use crate::error::{Error, Location, Result};
use crate::types::{Daddr, Ino};

/// The value is stored in the leaf block itself.
pub const ATTR_LOCAL: u8 = 0x01;
/// "trusted." namespace.
pub const ATTR_ROOT: u8 = 0x02;
/// "security." namespace.
pub const ATTR_SECURE: u8 = 0x04;
/// Parent pointer (internal, never listed).
pub const ATTR_PARENT: u8 = 0x08;
/// Attribute being created or removed: treated as absent.
pub const ATTR_INCOMPLETE: u8 = 0x80;
/// The namespace bits of an on-disk flags byte.
pub const ATTR_NSP_ONDISK_MASK: u8 = ATTR_ROOT | ATTR_SECURE | ATTR_PARENT;

/// Largest attribute value Linux allows (and XFS stores).
pub const XATTR_SIZE_MAX: u32 = 65536;
/// Longest attribute name (without namespace prefix): a u8 on disk.
pub const ATTR_NAME_MAX: usize = 255;

pub const SF_HDR_SIZE: usize = 4;
pub const SF_ENTRY_HDR_SIZE: usize = 3;

pub const ATTR3_LEAF_MAGIC: u16 = 0x3bee;
pub const ATTR3_LEAF_HDR_SIZE: usize = 80;
pub const ATTR_LEAF_ENTRY_SIZE: usize = 8;
pub const ATTR_LEAF_MAPSIZE: usize = 3;
const LOCAL_NAME_HDR: usize = 3;
const REMOTE_NAME_HDR: usize = 9;

/// The namespace an attribute belongs to, from its on-disk flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Namespace {
    User,
    Trusted,
    Security,
    /// Directory parent pointers (internal metadata).
    Parent,
}

impl Namespace {
    /// The namespace of an on-disk flags byte; `None` if more than one
    /// namespace bit is set.
    pub fn from_flags(flags: u8) -> Option<Self> {
        match flags & ATTR_NSP_ONDISK_MASK {
            0 => Some(Namespace::User),
            ATTR_ROOT => Some(Namespace::Trusted),
            ATTR_SECURE => Some(Namespace::Security),
            ATTR_PARENT => Some(Namespace::Parent),
            _ => None,
        }
    }

    /// The on-disk namespace bits.
    pub fn flags(self) -> u8 {
        match self {
            Namespace::User => 0,
            Namespace::Trusted => ATTR_ROOT,
            Namespace::Security => ATTR_SECURE,
            Namespace::Parent => ATTR_PARENT,
        }
    }

    /// The Linux xattr name prefix; `None` for internal namespaces.
    pub fn prefix(self) -> Option<&'static [u8]> {
        match self {
            Namespace::User => Some(b"user."),
            Namespace::Trusted => Some(b"trusted."),
            Namespace::Security => Some(b"security."),
            Namespace::Parent => None,
        }
    }
}

/// Split a full Linux xattr name ("user.foo") into the XFS namespace and
/// the on-disk name. `None` for prefixes XFS does not store under a
/// namespace of its own (e.g. "system.").
pub fn split_name(full: &[u8]) -> Option<(Namespace, &[u8])> {
    [Namespace::User, Namespace::Trusted, Namespace::Security]
        .into_iter()
        .find_map(|ns| {
            let p = ns.prefix()?;
            full.strip_prefix(p).map(|rest| (ns, rest))
        })
}

/// The full Linux name of an on-disk attribute; `None` for internal ones.
pub fn full_name(ns: Namespace, name: &[u8]) -> Option<Vec<u8>> {
    let p = ns.prefix()?;
    let mut v = Vec::with_capacity(p.len() + name.len());
    v.extend_from_slice(p);
    v.extend_from_slice(name);
    Some(v)
}

/// Where an attribute's value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrValue {
    /// Stored beside the name.
    Local(Vec<u8>),
    /// `len` bytes in remote value blocks starting at attr fork block `blk`.
    Remote { blk: u32, len: u32 },
}

/// One decoded attribute (shortform entry or leaf entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrEntry {
    /// On-disk flags (namespace, LOCAL, INCOMPLETE).
    pub flags: u8,
    pub name: Vec<u8>,
    /// Name hash as stored in a leaf entry (0 for shortform entries, which
    /// store none).
    pub hashval: u32,
    pub value: AttrValue,
}

impl AttrEntry {
    pub fn namespace(&self) -> Namespace {
        // Decoders reject entries with several namespace bits.
        Namespace::from_flags(self.flags).unwrap_or(Namespace::User)
    }
    pub fn incomplete(&self) -> bool {
        self.flags & ATTR_INCOMPLETE != 0
    }
    /// Whether this is the complete attribute `name` in namespace `ns`.
    pub fn matches(&self, ns: Namespace, name: &[u8]) -> bool {
        !self.incomplete() && self.namespace() == ns && self.name == name
    }
}

/// Check an on-disk name: non-empty, no NUL byte (parent pointer names are
/// binary records and exempt), namespace bits valid.
fn check_name(flags: u8, name: &[u8]) -> std::result::Result<(), String> {
    let Some(ns) = Namespace::from_flags(flags) else {
        return Err(format!("several namespace bits in flags {flags:#x}"));
    };
    if name.is_empty() {
        return Err("empty name".into());
    }
    if ns != Namespace::Parent && name.contains(&0) {
        return Err("NUL byte in name".into());
    }
    Ok(())
}

/// Decode a shortform attribute list. `fork` holds the inode's attribute
/// fork bytes (at least `totsize` of them; trailing bytes are ignored).
/// Returns every entry, in on-disk order.
pub fn decode_shortform(fork: &[u8], ino: Ino) -> Result<Vec<AttrEntry>> {
    const WHAT: &str = "shortform attributes";
    let at = Location::Ino(ino.0);
    let bad = |d: String| Error::corrupt(WHAT, at, d);
    if fork.len() < SF_HDR_SIZE {
        return Err(bad(format!("fork of {} bytes", fork.len())));
    }
    let totsize = be16(fork, 0) as usize;
    let count = fork[2] as usize;
    if totsize < SF_HDR_SIZE || totsize > fork.len() {
        return Err(bad(format!("totsize {totsize} outside 4..={}", fork.len())));
    }
    let list = &fork[..totsize];
    let mut off = SF_HDR_SIZE;
    // count is a u8: at most 255 entries, each at least 4 bytes.
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        if off + SF_ENTRY_HDR_SIZE > totsize {
            return Err(bad(format!("entry {i} header past totsize {totsize}")));
        }
        let namelen = list[off] as usize;
        let valuelen = list[off + 1] as usize;
        let flags = list[off + 2];
        let name_at = off + SF_ENTRY_HDR_SIZE;
        let end = name_at + namelen + valuelen;
        if end > totsize {
            return Err(bad(format!(
                "entry {i} at {off} ends at {end}, past totsize {totsize}"
            )));
        }
        let name = &list[name_at..name_at + namelen];
        check_name(flags, name).map_err(|d| bad(format!("entry {i}: {d}")))?;
        out.push(AttrEntry {
            flags,
            name: name.to_vec(),
            hashval: 0,
            value: AttrValue::Local(list[name_at + namelen..end].to_vec()),
        });
        off = end;
    }
    if off != totsize {
        return Err(bad(format!(
            "{count} entries end at {off}, totsize says {totsize}"
        )));
    }
    Ok(out)
}

/// Bytes one shortform entry takes (header, name, value).
pub fn sf_entsize(namelen: usize, valuelen: usize) -> usize {
    SF_ENTRY_HDR_SIZE + namelen + valuelen
}

/// Bytes a shortform list of `entries` takes (header included).
pub fn sf_totsize(entries: &[AttrEntry]) -> usize {
    SF_HDR_SIZE
        + entries
            .iter()
            .map(|e| match &e.value {
                AttrValue::Local(v) => sf_entsize(e.name.len(), v.len()),
                AttrValue::Remote { .. } => 0,
            })
            .sum::<usize>()
}

/// Encode a shortform attribute list (the inverse of
/// [`decode_shortform`]). Every entry must be local with name and value
/// shorter than 256 bytes and at most 255 entries; the caller checks
/// (a violation is a bug: debug assertion, and the entry is skipped).
pub fn encode_shortform(entries: &[AttrEntry]) -> Vec<u8> {
    let mut out = vec![0u8; SF_HDR_SIZE];
    let mut count = 0u8;
    for e in entries {
        let AttrValue::Local(v) = &e.value else {
            debug_assert!(false, "remote value in a shortform list");
            continue;
        };
        debug_assert!(e.name.len() <= 255 && v.len() <= 255 && count < 255);
        out.push(e.name.len() as u8);
        out.push(v.len() as u8);
        out.push(e.flags & !ATTR_LOCAL & !ATTR_INCOMPLETE);
        out.extend_from_slice(&e.name);
        out.extend_from_slice(v);
        count += 1;
    }
    let tot = out.len() as u16;
    out[0..2].copy_from_slice(&tot.to_be_bytes());
    out[2] = count;
    out
}

/// Decoded v3 leaf header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafHdr {
    pub info: BlkInfo,
    pub count: u16,
    pub usedbytes: u16,
    /// First byte of the name/value area (0 on disk is decoded as the block
    /// size, which only 64 KiB blocks need).
    pub firstused: u32,
    pub holes: u8,
    pub freemap: [(u16, u16); ATTR_LEAF_MAPSIZE],
}

/// A decoded, verified attribute leaf block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub hdr: LeafHdr,
    /// Every entry in hash order, INCOMPLETE ones included.
    pub entries: Vec<AttrEntry>,
}

impl Leaf {
    /// The largest hash in the block (0 if empty).
    pub fn last_hash(&self) -> u32 {
        self.entries.last().map_or(0, |e| e.hashval)
    }
}

/// Round `n` up to a multiple of 4 (the name/value record alignment).
fn round4(n: usize) -> usize {
    (n + 3) & !3
}

/// Bytes a local name/value record takes in a leaf block.
pub fn leaf_entsize_local(namelen: usize, valuelen: usize) -> usize {
    round4(LOCAL_NAME_HDR + namelen + valuelen)
}

/// Bytes a remote name record takes in a leaf block.
pub fn leaf_entsize_remote(namelen: usize) -> usize {
    // Historical layout: the 9 fixed bytes plus 2 bytes of struct padding.
    round4(REMOTE_NAME_HDR + 2 + namelen)
}

/// Verify and decode an attribute leaf block of attr fork `owner` read at
/// `daddr` (the block is `buf.len()` bytes, one filesystem block).
pub fn decode_leaf(buf: &[u8], daddr: Daddr, owner: Ino, uuid: &Uuid) -> Result<Leaf> {
    const WHAT: &str = "attr leaf";
    let info = da::verify_blkinfo(WHAT, buf, ATTR3_LEAF_MAGIC, daddr, owner, uuid, Sum::Verify)?;
    let at = Location::Daddr(daddr.0);
    let bad = |d: String| Error::corrupt(WHAT, at, d);
    let bsize = buf.len();
    if bsize < ATTR3_LEAF_HDR_SIZE {
        return Err(bad(format!("block of {bsize} bytes")));
    }
    let count = be16(buf, 56);
    let usedbytes = be16(buf, 58);
    let raw_firstused = be16(buf, 60) as usize;
    let firstused = if raw_firstused == 0 {
        bsize
    } else {
        raw_firstused
    };
    let holes = buf[62];
    let mut freemap = [(0u16, 0u16); ATTR_LEAF_MAPSIZE];
    for (i, m) in freemap.iter_mut().enumerate() {
        let (base, size) = (be16(buf, 64 + 4 * i), be16(buf, 66 + 4 * i));
        let end = base as usize + size as usize;
        if base % 4 != 0 || size % 4 != 0 || end > bsize {
            return Err(bad(format!(
                "freemap[{i}] base {base} size {size} in a {bsize}-byte block"
            )));
        }
        *m = (base, size);
    }
    if firstused < ATTR3_LEAF_HDR_SIZE || firstused > bsize {
        return Err(bad(format!("firstused {firstused}")));
    }
    let table_end = ATTR3_LEAF_HDR_SIZE + count as usize * ATTR_LEAF_ENTRY_SIZE;
    if table_end > firstused {
        return Err(bad(format!(
            "{count} entries run into the name area at {firstused}"
        )));
    }
    let mut entries = Vec::with_capacity(count as usize);
    let mut last_hash = 0u32;
    for i in 0..count as usize {
        let e = ATTR3_LEAF_HDR_SIZE + i * ATTR_LEAF_ENTRY_SIZE;
        let hashval = be32(buf, e);
        let nameidx = be16(buf, e + 4) as usize;
        let flags = buf[e + 6];
        if hashval < last_hash {
            return Err(bad(format!("entry {i}: hash order broken")));
        }
        last_hash = hashval;
        if nameidx < firstused || nameidx >= bsize {
            return Err(bad(format!(
                "entry {i}: nameidx {nameidx} outside {firstused}..{bsize}"
            )));
        }
        let entry = decode_leaf_name(buf, nameidx, flags, hashval)
            .map_err(|d| bad(format!("entry {i} at {nameidx}: {d}")))?;
        entries.push(entry);
    }
    Ok(Leaf {
        hdr: LeafHdr {
            info,
            count,
            usedbytes,
            firstused: firstused as u32,
            holes,
            freemap,
        },
        entries,
    })
}

/// Decode the name/value record of one leaf entry at `at` (already known
/// to be inside the block).
fn decode_leaf_name(
    buf: &[u8],
    at: usize,
    flags: u8,
    hashval: u32,
) -> std::result::Result<AttrEntry, String> {
    let bsize = buf.len();
    let (name, value) = if flags & ATTR_LOCAL != 0 {
        if at + LOCAL_NAME_HDR > bsize {
            return Err("local record header past the block end".into());
        }
        let valuelen = be16(buf, at) as usize;
        let namelen = buf[at + 2] as usize;
        if at + leaf_entsize_local(namelen, valuelen) > bsize {
            return Err(format!(
                "local record (name {namelen}, value {valuelen} bytes) past the block end"
            ));
        }
        let n = at + LOCAL_NAME_HDR;
        let v = n + namelen;
        (&buf[n..v], AttrValue::Local(buf[v..v + valuelen].to_vec()))
    } else {
        if at + REMOTE_NAME_HDR > bsize {
            return Err("remote record header past the block end".into());
        }
        let blk = be32(buf, at);
        let len = be32(buf, at + 4);
        let namelen = buf[at + 8] as usize;
        if at + leaf_entsize_remote(namelen) > bsize {
            return Err(format!(
                "remote record (name {namelen} bytes) past the block end"
            ));
        }
        if len > XATTR_SIZE_MAX {
            return Err(format!("remote value of {len} bytes"));
        }
        let n = at + REMOTE_NAME_HDR;
        (&buf[n..n + namelen], AttrValue::Remote { blk, len })
    };
    check_name(flags, name)?;
    Ok(AttrEntry {
        flags,
        name: name.to_vec(),
        hashval,
        value,
    })
}

/// The DA magic of an attr fork block (at offset 8 of its blkinfo), to
/// tell a leaf root from a node root before verifying. `None` if short.
pub fn block_magic(buf: &[u8]) -> Option<u16> {
    (buf.len() >= 10).then(|| be16(buf, 8))
}

#[cfg(test)]
#[path = "attr_tests.rs"]
mod tests;
