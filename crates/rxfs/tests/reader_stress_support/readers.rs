//! The reader threads: the FUSE driver's pattern (`iget`, then the
//! operation on the inode it returned) in a loop over the writers' inodes.
//! Errors a race explains (a name or an xattr removed meanwhile, an inode
//! freed meanwhile) are accepted; anything else is a failure.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use super::*;
use rxfs::inode::{Fork, Inode};
use rxfs::types::Ino;
use rxfs::{Error, Filesystem};

/// A small xorshift generator: which names and offsets a reader picks.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Loop over every kind of read until `done`.
pub fn reader(fs: &Filesystem, sh: &Shapes, t: &Tally, seed: u64, done: &AtomicBool) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut i = seed;
    while !done.load(Relaxed) {
        match i % 6 {
            0 => read_file(fs, sh, t, &mut rng),
            1 => xattrs(fs, sh, t, &mut rng),
            2 => readdir(fs, sh.dir, t, true),
            3 => readdir(fs, sh.dir2, t, false),
            4 => lookups(fs, sh, t, &mut rng),
            _ => readlink(fs, sh, t),
        }
        i += 1;
    }
}

/// `iget` of an inode that always exists; re-reads the fields that must
/// agree with each other.
fn iget(fs: &Filesystem, ino: Ino, t: &Tally) -> Option<Arc<Inode>> {
    t.op(Op::Iget);
    match fs.iget(ino) {
        Ok(ip) => {
            if let Fork::Extents { list, .. } = &ip.data {
                if list.len() as u64 != ip.core.nextents {
                    t.fail(
                        Op::Iget,
                        false,
                        format!(
                            "inode {}: {} extents, core says {}",
                            ino.0,
                            list.len(),
                            ip.core.nextents
                        ),
                    );
                }
            }
            Some(ip)
        }
        Err(e) => {
            t.error(Op::Iget, &format!("inode {}", ino.0), &e);
            None
        }
    }
}

fn read_file(fs: &Filesystem, sh: &Shapes, t: &Tally, rng: &mut Rng) {
    let Some(ip) = iget(fs, sh.file, t) else {
        return;
    };
    let mut buf = vec![0u8; 16 << 10];
    let off = rng.below(ip.core.size) & !1023;
    t.op(Op::ReadFile);
    if let Err(e) = fs.read_file(&ip, off, &mut buf) {
        t.error(Op::ReadFile, &format!("offset {off}"), &e);
    }
}

fn xattrs(fs: &Filesystem, sh: &Shapes, t: &Tally, rng: &mut Rng) {
    let Some(ip) = iget(fs, sh.file, t) else {
        return;
    };
    t.op(Op::Getxattr);
    match fs.getxattr(&ip, FIXED_NAME) {
        Ok(v) if v == FIXED_VALUE => {}
        Ok(v) => t.fail(
            Op::Getxattr,
            false,
            format!("user.fixed: {} bytes, wrong", v.len()),
        ),
        Err(e) => t.error(Op::Getxattr, "user.fixed", &e),
    }
    t.op(Op::Getxattr);
    match fs.getxattr(&ip, FLIP_NAME) {
        Ok(v) if FLIP_SIZES.contains(&v.len()) && v == value(1000, v.len()) => {}
        Ok(v) => t.fail(
            Op::Getxattr,
            false,
            format!("user.flip: {} bytes, wrong", v.len()),
        ),
        Err(e) => t.error(Op::Getxattr, "user.flip", &e),
    }
    let k = rng.below(ATTRS_MAX as u64) as usize;
    t.op(Op::Getxattr);
    match fs.getxattr(&ip, &attr_name(k)) {
        Ok(v) if v == value(k as u64, v.len()) => {}
        Err(Error::NoAttr) => {}
        Ok(v) => t.fail(
            Op::Getxattr,
            false,
            format!("user.a{k}: {} bytes, wrong", v.len()),
        ),
        Err(e) => t.error(Op::Getxattr, &format!("user.a{k}"), &e),
    }
    t.op(Op::Listxattr);
    match fs.listxattr(&ip) {
        Ok(names) => {
            for want in [FIXED_NAME, FLIP_NAME] {
                if !names.iter().any(|n| n == want) {
                    let w = String::from_utf8_lossy(want);
                    t.fail(Op::Listxattr, false, format!("{w} missing"));
                }
            }
        }
        Err(e) => t.error(Op::Listxattr, "", &e),
    }
}

