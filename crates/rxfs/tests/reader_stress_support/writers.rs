//! The writer threads, a fixed amount of work each, and the forms they
//! drove the inodes through (checked after the run, so a change of
//! parameters cannot quietly stop exercising a form).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use super::*;
use rxfs::bmap::data::SetAttr;
use rxfs::format::dir::{FREE_OFFSET_BYTES, LEAF_OFFSET_BYTES};
use rxfs::fs::ops_attr::XattrSet;
use rxfs::fs::ops_falloc::{FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE};
use rxfs::fs::ops_ns::CreateArgs;
use rxfs::fs::ops_rename::RenameFlags;
use rxfs::inode::Fork;
use rxfs::types::Ino;
use rxfs::{Error, Filesystem};

/// Rounds of the data writer; each appends `APPENDS` separate extents.
const DATA_ROUNDS: usize = 40;
const APPENDS: u64 = 160;
/// Rounds of the xattr writer (four forms per cycle).
const ATTR_ROUNDS: usize = 800;
/// Rounds of the directory writer; names created per round (alternately
/// this many and a quarter of it).
const DIR_ROUNDS: usize = 6;
const DIR_NAMES: usize = 2000;

const FILE: CreateArgs = CreateArgs::root(0o100644);
const DIR: CreateArgs = CreateArgs::root(0o040755);

/// Make the inodes, the names and xattrs that always exist, and "ln".
pub fn setup(fs: &Filesystem) -> Shapes {
    let root = fs.root_ino();
    let file = fs.create(root, b"file", &FILE).unwrap().ino;
    let dir = fs.mkdir(root, b"dir", &DIR).unwrap().ino;
    let dir2 = fs.mkdir(root, b"dir2", &DIR).unwrap().ino;
    for k in 0..KEEP {
        fs.create(dir, &keep_name(k), &FILE).unwrap();
    }
    fs.symlink(dir, b"ln", &link_target(0), &FILE).unwrap();
    fs.setxattr(file, FIXED_NAME, FIXED_VALUE, XattrSet::Any)
        .unwrap();
    fs.setxattr(file, FLIP_NAME, &value(1000, FLIP_SIZES[0]), XattrSet::Any)
        .unwrap();
    // The attr writer's smallest list (two short values), while the data
    // fork is empty: the attr fork's offset is chosen now, with room for
    // that list inline. Chosen later, once the data writer has made its
    // fork a btree, the kernel's rule keeps the offset (a btree root does
    // not move), the list would not fit and the inline form would never
    // come back (a run of this test missed it that way).
    for k in 0..2 {
        fs.setxattr(file, &attr_name(k), &value(k as u64, 10), XattrSet::Any)
            .unwrap();
    }
    Shapes { file, dir, dir2 }
}

/// Forms the writers saw their inodes in.
#[derive(Default)]
pub struct Forms {
    data_btree: AtomicBool,
    data_extents_max: AtomicU64,
    attr_local: AtomicBool,
    attr_leaf: AtomicBool,
    attr_node: AtomicBool,
    dir_leaf: AtomicBool,
    dir_node: AtomicBool,
    dir_blocks_max: AtomicU64,
}

impl Forms {
    pub fn summary(&self) -> String {
        format!(
            "data btree {} (max {} extents), attr local {} leaf {} node {}, dir leaf {} \
             node {} (max {} blocks)",
            self.data_btree.load(Relaxed),
            self.data_extents_max.load(Relaxed),
            self.attr_local.load(Relaxed),
            self.attr_leaf.load(Relaxed),
            self.attr_node.load(Relaxed),
            self.dir_leaf.load(Relaxed),
            self.dir_node.load(Relaxed),
            self.dir_blocks_max.load(Relaxed),
        )
    }

    pub fn assert_reached(&self) {
        let all = [
            &self.data_btree,
            &self.attr_local,
            &self.attr_leaf,
            &self.attr_node,
            &self.dir_leaf,
            &self.dir_node,
        ];
        assert!(
            all.iter().all(|f| f.load(Relaxed)),
            "a form was never reached: {}",
            self.summary()
        );
    }
}

/// What a writer works with.
pub struct Ctx<'a> {
    pub fs: &'a Filesystem,
    pub sh: &'a Shapes,
    pub forms: &'a Forms,
    pub tally: &'a Tally,
}

impl Ctx<'_> {
    /// The inode as a writer sees it between its transactions; `None`
    /// (a failure) when the read failed.
    fn probe(&self, ino: Ino) -> Option<std::sync::Arc<rxfs::inode::Inode>> {
        self.tally.op(Op::Writer);
        match self.fs.iget(ino) {
            Ok(ip) => Some(ip),
            Err(e) => {
                self.tally.error(Op::Writer, &format!("iget {}", ino.0), &e);
                None
            }
        }
    }

    /// A writer's operation: a corruption error is a race of its own
    /// read path (a failure, the work goes on); anything else is a bug.
    fn check(&self, what: &str, r: rxfs::Result<()>) {
        self.tally.op(Op::Writer);
        match r {
            Ok(()) => {}
            Err(e) if e.is_corrupt() => self.tally.error(Op::Writer, what, &e),
            Err(e) => panic!("writer {what}: {e:?}"),
        }
    }
}

