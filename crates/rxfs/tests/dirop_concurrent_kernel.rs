//! Namespace operations from several threads through one read-write mount:
//! each thread creates, makes directories, unlinks and removes
//! directories in its own directory and in one shared directory (inode
//! locks, AGI/AGF lock order, new inode chunks, sf <-> block conversions
//! under contention). A watchdog turns a deadlock into a failure. After
//! unmount `xfs_repair -n` is clean and the kernel lists exactly what the
//! threads say they left.

mod common;
mod dirop_support;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use dirop_support::*;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::types::Ino;
use rxfs::{Error, Filesystem, MountOptions};

const THREADS: u64 = 4;
const OPS: usize = 150;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn dirop_concurrent_namespace_ops_kernel() {
    if !kernel_ok() {
        return;
    }
    let s = Scratch::new("dirop-threads");
    let img = s.path("img");
    let mnt = s.path("mnt");
    mkfs(&img, 320 << 20, &[]);
    let m = KernelMount::new(&img, &mnt, "");
    std::fs::create_dir(mnt.join("shared")).unwrap();
    let shared = std::fs::metadata(mnt.join("shared")).unwrap().ino();
    let mut own = Vec::new();
    for t in 0..THREADS {
        let p = mnt.join(format!("t{t}"));
        std::fs::create_dir(&p).unwrap();
        own.push(std::fs::metadata(&p).unwrap().ino());
    }
    m.umount();

    let done = Arc::new(AtomicBool::new(false));
    let dog = {
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..600 {
                std::thread::sleep(std::time::Duration::from_millis(200));
                if done.load(Ordering::Relaxed) {
                    return;
                }
            }
            eprintln!("concurrent namespace ops: no progress in 120 s (deadlock?)");
            std::process::abort();
        })
    };
    let dev: Arc<dyn rxfs::bdev::BlockDevice> =
        Arc::new(rxfs::bdev::FileDevice::open(&img, false, false).unwrap());
    let fs: Arc<Filesystem> = Filesystem::open(
        dev,
        None,
        MountOptions {
            read_only: false,
            ..Default::default()
        },
    )
    .unwrap();
    // What is in the shared directory (name -> inode), kept by the threads.
    let shared_model = Arc::new(Mutex::new(BTreeMap::<Vec<u8>, u64>::new()));
    let args = CreateArgs {
        mode: 0o100644,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    };
    let dargs = CreateArgs {
        mode: 0o040755,
        ..args
    };
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let fs = fs.clone();
            let shared_model = shared_model.clone();
            let mine = own[t as usize];
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + t);
                // name -> (inode, is a directory)
                let mut model: BTreeMap<Vec<u8>, (u64, bool)> = BTreeMap::new();
                for i in 0..OPS {
                    let op = rng.below(10);
                    if op < 3 {
                        // Shared directory: names carry the thread so they
                        // never clash; removals only of our own names.
                        let name = format!("t{t}-{i}-{}", "x".repeat(rng.below(20) as usize));
                        let ip = fs.create(Ino(shared), name.as_bytes(), &args).unwrap();
                        shared_model
                            .lock()
                            .unwrap()
                            .insert(name.into_bytes(), ip.ino.0);
                    } else if op < 5 {
                        let prefix = format!("t{t}-");
                        let victim = {
                            let m = shared_model.lock().unwrap();
                            m.keys().find(|k| k.starts_with(prefix.as_bytes())).cloned()
                        };
                        if let Some(n) = victim {
                            fs.unlink(Ino(shared), &n).unwrap();
                            shared_model.lock().unwrap().remove(&n);
                        }
                    } else if op < 8 {
                        let name = rng.name(1, 24);
                        let dir = op == 7;
                        let r = if dir {
                            fs.mkdir(Ino(mine), &name, &dargs)
                        } else {
                            fs.create(Ino(mine), &name, &args)
                        };
                        match r {
                            Ok(ip) => {
                                assert!(!model.contains_key(&name));
                                model.insert(name, (ip.ino.0, dir));
                            }
                            Err(Error::Exists) => assert!(model.contains_key(&name)),
                            Err(e) => panic!("thread {t}: {e}"),
                        }
                    } else if let Some((name, (_, dir))) = model
                        .iter()
                        .nth(rng.below(model.len().max(1) as u64) as usize)
                        .map(|(n, v)| (n.clone(), *v))
                    {
                        if dir {
                            fs.rmdir(Ino(mine), &name).unwrap();
                        } else {
                            fs.unlink(Ino(mine), &name).unwrap();
                        }
                        model.remove(&name);
                    }
                }
                model
            })
        })
        .collect();
    let models: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        fs.stats().ag_lock_order_violations,
        0,
        "AG header lock order"
    );
    fs.unmount().unwrap();
    assert_eq!(
        fs.stats().unlogged_changes,
        0,
        "a change outside the logged chunks"
    );
    drop(fs);
    done.store(true, Ordering::Relaxed);
    dog.join().unwrap();

    let out = std::process::Command::new("xfs_repair")
        .args(["-n", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xfs_repair -n: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let m = KernelMount::new(&img, &mnt, "ro");
    let list = |d: &str| -> BTreeMap<Vec<u8>, u64> {
        std::fs::read_dir(mnt.join(d))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let md = std::fs::symlink_metadata(e.path()).unwrap();
                (e.file_name().as_bytes().to_vec(), md.ino())
            })
            .collect()
    };
    assert_eq!(list("shared"), *shared_model.lock().unwrap(), "shared");
    let mut total = 0;
    for (t, model) in models.iter().enumerate() {
        let want: BTreeMap<Vec<u8>, u64> =
            model.iter().map(|(n, (i, _))| (n.clone(), *i)).collect();
        assert_eq!(list(&format!("t{t}")), want, "t{t}");
        total += want.len();
    }
    m.umount();
    eprintln!(
        "concurrent: {} threads x {OPS} ops; {} shared entries, {total} private left",
        THREADS,
        shared_model.lock().unwrap().len()
    );
}
