//! The log layer against the real kernel and xfsprogs: clean and dirty logs
//! made by mkfs.xfs and the kernel, compared with `xfs_logprint`.
//!
//! Needs root, mkfs.xfs, xfs_io, xfs_logprint and loop mounts. Missing
//! tools fail the tests, unless RXFS_SKIP_KERNEL_TESTS=1 (then they skip).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::*;
use rxfs::format::log_items::{item_type_name, ItemFormat};
use rxfs::format::log_record::CrcCheck;
use rxfs::log::find::{LogContents, LogState};
use rxfs::{Error, Filesystem, MountOptions};

fn kernel_tests_enabled() -> bool {
    if kernel_tests_disabled() {
        eprintln!("RXFS_SKIP_KERNEL_TESTS=1: skipping kernel test");
        return false;
    }
    require_root();
    require_tools(&["mkfs.xfs", "xfs_io", "xfs_logprint", "mount", "umount"]);
    true
}

/// mkfs `img` of the scratch directory as a sparse image of `size` bytes;
/// `extra` are more mkfs options. The fstests variables let mkfs make small
/// logs on small filesystems.
fn mkfs_img(s: &Scratch, size: u64, extra: &[&str]) {
    mkfs_with(&s.path("img"), size, extra, FSTESTS_ENV);
}

/// Loop-mount the scratch image on its `mnt`.
fn mount(s: &Scratch, opts: &str) -> KernelMount {
    KernelMount::new(&s.path("img"), &s.path("mnt"), opts)
}

fn sh(script: &str) {
    run("sh", &["-c", script]);
}

fn open(img: &Path, norecovery: bool) -> rxfs::Result<Arc<Filesystem>> {
    Filesystem::open_path(
        img,
        None,
        MountOptions {
            read_only: true,
            norecovery,
            direct_io: false,
            ..Default::default()
        },
    )
}

/// `log tail: T head: H state: <S>` from `xfs_logprint -t`.
#[derive(Debug, PartialEq, Eq)]
struct LpSummary {
    tail: u32,
    head: u32,
    dirty: bool,
}

/// One transaction as `xfs_logprint -t` prints it.
#[derive(Debug, Default)]
struct LpTrans {
    num_items: u32,
    /// (item name, regions, key fields) of each item.
    items: Vec<(String, usize, String)>,
}

