//! `rxfs mkfs` against mkfs.xfs, xfs_repair and the kernel.
//!
//! - `matrix_matches_mkfs_xfs`: for sizes from 300 MiB to 1 TiB (sparse)
//!   and option sets, the image passes `xfs_repair -n` and `rxfs check`,
//!   mounts in the kernel, takes a workload and passes both again; every AG's
//!   superblock, AGF, AGI, AGFL, btree roots and the root/realtime inodes
//!   print through `xfs_db` exactly as mkfs.xfs's do (UUIDs, CRCs, LSNs
//!   and timestamps aside).
//! - `kernel_workload_on_rxfs_images`: the kernel mounts rxfs images, takes
//!   a workload, unmounts; repair is clean again and rxfs reads what the
//!   kernel wrote; `rxfs check` agrees that both are clean.
//! - `refusals`: what mkfs.xfs refuses, and options rxfs does not support,
//!   are refused by name without writing.

mod common;

use common::*;
use std::path::Path;

/// The `xfs_db` prints of everything mkfs writes, without the fields that
/// differ between any two runs (UUID, CRC, LSN, times).
fn dump(img: &Path) -> Vec<String> {
    let db = |cmds: &[String]| -> String {
        let mut args: Vec<String> = vec!["-r".into()];
        for c in cmds {
            args.push("-c".into());
            args.push(c.clone());
        }
        args.push(img.display().to_string());
        String::from_utf8(run_output("xfs_db", &args).stdout).unwrap()
    };
    let sb = db(&[
        "sb 0".into(),
        "p agcount features_ro_compat rootino rbmino rsumino".into(),
    ]);
    let field = |name: &str| -> u64 {
        sb.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} = ")))
            .map(|v| {
                let v = v.trim();
                if let Some(h) = v.strip_prefix("0x") {
                    u64::from_str_radix(h, 16).unwrap()
                } else {
                    v.parse().unwrap_or(u64::MAX)
                }
            })
            .unwrap_or_else(|| panic!("no {name} in {sb}"))
    };
    let agcount = field("agcount");
    let ro = field("features_ro_compat");
    let mut cmds = Vec::new();
    for ag in 0..agcount {
        for c in [
            format!("sb {ag}"),
            "p".into(),
            format!("agf {ag}"),
            "p".into(),
            format!("agi {ag}"),
            "p".into(),
            format!("agfl {ag}"),
            "p".into(),
            format!("agf {ag}"),
            "addr bnoroot".into(),
            "p".into(),
            format!("agf {ag}"),
            "addr cntroot".into(),
            "p".into(),
            format!("agi {ag}"),
            "addr root".into(),
            "p".into(),
        ] {
            cmds.push(c);
        }
        if ro & 1 != 0 {
            cmds.extend([format!("agi {ag}"), "addr free_root".into(), "p".into()]);
        }
        if ro & 2 != 0 {
            cmds.extend([format!("agf {ag}"), "addr rmaproot".into(), "p".into()]);
        }
        if ro & 4 != 0 {
            cmds.extend([format!("agf {ag}"), "addr refcntroot".into(), "p".into()]);
        }
    }
    for f in ["rootino", "rbmino", "rsumino"] {
        cmds.push(format!("inode {}", field(f)));
        cmds.push("p".into());
    }
    db(&cmds)
        .lines()
        .filter(|l| {
            !(l.contains("uuid")
                || l.contains("crc = ")
                || l.contains("time")
                || l.contains("lsn ="))
        })
        .map(String::from)
        .collect()
}

fn assert_same_dump(what: &str, want: &[String], got: &[String]) {
    for (i, (w, g)) in want.iter().zip(got.iter()).enumerate() {
        assert_eq!(
            w, g,
            "{what}: xfs_db line {i} differs (mkfs.xfs vs rxfs mkfs)"
        );
    }
    assert_eq!(want.len(), got.len(), "{what}: xfs_db line counts differ");
}

fn repair_clean(img: &Path, rtdev: Option<&Path>) {
    let mut args = vec!["-n".to_string()];
    if let Some(r) = rtdev {
        args.push("-r".into());
        args.push(r.display().to_string());
    }
    args.push(img.display().to_string());
    let out = std::process::Command::new("xfs_repair")
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
}

fn sparse_file(p: &Path, size: u64) {
    let f = std::fs::File::create(p).unwrap();
    f.set_len(size).unwrap();
}

