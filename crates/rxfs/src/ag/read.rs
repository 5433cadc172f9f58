//! Reading the AG headers (AGF, AGI, AGFL) through their verifiers.
//!
//! Each header is one sector at a fixed place in its AG (sector 1, 2, 3;
//! see [`crate::format::ag`]). Nothing is cached yet: every call reads and
//! verifies the sector again, so callers on hot paths should keep what they
//! need.

use crate::error::{Error, Result};
use crate::format::ag::{AgCheck, Agf, Agfl, Agi, AGFL_SECTOR, AGF_SECTOR, AGI_SECTOR};
use crate::format::btree::{BlockCheck, BtreeKind};
use crate::inode::ReadCtx;
use crate::types::AgNumber;

/// What the headers and btree blocks of AG `agno` are checked against.
pub fn ag_check(fs: &(impl ReadCtx + ?Sized), agno: AgNumber) -> Result<AgCheck> {
    let geo = fs.geo();
    let sb = fs.sb();
    if agno.0 >= geo.agcount {
        return Err(Error::Invalid(format!(
            "AG {agno} does not exist ({} AGs)",
            geo.agcount
        )));
    }
    let bs = geo.blocksize as usize;
    let agino_log = geo.agino_log();
    let reflink = sb.has_reflink();
    let max = |k: BtreeKind| k.max_levels(bs, geo.agblocks, agino_log, reflink);
    Ok(AgCheck {
        agno,
        ag_len: geo.ag_size(agno),
        agblocks: geo.agblocks,
        sectsize: geo.sectsize,
        blocklog: geo.blocklog,
        inopblog: geo.inopblog,
        uuid: sb.metadata_uuid(),
        has_rmapbt: sb.has_rmapbt(),
        has_reflink: reflink,
        has_finobt: sb.has_finobt(),
        has_inobtcount: sb.has_inobtcount(),
        maxlevels_alloc: max(BtreeKind::Bno),
        maxlevels_inobt: max(BtreeKind::Ino),
        maxlevels_rmap: max(BtreeKind::Rmap),
        maxlevels_refc: max(BtreeKind::Refcount),
    })
}

/// What blocks of a tree with `levels` levels in AG `c.agno` are
/// checked against.
pub fn block_check(fs: &(impl ReadCtx + ?Sized), c: &AgCheck, levels: u32) -> BlockCheck {
    let geo = fs.geo();
    BlockCheck {
        agno: c.agno,
        ag_len: c.ag_len,
        first_agbno: c.first_usable_agbno(),
        uuid: c.uuid,
        blocksize: geo.blocksize as usize,
        sparse_inodes: fs.sb().has_sparse_inodes(),
        inopblog: geo.inopblog,
        max_ino: (geo.agcount as u64) << geo.agino_log(),
        tree_levels: levels,
    }
}

fn read_ag_sector<T>(
    fs: &(impl ReadCtx + ?Sized),
    agno: AgNumber,
    sector: u32,
    decode: impl FnOnce(&[u8], &AgCheck) -> Result<T>,
) -> Result<T> {
    let c = ag_check(fs, agno)?;
    let daddr = fs.geo().ag_header_daddr(agno, sector);
    let mut out = None;
    fs.read_meta(daddr, fs.geo().sectsize as usize, |buf, _| {
        out = Some(decode(buf, &c)?);
        Ok(())
    })?;
    Ok(out.expect("verifier ran"))
}

/// Read and verify the AGF of AG `agno`.
pub fn read_agf(fs: &(impl ReadCtx + ?Sized), agno: AgNumber) -> Result<Agf> {
    read_ag_sector(fs, agno, AGF_SECTOR, Agf::decode)
}

/// Read and verify the AGI of AG `agno`.
pub fn read_agi(fs: &(impl ReadCtx + ?Sized), agno: AgNumber) -> Result<Agi> {
    read_ag_sector(fs, agno, AGI_SECTOR, Agi::decode)
}

/// Read and verify the AGFL of AG `agno` (all slots; use
/// [`Agfl::active_blocks`] with the AGF for the live list).
pub fn read_agfl(fs: &(impl ReadCtx + ?Sized), agno: AgNumber) -> Result<Agfl> {
    read_ag_sector(fs, agno, AGFL_SECTOR, Agfl::decode)
}
