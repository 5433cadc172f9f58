//! `rxfs check` against the oracles: images made by mkfs.xfs and filled by
//! the kernel must be clean for both `xfs_repair -n` and `rxfs check` (no
//! false positives, over several mkfs variants); images corrupted on
//! purpose with `xfs_db -x` must be flagged by `rxfs check` with the
//! expected finding code, and `xfs_repair -n` must give the verdict the
//! table below records for it (a few corruptions it does not report).
//! `--json` must carry the same findings as the human output.

mod common;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use common::*;
use serde_json::Value;

/// What `rxfs check` said: exit code, the JSON report, the human lines.
struct Verdict {
    code: i32,
    json: Value,
    human: String,
}

fn rxfs_check(img: &Path) -> Verdict {
    let j = rxfs(&[OsStr::new("check"), OsStr::new("--json"), img.as_os_str()]);
    let h = rxfs(&[OsStr::new("check"), img.as_os_str()]);
    let code = j.status.code().unwrap_or(-1);
    assert_eq!(
        code,
        h.status.code().unwrap_or(-1),
        "json and human runs disagree on the exit code"
    );
    let json: Value = serde_json::from_slice(&j.stdout).unwrap_or_else(|e| {
        panic!(
            "rxfs check --json printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&j.stdout),
            String::from_utf8_lossy(&j.stderr)
        )
    });
    let human = String::from_utf8_lossy(&h.stdout).into_owned();
    assert_json_matches_human(&json, &human);
    Verdict { code, json, human }
}

/// Every JSON finding is one human line, in order, and `clean` agrees.
fn assert_json_matches_human(json: &Value, human: &str) {
    let findings = json["findings"].as_array().expect("findings array");
    let lines: Vec<&str> = human.lines().collect();
    assert!(lines.len() > findings.len(), "no summary line in {human}");
    for (f, line) in findings.iter().zip(&lines) {
        let code = f["code"].as_str().unwrap();
        let msg = f["message"].as_str().unwrap();
        assert!(
            line.starts_with(code) && line.ends_with(msg),
            "human line {line:?} does not match {f}"
        );
        for key in ["ag", "block", "ino"] {
            assert!(f.get(key).is_some(), "finding without {key}: {f}");
        }
    }
    let clean = json["clean"].as_bool().unwrap();
    assert_eq!(clean, findings.is_empty());
    assert_eq!(clean, human.ends_with("clean: no findings\n"), "{human}");
    assert_eq!(
        json["stats"]["findings"].as_u64().unwrap(),
        findings.len() as u64
    );
}

