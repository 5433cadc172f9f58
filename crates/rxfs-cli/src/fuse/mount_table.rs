//! The kernel's mount table (`/proc/self/mounts`) as the daemon and its
//! helpers read it: where a FUSE mount is and whether the kernel now holds
//! it read-only (a `mount -o remount,ro` changes the kernel's mount, not
//! the daemon).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

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
    let Ok(table) = std::fs::read(MOUNTS) else {
        return Vec::new();
    };
    let want = escaped(mnt);
    entries_at(&table, &want).map(|(t, _)| t.to_vec()).collect()
}

/// Whether the topmost FUSE mount at `mnt` is read-only in the kernel
/// now, asked often (before every atime update the daemon makes):
/// the table is read once and again only after the kernel says it
/// changed. An open `/proc/self/mounts` polls with `POLLPRI` (and
/// `POLLERR`) once per change of the mount namespace's table since the
/// descriptor's last poll, a remount included; the poll itself resets
/// it, so "poll, then read if it fired" never misses a change (one after
/// the poll fires the next poll).
pub struct ReadOnlyWatch {
    mnt: Vec<u8>,
    /// The open table and the answer of its last read; `None` until the
    /// first question (or when the table cannot be opened: then every
    /// question reads it whole).
    state: Mutex<Option<(File, bool)>>,
}

impl ReadOnlyWatch {
    pub fn new(mnt: &Path) -> ReadOnlyWatch {
        ReadOnlyWatch {
            mnt: escaped(mnt),
            state: Mutex::new(None),
        }
    }

    /// Whether the mount is read-only now. False if the table cannot be
    /// read or has no such mount.
    pub fn read_only(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((f, ro)) = st.as_mut() {
            if !changed(f) {
                return *ro;
            }
            match reread(f) {
                Ok(t) => {
                    *ro = read_only_in(&t, &self.mnt);
                    return *ro;
                }
                Err(_) => *st = None,
            }
        }
        let Ok(mut f) = File::open(MOUNTS) else {
            return false;
        };
        // Poll once before reading: the descriptor's first poll reports
        // every change since the namespace began.
        changed(&f);
        let Ok(t) = reread(&mut f) else {
            return false;
        };
        let ro = read_only_in(&t, &self.mnt);
        *st = Some((f, ro));
        ro
    }
}

const MOUNTS: &str = "/proc/self/mounts";

/// Whether the open table `f` says the mounts changed since its last
/// poll (and resets that; a failed poll counts as a change).
fn changed(f: &File) -> bool {
    let mut p = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLPRI,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n != 0 && !(n == 1 && p.revents & (libc::POLLPRI | libc::POLLERR) == 0)
}

/// The whole table, read again from its start.
fn reread(f: &mut File) -> std::io::Result<Vec<u8>> {
    f.seek(SeekFrom::Start(0))?;
    let mut t = Vec::with_capacity(8192);
    f.read_to_end(&mut t)?;
    Ok(t)
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
