//! The seeded generator of random operations: it looks at the model and
//! picks an operation with arguments that are mostly valid, sometimes not
//! (an existing name, a missing one, a non-empty directory, a directory
//! moved into itself...), so that error paths run too.
//!
//! Limits it keeps (see [`Params`]): directories stay within one directory
//! block unless `big_dirs`, files within `max_file` bytes, xattr ops only
//! with `xattrs`.

use super::model::{Ent, Kind, Model, Op, XHow, ROOT};

#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub ops: usize,
    pub max_file: u64,
    /// Distinct short names per directory.
    pub names: u64,
    /// Directory block size: without `big_dirs`, entries stop before a
    /// directory outgrows one block.
    pub dirblk: usize,
    pub big_dirs: bool,
    pub xattrs: bool,
    /// fallocate: allocate, keep-size, punch, zero range.
    pub falloc: bool,
    /// fallocate collapse and insert range (not through FUSE).
    pub shift: bool,
    /// Block size (fallocate alignment).
    pub bs: u64,
}

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x7261_6e64_6f6d_6f70)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Clone>(&mut self, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[self.below(v.len() as u64) as usize].clone())
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

pub struct Gen {
    pub rng: Rng,
    pub p: Params,
}

/// Bytes a directory entry takes in a directory block (entry rounded to
/// 8, plus its leaf entry).
fn entry_bytes(namelen: usize) -> usize {
    (8 + 1 + namelen + 1 + 2).div_ceil(8) * 8 + 8
}

impl Gen {
    pub fn new(seed: u64, p: Params) -> Self {
        Gen {
            rng: Rng::new(seed),
            p,
        }
    }

    fn dirs(m: &Model) -> Vec<u64> {
        m.nodes
            .iter()
            .filter(|(_, n)| n.is_dir())
            .map(|(&i, _)| i)
            .collect()
    }

    /// Existing entries `(dir, name, id)`, optionally only those naming
    /// nodes for which `f` holds.
    fn entries(m: &Model, f: impl Fn(&Kind) -> bool) -> Vec<(u64, Vec<u8>)> {
        let mut v = Vec::new();
        for (&d, n) in &m.nodes {
            for (name, id) in &n.entries {
                if f(&m.nodes[id].kind) {
                    v.push((d, name.clone()));
                }
            }
        }
        v
    }

    fn name(&mut self) -> Vec<u8> {
        if self.rng.below(25) == 0 {
            // A long name (up to the 255-byte limit).
            let len = 100 + self.rng.below(156) as usize;
            let c = b'a' + self.rng.below(26) as u8;
            let mut n = vec![c; len];
            n[0] = b'L';
            return n;
        }
        format!("n{}", self.rng.below(self.p.names)).into_bytes()
    }

    /// Whether `dir` may take one more entry named `name`.
    fn room(&self, m: &Model, dir: u64, name: &[u8]) -> bool {
        if self.p.big_dirs {
            return true;
        }
        let used: usize = m.nodes[&dir]
            .entries
            .keys()
            .map(|n| entry_bytes(n.len()))
            .sum::<usize>()
            + 2 * entry_bytes(2)
            + 64
            + 8
            + 64;
        used + entry_bytes(name.len()) <= self.p.dirblk
    }

    /// A new (or existing) entry in a random directory with room.
    fn dest(&mut self, m: &Model) -> Option<Ent> {
        let d = if self.p.big_dirs && self.rng.below(4) != 0 {
            // Grow the root directory past one block (leaf/node forms).
            ROOT
        } else {
            self.rng.pick(&Self::dirs(m))?
        };
        let name = self.name();
        (m.lookup(d, &name).is_some() || self.room(m, d, &name)).then(|| m.ent(d, &name))
    }

    fn existing(&mut self, m: &Model, f: impl Fn(&Kind) -> bool) -> Option<Ent> {
        if self.rng.below(20) == 0 {
            // Sometimes a name that may not exist: ENOENT.
            let d = self.rng.pick(&Self::dirs(m))?;
            let n = self.name();
            return Some(m.ent(d, &n));
        }
        let (d, n) = self.rng.pick(&Self::entries(m, f))?;
        Some(m.ent(d, &n))
    }

