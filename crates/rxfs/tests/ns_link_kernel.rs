//! link, symlink, O_TMPFILE and open-but-unlinked inodes through the
//! read-write `Filesystem` API, against the kernel oracle: after each
//! scenario, unmount, `xfs_repair -n` exit 0, and the kernel's view (link
//! counts, inode numbers, symlink targets, file bytes) equals the model.
//! Crash variants abandon the mount with inodes on the AGI unlinked lists:
//! both the kernel's and rxfs's recovery must free them.

mod common;
mod ns_support;

use std::collections::BTreeMap;

use common::*;
use ns_support::*;
use rxfs::fs::ops_ns::CreateArgs;

#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn link_across_directories_and_unlink_original() {
    let (s, img) = setup("nslink_link", &[]);
    let fs = rw(&img);
    let root = fs.root_ino();
    let d1 = fs
        .mkdir(root, b"d1", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let d2 = fs
        .mkdir(root, b"d2", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let f = fs
        .create(d1, b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    fs.write(f, 0, b"hello links").unwrap();
    fs.link(f, d2, b"g").unwrap();
    fs.link(f, root, b"h").unwrap();
    // Errors, nothing changed.
    assert!(matches!(fs.link(f, d2, b"g"), Err(rxfs::Error::Exists)));
    assert!(matches!(
        fs.link(d1, d2, b"dirlink"),
        Err(rxfs::Error::Perm)
    ));
    fs.unlink(d1, b"f").unwrap();
    assert_eq!(fs.iget(f).unwrap().core.nlink, 2);
    fs.unmount().unwrap();
    drop(fs);
    let mut want = BTreeMap::new();
    want.insert("/d1".into(), seen(d1, 2, b"<dir>"));
    want.insert("/d2".into(), seen(d2, 2, b"<dir>"));
    want.insert("/d2/g".into(), seen(f, 2, b"hello links"));
    want.insert("/h".into(), seen(f, 2, b"hello links"));
    check(&img, &s, &want);
}

/// Inline and remote symlink targets of every length class, with 4 KiB and
/// 1 KiB blocks (where a 1024-byte target needs two blocks).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn symlink_inline_and_remote_targets() {
    for opts in [&[][..], &["-b", "size=1024"][..]] {
        let (s, img) = setup("nslink_symlink", opts);
        let fs = rw(&img);
        let root = fs.root_ino();
        let mut want = BTreeMap::new();
        for (i, len) in [1usize, 50, 300, 336, 337, 600, 968, 969, 1022, 1023]
            .into_iter()
            .enumerate()
        {
            let target: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
            let name = format!("l{len}");
            let ino = fs
                .symlink(root, name.as_bytes(), &target, &CreateArgs::root(0))
                .unwrap()
                .ino;
            assert_eq!(fs.readlink(&fs.iget(ino).unwrap()).unwrap(), target);
            want.insert(format!("/{name}"), seen(ino, 1, &target));
        }
        assert!(matches!(
            fs.symlink(root, b"big", &[b'x'; 1024], &CreateArgs::root(0)),
            Err(rxfs::Error::NameTooLong)
        ));
        assert!(fs.symlink(root, b"l1", b"x", &CreateArgs::root(0)).is_err());
        // Remove some (blocks freed), keep the rest.
        for len in [50usize, 969] {
            fs.unlink(root, format!("l{len}").as_bytes()).unwrap();
            want.remove(&format!("/l{len}"));
        }
        fs.unmount().unwrap();
        drop(fs);
        check(&img, &s, &want);
    }
}

/// Files unlinked while referenced stay readable, sit on the unlinked
/// lists (several in one bucket: predecessors are edited), and are freed
/// at their last unref in a shuffled order, or at unmount.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn open_unlinked_files_freed_at_last_unref() {
    let (s, img) = setup("nslink_orphans", &[]);
    let fs = rw(&img);
    let root = fs.root_ino();
    let mut inos = Vec::new();
    let dirs = [
        fs.mkdir(root, b"a", &CreateArgs::root(0o40755))
            .unwrap()
            .ino,
        fs.mkdir(root, b"b", &CreateArgs::root(0o40755))
            .unwrap()
            .ino,
    ];
    // The same files created and removed while not open: the space
    // baseline (inode chunks stay allocated).
    for i in 0..200u64 {
        let d = dirs[i as usize % 2];
        let ino = fs
            .create(d, format!("f{i}").as_bytes(), &CreateArgs::root(0o100644))
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 5000)).unwrap();
    }
    for i in 0..200u64 {
        fs.unlink(dirs[i as usize % 2], format!("f{i}").as_bytes())
            .unwrap();
    }
    let before = fs.statfs().unwrap();
    for i in 0..200u64 {
        let ino = fs
            .create(
                dirs[i as usize % 2],
                format!("f{i}").as_bytes(),
                &CreateArgs::root(0o100644),
            )
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 5000)).unwrap();
        fs.inode_ref(ino);
        inos.push(ino);
    }
    for i in 0..200u64 {
        fs.unlink(dirs[i as usize % 2], format!("f{i}").as_bytes())
            .unwrap();
    }
    // Still readable through the open reference.
    let mut buf = vec![0u8; 5000];
    let ip = fs.iget(inos[7]).unwrap();
    assert_eq!(ip.core.nlink, 0);
    fs.read_file(&ip, 0, &mut buf).unwrap();
    assert_eq!(buf, pattern(7, 5000));
    // Free 150 in a scrambled order; leave 50 for unmount.
    let mut order: Vec<usize> = (0..200).collect();
    let mut x = 12345u64;
    for i in (1..order.len()).rev() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        order.swap(i, (x >> 33) as usize % (i + 1));
    }
    for &i in &order[..150] {
        fs.inode_unref(inos[i], 1).unwrap();
        assert!(fs.iget(inos[i]).is_err() || fs.iget(inos[i]).unwrap().core.mode == 0);
    }
    fs.unmount().unwrap();
    drop(fs);
    let mut want = BTreeMap::new();
    want.insert("/a".into(), seen(dirs[0], 2, b"<dir>"));
    want.insert("/b".into(), seen(dirs[1], 2, b"<dir>"));
    check(&img, &s, &want);
    let fs = rw(&img);
    let after = fs.statfs().unwrap();
    fs.unmount().unwrap();
    assert_eq!(
        (after.bfree, after.ffree),
        (before.bfree, before.ffree),
        "every block and inode came back"
    );
}

