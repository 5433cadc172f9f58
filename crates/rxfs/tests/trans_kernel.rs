//! The transaction core against the kernel: changes committed through
//! rxfs's transactions, CIL and log are replayed by the kernel after a
//! crash (no write-back), and written back cleanly at unmount.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::format::bufkind::BufKind;
use rxfs::format::{be16, put_be16};
use rxfs::types::{Daddr, Ino};
use rxfs::xact::{MetaTx, Resv};
use rxfs::{Filesystem, MountOptions};

fn enabled() -> bool {
    if kernel_tests_disabled() {
        return false;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair", "xfs_db"]);
    true
}

fn open_rw(img: &Path, opts: MountOptions) -> Arc<Filesystem> {
    let dev: Arc<dyn BlockDevice> = Arc::new(FileDevice::open(img, false, false).unwrap());
    Filesystem::open(dev, None, opts).unwrap()
}

fn rw() -> MountOptions {
    MountOptions {
        read_only: false,
        ..Default::default()
    }
}

fn repair_clean(img: &Path) {
    let o = run_output("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "xfs_repair -n failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn db(img: &Path, cmds: &[&str]) -> String {
    let mut args = vec!["-r"];
    for c in cmds {
        args.push("-c");
        args.push(c);
    }
    args.push(img.to_str().unwrap());
    let o = run_output("xfs_db", &args);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Set the root directory's permission bits in one transaction.
fn chmod_root(fs: &Filesystem, perm: u16) -> u64 {
    let root = fs.root_ino();
    let _l = fs.ilock(root).unwrap();
    let mut tp = fs.trans_alloc(Resv::SetAttr).unwrap();
    let ip = tp.ijoin(root).unwrap();
    let d = tp.inode_mut(ip);
    let mode = be16(d, 2);
    put_be16(d, 2, (mode & !0o7777) | perm);
    tp.commit().unwrap()
}

/// Set the label through a logged superblock buffer.
fn set_label(fs: &Filesystem, label: &str) -> u64 {
    let mut tp = fs.trans_alloc(Resv::Misc).unwrap();
    let sect = fs.geo().sectsize as usize;
    let b = tp.read_buf(Daddr(0), sect, BufKind::Sb).unwrap();
    let d = tp.buf_mut(b);
    d[108..120].fill(0);
    d[108..108 + label.len()].copy_from_slice(label.as_bytes());
    tp.log_buf(b, 108..120);
    tp.commit().unwrap()
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn rw_mount_and_unmount_leave_a_clean_filesystem() {
    if !enabled() {
        return;
    }
    let s = Scratch::new("trans-clean");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let fs = open_rw(&img, rw());
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&img);
    // Our log is clean: a read-only open does not need recovery.
    let ro = open_ro(&img);
    assert!(ro.recovery_stats().is_none());
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kernel_replays_committed_changes_after_a_crash() {
    if !enabled() {
        return;
    }
    let s = Scratch::new("trans-crash");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let fs = open_rw(&img, rw());
    chmod_root(&fs, 0o710);
    let seq = set_label(&fs, "rxfslogged");
    fs.log_force_seq(seq).unwrap();
    // The read path sees the committed inode.
    let root = fs.iget(fs.root_ino()).unwrap();
    assert_eq!(root.core.mode & 0o7777, 0o710);
    // Crash: nothing written back, the log is dirty.
    fs.abandon();
    drop(fs);
    assert!(
        !db(&img, &["sb 0", "p fname"]).contains("rxfslogged"),
        "label written in place before the log was replayed"
    );
    // xfs_logprint parses our log.
    let lp = run_output("xfs_logprint", &["-t", img.to_str().unwrap()]);
    let lps =
        String::from_utf8_lossy(&lp.stdout).into_owned() + &String::from_utf8_lossy(&lp.stderr);
    assert!(lp.status.success(), "{lps}");
    assert!(lps.contains("INODE") && lps.contains("BUF"), "{lps}");
    // rxfs recovers its own log: a copy opened read-write.
    let copy = s.path("copy");
    std::fs::copy(&img, &copy).unwrap();
    let fs = open_rw(&copy, rw());
    assert!(fs.recovery_stats().is_some());
    assert_eq!(fs.iget(fs.root_ino()).unwrap().core.mode & 0o7777, 0o710);
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&copy);
    assert!(db(&copy, &["sb 0", "p fname"]).contains("rxfslogged"));
    // The kernel recovers it too.
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let mode = std::fs::metadata(&mnt).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(mode.permissions().mode() & 0o7777, 0o710);
    m.umount();
    assert!(db(&img, &["sb 0", "p fname"]).contains("rxfslogged"));
    repair_clean(&img);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn many_commits_aggregate_into_few_checkpoints_and_write_back_at_unmount() {
    if !enabled() {
        return;
    }
    let s = Scratch::new("trans-aggr");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let fs = open_rw(&img, rw());
    for i in 0..200u16 {
        chmod_root(&fs, 0o700 | (i % 8) << 3);
    }
    let last = chmod_root(&fs, 0o751);
    fs.log_force_seq(last).unwrap();
    let st = fs.stats();
    assert_eq!(st.trans_commits, 201);
    assert!(st.checkpoints >= 1 && st.checkpoints <= 3, "{st:?}");
    assert!(st.cil_relogged >= 190, "{st:?}");
    fs.unmount().unwrap();
    let st = fs.stats();
    assert!(st.ail_items_written >= 1, "{st:?}");
    drop(fs);
    repair_clean(&img);
    let out = db(&img, &[&format!("inode {}", Ino(128).0), "print core.mode"]);
    assert!(out.contains("040751"), "{out}");
    // And with the ablation switch: one checkpoint per transaction.
    let fs = open_rw(
        &img,
        MountOptions {
            ablate_delaylog: true,
            ..rw()
        },
    );
    for i in 0..20u16 {
        chmod_root(&fs, 0o700 | (i % 8));
    }
    let st = fs.stats();
    assert_eq!(st.checkpoints, 20, "{st:?}");
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&img);
}

/// Set `ino`'s permission bits in one transaction.
fn chmod(fs: &Filesystem, ino: Ino, perm: u16) -> u64 {
    let _l = fs.ilock(ino).unwrap();
    let mut tp = fs.trans_alloc(Resv::SetAttr).unwrap();
    let ip = tp.ijoin(ino).unwrap();
    let d = tp.inode_mut(ip);
    let mode = be16(d, 2);
    put_be16(d, 2, (mode & !0o7777) | perm);
    tp.commit().unwrap()
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn concurrent_commits_forces_and_write_back_with_a_small_log() {
    if !enabled() {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let s = Scratch::new("trans-conc");
    let img = s.path("img");
    // The smallest log mkfs allows, so the log wraps and the AIL must push.
    mkfs_with(&img, 64 << 20, &["-l", "size=1368b"], FSTESTS_ENV);
    let mnt = s.path("mnt");
    let m = KernelMount::new(&img, &mnt, "");
    let mut inos = Vec::new();
    for i in 0..64 {
        let p = mnt.join(format!("f{i}"));
        std::fs::write(&p, b"x").unwrap();
        inos.push(Ino(std::fs::metadata(&p).unwrap().ino()));
    }
    m.umount();
    let fs = open_rw(
        &img,
        MountOptions {
            logbufs: Some(4),
            logbsize: Some(32 * 1024),
            ..rw()
        },
    );
    let threads = 8;
    // Commit until the log has wrapped twice: how many transactions that
    // takes depends on how well checkpoints batch, so it is not fixed.
    let log_bytes = 1368 * 4096u64;
    let max_rounds = 40_000;
    let done = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..threads {
            let fs = &fs;
            let inos = &inos;
            let done = &done;
            sc.spawn(move || {
                for r in 0..max_rounds {
                    let i = (t * 7 + r * 13) % inos.len();
                    let perm = 0o600 | ((t as u16) << 3) | (r % 8) as u16;
                    let seq = chmod(fs, inos[i], perm);
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if r % 10 == 0 {
                        fs.log_force_seq(seq).unwrap();
                    }
                    if r % 100 == 99 && fs.stats().log.bytes > 2 * log_bytes {
                        break;
                    }
                }
            });
        }
    });
    let commits = done.load(std::sync::atomic::Ordering::Relaxed);
    // The final mode of each file is the last chmod of it.
    let mut want = std::collections::HashMap::new();
    let st = fs.stats();
    for i in &inos {
        let ip = fs.iget(*i).unwrap();
        want.insert(i.0, ip.core.mode & 0o7777);
    }
    assert_eq!(st.trans_commits, commits);
    assert!(st.checkpoints < st.trans_commits, "{st:?}");
    assert!(st.log.writes > 0);
    assert_eq!(st.trans_resv_overruns, 0, "{st:?}");
    fs.unmount().unwrap();
    let st = fs.stats();
    eprintln!("{st:#?}");
    // The log wrapped: more bytes written than the log holds, so the AIL
    // moved the tail while commits ran.
    assert!(st.log.bytes > log_bytes, "{st:?}");
    assert!(st.ail_items_written > 0, "{st:?}");
    drop(fs);
    repair_clean(&img);
    let m = KernelMount::new(&img, &mnt, "");
    for i in 0..64 {
        let md = std::fs::metadata(mnt.join(format!("f{i}"))).unwrap();
        assert_eq!(Some(&((md.mode() & 0o7777) as u16)), want.get(&md.ino()));
    }
    m.umount();
}

fn free_blocks(img: &Path) -> u64 {
    let out = db(img, &["freesp -s"]);
    let line = out
        .lines()
        .find(|l| l.contains("total free blocks"))
        .unwrap_or_else(|| panic!("{out}"));
    line.split_whitespace().last().unwrap().parse().unwrap()
}

fn alloc_some(fs: &Filesystem, n: usize) -> Vec<rxfs::alloc::AgExtent> {
    let mut tp = fs.trans_alloc(Resv::Write).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let req = rxfs::alloc::AllocReq {
            agno: rxfs::types::AgNumber((i % 2) as u32),
            near: None,
            minlen: 3,
            maxlen: 3,
            align: 1,
            any_ag: false,
            meta: false,
        };
        out.push(rxfs::alloc::alloc_extent(&mut tp, &req).unwrap());
    }
    tp.commit().unwrap();
    out
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn deferred_frees_log_intents_that_the_kernel_and_rxfs_replay() {
    if !enabled() {
        return;
    }
    let s = Scratch::new("trans-efi");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let before = free_blocks(&img);
    // Allocate, then free through deferred frees (EFI + follow-up EFD).
    let fs = open_rw(&img, rw());
    let ext = alloc_some(&fs, 20);
    let mut tp = fs.trans_alloc(Resv::Truncate).unwrap();
    for e in &ext {
        tp.defer_free(e.agno, e.agbno, e.len).unwrap();
    }
    let seq = tp.commit().unwrap();
    fs.log_force_seq(seq).unwrap();
    fs.abandon();
    drop(fs);
    let lp = run_output("xfs_logprint", &["-t", img.to_str().unwrap()]);
    let lps = String::from_utf8_lossy(&lp.stdout).into_owned();
    assert!(lps.contains("EFI") && lps.contains("EFD"), "{lps}");
    let copy = s.path("copy");
    std::fs::copy(&img, &copy).unwrap();
    // The kernel replays: everything free again.
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    m.umount();
    repair_clean(&img);
    assert_eq!(free_blocks(&img), before);
    // rxfs replays the same log.
    let fs = open_rw(&copy, rw());
    fs.unmount().unwrap();
    drop(fs);
    repair_clean(&copy);
    assert_eq!(free_blocks(&copy), before);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn an_unfinished_intent_of_ours_is_finished_by_kernel_recovery() {
    if !enabled() {
        return;
    }
    let s = Scratch::new("trans-efi-open");
    let img = s.path("img");
    mkfs_with(&img, 64 << 20, &[], FSTESTS_ENV);
    let before = free_blocks(&img);
    let fs = open_rw(&img, rw());
    let ext = alloc_some(&fs, 4);
    // An EFI with no EFD: the crash came between the two transactions.
    let mut tp = fs.trans_alloc(Resv::Truncate).unwrap();
    let mut efi = vec![0u8; 16 + 16 * ext.len()];
    let o = rxfs::format::log::HostOrder::native();
    o.put_u16(&mut efi, 0, rxfs::format::log_items::LI_EFI);
    o.put_u16(&mut efi, 2, 1);
    o.put_u32(&mut efi, 4, ext.len() as u32);
    o.put_u64(&mut efi, 8, 0x5eed);
    for (i, e) in ext.iter().enumerate() {
        o.put_u64(
            &mut efi,
            16 + 16 * i,
            fs.geo().agb_to_fsb(e.agno, e.agbno).0,
        );
        o.put_u32(&mut efi, 24 + 16 * i, e.len);
    }
    tp.log_raw_item(vec![efi]);
    let seq = tp.commit().unwrap();
    fs.log_force_seq(seq).unwrap();
    fs.abandon();
    drop(fs);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    m.umount();
    repair_clean(&img);
    assert_eq!(free_blocks(&img), before);
}
