//! Inode flags and the other `struct fsxattr` fields (extent size hints,
//! project id) of a read-write mount, and the filesystem label: what `chattr`/`lsattr` and
//! `xfs_io chattr/lsattr/extsize/cowextsize` read and change, stored as
//! XFS stores them (`di_flags`, `di_flags2`, `di_extsize`,
//! `di_cowextsize`, `di_projid`; mapping in [`crate::format::xflags`]).
//!
//! [`Filesystem::set_fsxattr`] applies XFS's own checks (the VFS's, such
//! as CAP_LINUX_IMMUTABLE for `i`/`a` and "an extent size hint only on a
//! regular file", are the caller's: the kernel makes them before a FUSE
//! daemon is asked) and changes the inode in one transaction, which also
//! sets ctime and, for a caller without CAP_FSETID, drops set-uid and
//! set-gid (as XFS does).
//!
//! What the flags forbid is enforced where the change is made, under the
//! inode lock ([`flags_allow`] in the directory, link, rename, xattr and
//! fallocate transactions), and by the FUSE front end for what only the
//! VFS knows (opens for writing, path vs descriptor truncates, times set
//! to "now"): immutable refuses every change of the inode (data, size,
//! attributes, xattrs, links, entries of a directory), append-only every
//! change but appending writes and new entries, both with EPERM; a
//! descriptor opened for writing before the flag was set still writes,
//! as on XFS. `sync` makes every write to the file a data-integrity
//! write (the FUSE front end forces it before answering).
//!
//! The label (`sb_fname`, at most 12 bytes, NUL-padded): what
//! `xfs_io -c label`, `xfs_admin -L` and `blkid` show.
//!
//! Invariant: the label in memory ([`Filesystem::label`]) is the one in
//! the primary superblock as of the last committed change. A change
//! ([`Filesystem::set_label`]) rewrites the label of every AG's
//! superblock (the kernel rewrites the secondaries too, so `xfs_repair`
//! and a recovery from a secondary see the same) in one logged
//! transaction, and forces the log before it returns (XFS makes the
//! change synchronous); nothing is written in place behind the log.

use super::Filesystem;
use crate::cred::Cred;
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::format::dinode_edit::{self as di, MAX_EXTLEN};
use crate::format::inode::{
    DIFLAG2_COWEXTSIZE, DIFLAG2_REFLINK, DIFLAG_EXTSIZE, DIFLAG_EXTSZINHERIT, DIFLAG_REALTIME,
};
use crate::format::xflags::*;
pub use crate::format::xflags::{flags_allow, Change};
use crate::types::{AgBlock, AgNumber, Ino};
use crate::xact::{MetaTx, Resv};

/// `struct fsxattr`: flags, hints in bytes, the data fork's extent count
/// (reported, never set), project id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsXattr {
    pub xflags: u32,
    pub extsize: u32,
    pub nextents: u32,
    pub projid: u32,
    pub cowextsize: u32,
}

impl Filesystem {
    /// The fsxattr of `ino`.
    pub fn get_fsxattr(&self, ino: Ino) -> Result<FsXattr> {
        let ip = self.iget(ino)?;
        let ip = self.read_locked(&ip)?;
        let c = &ip.core;
        let bs = self.geo().blocksize;
        // The hints are reported only while their flags are set.
        let hint = c.flags & (DIFLAG_EXTSIZE | DIFLAG_EXTSZINHERIT) != 0;
        let cow = c.flags2 & DIFLAG2_COWEXTSIZE != 0;
        Ok(FsXattr {
            xflags: xflags_of(c.flags, c.flags2, c.forkoff != 0),
            extsize: if hint {
                c.extsize.saturating_mul(bs)
            } else {
                0
            },
            nextents: c.nextents.min(u32::MAX as u64) as u32,
            projid: c.projid,
            cowextsize: if cow {
                c.cowextsize.saturating_mul(bs)
            } else {
                0
            },
        })
    }