    fn data(&mut self, m: &Model, e: &Ent) -> Option<(u64, Vec<u8>)> {
        let size = m
            .lookup(e.dir, &e.name)
            .map_or(0, |id| m.nodes[&id].data.len() as u64);
        let off = match self.rng.below(3) {
            0 => size,
            1 => self.rng.below(size + 1),
            _ => self.rng.below(self.p.max_file),
        };
        let len = 1 + self.rng.below(self.p.max_file / 4);
        (off + len <= self.p.max_file).then(|| (off, self.rng.bytes(len as usize)))
    }

    /// Attribute names: mostly a few short ones per namespace (so sets
    /// replace and removes find something), sometimes one of many long
    /// ones (so lists outgrow the inode, a leaf block, then a node).
    fn xkey(&mut self) -> Vec<u8> {
        let ns = ["user.", "user.", "trusted.", "security."][self.rng.below(4) as usize];
        let name = match self.rng.below(10) {
            0..=6 => format!("k{}", self.rng.below(8)),
            7..=8 => format!("many-{:04}", self.rng.below(200)),
            _ => {
                let n = self.rng.below(40);
                let len = 20 + (n * 37) % 230;
                format!("long{n:02}-{}", "x".repeat(len as usize))
            }
        };
        format!("{ns}{name}").into_bytes()
    }

    /// Values: mostly small (shortform and local leaf values), some over a
    /// block (remote values), now and then the 64 KiB maximum.
    fn xval(&mut self) -> Vec<u8> {
        let len = match self.rng.below(20) {
            0..=11 => self.rng.below(64),
            12..=16 => self.rng.below(1500),
            17..=18 => self.rng.below(20_000),
            _ => 65536,
        };
        self.rng.bytes(len as usize)
    }

