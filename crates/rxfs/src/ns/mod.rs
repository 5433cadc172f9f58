//! Namespace operations on a transaction: create, mkdir, unlink, rmdir.
//!
//! Each one checks everything that can fail (names, existence, types, link
//! counts, room in the directory, forms it cannot free) before it changes
//! anything, then allocates or frees the inode ([`crate::ialloc`]), edits
//! the directory ([`super`]), and updates link counts and times:
//!
//! | op     | parent                        | child                          |
//! |--------|-------------------------------|--------------------------------|
//! | create | + entry, mtime = ctime = now  | new, nlink 1                   |
//! | mkdir  | + entry, nlink + 1, times     | new shortform dir, nlink 2     |
//! | unlink | - entry, times                | nlink - 1, ctime; freed at 0   |
//! | rmdir  | - entry, nlink - 1, times     | must be empty; nlink 0, freed  |
//!
//! The caller holds the inode locks of the parent and (for unlink/rmdir)
//! the child, and has joined the parent. An inode whose link count drops
//! to 0 is freed in the same transaction (its data blocks through
//! [`crate::bmap::free_range`], then [`crate::ialloc::ifree`], and its chunk
//! when that left the chunk all free), unless
//! the caller says it is still open ([`unlink_with`], [`rmdir_with`]): then
//! it goes on the AGI unlinked list ([`crate::ialloc::unlinked`]) and the
//! last close frees it. link, symlink and O_TMPFILE are in [`link`].

pub mod link;
pub mod rename;

use crate::dir::{
    check_name, dir_add_prepared, dir_init, dir_is_empty, dir_lookup, dir_prepare_add, dir_remove,
    PreparedAdd,
};
use crate::error::{Error, Location, Result};
use crate::format::dinode_edit as di;
use crate::format::inode::{Timestamp, DIFLAG2_REFLINK, FMT_BTREE, FMT_EXTENTS, FMT_LOCAL};
use crate::format::xflags::{flags_allow, Change};
use crate::ialloc::{ifree, NewInode};
use crate::types::{AgIno, AgNumber, FileBlock, FileType, Ino};
use crate::xact::{InodeId, MetaTx};

/// Most links an inode may have (the kernel's limit).
pub const MAXLINK: u32 = 0x7fff_ffff;

/// What to create (mode has the file type bits).
#[derive(Debug, Clone, Copy)]
pub struct NsCreate {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Device number in the XFS encoding (major << 18 | minor).
    pub rdev: u32,
    /// Permission bits to clear when the parent has no default ACL.
    pub umask: u32,
    pub time: Timestamp,
    /// Look for a directory block from AG 0 on (the retry after
    /// `NoSpace`, see [`crate::dir::dir_add_from`]).
    pub alloc_from_ag0: bool,
}

/// The directory `dp` must still be linked (not removed under us).
pub(super) fn check_parent(tx: &dyn MetaTx, dp: InodeId) -> Result<()> {
    let d = tx.inode(dp);
    if di::mode(d) as u32 & di::S_IFMT != di::S_IFDIR {
        return Err(Error::NotDir);
    }
    if di::nlink(d) == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}

/// The inode flags' verdict on removing (or renaming away) `ip`'s entry
/// in `dp`: EPERM if the directory is immutable or append-only, or `ip`
/// itself is (see [`crate::format::xflags::flags_allow`]). Checked once
/// the entry is found and before its type is.
pub(crate) fn check_removal(tx: &dyn MetaTx, dp: InodeId, ip: InodeId) -> Result<()> {
    flags_allow(di::flags(tx.inode(dp)), Change::RemoveEntry)?;
    flags_allow(di::flags(tx.inode(ip)), Change::Unlink)
}

/// Largest inode number the filesystem can have: the directory-room check
/// assumes the new inode gets one as wide as that.
fn widest_ino(tx: &dyn MetaTx) -> Ino {
    let g = tx.geo();
    let agino_max = ((1u64 << g.agino_log()) - 1) as u32;
    g.agino_to_ino(AgNumber(g.agcount - 1), AgIno(agino_max))
}

