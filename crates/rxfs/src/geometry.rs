//! Geometry: the numbers derived from a verified superblock, and every
//! conversion between address spaces.
//!
//! Invariant: a `Geometry` is built only from a superblock that passed
//! [`Superblock::decode`], so block/inode/sector sizes are powers of two that
//! agree with their logs and `agblocks <= 1 << agblklog`.
//! Conversion functions do not validate; use the `*_valid` checks on anything
//! that came from disk before converting it.

use crate::format::sb::Superblock;
use crate::types::*;

#[derive(Debug, Clone)]
pub struct Geometry {
    pub blocksize: u32,
    pub blocklog: u8,
    pub sectsize: u32,
    pub agblocks: u32,
    pub agblklog: u8,
    pub agcount: u32,
    pub dblocks: u64,
    pub inodesize: u32,
    pub inodelog: u8,
    pub inopblock: u32,
    pub inopblog: u8,
    /// Directory block size in bytes (`blocksize << dirblklog`).
    pub dirblksize: u32,
    pub dirblklog: u8,
    /// Filesystem blocks per inode cluster (for reading inode buffers).
    pub inode_cluster_blocks: u32,
    /// Inodes per chunk (always 64).
    pub inodes_per_chunk: u32,
    pub logstart: FsBlock,
    pub logblocks: u32,
    pub rextsize: u32,
    pub rblocks: u64,
    pub rextents: u64,
    pub rbmblocks: u32,
    pub inoalignmt: u32,
    pub spino_align: u32,
}

/// Inodes per inode chunk.
pub const INODES_PER_CHUNK: u32 = 64;
/// Default inode cluster size in bytes (XFS_INODE_BIG_CLUSTER_SIZE), scaled
/// by inode size / 256 on v5 filesystems.
const INODE_BIG_CLUSTER_SIZE: u32 = 8192;

impl Geometry {
    pub fn new(sb: &Superblock) -> Self {
        let blocksize = sb.blocksize;
        let inodesize = sb.inodesize as u32;
        // v5: cluster size scales with the inode size (inode size / 256).
        let mut cluster_bytes = INODE_BIG_CLUSTER_SIZE * (inodesize / 256);
        let chunk_bytes = INODES_PER_CHUNK * inodesize;
        if cluster_bytes > chunk_bytes {
            cluster_bytes = chunk_bytes;
        }
        let inode_cluster_blocks = cluster_bytes.div_ceil(blocksize).max(1);
        Geometry {
            blocksize,
            blocklog: sb.blocklog,
            sectsize: sb.sectsize as u32,
            agblocks: sb.agblocks,
            agblklog: sb.agblklog,
            agcount: sb.agcount,
            dblocks: sb.dblocks,
            inodesize,
            inodelog: sb.inodelog,
            inopblock: sb.inopblock as u32,
            inopblog: sb.inopblog,
            dirblksize: blocksize << sb.dirblklog,
            dirblklog: sb.dirblklog,
            inode_cluster_blocks,
            inodes_per_chunk: INODES_PER_CHUNK,
            logstart: FsBlock(sb.logstart),
            logblocks: sb.logblocks,
            rextsize: sb.rextsize,
            rblocks: sb.rblocks,
            rextents: sb.rextents,
            rbmblocks: sb.rbmblocks,
            inoalignmt: sb.inoalignmt,
            spino_align: sb.spino_align,
        }
    }

    /// Directory block size in filesystem blocks.
    pub fn dir_fsbs(&self) -> u32 {
        1 << self.dirblklog
    }

    /// Basic blocks (512 B) per filesystem block.
    pub fn bb_per_block(&self) -> u32 {
        self.blocksize >> 9
    }

    /// Blocks in AG `agno` (the last AG may be short).
    pub fn ag_size(&self, agno: AgNumber) -> u32 {
        if agno.0 + 1 < self.agcount {
            self.agblocks
        } else {
            (self.dblocks - (self.agcount as u64 - 1) * self.agblocks as u64) as u32
        }
    }

    // ---- data device blocks ----

    pub fn agb_to_daddr(&self, agno: AgNumber, agbno: AgBlock) -> Daddr {
        Daddr(((agno.0 as u64) * self.agblocks as u64 + agbno.0 as u64) << (self.blocklog - 9))
    }

    /// Disk address of AG header sector `sector` (0 SB, 1 AGF, 2 AGI, 3 AGFL).
    pub fn ag_header_daddr(&self, agno: AgNumber, sector: u32) -> Daddr {
        Daddr(self.agb_to_daddr(agno, AgBlock(0)).0 + ((sector as u64 * self.sectsize as u64) >> 9))
    }

    pub fn fsb_agno(&self, fsb: FsBlock) -> AgNumber {
        AgNumber((fsb.0 >> self.agblklog) as u32)
    }

    pub fn fsb_agbno(&self, fsb: FsBlock) -> AgBlock {
        AgBlock((fsb.0 & ((1u64 << self.agblklog) - 1)) as u32)
    }

    pub fn agb_to_fsb(&self, agno: AgNumber, agbno: AgBlock) -> FsBlock {
        FsBlock(((agno.0 as u64) << self.agblklog) | agbno.0 as u64)
    }

    pub fn fsb_to_daddr(&self, fsb: FsBlock) -> Daddr {
        self.agb_to_daddr(self.fsb_agno(fsb), self.fsb_agbno(fsb))
    }

