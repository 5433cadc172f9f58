//! One dirty image recovered three ways, compared:
//!
//! - A: the kernel (mount rw, umount, walk a ro mount) — the oracle;
//! - B: rxfs read-only open, recovering in memory (library walk);
//! - C: rxfs `recover_to_device`, then `xfs_repair -n` must exit 0 and a
//!   kernel mount must show A's tree.
//!
//! Besides the trees, the space accounting must agree: per AG the free
//! blocks as the superblock counts them (`freeblks + flcount + btreeblks`
//! of the AGF), the allocated and free inodes of the AGI, and the
//! superblock counters, between A and C (and B's in-memory superblock).
//! This is what shows that finishing intents and freeing unlinked inodes
//! freed exactly what the kernel freed.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use super::{diff, kernel_walk, rxfs_walk};
use crate::common::*;
use rxfs::recover::RecoveryStats;
use rxfs::Filesystem;

/// Space accounting of an image: per AG (free blocks incl. AGFL and
/// free-space btree blocks, inodes, free inodes), then the superblock's
/// (icount, ifree, fdblocks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    pub ags: Vec<(u64, u32, u32)>,
    pub sb: (u64, u64, u64),
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes(b[o..o + 4].try_into().unwrap())
}
fn be64(b: &[u8], o: usize) -> u64 {
    u64::from_be_bytes(b[o..o + 8].try_into().unwrap())
}

/// Read [`Counts`] straight from an image file (clean log assumed).
pub fn counts(img: &Path) -> Counts {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(img).unwrap();
    let mut sb = vec![0u8; 512];
    f.read_exact_at(&mut sb, 0).unwrap();
    let blocksize = be32(&sb, 4) as u64;
    let agblocks = be32(&sb, 84) as u64;
    let agcount = be32(&sb, 88);
    let sectsize = u16::from_be_bytes([sb[102], sb[103]]) as u64;
    let mut ags = Vec::new();
    for agno in 0..agcount as u64 {
        let base = agno * agblocks * blocksize;
        let mut agf = vec![0u8; 512];
        let mut agi = vec![0u8; 512];
        f.read_exact_at(&mut agf, base + sectsize).unwrap();
        f.read_exact_at(&mut agi, base + 2 * sectsize).unwrap();
        assert_eq!(&agf[..4], b"XAGF");
        assert_eq!(&agi[..4], b"XAGI");
        let free = be32(&agf, 52) as u64 + be32(&agf, 48) as u64 + be32(&agf, 60) as u64;
        ags.push((free, be32(&agi, 16), be32(&agi, 28)));
    }
    Counts {
        ags,
        sb: (be64(&sb, 128), be64(&sb, 136), be64(&sb, 144)),
    }
}

fn cp(from: &Path, to: &Path) {
    run(
        "cp",
        &[
            "--sparse=always",
            from.to_str().unwrap(),
            to.to_str().unwrap(),
        ],
    );
}

fn open_rw_dev(p: &Path) -> Arc<dyn rxfs::bdev::BlockDevice> {
    Arc::new(rxfs::bdev::FileDevice::open(p, false, false).unwrap())
}

/// What [`recover_three_ways`] found.
pub enum Recovery {
    /// Recovered three ways and compared: rxfs's stats, the log head cycle.
    Compared(RecoveryStats, u32),
    /// rxfs refused the log (intents it cannot finish): the message.
    Refused(String),
}

