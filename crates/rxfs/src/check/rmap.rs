//! The rmapbt against the reverse mappings the rest of the filesystem
//! implies.
//!
//! Every claim in the space map (except free space) implies a reverse
//! mapping: AG headers (OWN_FS), the log (OWN_LOG), the AGFL and the
//! free-space and rmap btrees (OWN_AG), the inode btrees (OWN_INOBT),
//! inode chunks (OWN_INODES), the refcountbt (OWN_REFC), CoW staging
//! (OWN_COW), file data and attr fork blocks (inode, offset, attr and
//! unwritten flags) and bmbt blocks (inode, bmbt flag). Both lists are
//! brought to one canonical form, adjacent mappings of one owner merged
//! as the kernel merges them (file mappings only when their offsets are
//! contiguous too), and must then be equal (`rmapbt-mismatch`, at most
//! [`REPORT_MAX`] per AG). AGs whose trees could not all be read are
//! skipped.

use super::space::Owner;
use super::Checker;
use crate::format::btree::{
    RMAP_OWN_AG, RMAP_OWN_COW, RMAP_OWN_FS, RMAP_OWN_INOBT, RMAP_OWN_INODES, RMAP_OWN_LOG,
    RMAP_OWN_REFC,
};
use crate::format::btree_rec::RmapRec;

const REPORT_MAX: usize = 16;

fn special(start: u32, len: u32, owner: u64) -> RmapRec {
    RmapRec {
        start,
        len,
        owner,
        offset: 0,
        attr_fork: false,
        bmbt_block: false,
        unwritten: false,
        unknown_bits: 0,
    }
}

/// The reverse mapping a claim implies (none for free space).
pub(crate) fn expected(owner: Owner, start: u32, len: u32) -> Option<RmapRec> {
    let own = |o| Some(special(start, len, o));
    match owner {
        Owner::Free => None,
        Owner::Headers => own(RMAP_OWN_FS),
        Owner::Log => own(RMAP_OWN_LOG),
        Owner::Agfl => own(RMAP_OWN_AG),
        Owner::Btree(name) if name.starts_with("inobt") || name.starts_with("finobt") => {
            own(RMAP_OWN_INOBT)
        }
        Owner::Btree(name) if name.starts_with("refcountbt") => own(RMAP_OWN_REFC),
        Owner::Btree(_) => own(RMAP_OWN_AG),
        Owner::Inodes => own(RMAP_OWN_INODES),
        Owner::Cow => own(RMAP_OWN_COW),
        Owner::Data(ino, offset, unwritten) => Some(RmapRec {
            offset,
            unwritten,
            ..special(start, len, ino)
        }),
        Owner::Attr(ino, offset) => Some(RmapRec {
            offset,
            attr_fork: true,
            ..special(start, len, ino)
        }),
        Owner::Bmbt(ino, attr) => Some(RmapRec {
            attr_fork: attr,
            bmbt_block: true,
            ..special(start, len, ino)
        }),
    }
}

/// Merge adjacent mappings of one owner and sort by (start, owner, offset).
fn canonical(mut v: Vec<RmapRec>) -> Vec<RmapRec> {
    let group = |r: &RmapRec| (r.owner, r.attr_fork, r.bmbt_block, r.unwritten);
    v.sort_by_key(|r| (group(r), r.start, r.offset));
    let mut out: Vec<RmapRec> = Vec::with_capacity(v.len());
    for r in v {
        if let Some(last) = out.last_mut() {
            let file = !r.is_special_owner() && !r.bmbt_block;
            let len = last.len as u64 + r.len as u64;
            if group(last) == group(&r)
                && last.start as u64 + last.len as u64 == r.start as u64
                && (!file || last.offset + last.len as u64 == r.offset)
                && len <= u32::MAX as u64
            {
                last.len = len as u32;
                continue;
            }
        }
        out.push(r);
    }
    out.sort_by_key(|r| (r.start, r.owner, r.offset, r.attr_fork, r.bmbt_block));
    out
}

fn show(r: &RmapRec) -> String {
    let owner = match r.owner {
        RMAP_OWN_FS => "fs".to_string(),
        RMAP_OWN_LOG => "log".to_string(),
        RMAP_OWN_AG => "ag".to_string(),
        RMAP_OWN_INOBT => "inobt".to_string(),
        RMAP_OWN_INODES => "inodes".to_string(),
        RMAP_OWN_REFC => "refcountbt".to_string(),
        RMAP_OWN_COW => "cow".to_string(),
        o if r.is_special_owner() => format!("{o:#x}"),
        ino => format!("inode {ino}"),
    };
    let mut s = format!("{}+{} {owner}", r.start, r.len);
    if !r.is_special_owner() && !r.bmbt_block {
        s.push_str(&format!(" offset {}", r.offset));
    }
    for (flag, name) in [
        (r.attr_fork, " attr"),
        (r.bmbt_block, " bmbt"),
        (r.unwritten, " unwritten"),
    ] {
        if flag {
            s.push_str(name);
        }
    }
    s
}

pub(crate) fn report(c: &mut Checker) {
    let Some(want) = c.space.rmap_want.take() else {
        return;
    };
    let have = std::mem::take(&mut c.space.rmap_have);
    for (agno, (want, have)) in want.into_iter().zip(have).enumerate() {
        let agno = agno as u32;
        let Some(have) = have else { continue };
        if c.space.ag_incomplete(agno) {
            continue;
        }
        let (want, have) = (canonical(want), canonical(have));
        let (mut i, mut j, mut n) = (0, 0, 0);
        let key = |r: &RmapRec| (r.start, r.owner, r.offset, r.attr_fork, r.bmbt_block);
        while (i < want.len() || j < have.len()) && n < REPORT_MAX {
            let (msg, at) = match (want.get(i), have.get(j)) {
                (Some(w), Some(h)) if w == h => {
                    i += 1;
                    j += 1;
                    continue;
                }
                (Some(w), Some(h)) if key(w) == key(h) => {
                    i += 1;
                    j += 1;
                    (
                        format!("rmapbt has {}, expected {}", show(h), show(w)),
                        w.start,
                    )
                }
                (Some(w), h) if h.is_none_or(|h| key(w) < key(h)) => {
                    i += 1;
                    (format!("no rmapbt record for {}", show(w)), w.start)
                }
                (_, Some(h)) => {
                    j += 1;
                    (
                        format!("rmapbt record {} matches nothing", show(h)),
                        h.start,
                    )
                }
                _ => break,
            };
            n += 1;
            c.add_ag("rmapbt-mismatch", agno, Some(at as u64), msg);
        }
    }
}
