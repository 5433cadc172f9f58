//! Decoding an on-disk inode (dinode) into an in-core [`Inode`]: the core
//! through its verifier, then each fork by its format.
//!
//! Btree-format forks are flattened here into the sorted extent list (the
//! bmbt is walked once, every block read through its verifier, no block
//! reached twice), so readers see one shape. Every extent list is checked:
//! nonzero lengths, offsets below 2^54, sorted, non-overlapping, inside the
//! data or (for realtime files) the realtime device.

use crate::error::{Error, Location, Result};
use crate::format::bmbt;
use crate::format::inode::{self as dinode, FMT_BTREE, FMT_DEV, FMT_EXTENTS, FMT_LOCAL};
use crate::inode::{Fork, Inode, ReadCtx};
use crate::types::{ForkKind, FsBlock, Ino};

/// Largest file offset in blocks an extent may reach (2^54).
const MAX_FILEOFF: u64 = 1 << 54;
/// Deepest bmbt XFS can build.
const BMBT_MAXLEVELS: u16 = 9;

/// Decode inode `ino` from its on-disk bytes (`inodesize` of them),
/// forks included, without asking the inode btree whether it is
/// allocated (checkers that walk the chunks already know).
pub(crate) fn decode_inode(fs: &(impl ReadCtx + ?Sized), ino: Ino, buf: &[u8]) -> Result<Inode> {
    decode_inode_known(fs, ino, buf, None)
}

/// [`decode_inode`], given the extent list of a BTREE-format data fork
/// when the caller holds it in core, decoded and checked, for exactly
/// these dinode bytes (a directory's kept index, `dir::skel`): the bmbt is
/// then not walked. Its length must be the dinode's extent count.
pub(crate) fn decode_inode_known(
    fs: &(impl ReadCtx + ?Sized),
    ino: Ino,
    buf: &[u8],
    data_exts: Option<Vec<bmbt::Extent>>,
) -> Result<Inode> {
    let isize = buf.len();
    let core = dinode::decode_core(buf, ino, &fs.sb().metadata_uuid(), fs.sb().has_nrext64())?;
    if core.mode == 0 {
        return Err(Error::corrupt(
            "inode",
            Location::Ino(ino.0),
            "allocated in the inode btree but free on disk (mode 0)",
        ));
    }
    let realtime = core.flags & dinode::DIFLAG_REALTIME != 0;
    let dsize = core.data_fork_size(isize);
    let dfork = &buf[dinode::DINODE_V3_CORE_SIZE..dinode::DINODE_V3_CORE_SIZE + dsize];
    let known = data_exts.filter(|l| core.format == FMT_BTREE && l.len() as u64 == core.nextents);
    let data = if let Some(list) = known {
        Fork::Extents { list, btree: true }
    } else {
        decode_fork(
            fs,
            ino,
            &core,
            ForkKind::Data,
            core.format,
            dfork,
            core.nextents,
            realtime,
        )?
    };
    let attr = if core.forkoff != 0 {
        let aoff = core.attr_fork_offset();
        let afork = &buf[aoff..isize];
        Some(decode_fork(
            fs,
            ino,
            &core,
            ForkKind::Attr,
            core.aformat,
            afork,
            core.anextents as u64,
            false,
        )?)
    } else {
        None
    };
    Ok(Inode {
        ino,
        core,
        data,
        attr,
    })
}