/// A whole readdir in one call; in the main directory every kept name
/// must be there.
fn readdir(fs: &Filesystem, dir: Ino, t: &Tally, keeps: bool) {
    let Some(ip) = iget(fs, dir, t) else {
        return;
    };
    let mut names = Vec::new();
    t.op(Op::Readdir);
    if let Err(e) = fs.readdir(&ip, 0, &mut |e| {
        names.push(e.name.clone());
        true
    }) {
        return t.error(Op::Readdir, &format!("dir {}", dir.0), &e);
    }
    if keeps {
        let missing = (0..KEEP)
            .filter(|&k| !names.contains(&keep_name(k)))
            .count();
        if missing > 0 {
            let msg = format!("{missing} kept names missing of {} listed", names.len());
            t.fail(Op::Readdir, false, msg);
        }
    }
}

/// A kept name (must be there, its inode too) and a churning one.
fn lookups(fs: &Filesystem, sh: &Shapes, t: &Tally, rng: &mut Rng) {
    let Some(ip) = iget(fs, sh.dir, t) else {
        return;
    };
    let k = rng.below(KEEP as u64) as usize;
    t.op(Op::Lookup);
    match fs.lookup(&ip, &keep_name(k)) {
        Ok(ino) => {
            iget(fs, ino, t);
        }
        Err(e) => t.error(Op::Lookup, &format!("keep{k:03}"), &e),
    }
    let name = format!("c{}_{}", rng.below(6), rng.below(2000));
    t.op(Op::Lookup);
    match fs.lookup(&ip, name.as_bytes()) {
        Ok(ino) => match fs.iget(ino) {
            Ok(_) | Err(Error::NotFound) => {}
            Err(e) => t.error(Op::Iget, &format!("{name} (inode {})", ino.0), &e),
        },
        Err(Error::NotFound) => {}
        Err(e) => t.error(Op::Lookup, &name, &e),
    }
}

/// "ln" always exists (replaced by rename); the inode it named a moment
/// ago may be gone.
fn readlink(fs: &Filesystem, sh: &Shapes, t: &Tally) {
    let Some(dp) = iget(fs, sh.dir, t) else {
        return;
    };
    t.op(Op::Lookup);
    let ino = match fs.lookup(&dp, b"ln") {
        Ok(ino) => ino,
        Err(e) => return t.error(Op::Lookup, "ln", &e),
    };
    t.op(Op::Iget);
    let ip = match fs.iget(ino) {
        Ok(ip) => ip,
        Err(Error::NotFound) => return,
        Err(e) => return t.error(Op::Iget, &format!("ln (inode {})", ino.0), &e),
    };
    t.op(Op::Readlink);
    match fs.readlink(&ip) {
        Ok(v) if target_ok(&v) => {}
        r => {
            // Freed (and maybe reused) since our iget: a stale copy.
            let gone = match fs.iget(ino) {
                Err(Error::NotFound) => true,
                Ok(now) => now.core.gen != ip.core.gen || now.core.mode != ip.core.mode,
                Err(_) => false,
            };
            if gone {
                t.stale();
            } else {
                let r = r.map(|v| String::from_utf8_lossy(&v[..v.len().min(40)]).into_owned());
                t.fail(
                    Op::Readlink,
                    is_corrupt(&r),
                    format!("inode {}: {r:?}", ino.0),
                );
            }
        }
    }
}

fn is_corrupt<T>(r: &rxfs::Result<T>) -> bool {
    matches!(r, Err(e) if e.is_corrupt())
}
