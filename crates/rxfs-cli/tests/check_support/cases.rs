//! The seeded corruptions: xfs_db commands, the finding rxfs must report,
//! and whether xfs_repair -n reports it.

use std::path::Path;

use super::{db_val, Inos};

/// One seeded corruption.
pub struct Case {
    pub name: &'static str,
    /// xfs_db -x commands.
    pub cmds: Vec<String>,
    /// The finding rxfs must report.
    pub want: &'static str,
    /// Whether xfs_repair -n reports it (exit 1).
    pub repair_flags: bool,
}

/// An AG whose bnobt and cntbt are single leaves with at least `min`
/// records, and (when `same_last`) whose last records are the same extent.
pub fn pick_ag(img: &Path, min: u64, same_last: bool) -> u32 {
    let agcount = db_val(img, &["sb 0"], "agcount") as u32;
    for ag in 0..agcount {
        let agf = format!("agf {ag}");
        let n = |root: &str| {
            let c = [agf.as_str(), &format!("addr {root}")];
            (db_val(img, &c, "level"), db_val(img, &c, "numrecs"))
        };
        let (bl, bn) = n("bnoroot");
        let (cl, cn) = n("cntroot");
        if bl != 0 || cl != 0 || bn < min || cn < min {
            continue;
        }
        if same_last {
            let rec = |root: &str, n: u64, f: &str| {
                db_val(
                    img,
                    &[agf.as_str(), &format!("addr {root}")],
                    &format!("recs[{n}].{f}"),
                )
            };
            if rec("bnoroot", bn, "startblock") != rec("cntroot", cn, "startblock") {
                continue;
            }
        }
        return ag;
    }
    panic!("no AG with {min} free extents (same_last {same_last})");
}