pub(super) fn touch_parent(tx: &mut dyn MetaTx, dp: InodeId, now: Timestamp, nlink_delta: i32) {
    let d = tx.inode_mut(dp);
    di::set_mtime(d, now);
    di::set_ctime(d, now);
    di::bump_changecount(d, 1);
    if nlink_delta != 0 {
        let n = di::nlink(d).saturating_add_signed(nlink_delta);
        di::set_nlink(d, n);
    }
}

pub(super) fn new_inode(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    args: &NsCreate,
    nlink: u32,
) -> Result<(Ino, InodeId, PreparedAdd)> {
    check_name(name)?;
    check_parent(tx, dp)?;
    // `Exists` first (as the VFS's lookup comes first), then the flags.
    let wide = widest_ino(tx);
    let add = dir_prepare_add(tx, dp, name, wide)?;
    flags_allow(di::flags(tx.inode(dp)), Change::AddEntry)?;
    let parent = Ino(di::ino(tx.inode(dp)));
    let init = NewInode {
        mode: args.mode,
        uid: args.uid,
        gid: args.gid,
        rdev: args.rdev,
        nlink,
        time: args.time,
    };
    let (ino, ip) = crate::ialloc::ialloc_from(tx, parent, &init, args.alloc_from_ag0)?;
    Ok((ino, ip, add))
}

pub(super) fn ftype_of(mode: u32) -> Result<(FileType, u8)> {
    let ft = FileType::from_mode(mode as u16)
        .ok_or_else(|| Error::Invalid(format!("mode {mode:#o} has no file type")))?;
    Ok((ft, ft.to_ftype()))
}

/// Create a non-directory inode (regular file, device, FIFO, socket) named
/// `name` in `dp`. Returns the new inode.
pub fn create(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    args: &NsCreate,
) -> Result<(Ino, InodeId)> {
    let (ft, ftype) = ftype_of(args.mode)?;
    if matches!(ft, FileType::Directory | FileType::Symlink) {
        return Err(Error::Invalid(format!("create of a {ft:?}")));
    }
    let (ino, ip, add) = new_inode(tx, dp, name, args, 1)?;
    crate::attr::acl::inherit(tx, dp, ip, args.umask, args.time)?;
    dir_add_prepared(tx, dp, add, name, ino, ftype, args.alloc_from_ag0)?;
    touch_parent(tx, dp, args.time, 0);
    Ok((ino, ip))
}

/// Create a directory named `name` in `dp`.
pub fn mkdir(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    args: &NsCreate,
) -> Result<(Ino, InodeId)> {
    let (ft, ftype) = ftype_of(args.mode)?;
    if ft != FileType::Directory {
        return Err(Error::Invalid("mkdir of a non-directory mode".into()));
    }
    if di::nlink(tx.inode(dp)) >= MAXLINK {
        return Err(Error::TooManyLinks);
    }
    let parent = Ino(di::ino(tx.inode(dp)));
    let (ino, ip, add) = new_inode(tx, dp, name, args, 2)?;
    dir_init(tx, ip, parent)?;
    crate::attr::acl::inherit(tx, dp, ip, args.umask, args.time)?;
    dir_add_prepared(tx, dp, add, name, ino, ftype, args.alloc_from_ag0)?;
    touch_parent(tx, dp, args.time, 1);
    Ok((ino, ip))
}

/// Refuse (before anything changes) to free an inode whose blocks this
/// code cannot give back.
pub(super) fn check_can_free(tx: &dyn MetaTx, ip: InodeId) -> Result<()> {
    let d = tx.inode(ip);
    let mapped = matches!(di::format(d), FMT_EXTENTS | FMT_BTREE);
    if mapped && di::flags2(d) & DIFLAG2_REFLINK != 0 {
        return Err(Error::NotSupported(
            "freeing blocks of a reflinked file".into(),
        ));
    }
    Ok(())
}