/// The last unref of a file that still has a link runs no transaction
/// (the kernel's last iput of a linked inode logs nothing either); the
/// file is then freed by the unlink itself, with nobody holding it.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn last_unref_of_a_linked_file_logs_nothing() {
    let (s, img) = setup("nslink_unref_linked", &[]);
    let fs = rw(&img);
    let root = fs.root_ino();
    let mut inos = Vec::new();
    for i in 0..50u64 {
        let ino = fs
            .create(
                root,
                format!("f{i}").as_bytes(),
                &CreateArgs::root(0o100644),
            )
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 3000)).unwrap();
        fs.inode_ref(ino);
        inos.push(ino);
    }
    let before = fs.stats().trans_allocs;
    for &ino in &inos {
        fs.inode_unref(ino, 1).unwrap();
    }
    assert_eq!(fs.stats().trans_allocs, before);
    // Unlinked now, with no reference left: freed by the unlink.
    let free = fs.statfs().unwrap().ffree;
    for i in 0..25u64 {
        fs.unlink(root, format!("f{i}").as_bytes()).unwrap();
        assert_eq!(
            fs.iget(inos[i as usize])
                .map(|ip| ip.core.mode)
                .unwrap_or(0),
            0
        );
    }
    assert_eq!(fs.statfs().unwrap().ffree, free + 25);
    fs.unmount().unwrap();
    drop(fs);
    let mut want = BTreeMap::new();
    for i in 25..50u64 {
        want.insert(
            format!("/f{i}"),
            seen(inos[i as usize], 1, &pattern(i, 3000)),
        );
    }
    check(&img, &s, &want);
}

/// A crash with referenced, unlinked files and an O_TMPFILE inode on the
/// lists: the kernel's recovery frees them, and so does rxfs's.
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn crash_with_open_unlinked_and_tmpfile_recovers() {
    for kernel in [true, false] {
        let (s, img) = setup("nslink_crash", &[]);
        let fs = rw(&img);
        let root = fs.root_ino();
        let keep = fs
            .create(root, b"keep", &CreateArgs::root(0o100644))
            .unwrap()
            .ino;
        fs.write(keep, 0, b"kept").unwrap();
        for i in 0..20u64 {
            let ino = fs
                .create(
                    root,
                    format!("o{i}").as_bytes(),
                    &CreateArgs::root(0o100644),
                )
                .unwrap()
                .ino;
            fs.write(ino, 0, &pattern(i, 9000)).unwrap();
            fs.inode_ref(ino);
            fs.unlink(root, format!("o{i}").as_bytes()).unwrap();
        }
        let t = fs.tmpfile(root, &CreateArgs::root(0o100600)).unwrap().ino;
        fs.write(t, 0, &pattern(99, 20000)).unwrap();
        fs.log_force().unwrap();
        fs.abandon();
        drop(fs);
        let mut want = BTreeMap::new();
        want.insert("/keep".into(), seen(keep, 1, b"kept"));
        if kernel {
            check_kernel(&img, &s, &want);
        } else {
            let fs = rw(&img);
            fs.unmount().unwrap();
            drop(fs);
            check(&img, &s, &want);
        }
    }
}