/// `key:value` tokens of a logprint detail line ("len: 8" -> "len:8").
fn tokens(line: &str) -> BTreeMap<String, String> {
    let norm = line.replace(": ", ":").replace(":\t", ":");
    let norm = norm.replace("start blkno", "blkno");
    norm.split_whitespace()
        .filter_map(|t| t.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn hex(v: &str) -> u64 {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

/// The key fields of an item from its logprint detail line.
fn lp_key(name: &str, line: &str) -> Option<String> {
    let t = tokens(line);
    let g = |k: &str| t.get(k).map(String::as_str);
    Some(match name {
        "BUF" => format!(
            "blkno={:#x} len={} flags={:#x}",
            hex(g("blkno")?),
            g("len")?,
            hex(g("flags")?)
        ),
        "INO" => format!(
            "ino={:#x} fields={:#x} dsize={}",
            hex(g("ino")?),
            hex(g("flags")?),
            g("dsize")?
        ),
        "ICR" => format!(
            "ag={} agbno={:#x} len={}",
            g("#ag")?,
            hex(g("agbno")?),
            g("len")?
        ),
        "EFI" | "EFD" => format!("id={:#x} n={}", hex(g("id")?), g("num_extents")?),
        _ => return None,
    })
}

/// The same key fields from our decoding.
fn our_key(f: &ItemFormat) -> String {
    match f {
        ItemFormat::Buf(b) => format!("blkno={:#x} len={} flags={:#x}", b.blkno, b.len, b.flags),
        ItemFormat::Inode(i) => {
            format!("ino={:#x} fields={:#x} dsize={}", i.ino, i.fields, i.dsize)
        }
        ItemFormat::Icreate(c) => format!("ag={} agbno={:#x} len={}", c.ag, c.agbno, c.length),
        ItemFormat::Efi { id, extents, .. } => format!("id={id:#x} n={}", extents.len()),
        ItemFormat::Efd {
            efi_id, extents, ..
        } => format!("id={efi_id:#x} n={}", extents.len()),
        _ => String::new(),
    }
}

fn logprint(img: &Path) -> (LpSummary, Vec<LpTrans>) {
    let out = run_output("xfs_logprint", &["-t", img.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&out.stdout);
    let mut sum = None;
    let mut trans: Vec<LpTrans> = Vec::new();
    let mut want_key = false;
    for line in out.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("log tail: ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            sum = Some(LpSummary {
                tail: w[0].parse().unwrap(),
                head: w[2].parse().unwrap(),
                dirty: rest.contains("DIRTY"),
            });
        } else if let Some(rest) = line.strip_prefix("TRANS: ") {
            let n = rest.split("#items:").nth(1).unwrap();
            let n = n.split_whitespace().next().unwrap().parse().unwrap();
            trans.push(LpTrans {
                num_items: n,
                items: vec![],
            });
        } else if let Some((name, rest)) = line.split_once(": cnt:") {
            if !name.starts_with(char::is_whitespace) {
                let cnt = rest.split_whitespace().next().unwrap().parse().unwrap();
                let name = lp_name(name.trim()).to_string();
                trans
                    .last_mut()
                    .unwrap()
                    .items
                    .push((name, cnt, String::new()));
                want_key = true;
            }
        } else if want_key && line.starts_with('\t') {
            want_key = false;
            let it = trans.last_mut().unwrap().items.last_mut().unwrap();
            if let Some(k) = lp_key(&it.0, line) {
                it.2 = k;
            }
        }
    }
    (sum.expect("xfs_logprint printed no log summary"), trans)
}

/// Map logprint's item names to ours where they differ.
fn lp_name(n: &str) -> &str {
    match n {
        "DQ" => "DQUOT",
        other => other,
    }
}

fn item_counts<K: Ord>(items: impl Iterator<Item = K>) -> BTreeMap<K, usize> {
    let mut m = BTreeMap::new();
    for k in items {
        *m.entry(k).or_default() += 1;
    }
    m
}

/// Compare our reading of the log with xfs_logprint's, item for item.
fn compare_with_logprint(img: &Path, st: &LogState, c: &LogContents) {
    let (sum, lp) = logprint(img);
    assert_eq!(sum.dirty, !st.clean, "logprint {sum:?} vs ours {st}");
    assert_eq!(
        sum.head,
        st.head.block(),
        "head: logprint {sum:?} vs ours {st}"
    );
    assert_eq!(
        sum.tail,
        st.tail.block(),
        "tail: logprint {sum:?} vs ours {st}"
    );
    assert_eq!(lp.len(), c.transactions.len(), "committed transactions");
    let order = c.order.unwrap_or(rxfs::format::log::HostOrder::Little);
    for (i, (l, t)) in lp.iter().zip(&c.transactions).enumerate() {
        assert_eq!(l.num_items, t.header.num_items, "transaction {i} header");
        let regions: usize = t.items.iter().map(|it| it.regions.len()).sum();
        assert_eq!(
            regions, t.header.num_items as usize,
            "transaction {i}: regions = num_items"
        );
        let ours = item_counts(t.items.iter().map(|it| {
            let f = it
                .format(order, rxfs::error::Location::Unknown)
                .unwrap_or_else(|e| panic!("transaction {i}: {e}"));
            (f.name().to_string(), it.regions.len(), our_key(&f))
        }));
        let theirs = item_counts(l.items.iter().cloned());
        assert_eq!(ours, theirs, "transaction {i} items");
    }
}

/// Open a dirty image both ways, check the log and compare with logprint.
/// Returns the state and contents.
fn check_dirty(img: &Path) -> (LogState, LogContents) {
    // A read-only open recovers in memory (see tests/recover_kernel.rs),
    // unless it needs what rxfs cannot finish yet (intents other than
    // EFIs, unlinked inodes with btree forks).
    match open(img, false) {
        Ok(fs) => assert!(fs.recovery_stats().is_some(), "no recovery ran"),
        Err(Error::NotSupported(m))
            if m.contains("unfinished intents") || m.contains("not implemented yet") =>
        {
            assert!(m.contains("norecovery"), "{m}");
        }
        Err(e) => panic!("expected in-memory recovery, got {e}"),
    }
    let fs = open(img, true).expect("ro,norecovery opens a dirty log");
    let st = fs.log_state().expect("log state computed").clone();
    assert!(!st.clean && st.needs_recovery(), "{st}");
    assert_eq!(st.torn_from, None, "{st}");
    let log = fs.log().unwrap();
    let mut crcs = 0;
    log.for_each_record(st.tail.block(), st.head.block(), |r| {
        assert_eq!(r.record.crc, CrcCheck::Good, "record at block {}", r.block);
        crcs += 1;
        Ok(())
    })
    .unwrap();
    let c = log.contents(&st).unwrap();
    assert_eq!(c.records, crcs);
    assert_eq!(c.unset_crcs, 0);
    compare_with_logprint(img, &st, &c);
    let order = c.order.unwrap();
    let hist = item_counts(
        c.transactions
            .iter()
            .flat_map(|t| &t.items)
            .map(|it| (item_type_name(it.item_type(order)).to_string(), 0)),
    );
    eprintln!(
        "{st}: {} records, {} checkpoints, items {hist:?}",
        c.records,
        c.transactions.len()
    );
    (st, c)
}

fn check_clean(img: &Path) -> LogState {
    let fs = open(img, false).expect("clean log opens");
    let st = fs.log_state().expect("log state").clone();
    assert!(st.clean, "{st}");
    assert_eq!(st.head, st.tail);
    let c = fs.log().unwrap().contents(&st).unwrap();
    assert_eq!(c.records, 0);
    compare_with_logprint(img, &st, &c);
    st
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn fresh_mkfs_log_is_clean() {
    if !kernel_tests_enabled() {
        return;
    }
    let s = Scratch::new("log-fresh");
    mkfs_img(&s, 1 << 30, &[]);
    let st = check_clean(&s.path("img"));
    assert_eq!((st.head.cycle(), st.head.block()), (1, 2), "{st}");
    let r = st.last_record.as_ref().unwrap();
    assert!(r.unmount && r.block == 0);
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn xfs_db_logformat_cycle() {
    if !kernel_tests_enabled() {
        return;
    }
    // `logformat -c 5` writes an unmount record of cycle 5 at block 0 and
    // fills the rest of the log with cycle-4 records (zero CRCs).
    let s = Scratch::new("log-logformat");
    mkfs_img(&s, 1 << 30, &[]);
    run(
        "xfs_db",
        &[
            "-x",
            "-c",
            "logformat -c 5",
            s.path("img").to_str().unwrap(),
        ],
    );
    let st = check_clean(&s.path("img"));
    assert_eq!(st.head, rxfs::types::Lsn::new(5, 2), "{st}");
    let m = mount(&s, "");
    let mnt = s.path("mnt");
    let mnt = mnt.to_str().unwrap();
    workload(mnt, 200);
    sh(&format!("sync && xfs_io -x -c 'shutdown -f' {mnt}"));
    m.umount();
    let (st, _) = check_dirty(&s.path("img"));
    assert_eq!(st.head.cycle(), 5, "{st}");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn mkfs_variants_clean_and_dirty() {
    if !kernel_tests_enabled() {
        return;
    }
    // Log stripe units (records padded to them; mkfs writes its unmount
    // record with h_len = su but h_size = 32 KiB), 4 KiB sectors, 1 KiB
    // blocks.
    for opts in [
        &["-l", "su=256k"][..],
        &["-l", "su=32k"],
        &["-s", "size=4096"],
        &["-b", "size=1024"],
        &["-s", "size=4096", "-l", "su=64k"],
    ] {
        let s = Scratch::new("log-variants");
        mkfs_img(&s, 1 << 30, opts);
        let st = check_clean(&s.path("img"));
        eprintln!("{opts:?}: fresh {st}");
        let m = mount(&s, "");
        let mnt = s.path("mnt");
        let mnt = mnt.to_str().unwrap();
        workload(mnt, 300);
        sh(&format!("sync && xfs_io -x -c 'shutdown -f' {mnt}"));
        m.umount();
        let (st, _) = check_dirty(&s.path("img"));
        if let Some(su) = opts.iter().find_map(|o| o.strip_prefix("su=")) {
            let su_bbs: u32 = su.trim_end_matches('k').parse::<u32>().unwrap() * 2;
            let r = st.last_record.as_ref().unwrap();
            let hblks = rxfs::format::log_record::header_blocks_for(2, r.buf_size);
            let total = hblks + r.len.div_ceil(512);
            assert_eq!(
                total % su_bbs,
                0,
                "{opts:?}: records padded to the stripe unit"
            );
        }
        let m = mount(&s, "");
        m.umount();
        check_clean(&s.path("img"));
    }
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn kernel_umount_leaves_clean_log() {
    if !kernel_tests_enabled() {
        return;
    }
    let s = Scratch::new("log-umount");
    mkfs_img(&s, 1 << 30, &[]);
    let m = mount(&s, "");
    let mnt = s.path("mnt");
    let mnt = mnt.to_str().unwrap();
    sh(&format!(
        "mkdir {mnt}/d && for i in $(seq 1 300); do echo $i > {mnt}/d/f$i; done"
    ));
    m.umount();
    let st = check_clean(&s.path("img"));
    assert!(st.head.block() > 2, "the kernel wrote records: {st}");
}

/// Create, write, and remove files: a mix of inode, buffer and intent items.
fn workload(mnt: &str, files: u32) {
    sh(&format!(
        "mkdir -p {mnt}/d && cd {mnt}/d && for i in $(seq 1 {files}); do \
           echo $i > f$i; done && \
         dd if=/dev/zero of=big bs=64k count=64 status=none && \
         for i in $(seq 1 5 {files}); do rm f$i; done && \
         for i in $(seq 1 20); do mkdir s$i; setfattr -n user.a -v $i s$i 2>/dev/null || true; done"
    ));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn shutdown_leaves_dirty_log() {
    if !kernel_tests_enabled() {
        return;
    }
    let s = Scratch::new("log-dirty");
    mkfs_img(&s, 1 << 30, &[]);
    let m = mount(&s, "");
    let mnt = s.path("mnt");
    let mnt = mnt.to_str().unwrap();
    workload(mnt, 2000);
    sh(&format!("sync && xfs_io -x -c 'shutdown -f' {mnt}"));
    m.umount();
    let (st, c) = check_dirty(&s.path("img"));
    let items: usize = c.transactions.iter().map(|t| t.items.len()).sum();
    assert!(
        items > 500,
        "many items: {items} in {} checkpoints ({st})",
        c.transactions.len()
    );
    assert!(c.transactions.iter().all(|t| t.header.trans_type == 40));
    // The kernel replays it; then the log is clean.
    let m = mount(&s, "");
    m.umount();
    check_clean(&s.path("img"));
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn wrapped_small_log_dirty() {
    if !kernel_tests_enabled() {
        return;
    }
    let s = Scratch::new("log-wrap");
    mkfs_img(&s, 320 << 20, &["-l", "size=8m"]);
    let m = mount(&s, "");
    let mnt = s.path("mnt");
    let mnt = mnt.to_str().unwrap();
    sh(&format!(
        "mkdir {mnt}/t && cd {mnt}/t && for i in $(seq 1 200); do : > f$i; done"
    ));
    // Each round relogs 200 inode cores (~50 KiB of log) and forces the log.
    // Go around the 8 MiB log until it has wrapped twice and the live part
    // (tail to head) crosses the physical end of the log.
    let mut straddles = false;
    for _ in 0..3000 {
        sh(&format!("cd {mnt}/t && touch f* && xfs_io -c fsync f1"));
        let Ok(fs) = open(&s.path("img"), true) else {
            continue;
        };
        if let Some(st) = fs.log_state() {
            if st.head.cycle() >= 3 && st.head.block() < st.tail.block() {
                straddles = true;
                break;
            }
        }
    }
    assert!(straddles, "the live log never crossed the end of the log");
    sh(&format!("xfs_io -x -c 'shutdown -f' {mnt}"));
    m.umount();
    let (st, c) = check_dirty(&s.path("img"));
    assert!(st.head.cycle() >= 3, "the log wrapped: {st}");
    assert!(
        st.head.block() < st.tail.block(),
        "tail to head crosses the end: {st}"
    );
    assert!(!c.transactions.is_empty());
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn interrupted_remove_leaves_intents() {
    if !kernel_tests_enabled() {
        return;
    }
    // Removing a file of 12,800 extents takes many rolled transactions, each
    // freeing extents through EFI/EFD pairs; a shutdown in the middle leaves
    // intents in the log.
    for delay in ["0.02", "0.01", "0.005", "0.05", "0.002"] {
        let s = Scratch::new("log-intents");
        mkfs_img(&s, 1 << 30, &[]);
        let m = mount(&s, "");
        let mnt = s.path("mnt");
        let mnt = mnt.to_str().unwrap();
        let cmds: Vec<String> = (0..12800u64)
            .map(|i| format!("falloc {} 4k", i * 8192))
            .collect();
        let frag = format!("{mnt}/frag");
        let mut args = vec!["-f"];
        for c in &cmds {
            args.extend(["-c", c.as_str()]);
        }
        args.push(&frag);
        run("xfs_io", &args);
        sh("sync");
        sh(&format!(
            "rm {mnt}/frag & sleep {delay}; xfs_io -x -c 'shutdown -f' {mnt}; wait; true"
        ));
        m.umount();
        let (_, c) = check_dirty(&s.path("img"));
        let order = c.order.unwrap();
        let efis = c
            .transactions
            .iter()
            .flat_map(|t| &t.items)
            .filter_map(|it| it.format(order, rxfs::error::Location::Unknown).ok())
            .filter(|f| matches!(f, ItemFormat::Efi { .. }))
            .count();
        if efis > 0 {
            return;
        }
        eprintln!("no EFI in the log after {delay}s; trying another delay");
    }
    panic!("no interrupted remove left an EFI in the log");
}

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn big_log_buffers_extended_headers() {
    if !kernel_tests_enabled() {
        return;
    }
    let s = Scratch::new("log-logbsize");
    mkfs_img(&s, 1 << 30, &[]);
    let m = mount(&s, "logbsize=256k");
    let mnt = s.path("mnt");
    let mnt = mnt.to_str().unwrap();
    workload(mnt, 3000);
    sh(&format!("sync && xfs_io -x -c 'shutdown -f' {mnt}"));
    m.umount();
    let (st, c) = check_dirty(&s.path("img"));
    let fs = open(&s.path("img"), true).unwrap();
    let log = fs.log().unwrap();
    let mut big = 0;
    log.for_each_record(st.tail.block(), st.head.block(), |r| {
        assert_eq!(r.record.header.size, 256 * 1024);
        assert_eq!(r.record.ext.len(), 7);
        if r.record.header.len > 32 * 1024 {
            big += 1;
        }
        Ok(())
    })
    .unwrap();
    assert!(
        big > 0,
        "records over 32 KiB use extended headers ({} records)",
        c.records
    );
    // Clean unmount with big buffers too.
    let m = mount(&s, "logbsize=256k");
    sh(&format!("touch {mnt}/after"));
    m.umount();
    check_clean(&s.path("img"));
}
