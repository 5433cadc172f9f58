//! Shared pieces of the recovery oracle tests: a seeded workload for a
//! kernel mount, and tree walks through the kernel (std::fs) and through
//! the rxfs library that produce comparable manifests.

#![allow(dead_code)]

pub mod compare;
#[allow(unused_imports)]
pub use compare::*;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::run;
use rxfs::Filesystem;

/// One file as seen by a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The inode number: two names of one inode and two inodes that look
    /// alike (same content, mode and coarse mtime) must not compare equal.
    pub ino: u64,
    pub kind: char,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub mtime: (i64, u32),
    /// Content hash, or the symlink target.
    pub body: String,
    pub xattrs: BTreeMap<String, u64>,
}

pub type Manifest = BTreeMap<String, Entry>;

pub fn fnv(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}
pub const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn kernel_xattrs(p: &Path) -> BTreeMap<String, u64> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut names = vec![0u8; 65536];
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr() as *mut _, names.len()) };
    assert!(n >= 0, "llistxattr {p:?}");
    let mut out = BTreeMap::new();
    for name in names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
    {
        let cn = CString::new(name).unwrap();
        let mut v = vec![0u8; 65536];
        let m =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr() as *mut _, v.len()) };
        assert!(m >= 0, "lgetxattr {p:?}");
        out.insert(
            String::from_utf8_lossy(name).into_owned(),
            fnv(&v[..m as usize], FNV0),
        );
    }
    out
}

pub fn kernel_walk(root: &Path) -> Manifest {
    let mut m = Manifest::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let p = root.join(&rel);
        let md = std::fs::symlink_metadata(&p).unwrap();
        let ft = md.file_type();
        let (kind, body) = if ft.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(rel.join(e.unwrap().file_name()));
            }
            ('d', String::new())
        } else if ft.is_symlink() {
            let t = std::fs::read_link(&p).unwrap();
            (
                'l',
                String::from_utf8_lossy(t.as_os_str().as_bytes()).into_owned(),
            )
        } else if ft.is_file() {
            ('f', format!("{:x}", fnv(&std::fs::read(&p).unwrap(), FNV0)))
        } else {
            ('o', String::new())
        };
        m.insert(
            format!("/{}", rel.display()),
            Entry {
                ino: md.ino(),
                kind,
                mode: md.mode(),
                uid: md.uid(),
                gid: md.gid(),
                nlink: md.nlink() as u32,
                size: md.size(),
                mtime: (md.mtime(), md.mtime_nsec() as u32),
                body,
                xattrs: kernel_xattrs(&p),
            },
        );
    }
    m
}

pub fn rxfs_walk(fs: &Filesystem) -> Manifest {
    let mut m = Manifest::new();
    let mut stack = vec![(String::new(), fs.root_ino())];
    while let Some((rel, ino)) = stack.pop() {
        let ip = fs.iget(ino).unwrap();
        let c = &ip.core;
        let fmt = c.mode & 0o170000;
        let (kind, body) = match fmt {
            0o040000 => {
                fs.readdir(&ip, 0, &mut |e| {
                    if e.name != b"." && e.name != b".." {
                        let n = String::from_utf8_lossy(&e.name).into_owned();
                        stack.push((format!("{rel}/{n}"), e.ino));
                    }
                    true
                })
                .unwrap();
                ('d', String::new())
            }
            0o120000 => (
                'l',
                String::from_utf8_lossy(&fs.readlink(&ip).unwrap()).into_owned(),
            ),
            0o100000 => {
                let mut h = FNV0;
                let mut off = 0u64;
                let mut buf = vec![0u8; 1 << 20];
                while off < c.size {
                    let n = fs.read_file(&ip, off, &mut buf).unwrap();
                    assert!(n > 0, "short read of {rel}");
                    h = fnv(&buf[..n], h);
                    off += n as u64;
                }
                ('f', format!("{h:x}"))
            }
            _ => ('o', String::new()),
        };
        let mut xattrs = BTreeMap::new();
        for name in fs.listxattr(&ip).unwrap() {
            let v = fs.getxattr(&ip, &name).unwrap();
            xattrs.insert(String::from_utf8_lossy(&name).into_owned(), fnv(&v, FNV0));
        }
        let key = if rel.is_empty() {
            "/".to_string()
        } else {
            rel.clone()
        };
        m.insert(
            key,
            Entry {
                ino: ino.0,
                kind,
                mode: c.mode as u32,
                uid: c.uid,
                gid: c.gid,
                nlink: c.nlink,
                size: c.size,
                mtime: (c.mtime.sec, c.mtime.nsec),
                body,
                xattrs,
            },
        );
    }
    m
}

