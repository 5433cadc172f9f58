//! `rxfs check` on a filesystem with a realtime section (issue 17): the
//! realtime device given with `-o rtdev=FILE` or `--rtdev FILE`, or not
//! given (then a note says what was not checked: only the device's size,
//! the bitmap and summary being on the data device). A damaged bitmap is
//! found either way, as `xfs_repair -n -r` finds it. The library test
//! `crates/rxfs/tests/rt_check_kernel.rs` covers each kind of damage.
//!
//! Needs mkfs.xfs and xfs_repair (not root).

mod check_support;
mod common;

use std::path::{Path, PathBuf};

use check_support::assert_json_matches_human;
use common::*;
use rxfs::cred::Cred;
use rxfs::format::xflags::XFLAG_RTINHERIT;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::{Filesystem, MountOptions};
use serde_json::Value;

/// An image with a realtime device and a realtime file written by rxfs.
fn make(s: &Scratch) -> (PathBuf, PathBuf) {
    let img = s.path("img");
    let rt = s.path("rt");
    std::fs::File::create(&rt)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let r = format!("rtdev={},extsize=8192", rt.display());
    mkfs_with(&img, 256 << 20, &["-r", &r], FSTESTS_ENV);
    let fs = Filesystem::open_path(&img, Some(&rt), MountOptions::default()).unwrap();
    let root = fs.root_ino();
    let mut x = fs.get_fsxattr(root).unwrap();
    x.xflags |= XFLAG_RTINHERIT;
    fs.set_fsxattr(root, &x, true, &Cred::root()).unwrap();
    let ip = fs.create(root, b"f", &CreateArgs::root(0o100644)).unwrap();
    assert!(ip.is_realtime());
    fs.write(ip.ino, 0, &pattern(1, 100_000)).unwrap();
    fs.unmount().unwrap();
    (img, rt)
}

/// `rxfs check ARGS... IMAGE`: exit code, stdout; with `--json` added:
/// the JSON, checked against the human lines.
fn run(img: &Path, args: &[&str]) -> (i32, String, Value) {
    let mut a: Vec<String> = vec!["check".into(), "-q".into()];
    a.extend(args.iter().map(|s| s.to_string()));
    a.push(img.display().to_string());
    let h = rxfs(&a);
    a.insert(1, "--json".into());
    let j = rxfs(&a);
    let code = h.status.code().unwrap_or(-1);
    assert_eq!(code, j.status.code().unwrap_or(-1));
    let human = String::from_utf8_lossy(&h.stdout).into_owned();
    let json: Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_json_matches_human(&json, &human);
    (code, human, json)
}

fn repair_rc(img: &Path, rt: &Path) -> i32 {
    std::process::Command::new("xfs_repair")
        .args(["-n", "-r", rt.to_str().unwrap(), img.to_str().unwrap()])
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn realtime_section_checked_with_and_without_the_device() {
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("check-rt");
    let (img, rt) = make(&s);
    assert_eq!(repair_rc(&img, &rt), 0);
    let o = format!("rtdev={}", rt.display());
    let rt_s = rt.to_str().unwrap();
    for args in [vec!["-o", o.as_str()], vec!["--rtdev", rt_s]] {
        let (code, human, json) = run(&img, &args);
        assert_eq!(code, 0, "{args:?}: {human}");
        assert_eq!(human, "clean: no findings\n", "{args:?}");
        assert_eq!(json["notes"], Value::Array(vec![]));
        assert!(json["stats"]["rt_free_extents"].as_u64().unwrap() > 0);
    }
    let (code, human, json) = run(&img, &[]);
    assert_eq!(code, 0, "{human}");
    assert!(
        human.contains("note: no realtime device given") && human.contains("was checked"),
        "{human}"
    );
    assert_eq!(json["notes"].as_array().unwrap().len(), 1, "{json}");
    // Mark the file's first rt extent (rt extent 0) free in the bitmap.
    let fs = Filesystem::open_path(
        &img,
        None,
        MountOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let bitmap0 = rxfs::rt::maps(&*fs).unwrap().bitmap[0];
    drop(fs);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&img)
            .unwrap();
        let mut w = [0u8; 4];
        f.read_exact_at(&mut w, bitmap0.0 << 9).unwrap();
        let v = u32::from_ne_bytes(w) | 1;
        f.write_all_at(&v.to_ne_bytes(), bitmap0.0 << 9).unwrap();
    }
    for args in [vec!["-o", o.as_str()], vec![]] {
        let (code, human, _) = run(&img, &args);
        assert_eq!(code, 1, "{args:?}: {human}");
        assert!(human.starts_with("rt-bitmap-free-claimed: "), "{human}");
    }
    assert_eq!(repair_rc(&img, &rt), 1);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rtdev_for_a_filesystem_without_realtime_section_is_a_usage_error() {
    require_tools(&["mkfs.xfs"]);
    let s = Scratch::new("check-rt-none");
    let img = s.path("img");
    mkfs_with(&img, 256 << 20, &[], FSTESTS_ENV);
    let rt = s.path("rt");
    std::fs::File::create(&rt)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let o = format!("rtdev={}", rt.display());
    let out = rxfs(&["check", "-q", "-o", &o, img.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no realtime section"), "{err}");
    let (code, human, json) = run(&img, &[]);
    assert_eq!((code, human.as_str()), (0, "clean: no findings\n"));
    assert_eq!(json["notes"], Value::Array(vec![]));
}
