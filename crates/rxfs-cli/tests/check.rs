//! `rxfs check` against the oracles: images made by mkfs.xfs and filled by
//! the kernel must be clean for both `xfs_repair -n` and `rxfs check` (no
//! false positives, over several mkfs variants); images corrupted on
//! purpose with `xfs_db -x` must be flagged by `rxfs check` with the
//! expected finding code, and `xfs_repair -n` must give the verdict the
//! cases in `check_support/cases.rs` record for it (a few it does not
//! report).
//! `--json` must carry the same findings as the human output.

mod check_support;
mod common;

use std::ffi::OsStr;
use std::os::unix::fs::FileExt;
use std::path::Path;

use check_support::cases::cases;
use check_support::*;
use common::*;
use serde_json::Value;

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
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn clean_default() {
    assert_clean(&[]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn clean_rmapbt() {
    assert_clean(&["-m", "rmapbt=1"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn clean_noreflink_nosparse() {
    assert_clean(&["-m", "reflink=0", "-i", "sparse=0"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn clean_1k_blocks() {
    assert_clean(&["-b", "size=1024"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn clean_64k_dirblocks() {
    assert_clean(&["-n", "size=65536"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn clean_nofinobt() {
    assert_clean(&["-m", "finobt=0"]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn seeded_corruptions_are_found() {
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
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn bad_primary_superblock_is_a_finding() {
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

/// An rmapbt record as xfs_db prints it: (index, start, len, owner).
type RmapLine = (u64, u64, u64, i64);

/// The first rmapbt leaf of AG 0: xfs_db commands reaching it, and its
/// records.
fn rmap_leaf(img: &Path) -> (Vec<String>, Vec<RmapLine>) {
    let mut nav = vec!["agf 0".to_string(), "addr rmaproot".to_string()];
    if db_val(img, &["agf 0", "addr rmaproot"], "level") > 0 {
        nav.push("addr ptrs[1]".into());
    }
    let mut print = nav.clone();
    print.push("print recs".into());
    let out = db(img, &print, false);
    // Lines "N:[start,len,owner,offset,...]".
    let recs = out
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.trim().split_once(":[")?;
            let f: Vec<&str> = rest.trim_end_matches(']').split(',').collect();
            Some((
                n.parse().ok()?,
                f.first()?.parse().ok()?,
                f.get(1)?.parse().ok()?,
                f.get(2)?.parse().ok()?,
            ))
        })
        .collect();
    (nav, recs)
}

/// On an rmapbt filesystem: an inode-chunk reverse mapping one block short
/// (a block in use that no rmapbt record covers, and a record that differs
/// from the expected one), and a file mapping given to another owner (the
/// coverage is right, the owner is not).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn seeded_rmapbt_corruptions_are_found() {
    require_root();
    require_tools(&["xfs_db", "xfs_repair"]);
    let s = Scratch::new("check-rmap");
    let (base, _) = filled_image(&s, &["-m", "rmapbt=1"], false);
    assert_eq!(rxfs_check(&base).code, 0);
    let (nav, recs) = rmap_leaf(&base);
    let chunk = recs
        .iter()
        .find(|r| r.3 == -7 && r.2 >= 2)
        .unwrap_or_else(|| panic!("no inode-chunk rmap record in {recs:?}"));
    // A file mapping in the middle of the leaf (neither its first key nor,
    // being followed by a later start, its largest high key).
    let file = recs
        .iter()
        .enumerate()
        .find(|(i, r)| *i >= 1 && *i + 2 < recs.len() && r.3 > 0)
        .map(|(_, r)| *r)
        .unwrap_or_else(|| panic!("no file rmap record in {recs:?}"));
    let cases = [
        (
            "rmap inode-chunk record short",
            format!("write -d recs[{}].blockcount {}", chunk.0, chunk.2 - 1),
            vec!["rmapbt-missing", "rmapbt-mismatch"],
        ),
        (
            "rmap record with the wrong owner",
            format!("write -d recs[{}].owner {}", file.0, file.3 + 1),
            vec!["rmapbt-mismatch"],
        ),
    ];
    let img = s.path("case");
    for (name, write, want) in cases {
        run(
            "cp",
            &[
                "--sparse=always",
                base.to_str().unwrap(),
                img.to_str().unwrap(),
            ],
        );
        let mut cmds = nav.clone();
        cmds.push(write);
        db(&img, &cmds, true);
        let (rrc, rtext) = repair_n(&img);
        let v = rxfs_check(&img);
        eprintln!(
            "{name} | repair -n exit {rrc} | rxfs exit {} | {}",
            v.code,
            code_summary(&v)
        );
        let mut got = codes(&v);
        got.dedup();
        assert_eq!(got, want, "{name}: {}", v.human);
        assert_eq!(v.code, 1);
        assert!(rtext.contains("reverse-mapping"), "{name}: {rtext}");
        assert_eq!(rrc, 1, "{name}: xfs_repair -n does not flag it:\n{rtext}");
    }
}

/// An image written by rxfs's own write path (a read-write FUSE mount of
/// the same fixture) is clean for both checkers.
fn assert_rxfs_written_clean(opts: &[&str]) {
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    let s = Scratch::new(&format!("check-rxfs-rw{}", opts.join("").replace('=', "")));
    let img = s.path("img");
    mkfs(&img, 512 << 20, opts);
    let mnt = s.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    rxfs_ok(&[OsStr::new("mount"), img.as_os_str(), mnt.as_os_str()]);
    let guard = KernelMount::adopt(&mnt);
    fill(&mnt, true);
    rxfs_ok(&[OsStr::new("umount"), mnt.as_os_str()]);
    guard.disarm();
    let (rc, text) = repair_n(&img);
    assert_eq!(
        rc, 0,
        "xfs_repair -n flags the rxfs-written image {opts:?}:\n{text}"
    );
    let v = rxfs_check(&img);
    eprintln!("rxfs-written {opts:?}: {}", v.json["stats"]);
    assert_eq!(
        v.code, 0,
        "rxfs check flags the rxfs-written image {opts:?}:\n{}",
        v.human
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rxfs_written_image_is_clean() {
    assert_rxfs_written_clean(&[]);
}

/// On rmapbt (and reflink) filesystems rxfs also writes reverse mappings.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rxfs_written_rmapbt_image_is_clean() {
    assert_rxfs_written_clean(&["-m", "rmapbt=1"]);
}

/// A bnobt node key that no longer equals its child's first key: rxfs
/// flags it (the kernel keeps them equal, as its online scrub checks);
/// xfs_repair -n does not look at it.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn seeded_node_key_mismatch_is_found() {
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

/// Fresh images made by `rxfs mkfs` are clean for both checkers.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rxfs_mkfs_images_are_clean() {
    let s = Scratch::new("check-mkfs");
    for (i, opts) in [
        &["-d", "size=512m"][..],
        &["-d", "size=1g", "-m", "rmapbt=1", "-b", "size=1024"],
        &[
            "-d",
            "size=600m",
            "-m",
            "reflink=0",
            "-i",
            "sparse=0",
            "-n",
            "size=16k",
        ],
    ]
    .iter()
    .enumerate()
    {
        let img = s.path(&format!("img{i}"));
        let mut args: Vec<&OsStr> = vec![OsStr::new("mkfs"), OsStr::new("-q")];
        args.extend(opts.iter().map(OsStr::new));
        args.push(img.as_os_str());
        rxfs_ok(&args);
        let (rc, text) = repair_n(&img);
        assert_eq!(rc, 0, "xfs_repair -n flags rxfs mkfs {opts:?}:\n{text}");
        let v = rxfs_check(&img);
        assert_eq!(
            v.code, 0,
            "rxfs check flags rxfs mkfs {opts:?}:\n{}",
            v.human
        );
        assert!(v.json["stats"]["inodes_used"].as_u64().unwrap() >= 3);
    }
}

/// Random bit flips in metadata structures (CRCs restamped, so only the
/// structural checks can see them): on every seed, `rxfs check` and
/// `xfs_repair -n` give the same verdict. A disagreeing seed is printed
/// with both outputs.
fn assert_random_damage_agrees(name: &str, opts: &[&str], seeds: u64) {
    use rand::{Rng, SeedableRng};
    if kernel_tests_disabled() {
        return;
    }
    require_root();
    require_tools(&["xfs_repair"]);
    let s = Scratch::new(name);
    let (base, _) = filled_image(&s, opts, false);
    let items = metadata_items(&base);
    assert!(
        items.len() > 1000,
        "only {} metadata structures",
        items.len()
    );
    let img = s.path("case");
    let (mut flagged, mut disagree) = (0, Vec::new());
    for seed in 0..seeds {
        run(
            "cp",
            &[
                "--sparse=always",
                base.to_str().unwrap(),
                img.to_str().unwrap(),
            ],
        );
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&img)
            .unwrap();
        for _ in 0..rng.gen_range(1..=3) {
            let (off, len, crc_off) = items[rng.gen_range(0..items.len())];
            let mut buf = vec![0u8; len];
            f.read_exact_at(&mut buf, off).unwrap();
            for _ in 0..rng.gen_range(1..=4) {
                let p = rng.gen_range(0..len);
                buf[p] ^= 1 << rng.gen_range(0..8);
            }
            rxfs::format::crc::update(&mut buf, crc_off);
            f.write_all_at(&buf, off).unwrap();
        }
        drop(f);
        let (rrc, rtext) = repair_n(&img);
        let v = rxfs_check(&img);
        assert!(v.code == 0 || v.code == 1, "seed {seed}: exit {}", v.code);
        flagged += v.code;
        // xfs_repair -n: 1 on damage; anything but 0 (it may also die on a
        // damaged image) is not a clean verdict.
        if (rrc != 0) != (v.code == 1) {
            disagree.push(format!(
                "seed {seed}: xfs_repair -n exit {rrc}, rxfs exit {}\nrxfs:\n{}\nrepair:\n{rtext}",
                v.code, v.human
            ));
        }
    }
    eprintln!(
        "{opts:?}: {flagged} of {seeds} damaged images flagged, {} disagreements",
        disagree.len()
    );
    assert!(disagree.is_empty(), "{}", disagree.join("\n----\n"));
    assert!(flagged > 0);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_damage_verdicts_agree_with_xfs_repair() {
    assert_random_damage_agrees("check-random", &[], 80);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_damage_verdicts_agree_with_xfs_repair_rmapbt() {
    assert_random_damage_agrees("check-random-rmap", &["-m", "rmapbt=1"], 40);
}

/// Images changed offline by `rxfs put`, `rxfs rm` and `rxfs mkdir` are
/// clean for both checkers.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rxfs_put_rm_mkdir_images_are_clean() {
    require_root();
    let s = Scratch::new("check-put");
    let tree = s.path("tree");
    std::fs::create_dir(&tree).unwrap();
    populate(&tree);
    let img = s.path("img");
    rxfs_ok(&[
        OsStr::new("mkfs"),
        OsStr::new("-q"),
        OsStr::new("-d"),
        OsStr::new("size=512m"),
        OsStr::new("-m"),
        OsStr::new("rmapbt=1"),
        img.as_os_str(),
    ]);
    let i = img.as_os_str();
    rxfs_ok(&[OsStr::new("put"), i, tree.as_os_str(), OsStr::new("/tree")]);
    rxfs_ok(&[
        OsStr::new("rm"),
        OsStr::new("-r"),
        i,
        OsStr::new("/tree/many"),
    ]);
    rxfs_ok(&[
        OsStr::new("mkdir"),
        OsStr::new("-p"),
        i,
        OsStr::new("/a/b/c"),
    ]);
    let (rc, text) = repair_n(&img);
    assert_eq!(rc, 0, "xfs_repair -n flags the image:\n{text}");
    let v = rxfs_check(&img);
    assert_eq!(v.code, 0, "rxfs check flags the image:\n{}", v.human);
    assert!(v.json["stats"]["inodes_used"].as_u64().unwrap() > 20);
}