/// Free the blocks and then the inode `ip` (link count 0).
pub fn inactivate(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino) -> Result<()> {
    check_can_free(tx, ip)?;
    if matches!(di::format(tx.inode(ip)), FMT_EXTENTS | FMT_BTREE) {
        stale_meta_blocks(tx, ip)?;
        crate::bmap::free_range(tx, ip, FileBlock(0))?;
    }
    free_attr_blocks(tx, ip)?;
    let d = tx.inode_mut(ip);
    if di::nblocks(d) != 0 {
        return Err(Error::corrupt(
            "inode",
            Location::Ino(ino.0),
            format!("{} blocks left after freeing its forks", di::nblocks(d)),
        ));
    }
    di::set_size(d, 0);
    ifree(tx, ip, ino)?;
    // An inode chunk left all free goes back to free space, as the
    // kernel does (unless mounted ikeep, which rxfs has not).
    let g = tx.geo();
    let (agno, agino) = (g.ino_agno(ino), g.ino_agino(ino).0);
    crate::ialloc::free_chunk_if_empty(tx, agno, agino)?;
    Ok(())
}

/// Free every block of the attr fork of `ip` (leaf, node and remote value
/// blocks, their buffers cancelled first) when it is in block form.
fn free_attr_blocks(tx: &mut dyn MetaTx, ip: InodeId) -> Result<()> {
    let d = tx.inode(ip);
    if di::forkoff(d) == 0 || di::aformat(d) == FMT_LOCAL {
        return Ok(());
    }
    let map = crate::bmap::attrfork::attr_map(tx, ip)?;
    let bs = tx.geo().blocksize as usize;
    for e in &map.exts {
        for i in 0..e.len {
            let daddr = tx.geo().fsb_to_daddr(crate::types::FsBlock(e.start + i));
            let b = tx.new_buf(daddr, bs, crate::format::bufkind::BufKind::AttrLeaf)?;
            tx.stale_buf(b);
        }
    }
    let end = map.exts.last().map_or(0, |e| e.end());
    crate::bmap::attrfork::attr_free(tx, ip, FileBlock(0), end)
}

/// Cancel the buffers of the metadata blocks a symlink or directory maps
/// (a symlink: one buffer per extent, as [`link`] wrote them; a
/// directory: one per directory block) before the blocks are freed: a
/// cached metadata buffer must neither shadow nor overwrite what reuses
/// them. Regular files map data only.
fn stale_meta_blocks(tx: &mut dyn MetaTx, ip: InodeId) -> Result<()> {
    let fmt = di::mode(tx.inode(ip)) as u32 & di::S_IFMT;
    if fmt != di::S_IFLNK && fmt != di::S_IFDIR {
        return Ok(());
    }
    let exts = crate::bmap::read_map(tx, ip)?;
    let bs = tx.geo().blocksize as usize;
    let fsbs = crate::dir::dir_geo(tx).fsbs() as u64;
    for e in exts {
        if fmt == di::S_IFLNK {
            let daddr = tx.geo().fsb_to_daddr(crate::types::FsBlock(e.start));
            let b = tx.new_buf(
                daddr,
                e.len as usize * bs,
                crate::format::bufkind::BufKind::Symlink,
            )?;
            tx.stale_buf(b);
            continue;
        }
        // Directory blocks start at file offsets that are multiples of
        // the directory block size.
        let mut off = e.off.0.div_ceil(fsbs) * fsbs;
        while off + fsbs <= e.off.0 + e.len {
            let fsb = crate::types::FsBlock(e.start + (off - e.off.0));
            let daddr = tx.geo().fsb_to_daddr(fsb);
            let b = tx.new_buf(
                daddr,
                fsbs as usize * bs,
                crate::format::bufkind::BufKind::DirData,
            )?;
            tx.stale_buf(b);
            off += fsbs;
        }
    }
    Ok(())
}

/// Look up the child `name` of `dp` and join it.
pub(super) fn child(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8]) -> Result<(Ino, InodeId)> {
    let ino = dir_lookup(tx, dp, name)?.ok_or(Error::NotFound)?;
    if !tx.geo().ino_valid(ino) {
        return Err(Error::corrupt(
            "directory entry",
            Location::Ino(di::ino(tx.inode(dp))),
            format!("inode number {} out of range", ino.0),
        ));
    }
    let ip = tx.ijoin(ino)?;
    if di::mode(tx.inode(ip)) == 0 || di::nlink(tx.inode(ip)) == 0 {
        return Err(Error::corrupt(
            "directory entry",
            Location::Ino(ino.0),
            "entry names a free inode",
        ));
    }
    Ok((ino, ip))
}

