//! The log writer against the kernel: logs written by rxfs's
//! [`rxfs::log::LogWriter`] are parsed by `xfs_logprint`, replayed by the
//! kernel's log recovery (a superblock label change carried only by our
//! log shows up after the mount), and a log ended with our unmount record
//! is clean for `xfs_repair -n` and the kernel.
//!
//! Needs root, mkfs.xfs, xfs_db, xfs_logprint, xfs_repair and loop mounts.
//! Missing tools fail the tests, unless RXFS_SKIP_KERNEL_TESTS=1.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::{kernel_tests_disabled, KernelMount, Scratch};
use rxfs::bdev::{BlockDevice, FileDevice};
use rxfs::format::crc;
use rxfs::format::log::HostOrder;
use rxfs::format::log_items::{BLFT_SHIFT, LI_BUF};
use rxfs::log::find::{Log, LogState};
use rxfs::log::{LogConfig, LogWriter, NoPusher};

/// `XFS_BLFT_AGF_BUF` and `XFS_BLFT_SB_BUF`.
const BLFT_AGF: u16 = 5;
const BLFT_SB: u16 = 18;
const SB_FNAME: usize = 108;
const SB_CRC: usize = 224;

fn enabled() -> bool {
    if kernel_tests_disabled() {
        eprintln!("RXFS_SKIP_KERNEL_TESTS=1: skipping kernel test");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "kernel tests need root");
    true
}

/// Run a command; returns (exit code, stdout + stderr).
fn cmd(c: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(c)
        .args(args)
        // Let mkfs make the small logs fstests uses.
        .env("TEST_DIR", "/tmp")
        .env("TEST_DEV", "/dev/null")
        .env("QA_CHECK_FS", "xfs")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c}: {e} (is it installed?)"));
    let s = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), s)
}

fn ok(c: &str, args: &[&str]) -> String {
    let (code, s) = cmd(c, args);
    assert_eq!(code, 0, "{c} {args:?} failed: {s}");
    s
}

