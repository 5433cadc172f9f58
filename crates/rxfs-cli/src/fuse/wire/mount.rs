//! Mounting: a `/dev/fuse` descriptor and the kernel mount bound to it.
//!
//! Root mounts with mount(2) itself: type `fuse`, the descriptor, the
//! mount point's mode and our uid/gid in the data string, `nosuid` and
//! `nodev` unless `suid`/`dev` are asked for. Anyone else (and
//! `auto_unmount`, which needs a watcher outliving us) goes through the
//! set-uid `fusermount3`, which mounts and hands the descriptor back over
//! a socket (`_FUSE_COMMFD`); with `auto_unmount` it stays running and
//! unmounts when that socket closes, i.e. when we exit.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// What to mount.
#[derive(Debug, Clone, Default)]
pub struct MountSpec {
    /// The source shown in the mount table.
    pub fsname: String,
    /// `fuse.SUBTYPE` in the mount table (none: plain `fuse`).
    pub subtype: Option<String>,
    pub read_only: bool,
    /// Let every user in (`allow_other`).
    pub allow_other: bool,
    /// The kernel checks permissions from the modes (`default_permissions`).
    pub default_permissions: bool,
    pub auto_unmount: bool,
    /// Flags and options as the user gave them (`dev`, `nosuid`, `sync`,
    /// anything else is passed through to the kernel).
    pub options: Vec<String>,
}

/// A mount made: the session's descriptor, and the `fusermount3` that
/// watches it when `auto_unmount` was asked for.
pub struct Mounted {
    pub fd: OwnedFd,
    pub watcher: Option<Child>,
}

fn flag_of(opt: &str) -> Option<libc::c_ulong> {
    Some(match opt {
        "nodev" => libc::MS_NODEV,
        "nosuid" => libc::MS_NOSUID,
        "noexec" => libc::MS_NOEXEC,
        "noatime" => libc::MS_NOATIME,
        "sync" => libc::MS_SYNCHRONOUS,
        "dirsync" => libc::MS_DIRSYNC,
        "ro" => libc::MS_RDONLY,
        "dev" | "suid" | "exec" | "atime" | "async" | "rw" => 0,
        _ => return None,
    })
}

/// The kernel's mount flags and data options (without `fd=` and the ids).
fn kernel_args(spec: &MountSpec) -> (libc::c_ulong, Vec<String>) {
    let mut flags = 0;
    let has = |o: &str| spec.options.iter().any(|x| x == o);
    if !has("dev") {
        flags |= libc::MS_NODEV;
    }
    if !has("suid") {
        flags |= libc::MS_NOSUID;
    }
    if spec.read_only {
        flags |= libc::MS_RDONLY;
    }
    let mut data = Vec::new();
    for o in &spec.options {
        match flag_of(o) {
            Some(f) => flags |= f,
            None => data.push(o.clone()),
        }
    }
    if let Some(s) = &spec.subtype {
        data.push(format!("subtype={s}"));
    }
    if spec.allow_other {
        data.push("allow_other".into());
    }
    if spec.default_permissions {
        data.push("default_permissions".into());
    }
    (flags, data)
}

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a mount argument"))
}

/// Mount at `mnt`.
pub fn mount(mnt: &Path, spec: &MountSpec) -> io::Result<Mounted> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && !spec.auto_unmount {
        match mount_sys(mnt, spec) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            r => return r,
        }
    }
    mount_fusermount(mnt, spec)
}

fn mount_sys(mnt: &Path, spec: &MountSpec) -> io::Result<Mounted> {
    let mode = std::fs::metadata(mnt)?.permissions().mode() & libc::S_IFMT;
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")?;
    let fd: OwnedFd = dev.into();
    let (flags, extra) = kernel_args(spec);
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut data = format!(
        "fd={},rootmode={:o},user_id={uid},group_id={gid}",
        fd.as_raw_fd(),
        mode
    );
    for o in extra {
        data.push(',');
        data.push_str(&o);
    }
    let (src, target) = (
        cstr(spec.fsname.as_bytes())?,
        cstr(mnt.as_os_str().as_bytes())?,
    );
    let (fstype, data) = (cstr(b"fuse")?, cstr(data.as_bytes())?);
    // SAFETY: all pointers are NUL-terminated strings alive for the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr() as *const libc::c_void,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    crate::fuse::utab::add(mnt, &spec.fsname);
    Ok(Mounted { fd, watcher: None })
}

