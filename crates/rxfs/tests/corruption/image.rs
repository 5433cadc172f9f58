//! The fixture of the corruption tests: a kernel-populated image holding
//! every metadata structure the read path decodes.
//!
//! Contents (all made by the Linux kernel through a loop mount):
//! - several AGs (directories rotate across AGs);
//! - `/many`: about 17,000 files created then thinned to one per inode chunk,
//!   so every AG-0 inode btree has more than one level while the walk stays
//!   small;
//! - directories in every form: `/sf` (shortform), `/block`, `/leaf`,
//!   `/node` (leafn + free index + DA node);
//! - `/frag`: a file whose data fork is a bmbt (btree format);
//! - xattrs in every form: shortform, leaf, node (DA btree), remote values;
//! - symlinks with inline and remote (`XSLM`) targets, hard links;
//! - special files: char and block devices, a FIFO, a socket.

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

pub use crate::common::pattern;
use crate::common::{mkfs, mknod, set_xattr, KernelMount, Scratch};

fn make_dir(root: &Path, name: &str, entries: usize) {
    let d = root.join(name);
    std::fs::create_dir(&d).unwrap();
    for i in 0..entries {
        std::fs::write(d.join(format!("e{i:04}")), b"").unwrap();
    }
}

fn populate(root: &Path) {
    // Inode btrees with several levels: a 4 KiB inobt leaf holds 252 chunk
    // records, so > 252 chunks in one AG. Keep one file per chunk.
    let many = root.join("many");
    std::fs::create_dir(&many).unwrap();
    let mut by_chunk = std::collections::BTreeMap::new();
    for i in 0..(270 * 64) {
        let p = many.join(format!("m{i:05}"));
        std::fs::write(&p, b"").unwrap();
        let ino = std::fs::metadata(&p).unwrap().ino();
        by_chunk.entry(ino >> 6).or_insert_with(Vec::new).push(p);
    }
    for files in by_chunk.values() {
        for p in &files[1..] {
            std::fs::remove_file(p).unwrap();
        }
    }

    // Directories in every form (5-character names, 4 KiB directory blocks).
    make_dir(root, "sf", 6);
    make_dir(root, "block", 60);
    make_dir(root, "leaf", 250);
    make_dir(root, "node", 1000);

    // Files.
    std::fs::write(root.join("empty"), b"").unwrap();
    std::fs::write(root.join("small"), b"hello, world\n").unwrap();
    std::fs::write(root.join("medium"), pattern(1, 300_000)).unwrap();
    std::fs::hard_link(root.join("small"), root.join("block/hardlink")).unwrap();
    let mut f = std::fs::File::create(root.join("frag")).unwrap();
    for i in 0..150u64 {
        f.seek(SeekFrom::Start(i * 8192)).unwrap();
        f.write_all(&pattern(i + 7, 4096)).unwrap();
        f.sync_data().unwrap();
    }
    drop(f);
    let f = std::fs::File::create(root.join("prealloc")).unwrap();
    let rc = unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, 256 << 10) };
    assert_eq!(rc, 0);
    drop(f);

    // Extended attributes in every form.
    let xa = root.join("xattr");
    std::fs::create_dir(&xa).unwrap();
    let sf = xa.join("shortform");
    std::fs::write(&sf, b"x").unwrap();
    set_xattr(&sf, "user.one", b"1");
    set_xattr(&sf, "trusted.two", b"22");
    let leaf = xa.join("leaf");
    std::fs::write(&leaf, b"x").unwrap();
    for i in 0..30 {
        set_xattr(&leaf, &format!("user.a{i:03}"), &pattern(i, 100));
    }
    let node = xa.join("node");
    std::fs::write(&node, b"x").unwrap();
    for i in 0..1200 {
        set_xattr(&node, &format!("user.n{i:04}"), &pattern(i, 100));
    }
    let remote = xa.join("remote");
    std::fs::write(&remote, b"x").unwrap();
    set_xattr(&remote, "user.big", &pattern(5, 20_000));
    set_xattr(&remote, "user.small", b"s");
    set_xattr(&remote, "security.sec", b"label");
    // A directory with a leaf-form attr fork.
    for i in 0..30 {
        set_xattr(&xa, &format!("user.d{i:03}"), &pattern(i + 100, 100));
    }

    // Symlinks.
    std::os::unix::fs::symlink("small", root.join("link_short")).unwrap();
    let long: String = (0..90).map(|i| format!("dir{i:06}/")).collect::<String>() + "small";
    std::os::unix::fs::symlink(&long, root.join("link_remote")).unwrap();
    std::os::unix::fs::symlink("../small", root.join("sf/link_up")).unwrap();

    // Special files.
    let sp = root.join("special");
    std::fs::create_dir(&sp).unwrap();
    mknod(&sp.join("chr"), libc::S_IFCHR | 0o644, libc::makedev(1, 3));
    mknod(
        &sp.join("blk"),
        libc::S_IFBLK | 0o600,
        libc::makedev(7, 200),
    );
    mknod(&sp.join("fifo"), libc::S_IFIFO | 0o644, 0);
    mknod(&sp.join("sock"), libc::S_IFSOCK | 0o644, 0);
}

/// Every path under `root` (directories first) with its inode number, as
/// the kernel reports them.
fn list(root: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut ents: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        ents.sort();
        for p in ents {
            let md = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push((format!("/{rel}"), md.ino()));
            if md.is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

/// Build the fixture image: its bytes and every path with its inode number.
/// `keep`: also copy the image there (for xfs_db inspection).
pub fn build(mkfs_opts: &[&str], keep: Option<&Path>) -> (Vec<u8>, Vec<(String, u64)>) {
    let s = Scratch::new("corruption");
    let img = s.path("img");
    // mkfs.xfs 6.1 refuses filesystems under 300 MB: 4 AGs of 80 MiB.
    let mut opts = vec!["-d", "agcount=4"];
    opts.extend_from_slice(mkfs_opts);
    mkfs(&img, 320 << 20, &opts);
    let m = KernelMount::new(&img, &s.path("mnt"), "");
    populate(&m.dir);
    let paths = list(&m.dir);
    m.umount();
    if let Some(k) = keep {
        std::fs::copy(&img, k).unwrap();
    }
    (std::fs::read(&img).unwrap(), paths)
}