pub fn diff(a: &Manifest, b: &Manifest) -> Option<String> {
    if a == b {
        return None;
    }
    let mut out = String::new();
    for (k, v) in a {
        match b.get(k) {
            None => out += &format!("only in kernel: {k}\n"),
            Some(w) if w != v => out += &format!("{k}:\n  kernel {v:?}\n  rxfs   {w:?}\n"),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out += &format!("only in rxfs: {k}\n");
    }
    out.truncate(4000);
    Some(out)
}

pub fn set_xattr(p: &Path, name: &str, val: &[u8]) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            val.as_ptr() as *const _,
            val.len(),
            0,
        )
    };
}

/// A seeded workload on the mounted filesystem at `mnt`.
/// `ops` bounds the operation count (the crash point is random below it);
/// a sync comes once in `sync_one_in` operations on average. Some files
/// are unlinked while still open (they stay on the AGI unlinked lists).
pub fn workload(
    mnt: &Path,
    seed: u64,
    ops: usize,
    sync_one_in: u64,
    freeze: bool,
) -> Vec<std::fs::File> {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let ops = ops / 2 + r.below(ops as u64 / 2 + 1) as usize;
    let mut open_unlinked = Vec::new();
    let dirs = ["", "d1", "d2", "d1/sub", "big"];
    for d in &dirs[1..] {
        let _ = std::fs::create_dir_all(mnt.join(d));
    }
    let path = |r: &mut Rng| {
        let d = dirs[r.below(dirs.len() as u64) as usize];
        mnt.join(d).join(format!("f{}", r.below(40)))
    };
    for i in 0..ops {
        let p = path(&mut r);
        match r.below(12) {
            0..=2 => {
                let cap = if r.below(4) == 0 { 300_000 } else { 5000 };
                let len = r.below(cap) as usize;
                let byte = r.below(256) as u8;
                let _ = std::fs::write(&p, vec![byte; len]);
            }
            3 => {
                let _ = std::fs::remove_file(&p);
            }
            4 => {
                let q = path(&mut r);
                let _ = std::fs::rename(&p, &q);
            }
            5 => {
                let v = vec![b'x'; r.below(3000) as usize + 1];
                set_xattr(&p, &format!("user.a{}", r.below(6)), &v);
            }
            6 => {
                if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&p) {
                    let _ = f.set_len(r.below(100_000));
                }
            }
            7 => {
                let _ = std::fs::set_permissions(
                    &p,
                    std::fs::Permissions::from_mode(0o600 + r.below(0o177) as u32),
                );
            }
            8 => {
                let t = "t".repeat(r.below(900) as usize + 1);
                let _ = std::os::unix::fs::symlink(&t, &p);
            }
            9 => {
                let d = mnt.join("big").join(format!("n{}", r.below(400)));
                let _ = std::fs::write(&d, b"x");
            }
            10 => {
                let d = mnt.join("d2").join(format!("dir{}", r.below(10)));
                let _ = std::fs::create_dir(&d).or_else(|_| std::fs::remove_dir(&d));
            }
            _ => {
                if seed.is_multiple_of(3) && r.below(8) == 0 {
                    if let Ok(f) = std::fs::File::open(&p) {
                        if std::fs::remove_file(&p).is_ok() {
                            open_unlinked.push(f);
                        }
                    }
                }
            }
        }
        if r.below(sync_one_in) == 0 {
            unsafe { libc::sync() };
        }
        if freeze && i % 500 == 499 && r.below(2) == 0 {
            // Freezing writes all metadata back (the AIL empties), so later
            // replays meet blocks that carry LSNs.
            run("xfs_freeze", &["-f", mnt.to_str().unwrap()]);
            run("xfs_freeze", &["-u", mnt.to_str().unwrap()]);
        }
    }
    open_unlinked
}

/// mkfs.xfs of a filesystem under 300 MB with a small log: mkfs 6.1
/// allows that only for fstests, which it recognises by these variables.
pub fn small_mkfs(img: &Path, size: u64, opts: &[&str]) {
    std::fs::File::create(img).unwrap().set_len(size).unwrap();
    let out = Command::new("mkfs.xfs")
        .args(["-f", "-q"])
        .args(opts)
        .arg(img)
        .envs([("TEST_DIR", "1"), ("TEST_DEV", "1"), ("QA_CHECK_FS", "1")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mkfs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
