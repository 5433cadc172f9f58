//! Reading the host side of a populate: files opened without touching
//! their access times, data ranges found with `SEEK_DATA`/`SEEK_HOLE`, and
//! extended attributes listed without following symbolic links.
//!
//! Nothing here writes to the host.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Open a file for reading with O_NOATIME (so copying does not change the
/// source's access times), falling back to a plain open where the kernel
/// refuses it (files we do not own, without CAP_FOWNER).
pub fn open_noatime(path: &Path) -> io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    match o
        .clone()
        .custom_flags(libc::O_NOATIME | libc::O_NOFOLLOW)
        .open(path)
    {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            o.custom_flags(libc::O_NOFOLLOW).open(path)
        }
        r => r,
    }
}

/// The next data range at or after `off` in a file of `size` bytes:
/// `Some((start, end))`, or `None` when only a hole is left. Where the
/// source filesystem cannot seek data, everything is data.
pub fn next_data(f: &File, off: u64, size: u64) -> io::Result<Option<(u64, u64)>> {
    if off >= size {
        return Ok(None);
    }
    let fd = f.as_raw_fd();
    // SAFETY: lseek on a descriptor we own; no memory is passed.
    let start = unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_DATA) };
    if start < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Ok(Some((off, size))),
            _ => Err(e),
        };
    }
    let start = start as u64;
    if start >= size {
        return Ok(None);
    }
    // SAFETY: as above.
    let end = unsafe { libc::lseek(fd, start as libc::off_t, libc::SEEK_HOLE) };
    if end < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some((start, (end as u64).min(size))))
}

/// Read into `buf` at `off` until it is full or the file ends; returns
/// the bytes read.
pub fn read_full(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

/// Every extended attribute of `path` (the link itself for symbolic
/// links): (full name, value), sorted by name (hosts list them in their
/// own order, which differs between filesystems; the image's attribute
/// layout follows the order they are set in, and must not).
pub fn xattrs(path: &Path) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let c = cpath(path)?;
    let names = loop {
        // SAFETY: a size query (null buffer, size 0).
        let n = unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOTSUP) => Ok(Vec::new()),
                _ => Err(e),
            };
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; n as usize];
        // SAFETY: buf is valid for buf.len() bytes.
        let m = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if m >= 0 {
            buf.truncate(m as usize);
            break buf;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ERANGE) {
            return Err(e);
        }
        // The list grew between the calls: ask again.
    };
    let mut out = Vec::new();
    for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let cn = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        match get_xattr(&c, &cn)? {
            Some(v) => out.push((name.to_vec(), v)),
            None => continue, // removed since it was listed
        }
    }
    out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // A source on XFS lists each POSIX ACL twice to root, under its
    // generic name and XFS's own (one attribute on disk): set it once.
    for (generic, own) in [
        (
            &b"system.posix_acl_access"[..],
            &b"trusted.SGI_ACL_FILE"[..],
        ),
        (b"system.posix_acl_default", b"trusted.SGI_ACL_DEFAULT"),
    ] {
        if out.iter().any(|(n, _)| n == generic) {
            out.retain(|(n, _)| n != own);
        }
    }
    Ok(out)
}

fn get_xattr(path: &CString, name: &CString) -> io::Result<Option<Vec<u8>>> {
    loop {
        // SAFETY: a size query.
        let n = unsafe { libc::lgetxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENODATA) => Ok(None),
                _ => Err(e),
            };
        }
        let mut buf = vec![0u8; n as usize];
        // SAFETY: buf is valid for buf.len() bytes.
        let m = unsafe {
            libc::lgetxattr(
                path.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if m >= 0 {
            buf.truncate(m as usize);
            return Ok(Some(buf));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) => continue,
            Some(libc::ENODATA) => return Ok(None),
            _ => return Err(e),
        }
    }
}