/// (size, options): the options are given to both mkfs.xfs and rxfs mkfs.
const MATRIX: &[(&str, u64, &str)] = &[
    ("default-300m", 300 << 20, ""),
    ("rmapbt", 300 << 20, "-m rmapbt=1"),
    ("rmapbt-noreflink", 512 << 20, "-m rmapbt=1,reflink=0"),
    ("v5-minimal", 1 << 30, "-m reflink=0,finobt=0 -i sparse=0"),
    ("1k-blocks", 1 << 30, "-b size=1024"),
    ("2k-blocks-rmapbt", 1 << 30, "-b size=2048 -m rmapbt=1"),
    ("64k-dirs-1k-inodes", 2 << 30, "-n size=65536 -i size=1024"),
    ("4k-sectors", 1 << 30, "-s size=4096"),
    ("agcount-7-label", 5 << 30, "-d agcount=7 -L hello"),
    ("agsize", 3 << 30, "-d agsize=100m"),
    (
        "nrext64-nobigtime",
        1 << 30,
        "-i nrext64=1,maxpct=10 -m bigtime=0,inobtcount=0",
    ),
    ("log-size-ag0", 2 << 30, "-l size=128m,agnum=0"),
    (
        "big-inodes-8k-blocks",
        600 << 20,
        "-i size=2048 -b size=8192",
    ),
    ("64k-blocks", 20 << 30, "-b size=65536"),
    ("1t-sparse", 1 << 40, ""),
    (
        "uuid",
        400 << 20,
        "-m uuid=0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0",
    ),
];

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn matrix_matches_mkfs_xfs() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_db"]);
    let s = Scratch::new("mkfs-matrix");
    for &(name, size, opts) in MATRIX {
        let want = s.path("mkfs.xfs.img");
        let got = s.path("rxfs.img");
        let _ = std::fs::remove_file(&want);
        let _ = std::fs::remove_file(&got);
        sparse_file(&want, size);
        let opts: Vec<&str> = opts.split_whitespace().collect();
        let mut a = vec!["-f", "-q"];
        a.extend(&opts);
        a.push(want.to_str().unwrap());
        run("mkfs.xfs", &a);
        // rxfs creates the image itself at -d size=.
        let size_opt = format!("size={size}");
        let mut r = vec!["mkfs", "-q", "-d", &size_opt];
        r.extend(&opts);
        r.push(got.to_str().unwrap());
        rxfs_ok(&r);
        repair_clean(&got, None);
        rxfs_ok(&["check", "--quiet", got.to_str().unwrap()]);
        assert_same_dump(name, &dump(&want), &dump(&got));
        kernel_workload(&s, &got, name);
        eprintln!(
            "{name}: headers identical to mkfs.xfs; xfs_repair and rxfs check clean before and after a kernel workload"
        );
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn realtime_matches_mkfs_xfs() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_db"]);
    let s = Scratch::new("mkfs-rt");
    for (rtsize, ext) in [
        (100u64 << 20, "extsize=16k"),
        (20 << 30, "extsize=4k"),
        (1 << 30, ""),
    ] {
        let (want, wrt) = (s.path("m.img"), s.path("m.rt"));
        let (got, grt) = (s.path("x.img"), s.path("x.rt"));
        for p in [&want, &wrt, &got, &grt] {
            let _ = std::fs::remove_file(p);
        }
        sparse_file(&want, 300 << 20);
        sparse_file(&wrt, rtsize);
        sparse_file(&grt, rtsize);
        let mut ropt = format!("rtdev={}", wrt.display());
        if !ext.is_empty() {
            ropt += &format!(",{ext}");
        }
        run(
            "mkfs.xfs",
            &["-f", "-q", "-r", &ropt, want.to_str().unwrap()],
        );
        let mut ropt = format!("rtdev={}", grt.display());
        if !ext.is_empty() {
            ropt += &format!(",{ext}");
        }
        rxfs_ok(&[
            "mkfs",
            "-q",
            "-d",
            "size=300m",
            "-r",
            &ropt,
            got.to_str().unwrap(),
        ]);
        repair_clean(&got, Some(&grt));
        rxfs_ok(&[
            "check",
            "--quiet",
            "--rtdev",
            grt.to_str().unwrap(),
            got.to_str().unwrap(),
        ]);
        assert_same_dump("realtime", &dump(&want), &dump(&got));
        // The bitmap and summary files' blocks are byte-identical.
        assert_eq!(
            rt_file_bytes(&want),
            rt_file_bytes(&got),
            "realtime metadata differs"
        );
        eprintln!("realtime {rtsize} {ext}: repair clean, identical to mkfs.xfs");
    }
}

