//! Crash consistency of namespace operations through a read-write mount:
//! create / mkdir / unlink / rmdir on shortform and block directories
//! (conversions both ways, directory blocks freed through deferred frees)
//! on a device that records every write and flush. At sampled power-cut
//! points the kernel recovers the image; the tree it then shows must be
//! exactly the model after some prefix of the operations, at least up to
//! the last log force before the cut, and `xfs_repair -n` must be clean.

mod common;
mod dirop_support;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use dirop_support::Rng;
use rxfs::bdev::{for_each_crash_image, sample_points, BlockDevice, CrashDevice, CrashMode};
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::{Filesystem, MountOptions};

/// The whole tree: directory path -> its entries (name, inode).
type Snapshot = BTreeMap<PathBuf, BTreeSet<(Vec<u8>, u64)>>;

/// Walk a mounted tree (directories only recursed).
fn walk(root: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let mut ents = BTreeSet::new();
        for e in std::fs::read_dir(root.join(&rel)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().as_bytes().to_vec();
            if e.file_type().unwrap().is_dir() {
                todo.push(rel.join(e.file_name()));
            }
            ents.insert((name, e.ino()));
        }
        out.insert(rel, ents);
    }
    out
}

/// A model directory: path and entries (name -> (inode, is_dir)).
struct Dir {
    path: PathBuf,
    ents: BTreeMap<Vec<u8>, (u64, bool)>,
}

fn snapshot(dirs: &BTreeMap<u64, Dir>) -> Snapshot {
    dirs.values()
        .map(|d| {
            (
                d.path.clone(),
                d.ents.iter().map(|(n, (i, _))| (n.clone(), *i)).collect(),
            )
        })
        .collect()
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn namespace_ops_survive_power_cuts() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("dirop-crash");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let mut dirs: BTreeMap<u64, Dir> = BTreeMap::new();
    {
        let m = KernelMount::new(&img, &mnt, "");
        std::fs::create_dir(mnt.join("b")).unwrap();
        for i in 0..40 {
            std::fs::write(mnt.join(format!("b/kernel-file-{i:04}")), b"x").unwrap();
        }
        std::fs::create_dir(mnt.join("d")).unwrap();
        let snap = walk(&mnt);
        for (path, ents) in &snap {
            let ino = std::fs::metadata(mnt.join(path)).unwrap().ino();
            let ents = ents
                .iter()
                .map(|(n, i)| {
                    let p = mnt.join(path).join(std::ffi::OsStr::from_bytes(n));
                    (n.clone(), (*i, p.is_dir()))
                })
                .collect();
            dirs.insert(
                ino,
                Dir {
                    path: path.clone(),
                    ents,
                },
            );
        }
        m.umount();
    }
    let dev = Arc::new(CrashDevice::new(std::fs::read(&img).unwrap(), 1 << 30));
    let fs = Filesystem::open(
        dev.clone() as Arc<dyn BlockDevice>,
        None,
        MountOptions {
            read_only: false,
            ..Default::default()
        },
    )
    .unwrap();
    let mut rng = Rng::new(31);
    // Model after each operation, and (event count, snapshot index) at
    // each log force.
    let mut snaps = vec![snapshot(&dirs)];
    let mut forced: Vec<(usize, usize)> = Vec::new();
    let args = |mode| CreateArgs {
        mode,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    };
    let b = *dirs
        .iter()
        .find(|(_, d)| d.path == Path::new("b"))
        .unwrap()
        .0;
    assert_eq!(dirop_support::form_of(&fs, b), dirop_support::Form::Block);
    let mut b_forms = BTreeSet::new();
    for step in 0..160 {
        let keys: Vec<u64> = dirs.keys().copied().collect();
        // Removals in the block directory "b" first (it shrinks to
        // shortform), then anything anywhere.
        let d = if step < 60 && rng.below(4) != 0 {
            b
        } else {
            keys[rng.below(keys.len() as u64) as usize]
        };
        let op = if step < 60 && d == b {
            0
        } else {
            rng.below(if step < 100 { 6 } else { 3 })
        };
        match op {
            // Remove (files first; empty directories).
            0..=2 => {
                let Some((name, (ino, is_dir))) = dirs[&d]
                    .ents
                    .iter()
                    .find(|(_, (i, dir))| !dir || dirs[i].ents.is_empty())
                    .map(|(n, v)| (n.clone(), *v))
                else {
                    continue;
                };
                if is_dir {
                    fs.rmdir(Ino(d), &name).unwrap();
                    dirs.remove(&ino);
                } else {
                    fs.unlink(Ino(d), &name).unwrap();
                }
                dirs.get_mut(&d).unwrap().ents.remove(&name);
            }
            3 => {
                let name = rng.name(1, 12);
                if dirs[&d].ents.contains_key(&name) {
                    continue;
                }
                let ip = fs.mkdir(Ino(d), &name, &args(0o040755)).unwrap();
                let path = dirs[&d].path.join(std::ffi::OsStr::from_bytes(&name));
                dirs.get_mut(&d)
                    .unwrap()
                    .ents
                    .insert(name, (ip.ino.0, true));
                dirs.insert(
                    ip.ino.0,
                    Dir {
                        path,
                        ents: BTreeMap::new(),
                    },
                );
            }
            _ => {
                let name = rng.name(8, 30);
                if dirs[&d].ents.contains_key(&name) {
                    continue;
                }
                let ip = fs.create(Ino(d), &name, &args(0o100644)).unwrap();
                dirs.get_mut(&d)
                    .unwrap()
                    .ents
                    .insert(name, (ip.ino.0, false));
            }
        }
        if dirs.contains_key(&b) {
            b_forms.insert(format!("{:?}", dirop_support::form_of(&fs, b)));
        }
        snaps.push(snapshot(&dirs));
        if rng.below(5) == 0 {
            fs.log_force().unwrap();
            forced.push((dev.event_count(), snaps.len() - 1));
        }
    }
    assert!(forced.len() >= 10, "only {} forces", forced.len());
    assert_eq!(b_forms.len(), 2, "b never changed form: {b_forms:?}");
    fs.abandon();
    drop(fs);

    let points = sample_points(&dev.crash_points(), 8, 5);
    let crash = s.path("crash");
    let cm = s.path("cmnt");
    let mut checked = 0;
    let mut seen = BTreeSet::new();
    for_each_crash_image(
        &dev,
        &points,
        &[CrashMode::Subset, CrashMode::Torn],
        9,
        |ci| {
            std::fs::write(&crash, ci.to_vec()).unwrap();
            let m = KernelMount::new(&crash, &cm, "");
            let got = walk(&cm);
            m.umount();
            let durable = forced
                .iter()
                .filter(|(at, _)| *at <= ci.point)
                .map(|(_, k)| *k)
                .max()
                .unwrap_or(0);
            let k = (durable..snaps.len()).find(|&k| snaps[k] == got);
            assert!(
                k.is_some(),
                "{ci}: the recovered tree is no state at or after operation {durable}"
            );
            seen.insert(k.unwrap());
            let out = std::process::Command::new("xfs_repair")
                .args(["-n", crash.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{ci}: xfs_repair -n: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            checked += 1;
        },
    )
    .unwrap();
    eprintln!(
        "crash: {checked} images, recovered states {seen:?} of {}",
        snaps.len() - 1
    );
    assert_eq!(checked, points.len() * 2);
    assert!(seen.len() >= 3, "crash points too alike: {seen:?}");
}
