//! A tree in one comparable form (path -> kind, links, size, data hash,
//! symlink target, user xattrs), built from the model, from a mounted tree
//! (the kernel's or a FUSE mount, through system calls) or from the rxfs
//! library's read path.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::model::{Kind, Model, ROOT};
use rxfs::Filesystem;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VNode {
    pub kind: char,
    pub nlink: u64,
    /// Size and data hash of regular files (`None` when not compared).
    pub data: Option<(u64, u64)>,
    pub target: Option<Vec<u8>>,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

pub type View = BTreeMap<String, VNode>;

pub fn hash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn join(dir: &str, name: &[u8]) -> String {
    let n = String::from_utf8_lossy(name);
    if dir == "/" {
        format!("/{n}")
    } else {
        format!("{dir}/{n}")
    }
}

/// The model's tree; `content`: compare file sizes and bytes.
pub fn of_model(m: &Model, content: bool) -> View {
    let mut v = View::new();
    let mut stack = vec![("/".to_string(), ROOT)];
    while let Some((p, d)) = stack.pop() {
        for (name, &id) in &m.nodes[&d].entries {
            let n = &m.nodes[&id];
            let path = join(&p, name);
            let (kind, nlink, target) = match &n.kind {
                Kind::Dir => {
                    stack.push((path.clone(), id));
                    ('d', 2 + m.subdirs(id) as u64, None)
                }
                Kind::File => ('f', n.nlink as u64, None),
                Kind::Symlink(t) => ('l', n.nlink as u64, Some(t.clone())),
                Kind::Fifo => ('p', n.nlink as u64, None),
            };
            let data = (content && kind == 'f').then(|| (n.data.len() as u64, hash(&n.data)));
            v.insert(
                path,
                VNode {
                    kind,
                    nlink,
                    data,
                    target,
                    xattrs: n.xattrs.clone(),
                },
            );
        }
    }
    v
}

/// The attributes the tester makes (no ACLs: their names are
/// `system.*`, and an ACL the mode expresses is not stored).
fn shown_xattr(name: &[u8]) -> bool {
    [&b"user."[..], b"trusted.", b"security."]
        .iter()
        .any(|p| name.starts_with(p))
}

fn user_xattrs(p: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut names = vec![0u8; 1 << 16];
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr() as *mut _, names.len()) };
    let mut out = BTreeMap::new();
    if n <= 0 {
        return out;
    }
    for name in names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
    {
        if !shown_xattr(name) {
            continue;
        }
        let cn = CString::new(name).unwrap();
        let mut val = vec![0u8; 1 << 16];
        let l = unsafe {
            libc::lgetxattr(
                c.as_ptr(),
                cn.as_ptr(),
                val.as_mut_ptr() as *mut _,
                val.len(),
            )
        };
        assert!(l >= 0, "lgetxattr {p:?} {name:?}");
        val.truncate(l as usize);
        out.insert(name.to_vec(), val);
    }
    out
}

/// A mounted tree through system calls.
pub fn of_mount(root: &Path, content: bool) -> Result<View, String> {
    let mut v = View::new();
    let mut stack = vec![("/".to_string(), root.to_path_buf())];
    while let Some((p, dir)) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|e| format!("readdir {p}: {e}"))?;
        for e in rd {
            let e = e.map_err(|e| format!("readdir {p}: {e}"))?;
            let name = e.file_name();
            let path = join(&p, name.as_bytes());
            let md = std::fs::symlink_metadata(e.path()).map_err(|e| format!("{path}: {e}"))?;
            let ft = md.file_type();
            let mut target = None;
            let mut data = None;
            let kind = if ft.is_dir() {
                stack.push((path.clone(), e.path()));
                'd'
            } else if ft.is_symlink() {
                let t = std::fs::read_link(e.path()).map_err(|e| format!("{path}: {e}"))?;
                target = Some(t.as_os_str().as_bytes().to_vec());
                'l'
            } else if ft.is_file() {
                if content {
                    let b = std::fs::read(e.path()).map_err(|e| format!("{path}: {e}"))?;
                    data = Some((b.len() as u64, hash(&b)));
                }
                'f'
            } else {
                'p'
            };
            // Symlinks too (l*xattr do not follow them): trusted.* and
            // security.* attributes live on symlinks as on any inode.
            let xattrs = user_xattrs(&e.path());
            v.insert(
                path,
                VNode {
                    kind,
                    nlink: md.nlink(),
                    data,
                    target,
                    xattrs,
                },
            );
        }
    }
    Ok(v)
}

