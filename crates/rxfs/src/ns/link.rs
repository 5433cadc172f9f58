//! Namespace operations that make links: link, symlink and O_TMPFILE.
//!
//! | op      | parent                       | inode                              |
//! |---------|------------------------------|------------------------------------|
//! | link    | + entry, mtime = ctime = now | nlink + 1, ctime; off the unlinked |
//! |         |                              | list if it was an O_TMPFILE inode  |
//! | symlink | + entry, times               | new, S_IFLNK, target inline (LOCAL |
//! |         |                              | fork) or in remote blocks          |
//! | tmpfile | nothing (times unchanged)    | new, nlink 0, on the unlinked list |
//!
//! A remote symlink target is written into blocks allocated near the inode
//! (one contiguous extent when possible), one 56-byte `XSLM` header per
//! contiguous run, as [`crate::format::symlink`] describes; the blocks are
//! new metadata buffers logged whole.
//!
//! As in [`super`], everything that can fail is checked before the
//! first change (names, types, link counts, room in the directory).

use super::{check_parent, ftype_of, new_inode, touch_parent, NsCreate, MAXLINK};
use crate::alloc::{alloc_extent, AllocReq};
use crate::dir::{check_name, dir_add_from, dir_add_prepared, dir_can_add, dir_lookup};
use crate::error::{Error, Result};
use crate::format::bmbt::{Extent, EXTENT_REC_SIZE};
use crate::format::bufkind::BufKind;
use crate::format::dinode_edit as di;
use crate::format::inode::{Timestamp, FMT_EXTENTS, FMT_LOCAL};
use crate::format::symlink::{SYMLINK_HDR_SIZE, SYMLINK_MAGIC, SYMLINK_MAXLEN};
use crate::format::xflags::{flags_allow, Change};
use crate::format::{put_be32, put_be64};
use crate::types::{FileBlock, FileType, Ino};
use crate::xact::{InodeId, MetaTx};

/// Add the link `name` in `dp` to the joined non-directory inode `ip`.
/// An inode with no links (an O_TMPFILE inode, which the caller vouches
/// for with `linkable`) is first taken off the unlinked list, with `prev`
/// its predecessor there (see [`crate::ialloc::unlinked::remove`]):
/// `Ok(false)` asks the caller to find the predecessor again and retry.
pub fn link(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    ip: InodeId,
    name: &[u8],
    now: Timestamp,
    linkable: bool,
    prev: Option<InodeId>,
) -> Result<bool> {
    check_name(name)?;
    check_parent(tx, dp)?;
    // The kernel's order: an existing name first (the VFS finds it before
    // the filesystem is asked), then a directory source.
    if name == b"." || name == b".." || dir_lookup(tx, dp, name)?.is_some() {
        return Err(Error::Exists);
    }
    let d = tx.inode(ip);
    let ino = Ino(di::ino(d));
    let mode = di::mode(d) as u32;
    if mode & di::S_IFMT == di::S_IFDIR {
        return Err(Error::Perm);
    }
    let nlink = di::nlink(d);
    if nlink >= MAXLINK {
        return Err(Error::TooManyLinks);
    }
    if nlink == 0 && !linkable {
        return Err(Error::NotFound);
    }
    // No entry in an immutable directory; no new link to an immutable or
    // append-only file.
    flags_allow(di::flags(tx.inode(dp)), Change::AddEntry)?;
    flags_allow(di::flags(tx.inode(ip)), Change::Unlink)?;
    dir_can_add(tx, dp, name, ino)?;
    if nlink == 0 {
        use crate::ialloc::unlinked::{remove, Removed};
        if let Removed::Retry(_) = remove(tx, ip, prev)? {
            return Ok(false);
        }
    }
    let (_, ftype) = ftype_of(mode)?;
    dir_add_from(tx, dp, name, ino, ftype, false)?;
    touch_parent(tx, dp, now, 0);
    let d = tx.inode_mut(ip);
    di::set_nlink(d, nlink + 1);
    di::set_ctime(d, now);
    di::bump_changecount(d, 1);
    Ok(true)
}

/// Create the symbolic link `name` in `dp` pointing at `target`
/// (1..=1024 bytes, no NUL). `args.mode`'s type and permission bits are
/// replaced by `S_IFLNK | 0777`. Targets of 1024 bytes or more are
/// `NameTooLong`, as in the kernel (xfs_repair rejects them).
pub fn symlink(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    name: &[u8],
    target: &[u8],
    args: &NsCreate,
) -> Result<(Ino, InodeId)> {
    if target.is_empty() || target.contains(&0) {
        return Err(Error::Invalid("empty symlink target or NUL in it".into()));
    }
    if target.len() as u64 >= SYMLINK_MAXLEN {
        return Err(Error::NameTooLong);
    }
    let mut a = *args;
    a.mode = di::S_IFLNK | 0o777;
    let (ino, ip, add) = new_inode(tx, dp, name, &a, 1)?;
    if target.len() <= di::data_fork_size(tx.inode(ip)) {
        let d = tx.inode_mut(ip);
        di::set_format(d, FMT_LOCAL);
        let fork = di::data_fork_mut(d);
        fork.fill(0);
        fork[..target.len()].copy_from_slice(target);
        di::set_nextents(d, 0);
    } else {
        write_remote(tx, ip, ino, target)?;
    }
    di::set_size(tx.inode_mut(ip), target.len() as u64);
    dir_add_prepared(
        tx,
        dp,
        add,
        name,
        ino,
        FileType::Symlink.to_ftype(),
        args.alloc_from_ag0,
    )?;
    touch_parent(tx, dp, args.time, 0);
    Ok((ino, ip))
}

