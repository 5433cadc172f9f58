//! A bounded pool of worker threads for FUSE requests.
//!
//! fuser's session loop reads and dispatches one request at a time; each
//! handler hands its (Send) reply object to this pool, so a slow read does
//! not hold up lookups behind it. The queue is bounded: when every worker
//! is busy and the queue is full, the session thread waits, which pushes
//! back on the kernel instead of growing memory.
//!
//! The queue is a mutex-guarded deque with two condition variables: idle
//! workers sleep on `work` without holding the mutex, and a job wakes
//! exactly one of them. (Profiles of 4 KiB direct writes: a receiver
//! shared under a mutex cost a second wakeup per job, and a spinning
//! channel spent a quarter of the daemon's time in `sched_yield` on two
//! CPUs.)
//!
//! A job that panics (a bug) is caught so its worker survives; the reply it
//! held is dropped unanswered, and fuser answers EIO for it.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    q: Mutex<Queue>,
    /// Signalled when a job is queued (or the pool closes).
    work: Condvar,
    /// Signalled when a job leaves a full queue.
    room: Condvar,
    cap: usize,
}

pub struct Pool {
    sh: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `threads` workers and room for `queue` waiting jobs.
    pub fn new(threads: usize, queue: usize) -> std::io::Result<Pool> {
        let threads = threads.max(1);
        let sh = Arc::new(Shared {
            q: Mutex::new(Queue {
                jobs: VecDeque::with_capacity(queue.max(1)),
                closed: false,
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            cap: queue.max(1),
        });
        let mut workers = Vec::with_capacity(threads);
        for i in 0..threads {
            let sh = sh.clone();
            let h = std::thread::Builder::new()
                .name(format!("rxfs-worker-{i}"))
                .spawn(move || worker(&sh))?;
            workers.push(h);
        }
        Ok(Pool { sh, workers })
    }

    /// Queue a job (blocks while the queue is full).
    pub fn execute(&self, job: impl FnOnce() + Send + 'static) {
        let mut q = self.sh.q.lock();
        while q.jobs.len() >= self.sh.cap {
            self.sh.room.wait(&mut q);
        }
        q.jobs.push_back(Box::new(job));
        drop(q);
        self.sh.work.notify_one();
    }
}

fn worker(sh: &Shared) {
    loop {
        let job = {
            let mut q = sh.q.lock();
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    if q.jobs.len() + 1 == sh.cap {
                        sh.room.notify_one();
                    }
                    break j;
                }
                if q.closed {
                    return;
                }
                sh.work.wait(&mut q);
            }
        };
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            eprintln!("rxfs: a request handler panicked (bug); the request got EIO");
        }
    }
}

impl Drop for Pool {
    /// Let queued jobs finish, then join every worker.
    fn drop(&mut self) {
        self.sh.q.lock().closed = true;
        self.sh.work.notify_all();
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
