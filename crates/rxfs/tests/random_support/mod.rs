//! The seeded random-operation tester (issue 4): a generator ([`gen`])
//! drives a model ([`model`]) and a target ([`targets`]: the rxfs library,
//! a FUSE mount or the kernel's XFS) with the same operations; every
//! result (Ok or errno) must be the model's, the live tree must equal the
//! model's, and after each round the image must pass `xfs_repair -n` and
//! read identically through the kernel.

#![allow(dead_code)]

pub mod gen;
pub mod model;
pub mod targets;
pub mod timeline;
pub mod view;

use gen::Gen;
use model::{Model, Op};
use targets::Target;

/// Counts over a run.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub ops: usize,
    pub errors: usize,
}

/// Run `n` operations of `g` on `t` and the model; `Err` at the first
/// result that differs from the model's.
pub fn run_ops(
    g: &mut Gen,
    m: &mut Model,
    t: &mut dyn Target,
    n: usize,
    c: &mut Counts,
) -> Result<(), String> {
    run_ops_checked(g, m, t, n, c, &mut |_, _| Ok(()))
}

/// [`run_ops`], calling `after(model, op)` after each operation (a live
/// comparison while debugging).
pub fn run_ops_checked(
    g: &mut Gen,
    m: &mut Model,
    t: &mut dyn Target,
    n: usize,
    c: &mut Counts,
    after: &mut dyn FnMut(&Model, &Op) -> Result<(), String>,
) -> Result<(), String> {
    let mut done = 0;
    let mut tries = 0;
    while done < n {
        tries += 1;
        if tries > n * 50 {
            return Err(format!("generator stuck after {done} ops"));
        }
        let Some(op) = g.op(m) else { continue };
        let want = m.apply(&op);
        let got = t.exec(&op);
        if std::env::var_os("RND_TRACE").is_some() {
            eprintln!("TRACE {} {} -> {want:?}", c.ops, describe(&op));
        }
        if got != want {
            return Err(format!(
                "op {} {}: target {got:?}, model {want:?}",
                c.ops,
                describe(&op)
            ));
        }
        c.ops += 1;
        if want.is_err() {
            c.errors += 1;
        }
        done += 1;
        after(m, &op).map_err(|e| format!("after op {} {}: {e}", c.ops - 1, describe(&op)))?;
    }
    Ok(())
}

/// Close every open handle (model and target).
pub fn close_all(m: &mut Model, t: &mut dyn Target, c: &mut Counts) -> Result<(), String> {
    let hs: Vec<u64> = m.handles.keys().copied().collect();
    for h in hs {
        let op = Op::Close { h };
        m.apply(&op).unwrap();
        t.exec(&op).map_err(|e| format!("close {h}: errno {e}"))?;
        c.ops += 1;
    }
    Ok(())
}

/// An operation in one line (data lengths, not bytes).
pub fn describe(op: &Op) -> String {
    let s = format!("{op:?}");
    match op {
        Op::Write { e, off, data } => format!("Write {} at {off} len {}", e.path(), data.len()),
        Op::HWrite { h, off, data } => format!("HWrite h{h} at {off} len {}", data.len()),
        Op::Scatter { e, offs, data } => {
            format!(
                "Scatter {} {} x {} bytes from {:?}",
                e.path(),
                offs.len(),
                data.len(),
                offs.first()
            )
        }
        Op::SetXattr { e, key, val, how } => format!(
            "SetXattr {} {} len {} {how:?}",
            e.path(),
            String::from_utf8_lossy(key),
            val.len()
        ),
        Op::Create {
            e,
            kind: model::Kind::Symlink(t),
            ..
        } => format!("Symlink {} len {}", e.path(), t.len()),
        _ => {
            let mut s = s;
            s.truncate(400);
            s
        }
    }
}