/// Allocate the blocks of a remote target and write it (one header per
/// contiguous run).
fn write_remote(tx: &mut dyn MetaTx, ip: InodeId, ino: Ino, target: &[u8]) -> Result<()> {
    let g = tx.geo().clone();
    let bs = g.blocksize;
    let need = crate::format::symlink::remote_blocks(target.len() as u32, bs);
    let mut exts: Vec<Extent> = Vec::new();
    let mut got = 0u32;
    while got < need {
        let req = AllocReq {
            agno: g.ino_agno(ino),
            near: Some(g.agino_agbno(g.ino_agino(ino))),
            minlen: 1,
            maxlen: need - got,
            align: 1,
            any_ag: true,
            meta: true,
        };
        let e = alloc_extent(tx, &req)?;
        let fsb = g.agb_to_fsb(e.agno, e.agbno);
        crate::rmap::rmap_alloc(
            tx,
            e.agno,
            e.agbno,
            e.len,
            &crate::rmap::RmapOwner::File {
                ino,
                fork: crate::types::WhichFork::Data,
                offset: got as u64,
                bmbt: false,
                unwritten: false,
            },
        )?;
        exts.push(Extent {
            off: FileBlock(got as u64),
            start: fsb.0,
            len: e.len as u64,
            unwritten: false,
        });
        got += e.len;
    }
    if exts.len() * EXTENT_REC_SIZE > di::data_fork_size(tx.inode(ip)) {
        return Err(Error::NoSpace);
    }
    let uuid = tx.sb().metadata_uuid();
    let mut done = 0usize;
    for e in &exts {
        let daddr = g.fsb_to_daddr(crate::types::FsBlock(e.start));
        let len = e.len as usize * bs as usize;
        let n = (len - SYMLINK_HDR_SIZE).min(target.len() - done);
        let b = tx.new_buf(daddr, len, BufKind::Symlink)?;
        let buf = tx.buf_mut(b);
        put_be32(buf, 0, SYMLINK_MAGIC);
        put_be32(buf, 4, done as u32);
        put_be32(buf, 8, n as u32);
        buf[16..32].copy_from_slice(&uuid);
        put_be64(buf, 32, ino.0);
        put_be64(buf, 40, daddr.0);
        buf[SYMLINK_HDR_SIZE..SYMLINK_HDR_SIZE + n].copy_from_slice(&target[done..done + n]);
        tx.log_buf(b, 0..len);
        done += n;
    }
    let d = tx.inode_mut(ip);
    di::set_format(d, FMT_EXTENTS);
    let fork = di::data_fork_mut(d);
    fork.fill(0);
    for (i, e) in exts.iter().enumerate() {
        e.encode(&mut fork[i * EXTENT_REC_SIZE..(i + 1) * EXTENT_REC_SIZE]);
    }
    di::set_nextents(d, exts.len() as u64);
    let nb = di::nblocks(d) + need as u64;
    di::set_nblocks(d, nb);
    Ok(())
}

/// Create an unnamed regular file (O_TMPFILE) for directory `dp`: link
/// count 0, on the unlinked list until it is linked or freed.
pub fn tmpfile(tx: &mut dyn MetaTx, dp: InodeId, args: &NsCreate) -> Result<(Ino, InodeId)> {
    let (ft, _) = ftype_of(args.mode)?;
    if ft != FileType::Regular {
        return Err(Error::Invalid("O_TMPFILE of a non-regular file".into()));
    }
    unnamed_inode(tx, dp, args, true)
}

/// The whiteout of a `RENAME_WHITEOUT` (as XFS makes it): a character
/// device 0:0 with mode 0, owned by `args`' uid and gid, made unnamed on
/// the unlinked list like an O_TMPFILE (no ACL inherited), which the
/// rename's own transaction then takes off the list and names.
pub fn whiteout(tx: &mut dyn MetaTx, dp: InodeId, args: &NsCreate) -> Result<(Ino, InodeId)> {
    let args = NsCreate {
        mode: di::S_IFCHR,
        rdev: 0,
        ..*args
    };
    unnamed_inode(tx, dp, &args, false)
}

fn unnamed_inode(
    tx: &mut dyn MetaTx,
    dp: InodeId,
    args: &NsCreate,
    acl: bool,
) -> Result<(Ino, InodeId)> {
    check_parent(tx, dp)?;
    let parent = Ino(di::ino(tx.inode(dp)));
    let init = crate::ialloc::NewInode {
        mode: args.mode,
        uid: args.uid,
        gid: args.gid,
        rdev: 0,
        nlink: 0,
        time: args.time,
    };
    let (ino, ip) = crate::ialloc::ialloc_from(tx, parent, &init, args.alloc_from_ag0)?;
    if acl {
        crate::attr::acl::inherit(tx, dp, ip, args.umask, args.time)?;
    }
    crate::ialloc::unlinked::add(tx, ip)?;
    Ok((ino, ip))
}