/// The tree through the rxfs library's read path.
pub fn of_rxfs(fs: &Filesystem, content: bool) -> Result<View, String> {
    let mut v = View::new();
    let mut stack = vec![("/".to_string(), fs.root_ino())];
    while let Some((p, d)) = stack.pop() {
        let dip = fs.iget(d).map_err(|e| format!("iget {p}: {e}"))?;
        let mut kids = Vec::new();
        fs.readdir(&dip, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                kids.push((e.name.to_vec(), e.ino));
            }
            true
        })
        .map_err(|e| format!("readdir {p}: {e}"))?;
        for (name, ino) in kids {
            let path = join(&p, &name);
            let ip = fs.iget(ino).map_err(|e| format!("iget {path}: {e}"))?;
            let fmt = ip.core.mode as u32 & 0o170000;
            let mut target = None;
            let mut data = None;
            let kind = match fmt {
                0o040000 => {
                    stack.push((path.clone(), ino));
                    'd'
                }
                0o120000 => {
                    target = Some(fs.readlink(&ip).map_err(|e| format!("{path}: {e}"))?);
                    'l'
                }
                0o100000 => {
                    if content {
                        let mut b = vec![0u8; ip.core.size as usize];
                        let mut off = 0;
                        while off < b.len() {
                            let n = fs
                                .read_file(&ip, off as u64, &mut b[off..])
                                .map_err(|e| format!("read {path}: {e}"))?;
                            if n == 0 {
                                return Err(format!("{path}: short read"));
                            }
                            off += n;
                        }
                        data = Some((b.len() as u64, hash(&b)));
                    }
                    'f'
                }
                _ => 'p',
            };
            let mut xattrs = BTreeMap::new();
            let names = fs
                .listxattr(&ip)
                .map_err(|e| format!("listxattr {path}: {e}"))?;
            for n in names.into_iter().filter(|n| shown_xattr(n)) {
                let val = fs
                    .getxattr(&ip, &n)
                    .map_err(|e| format!("getxattr {path}: {e}"))?;
                xattrs.insert(n, val);
            }
            v.insert(
                path,
                VNode {
                    kind,
                    nlink: ip.core.nlink as u64,
                    data,
                    target,
                    xattrs,
                },
            );
        }
    }
    Ok(v)
}

/// A readable difference of two views (empty when equal).
pub fn diff(want: &View, got: &View) -> String {
    let mut out = String::new();
    for (p, w) in want {
        match got.get(p) {
            None => out += &format!("missing {p}: {w:?}\n"),
            Some(g) if g != w => {
                out += &format!("differs {p}:\n{}", vnode_diff(w, g));
            }
            _ => {}
        }
    }
    for p in got.keys().filter(|p| !want.contains_key(*p)) {
        out += &format!("extra {p}: {:?}\n", got[p]);
    }
    out.truncate(6000);
    out
}

/// What differs between two nodes, field by field; long values (file
/// data, xattr values) by length and first differing byte, so the
/// difference is not cut off by the report's length limit.
fn vnode_diff(w: &VNode, g: &VNode) -> String {
    let full = format!("  want {w:?}\n  got  {g:?}\n");
    if full.len() <= 1500 {
        return full;
    }
    fn bytes(what: &str, a: &[u8], b: &[u8]) -> String {
        if a == b {
            return String::new();
        }
        let at = a
            .iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        format!(
            "  {what}: want {} bytes, got {}, first difference at {at}\n",
            a.len(),
            b.len()
        )
    }
    let mut out = String::new();
    if (w.kind, w.nlink) != (g.kind, g.nlink) {
        out += &format!(
            "  kind/nlink: want {:?}/{}, got {:?}/{}\n",
            w.kind, w.nlink, g.kind, g.nlink
        );
    }
    if w.data != g.data {
        out += &format!("  data (size, hash): want {:?}, got {:?}\n", w.data, g.data);
    }
    out += &bytes(
        "target",
        w.target.as_deref().unwrap_or(&[]),
        g.target.as_deref().unwrap_or(&[]),
    );
    for (k, v) in &w.xattrs {
        match g.xattrs.get(k) {
            None => out += &format!("  xattr {:?} missing\n", String::from_utf8_lossy(k)),
            Some(gv) => out += &bytes(&format!("xattr {:?}", String::from_utf8_lossy(k)), v, gv),
        }
    }
    for k in g.xattrs.keys().filter(|k| !w.xattrs.contains_key(*k)) {
        out += &format!("  xattr {:?} extra\n", String::from_utf8_lossy(k));
    }
    if out.is_empty() {
        out = full;
    }
    out
}
