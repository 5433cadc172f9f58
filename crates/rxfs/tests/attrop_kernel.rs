//! Extended attribute writes in every attr fork form, through the
//! read-write `Filesystem` API, against the kernel oracle: shortform,
//! shortform -> leaf and back, remote values of every size class, leaf ->
//! node and back, node trees of several levels, hash collisions across
//! leaves, attr forks the kernel made changed by rxfs, attr forks added
//! to files whose data fork must give room, rmapbt and 1 KiB-block
//! variants, and seeded random mixes against a model. After each
//! scenario: rxfs reads back the model, unmount, `xfs_repair -n` exit 0,
//! a kernel mount lists and reads exactly the model (every namespace),
//! and the attr fork is in the form the scenario meant to reach.

mod common;
#[allow(dead_code)]
mod ns_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::*;
use ns_support::*;
use rxfs::attr::blocks::Tree;
use rxfs::format::dinode_edit as di;
use rxfs::fs::ops_attr::XattrSet;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::xact::MetaTx;
use rxfs::{Error, Filesystem};

/// path (relative to the root) -> full xattr name -> value.
type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Attr fork shape on disk: 0 none, 1 shortform, 2 leaf, 3+n node form
/// with n node levels.
fn form(fs: &Arc<Filesystem>, ino: Ino) -> usize {
    let mut tx = fs.trans_alloc(rxfs::xact::Resv::AttrSet).unwrap();
    let ip = tx.ijoin(ino).unwrap();
    let d = tx.inode(ip);
    let f = if di::forkoff(d) == 0 {
        0
    } else if di::aformat(d) == 1 {
        1
    } else if di::anextents(d) == 0 {
        0
    } else {
        let t = Tree::load(&mut tx, ip, ino).unwrap();
        match t.shape() {
            (0, _, _) => 2,
            (l, _, _) => 2 + l,
        }
    };
    tx.cancel();
    f
}

fn kernel_xattrs(p: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let c = cpath(p);
    let mut names = vec![0u8; 1 << 20];
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr() as *mut _, names.len()) };
    assert!(
        n >= 0,
        "llistxattr {p:?}: {}",
        std::io::Error::last_os_error()
    );
    let mut out = BTreeMap::new();
    for name in names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
    {
        if name.starts_with(b"system.") {
            continue;
        }
        let cn = std::ffi::CString::new(name).unwrap();
        let mut val = vec![0u8; 1 << 16];
        let l = unsafe {
            libc::lgetxattr(
                c.as_ptr(),
                cn.as_ptr(),
                val.as_mut_ptr() as *mut _,
                val.len(),
            )
        };
        assert!(l >= 0, "lgetxattr {p:?} {}", String::from_utf8_lossy(name));
        val.truncate(l as usize);
        out.insert(name.to_vec(), val);
    }
    out
}

fn rxfs_xattrs(fs: &Filesystem, ino: Ino) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let ip = fs.iget(ino).unwrap();
    let mut out = BTreeMap::new();
    for n in fs.listxattr(&ip).unwrap() {
        if n.starts_with(b"system.") {
            continue;
        }
        let v = fs.getxattr(&ip, &n).unwrap();
        out.insert(n, v);
    }
    out
}

/// rxfs's view, then unmount, repair, kernel view; all equal the model.
fn finish(fs: Arc<Filesystem>, img: &Path, s: &Scratch, inos: &BTreeMap<String, Ino>, m: &Model) {
    for (p, want) in m {
        let got = rxfs_xattrs(&fs, inos[p]);
        assert!(
            got == *want,
            "{p}: rxfs reads {} attrs, model {}",
            got.len(),
            want.len()
        );
    }
    assert_eq!(fs.stats().trans_resv_overruns, 0, "log reservation overrun");
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    drop(fs);
    if let Err(e) = repair(img) {
        panic!("{e}");
    }
    let mnt = s.path("mnt");
    let k = KernelMount::new(img, &mnt, "ro");
    for (p, want) in m {
        let got = kernel_xattrs(&mnt.join(p));
        if got != *want {
            k.umount();
            let missing: Vec<_> = want
                .keys()
                .filter(|n| !got.contains_key(*n))
                .take(3)
                .collect();
            panic!(
                "{p}: the kernel reads {} attrs, model {} (missing e.g. {missing:?})",
                got.len(),
                want.len()
            );
        }
    }
    k.umount();
}

