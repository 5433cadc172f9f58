//! The in-memory model of a filesystem tree that the random-operation
//! tester drives: nodes (files, directories, symlinks, FIFOs) with link
//! counts, data, symlink targets, xattrs and open handles; every operation
//! applied to it returns what POSIX says the call returns (Ok or errno).
//!
//! Ids are the model's own (1 = root); targets map them to their handles.

use std::collections::BTreeMap;

pub type Errno = i32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink(Vec<u8>),
    Fifo,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    pub data: Vec<u8>,
    /// Links of a non-directory (directories: computed).
    pub nlink: u32,
    pub entries: BTreeMap<Vec<u8>, u64>,
    /// Parent of a directory.
    pub parent: u64,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    pub handles: u32,
}

impl Node {
    fn new(kind: Kind, parent: u64) -> Node {
        Node {
            kind,
            data: Vec::new(),
            nlink: 1,
            entries: BTreeMap::new(),
            parent,
            xattrs: BTreeMap::new(),
            handles: 0,
        }
    }
    pub fn is_dir(&self) -> bool {
        self.kind == Kind::Dir
    }
}

/// setxattr(2) flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XHow {
    Any,
    Create,
    Replace,
}

/// A directory entry as an operation names it: the directory's id, its
/// path (for targets that use paths) and the name.
#[derive(Debug, Clone)]
pub struct Ent {
    pub dir: u64,
    pub dpath: String,
    pub name: Vec<u8>,
}

impl Ent {
    pub fn path(&self) -> String {
        let n = String::from_utf8_lossy(&self.name);
        if self.dpath == "/" {
            format!("/{n}")
        } else {
            format!("{}/{n}", self.dpath)
        }
    }
}

#[derive(Debug, Clone)]
pub enum Op {
    Create {
        e: Ent,
        kind: Kind,
        id: u64,
    },
    Link {
        src: Ent,
        dst: Ent,
    },
    Unlink {
        e: Ent,
    },
    Rmdir {
        e: Ent,
    },
    Rename {
        src: Ent,
        dst: Ent,
        noreplace: bool,
        exchange: bool,
    },
    Write {
        e: Ent,
        off: u64,
        data: Vec<u8>,
    },
    Truncate {
        e: Ent,
        size: u64,
    },
    SetXattr {
        e: Ent,
        key: Vec<u8>,
        val: Vec<u8>,
        how: XHow,
    },
    RemoveXattr {
        e: Ent,
        key: Vec<u8>,
    },
    /// Open a regular file: handle `h`.
    Open {
        e: Ent,
        h: u64,
    },
    Close {
        h: u64,
    },
    HWrite {
        h: u64,
        off: u64,
        data: Vec<u8>,
    },
    /// Small writes of `data` at each of `offs` (a fragmenting pattern).
    Scatter {
        e: Ent,
        offs: Vec<u64>,
        data: Vec<u8>,
    },
    /// fallocate(2) with Linux FALLOC_FL_* `mode`; `bs` is the block size
    /// (collapse/insert alignment).
    Falloc {
        e: Ent,
        mode: i32,
        off: u64,
        len: u64,
        bs: u64,
    },
    Sync,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub nodes: BTreeMap<u64, Node>,
    pub next: u64,
    pub handles: BTreeMap<u64, u64>,
    pub next_h: u64,
}

pub const ROOT: u64 = 1;

fn write_into(data: &mut Vec<u8>, off: u64, d: &[u8]) {
    let end = off as usize + d.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[off as usize..end].copy_from_slice(d);
}

pub const FL_KEEP_SIZE: i32 = 1;
pub const FL_PUNCH_HOLE: i32 = 2;
pub const FL_COLLAPSE_RANGE: i32 = 8;
pub const FL_ZERO_RANGE: i32 = 0x10;
pub const FL_INSERT_RANGE: i32 = 0x20;

/// What fallocate does to a file's bytes (XFS semantics).
fn falloc(data: &mut Vec<u8>, mode: i32, off: u64, len: u64, bs: u64) -> Result<(), Errno> {
    let size = data.len() as u64;
    let (o, end) = (off as usize, (off + len) as usize);
    if len == 0 {
        return Err(libc::EINVAL);
    }
    match mode {
        0 => {
            if off + len > size {
                data.resize(end, 0);
            }
        }
        FL_KEEP_SIZE => {}
        m if m == FL_PUNCH_HOLE | FL_KEEP_SIZE => {
            let e = end.min(data.len());
            if o < e {
                data[o..e].fill(0);
            }
        }
        FL_ZERO_RANGE => {
            if data.len() < end {
                data.resize(end, 0);
            }
            data[o..end].fill(0);
        }
        m if m == FL_ZERO_RANGE | FL_KEEP_SIZE => {
            let e = end.min(data.len());
            if o < e {
                data[o..e].fill(0);
            }
        }
        FL_COLLAPSE_RANGE => {
            if !off.is_multiple_of(bs) || !len.is_multiple_of(bs) || off + len >= size {
                return Err(libc::EINVAL);
            }
            data.drain(o..end);
        }
        FL_INSERT_RANGE => {
            if !off.is_multiple_of(bs) || !len.is_multiple_of(bs) || off >= size {
                return Err(libc::EINVAL);
            }
            data.splice(o..o, std::iter::repeat_n(0u8, len as usize));
        }
        _ => return Err(libc::EOPNOTSUPP),
    }
    Ok(())
}

