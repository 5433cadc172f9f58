//! Overwrites without a transaction (seed 004): a block-aligned write
//! that falls entirely on written blocks inside EOF changes no mapping and
//! no size, so it runs under the file's I/O lock *shared*, any number at
//! once, and writes its data straight to the blocks.
//!
//! The one metadata change left is the time stamp. As in the kernel, file
//! times move in clock ticks ([`timestamp_tick_ns`], see
//! [`crate::bmap::data::now`]): the write logs a
//! transaction that sets mtime and ctime only when the tick changed since
//! the inode's last stamp, so a stream of overwrites commits at most one
//! transaction per tick per inode. That transaction is marked
//! timestamps-only: `fdatasync` does not wait for it (see
//! [`crate::cache::ItemLog::last_dsync_seq`]).
//!
//! Crash safety: the data goes in place, before the stamp commits; a crash
//! between leaves the new data with the old times (as in the kernel). The
//! blocks cannot change owner meanwhile: freeing or remapping them takes
//! the I/O lock exclusive. An overwrite that commits no stamp marks the
//! inode (`InodeItem::overwritten`) so that its next fsync flushes the
//! device cache even when a log force would otherwise cover the data
//! (see [`Filesystem::fsync`]).
//!
//! Not fast-pathed (the caller's general write takes the I/O lock
//! exclusive): unaligned writes (they read-modify-write a block, so two
//! at once could lose each other's bytes; the kernel serializes unaligned
//! direct I/O too), writes reaching EOF or a hole or an unwritten extent,
//! realtime and reflinked files.

use std::sync::atomic::Ordering;

use super::Filesystem;
use crate::bmap::data;
use crate::bmap::data::SetAttr;
use crate::error::Result;
use crate::format::inode::{Timestamp, DIFLAG2_REFLINK};
use crate::inode::Inode;
use crate::types::{FileBlock, FileType, FsBlock, Ino};
use crate::xact::{MetaTx, Resv};

pub use crate::bmap::data::timestamp_tick_ns;

impl Filesystem {
    /// [`Self::write`]'s fast path alone, for a caller with its own rules
    /// about the file: if the write is a pure overwrite (see the module
    /// doc) and `allow` accepts the inode as it is under the shared
    /// locks, write `data` at `off` and return its length; otherwise
    /// write nothing and return `Ok(None)` (the caller then applies its
    /// rules and calls [`Self::write`]). The FUSE front end passes its
    /// set-gid and sync-flag checks, so an overwrite looks the inode up
    /// once. `stamp` as for [`Self::write_stamped`].
    pub fn overwrite_if(
        &self,
        ino: Ino,
        off: u64,
        data: &[u8],
        stamp: bool,
        allow: impl FnOnce(&Inode) -> bool,
    ) -> Result<Option<usize>> {
        let Some(rw) = self.rw() else {
            return Ok(None);
        };
        let bs = self.geo().blocksize as u64;
        let len = data.len() as u64;
        if len == 0
            || !off.is_multiple_of(bs)
            || !len.is_multiple_of(bs)
            || !self.reads_take_locks()
        {
            return Ok(None);
        }
        let (_io, il) = rw.inodes.iolock_ilock_shared(ino);
        let ip = self.iget(ino)?;
        let plain = ip.file_type() == Some(FileType::Regular)
            && !ip.is_realtime()
            && ip.core.flags2 & DIFLAG2_REFLINK == 0;
        let end = off.checked_add(len);
        if !plain || end.is_none_or(|e| e > ip.core.size) || !allow(&ip) {
            rw.inodes.locks.count_upgrade();
            return Ok(None);
        }
        // (device byte offset, offset in `data`, length) per extent run:
        // the first inline, as almost every overwrite has one.
        let bl = self.geo().blocklog;
        let mut first = None;
        let mut more = Vec::new();
        let (mut fb, fb_end) = (off >> bl, (off + len) >> bl);
        while fb < fb_end {
            let (ext, run) = ip.data.map(FileBlock(fb));
            let Some(e) = ext.filter(|e| !e.unwritten) else {
                rw.inodes.locks.count_upgrade();
                return Ok(None);
            };
            let n = run.min(fb_end - fb);
            let disk = self
                .geo()
                .fsb_to_daddr(FsBlock(e.start + (fb - e.off.0)))
                .bytes();
            let r = (disk, ((fb << bl) - off) as usize, (n << bl) as usize);
            match first {
                None => first = Some(r),
                Some(_) => more.push(r),
            }
            fb += n;
        }
        let now = data::now();
        let stamp = (stamp && (ip.core.mtime != now || ip.core.ctime != now)).then_some(now);
        drop(il);
        for (disk, at, n) in first.into_iter().chain(more) {
            self.dev().write_at(&data[at..at + n], disk)?;
        }
        match stamp {
            Some(now) => self.stamp_write(ino, now)?,
            None => {
                if let Some(item) = rw.inodes.get(ino) {
                    // Read first: one cache line written once, not by every
                    // overwrite.
                    if !item.overwritten.load(Ordering::Relaxed) {
                        item.overwritten.store(true, Ordering::Release);
                    }
                }
            }
        }
        Ok(Some(data.len()))
    }

    /// mtime = ctime = `now` after an overwrite, in a timestamps-only
    /// transaction.
    fn stamp_write(&self, ino: Ino, now: Timestamp) -> Result<()> {
        let _lock = self.ilock(ino)?;
        // Another overwrite of this tick may have stamped it meanwhile.
        let ip = self.iget(ino)?;
        if ip.core.mtime == now && ip.core.ctime == now {
            return Ok(());
        }
        let mut tx = self.trans_alloc(Resv::SetAttr)?;
        let attr = SetAttr {
            mtime: Some(now),
            ctime: Some(now),
            ..SetAttr::default()
        };
        let r = tx
            .ijoin(ino)
            .and_then(|ip| data::setattr(&mut tx, self.dev(), ip, &attr, now));
        match r {
            Ok(()) => {
                tx.timestamps_only();
                tx.commit().map(|_| ())
            }
            Err(e) => {
                tx.cancel();
                Err(e)
            }
        }
    }
}
