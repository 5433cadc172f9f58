//! `rxfs mkfs` refuses a device that holds something, as mkfs.xfs does:
//! each case below is made by the real tool (mkfs.ext4, mkfs.btrfs,
//! mkfs.vfat, mkswap, sfdisk, cryptsetup, mkfs.xfs), then `rxfs mkfs`
//! without `-f` must exit 1 naming what it found, with the image
//! untouched (same bytes, same size) and nothing printed on stdout; with
//! `-f` it overwrites, libblkid then sees only XFS, and `xfs_repair -n`
//! is clean. `--populate` refuses the same way.
//!
//! The tools come from scripts/setup (btrfs-progs, dosfstools, fdisk,
//! cryptsetup-bin); a missing one fails the test with its package name.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const SIZE: u64 = 400 << 20;

fn tool(cmd: &str, args: &[&str], img: &Path, stdin: Option<&str>) {
    use std::io::Write;
    let mut c = Command::new(cmd);
    c.args(args).arg(img);
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = c
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd}: {e} (scripts/setup installs it)"));
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make(s: &Scratch, what: &str) -> std::path::PathBuf {
    let img = s.path(&format!("{what}.img"));
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(SIZE).unwrap();
    drop(f);
    match what {
        "ext4" => tool("mkfs.ext4", &["-q", "-F"], &img, None),
        "btrfs" => tool("mkfs.btrfs", &["-q", "-f"], &img, None),
        "vfat" => tool("mkfs.vfat", &[], &img, None),
        "swap" => tool("mkswap", &[], &img, None),
        "xfs" => tool("mkfs.xfs", &["-q", "-f"], &img, None),
        "dos" => tool("sfdisk", &["-q"], &img, Some("label: dos\n,100M,83\n")),
        "gpt" => tool("sfdisk", &["-q"], &img, Some("label: gpt\n,100M\n")),
        "crypto_LUKS" => tool(
            "cryptsetup",
            &[
                "luksFormat",
                "-q",
                "--pbkdf",
                "pbkdf2",
                "--pbkdf-force-iterations",
                "1000",
            ],
            &img,
            Some("passphrase\n"),
        ),
        _ => unreachable!(),
    }
    img
}

fn blkid_type(img: &Path) -> String {
    let out = Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(img)
        .output()
        .expect("blkid");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("TYPE=") || l.starts_with("PTTYPE="))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn mkfs_refuses_every_signature_without_force() {
    let s = Scratch::new("mkfs-sig");
    let src = s.path("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"data").unwrap();
    let cases = [
        ("ext4", "an existing filesystem (ext4)"),
        ("btrfs", "an existing filesystem (btrfs)"),
        ("vfat", "an existing filesystem (vfat)"),
        ("swap", "an existing filesystem (swap)"),
        ("xfs", "an existing filesystem (xfs)"),
        ("dos", "a partition table (dos)"),
        ("gpt", "a partition table (gpt)"),
        ("crypto_LUKS", "an existing filesystem (crypto_LUKS)"),
    ];
    for (what, said) in cases {
        let img = make(&s, what);
        let before = std::fs::read(&img).unwrap();
        for extra in [&[][..], &["--populate", src.to_str().unwrap()][..]] {
            let mut args = vec!["mkfs", "-q"];
            args.extend_from_slice(extra);
            args.push(img.to_str().unwrap());
            let out = rxfs(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what} {extra:?}: {err}");
            assert_eq!(
                err.trim_end(),
                format!(
                    "rxfs: {} appears to contain {said}; use -f to overwrite it",
                    img.display()
                ),
                "{what}"
            );
            assert!(out.stdout.is_empty(), "{what}: printed before refusing");
            // The same bytes: nothing written, nothing grown.
            assert!(
                std::fs::read(&img).unwrap() == before,
                "{what}: image changed"
            );
        }
        // With -d size= bigger than the file: still refused, not grown.
        let out = rxfs(&["mkfs", "-q", "-d", "size=500m", img.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert_eq!(
            std::fs::metadata(&img).unwrap().len(),
            SIZE,
            "{what}: grown"
        );

        let out = rxfs(&["mkfs", "-q", "-f", img.to_str().unwrap()]);
        assert!(out.status.success(), "{what} -f: {out:?}");
        assert_eq!(blkid_type(&img), "TYPE=xfs", "{what}: after mkfs -f");
        let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
        assert!(r.status.success(), "{what}: xfs_repair -n: {r:?}");
    }
}

#[test]
fn mkfs_takes_a_new_or_zeroed_image_without_force() {
    let s = Scratch::new("mkfs-nosig");
    let fresh = s.path("fresh.img");
    rxfs_ok(&["mkfs", "-q", "-d", "size=320m", fresh.to_str().unwrap()]);
    let zeroed = s.path("zeroed.img");
    std::fs::File::create(&zeroed)
        .unwrap()
        .set_len(SIZE)
        .unwrap();
    rxfs_ok(&["mkfs", "-q", zeroed.to_str().unwrap()]);
    for img in [&fresh, &zeroed] {
        let r = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
        assert!(r.status.success(), "{}: {r:?}", img.display());
    }
    // And the result is refused the next time.
    let out = rxfs(&["mkfs", "-q", zeroed.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
}
