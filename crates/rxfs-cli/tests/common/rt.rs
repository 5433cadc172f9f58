//! Helpers for the CLI tests of filesystems with a realtime section: this
//! kernel has no CONFIG_XFS_RT and cannot mount them, so the oracles are
//! `xfs_repair -n -r RTDEV` and the library read-only (files realtime or
//! not, their bytes, the bitmap against the summary and the free count).

use std::path::{Path, PathBuf};

use rxfs::format::inode::{DIFLAG_REALTIME, DIFLAG_RTINHERIT};
use rxfs::Filesystem;

use super::kcommon::{mkfs_with, run_output, FSTESTS_ENV};

/// Size of the realtime devices the tests make.
pub const RT_DEV_BYTES: u64 = 64 << 20;

/// mkfs.xfs an image of `size` bytes with a realtime device beside it
/// (`RT_DEV_BYTES`, realtime extents of `rext` bytes) and the extra
/// options `opts`; returns the realtime device's path (`IMG.rt`).
pub fn mkfs_rt(img: &Path, size: u64, rext: u32, opts: &[&str]) -> PathBuf {
    let rt = img.with_extension("rt");
    let f = std::fs::File::create(&rt).unwrap();
    f.set_len(RT_DEV_BYTES).unwrap();
    drop(f);
    let r = format!("rtdev={},extsize={rext}", rt.display());
    let mut all = vec!["-r", r.as_str()];
    all.extend_from_slice(opts);
    mkfs_with(img, size, &all, FSTESTS_ENV);
    rt
}

/// `xfs_repair -n -r RT IMG` must exit 0.
pub fn repair_clean_rt(img: &Path, rt: &Path) {
    let out = std::process::Command::new("xfs_repair")
        .args(["-n", "-r"])
        .arg(rt)
        .arg(img)
        .output()
        .expect("cannot run xfs_repair");
    assert!(
        out.status.success(),
        "xfs_repair -n -r {} {}: {}\n{}",
        rt.display(),
        img.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The di_flags of the inode at `path` in the image.
pub fn di_flags(fs: &Filesystem, path: &str) -> u16 {
    let ino = fs
        .resolve(path.as_bytes())
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    fs.iget(ino).unwrap().core.flags
}

pub fn is_realtime(fs: &Filesystem, path: &str) -> bool {
    di_flags(fs, path) & DIFLAG_REALTIME != 0
}

pub fn is_rtinherit(fs: &Filesystem, path: &str) -> bool {
    di_flags(fs, path) & DIFLAG_RTINHERIT != 0
}

/// The whole contents of the regular file at `path` in the image.
pub fn read_image_file(fs: &Filesystem, path: &str) -> Vec<u8> {
    let ino = fs
        .resolve(path.as_bytes())
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let ip = fs.iget(ino).unwrap();
    let mut buf = vec![0u8; ip.core.size as usize];
    let n = fs.read_file(&ip, 0, &mut buf).unwrap();
    assert_eq!(n, buf.len(), "{path}: short read");
    buf
}

/// The bytes of `path` in the image equal `want` (the first differing
/// offset named otherwise).
pub fn assert_image_file(fs: &Filesystem, path: &str, want: &[u8]) {
    let got = read_image_file(fs, path);
    assert_eq!(got.len(), want.len(), "{path}: size");
    if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{path}: differs at byte {at}");
    }
}

/// The realtime bitmap, summary and free count agree; returns the free
/// realtime extents.
pub fn rt_clean_free(fs: &Filesystem) -> u64 {
    let c = rxfs::rt::check(fs).unwrap();
    assert!(c.is_clean(), "realtime metadata: {c:?}");
    assert_eq!(c.free_extents, c.sb_frextents, "sb_frextents");
    c.free_extents
}

/// The print of the root inode by `xfs_db`, without the fields that
/// differ between any two runs (times, CRC, UUID, LSN).
pub fn root_inode_print(img: &Path) -> Vec<String> {
    let img = img.to_str().unwrap();
    let out = run_output("xfs_db", &["-r", "-c", "sb 0", "-c", "p rootino", img]);
    let s = String::from_utf8(out.stdout).unwrap();
    let root = s
        .trim()
        .strip_prefix("rootino = ")
        .unwrap_or_else(|| panic!("no rootino: {s}"))
        .to_string();
    let out = run_output(
        "xfs_db",
        &["-r", "-c", &format!("inode {root}"), "-c", "print", img],
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| {
            !(l.contains("uuid") || l.contains("crc = ") || l.contains("time") || l.contains("lsn"))
        })
        .map(String::from)
        .collect()
}
