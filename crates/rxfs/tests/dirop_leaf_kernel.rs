//! Leaf and node directories on the write path, through the read-write
//! `Filesystem` API, against the kernel oracle: grow directories through
//! shortform -> block -> leaf -> node, shrink them back, random mixes of
//! add/remove/rename against a model, long names, hash collisions. After
//! each scenario: rxfs's own read path agrees with the model, unmount,
//! `xfs_repair -n` exit 0, kernel loop mount lists exactly the model (names
//! and inode numbers), `xfs_repair -n` again.

mod common;
#[allow(dead_code)]
mod ns_support;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::*;
use ns_support::*;
use rxfs::dir::read::LEAF_SEARCHES_IN_PLACE;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::ops_rename::RenameFlags;
use rxfs::types::Ino;
use rxfs::Filesystem;

/// Model: directory name (relative to root) -> entries (name -> inode).
type Model = BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, u64>>;

/// Deterministic xorshift generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// rxfs's read path lists `dir` exactly as the model says.
fn rxfs_listing(fs: &Arc<Filesystem>, dir: Ino) -> BTreeMap<Vec<u8>, u64> {
    let ip = fs.iget(dir).unwrap();
    let mut out = BTreeMap::new();
    fs.readdir(&ip, 0, &mut |e| {
        if e.name != b"." && e.name != b".." {
            out.insert(e.name.clone(), e.ino.0);
        }
        true
    })
    .unwrap();
    out
}

fn kernel_listing(p: &Path) -> BTreeMap<Vec<u8>, u64> {
    std::fs::read_dir(p)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().as_bytes().to_vec(),
                e.metadata().unwrap().ino(),
            )
        })
        .collect()
}

/// Unmount, repair, kernel listing of every directory of the model.
fn finish(fs: Arc<Filesystem>, img: &Path, s: &Scratch, model: &Model) {
    fs.unmount().unwrap();
    drop(fs);
    if let Err(e) = repair(img) {
        panic!("{e}");
    }
    let mnt = s.path("mnt");
    let m = KernelMount::new(img, &mnt, "");
    for (d, want) in model {
        let p = mnt.join(std::ffi::OsStr::from_bytes(d));
        let got = kernel_listing(&p);
        if &got != want {
            m.umount();
            panic!(
                "kernel listing of {:?}: {} entries, model {}",
                String::from_utf8_lossy(d),
                got.len(),
                want.len()
            );
        }
    }
    m.umount();
    if let Err(e) = repair(img) {
        panic!("after the kernel mount: {e}");
    }
}

/// `fs.lookup` of `name` in `dir` finds `want` (None: not found).
fn check_lookup(fs: &Arc<Filesystem>, dir: Ino, name: &[u8], want: Option<u64>, step: usize) {
    let ip = fs.iget(dir).unwrap();
    match (fs.lookup(&ip, name), want) {
        (Ok(ino), Some(w)) => assert_eq!(ino.0, w, "step {step}: lookup {name:?}"),
        (Err(rxfs::Error::NotFound), None) => {}
        (got, want) => panic!("step {step}: lookup {name:?}: {got:?}, model {want:?}"),
    }
}

fn name_of(i: u64, long: bool) -> Vec<u8> {
    if long {
        let mut n = format!("{i:08}-").into_bytes();
        n.resize(200 + (i % 56) as usize, b'x' + (i % 3) as u8);
        n
    } else {
        format!("entry-{i:06}").into_bytes()
    }
}