/// Remove the non-directory entry `name` from `dp`; frees the inode when
/// its link count reaches 0. Returns the child's inode number.
pub fn unlink(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], now: Timestamp) -> Result<Ino> {
    unlink_with(tx, dp, name, now, &|_| false)
}

/// [`unlink`]; an inode for which `open` says true keeps its blocks when
/// its last link goes and is put on the unlinked list instead.
pub fn unlink_with(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    now: Timestamp,
    open: &dyn Fn(Ino) -> bool,
) -> Result<Ino> {
    check_name(name)?;
    check_parent(tx, dp)?;
    if name == b"." || name == b".." {
        return Err(Error::IsDir);
    }
    let (ino, ip) = child(tx, dp, name)?;
    check_removal(tx, dp, ip)?;
    if di::mode(tx.inode(ip)) as u32 & di::S_IFMT == di::S_IFDIR {
        return Err(Error::IsDir);
    }
    let last = di::nlink(tx.inode(ip)) == 1;
    let keep = last && open(ino);
    if last && !keep {
        check_can_free(tx, ip)?;
    }
    if last {
        // AGI before any AGF (lock order), as in rmdir; then the AGFs the
        // rmap edits of the directory block and the freed data take.
        crate::ialloc::lock_agi(tx, ino)?;
        let chunk_ag = [tx.geo().ino_agno(ino)];
        let (forks, also): (&[InodeId], &[AgNumber]) = if keep {
            (&[dp], &[])
        } else {
            (&[dp, ip], &chunk_ag)
        };
        crate::bmap::prelock_fork_agfs(tx, forks, also)?;
    }
    dir_remove(tx, dp, name)?;
    touch_parent(tx, dp, now, 0);
    let d = tx.inode_mut(ip);
    let n = di::nlink(d) - 1;
    di::set_nlink(d, n);
    di::set_ctime(d, now);
    di::bump_changecount(d, 1);
    if keep {
        crate::ialloc::unlinked::add(tx, ip)?;
    } else if last {
        inactivate(tx, ip, ino)?;
    }
    Ok(ino)
}

/// Remove the empty directory `name` from `dp` and free it. Returns the
/// child's inode number.
pub fn rmdir(tx: &mut dyn MetaTx, dp: InodeId, name: &[u8], now: Timestamp) -> Result<Ino> {
    rmdir_with(tx, dp, name, now, &|_| false)
}

/// [`rmdir`]; a directory for which `open` says true goes on the unlinked
/// list instead of being freed.
pub fn rmdir_with(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    now: Timestamp,
    open: &dyn Fn(Ino) -> bool,
) -> Result<Ino> {
    check_name(name)?;
    check_parent(tx, dp)?;
    if name == b"." {
        return Err(Error::Invalid("rmdir of .".into()));
    }
    if name == b".." {
        return Err(Error::NotEmpty);
    }
    let (ino, ip) = child(tx, dp, name)?;
    check_removal(tx, dp, ip)?;
    if di::mode(tx.inode(ip)) as u32 & di::S_IFMT != di::S_IFDIR {
        return Err(Error::NotDir);
    }
    if !dir_is_empty(tx, ip)? {
        return Err(Error::NotEmpty);
    }
    let keep = open(ino);
    if !keep {
        check_can_free(tx, ip)?;
    }
    // AGI before any AGF (lock order): freeing the inode or putting it on
    // an unlinked list takes the AGI; the rmap edits below take AGFs.
    crate::ialloc::lock_agi(tx, ino)?;
    let chunk_ag = [tx.geo().ino_agno(ino)];
    let also: &[AgNumber] = if keep { &[] } else { &chunk_ag };
    crate::bmap::prelock_fork_agfs(tx, &[dp], also)?;
    dir_remove(tx, dp, name)?;
    touch_parent(tx, dp, now, -1);
    let d = tx.inode_mut(ip);
    di::set_nlink(d, 0);
    di::set_ctime(d, now);
    di::bump_changecount(d, 1);
    if keep {
        crate::ialloc::unlinked::add(tx, ip)?;
    } else {
        inactivate(tx, ip, ino)?;
    }
    Ok(ino)
}
