//! Does a recovered tree satisfy the [`History`] at a crash point? The
//! rules are in [`super::model`]'s docs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::model::{ns_shape, shape, History, InodeId, Namespace, Shape, State, Xattrs};
use super::target::parent_of;
use super::walk::{got_diff, Got, Tree};

const SECTOR: usize = 512;

/// What one check looked at.
#[derive(Debug, Default, Clone, Copy)]
pub struct Checked {
    /// Files whose content had to match one state exactly (made durable
    /// and not changed since, as of the crash point).
    pub exact: usize,
    /// Files checked sector by sector against several allowed states.
    pub windowed: usize,
}

fn sha(b: &[u8]) -> String {
    let d = Sha256::digest(b);
    d.iter().take(8).map(|x| format!("{x:02x}")).collect()
}

/// The shape of a recovered tree (link groups by inode number).
pub fn tree_shape(t: &Tree) -> Shape {
    shape(t.iter().map(|(p, g)| (p, g.dir, g.ino)))
}

fn shape_diff(want: &Shape, got: &Shape) -> String {
    let mut s = String::new();
    for (k, (d, grp)) in want {
        match got.get(k) {
            None => s += &format!(" missing {k}{};", if *d { "/" } else { "" }),
            Some((g, _)) if g != d => s += &format!(" {k} dir={g} want dir={d};"),
            Some((_, g)) if g != grp => {
                s += &format!(" {k} linked with {g}, want linked with {grp};")
            }
            _ => {}
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        s += &format!(" extra {k};");
    }
    s.truncate(1500);
    s
}

fn xattr_names(x: &Xattrs) -> String {
    let v: Vec<String> = x
        .iter()
        .map(|(k, v)| {
            let n = String::from_utf8_lossy(k);
            match n.char_indices().nth(24) {
                Some((i, _)) => format!(
                    "{}..({} bytes)={}B:{}",
                    &n[..i],
                    k.len(),
                    v.len(),
                    &sha(v)[..8]
                ),
                None => format!("{n}={}B:{}", v.len(), &sha(v)[..8]),
            }
        })
        .collect();
    format!("{{{}}}", v.join(" "))
}

/// Sector `i` of a state's content, zero-padded past its end.
fn sector_of(st: &State, i: usize, out: &mut [u8; SECTOR]) {
    out.fill(0);
    let c = &st.content;
    let lo = i * SECTOR;
    if lo < c.len() {
        let hi = (lo + SECTOR).min(c.len());
        out[..hi - lo].copy_from_slice(&c[lo..hi]);
    }
}

/// The image's own link structure: the names of one inode show one inode,
/// a file's link count is its number of names, a directory's is 2 + its
/// subdirectories, and no directory has two names.
pub fn check_links(t: &Tree) -> Vec<String> {
    let mut errs = Vec::new();
    let mut groups: BTreeMap<u64, Vec<(&String, &Got)>> = BTreeMap::new();
    for (p, g) in t {
        groups.entry(g.ino).or_default().push((p, g));
    }
    let mut subdirs: BTreeMap<&str, u32> = BTreeMap::new();
    for p in t.iter().filter(|(p, g)| g.dir && *p != "/").map(|(p, _)| p) {
        *subdirs.entry(parent_of(p)).or_default() += 1;
    }
    for (ino, names) in &groups {
        let (p0, g0) = names[0];
        if g0.dir {
            if names.len() > 1 {
                errs.push(format!("directory inode {ino} has {} names", names.len()));
            }
            let want = 2 + subdirs.get(p0.as_str()).copied().unwrap_or(0);
            if g0.nlink != want {
                errs.push(format!(
                    "{p0}: directory link count {}, want {want} (2 + subdirectories)",
                    g0.nlink
                ));
            }
            continue;
        }
        if g0.nlink as usize != names.len() && !g0.other {
            let ps: Vec<&str> = names.iter().map(|(p, _)| p.as_str()).collect();
            errs.push(format!(
                "inode {ino}: link count {} but {} names {ps:?}",
                g0.nlink,
                names.len()
            ));
        }
        for (p, g) in &names[1..] {
            if *g != g0 {
                errs.push(format!(
                    "{p0} and {p} are links to inode {ino} but differ: {}",
                    got_diff(g0, g)
                ));
            }
        }
    }
    errs
}

/// Check `t`, the tree recovered from a crash at point `p`. Returns what
/// was checked, or every violation found.
pub fn check_tree(h: &History, p: usize, t: &Tree) -> Result<Checked, String> {
    let b = h.bounds(p);
    let mut errs = check_links(t);
    let mut done = Checked::default();

    let got = tree_shape(t);
    let cands = h.namespaces(&b);
    let matching: Vec<&Arc<Namespace>> = cands
        .iter()
        .filter(|(_, n)| ns_shape(n) == got)
        .map(|(_, n)| n)
        .collect();
    let ns_ok = !matching.is_empty();
    if !ns_ok {
        let (lo_op, lo_ns) = &cands[0];
        let (hi_op, hi_ns) = &cands[cands.len() - 1];
        errs.push(format!(
            "namespace is not that after any op in [{}, {}] ({} candidates); vs op {lo_op}:{}; vs op {hi_op}:{}",
            b.ns_lo,
            b.upper,
            cands.len(),
            shape_diff(&ns_shape(lo_ns), &got),
            shape_diff(&ns_shape(hi_ns), &got)
        ));
    }
    // Without a matching namespace, judge each path against every
    // candidate that has it (the namespace error is reported already).
    let pool: Vec<&Arc<Namespace>> = if ns_ok {
        matching
    } else {
        cands.iter().map(|(_, n)| n).collect()
    };

    for (path, g) in t {
        if g.other {
            errs.push(format!("{path}: neither a file nor a directory"));
            continue;
        }
        let inos: BTreeSet<InodeId> = pool
            .iter()
            .filter_map(|n| n.get(path))
            .filter(|e| e.dir == g.dir)
            .map(|e| e.ino)
            .collect();
        let present = |data: bool| -> (Vec<Arc<State>>, usize) {
            let mut out = Vec::new();
            let mut lo_min = usize::MAX;
            for &ino in &inos {
                let (mlo, dlo) = b.inode_lo(ino);
                let lo = if data { dlo } else { mlo };
                lo_min = lo_min.min(lo);
                out.extend(
                    h.states(ino, lo, b.upper)
                        .into_iter()
                        .filter_map(|(_, s)| s)
                        .filter(|s| s.dir == g.dir),
                );
            }
            (out, lo_min)
        };
        let (meta, mlo) = present(false);
        if meta.is_empty() {
            // Reported by the namespace check unless the kind is wrong.
            if ns_ok {
                errs.push(format!("{path}: no allowed state of this kind"));
            }
            continue;
        }
        let attrs_ok = |s: &State| s.perm == g.perm && s.uid == g.uid && s.gid == g.gid;
        if !meta.iter().any(|s| attrs_ok(s) && *s.xattrs == g.xattrs) {
            if meta.iter().any(|s| attrs_ok(s)) {
                let allowed: Vec<String> = meta.iter().map(|s| xattr_names(&s.xattrs)).collect();
                errs.push(format!(
                    "{path}: xattrs {} not among the allowed [{}] (ops {mlo}..={})",
                    xattr_names(&g.xattrs),
                    allowed.join(", "),
                    b.upper
                ));
            } else {
                let allowed: Vec<String> = meta
                    .iter()
                    .map(|s| format!("{:o} {}:{}", s.perm, s.uid, s.gid))
                    .collect();
                errs.push(format!(
                    "{path}: attributes {:o} {}:{} not among the allowed [{}] (ops {mlo}..={})",
                    g.perm,
                    g.uid,
                    g.gid,
                    allowed.join(", "),
                    b.upper
                ));
            }
        }
        if let Some(m) = meta[0].mtime {
            if meta.iter().all(|s| s.mtime == Some(m)) && g.mtime != m {
                errs.push(format!("{path}: mtime {:?}, set to {m:?}", g.mtime));
            }
        }
        if g.dir {
            continue;
        }
        let (states, dlo) = present(true);
        let mut data: Vec<Arc<State>> = Vec::new();
        for s in states {
            if !data.iter().any(|d| d.content == s.content) {
                data.push(s);
            }
        }
        if data.is_empty() {
            continue;
        }
        if !data.iter().any(|s| s.content.len() as u64 == g.size) {
            let sizes: Vec<usize> = data.iter().map(|s| s.content.len()).collect();
            errs.push(format!(
                "{path}: size {} not among the allowed {sizes:?} (ops {dlo}..={})",
                g.size, b.upper
            ));
            continue;
        }
        if data.len() == 1 {
            done.exact += 1;
            if *data[0].content != g.content {
                let first = data[0]
                    .content
                    .iter()
                    .zip(&g.content)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                errs.push(format!(
                    "{path}: content sha256 {} differs from the durable {} (size {}, first difference at byte {first}, ops {dlo}..={})",
                    sha(&g.content),
                    sha(&data[0].content),
                    g.size,
                    b.upper
                ));
            }
            continue;
        }
        done.windowed += 1;
        let mut want = [0u8; SECTOR];
        for (i, chunk) in g.content.chunks(SECTOR).enumerate() {
            let ok = data.iter().any(|s| {
                sector_of(s, i, &mut want);
                want[..chunk.len()] == *chunk
            });
            if !ok {
                errs.push(format!(
                    "{path}: sector {i} (byte {}) matches none of the {} allowed states (ops {dlo}..={})",
                    i * SECTOR,
                    data.len(),
                    b.upper
                ));
                break;
            }
        }
    }
    if errs.is_empty() {
        Ok(done)
    } else {
        errs.truncate(12);
        Err(errs.join("\n"))
    }
}

/// The model's current tree (namespace and each path's state) compared
/// with a live one (before any crash): a check of the write path itself.
pub fn check_live(
    ns: &Namespace,
    model: &BTreeMap<String, Arc<State>>,
    t: &Tree,
) -> Result<(), String> {
    let mut errs = check_links(t);
    let (want, got) = (ns_shape(ns), tree_shape(t));
    if want != got {
        errs.push(format!("namespace:{}", shape_diff(&want, &got)));
    }
    for (p, s) in model {
        match t.get(p) {
            None => errs.push(format!("{p}: missing")),
            Some(g) => {
                if g.dir != s.dir || g.perm != s.perm || g.uid != s.uid || g.gid != s.gid {
                    errs.push(format!(
                        "{p}: dir {} perm {:o} {}:{}, model dir {} perm {:o} {}:{}",
                        g.dir, g.perm, g.uid, g.gid, s.dir, s.perm, s.uid, s.gid
                    ));
                }
                if g.xattrs != *s.xattrs {
                    errs.push(format!(
                        "{p}: xattrs {}, model {}",
                        xattr_names(&g.xattrs),
                        xattr_names(&s.xattrs)
                    ));
                }
                if !s.dir && (g.size != s.content.len() as u64 || g.content != *s.content) {
                    errs.push(format!(
                        "{p}: size {} sha {}, model size {} sha {}",
                        g.size,
                        sha(&g.content),
                        s.content.len(),
                        sha(&s.content)
                    ));
                }
                if let Some(m) = s.mtime {
                    if g.mtime != m {
                        errs.push(format!("{p}: mtime {:?}, model {m:?}", g.mtime));
                    }
                }
            }
        }
    }
    for p in t.keys().filter(|p| !model.contains_key(*p)) {
        errs.push(format!("{p}: not in the model"));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        errs.truncate(12);
        Err(errs.join("\n"))
    }
}