/// A clean image whose metadata carries real LSNs: mkfs with an 8 MiB log,
/// then a kernel mount that creates a file, and a clean unmount.
fn prepare(s: &Scratch) -> std::path::PathBuf {
    let img = s.path("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(320 << 20)
        .unwrap();
    let p = img.to_str().unwrap();
    ok(
        "mkfs.xfs",
        &["-q", "-f", "-l", "size=8m", "-L", "before", p],
    );
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    std::fs::write(m.dir.join("hello"), b"hello").unwrap();
    m.umount();
    img
}

/// The log state, sb uuid and sector size rxfs reads from the image.
fn state(img: &Path) -> (LogState, [u8; 16], usize) {
    let fs = common::open_ro(img);
    let st = fs.log_state().expect("internal log").clone();
    (st, fs.sb().uuid, fs.geo().sectsize as usize)
}

fn label(img: &Path) -> String {
    ok(
        "xfs_db",
        &["-r", "-c", "sb 0", "-c", "p fname", img.to_str().unwrap()],
    )
    .trim()
    .replace("\\000", "")
}

/// A BUF item logging a whole sector-sized buffer at `daddr`.
fn buf_item(daddr: u64, blft: u16, data: &[u8]) -> Vec<Vec<u8>> {
    let o = HostOrder::native();
    let chunks = data.len() / 128;
    let words = chunks.div_ceil(32);
    let mut f = vec![0u8; 24 + 4 * words];
    o.put_u16(&mut f, 0, LI_BUF);
    o.put_u16(&mut f, 2, 2);
    o.put_u16(&mut f, 4, blft << BLFT_SHIFT);
    o.put_u16(&mut f, 6, (data.len() / 512) as u16);
    o.put_u64(&mut f, 8, daddr);
    o.put_u32(&mut f, 16, words as u32);
    for c in 0..chunks {
        let w = 20 + 4 * (c / 32);
        let v = o.u32(&f, w) | 1 << (c % 32);
        o.put_u32(&mut f, w, v);
    }
    vec![f, data.to_vec()]
}

fn read(dev: &dyn BlockDevice, daddr: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    dev.read_at(&mut b, daddr * 512).unwrap();
    b
}

/// The superblock with a new label and its CRC updated, and the AGF of AG 0
/// as it is.
fn items(dev: &dyn BlockDevice, sect: usize, new_label: &str) -> Vec<Vec<Vec<u8>>> {
    let mut sb = read(dev, 0, sect);
    sb[SB_FNAME..SB_FNAME + 12].fill(0);
    sb[SB_FNAME..SB_FNAME + new_label.len()].copy_from_slice(new_label.as_bytes());
    crc::update(&mut sb, SB_CRC);
    let agf_daddr = (sect / 512) as u64;
    let agf = read(dev, agf_daddr, sect);
    assert_eq!(&agf[..4], b"XAGF");
    vec![
        buf_item(0, BLFT_SB, &sb),
        buf_item(agf_daddr, BLFT_AGF, &agf),
    ]
}

fn writer(img: &Path, logbsize: u32) -> (LogWriter, Arc<FileDevice>, usize) {
    let (st, uuid, sect) = state(img);
    assert!(st.clean, "start from a clean log: {st}");
    let dev = Arc::new(FileDevice::open(img, false, false).unwrap());
    let cfg = LogConfig::from_state(&st, uuid, 8, logbsize);
    let lw = LogWriter::new(dev.clone(), cfg, Arc::new(NoPusher)).unwrap();
    (lw, dev, sect)
}

fn checkpoint(lw: &LogWriter, items: &[Vec<Vec<u8>>]) -> rxfs::log::CheckpointLsns {
    lw.write_standalone_checkpoint(items).unwrap()
}

/// `xfs_logprint -t` parses the log; returns its output.
fn logprint(img: &Path) -> String {
    let out = ok("xfs_logprint", &["-t", img.to_str().unwrap()]);
    assert!(!out.contains("Bad"), "xfs_logprint complains:\n{out}");
    eprintln!("xfs_logprint -t:\n{out}");
    out
}

/// Our log reads dirty; the kernel replays it: the label changes.
fn replay_and_check(s: &Scratch, img: &Path, new_label: &str, lp: &str) {
    assert!(
        lp.contains("DIRTY") || lp.contains("dirty"),
        "logprint sees a dirty log:\n{lp}"
    );
    assert!(lp.contains("BUF"), "logprint shows our BUF items:\n{lp}");
    let (st, _, _) = state_norecovery(img);
    assert!(!st.clean, "{st}");
    let (code, _) = cmd("xfs_repair", &["-n", img.to_str().unwrap()]);
    assert_ne!(code, 0, "xfs_repair -n refuses a dirty log");
    let m = KernelMount::new(img, &s.path("mnt"), "");
    assert_eq!(
        std::fs::read(m.dir.join("hello")).unwrap(),
        b"hello",
        "the filesystem is intact after replay"
    );
    m.umount();
    assert_eq!(label(img), format!("fname = \"{new_label}\""));
    ok("xfs_repair", &["-n", img.to_str().unwrap()]);
}

fn state_norecovery(img: &Path) -> (LogState, [u8; 16], usize) {
    let fs = rxfs::Filesystem::open_path(
        img,
        None,
        rxfs::MountOptions {
            read_only: true,
            norecovery: true,
            ..Default::default()
        },
    )
    .unwrap();
    let st = fs.log_state().expect("internal log").clone();
    (st, fs.sb().uuid, fs.geo().sectsize as usize)
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kernel_replays_our_checkpoint() {
    if !enabled() {
        return;
    }
    // 32 KiB buffers (one header BB), and 256 KiB buffers (extended
    // headers) with a checkpoint big enough to need them.
    for (logbsize, copies) in [(32768, 1), (262144, 300)] {
        replay_case(logbsize, copies);
    }
}

fn replay_case(logbsize: u32, agf_copies: usize) {
    let s = Scratch::new(&format!("logwrite-replay-{logbsize}"));
    let img = prepare(&s);
    assert_eq!(label(&img), "fname = \"before\"");
    let (lw, dev, sect) = writer(&img, logbsize);
    let start_head = lw.head();
    let mut it = items(dev.as_ref(), sect, "rxfslog1");
    let agf = it[1].clone();
    it.extend(std::iter::repeat_n(agf, agf_copies - 1));
    let l = checkpoint(&lw, &it);
    assert!(l.start >= start_head, "our LSNs are past every LSN in use");
    lw.force(l.commit).unwrap();
    let stats = lw.stats();
    lw.close().unwrap();
    drop(dev);
    eprintln!("replay ({logbsize}): {stats:?}");
    // rxfs reads back what it wrote.
    {
        let (st, uuid, _) = state_norecovery(&img);
        let dev = FileDevice::open(&img, true, false).unwrap();
        let log = Log::from_parts(&dev, st.start, st.size_bbs, uuid).unwrap();
        let c = log.contents(&st).unwrap();
        assert!(c
            .transactions
            .iter()
            .any(|t| t.items.len() == it.len() && t.commit_lsn == l.commit));
    }
    let lp = logprint(&img);
    replay_and_check(&s, &img, "rxfslog1", &lp);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kernel_replays_checkpoint_wrapping_the_log_end() {
    if !enabled() {
        return;
    }
    let s = Scratch::new("logwrite-wrap");
    let img = prepare(&s);
    // 32 KiB buffers: one header BB; a one-AGF checkpoint is 3 BBs, ours
    // (superblock + AGF) 4, so 1..=3 BBs left before the end split it.
    let (lw, dev, sect) = writer(&img, 32768);
    let bbs = lw.config().size_bbs;
    // Fill the log with harmless checkpoints (the AGF as it is), moving the
    // tail behind them as if the AIL had written everything back, until
    // the head is a few blocks before the physical end.
    let agf = items(dev.as_ref(), sect, "x").pop().unwrap();
    let big: Vec<_> = std::iter::repeat_n(agf.clone(), 300).collect();
    let small = vec![agf];
    loop {
        let left = bbs - lw.head().block();
        let head_cycle = lw.head().cycle();
        if head_cycle > lw.config().head.cycle() {
            panic!("overshot the log end");
        }
        if left < 4 {
            break;
        }
        let fill = if left > 1200 { &big } else { &small };
        let l = checkpoint(&lw, fill);
        lw.force(l.commit).unwrap();
        lw.grant().move_tail(lw.last_sync_lsn());
    }
    let before = lw.stats();
    let it = items(dev.as_ref(), sect, "wrapped");
    let l = checkpoint(&lw, &it);
    lw.force(l.commit).unwrap();
    let after = lw.stats();
    assert!(
        after.writes - before.writes > after.records - before.records,
        "a record was split at the log end: {after:?}"
    );
    assert!(
        lw.head().cycle() > lw.config().head.cycle(),
        "the head wrapped"
    );
    eprintln!("wrap: head {} stats {after:?}", lw.head());
    lw.close().unwrap();
    drop(dev);
    let lp = logprint(&img);
    replay_and_check(&s, &img, "wrapped", &lp);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn our_unmount_record_is_clean_for_the_kernel() {
    if !enabled() {
        return;
    }
    let s = Scratch::new("logwrite-clean");
    let img = prepare(&s);
    let (lw, dev, sect) = writer(&img, 65536);
    // A checkpoint whose change is already on disk (the AGF as it is),
    // then everything "written back": the tail moves to the head.
    let agf = items(dev.as_ref(), sect, "x").pop().unwrap();
    let l = checkpoint(&lw, &[agf]);
    lw.force(l.commit).unwrap();
    lw.grant().move_tail(lw.last_sync_lsn());
    let u = lw.unmount().unwrap();
    drop(dev);
    let (st, _, _) = state(&img);
    assert!(st.clean, "{st}");
    assert_eq!(st.last_record.as_ref().unwrap().lsn, u);
    let lp = logprint(&img);
    assert!(!lp.contains("DIRTY"), "logprint sees a clean log:\n{lp}");
    // Clean: repair accepts it without a mount.
    ok("xfs_repair", &["-n", img.to_str().unwrap()]);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    assert_eq!(std::fs::read(m.dir.join("hello")).unwrap(), b"hello");
    m.umount();
    ok("xfs_repair", &["-n", img.to_str().unwrap()]);
    // The kernel continued after our unmount record.
    let (st2, _, _) = state(&img);
    assert!(st2.clean && st2.head > st.head, "{st2}");
}
