//! Readers against writers on the same inodes (issue 13): the read path
//! must see an inode (core and fork blocks) before or after a transaction,
//! never half of one. Without that, a healthy filesystem answered EUCLEAN
//! ("btree holds 664 extents, inode says 665", "attr fork ... block 0 has
//! magic") through the FUSE mount.
//!
//! Writers change three inodes in every way they can: a file whose data
//! fork grows into a btree (4 KiB at every other 8 KiB, so extents never
//! merge), gets holes punched, is truncated down and regrown; the same
//! file's xattrs moving through shortform, leaf, node and remote values
//! (one replaced between 10 and 3000 bytes all the time, as generic/403);
//! a directory growing to thousands of names (block, leaf, node form) and
//! shrinking, names renamed out and back in, a symlink replaced by rename.
//! Readers use the public read API as the FUSE driver does (`iget`, then
//! the operation on that inode): any error a race cannot explain (a name
//! or xattr removed, an inode freed meanwhile) is a failure. The amount of work is fixed; the interleaving
//! is not. After unmount `xfs_repair -n` must be clean. Needs root and
//! xfsprogs.

mod common;
mod reader_stress_support;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use common::*;
use reader_stress_support::readers::reader;
use reader_stress_support::writers::{attr_writer, data_writer, dir_writer, setup, Ctx, Forms};
use reader_stress_support::Tally;
use rxfs::{Filesystem, MountOptions};

/// Reader threads.
const READERS: u64 = 3;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn readers_never_see_half_a_transaction() {
    require_root();
    require_tools(&["mkfs.xfs", "xfs_repair"]);
    let s = Scratch::new("reader-stress");
    let img = s.path("img");
    // Small blocks: forms change and btrees deepen after little work.
    mkfs(&img, 512 << 20, &["-b", "size=1024", "-n", "size=4096"]);
    let opts = MountOptions {
        read_only: false,
        ..Default::default()
    };
    let fs = Filesystem::open_path(&img, None, opts).unwrap();
    let sh = Arc::new(setup(&fs));
    let tally = Arc::new(Tally::default());
    let done = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let readers: Vec<_> = (0..READERS)
        .map(|t| {
            let (fs, sh, tally, done) = (fs.clone(), sh.clone(), tally.clone(), done.clone());
            std::thread::spawn(move || reader(&fs, &sh, &tally, 1 + t, &done))
        })
        .collect();
    let forms = Arc::new(Forms::default());
    let writers = [data_writer as fn(&Ctx), attr_writer, dir_writer].map(|w| {
        let (fs, sh, forms, tally) = (fs.clone(), sh.clone(), forms.clone(), tally.clone());
        std::thread::spawn(move || {
            w(&Ctx {
                fs: &fs,
                sh: &sh,
                forms: &forms,
                tally: &tally,
            });
            t0.elapsed().as_secs_f64()
        })
    });
    let mut writer_panic = None;
    let mut writer_secs = Vec::new();
    for w in writers {
        match w.join() {
            Ok(secs) => writer_secs.push(format!("{secs:.1}")),
            Err(p) => writer_panic = Some(p),
        }
    }
    done.store(true, Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    eprintln!(
        "writers (data, xattr, dir) done after {} s; they reached: {}",
        writer_secs.join(", "),
        forms.summary()
    );
    eprintln!("{}", tally.summary());
    if let Some(p) = writer_panic {
        std::panic::resume_unwind(p);
    }
    fs.unmount().unwrap();
    run("xfs_repair", &["-n", img.to_str().unwrap()]);
    tally.assert_clean();
    forms.assert_reached();
}