impl Model {
    pub fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node::new(Kind::Dir, ROOT));
        Model {
            nodes,
            next: 2,
            handles: BTreeMap::new(),
            next_h: 1,
        }
    }

    /// Linux refuses changes of `user.*` attributes on anything but
    /// files and directories (EPERM; the generator names a symlink or a
    /// FIFO when it picks a name at random).
    fn user_xattr_allowed(&self, id: u64, key: &[u8]) -> Result<(), Errno> {
        let plain = matches!(self.nodes[&id].kind, Kind::File | Kind::Dir);
        if key.starts_with(b"user.") && !plain {
            return Err(libc::EPERM);
        }
        Ok(())
    }

    pub fn lookup(&self, dir: u64, name: &[u8]) -> Option<u64> {
        self.nodes.get(&dir)?.entries.get(name).copied()
    }

    /// Whether `a` is `d` or one of its ancestors.
    pub fn is_ancestor(&self, a: u64, mut d: u64) -> bool {
        loop {
            if d == a {
                return true;
            }
            if d == ROOT {
                return false;
            }
            d = self.nodes[&d].parent;
        }
    }

    pub fn path_of(&self, mut d: u64) -> String {
        let mut parts = Vec::new();
        while d != ROOT {
            let p = self.nodes[&d].parent;
            let name = self.nodes[&p]
                .entries
                .iter()
                .find(|(_, &i)| i == d)
                .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
                .expect("directory linked in its parent");
            parts.push(name);
            d = p;
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    pub fn ent(&self, dir: u64, name: &[u8]) -> Ent {
        Ent {
            dir,
            dpath: self.path_of(dir),
            name: name.to_vec(),
        }
    }

    fn drop_link(&mut self, id: u64) {
        let n = self.nodes.get_mut(&id).unwrap();
        if n.is_dir() {
            self.nodes.remove(&id);
            return;
        }
        n.nlink -= 1;
        if n.nlink == 0 && n.handles == 0 {
            self.nodes.remove(&id);
        }
    }

    fn file(&self, e: &Ent) -> Result<u64, Errno> {
        let id = self.lookup(e.dir, &e.name).ok_or(libc::ENOENT)?;
        match self.nodes[&id].kind {
            Kind::File => Ok(id),
            Kind::Dir => Err(libc::EISDIR),
            _ => Err(libc::EINVAL),
        }
    }

    /// Apply `op`; returns what the system call returns.
    pub fn apply(&mut self, op: &Op) -> Result<(), Errno> {
        match op {
            Op::Create { e, kind, id } => {
                if self.lookup(e.dir, &e.name).is_some() {
                    return Err(libc::EEXIST);
                }
                self.nodes.insert(*id, Node::new(kind.clone(), e.dir));
                self.nodes
                    .get_mut(&e.dir)
                    .unwrap()
                    .entries
                    .insert(e.name.clone(), *id);
                self.next = self.next.max(id + 1);
                Ok(())
            }
            Op::Link { src, dst } => {
                let s = self.lookup(src.dir, &src.name).ok_or(libc::ENOENT)?;
                // Linux: an existing name first, then a directory source.
                if self.lookup(dst.dir, &dst.name).is_some() {
                    return Err(libc::EEXIST);
                }
                if self.nodes[&s].is_dir() {
                    return Err(libc::EPERM);
                }
                self.nodes.get_mut(&s).unwrap().nlink += 1;
                self.nodes
                    .get_mut(&dst.dir)
                    .unwrap()
                    .entries
                    .insert(dst.name.clone(), s);
                Ok(())
            }
            Op::Unlink { e } => {
                let id = self.lookup(e.dir, &e.name).ok_or(libc::ENOENT)?;
                if self.nodes[&id].is_dir() {
                    return Err(libc::EISDIR);
                }
                self.nodes.get_mut(&e.dir).unwrap().entries.remove(&e.name);
                self.drop_link(id);
                Ok(())
            }
            Op::Rmdir { e } => {
                let id = self.lookup(e.dir, &e.name).ok_or(libc::ENOENT)?;
                let n = &self.nodes[&id];
                if !n.is_dir() {
                    return Err(libc::ENOTDIR);
                }
                if !n.entries.is_empty() {
                    return Err(libc::ENOTEMPTY);
                }
                self.nodes.get_mut(&e.dir).unwrap().entries.remove(&e.name);
                self.drop_link(id);
                Ok(())
            }
            Op::Rename {
                src,
                dst,
                noreplace,
                exchange,
            } => self.rename(src, dst, *noreplace, *exchange),
            Op::Write { e, off, data } => {
                let id = self.file(e)?;
                write_into(&mut self.nodes.get_mut(&id).unwrap().data, *off, data);
                Ok(())
            }
            Op::Truncate { e, size } => {
                let id = self.file(e)?;
                self.nodes
                    .get_mut(&id)
                    .unwrap()
                    .data
                    .resize(*size as usize, 0);
                Ok(())
            }
            Op::SetXattr { e, key, val, how } => {
                // Linux: a full name over 255 bytes is ERANGE (the name is
                // copied in before the path is looked up).
                if key.len() > 255 {
                    return Err(libc::ERANGE);
                }
                let id = self.lookup(e.dir, &e.name).ok_or(libc::ENOENT)?;
                self.user_xattr_allowed(id, key)?;
                let x = &mut self.nodes.get_mut(&id).unwrap().xattrs;
                match (how, x.contains_key(key)) {
                    (XHow::Create, true) => return Err(libc::EEXIST),
                    (XHow::Replace, false) => return Err(libc::ENODATA),
                    _ => {}
                }
                x.insert(key.clone(), val.clone());
                Ok(())
            }
            Op::RemoveXattr { e, key } => {
                if key.len() > 255 {
                    return Err(libc::ERANGE);
                }
                let id = self.lookup(e.dir, &e.name).ok_or(libc::ENOENT)?;
                self.user_xattr_allowed(id, key)?;
                let x = &mut self.nodes.get_mut(&id).unwrap().xattrs;
                x.remove(key).map(|_| ()).ok_or(libc::ENODATA)
            }
            Op::Open { e, h } => {
                let id = self.file(e)?;
                self.nodes.get_mut(&id).unwrap().handles += 1;
                self.handles.insert(*h, id);
                self.next_h = self.next_h.max(h + 1);
                Ok(())
            }
            Op::Close { h } => {
                let id = self.handles.remove(h).expect("open handle");
                let n = self.nodes.get_mut(&id).unwrap();
                n.handles -= 1;
                if n.nlink == 0 && n.handles == 0 {
                    self.nodes.remove(&id);
                }
                Ok(())
            }
            Op::HWrite { h, off, data } => {
                let id = self.handles[h];
                write_into(&mut self.nodes.get_mut(&id).unwrap().data, *off, data);
                Ok(())
            }
            Op::Scatter { e, offs, data } => {
                let id = self.file(e)?;
                let d = &mut self.nodes.get_mut(&id).unwrap().data;
                for &o in offs {
                    write_into(d, o, data);
                }
                Ok(())
            }
            Op::Falloc {
                e,
                mode,
                off,
                len,
                bs,
            } => {
                let id = self.file(e)?;
                let data = &mut self.nodes.get_mut(&id).unwrap().data;
                falloc(data, *mode, *off, *len, *bs)
            }
            Op::Sync => Ok(()),
        }
    }

    fn rename(
        &mut self,
        src: &Ent,
        dst: &Ent,
        noreplace: bool,
        exchange: bool,
    ) -> Result<(), Errno> {
        let s = self.lookup(src.dir, &src.name).ok_or(libc::ENOENT)?;
        let t = self.lookup(dst.dir, &dst.name);
        if exchange && t.is_none() {
            return Err(libc::ENOENT);
        }
        if noreplace && t.is_some() {
            return Err(libc::EEXIST);
        }
        let s_dir = self.nodes[&s].is_dir();
        if s_dir && self.is_ancestor(s, dst.dir) {
            return Err(libc::EINVAL);
        }
        if let (true, Some(t)) = (exchange, t) {
            if self.nodes[&t].is_dir() && self.is_ancestor(t, src.dir) {
                return Err(libc::EINVAL);
            }
        }
        if t == Some(s) {
            return Ok(());
        }
        if exchange {
            let t = t.unwrap();
            self.nodes
                .get_mut(&src.dir)
                .unwrap()
                .entries
                .insert(src.name.clone(), t);
            self.nodes
                .get_mut(&dst.dir)
                .unwrap()
                .entries
                .insert(dst.name.clone(), s);
            if s_dir {
                self.nodes.get_mut(&s).unwrap().parent = dst.dir;
            }
            if self.nodes[&t].is_dir() {
                self.nodes.get_mut(&t).unwrap().parent = src.dir;
            }
            return Ok(());
        }
        if let Some(t) = t {
            let tn = &self.nodes[&t];
            match (s_dir, tn.is_dir()) {
                (true, false) => return Err(libc::ENOTDIR),
                (false, true) => return Err(libc::EISDIR),
                (true, true) if !tn.entries.is_empty() => return Err(libc::EEXIST),
                _ => {}
            }
            self.drop_link(t);
        }
        self.nodes
            .get_mut(&src.dir)
            .unwrap()
            .entries
            .remove(&src.name);
        self.nodes
            .get_mut(&dst.dir)
            .unwrap()
            .entries
            .insert(dst.name.clone(), s);
        if s_dir {
            self.nodes.get_mut(&s).unwrap().parent = dst.dir;
        }
        Ok(())
    }

    /// Subdirectories of `d`.
    pub fn subdirs(&self, d: u64) -> u32 {
        self.nodes[&d]
            .entries
            .values()
            .filter(|i| self.nodes[i].is_dir())
            .count() as u32
    }
}