/// Decode the attributes of inode `ino` from its on-disk bytes: the core
/// through its verifier and a device's number, not the forks (see
/// [`crate::inode::InodeAttrs`]).
pub(crate) fn decode_attrs(
    fs: &(impl ReadCtx + ?Sized),
    ino: Ino,
    buf: &[u8],
) -> Result<crate::inode::InodeAttrs> {
    let core = dinode::decode_core(buf, ino, &fs.sb().metadata_uuid(), fs.sb().has_nrext64())?;
    if core.mode == 0 {
        return Err(Error::corrupt(
            "inode",
            Location::Ino(ino.0),
            "allocated in the inode btree but free on disk (mode 0)",
        ));
    }
    let at = dinode::DINODE_V3_CORE_SIZE;
    let is_dev = matches!(
        crate::types::FileType::from_mode(core.mode),
        Some(crate::types::FileType::CharDev | crate::types::FileType::BlockDev)
    );
    let rdev = if is_dev && core.format == FMT_DEV {
        if core.data_fork_size(buf.len()) < 4 {
            return Err(Error::corrupt(
                "inode data fork",
                Location::Ino(ino.0),
                "no room for a device number",
            ));
        }
        Some(crate::format::be32(buf, at))
    } else {
        None
    };
    Ok(crate::inode::InodeAttrs { ino, core, rdev })
}

#[allow(clippy::too_many_arguments)]
fn decode_fork(
    fs: &(impl ReadCtx + ?Sized),
    ino: Ino,
    core: &dinode::InodeCore,
    kind: ForkKind,
    format: u8,
    fork: &[u8],
    nextents: u64,
    realtime: bool,
) -> Result<Fork> {
    let at = Location::Ino(ino.0);
    let what = match kind {
        ForkKind::Data => "inode data fork",
        ForkKind::Attr => "inode attr fork",
    };
    match format {
        FMT_DEV if kind == ForkKind::Data => {
            if fork.len() < 4 {
                return Err(Error::corrupt(what, at, "no room for a device number"));
            }
            Ok(Fork::Dev(crate::format::be32(fork, 0)))
        }
        FMT_LOCAL => {
            let len = match kind {
                ForkKind::Data => core.size,
                // Shortform attributes carry their own total size.
                ForkKind::Attr => fork.len() as u64,
            };
            if len > fork.len() as u64 {
                return Err(Error::corrupt(
                    what,
                    at,
                    format!("local fork of {len} bytes in {} bytes of space", fork.len()),
                ));
            }
            Ok(Fork::Local(fork[..len as usize].to_vec()))
        }
        FMT_EXTENTS => {
            let max = fork.len() / bmbt::EXTENT_REC_SIZE;
            if nextents > max as u64 {
                return Err(Error::corrupt(
                    what,
                    at,
                    format!("{nextents} extents in a fork holding at most {max}"),
                ));
            }
            let list: Vec<_> = (0..nextents as usize)
                .map(|i| bmbt::Extent::decode(&fork[i * 16..]))
                .collect();
            check_extents(fs, ino, what, &list, realtime)?;
            Ok(Fork::Extents { list, btree: false })
        }
        FMT_BTREE => {
            let list = load_bmbt(fs, ino, what, fork, nextents, realtime)?;
            Ok(Fork::Extents { list, btree: true })
        }
        f => Err(Error::corrupt(what, at, format!("bad fork format {f}"))),
    }
}

/// Check an extent list: valid addresses, sorted, non-overlapping.
fn check_extents(
    fs: &(impl ReadCtx + ?Sized),
    ino: Ino,
    what: &'static str,
    list: &[bmbt::Extent],
    realtime: bool,
) -> Result<()> {
    let geo = fs.geo();
    let at = Location::Ino(ino.0);
    let mut next_off = 0u64;
    for (i, e) in list.iter().enumerate() {
        if e.len == 0
            || e.off
                .0
                .checked_add(e.len)
                .is_none_or(|end| end > MAX_FILEOFF)
        {
            return Err(Error::corrupt(
                what,
                at,
                format!("extent {i}: bad offset/length {e:?}"),
            ));
        }
        if e.off.0 < next_off {
            return Err(Error::corrupt(
                what,
                at,
                format!("extent {i} overlaps or is out of order"),
            ));
        }
        let ok = if realtime {
            geo.rt_extent_valid(crate::types::RtBlock(e.start), e.len)
        } else {
            geo.fsb_extent_valid(FsBlock(e.start), e.len)
        };
        if !ok {
            return Err(Error::corrupt(
                what,
                at,
                format!("extent {i} points outside the device: {e:?}"),
            ));
        }
        next_off = e.end();
    }
    Ok(())
}

