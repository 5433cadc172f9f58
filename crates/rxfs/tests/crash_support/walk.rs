//! Trees as a recovered image shows them, through rxfs (library calls) or
//! the kernel (a mount walked with std::fs), in one comparable form; and
//! the external checks of an image file (xfs_repair -n, kernel mount).
//!
//! Walks return errors as text instead of panicking: a damaged image is a
//! test failure to report with its crash case, not a crash of the test.
//! Each path reports its inode number and link count (hard links show as
//! paths with one inode number) and its "user." xattrs (the only ones the
//! workload makes; others, e.g. security labels a host adds, are left out).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use rxfs::Filesystem;

use super::model::Xattrs;

/// Walk limits: a broken image must not make the walk run away.
const MAX_ENTRIES: usize = 100_000;
const MAX_FILE: u64 = 64 << 20;
/// Xattr names per inode, and bytes of the name list.
const MAX_XATTRS: usize = 10_000;
const MAX_XATTR_LIST: usize = 1 << 20;

/// One path of a recovered tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    pub dir: bool,
    /// Neither a regular file nor a directory (the workload makes none).
    pub other: bool,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime: (i64, u32),
    pub content: Vec<u8>,
    pub ino: u64,
    pub nlink: u32,
    /// "user." xattrs: full name -> value.
    pub xattrs: Xattrs,
}

pub type Tree = BTreeMap<String, Got>;

fn child(rel: &str, name: &str) -> String {
    if rel == "/" {
        format!("/{name}")
    } else {
        format!("{rel}/{name}")
    }
}

/// The tree through the rxfs library.
pub fn rxfs_tree(fs: &Filesystem) -> Result<Tree, String> {
    let mut t = Tree::new();
    let mut stack = vec![("/".to_string(), fs.root_ino())];
    while let Some((rel, ino)) = stack.pop() {
        if t.len() >= MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} entries"));
        }
        let ip = fs
            .iget(ino)
            .map_err(|e| format!("iget {rel} ({ino:?}): {e}"))?;
        let c = &ip.core;
        let fmt = c.mode as u32 & 0o170000;
        let mut content = Vec::new();
        if fmt == 0o040000 {
            let mut kids = Vec::new();
            fs.readdir(&ip, 0, &mut |e| {
                if e.name != b"." && e.name != b".." {
                    kids.push((String::from_utf8_lossy(&e.name).into_owned(), e.ino));
                }
                kids.len() < MAX_ENTRIES
            })
            .map_err(|e| format!("readdir {rel}: {e}"))?;
            for (n, i) in kids {
                stack.push((child(&rel, &n), i));
            }
        } else if fmt == 0o100000 {
            if c.size > MAX_FILE {
                return Err(format!("{rel}: size {} too large", c.size));
            }
            content = vec![0u8; c.size as usize];
            let mut off = 0usize;
            while off < content.len() {
                let n = fs
                    .read_file(&ip, off as u64, &mut content[off..])
                    .map_err(|e| format!("read {rel} at {off}: {e}"))?;
                if n == 0 {
                    return Err(format!("{rel}: short read at {off} of {}", c.size));
                }
                off += n;
            }
        }
        let mut xattrs = Xattrs::new();
        let names = fs
            .listxattr(&ip)
            .map_err(|e| format!("listxattr {rel}: {e}"))?;
        if names.len() > MAX_XATTRS {
            return Err(format!("{rel}: {} xattrs", names.len()));
        }
        for n in names.into_iter().filter(|n| n.starts_with(b"user.")) {
            let v = fs
                .getxattr(&ip, &n)
                .map_err(|e| format!("getxattr {rel} {}: {e}", String::from_utf8_lossy(&n)))?;
            xattrs.insert(n, v);
        }
        t.insert(
            rel,
            Got {
                dir: fmt == 0o040000,
                other: fmt != 0o040000 && fmt != 0o100000,
                perm: c.mode as u32 & 0o7777,
                uid: c.uid,
                gid: c.gid,
                size: c.size,
                mtime: (c.mtime.sec, c.mtime.nsec),
                content,
                ino: ino.0,
                nlink: c.nlink,
                xattrs,
            },
        );
    }
    Ok(t)
}

/// The tree under a mount point, through the kernel.
pub fn kernel_tree(root: &Path) -> Result<Tree, String> {
    let mut t = Tree::new();
    let mut stack = vec![("/".to_string(), root.to_path_buf())];
    while let Some((rel, p)) = stack.pop() {
        if t.len() >= MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} entries"));
        }
        let md = std::fs::symlink_metadata(&p).map_err(|e| format!("stat {rel}: {e}"))?;
        let ft = md.file_type();
        let mut content = Vec::new();
        if ft.is_dir() {
            for e in std::fs::read_dir(&p).map_err(|e| format!("readdir {rel}: {e}"))? {
                let e = e.map_err(|e| format!("readdir {rel}: {e}"))?;
                let n = e.file_name().to_string_lossy().into_owned();
                stack.push((child(&rel, &n), e.path()));
            }
        } else if ft.is_file() {
            content = std::fs::read(&p).map_err(|e| format!("read {rel}: {e}"))?;
        }
        let xattrs = kernel_xattrs(&p).map_err(|e| format!("xattrs of {rel}: {e}"))?;
        t.insert(
            rel,
            Got {
                dir: ft.is_dir(),
                other: !ft.is_dir() && !ft.is_file(),
                perm: md.mode() & 0o7777,
                uid: md.uid(),
                gid: md.gid(),
                size: md.size(),
                mtime: (md.mtime(), md.mtime_nsec() as u32),
                content,
                ino: md.ino(),
                nlink: md.nlink() as u32,
                xattrs,
            },
        );
    }
    Ok(t)
}