/// Appends 4 KiB at every other 8 KiB (one extent each), punches 1 KiB
/// out of every seventh (splitting it), and every fifth round truncates
/// to a third and regrows from there.
pub fn data_writer(c: &Ctx) {
    let (fs, sh, forms) = (c.fs, c.sh, c.forms);
    let chunk = value(7, 4096);
    let mut end = 0u64;
    for r in 0..DATA_ROUNDS {
        let start = end;
        for _ in 0..APPENDS {
            c.check("write", fs.write(sh.file, end, &chunk).map(|_| ()));
            end += 8192;
        }
        for k in (0..APPENDS).step_by(7) {
            let mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
            let off = start + k * 8192 + 1024;
            c.check("punch", fs.fallocate(sh.file, mode, off, 1024));
        }
        if let Some(ip) = c.probe(sh.file) {
            if let Fork::Extents { list, btree } = &ip.data {
                forms.data_btree.fetch_or(*btree, Relaxed);
                forms.data_extents_max.fetch_max(list.len() as u64, Relaxed);
            }
        }
        if r % 5 == 4 {
            end = end / 3 / 8192 * 8192;
            let a = SetAttr {
                size: Some(end),
                ..Default::default()
            };
            c.check("truncate", fs.setattr(sh.file, &a).map(|_| ()));
        }
    }
}

/// Cycles the churning xattrs through shortform (2 small), leaf (12
/// medium), node (60 small, many leaf blocks) and remote values (6 of
/// 3000 bytes), removing the ones the next form does not have; replaces
/// "user.flip" between 10 and 3000 bytes after every few of them (small
/// at the end of the shortform and leaf rounds, to let them be what they
/// are meant to be).
pub fn attr_writer(c: &Ctx) {
    let (fs, sh, forms) = (c.fs, c.sh, c.forms);
    const FORMS: [(usize, usize); 4] = [(2, 8), (12, 40), (ATTRS_MAX, 30), (6, 3000)];
    let mut flips = 0usize;
    let mut alive = 0usize;
    for r in 0..ATTR_ROUNDS {
        let (n, len) = FORMS[r % 4];
        for k in 0..n {
            let v = value(k as u64, len + r % 3);
            c.check(
                "setxattr",
                fs.setxattr(sh.file, &attr_name(k), &v, XattrSet::Any),
            );
            if k % 4 == 0 && n > 2 {
                flips += 1;
                let v = value(1000, FLIP_SIZES[flips % 2]);
                c.check("flip", fs.setxattr(sh.file, FLIP_NAME, &v, XattrSet::Any));
            }
        }
        if r % 4 < 2 {
            // Small before the removals: all fits in the inode again, or
            // in one leaf block (the remote value's blocks freed).
            let v = value(1000, FLIP_SIZES[0]);
            c.check("flip", fs.setxattr(sh.file, FLIP_NAME, &v, XattrSet::Any));
        }
        for k in n..alive {
            match fs.removexattr(sh.file, &attr_name(k)) {
                Err(Error::NoAttr) => {}
                r => c.check("removexattr", r),
            }
        }
        alive = n;
        let Some(ip) = c.probe(sh.file) else {
            continue;
        };
        let blocks: u64 = match &ip.attr {
            Some(Fork::Extents { list, .. }) => list.iter().map(|e| e.len).sum(),
            _ => 0,
        };
        match r % 4 {
            0 => forms
                .attr_local
                .fetch_or(matches!(ip.attr, Some(Fork::Local(_))), Relaxed),
            1 => forms.attr_leaf.fetch_or(blocks == 1, Relaxed),
            2 => forms.attr_node.fetch_or(blocks >= 3, Relaxed),
            _ => false,
        };
    }
}

/// Grows the directory by thousands of names, moves every third out to
/// the second directory and every ninth of those back under a new name,
/// replaces "ln" by rename, then removes all but the kept names.
pub fn dir_writer(c: &Ctx) {
    let (fs, sh, forms) = (c.fs, c.sh, c.forms);
    let (d, d2) = (sh.dir, sh.dir2);
    let geo = fs.geo();
    let (leaf, free) = (
        LEAF_OFFSET_BYTES >> geo.blocklog,
        FREE_OFFSET_BYTES >> geo.blocklog,
    );
    for r in 0..DIR_ROUNDS {
        let n = if r % 2 == 0 { DIR_NAMES } else { DIR_NAMES / 4 };
        let cn = |i: usize| format!("c{r}_{i}").into_bytes();
        let mn = |i: usize| format!("m{r}_{i}").into_bytes();
        let bn = |i: usize| format!("b{r}_{i}").into_bytes();
        for i in 0..n {
            c.check("create", fs.create(d, &cn(i), &FILE).map(|_| ()));
        }
        let none = RenameFlags::default();
        for i in (0..n).step_by(3) {
            c.check("rename out", fs.rename(d, &cn(i), d2, &mn(i), none));
        }
        for i in (0..n).step_by(9) {
            c.check("rename in", fs.rename(d2, &mn(i), d, &bn(i), none));
        }
        if let Some(ip) = c.probe(d) {
            let list = ip.data.extents();
            forms
                .dir_leaf
                .fetch_or(list.iter().any(|e| e.off.0 >= leaf), Relaxed);
            forms
                .dir_node
                .fetch_or(list.iter().any(|e| e.off.0 >= free), Relaxed);
            let blocks = list.iter().map(|e| e.len).sum();
            forms.dir_blocks_max.fetch_max(blocks, Relaxed);
        }
        let t = link_target(r + 1);
        c.check("symlink", fs.symlink(d, b"ln.new", &t, &FILE).map(|_| ()));
        c.check("replace ln", fs.rename(d, b"ln.new", d, b"ln", none));
        for i in 0..n {
            let (dir, name) = match (i % 3, i % 9) {
                (0, 0) => (d, bn(i)),
                (0, _) => (d2, mn(i)),
                _ => (d, cn(i)),
            };
            c.check("unlink", fs.unlink(dir, &name));
        }
    }
}