    /// The next operation (`None`: none possible this time, try again).
    pub fn op(&mut self, m: &Model) -> Option<Op> {
        let file = |k: &Kind| *k == Kind::File;
        let xable = |k: &Kind| matches!(k, Kind::File | Kind::Dir);
        let r = self.rng.below(100);
        let op = match r {
            0..=11 => Op::Create {
                e: self.dest(m)?,
                kind: Kind::File,
                id: m.next,
            },
            12..=17 => Op::Create {
                e: self.dest(m)?,
                kind: Kind::Dir,
                id: m.next,
            },
            18..=19 => Op::Create {
                e: self.dest(m)?,
                kind: Kind::Fifo,
                id: m.next,
            },
            20..=24 => {
                let len = 1 + self.rng.below(1023) as usize;
                let t: Vec<u8> = (0..len)
                    .map(|i| {
                        if i % 9 == 8 {
                            b'/'
                        } else {
                            b'a' + (i % 26) as u8
                        }
                    })
                    .collect();
                Op::Create {
                    e: self.dest(m)?,
                    kind: Kind::Symlink(t),
                    id: m.next,
                }
            }
            25..=29 => Op::Link {
                src: self.existing(m, |k| *k != Kind::Dir)?,
                dst: self.dest(m)?,
            },
            30..=37 => Op::Unlink {
                e: self.existing(m, |k| *k != Kind::Dir)?,
            },
            38..=41 => Op::Rmdir {
                e: self.existing(m, |k| *k == Kind::Dir)?,
            },
            42..=53 => {
                let src = self.existing(m, |_| true)?;
                let dst = if self.rng.below(2) == 0 {
                    self.existing(m, |_| true)?
                } else {
                    self.dest(m)?
                };
                // The VFS and a filesystem order their checks differently
                // when the target is an ancestor of the source: skip.
                if let Some(t) = m.lookup(dst.dir, &dst.name) {
                    if m.nodes[&t].is_dir() && m.is_ancestor(t, src.dir) {
                        return None;
                    }
                }
                let k = self.rng.below(10);
                Op::Rename {
                    src,
                    dst,
                    noreplace: k == 0,
                    exchange: k == 1,
                }
            }
            54..=57 => {
                // Every other block of a range: many extents, a btree fork.
                let e = self.existing(m, file)?;
                let bs = self.p.bs;
                let blocks = self.p.max_file / bs;
                let start = self.rng.below(blocks / 2);
                let n = 8 + self.rng.below(32);
                let offs: Vec<u64> = (0..n)
                    .map(|i| (start + 2 * i) * bs)
                    .filter(|&o| o + bs <= self.p.max_file)
                    .collect();
                let len = 1 + self.rng.below(bs);
                Op::Scatter {
                    e,
                    offs,
                    data: self.rng.bytes(len as usize),
                }
            }
            58..=68 => {
                let e = self.existing(m, file)?;
                let (off, data) = self.data(m, &e)?;
                Op::Write { e, off, data }
            }
            69..=73 => Op::Truncate {
                size: self.rng.below(self.p.max_file),
                e: self.existing(m, file)?,
            },
            74..=79 if self.p.xattrs => {
                let how = match self.rng.below(4) {
                    0 => XHow::Create,
                    1 => XHow::Replace,
                    _ => XHow::Any,
                };
                Op::SetXattr {
                    e: self.existing(m, xable)?,
                    key: self.xkey(),
                    val: self.xval(),
                    how,
                }
            }
            80..=82 if self.p.xattrs => Op::RemoveXattr {
                e: self.existing(m, xable)?,
                key: self.xkey(),
            },
            83..=86 => Op::Open {
                e: self.existing(m, file)?,
                h: m.next_h,
            },
            87..=90 => Op::Close {
                h: self
                    .rng
                    .pick(&m.handles.keys().copied().collect::<Vec<_>>())?,
            },
            91..=96 => {
                let h = self
                    .rng
                    .pick(&m.handles.keys().copied().collect::<Vec<_>>())?;
                let id = m.handles[&h];
                let size = m.nodes[&id].data.len() as u64;
                let off = self.rng.below(size + 1);
                let len = 1 + self.rng.below(self.p.max_file / 4);
                if off + len > self.p.max_file {
                    return None;
                }
                Op::HWrite {
                    h,
                    off,
                    data: self.rng.bytes(len as usize),
                }
            }
            97 => Op::Sync,
            98..=99 if self.p.falloc => {
                use super::model::*;
                let e = self.existing(m, file)?;
                let size = m
                    .lookup(e.dir, &e.name)
                    .map_or(0, |id| m.nodes[&id].data.len() as u64);
                let mut modes = vec![
                    0,
                    FL_KEEP_SIZE,
                    FL_PUNCH_HOLE | FL_KEEP_SIZE,
                    FL_ZERO_RANGE,
                    FL_ZERO_RANGE | FL_KEEP_SIZE,
                ];
                if self.p.shift {
                    modes.extend([FL_COLLAPSE_RANGE, FL_INSERT_RANGE]);
                }
                let mode = self.rng.pick(&modes)?;
                let bs = self.p.bs;
                let (off, len) = if mode & (FL_COLLAPSE_RANGE | FL_INSERT_RANGE) != 0
                    && self.rng.below(8) != 0
                {
                    let blocks = size / bs + 1;
                    (self.rng.below(blocks) * bs, (1 + self.rng.below(4)) * bs)
                } else {
                    (
                        self.rng.below(size + bs),
                        1 + self.rng.below(self.p.max_file / 4),
                    )
                };
                let grows = mode == FL_INSERT_RANGE || mode & FL_KEEP_SIZE == 0;
                if grows && size.max(off + len) + len > self.p.max_file {
                    return None;
                }
                Op::Falloc {
                    e,
                    mode,
                    off,
                    len,
                    bs,
                }
            }
            _ => return None,
        };
        // Never write to a file that would exceed the limit; file
        // operations only on files (or missing names: ENOENT), as the
        // system calls on other kinds differ from the library's.
        match &op {
            Op::Write { e, off, data }
                if m.lookup(e.dir, &e.name).is_none()
                    || off + data.len() as u64 > self.p.max_file =>
            {
                return None;
            }
            Op::Write { e, .. }
            | Op::Scatter { e, .. }
            | Op::Truncate { e, .. }
            | Op::Open { e, .. }
            | Op::Falloc { e, .. } => {
                if let Some(id) = m.lookup(e.dir, &e.name) {
                    if m.nodes[&id].kind != Kind::File {
                        return None;
                    }
                }
            }
            _ => {}
        }
        let _ = ROOT;
        Some(op)
    }
}