/// Walk a bmbt rooted in the inode fork and return every extent record.
fn load_bmbt(
    fs: &(impl ReadCtx + ?Sized),
    ino: Ino,
    what: &'static str,
    root: &[u8],
    nextents: u64,
    realtime: bool,
) -> Result<Vec<bmbt::Extent>> {
    let geo = fs.geo();
    let at = Location::Ino(ino.0);
    if root.len() < 4 {
        return Err(Error::corrupt(what, at, "btree root too small"));
    }
    let level = bmbt::root_level(root);
    let numrecs = bmbt::root_numrecs(root) as usize;
    let maxrecs = bmbt::root_maxrecs(root.len());
    if level == 0 || level > BMBT_MAXLEVELS || numrecs == 0 || numrecs > maxrecs {
        return Err(Error::corrupt(
            what,
            at,
            format!("bad btree root: level {level}, {numrecs} records (max {maxrecs})"),
        ));
    }
    // An extent list can never be longer than the blocks it maps.
    let limit = if realtime { geo.rblocks } else { geo.dblocks };
    if nextents > limit {
        return Err(Error::corrupt(
            what,
            at,
            format!("{nextents} extents on a {limit}-block device"),
        ));
    }
    let mut out = Vec::with_capacity(nextents.min(1 << 20) as usize);
    let mut visited = std::collections::HashSet::new();
    let ptr_off = 4 + maxrecs * 8;
    for i in 0..numrecs {
        let ptr = crate::format::be64(root, ptr_off + i * 8);
        walk_bmbt_block(
            fs,
            ino,
            what,
            FsBlock(ptr),
            level - 1,
            &mut visited,
            &mut out,
            nextents,
        )?;
    }
    if out.len() as u64 != nextents {
        return Err(Error::corrupt(
            what,
            at,
            format!("btree holds {} extents, inode says {nextents}", out.len()),
        ));
    }
    check_extents(fs, ino, what, &out, realtime)?;
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn walk_bmbt_block(
    fs: &(impl ReadCtx + ?Sized),
    ino: Ino,
    what: &'static str,
    fsb: FsBlock,
    level: u16,
    visited: &mut std::collections::HashSet<u64>,
    out: &mut Vec<bmbt::Extent>,
    nextents: u64,
) -> Result<()> {
    let geo = fs.geo();
    let at = Location::Ino(ino.0);
    if !geo.fsb_extent_valid(fsb, 1) {
        return Err(Error::corrupt(
            what,
            at,
            format!("bmbt pointer {} out of range", fsb.0),
        ));
    }
    if !visited.insert(fsb.0) {
        return Err(Error::corrupt(
            what,
            at,
            format!("bmbt block {} reached twice", fsb.0),
        ));
    }
    let daddr = geo.fsb_to_daddr(fsb);
    let bs = geo.blocksize as usize;
    let uuid = fs.sb().metadata_uuid();
    let buf = fs.read_meta(daddr, bs, |b, d| {
        bmbt::verify_block(b, d, ino, &uuid, level)
    })?;
    let numrecs = crate::format::be16(&buf, 6) as usize;
    if level == 0 {
        if out.len() as u64 + numrecs as u64 > nextents {
            return Err(Error::corrupt(
                "bmbt block",
                Location::Daddr(daddr.0),
                "more extents than the inode counts",
            ));
        }
        for i in 0..numrecs {
            out.push(bmbt::Extent::decode(&buf[bmbt::LBLOCK_HDR_SIZE + i * 16..]));
        }
        return Ok(());
    }
    let maxrecs = bmbt::block_maxrecs(bs, false);
    let ptr_off = bmbt::LBLOCK_HDR_SIZE + maxrecs * 8;
    for i in 0..numrecs {
        let ptr = crate::format::be64(&buf, ptr_off + i * 8);
        walk_bmbt_block(
            fs,
            ino,
            what,
            FsBlock(ptr),
            level - 1,
            visited,
            out,
            nextents,
        )?;
    }
    Ok(())
}