/// The codes, each once, with a count when repeated (for the table).
fn code_summary(v: &Verdict) -> String {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for c in codes(v) {
        match seen.iter_mut().find(|(s, _)| *s == c) {
            Some((_, n)) => *n += 1,
            None => seen.push((c, 1)),
        }
    }
    seen.iter()
        .map(|(c, n)| {
            if *n > 1 {
                format!("{c} x{n}")
            } else {
                c.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn codes(v: &Verdict) -> Vec<String> {
    v.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// `xfs_repair -n` exit code and output.
fn repair_n(img: &Path) -> (i32, String) {
    let out = std::process::Command::new("xfs_repair")
        .arg("-n")
        .arg(img)
        .output()
        .expect("cannot run xfs_repair");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Run xfs_db (`-x` when `write`) with commands; returns stdout.
fn db(img: &Path, cmds: &[String], write: bool) -> String {
    let mut args: Vec<String> = vec![if write { "-x" } else { "-r" }.into()];
    for c in cmds {
        args.push("-c".into());
        args.push(c.clone());
    }
    args.push(img.to_str().unwrap().into());
    let out = run_output("xfs_db", &args);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `field` after running `cmds` ending in a print.
fn db_val(img: &Path, cmds: &[&str], field: &str) -> u64 {
    let mut c: Vec<String> = cmds.iter().map(|s| s.to_string()).collect();
    c.push(format!("print {field}"));
    let out = db(img, &c, false);
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("{field} = ")))
        .unwrap_or_else(|| panic!("xfs_db {c:?} printed no {field}: {out}"));
    let v = line
        .split(" = ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => v
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}")),
    }
}

/// Inode numbers of the fixture's named files.
#[derive(Debug, Default)]
struct Inos {
    hard: u64,
    frag: u64,
    one: u64,
    two: u64,
    fifo: u64,
    sfd: u64,
    sfd_sub: u64,
    freed: u64,
    attr_node: u64,
    bigdir: u64,
}

/// The common populate() tree plus: big directories, a file with many
/// extents (bmbt), xattrs in leaf and node form, fragmented free space,
/// a reflinked copy where the filesystem has reflink, and a few small
/// named objects the corruption cases aim at.
fn fill(root: &Path, heavy: bool) -> Inos {
    populate(root);
    if heavy {
        fragment_free_space(root);
    }
    let ino = |p: &str| std::fs::metadata(root.join(p)).unwrap().ino();
    let big = root.join("bigdir");
    std::fs::create_dir(&big).unwrap();
    for i in 0..4000 {
        std::fs::write(big.join(format!("a-rather-long-file-name-{i:05}")), b"").unwrap();
    }
    // Many extents: every other 4 KiB block of a 3 MiB range.
    let f = std::fs::File::create(root.join("frag")).unwrap();
    for i in 0..384u64 {
        f.write_all_at(&pattern(i, 4096), i * 8192).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    // Free-space fragments: every other file of 32 removed.
    let holes = root.join("holes");
    std::fs::create_dir(&holes).unwrap();
    for i in 0..32 {
        std::fs::write(holes.join(format!("h{i}")), pattern(i, 65536)).unwrap();
    }
    std::process::Command::new("sync").status().unwrap();
    for i in (0..32).step_by(2) {
        std::fs::remove_file(holes.join(format!("h{i}"))).unwrap();
    }
    // xattrs: leaf form (one block) and node form (several leaves).
    std::fs::write(root.join("attr_leaf"), b"l").unwrap();
    for i in 0..40 {
        set_xattr(
            &root.join("attr_leaf"),
            &format!("user.leaf{i}"),
            &pattern(i, 40),
        );
    }
    std::fs::write(root.join("attr_node"), b"n").unwrap();
    for i in 0..400 {
        set_xattr(
            &root.join("attr_node"),
            &format!("user.node-attr-{i:04}"),
            &pattern(i, 60),
        );
    }
    // A reflinked copy, partly rewritten (cp falls back to a plain copy
    // without reflink).
    let st = std::process::Command::new("cp")
        .args(["--reflink=auto"])
        .arg(root.join("big"))
        .arg(root.join("big.clone"))
        .status()
        .unwrap();
    assert!(st.success());
    let c = std::fs::OpenOptions::new()
        .write(true)
        .open(root.join("big.clone"))
        .unwrap();
    c.write_all_at(&pattern(99, 8192), 65536).unwrap();
    drop(c);
    // Small targets: files of one extent each, a shortform directory with
    // one file then one subdirectory, a freed inode.
    for (name, seed) in [("one", 1), ("two", 2)] {
        let mut f = std::fs::File::create(root.join(name)).unwrap();
        f.write_all(&pattern(seed, 4096)).unwrap();
        f.sync_all().unwrap();
    }
    std::fs::create_dir(root.join("sfd")).unwrap();
    std::fs::write(root.join("sfd/only"), b"only").unwrap();
    std::fs::create_dir(root.join("sfd/sub")).unwrap();
    std::fs::write(root.join("sfd/victim"), b"v").unwrap();
    let freed = ino("sfd/victim");
    std::fs::remove_file(root.join("sfd/victim")).unwrap();
    Inos {
        hard: ino("hard1"),
        frag: ino("frag"),
        one: ino("one"),
        two: ino("two"),
        fifo: ino("fifo"),
        sfd: ino("sfd"),
        sfd_sub: ino("sfd/sub"),
        freed,
        attr_node: ino("attr_node"),
        bigdir: ino("bigdir"),
    }
}

/// Many one-block free extents (bnobt/cntbt of several levels), and more
/// inode chunks.
fn fragment_free_space(root: &Path) {
    let d = root.join("confetti");
    std::fs::create_dir(&d).unwrap();
    for i in 0..3000 {
        std::fs::write(d.join(format!("c{i}")), pattern(i, 4096)).unwrap();
    }
    std::process::Command::new("sync").status().unwrap();
    for i in (0..3000).step_by(2) {
        std::fs::remove_file(d.join(format!("c{i}"))).unwrap();
    }
}

fn filled_image(s: &Scratch, opts: &[&str], heavy: bool) -> (std::path::PathBuf, Inos) {
    let img = s.path("img");
    mkfs(&img, 512 << 20, opts);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    let inos = fill(&m.dir, heavy);
    m.umount();
    (img, inos)
}

fn assert_clean(opts: &[&str]) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new(&format!(
        "check-clean{}",
        opts.join("").replace(['=', ' '], "")
    ));
    let (img, _) = filled_image(&s, opts, true);
    let (rc, text) = repair_n(&img);
    assert_eq!(
        rc, 0,
        "xfs_repair -n finds the kernel-made image {opts:?} dirty:\n{text}"
    );
    let v = rxfs_check(&img);
    eprintln!("{opts:?}: {}", v.json["stats"]);
    assert_eq!(
        v.code, 0,
        "rxfs check flags a clean image {opts:?}:\n{}",
        v.human
    );
    assert_eq!(v.json["clean"], Value::Bool(true));
    let stats = &v.json["stats"];
    assert!(stats["inodes_used"].as_u64().unwrap() > 5000, "{stats}");
    assert!(stats["xattrs"].as_u64().unwrap() >= 440, "{stats}");
    assert!(stats["directories"].as_u64().unwrap() >= 7, "{stats}");
}

#[test]
fn clean_default() {
    assert_clean(&[]);
}

#[test]
fn clean_rmapbt() {
    assert_clean(&["-m", "rmapbt=1"]);
}

#[test]
fn clean_noreflink_nosparse() {
    assert_clean(&["-m", "reflink=0", "-i", "sparse=0"]);
}

#[test]
fn clean_1k_blocks() {
    assert_clean(&["-b", "size=1024"]);
}

#[test]
fn clean_64k_dirblocks() {
    assert_clean(&["-n", "size=65536"]);
}

#[test]
fn clean_nofinobt() {
    assert_clean(&["-m", "finobt=0"]);
}

/// One seeded corruption.
struct Case {
    name: &'static str,
    /// xfs_db -x commands.
    cmds: Vec<String>,
    /// The finding rxfs must report.
    want: &'static str,
    /// Whether xfs_repair -n reports it (exit 1).
    repair_flags: bool,
}

/// An AG whose bnobt and cntbt are single leaves with at least `min`
/// records, and (when `same_last`) whose last records are the same extent.
fn pick_ag(img: &Path, min: u64, same_last: bool) -> u32 {
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

fn cases(img: &Path, i: &Inos) -> Vec<Case> {
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
    out
}

/// An AG whose inobt is one leaf with at least two chunks.
fn pick_inobt_ag(img: &Path) -> u32 {
    let agcount = db_val(img, &["sb 0"], "agcount") as u32;
    (0..agcount)
        .find(|ag| {
            let c = [format!("agi {ag}"), "addr root".to_string()];
            let c: Vec<&str> = c.iter().map(|s| s.as_str()).collect();
            db_val(img, &c, "level") == 0 && db_val(img, &c, "numrecs") >= 2
        })
        .expect("no AG with two inode chunks")
}

#[test]
fn seeded_corruptions_are_found() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    require_tools(&["xfs_db", "xfs_repair"]);
    let s = Scratch::new("check-corrupt");
    let (base, inos) = filled_image(&s, &[], false);
    let (rc, text) = repair_n(&base);
    assert_eq!(rc, 0, "base image not clean for xfs_repair -n:\n{text}");
    assert_eq!(rxfs_check(&base).code, 0);
    let img = s.path("case");
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for c in cases(&base, &inos) {
        run(
            "cp",
            &[
                "--sparse=always",
                base.to_str().unwrap(),
                img.to_str().unwrap(),
            ],
        );
        let out = db(&img, &c.cmds, true);
        let (rrc, rtext) = repair_n(&img);
        let v = rxfs_check(&img);
        let got = codes(&v);
        let found = v.code == 1 && got.iter().any(|g| g == c.want);
        let repair_ok = rrc == if c.repair_flags { 1 } else { 0 };
        rows.push(format!(
            "{:<36} | repair -n: {:<9} | rxfs: {:<5} | {}",
            c.name,
            if rrc == 1 { "flags" } else { "clean" },
            if v.code == 1 { "flags" } else { "clean" },
            code_summary(&v)
        ));
        if !found || !repair_ok {
            failures.push(format!(
                "{}: want {} (repair flags: {}); rxfs exit {} codes {got:?}; repair exit {rrc}\n\
                 xfs_db said: {out}\nrxfs:\n{}\nrepair:\n{rtext}",
                c.name, c.want, c.repair_flags, v.code, v.human
            ));
        }
    }
    // A dirty log: the kernel shut down with changes in the log.
    run(
        "cp",
        &[
            "--sparse=always",
            base.to_str().unwrap(),
            img.to_str().unwrap(),
        ],
    );
    {
        let m = KernelMount::new(&img, &s.path("mnt"), "");
        std::fs::write(m.dir.join("after-shutdown"), b"x").unwrap();
        std::process::Command::new("sync").status().unwrap();
        std::fs::write(m.dir.join("in-the-log"), b"y").unwrap();
        run("xfs_io", &["-x", "-c", "shutdown", m.dir.to_str().unwrap()]);
        m.umount();
    }
    let (rrc, _) = repair_n(&img);
    let v = rxfs_check(&img);
    rows.push(format!(
        "{:<36} | repair -n: {:<9} | rxfs: {:<5} | {}",
        "dirty log",
        if rrc == 1 { "flags" } else { "clean" },
        if v.code == 1 { "flags" } else { "clean" },
        code_summary(&v)
    ));
    if v.code != 1 || !codes(&v).iter().any(|c| c == "log-dirty") || rrc == 0 {
        failures.push(format!("dirty log: repair {rrc}, rxfs:\n{}", v.human));
    }
    eprintln!("corruption                           | xfs_repair -n        | rxfs check  | codes");
    for r in &rows {
        eprintln!("{r}");
    }
    assert!(rows.len() >= 16);
    assert!(failures.is_empty(), "{}", failures.join("\n----\n"));
}

#[test]
fn bad_primary_superblock_is_a_finding() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new("check-sbbad");
    let img = s.path("img");
    mkfs(&img, 300 << 20, &[]);
    let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.write_all_at(b"JUNK", 0).unwrap();
    drop(f);
    let v = rxfs_check(&img);
    assert_eq!(v.code, 1, "{}", v.human);
    assert_eq!(codes(&v), vec!["sb-bad".to_string()]);
    // Not an image at all: an I/O/usage error, exit 2.
    let out = rxfs(&[OsStr::new("check"), s.path("missing").as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
}

/// On an rmapbt filesystem: an inode-chunk reverse mapping one block
/// short leaves a block in use that no rmapbt record covers.
#[test]
fn seeded_rmapbt_corruption_is_found() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    require_tools(&["xfs_db", "xfs_repair"]);
    let s = Scratch::new("check-rmap");
    let (img, _) = filled_image(&s, &["-m", "rmapbt=1"], false);
    assert_eq!(rxfs_check(&img).code, 0);
    let mut nav = vec!["agf 0".to_string(), "addr rmaproot".to_string()];
    if db_val(&img, &["agf 0", "addr rmaproot"], "level") > 0 {
        nav.push("addr ptrs[1]".into());
    }
    let mut print = nav.clone();
    print.push("print recs".into());
    let recs = db(&img, &print, false);
    // Lines "N:[start,len,owner,offset,...]"; owner -7 is the inode chunks.
    let (idx, len) = recs
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.trim().split_once(":[")?;
            let f: Vec<&str> = rest.trim_end_matches(']').split(',').collect();
            let len: u64 = f.get(1)?.parse().ok()?;
            (f.get(2) == Some(&"-7") && len >= 2).then(|| (n.parse::<u64>().ok(), len))
        })
        .find_map(|(n, len)| n.map(|n| (n, len)))
        .unwrap_or_else(|| panic!("no inode-chunk rmap record in:\n{recs}"));
    let mut cmds = nav;
    cmds.push(format!("write -d recs[{idx}].blockcount {}", len - 1));
    db(&img, &cmds, true);
    let (rrc, rtext) = repair_n(&img);
    let v = rxfs_check(&img);
    eprintln!(
        "rmap record short | repair -n exit {rrc} | rxfs exit {} | {}",
        v.code,
        code_summary(&v)
    );
    assert_eq!(codes(&v), vec!["rmapbt-missing".to_string()], "{}", v.human);
    assert_eq!(v.code, 1);
    assert!(rtext.contains("Incorrect reverse-mapping"), "{rtext}");
    assert_eq!(rrc, 1, "xfs_repair -n does not flag it:\n{rtext}");
}

/// An image written by rxfs's own write path (a read-write FUSE mount of
/// the same fixture) is clean for both checkers.
#[test]
fn rxfs_written_image_is_clean() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new("check-rxfs-rw");
    let img = s.path("img");
    mkfs(&img, 512 << 20, &[]);
    let mnt = s.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    rxfs_ok(&[OsStr::new("mount"), img.as_os_str(), mnt.as_os_str()]);
    let guard = KernelMount::adopt(&mnt);
    fill(&mnt, true);
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    guard.disarm();
    let (rc, text) = repair_n(&img);
    assert_eq!(rc, 0, "xfs_repair -n flags the rxfs-written image:\n{text}");
    let v = rxfs_check(&img);
    eprintln!("rxfs-written: {}", v.json["stats"]);
    assert_eq!(
        v.code, 0,
        "rxfs check flags the rxfs-written image:\n{}",
        v.human
    );
}

/// A bnobt node key that no longer equals its child's first key: rxfs
/// flags it (the kernel keeps them equal, as its online scrub checks);
/// xfs_repair -n does not look at it.
#[test]
fn seeded_node_key_mismatch_is_found() {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    require_tools(&["xfs_db", "xfs_repair"]);
    let s = Scratch::new("check-keys");
    let (img, _) = filled_image(&s, &[], true);
    assert_eq!(rxfs_check(&img).code, 0);
    let agcount = db_val(&img, &["sb 0"], "agcount") as u32;
    let ag = (0..agcount)
        .find(|ag| {
            let c = [format!("agf {ag}"), "addr bnoroot".to_string()];
            let c: Vec<&str> = c.iter().map(|s| s.as_str()).collect();
            db_val(&img, &c, "level") >= 1 && db_val(&img, &c, "numrecs") >= 2
        })
        .expect("no AG with a two-level bnobt");
    let agf = format!("agf {ag}");
    let k1 = db_val(&img, &[&agf, "addr bnoroot"], "keys[1].startblock");
    let k2 = db_val(&img, &[&agf, "addr bnoroot"], "keys[2].startblock");
    // Free extents never touch: keys[2] - 1 still sorts after keys[1].
    assert!(k2 - 1 > k1);
    let cmds = [
        agf.clone(),
        "addr bnoroot".into(),
        format!("write -d keys[2].startblock {}", k2 - 1),
    ];
    db(&img, &cmds, true);
    let (rrc, rtext) = repair_n(&img);
    let v = rxfs_check(&img);
    eprintln!(
        "bnobt node key != child's first key | repair -n exit {rrc} | rxfs exit {} | {}",
        v.code,
        code_summary(&v)
    );
    assert_eq!(codes(&v), vec!["bnobt-bad".to_string()], "{}", v.human);
    assert_eq!(v.code, 1);
    assert_eq!(rrc, 0, "xfs_repair -n now flags it:\n{rtext}");
}
