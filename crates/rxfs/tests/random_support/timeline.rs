//! Crash timelines: random operations run on a crash-simulated device
//! with, for each, the device clock at its start and end, and the model's
//! namespace after each operation that changed it. A recovery from the
//! device as it was at clock `p` must show one of the namespaces between
//! the last sync completed before `p` and the last operation started
//! before `p` ([`Timeline::allowed`]).

use super::gen::Gen;
use super::model::{Model, Op};
use super::targets::Target;
use super::view::{of_model, View};

pub struct Timeline {
    /// (op index, clock at start, clock at end, is sync)
    pub ops: Vec<(usize, usize, usize, bool)>,
    /// (op index after which this view holds, view)
    pub views: Vec<(usize, View)>,
}

impl Timeline {
    pub fn new(m: &Model) -> Timeline {
        Timeline {
            ops: Vec::new(),
            views: vec![(0, of_model(m, false))],
        }
    }

    /// Run up to `n` operations of `g` on `t` and the model (at most 80
    /// tries per operation), each result checked against the model's;
    /// returns how many ran. `what` names the run in a failure.
    pub fn run(
        &mut self,
        g: &mut Gen,
        m: &mut Model,
        t: &mut dyn Target,
        n: usize,
        what: &str,
    ) -> usize {
        let mut done = 0;
        let mut tries = 0;
        while done < n && tries < n * 80 {
            tries += 1;
            let Some(op) = g.op(m) else { continue };
            let start = t.clock();
            let want = m.apply(&op);
            let got = t.exec(&op);
            assert_eq!(got, want, "{what} op {done}: {}", super::describe(&op));
            done += 1;
            self.ops
                .push((done, start, t.clock(), matches!(op, Op::Sync)));
            if want.is_ok() {
                let v = of_model(m, false);
                if self.views.last().map(|x| &x.1) != Some(&v) {
                    self.views.push((done, v));
                }
            }
        }
        done
    }

    /// For a crash at device clock `p`: (the last op made stable by a
    /// sync that ended by `p`, the last op started before `p`, the views
    /// a recovery may show: the last at or before the first up to the
    /// last at or before the second).
    pub fn allowed(&self, p: usize) -> (usize, usize, &[(usize, View)]) {
        let lo = self
            .ops
            .iter()
            .filter(|o| o.3 && o.2 <= p)
            .map(|o| o.0)
            .max()
            .unwrap_or(0);
        let hi = self
            .ops
            .iter()
            .filter(|o| o.1 < p)
            .map(|o| o.0)
            .max()
            .unwrap_or(0);
        let first = self.views.iter().rposition(|v| v.0 <= lo).unwrap_or(0);
        let last = self.views.iter().rposition(|v| v.0 <= hi).unwrap_or(0);
        (lo, hi, &self.views[first..=last])
    }
}
