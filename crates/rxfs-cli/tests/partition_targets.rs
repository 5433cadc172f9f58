//! Filesystems inside whole-disk images, used in place: `rxfs mkfs
//! --partition N` / `--offset BYTES`, and `-o partition=N` / `-o
//! offset=BYTES` for populate, put, mkdir, check, info, ls, cat and mount.
//! GPT and DOS tables made by sfdisk. The kernel reads the result through
//! a loop device over the partition's bytes (`losetup -o --sizelimit`;
//! this kernel's loop devices do not scan partitions), `xfs_repair -n` is
//! clean there, and nothing outside the partition changes (the table and
//! the other partition keep their bytes).
//!
//! Root, sfdisk, losetup, mkfs.xfs tools, FUSE; fails unless
//! RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

fn sfdisk(img: &Path, script: &str) {
    use std::io::Write;
    let mut c = Command::new("sfdisk")
        .arg("-q")
        .arg(img)
        .stdin(Stdio::piped())
        .spawn()
        .expect("sfdisk (fdisk package)");
    c.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(c.wait().unwrap().success());
}

/// Partition 2's start and size in bytes, from sfdisk's dump.
fn part2(img: &Path) -> (u64, u64) {
    let out = run_output("sfdisk", &["-d", img.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.contains("2 :")).unwrap();
    let num = |key: &str| -> u64 {
        let at = line.find(key).unwrap() + key.len();
        line[at..]
            .trim_start()
            .split(',')
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    (num("start=") * 512, num("size=") * 512)
}

fn outside(img: &Path, start: u64, len: u64) -> Vec<u8> {
    let all = std::fs::read(img).unwrap();
    let mut v = all[..start as usize].to_vec();
    v.extend_from_slice(&all[(start + len) as usize..]);
    v
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn partitions_of_gpt_and_dos_disks_in_place() {
    require_root();
    let s = Scratch::new("parts");
    let tree = s.path("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("a"), pattern(5, 200_000)).unwrap();
    std::fs::create_dir(tree.join("d")).unwrap();
    std::fs::write(tree.join("d/b"), b"bee").unwrap();
    for label in ["gpt", "dos"] {
        let img = s.path(&format!("{label}.img"));
        std::fs::File::create(&img)
            .unwrap()
            .set_len(800 << 20)
            .unwrap();
        sfdisk(&img, &format!("label: {label}\n,64M\n,\n"));
        // Partition 1 holds data that must survive.
        let (start, len) = part2(&img);
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
            f.write_all_at(&pattern(9, 1 << 20), 2 << 20).unwrap();
        }
        let before = outside(&img, start, len);
        let i = img.to_str().unwrap();
        rxfs_ok(&[
            "mkfs",
            "-q",
            "--partition",
            "2",
            "--populate",
            tree.to_str().unwrap(),
            i,
        ]);
        // A second mkfs sees the XFS in the partition, not the table.
        let out = rxfs(&["mkfs", "-q", "--partition", "2", i]);
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("(partition 2) appears to contain an existing filesystem (xfs)"),
            "{out:?}"
        );
        // The image commands, by partition and by offset.
        let off = format!("offset={start}");
        for o in ["partition=2", off.as_str()] {
            let ls = rxfs_ok(&["ls", "-o", o, i, "/"]);
            assert_eq!(ls, b"a\nd\n", "{label} {o}");
            assert_eq!(rxfs_ok(&["cat", "-o", o, i, "/d/b"]), b"bee");
            rxfs_ok(&["info", "-o", o, i]);
            rxfs_ok(&["check", "-o", o, i]);
        }
        rxfs_ok(&["put", "-o", "partition=2", i, "/etc/hostname", "/h"]);
        rxfs_ok(&["mkdir", "-o", &off, i, "/newdir"]);
        // Through the mount.
        let mnt = s.path("m");
        let guard = rxfs_mount(&img, &mnt, "partition=2");
        std::fs::write(mnt.join("via-mount"), b"m").unwrap();
        rxfs_umount(&mnt, guard);
        assert_eq!(
            outside(&img, start, len),
            before,
            "{label}: bytes outside partition 2 changed"
        );
        // The kernel, over the partition's bytes.
        let out = run_output(
            "losetup",
            &[
                "-f",
                "--show",
                "-o",
                &start.to_string(),
                "--sizelimit",
                &len.to_string(),
                i,
            ],
        );
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let r = Command::new("xfs_repair")
            .args(["-n", &dev])
            .output()
            .unwrap();
        let k = s.path("k");
        std::fs::create_dir_all(&k).unwrap();
        run("mount", &["-o", "ro", &dev, k.to_str().unwrap()]);
        let km = KernelMount::adopt(&k);
        let names: Vec<String> = std::fs::read_dir(&k)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let a = std::fs::read(k.join("a")).unwrap();
        km.umount();
        let _ = Command::new("losetup").args(["-d", &dev]).status();
        assert!(r.status.success(), "{label}: xfs_repair -n: {r:?}");
        let mut names = names;
        names.sort();
        assert_eq!(names, ["a", "d", "h", "newdir", "via-mount"], "{label}");
        assert_eq!(a, pattern(5, 200_000));
    }
    // Not a partition: a clear error.
    let img = s.path("gpt.img");
    let out = rxfs(&[
        OsStr::new("ls"),
        OsStr::new("-o"),
        OsStr::new("partition=7"),
        img.as_os_str(),
        OsStr::new("/"),
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("partition 7"),
        "{out:?}"
    );
}
