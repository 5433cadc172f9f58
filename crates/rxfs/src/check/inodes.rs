//! Per-AG inode side: the AGI, the inobt and finobt, every inode chunk and
//! every inode in it.
//!
//! Invariants checked: inobt chunks in order and not overlapping; AGI
//! count/freecount (and iblocks/fblocks with inobtcount) equal to the
//! chunks' sums; the finobt holds exactly the chunks with free inodes; an
//! inode's free bit agrees with its core (free = mode 0); every in-use
//! inode decodes (verifier, fork format vs mode, extents in range, sorted,
//! not overlapping, bmbt consistent) and its di_nblocks equals the blocks
//! its forks map plus its bmbt blocks. Every chunk block, extent and bmbt
//! block is claimed in the space map; a realtime file's data extents in
//! the realtime claim map instead (see `realtime`). The AGI unlinked lists
//! are walked (bounded by the AG's inode count) to know which inodes may
//! be unreferenced.

use super::ag::walk_tree;
use super::space::Owner;
use super::{bmbt, Checker, InodeInfo};
use crate::btree::walk::BtreeRoot;
use crate::format::ag::{Agi, NULL_AGINO};
use crate::format::bmbt as bmbt_fmt;
use crate::format::btree::BtreeKind;
use crate::format::btree_rec::InobtRec;
use crate::format::inode::{self as dinode, InodeCore, FMT_BTREE, FMT_EXTENTS};
use crate::types::{AgIno, AgNumber, FileType, Ino};

pub(crate) fn check_ag_inodes(c: &mut Checker, agno: u32) {
    let fs = c.fs;
    let agi = match fs.read_agi(AgNumber(agno)) {
        Ok(a) => a,
        Err(e) => {
            c.add_ag("agi-bad", agno, None, e.to_string());
            c.inode_ags_bad.insert(agno);
            c.space.mark_incomplete(agno);
            c.sums_complete = false;
            return;
        }
    };
    let root = BtreeRoot::from_agi(BtreeKind::Ino, AgNumber(agno), &agi);
    let Some((chunks, iblocks)) = walk_tree::<InobtRec>(c, &root) else {
        c.inode_ags_bad.insert(agno);
        return;
    };
    let (mut count, mut free) = (0u64, 0u64);
    for w in chunks.windows(2) {
        if w[1].startino < w[0].startino.saturating_add(64) {
            let msg = format!(
                "chunk {:#x} after chunk {:#x}",
                w[1].startino, w[0].startino
            );
            c.add_ag("inobt-order", agno, None, msg);
        }
    }
    for ch in &chunks {
        count += ch.count as u64;
        free += ch.freecount as u64;
    }
    c.sum_icount += count;
    c.sum_ifree += free;
    if agi.count as u64 != count {
        let msg = format!("AGI count {}, inobt chunks hold {count}", agi.count);
        c.add_ag("agi-count", agno, None, msg);
    }
    if agi.freecount as u64 != free {
        let msg = format!("AGI freecount {}, inobt counts {free} free", agi.freecount);
        c.add_ag("agi-freecount", agno, None, msg);
    }
    if fs.sb().has_inobtcount() && agi.iblocks as u64 != iblocks {
        let msg = format!("AGI iblocks {}, inobt has {iblocks}", agi.iblocks);
        c.add_ag("agi-iblocks", agno, None, msg);
    }
    if fs.sb().has_finobt() {
        check_finobt(c, agno, &agi, &chunks);
    }
    for ch in &chunks {
        check_chunk(c, agno, ch);
    }
    walk_unlinked(c, agno, &agi);
}

fn check_finobt(c: &mut Checker, agno: u32, agi: &Agi, chunks: &[InobtRec]) {
    let root = BtreeRoot::from_agi(BtreeKind::Fino, AgNumber(agno), agi);
    let Some((frecs, fblocks)) = walk_tree::<InobtRec>(c, &root) else {
        return;
    };
    if c.fs.sb().has_inobtcount() && agi.fblocks as u64 != fblocks {
        let msg = format!("AGI fblocks {}, finobt has {fblocks}", agi.fblocks);
        c.add_ag("agi-fblocks", agno, None, msg);
    }
    let want: Vec<&InobtRec> = chunks.iter().filter(|r| r.freecount > 0).collect();
    let mut reported = 0;
    for r in &frecs {
        if !want.contains(&r) && reported < 16 {
            reported += 1;
            let msg = format!("finobt record {r:?} is not an inobt chunk with free inodes");
            c.add_ag("finobt-mismatch", agno, None, msg);
        }
    }
    for w in want {
        if !frecs.contains(w) && reported < 16 {
            reported += 1;
            let msg = format!("inobt chunk {w:?} has free inodes but is not in the finobt");
            c.add_ag("finobt-mismatch", agno, None, msg);
        }
    }
}

