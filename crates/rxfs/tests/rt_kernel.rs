//! Realtime filesystems, with xfsprogs as the oracle (this kernel has no
//! CONFIG_XFS_RT and cannot mount them).
//!
//! `tests/fixtures/make_rt_fixture.sh` builds each image: mkfs.xfs with an
//! rt device, realtime files placed with xfs_db, data written with dd, the
//! bitmap, summary and sb_frextents rewritten, and the result accepted by
//! `xfs_repair -n -r` and `xfs_db -c blockget`. rxfs must then read every
//! file exactly as the script's source tree holds it, report the sizes and
//! block counts xfs_db reports, and agree with xfs_db and with the bitmap
//! and summary a full xfs_repair regenerates.
//!
//! Needs mkfs.xfs, xfs_db and xfs_repair (not root). Fails when they are
//! missing, unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rxfs::format::rt::{RangeState, RtExtentNo};
use rxfs::types::{FileType, Ino};
use rxfs::{Error, Filesystem, MountOptions};

fn ro() -> MountOptions {
    MountOptions {
        read_only: true,
        ..Default::default()
    }
}

/// A realtime file: size, nblocks, nextents and its extents as
/// (file block, rt block, block count, unwritten).
type RtFile = (u64, u64, u64, Vec<(u64, u64, u64, bool)>);

/// What make_rt_fixture.sh printed.
#[derive(Default, Debug)]
struct Layout {
    geometry: BTreeMap<String, u64>,
    inodes: Vec<(u64, String)>,
    rtfiles: BTreeMap<String, RtFile>,
    /// (log, bitmap block, count)
    summary: Vec<(u32, u64, u32)>,
}

fn parse_layout(out: &str) -> Layout {
    let mut l = Layout::default();
    let num = |s: &str| -> u64 { s.parse().unwrap_or_else(|_| panic!("bad number {s:?}")) };
    let kv = |s: &str| -> (String, u64) {
        let (k, v) = s.split_once('=').unwrap();
        (k.to_string(), num(v))
    };
    for line in out.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "geometry" => l.geometry = f[1..].iter().map(|s| kv(s)).collect(),
            "inode" => l.inodes.push((num(f[1]), f[2].to_string())),
            "rtfile" => {
                let m: BTreeMap<_, _> = f[2..].iter().map(|s| kv(s)).collect();
                l.rtfiles.insert(
                    f[1].to_string(),
                    (m["size"], m["nblocks"], m["nextents"], Vec::new()),
                );
            }
            "extent" => l.rtfiles.get_mut(f[1]).unwrap().3.push((
                num(f[2]),
                num(f[3]),
                num(f[4]),
                f[5] == "1",
            )),
            "summary" => l
                .summary
                .push((num(f[1]) as u32, num(f[2]), num(f[3]) as u32)),
            _ => panic!("unexpected layout line {line:?}"),
        }
    }
    l
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/make_rt_fixture.sh")
}

struct Fixture {
    s: Scratch,
    layout: Layout,
}

impl Fixture {
    fn data(&self) -> PathBuf {
        self.s.path("data.img")
    }
    fn rt(&self) -> PathBuf {
        self.s.path("rt.img")
    }
    fn src(&self) -> PathBuf {
        self.s.path("src")
    }
}

fn make_fixture(name: &str, extsize: &str, blocksize: &str) -> Fixture {
    let s = Scratch::new(&format!("rt-{name}"));
    let (script, data, rt, src) = (
        script(),
        s.path("data.img"),
        s.path("rt.img"),
        s.path("src"),
    );
    let out = run_output(
        "bash",
        &[
            script.as_os_str(),
            data.as_os_str(),
            rt.as_os_str(),
            src.as_os_str(),
            extsize.as_ref(),
            blocksize.as_ref(),
        ],
    );
    let layout = parse_layout(&String::from_utf8(out.stdout).unwrap());
    Fixture { s, layout }
}