    /// Set the flags, hints and project id of `ino` to `new` (its
    /// `nextents` ignored), made by `who`. `fsx`: through the fsxattr
    /// interface (FSSETXATTR), which also validates the hints and drops
    /// set-uid/set-gid for a caller without CAP_FSETID; otherwise
    /// (SETFLAGS) `new` carries the inode's own hints and project id.
    pub fn set_fsxattr(&self, ino: Ino, new: &FsXattr, fsx: bool, who: &Cred) -> Result<()> {
        let _lock = self.ilock(ino)?;
        let mut tx = self.trans_alloc(Resv::SetAttr)?;
        let geo = self.geo().clone();
        let has_rt = self.sb().rblocks > 0 && self.sb().rextsize > 0;
        let r = tx.ijoin(ino).and_then(|ip| {
            let d = tx.inode(ip);
            let mode = di::mode(d) as u32;
            let fmt = mode & di::S_IFMT;
            let flags = di::flags(d);
            let flags2 = di::flags2(d);
            let nextents = di::nextents(d);
            let bs = geo.blocksize;
            // The hints (FSSETXATTR only; SETFLAGS keeps them): a zero
            // hint clears its flags; a non-zero one needs its flag (as the
            // file's type keeps it), whole blocks (realtime extents for a
            // realtime file), at most MAX_EXTLEN blocks and, off the
            // realtime device, half an AG; a file with extents keeps its
            // extent size hint. The CoW hint needs reflink.
            let mut x = new.xflags;
            if fsx {
                if new.extsize == 0 {
                    x &= !(XFLAG_EXTSIZE | XFLAG_EXTSZINHERIT);
                }
                if new.cowextsize == 0 {
                    x &= !XFLAG_COWEXTSIZE;
                }
                let nflags = diflags_from_xflags(flags, x, fmt);
                let bad = |what: &str| Err(Error::Invalid(format!("bad {what}")));
                if fmt == di::S_IFREG
                    && nextents > 0
                    && new.extsize != di::extsize(d).saturating_mul(bs)
                {
                    return bad("extent size hint: the file has extents");
                }
                if new.extsize != 0 {
                    let rt = flags & DIFLAG_REALTIME != 0 || x & XFLAG_REALTIME != 0;
                    let unit = if rt { geo_rext_bytes(self) } else { bs };
                    let fsb = new.extsize / bs;
                    if nflags & (DIFLAG_EXTSIZE | DIFLAG_EXTSZINHERIT) == 0
                        || !new.extsize.is_multiple_of(unit)
                        || fsb > MAX_EXTLEN
                        || (!rt && fsb > geo.agblocks / 2)
                    {
                        return bad("extent size hint");
                    }
                }
                if new.cowextsize != 0 {
                    let fsb = new.cowextsize / bs;
                    if x & XFLAG_COWEXTSIZE == 0
                        || !self.sb().has_reflink()
                        || !new.cowextsize.is_multiple_of(bs)
                        || fsb > MAX_EXTLEN
                        || fsb > geo.agblocks / 2
                    {
                        return bad("CoW extent size hint");
                    }
                }
            }
            if new.projid > 0xffff && !self.sb().has_projid32() {
                return Err(Error::Invalid(
                    "32-bit project id without projid32bit".into(),
                ));
            }
            // The realtime flag: only on a filesystem with a realtime
            // section, never changed while the file has extents.
            let rt_now = flags & DIFLAG_REALTIME != 0;
            let rt_new = x & XFLAG_REALTIME != 0 && fmt == di::S_IFREG;
            if nextents > 0 && rt_now != rt_new {
                return Err(Error::Invalid(
                    "realtime flag of a file with extents".into(),
                ));
            }
            if rt_new && !has_rt {
                return Err(Error::Invalid(
                    "realtime flag without a realtime section".into(),
                ));
            }
            // A realtime file's hint is whole rt extents (the kernel:
            // xfs_ioctl_setattr_xflags).
            let hint = if fsx {
                new.extsize / bs
            } else {
                di::extsize(d)
            };
            if rt_new && hint % self.sb().rextsize.max(1) != 0 {
                return Err(Error::Invalid(
                    "realtime flag with an extent size hint that is not whole rt extents".into(),
                ));
            }
            if x & XFLAG_DAX != 0 && flags2 & DIFLAG2_REFLINK != 0 {
                return Err(Error::Invalid("DAX on a reflinked file".into()));
            }
            let nflags = diflags_from_xflags(flags, x, fmt);
            let nflags2 = diflags2_from_xflags(flags2, x);
            let d = tx.inode_mut(ip);
            di::set_flags(d, nflags);
            di::set_flags2(d, nflags2);
            if fsx {
                let hint = nflags & (DIFLAG_EXTSIZE | DIFLAG_EXTSZINHERIT) != 0;
                di::set_extsize(d, if hint { new.extsize / bs } else { 0 });
                let cow = nflags2 & DIFLAG2_COWEXTSIZE != 0;
                di::set_cowextsize(d, if cow { new.cowextsize / bs } else { 0 });
                di::set_projid(d, new.projid);
                if !who.fsetid && mode & (di::S_ISUID | di::S_ISGID) != 0 {
                    di::set_mode(d, (mode & !(di::S_ISUID | di::S_ISGID)) as u16);
                }
            }
            di::set_ctime(d, crate::bmap::data::now());
            di::bump_changecount(d, 1);
            Ok(())
        });
        match r {
            Ok(()) => {
                tx.commit()?;
                Ok(())
            }
            Err(e) => {
                tx.cancel();
                Err(e)
            }
        }
    }
}

/// The realtime extent size in bytes.
fn geo_rext_bytes(fs: &Filesystem) -> u32 {
    fs.sb().rextsize.max(1) * fs.geo().blocksize
}

/// `sb_fname`'s place and size in a superblock sector.
const FNAME_OFF: usize = 108;
pub const LABEL_MAX: usize = 12;

impl Filesystem {
    /// The label's bytes (up to the first NUL).
    pub fn label(&self) -> Vec<u8> {
        let l = *self.label.lock();
        let end = l.iter().position(|&c| c == 0).unwrap_or(LABEL_MAX);
        l[..end].to_vec()
    }

    /// Set the label (at most [`LABEL_MAX`] bytes, no NUL: else
    /// `Invalid`), durable when this returns.
    pub fn set_label(&self, label: &[u8]) -> Result<()> {
        if label.len() > LABEL_MAX || label.contains(&0) {
            return Err(Error::Invalid(format!(
                "a label has at most {LABEL_MAX} bytes and no NUL"
            )));
        }
        let mut fname = [0u8; LABEL_MAX];
        fname[..label.len()].copy_from_slice(label);
        let rw = self.rw_live()?;
        let mut held = self.label.lock();
        let mut tp = self.trans_alloc(Resv::AllSuperblocks)?;
        let sect = self.geo.sectsize as usize;
        let r = (0..self.geo.agcount).try_for_each(|ag| {
            let daddr = self.geo.agb_to_daddr(AgNumber(ag), AgBlock(0));
            let b = tp.read_buf(daddr, sect, BufKind::Sb)?;
            tp.buf_mut(b)[FNAME_OFF..FNAME_OFF + LABEL_MAX].copy_from_slice(&fname);
            tp.log_buf(b, FNAME_OFF..FNAME_OFF + LABEL_MAX);
            Ok::<(), Error>(())
        });
        if let Err(e) = r {
            tp.cancel();
            return Err(e);
        }
        let seq = tp.commit()?;
        *held = fname;
        drop(held);
        rw.cil.force_seq(seq)
    }
}