/// Grow one directory to `n` hard links (cheap entries), checking lookups
/// through rxfs's read path, then remove them all (when `shrink`).
fn grow_shrink(name: &str, opts: &[&str], n: u64, long: bool, shrink: bool) {
    if kernel_tests_disabled() {
        return;
    }
    let (s, img) = setup(name, opts);
    let fs = rw(&img);
    let root = fs.root_ino();
    let d = fs
        .mkdir(root, b"d", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let f = fs
        .create(root, b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    let mut model: Model = BTreeMap::new();
    let mut m = BTreeMap::new();
    for i in 0..n {
        let nm = name_of(i, long);
        fs.link(f, d, &nm)
            .unwrap_or_else(|e| panic!("link {i}: {e}"));
        m.insert(nm, f.0);
    }
    assert_eq!(rxfs_listing(&fs, d), m);
    if shrink {
        // Remove in a scrambled order, down to a few entries.
        let mut names: Vec<Vec<u8>> = m.keys().cloned().collect();
        let mut r = Rng(n | 1);
        for i in (1..names.len()).rev() {
            names.swap(i, r.below(i as u64 + 1) as usize);
        }
        for nm in names.iter().skip(3) {
            fs.unlink(d, nm).unwrap();
            m.remove(nm);
        }
        assert_eq!(rxfs_listing(&fs, d), m);
    }
    model.insert(b"d".to_vec(), m);
    let mut rootm = BTreeMap::new();
    rootm.insert(b"d".to_vec(), d.0);
    rootm.insert(b"f".to_vec(), f.0);
    model.insert(Vec::new(), rootm);
    finish(fs, &img, &s, &model);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn leaf_form_block_to_leaf_and_back() {
    grow_shrink("dleaf_leaf", &[], 300, false, true);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn leaf_form_grow_only() {
    grow_shrink("dleaf_leafgrow", &[], 300, false, false);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_grow_and_shrink_4k() {
    grow_shrink("dleaf_node4k", &[], 3000, false, true);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_grow_only_4k() {
    grow_shrink("dleaf_node4kg", &[], 3000, false, false);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_1k_blocks_4k_dirblocks() {
    grow_shrink(
        "dleaf_node1k",
        &["-b", "size=1024", "-n", "size=4096"],
        3000,
        false,
        true,
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_1k_blocks_deep() {
    grow_shrink("dleaf_node1kd", &["-b", "size=1024"], 4000, false, false);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_8k_dirblocks() {
    grow_shrink("dleaf_node8k", &["-n", "size=8192"], 3000, false, true);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_64k_dirblocks() {
    grow_shrink("dleaf_node64k", &["-n", "size=65536"], 4000, false, true);
}

/// rmapbt: every directory block allocated and freed through the leaf and
/// node forms has exactly one reverse mapping (xfs_repair checks them).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_rmapbt_grow_and_shrink() {
    grow_shrink("dleaf_rmap", &["-m", "rmapbt=1"], 3000, false, true);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_rmapbt_8k_dirblocks() {
    grow_shrink(
        "dleaf_rmap8k",
        &["-m", "rmapbt=1", "-n", "size=8192"],
        3000,
        false,
        true,
    );
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_long_names() {
    grow_shrink("dleaf_long", &[], 1500, true, true);
}

/// Random add/remove/rename mixes across two directories against a model.
fn random_mix(name: &str, opts: &[&str], seed: u64, ops: usize) {
    if kernel_tests_disabled() {
        return;
    }
    let (s, img) = setup(name, opts);
    let fs = rw(&img);
    let root = fs.root_ino();
    let f = fs
        .create(root, b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    let dirs = [
        fs.mkdir(root, b"a", &CreateArgs::root(0o40755))
            .unwrap()
            .ino,
        fs.mkdir(root, b"b", &CreateArgs::root(0o40755))
            .unwrap()
            .ino,
    ];
    let mut m: [BTreeMap<Vec<u8>, u64>; 2] = [BTreeMap::new(), BTreeMap::new()];
    let mut r = Rng(seed);
    let mut nextino = 0u64;
    for step in 0..ops {
        let k = r.below(2) as usize;
        let op = r.below(10);
        let len = r.below(4);
        let mk = |r: &mut Rng| -> Vec<u8> {
            let i = r.below(4000);
            match len {
                0 => format!("n{i}").into_bytes(),
                1 => name_of(i, true),
                _ => format!("file-{i:05}-{}", "z".repeat((i % 40) as usize)).into_bytes(),
            }
        };
        // The read path's lookup (blocks from the buffer cache, searched
        // in place once checked) agrees with the model between changes.
        if step % 5 == 0 {
            let nm = if r.below(2) == 0 && !m[k].is_empty() {
                let i = r.below(m[k].len() as u64) as usize;
                m[k].keys().nth(i).unwrap().clone()
            } else {
                mk(&mut r)
            };
            check_lookup(&fs, dirs[k], &nm, m[k].get(&nm).copied(), step);
        }
        if op < 6 || m[k].is_empty() {
            let nm = mk(&mut r);
            let res = if r.below(8) == 0 {
                nextino += 1;
                fs.create(dirs[k], &nm, &CreateArgs::root(0o100644))
                    .map(|ip| ip.ino)
            } else {
                fs.link(f, dirs[k], &nm).map(|_| f)
            };
            match res {
                Ok(ino) => {
                    assert!(m[k].insert(nm, ino.0).is_none(), "step {step}");
                }
                Err(rxfs::Error::Exists) => assert!(m[k].contains_key(&nm)),
                Err(e) => panic!("step {step}: add: {e}"),
            }
        } else if op < 9 {
            let i = r.below(m[k].len() as u64) as usize;
            let nm = m[k].keys().nth(i).unwrap().clone();
            fs.unlink(dirs[k], &nm)
                .unwrap_or_else(|e| panic!("step {step}: unlink: {e}"));
            m[k].remove(&nm);
        } else {
            let i = r.below(m[k].len() as u64) as usize;
            let nm = m[k].keys().nth(i).unwrap().clone();
            let k2 = r.below(2) as usize;
            let to = mk(&mut r);
            fs.rename(dirs[k], &nm, dirs[k2], &to, RenameFlags::default())
                .unwrap_or_else(|e| panic!("step {step}: rename: {e}"));
            // Renaming onto another link of the same inode changes nothing
            // (POSIX).
            let ino = m[k][&nm];
            if m[k2].get(&to) != Some(&ino) {
                m[k].remove(&nm);
                m[k2].insert(to, ino);
            }
        }
    }
    for k in 0..2 {
        let got = rxfs_listing(&fs, dirs[k]);
        let extra: Vec<_> = got
            .iter()
            .filter(|(n, i)| m[k].get(*n) != Some(i))
            .collect();
        let missing: Vec<_> = m[k]
            .iter()
            .filter(|(n, i)| got.get(*n) != Some(i))
            .collect();
        assert!(
            extra.is_empty() && missing.is_empty(),
            "rxfs listing of dir {k}: extra {extra:?}, missing {missing:?}"
        );
    }
    let _ = nextino;
    let before = LEAF_SEARCHES_IN_PLACE.load(Ordering::Relaxed);
    for k in 0..2 {
        for (nm, &ino) in &m[k] {
            check_lookup(&fs, dirs[k], nm, Some(ino), ops);
            // An absent name of the same hash run's neighbourhood.
            let mut other = nm.clone();
            if other.len() == 255 {
                other.pop();
            }
            other.push(b'~');
            check_lookup(&fs, dirs[k], &other, m[k].get(&other).copied(), ops);
        }
    }
    // Leaf blocks checked once are searched in place after that.
    assert!(
        LEAF_SEARCHES_IN_PLACE.load(Ordering::Relaxed) > before,
        "no leaf block was searched in place"
    );
    let mut model: Model = BTreeMap::new();
    model.insert(b"a".to_vec(), m[0].clone());
    model.insert(b"b".to_vec(), m[1].clone());
    finish(fs, &img, &s, &model);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_mix_leaf_node_4k() {
    random_mix("dleaf_mix4k", &[], 0x1234_5678, 6000);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn random_mix_leaf_node_1k_4k_dirblocks() {
    random_mix(
        "dleaf_mix1k",
        &["-b", "size=1024", "-n", "size=4096"],
        0x9e37_79b9,
        6000,
    );
}

/// Names sharing one hash: chunks of 4 bytes whose hash contributions are
/// equal (toggling bit 0 of one byte and bit 7 of the next leaves the hash
/// unchanged), so every choice of two chunks plus a common suffix gives 64
/// names with the same hash; groups span leafn blocks with 1 KiB blocks.
fn collision_group(suffix: &[u8]) -> Vec<Vec<u8>> {
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
    let mut out = Vec::new();
    for a in &variants {
        for b in &variants {
            let mut n = a.to_vec();
            n.extend_from_slice(b);
            n.extend_from_slice(suffix);
            out.push(n);
        }
    }
    out
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_hash_collisions() {
    let (s, img) = setup("dleaf_coll", &["-b", "size=1024", "-n", "size=4096"]);
    let fs = rw(&img);
    let root = fs.root_ino();
    let d = fs
        .mkdir(root, b"d", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let f = fs
        .create(root, b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    let mut m = BTreeMap::new();
    let mut all = Vec::new();
    for g in 0..24 {
        let names = collision_group(format!("-{g:03}").as_bytes());
        let h = rxfs::format::da::hashname(&names[0]);
        assert!(names.iter().all(|n| rxfs::format::da::hashname(n) == h));
        all.extend(names);
    }
    for nm in &all {
        fs.link(f, d, nm).unwrap();
        m.insert(nm.clone(), f.0);
    }
    // Every name found through its (shared) hash.
    let dip = fs.iget(d).unwrap();
    for nm in &all {
        assert_eq!(fs.lookup(&dip, nm).unwrap(), f);
    }
    // Remove every third, rename every fifth of the rest.
    for (i, nm) in all.iter().enumerate() {
        if i % 3 == 0 {
            fs.unlink(d, nm).unwrap();
            m.remove(nm);
        } else if i % 5 == 0 {
            let mut to = nm.clone();
            to.extend_from_slice(b".r");
            fs.rename(d, nm, d, &to, RenameFlags::default()).unwrap();
            m.remove(nm);
            m.insert(to, f.0);
        }
    }
    assert_eq!(rxfs_listing(&fs, d), m);
    let mut model: Model = BTreeMap::new();
    model.insert(b"d".to_vec(), m);
    finish(fs, &img, &s, &model);
}

/// A large directory made by the kernel (leaf1/leafn blocks with stale
/// entries, free index), then changed by rxfs: adds, removes, renames.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_kernel_made_directory_modified() {
    let (s, img) = setup("dleaf_kmade", &[]);
    let mnt = s.path("mnt");
    let mut m = BTreeMap::new();
    {
        let k = KernelMount::new(&img, &mnt, "");
        let dir = mnt.join("big");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(mnt.join("f"), b"x").unwrap();
        for i in 0..3000 {
            std::fs::hard_link(mnt.join("f"), dir.join(format!("kernel-{i:05}"))).unwrap();
        }
        for i in (0..3000).step_by(7) {
            std::fs::remove_file(dir.join(format!("kernel-{i:05}"))).unwrap();
        }
        let ino = std::fs::metadata(mnt.join("f")).unwrap().ino();
        for i in 0..3000 {
            if i % 7 != 0 {
                m.insert(format!("kernel-{i:05}").into_bytes(), ino);
            }
        }
        k.umount();
    }
    let fs = rw(&img);
    let root = fs.root_ino();
    let dip = fs.iget(root).unwrap();
    let d = fs.lookup(&dip, b"big").unwrap();
    let f = fs.lookup(&dip, b"f").unwrap();
    assert_eq!(rxfs_listing(&fs, d), m);
    for i in 0..3000 {
        let nm = format!("kernel-{i:05}").into_bytes();
        match i % 4 {
            0 if m.remove(&nm).is_some() => fs.unlink(d, &nm).unwrap(),
            1 => {
                let to = format!("rxfs-{i:05}-renamed").into_bytes();
                if let Some(ino) = m.remove(&nm) {
                    fs.rename(d, &nm, d, &to, RenameFlags::default()).unwrap();
                    m.insert(to, ino);
                }
            }
            _ => {}
        }
        if i % 3 == 0 {
            let nm = format!("rxfs-new-{i:05}").into_bytes();
            fs.link(f, d, &nm).unwrap();
            m.insert(nm, f.0);
        }
    }
    assert_eq!(rxfs_listing(&fs, d), m);
    let mut model: Model = BTreeMap::new();
    model.insert(b"big".to_vec(), m);
    finish(fs, &img, &s, &model);
}

/// A directory whose blocks are scattered (each new directory block is
/// followed on disk by a block of another file) until its data fork turns
/// into a bmbt (format BTREE); lookups, then removal of most entries (the
/// fork shrinks back to extents), kernel oracle at the end.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn node_form_btree_data_fork() {
    let (s, img) = setup("dleaf_bmbt", &["-b", "size=1024"]);
    // No speculative preallocation: the other file takes exactly the
    // block after each new directory block.
    let opts = rxfs::MountOptions {
        allocsize: Some(0),
        ..Default::default()
    };
    let fs = Filesystem::open_path(&img, None, opts).unwrap();
    let root = fs.root_ino();
    let d = fs
        .mkdir(root, b"d", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let f = fs
        .create(root, b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    let g = fs
        .create(root, b"g", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    let mut m = BTreeMap::new();
    let (mut i, mut gblocks, mut blocks) = (0u64, 0u64, 0u64);
    while fs.iget(d).unwrap().core.format != 3 {
        let nm = name_of(i, true);
        fs.link(f, d, &nm).unwrap();
        m.insert(nm, f.0);
        i += 1;
        let nb = fs.iget(d).unwrap().core.nblocks;
        if nb != blocks {
            blocks = nb;
            fs.write(g, gblocks * 1024, &pattern(gblocks, 1024))
                .unwrap();
            gblocks += 1;
        }
        assert!(i < 20_000, "the directory fork never became a btree");
    }
    // Grow some more as a btree, then look everything up.
    for _ in 0..500 {
        let nm = name_of(i, true);
        fs.link(f, d, &nm).unwrap();
        m.insert(nm, f.0);
        i += 1;
    }
    let dip = fs.iget(d).unwrap();
    for nm in m.keys() {
        assert_eq!(fs.lookup(&dip, nm).unwrap(), f);
    }
    assert_eq!(rxfs_listing(&fs, d), m);
    // Keep the first few names added (they sit in the first data
    // blocks): every other block empties and is freed.
    let keep: std::collections::BTreeSet<Vec<u8>> = (0..8).map(|k| name_of(k, true)).collect();
    let names: Vec<Vec<u8>> = m.keys().cloned().collect();
    for nm in names.iter().filter(|n| !keep.contains(*n)) {
        fs.unlink(d, nm).unwrap();
        m.remove(nm);
    }
    let core = fs.iget(d).unwrap().core.clone();
    assert_ne!(
        core.format, 3,
        "still a btree with {} extents",
        core.nextents
    );
    assert_eq!(rxfs_listing(&fs, d), m);
    eprintln!("btree directory: {i} entries added, {gblocks} interleaved blocks");
    let mut model: Model = BTreeMap::new();
    model.insert(b"d".to_vec(), m);
    finish(fs, &img, &s, &model);
}
