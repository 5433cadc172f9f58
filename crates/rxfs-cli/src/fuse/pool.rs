//! A bounded pool of worker threads for FUSE requests.
//!
//! fuser's session loop reads and dispatches one request at a time; each
//! handler hands its (Send) reply object to this pool, so a slow read does
//! not hold up lookups behind it. The queue is bounded: when every worker
//! is busy and the queue is full, the session thread waits, which pushes
//! back on the kernel instead of growing memory. Idle workers wait on the
//! queue itself (a multi-consumer channel): a job wakes one worker, and
//! no worker sleeps holding a lock that the others queue behind (with a
//! shared receiver under a mutex, each job cost a second wakeup; seen in
//! a profile of 4 KiB direct writes).
//!
//! A job that panics (a bug) is caught so its worker survives; the reply it
//! held is dropped unanswered, and fuser answers EIO for it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

type Job = Box<dyn FnOnce() + Send + 'static>;

pub struct Pool {
    tx: Option<Sender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `threads` workers and room for `queue` waiting jobs.
    pub fn new(threads: usize, queue: usize) -> std::io::Result<Pool> {
        let threads = threads.max(1);
        let (tx, rx) = bounded::<Job>(queue);
        let mut workers = Vec::with_capacity(threads);
        for i in 0..threads {
            let rx = rx.clone();
            let h = std::thread::Builder::new()
                .name(format!("rxfs-worker-{i}"))
                .spawn(move || worker(rx))?;
            workers.push(h);
        }
        Ok(Pool {
            tx: Some(tx),
            workers,
        })
    }

    /// Queue a job (blocks while the queue is full).
    pub fn execute(&self, job: impl FnOnce() + Send + 'static) {
        if let Some(tx) = &self.tx {
            // Fails only if every worker is gone, which cannot happen
            // while `self` holds the sender and workers catch panics.
            let _ = tx.send(Box::new(job));
        }
    }
}

fn worker(rx: Receiver<Job>) {
    loop {
        match rx.recv() {
            Ok(job) => {
                if catch_unwind(AssertUnwindSafe(job)).is_err() {
                    eprintln!("rxfs: a request handler panicked (bug); the request got EIO");
                }
            }
            Err(_) => return,
        }
    }
}

impl Drop for Pool {
    /// Let queued jobs finish, then join every worker.
    fn drop(&mut self) {
        drop(self.tx.take());
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::channel;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn slow_job_does_not_block_others() {
        let pool = Pool::new(2, 4).unwrap();
        let (gate_tx, gate_rx) = channel::<()>();
        let (done_tx, done_rx) = channel::<&str>();
        let d1 = done_tx.clone();
        pool.execute(move || {
            gate_rx.recv().unwrap();
            d1.send("slow").unwrap();
        });
        pool.execute(move || done_tx.send("fast").unwrap());
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(5)), Ok("fast"));
        gate_tx.send(()).unwrap();
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(5)), Ok("slow"));
    }

    #[test]
    fn drop_runs_queued_jobs_and_survives_panics() {
        let n = Arc::new(AtomicUsize::new(0));
        {
            let pool = Pool::new(1, 16).unwrap();
            pool.execute(|| panic!("boom"));
            for _ in 0..10 {
                let n = n.clone();
                pool.execute(move || {
                    n.fetch_add(1, Ordering::SeqCst);
                });
            }
        }
        assert_eq!(n.load(Ordering::SeqCst), 10);
    }
}