/// The "user." xattrs of `p` (not following a symlink), through
/// llistxattr/lgetxattr.
fn kernel_xattrs(p: &Path) -> Result<Xattrs, String> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: a NUL-terminated path; a null buffer of size 0 asks for the size.
    let n = unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
    if n < 0 {
        return Err(err("llistxattr"));
    }
    let mut list = vec![0u8; (n as usize).min(MAX_XATTR_LIST)];
    // SAFETY: the buffer holds list.len() bytes.
    let n = unsafe { libc::llistxattr(c.as_ptr(), list.as_mut_ptr().cast(), list.len()) };
    if n < 0 {
        return Err(err("llistxattr"));
    }
    list.truncate(n as usize);
    let mut out = Xattrs::new();
    for name in list.split(|&b| b == 0).filter(|n| n.starts_with(b"user.")) {
        let cn = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
        let mut v = vec![0u8; 64 << 10];
        // SAFETY: NUL-terminated path and name; the buffer holds v.len() bytes.
        let n = unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
        if n < 0 {
            return Err(err(&format!("lgetxattr {}", String::from_utf8_lossy(name))));
        }
        v.truncate(n as usize);
        out.insert(name.to_vec(), v);
    }
    Ok(out)
}

/// The fields in which two views of one path differ (first/second).
pub fn got_diff(v: &Got, w: &Got) -> String {
    format!(
        "dir {}/{} perm {:o}/{:o} uid {}/{} gid {}/{} size {}/{} mtime {:?}/{:?} \
         ino {}/{} nlink {}/{} content {} xattrs {}",
        v.dir,
        w.dir,
        v.perm,
        w.perm,
        v.uid,
        w.uid,
        v.gid,
        w.gid,
        v.size,
        w.size,
        v.mtime,
        w.mtime,
        v.ino,
        w.ino,
        v.nlink,
        w.nlink,
        if v.content == w.content {
            "same"
        } else {
            "differs"
        },
        if v.xattrs == w.xattrs {
            "same"
        } else {
            "differ"
        }
    )
}

/// Whether two trees are equal; a short description of the differences.
pub fn tree_diff(a: &Tree, b: &Tree) -> Option<String> {
    if a == b {
        return None;
    }
    let mut out = String::new();
    for (k, v) in a {
        match b.get(k) {
            None => out += &format!("only in first: {k}\n"),
            Some(w) if w != v => out += &format!("{k}: {}\n", got_diff(v, w)),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out += &format!("only in second: {k}\n");
    }
    out.truncate(3000);
    Some(out)
}

/// `xfs_repair -n` must exit 0.
pub fn repair_n(img: &Path) -> Result<(), String> {
    let out = Command::new("xfs_repair")
        .arg("-n")
        .arg(img)
        .output()
        .map_err(|e| format!("cannot run xfs_repair: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let mut s = format!(
        "xfs_repair -n exit {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    s.truncate(4000);
    Err(s)
}

/// A kernel loop mount that reports failure instead of panicking;
/// unmounted on drop.
pub struct Mounted {
    pub dir: PathBuf,
    live: bool,
}

impl Mounted {
    pub fn new(img: &Path, dir: &Path, opts: &str) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let o = if opts.is_empty() {
            "loop".to_string()
        } else {
            format!("loop,{opts}")
        };
        // Loop device allocation races with parallel tests: retry those
        // (and only those: a refused log must not be retried on an image
        // the failed mount may have changed).
        let mut tries = 0;
        let out = loop {
            let out = Command::new("mount")
                .args(["-t", "xfs", "-o", &o])
                .arg(img)
                .arg(dir)
                .output()
                .map_err(|e| format!("cannot run mount: {e}"))?;
            let loop_trouble = String::from_utf8_lossy(&out.stderr).contains("loop device");
            tries += 1;
            if out.status.success() || !loop_trouble || tries >= 5 {
                break out;
            }
            std::thread::sleep(std::time::Duration::from_millis(200 * tries));
        };
        if !out.status.success() {
            let dmesg = Command::new("dmesg")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let tail: Vec<&str> = dmesg.lines().rev().take(15).collect();
            return Err(format!(
                "kernel mount failed: {}\ndmesg (last lines, newest first):\n{}",
                String::from_utf8_lossy(&out.stderr),
                tail.join("\n")
            ));
        }
        Ok(Mounted {
            dir: dir.to_path_buf(),
            live: true,
        })
    }

    pub fn umount(mut self) -> Result<(), String> {
        self.live = false;
        for i in 0..10 {
            let out = Command::new("umount").arg(&self.dir).output();
            if out.is_ok_and(|o| o.status.success()) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(100 * (i + 1)));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        Err(format!("umount {} failed", self.dir.display()))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.live {
            let ok = Command::new("umount")
                .arg(&self.dir)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            }
        }
    }
}