/// The bytes of the realtime bitmap and summary files (their extents are
/// in AG 0, so their filesystem block numbers are byte offsets / blocksize).
fn rt_file_bytes(img: &Path) -> Vec<u8> {
    let data = std::fs::read(img).unwrap();
    let sb = rxfs::format::sb::Superblock::decode_unverified(&data[..512]).unwrap();
    let bs = sb.blocksize as usize;
    let mut out = Vec::new();
    for ino in [sb.rbmino, sb.rsumino] {
        let o = run_output(
            "xfs_db",
            &[
                "-r",
                "-c",
                &format!("inode {ino}"),
                "-c",
                "p u3.bmx",
                img.to_str().unwrap(),
            ],
        );
        for l in String::from_utf8(o.stdout).unwrap().lines() {
            // "0:[startoff,startblock,blockcount,extentflag]"
            let Some(rec) = l.split_once(":[").map(|(_, r)| r.trim_end_matches(']')) else {
                continue;
            };
            let f: Vec<usize> = rec
                .split(',')
                .filter_map(|x| x.trim().parse().ok())
                .collect();
            if f.len() == 4 {
                out.extend_from_slice(&data[f[1] * bs..(f[1] + f[2]) * bs]);
            }
        }
    }
    assert!(
        !out.is_empty(),
        "no realtime file blocks found in {}",
        img.display()
    );
    out
}

/// Mount `img` in the kernel, write a tree (every file kind, a
/// 1000-entry directory), unmount; xfs_repair and rxfs check must be clean
/// and rxfs must read what the kernel wrote.
fn kernel_workload(s: &Scratch, img: &Path, what: &str) {
    let m = KernelMount::new(img, &s.path("mnt"), "noatime");
    populate(&m.dir);
    let want = walk_manifest(&m.dir);
    m.umount();
    repair_clean(img, None);
    rxfs_ok(&["check", "--quiet", img.to_str().unwrap()]);
    assert_same_manifest(what, &want, &rxfs_manifest(img));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kernel_workload_on_rxfs_images() {
    require_root();
    require_tools(&["xfs_repair"]);
    let s = Scratch::new("mkfs-kernel");
    for opts in [
        "",
        "-m rmapbt=1",
        "-b size=1024 -i sparse=0",
        "-n size=65536 -d agcount=9",
    ] {
        let img = s.path("img");
        let _ = std::fs::remove_file(&img);
        let mut r = vec!["mkfs", "-q", "-d", "size=600m"];
        r.extend(opts.split_whitespace());
        r.push(img.to_str().unwrap());
        rxfs_ok(&r);
        repair_clean(&img, None);
        let m = KernelMount::new(&img, &s.path("mnt"), "noatime");
        populate(&m.dir);
        // A bigger tree: many small files in several directories.
        for d in 0..8 {
            let dir = m.dir.join(format!("d{d}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..300 {
                std::fs::write(
                    dir.join(format!("f{f}")),
                    pattern(d * 1000 + f, (f as usize % 7) * 1000),
                )
                .unwrap();
            }
        }
        let want = walk_manifest(&m.dir);
        m.umount();
        repair_clean(&img, None);
        rxfs_ok(&["check", "--quiet", img.to_str().unwrap()]);
        assert_same_manifest(opts, &want, &rxfs_manifest(&img));
        eprintln!("[{opts}]: kernel workload on an rxfs mkfs image: repair clean, rxfs reads it");
    }
}

#[test]
fn refusals() {
    let s = Scratch::new("mkfs-refusals");
    let img = s.path("img");
    let fails = |args: &[&str], needle: &str| {
        let out = rxfs(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    };
    let p = img.to_str().unwrap();
    fails(&["mkfs", "-q", "-d", "size=200m", p], "larger than 300MB");
    fails(&["mkfs", "-q", "-d", "size=1g", "-m", "crc=0", p], "v4");
    fails(&["mkfs", "-q", "-d", "size=1g,su=64k", p], "-d su");
    fails(
        &["mkfs", "-q", "-d", "size=1g", "-l", "logdev=/dev/null", p],
        "-l logdev",
    );
    fails(
        &["mkfs", "-q", "-d", "size=1g", "-L", "thirteen-char", p],
        "longer than 12",
    );
    fails(
        &["mkfs", "-q", "-d", "size=1g", "-l", "size=16m", p],
        "at least 64MB",
    );
    fails(
        &["mkfs", "-q", "-d", "size=1g", "-b", "size=3000", p],
        "block size",
    );
    fails(
        &["mkfs", "-q", "-d", "size=1g", "-i", "size=256", p],
        "inode size",
    );
    fails(
        &["mkfs", "-q", s.path("missing").to_str().unwrap()],
        "No such file",
    );
    // An existing XFS filesystem is kept without -f.
    rxfs_ok(&["mkfs", "-q", "-d", "size=300m", p]);
    let before = std::fs::read(&img).unwrap()[..4096].to_vec();
    fails(&["mkfs", "-q", p], "use -f");
    assert_eq!(before, std::fs::read(&img).unwrap()[..4096].to_vec());
    rxfs_ok(&["mkfs", "-q", "-f", p]);
}
