//! Helpers of the `rxfs check` tests: running both checkers, xfs_db, and
//! the kernel-made fixture the tests check and corrupt.

#![allow(dead_code)]

pub mod cases;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use crate::common::*;
use serde_json::Value;

/// What `rxfs check` said: exit code, the JSON report, the human lines.
pub struct Verdict {
    pub code: i32,
    pub json: Value,
    pub human: String,
}

pub fn rxfs_check(img: &Path) -> Verdict {
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
pub fn assert_json_matches_human(json: &Value, human: &str) {
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
pub fn code_summary(v: &Verdict) -> String {
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

pub fn codes(v: &Verdict) -> Vec<String> {
    v.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// `xfs_repair -n` exit code and output.
pub fn repair_n(img: &Path) -> (i32, String) {
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
pub fn db(img: &Path, cmds: &[String], write: bool) -> String {
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
pub fn db_val(img: &Path, cmds: &[&str], field: &str) -> u64 {
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
pub struct Inos {
    pub hard: u64,
    pub frag: u64,
    pub one: u64,
    pub two: u64,
    pub fifo: u64,
    pub sfd: u64,
    pub sfd_sub: u64,
    pub freed: u64,
    pub attr_node: u64,
    pub bigdir: u64,
    pub blockdir: u64,
    pub leafdir: u64,
}

/// The common populate() tree plus: big directories, a file with many
/// extents (bmbt), xattrs in leaf and node form, fragmented free space,
/// a reflinked copy where the filesystem has reflink, and a few small
/// named objects the corruption cases aim at.
pub fn fill(root: &Path, heavy: bool) -> Inos {
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
    // Block form (one directory block) and leaf form (data blocks and a
    // leaf1 index) at 4 KiB directory blocks.
    for (dir, n) in [("blockdir", 60), ("leafdir", 400)] {
        std::fs::create_dir(root.join(dir)).unwrap();
        for i in 0..n {
            std::fs::write(root.join(format!("{dir}/{dir}-entry-name-{i}")), b"").unwrap();
        }
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
        blockdir: ino("blockdir"),
        leafdir: ino("leafdir"),
    }
}

/// Many one-block free extents (bnobt/cntbt of several levels), and more
/// inode chunks.
pub fn fragment_free_space(root: &Path) {
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

pub fn filled_image(s: &Scratch, opts: &[&str], heavy: bool) -> (std::path::PathBuf, Inos) {
    let img = s.path("img");
    mkfs(&img, 512 << 20, opts);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    let inos = fill(&m.dir, heavy);
    m.umount();
    (img, inos)
}

/// Metadata structures of an image: (byte offset, length, CRC offset),
/// found by their magic numbers in 4 KiB blocks (inodes: 512 bytes).
pub fn metadata_items(img: &Path) -> Vec<(u64, usize, usize)> {
    let data = std::fs::read(img).unwrap();
    let short_btrees: [&[u8]; 6] = [b"AB3B", b"AB3C", b"IAB3", b"FIB3", b"RMB3", b"R3FC"];
    let mut items = Vec::new();
    for off in (0..data.len()).step_by(4096) {
        let b = &data[off..off + 4096];
        let (magic, o) = (&b[..4], off as u64);
        let da_magic = u16::from_be_bytes([b[8], b[9]]);
        if magic == b"XFSB" {
            items.extend([(o, 512, 224), (o + 512, 512, 216), (o + 1024, 512, 312)]);
            items.push((o + 1536, 512, 32));
        } else if short_btrees.contains(&magic) {
            items.push((o, 4096, 52));
        } else if magic == b"BMA3" {
            items.push((o, 4096, 64));
        } else if [&b"XDB3"[..], b"XDD3", b"XDF3"].contains(&magic) {
            items.push((o, 4096, 4));
        } else if [0x3ebe, 0x3df1, 0x3dff, 0x3bee].contains(&da_magic) {
            items.push((o, 4096, 12));
        } else if &b[..2] == b"IN" && b[4] == 3 {
            for i in 0..8 {
                if &b[i * 512..i * 512 + 2] == b"IN" {
                    items.push((o + i as u64 * 512, 512, 100));
                }
            }
        }
    }
    items
}
