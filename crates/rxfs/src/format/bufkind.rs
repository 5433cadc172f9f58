//! What a metadata buffer holds: its verifier and its log buffer type.
//!
//! The kind decides (a) the check run when the buffer is read and again
//! before it is written back, and (b) the `XFS_BLFT_*` type stamped in its
//! log item so recovery (ours and the kernel's) knows which verifier to run.
//!
//! Verification on read: the magic must be the kind's, the CRC must match,
//! and the self-describing fields (blkno, uuid) must name this block of this
//! filesystem. The structure-specific checks of the read path (record
//! order, counts) are run by the algorithms through the format layer.

use crate::error::{Error, Location, Result};
use crate::format::meta_header::meta_header;
use crate::format::{be16, be32, be64, crc, Uuid};
use crate::types::Daddr;

/// Kinds of metadata buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufKind {
    Sb,
    Agf,
    Agi,
    Agfl,
    BnoBt,
    CntBt,
    InoBt,
    FinoBt,
    RmapBt,
    RefcBt,
    Bmbt,
    /// An inode cluster (checked inode by inode on read).
    Dino,
    /// Single-block directory (XDB3).
    DirBlock,
    /// Directory data block (XDD3).
    DirData,
    DirLeaf1,
    DirLeafN,
    DirFree,
    DaNode,
    AttrLeaf,
    AttrRmt,
    Symlink,
    /// A block of the realtime bitmap file: raw bitmap words, no header.
    RtBitmap,
    /// A block of the realtime summary file: raw counters, no header.
    RtSummary,
}

impl BufKind {
    /// The `XFS_BLFT_*` value for log items (`enum xfs_blft`: 1-3 are the
    /// quota types).
    pub fn blft(self) -> u16 {
        use BufKind::*;
        match self {
            BnoBt | CntBt | InoBt | FinoBt | RmapBt | RefcBt | Bmbt => 4,
            Agf => 5,
            Agfl => 6,
            Agi => 7,
            Dino => 8,
            Symlink => 9,
            DirBlock => 10,
            DirData => 11,
            DirFree => 12,
            DirLeaf1 => 13,
            DirLeafN => 14,
            DaNode => 15,
            AttrLeaf => 16,
            AttrRmt => 17,
            Sb => 18,
            RtBitmap => 19,
            RtSummary => 20,
        }
    }

    pub fn name(self) -> &'static str {
        use BufKind::*;
        match self {
            Sb => "superblock",
            Agf => "AGF",
            Agi => "AGI",
            Agfl => "AGFL",
            BnoBt => "bnobt block",
            CntBt => "cntbt block",
            InoBt => "inobt block",
            FinoBt => "finobt block",
            RmapBt => "rmapbt block",
            RefcBt => "refcountbt block",
            Bmbt => "bmbt block",
            Dino => "inode cluster",
            DirBlock => "directory block",
            DirData => "directory data block",
            DirLeaf1 => "directory leaf1 block",
            DirLeafN => "directory leafn block",
            DirFree => "directory free block",
            DaNode => "da node block",
            AttrLeaf => "attr leaf block",
            AttrRmt => "attr remote block",
            Symlink => "symlink block",
            RtBitmap => "rt bitmap block",
            RtSummary => "rt summary block",
        }
    }

    /// Whether blocks of this kind carry a v5 header (magic, CRC, LSN).
    /// Realtime bitmap and summary blocks are raw words: nothing may
    /// guess a header into them by their first bytes (the CIL's CRC,
    /// the AIL's LSN stamp and recovery's LSN rule all skip them).
    pub fn has_header(self) -> bool {
        !matches!(self, BufKind::RtBitmap | BufKind::RtSummary)
    }

    /// The kind logged with `XFS_BLFT_*` type `blft`, for the kinds
    /// whose log items recovery must treat differently (raw blocks).
    pub fn raw_from_blft(blft: u8) -> Option<BufKind> {
        match blft {
            19 => Some(BufKind::RtBitmap),
            20 => Some(BufKind::RtSummary),
            _ => None,
        }
    }

    /// Does `buf` start with this kind's magic number?
    pub fn magic_ok(self, buf: &[u8]) -> bool {
        use BufKind::*;
        if !self.has_header() {
            return true;
        }
        if buf.len() < 16 {
            return false;
        }
        let m32 = be32(buf, 0);
        let m16_at8 = be16(buf, 8);
        match self {
            Sb => m32 == 0x5846_5342,
            Agf => m32 == 0x5841_4746,
            Agi => m32 == 0x5841_4749,
            Agfl => m32 == 0x5841_464c,
            BnoBt => m32 == 0x4142_3342,
            CntBt => m32 == 0x4142_3343,
            InoBt => m32 == 0x4941_4233,
            FinoBt => m32 == 0x4649_4233,
            RmapBt => m32 == 0x524d_4233,
            RefcBt => m32 == 0x5233_4643,
            Bmbt => m32 == 0x424d_4133,
            Dino => be16(buf, 0) == 0x494e,
            DirBlock => m32 == 0x5844_4233,
            DirData => m32 == 0x5844_4433,
            DirFree => m32 == 0x5844_4633,
            DirLeaf1 => m16_at8 == 0x3df1,
            DirLeafN => m16_at8 == 0x3dff,
            DaNode => m16_at8 == 0x3ebe,
            AttrLeaf => m16_at8 == 0x3bee,
            AttrRmt => m32 == 0x5841_524d,
            Symlink => m32 == 0x5853_4c4d,
            RtBitmap | RtSummary => true,
        }
    }

    /// Verify a buffer read from disk (or about to be written): magic, CRC
    /// and self-describing fields. Inode clusters check every inode's magic
    /// (inode CRCs are checked when an inode is read).
    pub fn verify(self, buf: &[u8], daddr: Daddr, uuid: &Uuid) -> Result<()> {
        let at = Location::Daddr(daddr.0);
        if !self.magic_ok(buf) {
            return Err(Error::corrupt(self.name(), at, "bad magic number"));
        }
        if self == BufKind::Dino || !self.has_header() {
            return Ok(());
        }
        // Remote attr and symlink blocks carry one header per run; the
        // callers of those kinds check them through the format layer.
        if matches!(self, BufKind::AttrRmt | BufKind::Symlink) {
            return Ok(());
        }
        let Some(h) = meta_header(buf) else {
            return Err(Error::corrupt(self.name(), at, "no v5 header"));
        };
        if !crc::verify(buf, h.crc_off) {
            return Err(Error::corrupt(self.name(), at, "CRC mismatch"));
        }
        if let Some(u) = h.uuid_off {
            if buf[u..u + 16] != uuid[..] {
                return Err(Error::corrupt(self.name(), at, "foreign uuid"));
            }
        }
        if let Some(b) = h.blkno_off {
            if be64(buf, b) != daddr.0 {
                return Err(Error::corrupt(
                    self.name(),
                    at,
                    format!("block says it lives at daddr {}", be64(buf, b)),
                ));
            }
        }
        Ok(())
    }
}