    /// Whether `len` blocks at `fsb` lie inside one AG of the data device.
    pub fn fsb_extent_valid(&self, fsb: FsBlock, len: u64) -> bool {
        let agno = self.fsb_agno(fsb);
        if agno.0 >= self.agcount || len == 0 {
            return false;
        }
        let agbno = self.fsb_agbno(fsb).0 as u64;
        agbno
            .checked_add(len)
            .is_some_and(|end| end <= self.ag_size(agno) as u64)
    }

    pub fn agbno_valid(&self, agno: AgNumber, agbno: AgBlock) -> bool {
        agno.0 < self.agcount && agbno.0 < self.ag_size(agno)
    }

    // ---- realtime device ----

    pub fn rtb_to_byte(&self, rtb: RtBlock) -> u64 {
        rtb.0 << self.blocklog
    }

    pub fn rt_extent_valid(&self, rtb: RtBlock, len: u64) -> bool {
        len > 0 && rtb.0.checked_add(len).is_some_and(|e| e <= self.rblocks)
    }

    // ---- inodes ----

    /// Bits of an AG-relative inode number.
    pub fn agino_log(&self) -> u8 {
        self.agblklog + self.inopblog
    }

    pub fn ino_agno(&self, ino: Ino) -> AgNumber {
        AgNumber((ino.0 >> self.agino_log()) as u32)
    }

    pub fn ino_agino(&self, ino: Ino) -> AgIno {
        AgIno((ino.0 & ((1u64 << self.agino_log()) - 1)) as u32)
    }

    pub fn agino_agbno(&self, agino: AgIno) -> AgBlock {
        AgBlock(agino.0 >> self.inopblog)
    }

    /// Index of the inode inside its filesystem block.
    pub fn agino_offset(&self, agino: AgIno) -> u32 {
        agino.0 & ((1 << self.inopblog) - 1)
    }

    pub fn agino_to_ino(&self, agno: AgNumber, agino: AgIno) -> Ino {
        Ino(((agno.0 as u64) << self.agino_log()) | agino.0 as u64)
    }

    pub fn agbno_to_agino(&self, agbno: AgBlock, offset: u32) -> AgIno {
        AgIno((agbno.0 << self.inopblog) | offset)
    }

    /// Whether `ino` addresses an inode slot inside the data device.
    /// (Existence is a separate question answered by the inode btree.)
    pub fn ino_valid(&self, ino: Ino) -> bool {
        if ino.0 >> self.agino_log() >= self.agcount as u64 {
            return false;
        }
        let agno = self.ino_agno(ino);
        let agbno = self.agino_agbno(self.ino_agino(ino));
        agbno.0 > 0 && agbno.0 < self.ag_size(agno)
    }

    /// The inode cluster buffer holding `ino`: (daddr, BBs, byte offset
    /// of the inode in it). Chunks are aligned to the cluster size
    /// (checked at mount).
    pub fn inode_cluster(&self, ino: Ino) -> (Daddr, u32, u32) {
        let agno = self.ino_agno(ino);
        let agino = self.ino_agino(ino);
        let agbno = self.agino_agbno(agino).0;
        let bpc = self.inode_cluster_blocks.max(1);
        let cstart = agbno - agbno % bpc;
        let daddr = self.agb_to_daddr(agno, AgBlock(cstart));
        let (idaddr, ioff) = self.ino_location(ino);
        let boff = (idaddr.bytes() + ioff as u64 - daddr.bytes()) as u32;
        (daddr, bpc * self.bb_per_block(), boff)
    }

    /// Disk address and byte offset of inode `ino` (unvalidated).
    pub fn ino_location(&self, ino: Ino) -> (Daddr, usize) {
        let agno = self.ino_agno(ino);
        let agino = self.ino_agino(ino);
        let agbno = self.agino_agbno(agino);
        let off = self.agino_offset(agino) as usize * self.inodesize as usize;
        (self.agb_to_daddr(agno, agbno), off)
    }

    // ---- log ----

    pub fn log_daddr(&self) -> Daddr {
        self.fsb_to_daddr(self.logstart)
    }

    /// Log size in basic blocks.
    pub fn log_bbs(&self) -> u64 {
        (self.logblocks as u64) << (self.blocklog - 9)
    }
}

/// Read and verify the primary superblock (sector 0) of `dev`: one 512-byte
/// read, then the whole sector when the superblock says sectors are larger.
pub fn read_primary_sb(dev: &dyn crate::bdev::BlockDevice) -> crate::error::Result<Superblock> {
    let mut buf = vec![0u8; 512];
    dev.read_at(&mut buf, 0)?;
    let sectsize = crate::format::be16(&buf, 102) as usize;
    if sectsize > 512 && sectsize <= 32768 && sectsize.is_power_of_two() {
        buf.resize(sectsize, 0);
        dev.read_at(&mut buf, 0)?;
    }
    let sb = Superblock::decode(&buf, 0)?;
    // mkfs (or another offline tool) did not finish: the kernel refuses
    // such a filesystem ("Offline file system operation in progress!").
    if sb.inprogress != 0 {
        return Err(crate::error::Error::corrupt(
            "superblock",
            crate::error::Location::Daddr(0),
            "an offline operation (mkfs) did not finish: sb_inprogress is set",
        ));
    }
    Ok(sb)
}