pub fn cases(img: &Path, i: &Inos) -> Vec<Case> {
    let v = |cmds: &[&str], f: &str| db_val(img, cmds, f);
    let s = |x: &[&str]| x.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    let mut out = Vec::new();
    let mut case = |name, cmds: Vec<String>, want, repair_flags| {
        out.push(Case {
            name,
            cmds,
            want,
            repair_flags,
        })
    };
    let freeblks = v(&["agf 0"], "freeblks");
    let longest = v(&["agf 0"], "longest");
    let flcount = v(&["agf 0"], "flcount");
    case(
        "agf freeblks",
        s(&["agf 0", &format!("write freeblks {}", freeblks + 1)]),
        "agf-freeblks",
        true,
    );
    case(
        "agf longest",
        s(&["agf 0", &format!("write longest {}", longest - 1)]),
        "agf-longest",
        true,
    );
    case(
        "agf flcount",
        s(&["agf 0", &format!("write flcount {}", flcount + 1)]),
        "agf-flcount",
        true,
    );
    case(
        "agf magic",
        s(&["agf 1", "write -d magicnum 0"]),
        "agf-bad",
        true,
    );
    let count = v(&["agi 0"], "count");
    let ifree = v(&["agi 0"], "freecount");
    case(
        "agi count",
        s(&["agi 0", &format!("write count {}", count + 64)]),
        "agi-count",
        true,
    );
    case(
        "agi freecount",
        s(&["agi 0", &format!("write freecount {}", ifree + 1)]),
        "agi-freecount",
        true,
    );
    let fc = v(&["agi 0", "addr root"], "recs[1].freecount");
    case(
        "inobt ir_freecount",
        s(&[
            "agi 0",
            "addr root",
            &format!("write -d recs[1].freecount {}", fc + 1),
        ]),
        "inobt-bad",
        true,
    );
    // bnobt: record 1 grown to overlap record 2.
    let ag = pick_ag(img, 3, false);
    let agf = format!("agf {ag}");
    let r1 = v(&[&agf, "addr bnoroot"], "recs[1].startblock");
    let r2 = v(&[&agf, "addr bnoroot"], "recs[2].startblock");
    case(
        "bnobt record overlapping",
        s(&[
            &agf,
            "addr bnoroot",
            &format!("write -d recs[1].blockcount {}", r2 - r1 + 1),
        ]),
        "bnobt-bad",
        true,
    );
    // The cntbt's last record is its longest: starting one block earlier
    // keeps the order.
    let cn = v(&[&agf, "addr cntroot"], "numrecs");
    let clast = v(&[&agf, "addr cntroot"], &format!("recs[{cn}].startblock"));
    case(
        "cntbt record changed",
        s(&[
            &agf,
            "addr cntroot",
            &format!("write -d recs[{cn}].startblock {}", clast - 1),
        ]),
        "bnobt-cntbt-mismatch",
        true,
    );
    case(
        "cntbt record missing",
        s(&[
            &agf,
            "addr cntroot",
            &format!("write -d numrecs {}", cn - 1),
        ]),
        "bnobt-cntbt-mismatch",
        true,
    );
    // A free extent dropped from both trees, AGF and superblock adjusted:
    // blocks neither free nor in use.
    let ag = pick_ag(img, 2, true);
    let agf = format!("agf {ag}");
    let bn = v(&[&agf, "addr bnoroot"], "numrecs");
    let cn = v(&[&agf, "addr cntroot"], "numrecs");
    let len = v(&[&agf, "addr cntroot"], &format!("recs[{cn}].blockcount"));
    let next_longest = v(
        &[&agf, "addr cntroot"],
        &format!("recs[{}].blockcount", cn - 1),
    );
    let fb = v(&[&agf], "freeblks");
    let fd = v(&["sb 0"], "fdblocks");
    case(
        "free extent lost (unclaimed blocks)",
        s(&[
            &agf,
            "addr bnoroot",
            &format!("write -d numrecs {}", bn - 1),
            &agf,
            "addr cntroot",
            &format!("write -d numrecs {}", cn - 1),
            &agf,
            &format!("write longest {next_longest}"),
            &format!("write freeblks {}", fb - len),
            "sb 0",
            &format!("write fdblocks {}", fd - len),
        ]),
        "block-unclaimed",
        false,
    );
    let icount = v(&["sb 0"], "icount");
    case(
        "sb icount",
        s(&["sb 0", &format!("write icount {}", icount + 64)]),
        "sb-icount",
        true,
    );
    case(
        "sb fdblocks",
        s(&["sb 0", &format!("write fdblocks {}", fd - 10)]),
        "sb-fdblocks",
        true,
    );
    case(
        "secondary sb agblocks",
        s(&["sb 1", "write -d agblocks 100"]),
        "sb-secondary-bad",
        true,
    );
    case(
        "secondary sb imax_pct",
        s(&["sb 2", "write imax_pct 5"]),
        "sb-secondary-mismatch",
        false,
    );
    let ino = |n: u64| format!("inode {n}");
    case(
        "inode nlink",
        s(&[&ino(i.hard), "write core.nlinkv2 5"]),
        "inode-nlink",
        true,
    );
    let nb = v(&[&ino(i.frag)], "core.nblocks");
    case(
        "inode di_nblocks",
        s(&[&ino(i.frag), &format!("write core.nblocks {}", nb + 1)]),
        "inode-nblocks",
        true,
    );
    case(
        "inode in use with mode 0",
        s(&[&ino(i.fifo), "write core.mode 0"]),
        "inobt-free-mismatch",
        true,
    );
    case(
        "dir entry -> free inode",
        s(&[
            &ino(i.sfd),
            &format!("write u3.sfdir3.list[0].inumber.i4 {}", i.freed),
        ]),
        "dir-entry-free-inode",
        true,
    );
    let root = v(&["sb 0"], "rootino");
    case(
        "'..' wrong",
        s(&[
            &ino(i.sfd_sub),
            &format!("write u3.sfdir3.hdr.parent.i4 {root}"),
        ]),
        "dir-dotdot",
        true,
    );
    let two = v(&[&ino(i.two)], "u3.bmx[0].startblock");
    case(
        "extent overlapping another file's",
        s(&[&ino(i.one), &format!("write u3.bmx[0].startblock {two}")]),
        "block-multiply-claimed",
        true,
    );
    case(
        "bmbt leaf records out of order",
        s(&[
            &ino(i.frag),
            "addr u3.bmbt.ptrs[1]",
            "write -d recs[2].startoff 0",
        ]),
        "bmbt-bad",
        true,
    );
    case(
        "attr leaf count",
        s(&[&ino(i.attr_node), "ablock 1", "write -d hdr.count 1000"]),
        "attr-leaf-bad",
        true,
    );
    // bigdir is in node form: data blocks, leafn blocks under a DA node at
    // the leaf offset (32 GiB / 4 KiB directory blocks).
    case(
        "dir data entry -> free inode",
        s(&[
            &ino(i.bigdir),
            "dblock 0",
            &format!("write -d du[3].inumber {}", i.freed),
        ]),
        "dir-entry-free-inode",
        true,
    );
    case(
        "dir DA node hash order",
        s(&[
            &ino(i.bigdir),
            "dblock 8388608",
            "write -d nbtree[1].hashval 0x10",
        ]),
        "dir-index-bad",
        true,
    );
    // The last inobt record of an AG dropped (AGI counts adjusted): its
    // inodes' blocks are claimed by nothing.
    let ag = pick_inobt_ag(img);
    let agi = format!("agi {ag}");
    let n = v(&[&agi, "addr root"], "numrecs");
    let rc = v(&[&agi, "addr root"], &format!("recs[{n}].freecount"));
    let count = v(&[&agi], "count");
    let ifree = v(&[&agi], "freecount");
    let holes = v(&[&agi, "addr root"], &format!("recs[{n}].holemask"));
    assert_eq!(holes, 0, "the last chunk of AG {ag} is sparse");
    case(
        "inobt chunk record missing",
        s(&[
            &agi,
            "addr root",
            &format!("write -d numrecs {}", n - 1),
            &agi,
            &format!("write count {}", count - 64),
            &format!("write freecount {}", ifree - rc),
        ]),
        "inobt-chunk-missing",
        true,
    );
    case(
        "dir '..' entry renamed",
        s(&[&ino(i.bigdir), "dblock 0", "write -d du[1].name \"xy\""]),
        "dir-dotdot",
        true,
    );
    case(
        "dir entry file type wrong",
        s(&[&ino(i.sfd), "write u3.sfdir3.list[0].filetype 2"]),
        "dir-ftype",
        true,
    );
    // An in-use inode (nlink 2) put on an unlinked list.
    let agino_log = v(&["sb 0"], "agblklog") + v(&["sb 0"], "inopblog");
    let agino = i.hard & ((1 << agino_log) - 1);
    let hard_ag = i.hard >> agino_log;
    case(
        "AGI unlinked bucket not empty",
        s(&[
            &format!("agi {hard_ag}"),
            &format!("write unlinked[3] {agino}"),
        ]),
        "agi-unlinked",
        true,
    );
    let lc = v(&[&ino(i.leafdir), "dblock 8388608"], "lhdr.count");
    case(
        "leaf-form dir index entry dropped",
        s(&[
            &ino(i.leafdir),
            "dblock 8388608",
            &format!("write -d lhdr.count {}", lc - 1),
        ]),
        "dir-index-count",
        true,
    );
    case(
        "second entry for a directory",
        s(&[
            &ino(i.sfd),
            &format!("write u3.sfdir3.list[0].inumber.i4 {}", i.bigdir),
            "write u3.sfdir3.list[0].filetype 2",
        ]),
        "dir-multiple-parents",
        true,
    );
    case(
        "sb rootino names a file",
        s(&["sb 0", &format!("write rootino {}", i.hard)]),
        "sb-rootino",
        true,
    );
    case(
        "block-form dir entry name",
        s(&[&ino(i.blockdir), "dblock 0", "write -d bu[3].namelen 0"]),
        "dir-bad",
        true,
    );
    case(
        "leaf-form dir hash order",
        s(&[
            &ino(i.leafdir),
            "dblock 8388608",
            "write -d lents[5].hashval 0",
        ]),
        "dir-index-bad",
        true,
    );
    // big.clone shares most of big's blocks: one more owner than there are.
    let ag = pick_refcount_ag(img);
    let agf = format!("agf {ag}");
    let rc = v(&[&agf, "addr refcntroot"], "recs[1].refcount");
    case(
        "refcount of a shared extent",
        s(&[
            &agf,
            "addr refcntroot",
            &format!("write -d recs[1].refcount {}", rc + 1),
        ]),
        "refcountbt-count",
        true,
    );
    out
}

/// An AG whose refcountbt is one leaf with a record.
fn pick_refcount_ag(img: &Path) -> u32 {
    let agcount = db_val(img, &["sb 0"], "agcount") as u32;
    (0..agcount)
        .find(|ag| {
            let c = [format!("agf {ag}"), "addr refcntroot".to_string()];
            let c: Vec<&str> = c.iter().map(|s| s.as_str()).collect();
            db_val(img, &c, "level") == 0 && db_val(img, &c, "numrecs") >= 1
        })
        .expect("no AG with a shared extent")
}

/// An AG whose inobt is one leaf with at least two chunks.
pub fn pick_inobt_ag(img: &Path) -> u32 {
    let agcount = db_val(img, &["sb 0"], "agcount") as u32;
    (0..agcount)
        .find(|ag| {
            let c = [format!("agi {ag}"), "addr root".to_string()];
            let c: Vec<&str> = c.iter().map(|s| s.as_str()).collect();
            db_val(img, &c, "level") == 0 && db_val(img, &c, "numrecs") >= 2
        })
        .expect("no AG with two inode chunks")
}