/// Recover the dirty image `img` three ways (scratch files beside it under
/// `scr`) and compare; panics with `seed` in the message on a difference.
/// Removes its scratch files and `img`.
pub fn recover_three_ways(scr: &Scratch, img: &Path, seed: u64) -> Recovery {
    let mnt = scr.path("mnt");
    let (a, b, c) = (scr.path("a"), scr.path("b"), scr.path("c"));
    for x in [&a, &b, &c] {
        cp(img, x);
    }
    let cleanup = || {
        for x in [&a, &b, &c, &img.to_path_buf()] {
            let _ = std::fs::remove_file(x);
        }
    };
    // A: the kernel's recovery.
    KernelMount::new(&a, &mnt, "").umount();
    let mut want_counts = counts(&a);
    // The kernel leaves an unlinked inode on its AGI list when inactivating
    // it fails (an attr fork whose blocks the log cancelled: its verifier
    // refuses the zeroed block), and xfs_repair then flags the image. rxfs
    // frees such an inode without reading the cancelled blocks. Where that
    // happened, the kernel's counters are adjusted by exactly those inodes
    // (and the rxfs result must be repair-clean, checked below).
    let leaked = kernel_leftover_unlinked(&a);
    if !leaked.is_empty() {
        let repair_ok = Command::new("xfs_repair")
            .args(["-n", a.to_str().unwrap()])
            .output()
            .unwrap()
            .status
            .success();
        assert!(
            !repair_ok,
            "seed {seed}: the kernel left inodes on its unlinked lists yet repair is clean"
        );
        eprintln!("seed {seed}: the kernel's recovery left unlinked inodes behind: {leaked:?}");
        want_counts = adjust_for_leaked(&want_counts, &leaked);
    }
    let ma = KernelMount::new(&a, &mnt, "ro");
    let want = kernel_walk(&mnt);
    ma.umount();
    // B: rxfs in memory.
    let opened = Filesystem::open_path(
        &b,
        None,
        rxfs::MountOptions {
            read_only: true,
            ..Default::default()
        },
    );
    let fs = match opened {
        Err(rxfs::Error::NotSupported(msg)) if msg.contains("unfinished intents") => {
            // Intents rxfs cannot finish: refused on both paths, nothing
            // written.
            let e = rxfs::fs::recover_to_device(open_rw_dev(&c)).unwrap_err();
            assert!(
                e.to_string().contains("unfinished intents"),
                "seed {seed}: {e}"
            );
            let same = Command::new("cmp").args([img, &c]).status().unwrap();
            assert!(
                same.success(),
                "seed {seed}: a refused recovery wrote the device"
            );
            cleanup();
            return Recovery::Refused(msg);
        }
        r => r.unwrap_or_else(|e| panic!("seed {seed}: rxfs in-memory recovery: {e}")),
    };
    let stats = fs.recovery_stats().cloned().unwrap_or_default();
    let cycle = fs.log_state().map(|s| s.head.cycle()).unwrap_or(0);
    let got = rxfs_walk(&fs);
    let sb = fs.sb();
    let b_sb = (sb.icount, sb.ifree, sb.fdblocks);
    drop(fs);
    if let Some(d) = diff(&want, &got) {
        panic!("seed {seed}: rxfs in-memory recovery differs from the kernel's:\n{d}");
    }
    if b_sb != want_counts.sb {
        keep_failure(img, &a, seed);
    }
    assert_eq!(
        b_sb, want_counts.sb,
        "seed {seed}: superblock counters (icount, ifree, fdblocks) after in-memory \
         recovery, rxfs vs kernel ({stats})"
    );
    // C: rxfs recovery onto the device.
    let st2 = rxfs::fs::recover_to_device(open_rw_dev(&c))
        .unwrap_or_else(|e| panic!("seed {seed}: recover_to_device: {e}"));
    // Recovered: the log is clean now, a second run replays nothing.
    let again = rxfs::fs::recover_to_device(open_rw_dev(&c)).unwrap();
    assert_eq!(
        again,
        RecoveryStats::default(),
        "seed {seed}: second recovery"
    );
    let fs_c = open_ro(&c);
    assert!(
        fs_c.recovery_stats().is_none(),
        "seed {seed}: log still dirty"
    );
    if let Some(d) = diff(&want, &rxfs_walk(&fs_c)) {
        panic!("seed {seed}: rxfs view after recover_to_device differs:\n{d}");
    }
    drop(fs_c);
    assert_eq!(st2, stats, "seed {seed}: both recoveries do the same");
    let out = Command::new("xfs_repair")
        .args(["-n", c.to_str().unwrap()])
        .output()
        .unwrap();
    if !out.status.success() {
        keep_failure(img, &a, seed);
    }
    assert!(
        out.status.success(),
        "seed {seed}: xfs_repair -n after rxfs recovery ({stats}):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        comparable(counts(&c), !leaked.is_empty()),
        comparable(want_counts, !leaked.is_empty()),
        "seed {seed}: space accounting after recover_to_device, rxfs vs kernel ({stats})"
    );
    let mc = KernelMount::new(&c, &mnt, "ro");
    let got_c = kernel_walk(&mnt);
    mc.umount();
    if let Some(d) = diff(&want, &got_c) {
        panic!("seed {seed}: kernel view after rxfs recover_to_device differs:\n{d}");
    }
    cleanup();
    Recovery::Compared(stats, cycle)
}

/// Sum `s` into `t`.
pub fn add(t: &mut RecoveryStats, s: &RecoveryStats) {
    t.records += s.records;
    t.transactions += s.transactions;
    t.items += s.items;
    t.buf_replayed += s.buf_replayed;
    t.buf_skipped_lsn += s.buf_skipped_lsn;
    t.buf_cancelled += s.buf_cancelled;
    t.buf_cancel_items += s.buf_cancel_items;
    t.inode_buf_replayed += s.inode_buf_replayed;
    t.sb_replayed += s.sb_replayed;
    t.inode_replayed += s.inode_replayed;
    t.inode_skipped_lsn += s.inode_skipped_lsn;
    t.inode_cancelled += s.inode_cancelled;
    t.icreate_replayed += s.icreate_replayed;
    t.icreate_cancelled += s.icreate_cancelled;
    t.intents_done += s.intents_done;
    t.unfinished_intents += s.unfinished_intents;
    t.intents_finished += s.intents_finished;
    t.intent_blocks_freed += s.intent_blocks_freed;
    t.overlay_bytes += s.overlay_bytes;
    t.unlinked_buckets += s.unlinked_buckets;
    t.unlinked_inodes_freed += s.unlinked_inodes_freed;
    t.unlinked_blocks_freed += s.unlinked_blocks_freed;
    t.inode_chunks_freed += s.inode_chunks_freed;
}