/// `xfs_db -r -c CMD... IMG` output as name -> value.
fn xfs_db(img: &Path, cmds: &[&str]) -> BTreeMap<String, String> {
    let mut args = vec!["-r"];
    for x in cmds {
        args.extend(["-c", x]);
    }
    args.push(img.to_str().unwrap());
    let out = run_output("xfs_db", &args);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn repair_n(data: &Path, rt: &Path) -> (bool, String) {
    let out = Command::new("xfs_repair")
        .arg("-n")
        .arg("-r")
        .arg(rt)
        .arg(data)
        .output()
        .expect("cannot run xfs_repair");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Read a whole file through rxfs in `chunk`-byte reads.
fn read_all(fs: &Filesystem, ino: Ino, chunk: usize) -> Vec<u8> {
    let ip = fs.iget(ino).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        let n = fs.read_file(&ip, out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

fn check_fixture(fx: &Fixture) {
    let l = &fx.layout;
    let g = &l.geometry;
    let fs = Filesystem::open_path(&fx.data(), Some(&fx.rt()), ro()).unwrap();
    let bs = g["blocksize"];
    assert_eq!(fs.sb().rextsize as u64, g["rextsize"]);

    // Every path: type, mode, contents as the source tree has them.
    for (ino, path) in &l.inodes {
        let ip = fs.iget(Ino(*ino)).unwrap();
        assert_eq!(fs.resolve(path.as_bytes()).unwrap(), Ino(*ino), "{path}");
        let src = fx.src().join(path.trim_start_matches('/'));
        let md = std::fs::symlink_metadata(&src).unwrap();
        if path != "/" {
            assert_eq!(
                ip.core.mode as u32 & 0o7777,
                md.permissions().mode() & 0o7777,
                "{path}: mode"
            );
            // The script gives the source tree the image's owners as root.
            if unsafe { libc::geteuid() } == 0 {
                assert_eq!((ip.core.uid, ip.core.gid), (md.uid(), md.gid()), "{path}");
            }
        }
        let ft = md.file_type();
        if ft.is_dir() {
            assert_eq!(ip.file_type(), Some(FileType::Directory), "{path}");
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&src).unwrap();
            assert_eq!(
                fs.readlink(&ip).unwrap(),
                target.as_os_str().as_encoded_bytes(),
                "{path}"
            );
        } else {
            assert!(ft.is_file() && !ft.is_fifo(), "{path}");
            let want = std::fs::read(&src).unwrap();
            assert_eq!(ip.core.size, want.len() as u64, "{path}: size");
            for chunk in [65536, 7777, bs as usize] {
                let got = read_all(&fs, Ino(*ino), chunk);
                assert!(got == want, "{path}: contents differ (chunk {chunk})");
            }
        }
    }

    // Realtime files: flag, size, block count, extents, as laid out and as
    // xfs_db reads them.
    let ino_of: BTreeMap<&str, u64> = l.inodes.iter().map(|(i, p)| (p.as_str(), *i)).collect();
    for (path, (size, nblocks, nextents, exts)) in &l.rtfiles {
        let ino = ino_of[path.as_str()];
        let ip = fs.iget(Ino(ino)).unwrap();
        assert!(ip.is_realtime(), "{path}: realtime flag");
        let db = xfs_db(
            &fx.data(),
            &[
                &format!("inode {ino}"),
                "print core.size core.nblocks core.nextents core.realtime",
            ],
        );
        assert_eq!(db["core.realtime"], "1", "{path}");
        assert_eq!(ip.core.size.to_string(), db["core.size"], "{path}: size");
        assert_eq!(ip.core.nblocks.to_string(), db["core.nblocks"], "{path}");
        assert_eq!(ip.core.nextents.to_string(), db["core.nextents"], "{path}");
        assert_eq!((ip.core.size, ip.core.nblocks), (*size, *nblocks), "{path}");
        assert_eq!(ip.core.nextents, *nextents, "{path}");
        let got: Vec<_> = ip
            .data
            .extents()
            .iter()
            .map(|e| (e.off.0, e.start, e.len, e.unwritten))
            .collect();
        assert_eq!(&got, exts, "{path}: extents");
        // The bitmap says every rt extent these map is in use.
        for &(_, rtb, cnt, _) in exts {
            let (first, n) = rxfs::rt::layout(&*fs).rtx_span(rxfs::types::RtBlock(rtb), cnt);
            assert_eq!(
                rxfs::rt::extent_state(&*fs, first, n).unwrap(),
                RangeState::Allocated,
                "{path}: rt blocks {rtb}+{cnt}"
            );
        }
    }
    // The layout leaves rt extents 0..10 free, 10..13 used.
    assert_eq!(
        rxfs::rt::extent_state(&*fs, RtExtentNo(0), 10).unwrap(),
        RangeState::Free
    );
    assert_eq!(
        rxfs::rt::extent_state(&*fs, RtExtentNo(5), 6).unwrap(),
        RangeState::Mixed
    );
    assert!(rxfs::rt::extent_state(&*fs, RtExtentNo(g["rextents"]), 1).is_err());

    // Free space: bitmap vs xfs_db's superblock, the summary vs the script.
    let frextents: u64 = xfs_db(&fx.data(), &["sb 0", "print frextents"])["frextents"]
        .parse()
        .unwrap();
    assert_eq!(frextents, g["frextents"]);
    assert_eq!(rxfs::rt::free_extents(&*fs).unwrap(), frextents);
    let sum = rxfs::rt::summary(&*fs).unwrap();
    let mut want = l.summary.clone();
    want.sort();
    let mut got: Vec<_> = sum.nonzero().collect();
    got.sort();
    assert_eq!(got, want, "summary counters");
    let check = rxfs::rt::check(&*fs).unwrap();
    assert!(check.is_clean(), "{check:?}");
    assert_eq!(check.free_extents, frextents);
    // The whole checker (realtime extents against the bitmap included)
    // finds nothing either.
    let report = rxfs::check::check(&fs, &mut |_, _, _| {});
    assert!(report.clean(), "rxfs check: {:?}", report.findings);
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    assert_eq!(report.stats.rt_free_extents, frextents);

    // xfs_repair -n agrees, and a full xfs_repair regenerates exactly the
    // bitmap and summary the fixture wrote.
    let (ok, text) = repair_n(&fx.data(), &fx.rt());
    assert!(ok, "xfs_repair -n: {text}");
    let fixed = fx.s.path("repaired.img");
    std::fs::copy(fx.data(), &fixed).unwrap();
    run(
        "xfs_repair",
        &["-r", fx.rt().to_str().unwrap(), fixed.to_str().unwrap()],
    );
    let fs2 = Filesystem::open_path(&fixed, Some(&fx.rt()), ro()).unwrap();
    assert_eq!(fs2.sb().frextents, frextents);
    assert_eq!(rxfs::rt::summary(&*fs2).unwrap(), sum);
    let (b1, b2) = (
        rxfs::rt::bitmap_inode(&*fs).unwrap(),
        rxfs::rt::bitmap_inode(&*fs2).unwrap(),
    );
    for b in 0..g["rbmblocks"] {
        assert!(
            rxfs::rt::bitmap_block(&*fs, &b1, b).unwrap()
                == rxfs::rt::bitmap_block(&*fs2, &b2, b).unwrap(),
            "bitmap block {b} differs from xfs_repair's"
        );
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_default_extsize() {
    let fx = make_fixture("default", "", "");
    assert_eq!(fx.layout.geometry["rextsize"], 1);
    check_fixture(&fx);
    check_failures(&fx);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_extsize_16k() {
    let fx = make_fixture("ext16k", "16k", "");
    assert_eq!(fx.layout.geometry["rextsize"], 4);
    check_fixture(&fx);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rt_1k_blocks_two_bitmap_blocks() {
    let fx = make_fixture("b1k", "", "1024");
    assert_eq!(fx.layout.geometry["rbmblocks"], 2);
    assert_eq!(fx.layout.geometry["rextsize"], 4);
    // /rt/cross maps rt extents 8190..8194, across the two bitmap blocks.
    assert_eq!(fx.layout.rtfiles["/rt/cross"].3[0].1, 8190 * 4);
    check_fixture(&fx);
}

/// Copy the data image and modify the copy with `xfs_db -x`.
fn damaged_copy(fx: &Fixture, name: &str, cmds: &[&str]) -> PathBuf {
    let p = fx.s.path(name);
    std::fs::copy(fx.data(), &p).unwrap();
    let mut args = vec!["-x"];
    for c in cmds {
        args.extend(["-c", c]);
    }
    args.push(p.to_str().unwrap());
    run("xfs_db", &args);
    p
}

fn check_failures(fx: &Fixture) {
    let l = &fx.layout;
    let ino_of: BTreeMap<&str, u64> = l.inodes.iter().map(|(i, p)| (p.as_str(), *i)).collect();
    let multi = Ino(ino_of["/rt/multi"]);
    let plain = Ino(ino_of["/rt/plain"]);

    // No rt device: opens; data-section files and rt metadata read; rt
    // file data is refused with a message naming the mount option.
    let fs = Filesystem::open_path(&fx.data(), None, ro()).unwrap();
    let want = std::fs::read(fx.src().join("rt/plain")).unwrap();
    assert_eq!(read_all(&fs, plain, 4096), want);
    assert_eq!(
        rxfs::rt::free_extents(&*fs).unwrap(),
        l.geometry["frextents"]
    );
    let ip = fs.iget(multi).unwrap();
    let e = fs.read_file(&ip, 0, &mut [0u8; 100]).unwrap_err();
    assert!(
        matches!(&e, Error::NotSupported(m) if m.contains("-o rtdev=FILE")),
        "{e}"
    );

    // An rt device shorter than rblocks.
    let short = fx.s.path("short-rt.img");
    std::fs::copy(fx.rt(), &short).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&short)
        .unwrap();
    f.set_len((l.geometry["rblocks"] * l.geometry["blocksize"]) - 4096)
        .unwrap();
    drop(f);
    let e = Filesystem::open_path(&fx.data(), Some(&short), ro())
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::Invalid(m) if m.contains("realtime device")),
        "{e}"
    );

    // An rt device for a filesystem without realtime section.
    let plain_img = fx.s.path("plain.img");
    mkfs(&plain_img, 512 << 20, &[]);
    let e = Filesystem::open_path(&plain_img, Some(&fx.rt()), ro())
        .err()
        .unwrap();
    assert!(matches!(&e, Error::Invalid(_)), "{e}");
    let fs = Filesystem::open_path(&plain_img, None, ro()).unwrap();
    assert_eq!(rxfs::rt::free_extents(&*fs).unwrap(), 0);
    assert!(rxfs::rt::check(&*fs).unwrap().is_clean());

    // Superblock realtime geometry that does not add up.
    let bad = damaged_copy(fx, "bad-rextents.img", &["sb 0", "write -d rextents 5"]);
    let e = Filesystem::open_path(&bad, Some(&fx.rt()), ro())
        .err()
        .unwrap();
    assert!(e.is_corrupt(), "{e}");

    // Wrong bitmap inode size: xfs_repair -n objects, rxfs reports corruption.
    let rbmino = l.geometry["rbmino"];
    let bad = damaged_copy(
        fx,
        "bad-rbm-size.img",
        &[&format!("inode {rbmino}"), "write core.size 0"],
    );
    assert!(
        !repair_n(&bad, &fx.rt()).0,
        "xfs_repair -n accepts a bad bitmap size"
    );
    let fs = Filesystem::open_path(&bad, Some(&fx.rt()), ro()).unwrap();
    let e = rxfs::rt::free_extents(&*fs).unwrap_err();
    assert!(e.is_corrupt() && e.to_string().contains("size"), "{e}");

    // frextents off by one: both xfs_repair -n and rt_check notice.
    let f = l.geometry["frextents"] - 1;
    let bad = damaged_copy(
        fx,
        "bad-frext.img",
        &["sb 0", &format!("write frextents {f}")],
    );
    assert!(!repair_n(&bad, &fx.rt()).0);
    let fs = Filesystem::open_path(&bad, Some(&fx.rt()), ro()).unwrap();
    let c = rxfs::rt::check(&*fs).unwrap();
    assert!(
        !c.is_clean() && c.sb_frextents == f && c.free_extents == f + 1,
        "{c:?}"
    );

    // A summary counter changed: both notice, rt_check names the counter.
    let rsumino = l.geometry["rsumino"];
    let bad = damaged_copy(
        fx,
        "bad-summary.img",
        &[
            &format!("inode {rsumino}"),
            "dblock 0",
            "type data",
            "write fill 1 0 4",
        ],
    );
    assert!(!repair_n(&bad, &fx.rt()).0);
    let fs = Filesystem::open_path(&bad, Some(&fx.rt()), ro()).unwrap();
    let c = rxfs::rt::check(&*fs).unwrap();
    assert!(!c.is_clean());
    assert_eq!(c.summary_mismatches, vec![(0, 0, 0x0101_0101, 0)]);
}
