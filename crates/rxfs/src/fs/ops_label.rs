//! The filesystem label (`sb_fname`, at most 12 bytes, NUL-padded): what
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
use crate::error::{Error, Result};
use crate::format::bufkind::BufKind;
use crate::types::{AgBlock, AgNumber};
use crate::xact::{MetaTx, Resv};

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