/// Claim the chunk's blocks and check each inode in it.
fn check_chunk(c: &mut Checker, agno: u32, ch: &InobtRec) {
    let fs = c.fs;
    let geo = fs.geo();
    let isize = geo.inodesize as usize;
    let inopb = geo.inopblock;
    // Claim each block that holds present inodes, once.
    let mut last_block = None;
    for idx in (0..64u32).filter(|&i| !ch.is_hole(i)) {
        let agbno = (ch.startino + idx) >> geo.inopblog;
        if last_block == Some(agbno) {
            continue;
        }
        last_block = Some(agbno);
        // Several chunks share a block when a block holds more than 64
        // inodes; the first inode of the block claims it.
        if inopb > 64 && (ch.startino + idx) & (inopb - 1) != 0 {
            continue;
        }
        c.claim(agno, agbno, 1, Owner::Inodes);
    }
    for idx in 0..64u32 {
        if ch.is_hole(idx) {
            continue;
        }
        let ino = geo.agino_to_ino(AgNumber(agno), AgIno(ch.startino + idx));
        let (daddr, off) = geo.ino_location(ino);
        let buf = match fs.read_raw(daddr, off + isize) {
            Ok(b) => b[off..].to_vec(),
            Err(e) => {
                c.add_ino("inode-bad", ino.0, e.to_string());
                continue;
            }
        };
        let uuid = fs.sb().metadata_uuid();
        let core = match dinode::decode_core(&buf, ino, &uuid, fs.sb().has_nrext64()) {
            Ok(core) => core,
            Err(e) => {
                c.add_ino("inode-bad", ino.0, e.to_string());
                if !ch.is_free(idx) {
                    c.inodes.insert(
                        ino.0,
                        InodeInfo {
                            nlink: 0,
                            ftype: None,
                        },
                    );
                }
                continue;
            }
        };
        let log_dirty = fs.log_state().is_some_and(|s| s.needs_recovery());
        super::core::check_any(c, ino, &core, &buf, log_dirty);
        let free = ch.is_free(idx);
        if free != (core.mode == 0) {
            let msg = if free {
                format!(
                    "inobt says free, the inode is in use (mode {:#o})",
                    core.mode
                )
            } else {
                "inobt says in use, the inode is free (mode 0)".to_string()
            };
            c.add_ino("inobt-free-mismatch", ino.0, msg);
        }
        if free || core.mode == 0 {
            c.report.stats.inodes_free += 1;
            continue;
        }
        c.report.stats.inodes_used += 1;
        super::core::check_fields(c, ino, &core, &buf);
        check_inode(c, ino, &core, &buf);
    }
}

/// Check one in-use inode: decode it fully, claim its blocks, compare
/// di_nblocks.
fn check_inode(c: &mut Checker, ino: Ino, core: &InodeCore, buf: &[u8]) {
    let fs = c.fs;
    let ftype = FileType::from_mode(core.mode);
    c.inodes.insert(
        ino.0,
        InodeInfo {
            nlink: core.nlink,
            ftype,
        },
    );
    if ftype == Some(FileType::Directory) {
        c.dirs.push(ino.0);
    }
    // Claim from the raw forks, so that an inode the read path refuses
    // still accounts for its blocks.
    let realtime = core.flags & dinode::DIFLAG_REALTIME != 0;
    let isize = buf.len();
    let core_end = dinode::DINODE_V3_CORE_SIZE;
    let dfork = &buf[core_end..core_end + core.data_fork_size(isize)];
    let mut blocks = claim_fork(c, ino, dfork, core.format, core.nextents, realtime, false);
    if core.forkoff != 0 {
        let afork = &buf[core.attr_fork_offset()..isize];
        blocks += claim_fork(
            c,
            ino,
            afork,
            core.aformat,
            core.anextents as u64,
            false,
            true,
        );
    }
    if core.nblocks != blocks {
        let msg = format!(
            "di_nblocks {}, its forks map {blocks} blocks (bmbt blocks included)",
            core.nblocks
        );
        c.add_ino("inode-nblocks", ino.0, msg);
    }
    match crate::inode::decode::decode_inode(fs, ino, buf) {
        Ok(ip) => super::dirs::check_attrs(c, &ip),
        Err(e) => c.add_ino("inode-bad", ino.0, e.to_string()),
    }
}

