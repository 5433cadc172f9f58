//! Overwrites without a transaction (issue 13, seed 004): whole-block
//! writes onto written blocks inside EOF take the I/O lock shared and
//! commit at most one timestamp transaction per clock tick; every other
//! write takes it exclusive. `fdatasync` after pure overwrites writes no
//! log record (one device cache flush), `fsync` after a size change does.
//! The kernel reads back what was written, with the new mtime, and
//! `xfs_repair -n` is clean. Needs root and xfsprogs.

mod common;

use std::time::Instant;

use common::*;
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::overwrite::timestamp_tick_ns;
use rxfs::{Filesystem, MountOptions};

const FILE_BLOCKS: u64 = 256;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn whole_block_overwrites_take_the_shared_path() {
    require_root();
    let s = Scratch::new("overwrite");
    let img = s.path("img");
    mkfs(&img, 320 << 20, &[]);
    let fs = Filesystem::open_path(&img, None, MountOptions::default()).unwrap();
    let args = CreateArgs {
        mode: 0o100644,
        uid: 0,
        gid: 0,
        rdev: 0,
        umask: 0,
    };
    let ino = fs.create(fs.root_ino(), b"f", &args).unwrap().ino;
    let mut model = pattern(1, (FILE_BLOCKS * 4096) as usize);
    assert_eq!(fs.write(ino, 0, &model).unwrap(), model.len());
    fs.fsync(ino, false).unwrap();
    let mtime0 = fs.iget(ino).unwrap().core.mtime;

    // Pure overwrites: shared I/O lock, no exclusive one, and no more
    // transactions than clock ticks went by (plus one).
    let before = fs.stats();
    let t0 = Instant::now();
    let n = 2000u64;
    for i in 0..n {
        let b = (i * 37) % (FILE_BLOCKS - 2);
        let len = 4096 * (1 + i % 2) as usize;
        let data = pattern(100 + i, len);
        assert_eq!(fs.write(ino, b * 4096, &data).unwrap(), len);
        model[(b * 4096) as usize..(b * 4096) as usize + len].copy_from_slice(&data);
    }
    let ticks = t0.elapsed().as_nanos() as u64 / timestamp_tick_ns() as u64 + 2;
    let after = fs.stats();
    assert_eq!(after.locks.iolock_shared - before.locks.iolock_shared, n);
    assert_eq!(after.locks.iolock_excl, before.locks.iolock_excl);
    let commits = after.trans_commits - before.trans_commits;
    assert!(
        commits <= ticks,
        "{commits} transactions for {n} overwrites in {ticks} ticks"
    );
    let ip = fs.iget(ino).unwrap();
    let key = |t: rxfs::format::inode::Timestamp| (t.sec, t.nsec);
    assert!(
        key(ip.core.mtime) > key(mtime0),
        "the overwrites moved mtime"
    );
    assert_eq!(ip.core.mtime, ip.core.ctime);
    // Stamped by the coarse clock: never ahead of it.
    assert!(key(ip.core.mtime) <= key(rxfs::bmap::data::now()));

    // fdatasync of pure overwrites: no log write (only timestamps changed).
    fs.sync().unwrap();
    fs.write(ino, 4096, &pattern(7, 4096)).unwrap();
    model[4096..8192].copy_from_slice(&pattern(7, 4096));
    let w0 = fs.stats().log.writes;
    fs.fsync(ino, true).unwrap();
    assert_eq!(fs.stats().log.writes, w0, "fdatasync forced the log");

    // Not pure overwrites: unaligned, past EOF: exclusive.
    let before = fs.stats();
    fs.write(ino, 100, b"unaligned").unwrap();
    model[100..109].copy_from_slice(b"unaligned");
    let end = model.len() as u64;
    fs.write(ino, end, &pattern(9, 4096)).unwrap();
    model.extend_from_slice(&pattern(9, 4096));
    let after = fs.stats();
    assert_eq!(after.locks.iolock_excl - before.locks.iolock_excl, 2);
    assert_eq!(
        after.locks.iolock_upgrades - before.locks.iolock_upgrades,
        1
    );
    // ... and fsync after a size change writes the log.
    let w0 = after.log.writes;
    fs.fsync(ino, true).unwrap();
    assert!(fs.stats().log.writes > w0, "fdatasync of a size change");

    let ip = fs.iget(ino).unwrap();
    let mut back = vec![0u8; model.len()];
    assert_eq!(fs.read_file(&ip, 0, &mut back).unwrap(), model.len());
    assert!(back == model, "rxfs reads back what it wrote");
    fs.unmount().unwrap();
    drop(fs);

    let out = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let mnt = s.path("k");
    let k = KernelMount::new(&img, &mnt, "ro");
    let got = std::fs::read(mnt.join("f")).unwrap();
    assert!(got == model, "the kernel reads what rxfs wrote");
    k.umount();
}