fn set(fs: &Filesystem, m: &mut Model, inos: &BTreeMap<String, Ino>, p: &str, n: &str, v: &[u8]) {
    fs.setxattr(inos[p], n.as_bytes(), v, XattrSet::Any)
        .unwrap_or_else(|e| panic!("set {p} {n} ({} bytes): {e}", v.len()));
    m.entry(p.into())
        .or_default()
        .insert(n.as_bytes().to_vec(), v.to_vec());
}

fn remove(fs: &Filesystem, m: &mut Model, inos: &BTreeMap<String, Ino>, p: &str, n: &str) {
    fs.removexattr(inos[p], n.as_bytes())
        .unwrap_or_else(|e| panic!("remove {p} {n}: {e}"));
    m.get_mut(p).unwrap().remove(n.as_bytes());
}

/// A fresh image with files "f", "g" and directory "d" made by rxfs.
fn start(
    name: &str,
    opts: &[&str],
) -> (
    Scratch,
    std::path::PathBuf,
    Arc<Filesystem>,
    BTreeMap<String, Ino>,
) {
    let (s, img) = setup(name, opts);
    let fs = rw(&img);
    let root = fs.root_ino();
    let mut inos = BTreeMap::new();
    inos.insert(
        "f".to_string(),
        fs.create(root, b"f", &CreateArgs::root(0o100644))
            .unwrap()
            .ino,
    );
    inos.insert(
        "g".to_string(),
        fs.create(root, b"g", &CreateArgs::root(0o100644))
            .unwrap()
            .ino,
    );
    inos.insert(
        "d".to_string(),
        fs.mkdir(root, b"d", &CreateArgs::root(0o40755))
            .unwrap()
            .ino,
    );
    (s, img, fs, inos)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn sf_set_replace_remove() {
    let (s, img, fs, inos) = start("attr_sf", &[]);
    let mut m = Model::new();
    for p in ["f", "d"] {
        set(&fs, &mut m, &inos, p, "user.a", b"1");
        set(&fs, &mut m, &inos, p, "trusted.a", b"two");
        set(&fs, &mut m, &inos, p, "security.a", &[7; 100]);
        set(&fs, &mut m, &inos, p, "user.a", b"replaced");
    }
    let f = inos["f"];
    assert!(matches!(
        fs.setxattr(f, b"user.a", b"x", XattrSet::Create),
        Err(Error::Exists)
    ));
    assert!(matches!(
        fs.setxattr(f, b"user.zz", b"x", XattrSet::Replace),
        Err(Error::NoAttr)
    ));
    assert!(matches!(fs.removexattr(f, b"user.zz"), Err(Error::NoAttr)));
    fs.setxattr(f, b"user.a", b"again", XattrSet::Replace)
        .unwrap();
    m.get_mut("f")
        .unwrap()
        .insert(b"user.a".to_vec(), b"again".to_vec());
    remove(&fs, &mut m, &inos, "d", "trusted.a");
    assert_eq!(form(&fs, f), 1);
    // Remove everything from g's fork: the fork goes.
    set(&fs, &mut m, &inos, "g", "user.only", b"x");
    remove(&fs, &mut m, &inos, "g", "user.only");
    assert_eq!(form(&fs, inos["g"]), 0);
    finish(fs, &img, &s, &inos, &m);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn sf_to_leaf_and_back() {
    let (s, img, fs, inos) = start("attr_sf_leaf", &[]);
    let mut m = Model::new();
    let f = inos["f"];
    let mut i = 0;
    while form(&fs, f) < 2 {
        set(
            &fs,
            &mut m,
            &inos,
            "f",
            &format!("user.grow{i:03}"),
            &pattern(i, 40),
        );
        i += 1;
        assert!(i < 100, "never left shortform");
    }
    // A value of 255 bytes or more never fits shortform.
    set(&fs, &mut m, &inos, "g", "user.big", &[1; 255]);
    assert_eq!(form(&fs, inos["g"]), 2);
    finish(fs, &img, &s, &inos, &m);
    let fs = rw(&img);
    for k in 0..i - 1 {
        remove(&fs, &mut m, &inos, "f", &format!("user.grow{k:03}"));
    }
    assert_eq!(form(&fs, f), 1, "one small attr left: back to shortform");
    remove(&fs, &mut m, &inos, "g", "user.big");
    assert_eq!(form(&fs, inos["g"]), 0);
    eprintln!("sf_to_leaf_and_back: leaf after {i} attrs");
    finish(fs, &img, &s, &inos, &m);
}

fn remote_values(name: &str, opts: &[&str]) {
    if kernel_tests_disabled() {
        return;
    }
    let (s, img, fs, inos) = start(name, opts);
    let mut m = Model::new();
    let sizes = [300usize, 1000, 2999, 3000, 3100, 5000, 20_000, 65_536];
    for (k, &n) in sizes.iter().enumerate() {
        set(
            &fs,
            &mut m,
            &inos,
            "f",
            &format!("user.v{k}"),
            &pattern(k as u64, n),
        );
        set(
            &fs,
            &mut m,
            &inos,
            "d",
            &format!("trusted.v{k}"),
            &pattern(100 + k as u64, n),
        );
    }
    finish(fs, &img, &s, &inos, &m);
    let fs = rw(&img);
    // Replace with other sizes (remote <-> local), remove some.
    for (k, &n) in sizes.iter().enumerate() {
        let other = sizes[(k + 3) % sizes.len()];
        set(
            &fs,
            &mut m,
            &inos,
            "f",
            &format!("user.v{k}"),
            &pattern(7 + k as u64, other),
        );
        let _ = n;
    }
    remove(&fs, &mut m, &inos, "f", "user.v7");
    remove(&fs, &mut m, &inos, "d", "trusted.v6");
    remove(&fs, &mut m, &inos, "d", "trusted.v0");
    finish(fs, &img, &s, &inos, &m);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn leaf_remote_values() {
    remote_values("attr_remote", &[]);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn leaf_remote_values_1k_blocks_rmapbt() {
    remote_values("attr_remote_1k", &["-b", "size=1024", "-m", "rmapbt=1"]);
}

fn grow_shrink(name: &str, opts: &[&str], n: u64, namelen: usize, want_levels: usize) {
    if kernel_tests_disabled() {
        return;
    }
    let (s, img, fs, inos) = start(name, opts);
    let mut m = Model::new();
    let f = inos["f"];
    let attr_name = |i: u64| {
        let mut s = format!("user.n{i:06}-");
        while s.len() < namelen {
            s.push((b'a' + (i % 26) as u8) as char);
        }
        s
    };
    for i in 0..n {
        set(
            &fs,
            &mut m,
            &inos,
            "f",
            &attr_name(i),
            &pattern(i, (i % 90) as usize),
        );
    }
    let top = form(&fs, f);
    assert!(top >= 2 + want_levels, "form {top} after {n} attrs");
    finish(fs, &img, &s, &inos, &m);
    let fs = rw(&img);
    // Remove in a scattered order; the tree shrinks back.
    let mut order: Vec<u64> = (0..n).collect();
    order.sort_by_key(|i| i.wrapping_mul(0x9e37_79b9) % 1_000_003);
    for &i in order.iter().take(n as usize - 3) {
        remove(&fs, &mut m, &inos, "f", &attr_name(i));
    }
    let low = form(&fs, f);
    assert!(low <= 2, "form {low} with 3 attrs left");
    eprintln!("{name}: {n} attrs reached form {top}, back to {low}");
    finish(fs, &img, &s, &inos, &m);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn leaf_to_node_and_back() {
    grow_shrink("attr_node", &[], 400, 40, 1);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_many_levels_1k_blocks() {
    grow_shrink("attr_node_deep", &["-b", "size=1024"], 1100, 40, 2);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_hash_collisions() {
    let (s, img, fs, inos) = start("attr_coll", &["-b", "size=1024"]);
    let mut m = Model::new();
    // Chunks of 4 bytes with equal hash contributions: 64 names per
    // group share one hash, more than a 1 KiB leaf holds.
    let base = [b'a', b'b', b'c', b'd'];
    let variants: Vec<[u8; 4]> = (0..8u8)
        .map(|t| {
            let mut c = base;
            for k in 0..3 {
                if t & (1 << k) != 0 {
                    c[k] ^= 1;
                    c[k + 1] ^= 0x80;
                }
            }
            c
        })
        .collect();
    let mut names = Vec::new();
    for g in 0..6 {
        for a in &variants {
            for b in &variants {
                let mut n = b"user.".to_vec();
                n.extend_from_slice(a);
                n.extend_from_slice(b);
                n.extend_from_slice(format!("-{g}").as_bytes());
                names.push(n);
            }
        }
    }
    let f = inos["f"];
    for (i, n) in names.iter().enumerate() {
        let v = pattern(i as u64, 20);
        fs.setxattr(f, n, &v, XattrSet::Create).unwrap();
        m.entry("f".into()).or_default().insert(n.clone(), v);
    }
    for (i, n) in names.iter().enumerate() {
        if i % 3 == 0 {
            fs.removexattr(f, n).unwrap();
            m.get_mut("f").unwrap().remove(n);
        } else if i % 3 == 1 {
            fs.setxattr(f, n, b"replaced", XattrSet::Replace).unwrap();
            m.get_mut("f")
                .unwrap()
                .insert(n.clone(), b"replaced".to_vec());
        }
    }
    assert!(form(&fs, f) >= 3);
    finish(fs, &img, &s, &inos, &m);
}

/// The kernel makes shortform, leaf, node and remote attrs; rxfs reads,
/// changes and removes them.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kernel_made_forms_modified() {
    let (s, img) = setup("attr_kmade", &[]);
    let mnt = s.path("k");
    let mut m = Model::new();
    {
        let k = KernelMount::new(&img, &mnt, "");
        for (p, n, size) in [
            ("sf", 3, 10),
            ("leaf", 20, 100),
            ("node", 300, 60),
            ("rmt", 4, 9000),
        ] {
            std::fs::write(mnt.join(p), b"").unwrap();
            for i in 0..n {
                let name = format!("user.kernel-{i:04}");
                let v = pattern(i as u64, size);
                set_xattr(&mnt.join(p), &name, &v);
                m.entry(p.into()).or_default().insert(name.into_bytes(), v);
            }
        }
        k.umount();
    }
    let fs = rw(&img);
    let root = fs.root_ino();
    let dip = fs.iget(root).unwrap();
    let mut inos = BTreeMap::new();
    for p in ["sf", "leaf", "node", "rmt"] {
        inos.insert(p.to_string(), fs.lookup(&dip, p.as_bytes()).unwrap());
    }
    assert_eq!(form(&fs, inos["sf"]), 1);
    assert_eq!(form(&fs, inos["leaf"]), 2);
    assert!(form(&fs, inos["node"]) >= 3);
    for (p, want) in &m {
        assert!(
            rxfs_xattrs(&fs, inos[p]) == *want,
            "{p}: rxfs reads the kernel's attrs"
        );
    }
    for p in ["sf", "leaf", "node", "rmt"] {
        let names: Vec<Vec<u8>> = m[p].keys().cloned().collect();
        for (i, n) in names.iter().enumerate() {
            let n = String::from_utf8(n.clone()).unwrap();
            match i % 3 {
                0 => remove(&fs, &mut m, &inos, p, &n),
                1 => set(&fs, &mut m, &inos, p, &n, &pattern(i as u64 + 50, 5000)),
                _ => {}
            }
        }
        set(&fs, &mut m, &inos, p, "trusted.rxfs", b"added by rxfs");
    }
    finish(fs, &img, &s, &inos, &m);
}

/// Files whose data fork fills the literal area (many extents, a bmbt)
/// get attrs: the data fork gives room (extents -> bmbt).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn data_fork_needs_room() {
    let (s, img, fs, inos) = start("attr_room", &[]);
    let f = inos["f"];
    // 19 separate extents fill most of a 512-byte inode's literal area.
    let opts = rxfs::MountOptions {
        allocsize: Some(0),
        ..Default::default()
    };
    fs.unmount().unwrap();
    drop(fs);
    let fs = Filesystem::open_path(&img, None, opts).unwrap();
    for i in 0..19u64 {
        fs.write(f, i * 2 * 4096, &pattern(i, 4096)).unwrap();
    }
    let before = fs.iget(f).unwrap().core.nextents;
    let mut m = Model::new();
    for i in 0..30 {
        set(
            &fs,
            &mut m,
            &inos,
            "f",
            &format!("user.room{i:02}"),
            &pattern(i, 30),
        );
    }
    let core = fs.iget(f).unwrap().core.clone();
    eprintln!(
        "data_fork_needs_room: {before} extents, data fork format {} now",
        core.format
    );
    let data: Vec<u8> = (0..19u64)
        .flat_map(|i| {
            let mut v = pattern(i, 4096);
            if i < 18 {
                v.extend(vec![0; 4096]);
            }
            v
        })
        .collect();
    let mut buf = vec![0u8; data.len() + 10];
    let n = fs.read_file(&fs.iget(f).unwrap(), 0, &mut buf).unwrap();
    assert!(n == data.len() && buf[..n] == data[..], "file data changed");
    finish(fs, &img, &s, &inos, &m);
}

fn random_mix(name: &str, opts: &[&str], seed: u64, ops: usize) {
    if kernel_tests_disabled() {
        return;
    }
    let (s, img, fs, inos) = start(name, opts);
    let mut m = Model::new();
    let mut x = seed | 1;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let paths = ["f", "g", "d"];
    for op in 0..ops {
        let p = paths[rnd(3) as usize];
        let ns = ["user.", "trusted.", "security."][rnd(3) as usize];
        let n = match rnd(4) {
            0 => format!("{ns}k{}", rnd(6)),
            1 | 2 => format!("{ns}many-{:04}", rnd(400)),
            _ => format!(
                "{ns}long-{}-{}",
                rnd(30),
                "y".repeat(150 + rnd(80) as usize)
            ),
        };
        let len = match rnd(10) {
            0..=5 => rnd(80),
            6..=8 => rnd(3000),
            _ => rnd(65_537),
        } as usize;
        let cur = m.get(p).and_then(|x| x.get(n.as_bytes())).is_some();
        match rnd(10) {
            0..=6 => {
                let how = [XattrSet::Any, XattrSet::Create, XattrSet::Replace][rnd(3) as usize];
                let v = pattern(op as u64, len);
                let r = fs.setxattr(inos[p], n.as_bytes(), &v, how);
                match (how, cur, r) {
                    (XattrSet::Create, true, Err(Error::Exists)) => {}
                    (XattrSet::Replace, false, Err(Error::NoAttr)) => {}
                    (XattrSet::Create, false, Ok(()))
                    | (XattrSet::Replace, true, Ok(()))
                    | (XattrSet::Any, _, Ok(())) => {
                        m.entry(p.into()).or_default().insert(n.into_bytes(), v);
                    }
                    (h, c, r) => panic!("op {op}: set {p} {n} {h:?} present={c}: {r:?}"),
                }
            }
            _ => match (cur, fs.removexattr(inos[p], n.as_bytes())) {
                (true, Ok(())) => {
                    m.get_mut(p).unwrap().remove(n.as_bytes());
                }
                (false, Err(Error::NoAttr)) => {}
                (c, r) => panic!("op {op}: remove {p} {n} present={c}: {r:?}"),
            },
        }
        if op % 500 == 499 {
            for (p, want) in &m {
                assert!(rxfs_xattrs(&fs, inos[p]) == *want, "op {op}: {p} differs");
            }
        }
    }
    let forms: Vec<usize> = paths.iter().map(|p| form(&fs, inos[*p])).collect();
    eprintln!("{name}: {ops} ops, final forms {forms:?}");
    finish(fs, &img, &s, &inos, &m);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_mix_defaults() {
    random_mix("attr_rnd", &[], 11, 2000);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_mix_1k_blocks_rmapbt() {
    random_mix(
        "attr_rnd_1k",
        &["-b", "size=1024", "-m", "rmapbt=1"],
        12,
        2000,
    );
}

/// A Linux-format POSIX ACL xattr value: (tag, perm, id) entries.
fn acl_value(ents: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in ents {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

fn getfacl(p: &Path) -> String {
    let out = std::process::Command::new("getfacl")
        .args(["-n", "-c", "-p"])
        .arg(p)
        .output()
        .unwrap();
    assert!(out.status.success(), "getfacl {p:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// POSIX ACLs through the library: access ACLs set the mode, default ACLs
/// only on directories, invalid ACLs refused with the kernel's errors,
/// default ACLs inherited by new files and directories (the umask then
/// ignored), chmod carried into the ACL mask; the kernel reads them back.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn acl_set_inherit_chmod() {
    require_tools(&["getfacl"]);
    const UO: u16 = 1;
    const U: u16 = 2;
    const GO: u16 = 4;
    const M: u16 = 0x10;
    const O: u16 = 0x20;
    const ID: u32 = u32::MAX;
    let (s, img, fs, inos) = start("attr_acl", &[]);
    let (f, d) = (inos["f"], inos["d"]);
    let access = acl_value(&[
        (UO, 6, ID),
        (U, 4, 1000),
        (GO, 4, ID),
        (M, 4, ID),
        (O, 0, ID),
    ]);
    fs.setxattr(f, b"system.posix_acl_access", &access, XattrSet::Any)
        .unwrap();
    assert_eq!(fs.iget(f).unwrap().core.mode & 0o777, 0o640);
    // Invalid: a named user without a mask; a default ACL on a file.
    let bad = acl_value(&[(UO, 6, ID), (U, 4, 1000), (GO, 4, ID), (O, 0, ID)]);
    assert!(matches!(
        fs.setxattr(inos["g"], b"system.posix_acl_access", &bad, XattrSet::Any),
        Err(Error::Invalid(_))
    ));
    let def = acl_value(&[
        (UO, 7, ID),
        (U, 7, 1000),
        (GO, 5, ID),
        (M, 7, ID),
        (O, 0, ID),
    ]);
    assert!(matches!(
        fs.setxattr(inos["g"], b"system.posix_acl_default", &def, XattrSet::Any),
        Err(Error::Access)
    ));
    fs.setxattr(d, b"system.posix_acl_default", &def, XattrSet::Any)
        .unwrap();
    let mut a = CreateArgs::root(0o100666);
    a.umask = 0o077;
    let f2 = fs.create(d, b"f2", &a).unwrap();
    let mut a = CreateArgs::root(0o40777);
    a.umask = 0o077;
    let sub = fs.mkdir(d, b"sub", &a).unwrap();
    let mut a = CreateArgs::root(0o100666);
    a.umask = 0o027;
    let plain = fs.create(fs.root_ino(), b"plain", &a).unwrap();
    assert_eq!(
        plain.core.mode & 0o777,
        0o640,
        "no default ACL: the umask applies"
    );
    assert_eq!(
        f2.core.mode & 0o777,
        0o660,
        "default ACL: masked by it, no umask"
    );
    assert_eq!(sub.core.mode & 0o777, 0o770);
    // chmod: the mask follows the group bits.
    let set = rxfs::bmap::data::SetAttr {
        mode: Some(0o600),
        ..Default::default()
    };
    fs.setattr(f, &set).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    if let Err(e) = repair(&img) {
        panic!("{e}");
    }
    let mnt = s.path("mnt");
    let k = KernelMount::new(&img, &mnt, "ro");
    let fa = getfacl(&mnt.join("f"));
    let f2a = getfacl(&mnt.join("d/f2"));
    let suba = getfacl(&mnt.join("d/sub"));
    k.umount();
    assert!(
        fa.contains("user:1000:r--\t#effective:---") && fa.contains("mask::---"),
        "{fa}"
    );
    assert!(
        f2a.contains("user:1000:rwx\t#effective:rw-") && f2a.contains("mask::rw-"),
        "{f2a}"
    );
    assert!(
        suba.contains("default:user:1000:rwx") && suba.contains("user:1000:rwx"),
        "{suba}"
    );
}