/// The option string `fusermount3 -o` takes.
fn fusermount_options(spec: &MountSpec) -> String {
    let mut o = vec![format!("fsname={}", spec.fsname.replace(',', "\\,"))];
    if let Some(s) = &spec.subtype {
        o.push(format!("subtype={s}"));
    }
    o.push(if spec.read_only { "ro" } else { "rw" }.into());
    if spec.allow_other {
        o.push("allow_other".into());
    }
    if spec.default_permissions {
        o.push("default_permissions".into());
    }
    if spec.auto_unmount {
        o.push("auto_unmount".into());
    }
    o.extend(spec.options.iter().cloned());
    o.join(",")
}

fn mount_fusermount(mnt: &Path, spec: &MountSpec) -> io::Result<Mounted> {
    let (ours, theirs) = UnixStream::pair()?;
    let their_fd = theirs.as_raw_fd();
    let mut cmd = Command::new(std::env::var_os("FUSERMOUNT_PATH").unwrap_or("fusermount3".into()));
    cmd.arg("-o")
        .arg(fusermount_options(spec))
        .arg("--")
        .arg(mnt)
        .env("_FUSE_COMMFD", their_fd.to_string())
        .stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec: clear
    // close-on-exec on the socket fusermount3 must inherit.
    unsafe {
        cmd.pre_exec(move || {
            let fl = libc::fcntl(their_fd, libc::F_GETFD);
            if fl < 0 || libc::fcntl(their_fd, libc::F_SETFD, fl & !libc::FD_CLOEXEC) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("running fusermount3: {e}")))?;
    drop(theirs);
    let fd = match receive_fd(&ours) {
        Ok(fd) => fd,
        Err(e) => {
            let st = child.wait()?;
            return Err(io::Error::other(format!("fusermount3 failed ({st}): {e}")));
        }
    };
    if spec.auto_unmount {
        // It watches `ours`: keep it open for our whole life.
        std::mem::forget(ours);
        return Ok(Mounted {
            fd,
            watcher: Some(child),
        });
    }
    let st = child.wait()?;
    if !st.success() {
        return Err(io::Error::other(format!("fusermount3: {st}")));
    }
    Ok(Mounted { fd, watcher: None })
}

/// Receive one descriptor (SCM_RIGHTS) from fusermount3.
fn receive_fd(sock: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    // Room for one cmsghdr with one int, 8-aligned.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain data; zero is a valid start.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    let n = loop {
        // SAFETY: msg points at live buffers of the sizes it states.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    };
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "no descriptor came back",
        ));
    }
    // SAFETY: the control buffer was filled by the kernel; the CMSG
    // macros walk it within msg_controllen.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "no SCM_RIGHTS message",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int);
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_data() {
        let spec = MountSpec {
            fsname: "img".into(),
            subtype: Some("rxfs".into()),
            allow_other: true,
            default_permissions: true,
            options: vec!["suid".into(), "noexec".into(), "max_read=4096".into()],
            ..Default::default()
        };
        let (flags, data) = kernel_args(&spec);
        assert_eq!(flags, libc::MS_NODEV | libc::MS_NOEXEC);
        assert_eq!(
            data,
            [
                "max_read=4096",
                "subtype=rxfs",
                "allow_other",
                "default_permissions"
            ]
        );
        let o = fusermount_options(&MountSpec {
            fsname: "a,b".into(),
            read_only: true,
            auto_unmount: true,
            ..Default::default()
        });
        assert_eq!(o, "fsname=a\\,b,ro,auto_unmount");
    }
}
