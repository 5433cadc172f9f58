//! An entry in libmount's userspace mount table, `/run/mount/utab`, for
//! each mount the daemon makes as root, so that a plain `umount /abs/MNT`
//! runs `umount.fuse.rxfs` (see [`crate::cmd::umount`]).
//!
//! Why: for an absolute mount point, util-linux's umount takes a fast
//! path that skips the mount table when utab has no entry for the target:
//! it learns the filesystem type from statfs(2), which says only "fuse"
//! (not "fuse.rxfs"), and so runs no rxfs helper, unmounts by itself and
//! returns while the daemon is still writing its last records. With a utab
//! entry it reads the mount table, sees type `fuse.rxfs` and runs the
//! helper, which waits for the daemon.
//!
//! The entry carries only the `x-rxfs` comment option (libmount keeps
//! `x-*` options in utab and gives them no meaning). It is removed by the
//! helper after its unmount and by the daemon when it exits; one left by
//! a killed daemon is harmless (libmount ignores utab entries that match
//! no mount). Updates follow libmount's protocol: an exclusive `flock` of
//! `utab.lock`, then a new file renamed over the old one.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const DIR: &str = "/run/mount";
const UTAB: &str = "/run/mount/utab";
const LOCK: &str = "/run/mount/utab.lock";

/// `s` as utab fields spell it: space, tab, newline and backslash
/// octal-escaped.
fn mangle(s: &[u8]) -> String {
    let mut out = String::new();
    for &b in s {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.push_str(&format!("\\{b:03o}")),
            _ => out.push(b as char),
        }
    }
    out
}

fn target_field(target: &Path) -> String {
    format!("TARGET={}", mangle(target.as_os_str().as_bytes()))
}

/// Rewrite utab under its lock: keep the lines `keep` accepts, then
/// append `add`. Best effort: a system without /run/mount, or a user who
/// may not write it, simply gets no entry.
fn update(keep: impl Fn(&str) -> bool, add: Option<String>) {
    if add.is_some() {
        let _ = fs::create_dir_all(DIR);
    }
    let Ok(lock) = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(LOCK)
    else {
        return;
    };
    if crate::sys::flock(lock.as_raw_fd(), libc::LOCK_EX, false).is_err() {
        return;
    }
    let old = fs::read_to_string(UTAB).unwrap_or_default();
    let mut lines: Vec<&str> = old.lines().filter(|l| !l.is_empty() && keep(l)).collect();
    if add.is_none() && lines.len() == old.lines().filter(|l| !l.is_empty()).count() {
        return; // nothing to remove
    }
    if let Some(a) = add.as_deref() {
        lines.push(a);
    }
    let tmp = format!("{UTAB}.rxfs{}", std::process::id());
    let written = fs::File::create(&tmp).and_then(|mut f| {
        for l in &lines {
            writeln!(f, "{l}")?;
        }
        f.sync_all()
    });
    if written.is_ok() {
        let _ = fs::rename(&tmp, UTAB);
    } else {
        let _ = fs::remove_file(&tmp);
    }
}

fn is_target(line: &str, field: &str) -> bool {
    line.split(' ').any(|f| f == field)
}

/// Record the mount of `source` on `target` (canonical, absolute).
pub fn add(target: &Path, source: &str) {
    let field = target_field(target);
    let line = format!(
        "SRC={} {field} ROOT=/ OPTS=x-rxfs",
        mangle(source.as_bytes())
    );
    update(|l| !is_target(l, &field), Some(line));
}

/// Forget the entry of `target`, if any.
pub fn remove(target: &Path) {
    let field = target_field(target);
    update(|l| !is_target(l, &field), None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_mangled_as_libmount_does() {
        assert_eq!(mangle(b"/mnt/a b"), "/mnt/a\\040b");
        assert_eq!(target_field(Path::new("/x\\y")), "TARGET=/x\\134y");
        assert!(is_target("SRC=a TARGET=/m ROOT=/ OPTS=x-rxfs", "TARGET=/m"));
        assert!(!is_target("SRC=a TARGET=/m2 ROOT=/", "TARGET=/m"));
    }
}