/// Keep a failing seed's dirty image and the kernel's recovered copy under
/// /tmp/rxfs-recover-failures/ and print `xfs_repair -n` of the kernel's copy
/// (to tell a kernel leak from an rxfs mistake).
fn keep_failure(dirty: &Path, kernel: &Path, seed: u64) {
    let dir = Path::new("/tmp/rxfs-recover-failures");
    let _ = std::fs::create_dir_all(dir);
    cp(dirty, &dir.join(format!("seed{seed}.dirty")));
    cp(kernel, &dir.join(format!("seed{seed}.kernel")));
    let out = Command::new("xfs_repair")
        .args(["-n", kernel.to_str().unwrap()])
        .output()
        .unwrap();
    eprintln!(
        "seed {seed}: kept in {}; xfs_repair -n of the kernel's recovery: {}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
}

/// An inode the kernel's recovery left on an AGI unlinked list.
#[derive(Debug)]
pub struct Leaked {
    pub agno: usize,
    pub ino: u64,
    pub nblocks: u64,
}

fn db(img: &Path, cmds: &[&str]) -> String {
    let mut args = vec!["-r".to_string()];
    for c in cmds {
        args.push("-c".into());
        args.push(c.to_string());
    }
    args.push(img.to_str().unwrap().into());
    let out = Command::new("xfs_db").args(&args).output().unwrap();
    assert!(out.status.success(), "xfs_db {cmds:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn db_field(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} =")))
        .unwrap_or_else(|| panic!("xfs_db: no {name} in {out}"))
        .trim()
        .to_string()
}

/// Every inode on the AGI unlinked lists of a clean image (via xfs_db).
pub fn kernel_leftover_unlinked(img: &Path) -> Vec<Leaked> {
    let sb = db(img, &["sb 0", "print agcount agblklog inopblog"]);
    let agcount: usize = db_field(&sb, "agcount").parse().unwrap();
    let shift: u32 = db_field(&sb, "agblklog").parse::<u32>().unwrap()
        + db_field(&sb, "inopblog").parse::<u32>().unwrap();
    let mut found = Vec::new();
    for agno in 0..agcount {
        let agi = db(img, &[&format!("agi {agno}"), "print unlinked"]);
        let line = db_field(&agi, "unlinked[0-63]");
        for pair in line.split_whitespace() {
            let (_, first) = pair.split_once(':').unwrap();
            let mut agino: u64 = first.parse().unwrap();
            // Follow the chain (bounded: a list longer than this is corrupt).
            for _ in 0..100_000 {
                let ino = ((agno as u64) << shift) | agino;
                let out = db(
                    img,
                    &[&format!("inode {ino}"), "print core.nblocks next_unlinked"],
                );
                found.push(Leaked {
                    agno,
                    ino,
                    nblocks: db_field(&out, "core.nblocks").parse().unwrap(),
                });
                match db_field(&out, "next_unlinked").parse::<u64>() {
                    Ok(next) => agino = next,
                    Err(_) => break,
                }
            }
        }
    }
    found
}

/// `c` as if the `leaked` inodes had been freed: per-AG free inodes, the
/// total of free blocks (their blocks may lie in any AG), sb counters.
pub fn adjust_for_leaked(c: &Counts, leaked: &[Leaked]) -> Counts {
    let mut c = c.clone();
    let blocks: u64 = leaked.iter().map(|l| l.nblocks).sum();
    for l in leaked {
        c.ags[l.agno].2 += 1;
    }
    if let Some(first) = c.ags.first_mut() {
        first.0 += blocks;
    }
    c.sb.1 += leaked.len() as u64;
    c.sb.2 += blocks;
    c
}

/// With leaked inodes adjusted for, per-AG free blocks compare as a total.
pub fn comparable(mut c: Counts, total_blocks: bool) -> Counts {
    if total_blocks {
        let sum: u64 = c.ags.iter().map(|a| a.0).sum();
        for (i, a) in c.ags.iter_mut().enumerate() {
            a.0 = if i == 0 { sum } else { 0 };
        }
    }
    c
}
