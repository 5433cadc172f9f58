//! Who else owns a device: the reasons a read-write open is refused.
//!
//! A read-write open must be the device's only writer, as a kernel mount
//! is. Three kinds of owner are recognised, and each refusal names it:
//! - another read-write rxfs (or any program holding an exclusive `flock`
//!   on the image file): its pid and name, from `/proc/locks`;
//! - a loop device backed by the image file that is in use (mounted, or
//!   claimed by a holder such as device-mapper): the kernel may write the
//!   image through it behind our back. Found through
//!   `/sys/block/loop*/loop/backing_file`, matched by device and inode
//!   number, not by name; "in use" is an `O_EXCL` open that fails (any
//!   mount namespace), or, without the right to open the loop device, an
//!   entry in `/proc/self/mountinfo` or a holder in sysfs;
//! - for a block device, whatever made its `O_EXCL` open fail: a mount
//!   (named with its mount point when this namespace sees it) or another
//!   exclusive owner.
//!
//! All of this is Linux-specific and best effort in what it *names*; the
//! refusal itself rests on the `flock`/`O_EXCL` of [`super::file`] and on
//! the loop check here.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `/proc/self/mountinfo`'s mount points of device `major:minor`.
fn mount_points(major: u32, minor: u32) -> Vec<String> {
    let want = format!("{major}:{minor}");
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (_, _, dev, _, mnt) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            (dev == want).then(|| unescape(mnt))
        })
        .collect()
}

/// mountinfo's octal escapes (`\040` for a space...).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| c.is_ascii_digit()) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn dev_numbers(sysfs_dev: &Path) -> Option<(u32, u32)> {
    let s = fs::read_to_string(sysfs_dev).ok()?;
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The pid and command name of the process holding an exclusive `flock`
/// on the file with device `dev` and inode `ino` (from `/proc/locks`).
fn flock_holder(dev: u64, ino: u64) -> Option<(u32, String)> {
    let want = format!(
        "{:02x}:{:02x}:{ino}",
        libc::major(dev as libc::dev_t),
        libc::minor(dev as libc::dev_t)
    );
    let text = fs::read_to_string("/proc/locks").ok()?;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF"
        if f.len() >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == want {
            let pid: u32 = f[4].parse().ok()?;
            let comm = fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            return Some((pid, comm));
        }
    }
    None
}

/// Whether the exclusive `flock` on the file of `meta` is held by this
/// process, or by nobody any more (released since the attempt).
pub(super) fn flock_held_here(meta: &fs::Metadata) -> bool {
    flock_holder(meta.dev(), meta.ino()).is_none_or(|(pid, _)| pid == std::process::id())
}

/// Why an image file's exclusive `flock` failed.
pub(super) fn flock_reason(meta: &fs::Metadata) -> String {
    match flock_holder(meta.dev(), meta.ino()) {
        Some((pid, comm)) if pid == std::process::id() => {
            format!("already open read-write by this process ({comm}, pid {pid})")
        }
        Some((pid, comm)) => format!("open read-write by {comm} (pid {pid})"),
        None => "open read-write by another program (it holds the image's lock)".into(),
    }
}

/// A loop device backed by a file.
struct LoopDev {
    /// `/dev/loopN`.
    node: PathBuf,
    /// `/sys/block/loopN`.
    sys: PathBuf,
}

/// The loop devices whose backing file is the file of `meta`.
fn loops_backing(meta: &fs::Metadata) -> Vec<LoopDev> {
    let Ok(dir) = fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(back) = fs::read_to_string(e.path().join("loop/backing_file")) else {
            continue;
        };
        let back = back.trim_end_matches('\n');
        let back = back.strip_suffix(" (deleted)").unwrap_or(back);
        let same = fs::metadata(back).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        if same {
            out.push(LoopDev {
                node: Path::new("/dev").join(&name),
                sys: e.path(),
            });
        }
    }
    out
}

/// Why a loop device is in use, or None when it is idle.
fn loop_in_use(l: &LoopDev) -> Option<String> {
    let mut devs = Vec::new();
    if let Some(n) = dev_numbers(&l.sys.join("dev")) {
        devs.push(n);
    }
    // Its partitions (loop0p1...) count as it.
    if let Ok(dir) = fs::read_dir(&l.sys) {
        for e in dir.flatten() {
            if e.path().join("partition").exists() {
                if let Some(n) = dev_numbers(&e.path().join("dev")) {
                    devs.push(n);
                }
            }
        }
    }
    for (ma, mi) in &devs {
        if let Some(m) = mount_points(*ma, *mi).into_iter().next() {
            return Some(format!("mounted at {m}"));
        }
    }
    let held = fs::read_dir(l.sys.join("holders")).is_ok_and(|mut d| d.next().is_some());
    if held {
        return Some("held by another block device (device-mapper, RAID)".into());
    }
    let excl = fs::OpenOptions::new()
        .read(true)
        .custom_flags_excl()
        .open(&l.node);
    match excl {
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            Some("mounted or claimed by the kernel (in another mount namespace?)".into())
        }
        _ => None,
    }
}

/// Why an image file may not be opened read-write because a loop device
/// in use is backed by it, or None.
pub(super) fn loop_reason(meta: &fs::Metadata) -> Option<String> {
    loops_backing(meta).into_iter().find_map(|l| {
        loop_in_use(&l)
            .map(|why| format!("the backing file of {}, which is {why}", l.node.display()))
    })
}

/// Why a block device's `O_EXCL` open failed.
pub(super) fn bdev_reason(meta: &fs::Metadata) -> String {
    let rdev = meta.rdev() as libc::dev_t;
    let (ma, mi) = (libc::major(rdev), libc::minor(rdev));
    if let Some(m) = mount_points(ma, mi).into_iter().next() {
        return format!("mounted at {m}");
    }
    // A partition of it mounted also makes the whole disk busy.
    if let Ok(dir) = fs::read_dir(format!("/sys/dev/block/{ma}:{mi}")) {
        for e in dir.flatten() {
            if let Some((pa, pi)) = dev_numbers(&e.path().join("dev")) {
                if e.path().join("partition").exists() {
                    if let Some(m) = mount_points(pa, pi).into_iter().next() {
                        return format!(
                            "its partition {} is mounted at {m}",
                            e.file_name().to_string_lossy()
                        );
                    }
                }
            }
        }
    }
    "opened exclusively elsewhere (a mount in another namespace, RAID/LVM, or another rxfs)".into()
}

trait ExclFlag {
    fn custom_flags_excl(&mut self) -> &mut Self;
}

impl ExclFlag for fs::OpenOptions {
    fn custom_flags_excl(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, libc::O_EXCL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\\"), r"/x\\");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn our_own_flock_is_named() {
        let p = std::env::temp_dir().join(format!("rxfs-claim-{}", std::process::id()));
        let f = fs::File::create(&p).unwrap();
        // SAFETY: flock on a descriptor we own.
        let r = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) };
        assert_eq!(r, 0);
        let why = flock_reason(&f.metadata().unwrap());
        assert!(why.contains("this process"), "{why}");
        drop(f);
        let _ = fs::remove_file(&p);
    }
}
