//! The kernel's mount table (`/proc/self/mounts`) as the daemon and its
//! helpers read it: where a FUSE mount is and whether the kernel now holds
//! it read-only (a `mount -o remount,ro` changes the kernel's mount, not
//! the daemon).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `p` as the mount table spells it: space, tab, newline and backslash
/// octal-escaped.
pub fn escaped(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

/// The (type, options) fields of every line of `table` mounted at `mnt`
/// (escaped), in the table's order.
fn entries_at<'a>(table: &'a [u8], mnt: &'a [u8]) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    table.split(|&b| b == b'\n').filter_map(move |l| {
        let mut f = l.split(|&b| b == b' ');
        let (_, dir, ty, opts) = (f.next(), f.next()?, f.next()?, f.next()?);
        (dir == mnt).then_some((ty, opts))
    })
}

/// The mount types (`fuse.rxfs`, `fuse`...) found at `mnt`.
pub fn types_at(mnt: &Path) -> Vec<Vec<u8>> {
    let Ok(table) = std::fs::read("/proc/self/mounts") else {
        return Vec::new();
    };
    let want = escaped(mnt);
    entries_at(&table, &want).map(|(t, _)| t.to_vec()).collect()
}

/// Whether the topmost FUSE mount at `mnt` is read-only in the kernel
/// now. False if the table cannot be read or has no such mount.
pub fn fuse_mount_read_only(mnt: &Path) -> bool {
    let Ok(table) = std::fs::read("/proc/self/mounts") else {
        return false;
    };
    read_only_in(&table, &escaped(mnt))
}

fn read_only_in(table: &[u8], mnt: &[u8]) -> bool {
    entries_at(table, mnt)
        .filter(|(t, _)| t.starts_with(b"fuse"))
        .last()
        .is_some_and(|(_, o)| o.split(|&b| b == b',').next() == Some(&b"ro"[..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_finds_the_topmost_fuse_mount() {
        assert_eq!(escaped(Path::new("/a b\\c")), b"/a\\040b\\134c".to_vec());
        let t = b"/dev/sda1 / ext4 rw,relatime 0 0\n\
                  img /m\\040n fuse.rxfs rw,nosuid 0 0\n\
                  img /m\\040n fuse.rxfs ro,nosuid 0 0\n\
                  tmpfs /m\\040n tmpfs rw 0 0\n";
        assert!(read_only_in(t, b"/m\\040n"));
        assert!(!read_only_in(t, b"/"));
        assert!(!read_only_in(t, b"/x"));
        let t2 = b"img /m fuse rw,nosuid 0 0\n";
        assert!(!read_only_in(t2, b"/m"));
    }
}
