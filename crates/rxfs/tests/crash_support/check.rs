//! Does a recovered tree satisfy the [`History`] at a crash point? The
//! rules are in [`super::model`]'s docs.

use sha2::{Digest, Sha256};

use super::model::{History, Namespace, State};
use super::walk::Tree;

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

fn ns_diff(want: &Namespace, got: &Namespace) -> String {
    let mut s = String::new();
    for (k, d) in want {
        match got.get(k) {
            None => s += &format!(" missing {k}{};", if *d { "/" } else { "" }),
            Some(g) if g != d => s += &format!(" {k} dir={g} want dir={d};"),
            _ => {}
        }
    }
    for k in got.keys().filter(|k| !want.contains_key(*k)) {
        s += &format!(" extra {k};");
    }
    s.truncate(1500);
    s
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

/// Check `t`, the tree recovered from a crash at point `p`. Returns what
/// was checked, or every violation found.
pub fn check_tree(h: &History, p: usize, t: &Tree) -> Result<Checked, String> {
    let b = h.bounds(p);
    let mut errs = Vec::new();
    let mut done = Checked::default();

    let got: Namespace = t.iter().map(|(k, g)| (k.clone(), g.dir)).collect();
    let cands = h.namespaces(&b);
    if !cands.iter().any(|(_, n)| **n == got) {
        let (lo_op, lo_ns) = &cands[0];
        let (hi_op, hi_ns) = &cands[cands.len() - 1];
        errs.push(format!(
            "namespace is not that after any op in [{}, {}] ({} candidates); vs op {lo_op}:{}; vs op {hi_op}:{}",
            b.ns_lo,
            b.upper,
            cands.len(),
            ns_diff(lo_ns, &got),
            ns_diff(hi_ns, &got)
        ));
    }

    for (path, g) in t {
        if g.other {
            errs.push(format!("{path}: neither a file nor a directory"));
            continue;
        }
        let (plo_meta, plo_data) = b.lo.get(path).copied().unwrap_or((0, 0));
        let mlo = b.all_lo.max(plo_meta);
        let dlo = b.all_lo.max(plo_data);
        let present = |lo| -> Vec<std::sync::Arc<State>> {
            h.states(path, lo, b.upper)
                .into_iter()
                .filter_map(|(_, s)| s)
                .filter(|s| s.dir == g.dir)
                .collect()
        };
        let meta = present(mlo);
        if meta.is_empty() {
            // Reported by the namespace check unless the kind is wrong.
            if !errs.iter().any(|e| e.starts_with("namespace")) {
                errs.push(format!("{path}: no allowed state of this kind"));
            }
            continue;
        }
        if !meta
            .iter()
            .any(|s| s.perm == g.perm && s.uid == g.uid && s.gid == g.gid)
        {
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
        if let Some(m) = meta[0].mtime {
            if meta.iter().all(|s| s.mtime == Some(m)) && g.mtime != m {
                errs.push(format!("{path}: mtime {:?}, set to {m:?}", g.mtime));
            }
        }
        if g.dir {
            continue;
        }
        let mut data: Vec<std::sync::Arc<State>> = Vec::new();
        for s in present(dlo) {
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

/// The model's tree compared with a live one (before any crash): a check
/// of the write path itself.
pub fn check_live(
    model: &std::collections::BTreeMap<String, std::sync::Arc<State>>,
    t: &Tree,
) -> Result<(), String> {
    let mut errs = Vec::new();
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