/// Claim the blocks a fork maps (and its bmbt blocks); returns how many.
#[allow(clippy::too_many_arguments)]
fn claim_fork(
    c: &mut Checker,
    ino: Ino,
    fork: &[u8],
    format: u8,
    nextents: u64,
    realtime: bool,
    attr: bool,
) -> u64 {
    let owner = |e: &bmbt_fmt::Extent| {
        if attr {
            Owner::Attr(ino.0, e.off.0)
        } else {
            Owner::Data(ino.0, e.off.0, e.unwritten)
        }
    };
    let (extents, bmbt_blocks) = match format {
        FMT_EXTENTS => {
            let max = (fork.len() / bmbt_fmt::EXTENT_REC_SIZE) as u64;
            let n = nextents.min(max) as usize;
            let list: Vec<bmbt_fmt::Extent> = (0..n)
                .map(|i| bmbt_fmt::Extent::decode(&fork[i * bmbt_fmt::EXTENT_REC_SIZE..]))
                .collect();
            (list, Vec::new())
        }
        FMT_BTREE => {
            let w = bmbt::walk(c.fs, ino, fork);
            for p in &w.problems {
                c.add_ino("bmbt-bad", ino.0, p.clone());
            }
            (w.extents, w.blocks)
        }
        _ => return 0,
    };
    let mut total = bmbt_blocks.len() as u64;
    for b in &bmbt_blocks {
        c.claim_fsb(*b, 1, Owner::Bmbt(ino.0, attr));
    }
    let geo = c.fs.geo();
    // The last rt extent the previous realtime mapping touched.
    let mut rt_prev = None;
    for e in &extents {
        total += e.len;
        c.report.stats.extents += 1;
        // The largest file offset is 2^63 - 1 bytes.
        if (e.off.0 + e.len) > (1u64 << 63) >> geo.blocklog {
            let msg = format!("extent {e:?} past the largest file offset");
            c.add_ino("inode-extent-bad", ino.0, msg);
        }
        if realtime {
            c.claim_rt(ino.0, e, &mut rt_prev);
            continue;
        }
        if e.len == 0 || !geo.fsb_extent_valid(crate::types::FsBlock(e.start), e.len) {
            let msg = format!("extent {e:?} outside the data device");
            c.add_ino("inode-extent-bad", ino.0, msg);
            continue;
        }
        c.claim_fsb(e.start, e.len, owner(e));
    }
    total
}

/// Collect the inodes on the AGI unlinked lists.
fn walk_unlinked(c: &mut Checker, agno: u32, agi: &Agi) {
    let fs = c.fs;
    let geo = fs.geo();
    let limit = agi.count as usize + 1;
    // A clean unmount leaves every list empty (the last references were
    // dropped and the inodes freed); only a dirty log may hold some.
    let log_dirty = fs.log_state().is_some_and(|s| s.needs_recovery());
    for (bucket, &head) in agi.unlinked.iter().enumerate() {
        if head != NULL_AGINO && !log_dirty {
            let msg = format!("unlinked bucket {bucket} holds agino {head} after a clean unmount");
            c.add_ag("agi-unlinked", agno, None, msg);
        }
        let mut agino = head;
        let mut steps = 0;
        while agino != NULL_AGINO {
            steps += 1;
            let ino = geo.agino_to_ino(AgNumber(agno), AgIno(agino));
            if steps > limit || !geo.ino_valid(ino) || !c.unlinked.insert(ino.0) {
                let msg = format!("unlinked bucket {bucket} list is broken at agino {agino:#x}");
                c.add_ag("agi-unlinked", agno, None, msg);
                break;
            }
            let (daddr, off) = geo.ino_location(ino);
            let next = fs
                .read_raw(daddr, off + geo.inodesize as usize)
                .ok()
                .map(|b| crate::format::be32(&b, off + 96));
            match next {
                Some(n) => agino = n,
                None => break,
            }
        }
    }
}