/// O_TMPFILE: written, then linked into the namespace (off the unlinked
/// list); a second one dropped (freed).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn tmpfile_linked_and_dropped() {
    let (s, img) = setup("nslink_tmpfile", &[]);
    let fs = rw(&img);
    let root = fs.root_ino();
    let mut others = Vec::new();
    // Neighbours on the same lists, so that linking edits a predecessor.
    for i in 0..70u64 {
        let t = fs.tmpfile(root, &CreateArgs::root(0o100644)).unwrap().ino;
        fs.write(t, 0, &pattern(i, 100)).unwrap();
        others.push(t);
    }
    let t = fs.tmpfile(root, &CreateArgs::root(0o100640)).unwrap().ino;
    fs.write(t, 0, &pattern(1, 12345)).unwrap();
    assert_eq!(fs.iget(t).unwrap().core.nlink, 0);
    fs.link(t, root, b"named").unwrap();
    assert_eq!(fs.iget(t).unwrap().core.nlink, 1);
    for (i, &o) in others.iter().enumerate() {
        if i % 3 == 0 {
            fs.link(o, root, format!("n{i}").as_bytes()).unwrap();
        }
    }
    for &o in &others {
        fs.inode_unref(o, 1).unwrap();
    }
    fs.inode_unref(t, 1).unwrap();
    // An unlinked file that was not O_TMPFILE cannot get a link back.
    let u = fs
        .create(root, b"u", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    fs.inode_ref(u);
    fs.unlink(root, b"u").unwrap();
    assert!(matches!(
        fs.link(u, root, b"u2"),
        Err(rxfs::Error::NotFound)
    ));
    fs.inode_unref(u, 1).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    let mut want = BTreeMap::new();
    want.insert("/named".into(), seen(t, 1, &pattern(1, 12345)));
    for (i, &o) in others.iter().enumerate() {
        if i % 3 == 0 {
            want.insert(format!("/n{i}"), seen(o, 1, &pattern(i as u64, 100)));
        }
    }
    check(&img, &s, &want);
}

fn set_nlink(img: &std::path::Path, ino: rxfs::types::Ino, n: u32) {
    run(
        "xfs_db",
        &[
            "-x",
            "-c",
            &format!("inode {}", ino.0),
            "-c",
            &format!("write core.nlinkv2 {n}"),
            img.to_str().unwrap(),
        ],
    );
}

/// XFS's link count limit (2^31 - 1): link to such a file, mkdir in such a
/// directory and moving a directory into it fail with EMLINK and change
/// nothing, as in the kernel (checked on the same image first).
#[test]
#[ignore = "kernel oracle: needs root, xfsprogs, loop/FUSE mounts (scripts/test-all runs it)"]
fn nlink_limit_refused_like_the_kernel() {
    let (s, img) = setup("nslink_max", &[]);
    let fs = rw(&img);
    let root = fs.root_ino();
    let d = fs
        .mkdir(root, b"d", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let e = fs
        .mkdir(root, b"e", &CreateArgs::root(0o40755))
        .unwrap()
        .ino;
    let f = fs
        .create(root, b"f", &CreateArgs::root(0o100644))
        .unwrap()
        .ino;
    fs.unmount().unwrap();
    drop(fs);
    const MAX: u32 = 0x7fff_ffff;
    set_nlink(&img, f, MAX);
    set_nlink(&img, d, MAX);
    // The kernel's answers.
    let mnt = s.path("k");
    let k = KernelMount::new(&img, &mnt, "");
    let emlink = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());
    assert_eq!(
        emlink(std::fs::hard_link(mnt.join("f"), mnt.join("g"))),
        Some(libc::EMLINK)
    );
    assert_eq!(
        emlink(std::fs::create_dir(mnt.join("d/sub"))),
        Some(libc::EMLINK)
    );
    assert_eq!(
        emlink(std::fs::rename(mnt.join("e"), mnt.join("d/e"))),
        Some(libc::EMLINK)
    );
    k.umount();
    // rxfs's.
    let fs = rw(&img);
    let too_many = |r: rxfs::Result<()>| matches!(r, Err(rxfs::Error::TooManyLinks));
    assert!(too_many(fs.link(f, root, b"g").map(|_| ())));
    assert!(too_many(
        fs.mkdir(d, b"sub", &CreateArgs::root(0o40755)).map(|_| ())
    ));
    assert!(too_many(fs.rename(
        root,
        b"e",
        d,
        b"e",
        rxfs::fs::ops_rename::RenameFlags::default()
    )));
    assert_eq!(fs.iget(f).unwrap().core.nlink, MAX);
    fs.unmount().unwrap();
    drop(fs);
    // Nothing else changed: with the true counts back, repair is clean.
    set_nlink(&img, f, 1);
    set_nlink(&img, d, 2);
    let mut want = BTreeMap::new();
    want.insert("/d".into(), seen(d, 2, b"<dir>"));
    want.insert("/e".into(), seen(e, 2, b"<dir>"));
    want.insert("/f".into(), seen(f, 1, b""));
    check(&img, &s, &want);
}
