//! FUSE over io_uring (kernel 6.14+, `FUSE_OVER_IO_URING`): requests
//! arrive as completions of commands we keep queued on our own rings,
//! and one `io_uring_enter` both answers a request and waits for the next
//! (`FUSE_IO_URING_CMD_COMMIT_AND_FETCH`), where `/dev/fuse` takes a
//! `read` and a `writev`.
//!
//! Layout. The kernel keeps one queue per possible CPU and hands a request
//! to the queue of the CPU its caller runs on; the connection switches to
//! the rings only once every queue has an entry registered. Each entry
//! is two buffers we give the kernel at registration: a 288-byte header
//! (the request header in `in_out`, the opcode's fixed first argument
//! in `op_in`, the commit id and payload size in `ent`) and a payload
//! buffer (names, write data; on the way back, the reply's bytes).
//!
//! Threads. An event loop owns one ring with exactly one entry, so a
//! request the kernel gives to an entry always finds its loop idle: a
//! loop blocked in a log force holds only its own request, as with
//! `/dev/fuse`. Each queue gets `threads / queues` loops (at least two).
//!
//! Placement ([`Affinity`]). A loop runs where the scheduler puts it
//! while its queue has one request at a time, and pins itself to the
//! queue's CPU once it sees another loop of the queue busy (several
//! callers on that CPU), until the queue has been quiet again for
//! [`UNPIN_AFTER`] requests. Measured (`scripts/bench-dio`, 2 vCPUs):
//! with one caller, loops pinned to its CPU make every answer wake the
//! caller on the other CPU (its own is busy with the loop), 0.8x the
//! unpinned rate; with 4-16 callers pinned loops serve 1.3-1.5x the
//! requests of unpinned ones (no loop competes for the other queue's CPU).
//! FORGET and INTERRUPT still come through `/dev/fuse`, whose loops keep
//! running; when they see the unmount (ENODEV) they wake every ring loop
//! through an eventfd polled on each ring.
//!
//! The reply goes through [`RingSlot`]: handlers answer as on
//! `/dev/fuse`, the loop then copies the answer into the entry's payload
//! buffer (the kernel reads it from there).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use super::abi;
use super::reply::{Reply, RingSlot};
use super::request;
use super::session::Handler;

const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// The user data of the stop eventfd's poll.
const STOP: u64 = u64::MAX;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct EntInOut {
    flags: u64,
    commit_id: u64,
    payload_sz: u32,
    padding: u32,
    reserved: u64,
}

/// `struct fuse_uring_req_header`.
#[repr(C, align(64))]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
struct Header {
    in_out: [u8; 128],
    op_in: [u8; 128],
    ent: EntInOut,
    pad: [u8; 32],
}

/// `struct fuse_uring_cmd_req`, in the command area of the SQE.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct CmdReq {
    flags: u64,
    commit_id: u64,
    qid: u16,
    padding: [u8; 6],
}

/// Where the rings are and who stops them.
pub struct Rings {
    stop: OwnedFd,
    threads: Vec<std::thread::JoinHandle<io::Result<()>>>,
}

/// Whether the kernel will offer FUSE over io_uring at INIT: its fuse
/// module has the `enable_uring` parameter (kernel 6.14+) and it is on.
pub fn offered() -> Result<(), String> {
    const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";
    match std::fs::read_to_string(PARAM) {
        Ok(v) if v.trim() == "Y" => Ok(()),
        Ok(_) => Err(format!(
            "the kernel does not offer FUSE over io_uring ({PARAM} is off; as root: echo Y > {PARAM})"
        )),
        Err(_) => Err(format!(
            "the kernel does not offer FUSE over io_uring (no {PARAM}: it needs kernel 6.14+)"
        )),
    }
}

/// How many queues the kernel made: one per possible CPU.
pub fn possible_cpus() -> usize {
    let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/possible") else {
        return std::thread::available_parallelism().map_or(1, |n| n.get());
    };
    // "0-3", "0", "0-3,8-11": the highest listed + 1.
    s.trim()
        .split([',', '-'])
        .filter_map(|x| x.parse::<usize>().ok())
        .max()
        .map_or(1, |m| m + 1)
}

impl Rings {
    /// Start `per_queue` event loops for each of `queues` queues on the
    /// connection of `dev`; `payload` bytes of payload buffer each.
    pub fn start<H: Handler>(
        dev: i32,
        h: Arc<H>,
        queues: usize,
        per_queue: usize,
        payload: usize,
    ) -> io::Result<Rings> {
        // SAFETY: eventfd has no memory preconditions.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just made and own.
        let stop = unsafe { OwnedFd::from_raw_fd(efd) };
        let (tx, rx) = std::sync::mpsc::channel::<io::Result<()>>();
        let mut threads = Vec::new();
        for qid in 0..queues {
            let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            for i in 0..per_queue {
                let (h, tx, busy) = (h.clone(), tx.clone(), busy.clone());
                let t = std::thread::Builder::new()
                    .name(format!("rxfs-uring-{qid}.{i}"))
                    .spawn(move || {
                        let ring = Ring::register(dev, efd, qid as u16, payload);
                        match ring {
                            Ok(mut r) => {
                                let _ = tx.send(Ok(()));
                                drop(tx);
                                r.serve(&*h, Affinity::new(qid, busy))
                            }
                            Err(e) => {
                                let _ = tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                                Err(e)
                            }
                        }
                    })?;
                threads.push(t);
            }
        }
        drop(tx);
        let rings = Rings { stop, threads };
        // Every loop reports its registration; the first failure stops all.
        for r in rx {
            if let Err(e) = r {
                rings.stop();
                return Err(e);
            }
        }
        Ok(rings)
    }

    /// Wake every loop to end (the filesystem is unmounted).
    pub fn stop(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live local.
        unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Stop and wait for every loop.
    pub fn finish(self) {
        self.stop();
        for t in self.threads {
            match t.join() {
                Ok(Err(e)) => errln!("rxfs: FUSE io_uring loop: {e}"),
                Err(_) => errln!("rxfs: FUSE io_uring loop panicked"),
                Ok(Ok(())) => {}
            }
        }
    }
}

/// The CPUs the calling thread may run on.
fn thread_mask() -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        set
    }
}

/// Let the calling thread run on the CPUs of `set` only.
fn set_thread_mask(set: &libc::cpu_set_t) {
    // SAFETY: sched_setaffinity reads the set.
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
    }
}

/// Requests a pinned loop serves with no other loop of its queue busy
/// before it unpins itself.
pub const UNPIN_AFTER: u32 = 4096;

/// A loop's placement (see the module doc): pinned to its queue's CPU
/// while the queue serves several requests at once.
struct Affinity {
    cpu: usize,
    /// Loops of the queue inside a request now (shared by the queue's
    /// loops).
    busy: Arc<std::sync::atomic::AtomicUsize>,
    /// The CPUs the loop may run on when unpinned (the thread's mask at
    /// start).
    all: libc::cpu_set_t,
    pinned: bool,
    quiet: u32,
}

impl Affinity {
    fn new(cpu: usize, busy: Arc<std::sync::atomic::AtomicUsize>) -> Affinity {
        Affinity {
            cpu,
            busy,
            all: thread_mask(),
            pinned: false,
            quiet: 0,
        }
    }

    /// A request starts: count it, and pin or unpin.
    fn enter(&mut self) {
        use std::sync::atomic::Ordering;
        let others = self.busy.fetch_add(1, Ordering::Relaxed);
        if others > 0 {
            self.quiet = 0;
            if !self.pinned {
                // SAFETY: cpu_set_t is plain data; CPU_SET writes one bit
                // of it (cpu < CPU_SETSIZE: a queue's CPU number).
                let one = unsafe {
                    let mut one: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(self.cpu, &mut one);
                    one
                };
                set_thread_mask(&one);
                self.pinned = true;
                super::RING_PINS.fetch_add(1, Ordering::Relaxed);
            }
        } else if self.pinned {
            self.quiet += 1;
            if self.quiet >= UNPIN_AFTER {
                set_thread_mask(&self.all);
                self.pinned = false;
                self.quiet = 0;
                super::RING_UNPINS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The request is answered.
    fn leave(&self) {
        self.busy.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One event loop's ring and its one entry.
struct Ring {
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    dev: i32,
    qid: u16,
    header: Box<Header>,
    payload: Vec<u8>,
    iov: Box<[libc::iovec; 2]>,
    slot: Arc<RingSlot>,
    /// A completion taken while registering (a request can arrive before
    /// `register` returns): served first.
    early: Option<cqueue::Entry>,
}

/// The SQE of a FUSE ring command. The crate's builder has no field for
/// the SQE's `len`, which REGISTER needs (the iovec count): it is set in
/// the built entry, at its offset in `struct io_uring_sqe`.
fn fuse_cmd(dev: i32, op: u32, req: CmdReq, iov: Option<&[libc::iovec; 2]>) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[..std::mem::size_of::<CmdReq>()].copy_from_slice(req.as_bytes());
    let mut b = opcode::UringCmd80::new(types::Fd(dev), op).cmd(cmd);
    if let Some(iov) = iov {
        b = b.addr(Some(iov.as_ptr() as u64));
    }
    let mut e = b.build();
    if iov.is_some() {
        const SQE_LEN_OFFSET: usize = 24;
        // SAFETY: Entry128 is repr(C) around the 128-byte SQE, whose u32
        // `len` is at byte 24 (uapi `struct io_uring_sqe`).
        unsafe {
            let p = (&mut e as *mut squeue::Entry128 as *mut u8).add(SQE_LEN_OFFSET);
            (p as *mut u32).write_unaligned(2);
        }
    }
    e
}

impl Ring {
    fn register(dev: i32, stop: i32, qid: u16, payload: usize) -> io::Result<Ring> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry>::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(4)?;
        let mut header = Box::new(Header::new_zeroed());
        let mut payload = vec![0u8; payload];
        let iov = Box::new([
            libc::iovec {
                iov_base: header.as_mut_bytes().as_mut_ptr() as *mut libc::c_void,
                iov_len: 288,
            },
            libc::iovec {
                iov_base: payload.as_mut_ptr() as *mut libc::c_void,
                iov_len: payload.len(),
            },
        ]);
        let mut r = Ring {
            ring,
            dev,
            qid,
            header,
            payload,
            iov,
            slot: Arc::new(RingSlot::default()),
            early: None,
        };
        let poll = opcode::PollAdd::new(types::Fd(stop), libc::POLLIN as u32)
            .build()
            .user_data(STOP);
        let reg = fuse_cmd(
            dev,
            CMD_REGISTER,
            CmdReq {
                qid,
                ..Default::default()
            },
            Some(&r.iov),
        )
        .user_data(0);
        // SAFETY: the entries' buffers (header, payload, iovecs) live in
        // `r`, which outlives the ring's use of them (the ring is dropped
        // with `r`, cancelling its commands).
        unsafe {
            let mut sq = r.ring.submission();
            sq.push(&poll.into())
                .map_err(|_| io::Error::other("ring full"))?;
            sq.push(&reg).map_err(|_| io::Error::other("ring full"))?;
        }
        r.ring.submit()?;
        // A refused registration completes at once; a good one when a
        // request arrives, which may be already: keep that for `serve`.
        if let Some(c) = r.ring.completion().next() {
            if c.user_data() == 0 && c.result() < 0 {
                return Err(io::Error::from_raw_os_error(-c.result()));
            }
            r.early = Some(c);
        }
        Ok(r)
    }

    fn serve(&mut self, h: &dyn Handler, mut place: Affinity) -> io::Result<()> {
        loop {
            let c = match self.early.take() {
                Some(c) => c,
                None => {
                    match self.ring.submit_and_wait(1) {
                        Ok(_) => {}
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                        Err(e) => return Err(e),
                    }
                    let Some(c) = self.ring.completion().next() else {
                        continue;
                    };
                    c
                }
            };
            if c.user_data() == STOP {
                return Ok(());
            }
            let res = c.result();
            if res < 0 {
                // The connection ended (ENOTCONN, ECONNABORTED) or the
                // command was cancelled.
                return match -res {
                    libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED | libc::ENODEV => Ok(()),
                    // The kernel checks its enable_uring switch on every
                    // command: turned off under a live mount, the request
                    // just served can no longer be answered.
                    libc::EOPNOTSUPP => Err(io::Error::other(
                        "the kernel refused a FUSE io_uring command (enable_uring turned off \
                         while mounted?); a request is left unanswered",
                    )),
                    e => Err(io::Error::from_raw_os_error(e)),
                };
            }
            place.enter();
            let commit_id = self.handle(h);
            place.leave();
            let req = CmdReq {
                commit_id,
                qid: self.qid,
                ..Default::default()
            };
            let e = fuse_cmd(self.dev, CMD_COMMIT_AND_FETCH, req, None).user_data(0);
            // SAFETY: as at registration.
            unsafe {
                self.ring
                    .submission()
                    .push(&e)
                    .map_err(|_| io::Error::other("ring full"))?;
            }
        }
    }

    /// Run the request in the entry and put its answer in the entry.
    /// Returns the commit id.
    fn handle(&mut self, h: &dyn Handler) -> u64 {
        let ent = self.header.ent;
        let n = (ent.payload_sz as usize).min(self.payload.len());
        let parsed =
            request::parse_ring(&self.header.in_out, &self.header.op_in, &self.payload[..n]);
        super::RING_REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let unique = match parsed {
            Some((req, op)) => {
                let reply = Reply::ring(self.slot.clone(), req.unique);
                match op {
                    request::Op::Unknown => reply.error(libc::ENOSYS),
                    request::Op::Malformed => reply.error(libc::EINVAL),
                    op => h.dispatch(&req, op, reply),
                }
                req.unique
            }
            None => ent.commit_id,
        };
        let (header, payload) = (&mut self.header, &mut self.payload);
        self.slot.take(|a| {
            // Unanswered (a bug), or more than the buffer holds: EIO.
            let (error, data) = if !a.set || a.data.len() > payload.len() {
                (-libc::EIO, &[][..])
            } else {
                (a.error, &a.data[..])
            };
            payload[..data.len()].copy_from_slice(data);
            let out = abi::OutHeader {
                len: (std::mem::size_of::<abi::OutHeader>() + data.len()) as u32,
                error,
                unique,
            };
            header.in_out[..16].copy_from_slice(out.as_bytes());
            header.ent.payload_sz = data.len() as u32;
        });
        ent.commit_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(std::mem::size_of::<EntInOut>(), 32);
        assert_eq!(std::mem::offset_of!(Header, ent), 256);
        assert_eq!(std::mem::size_of::<CmdReq>(), 24);
        let iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; 2];
        let e = fuse_cmd(7, CMD_REGISTER, CmdReq::default(), Some(&iov));
        // SAFETY: reading the 128 bytes of the repr(C) entry.
        let b: [u8; 128] = unsafe { std::mem::transmute(e) };
        assert_eq!(b[0], 46, "IORING_OP_URING_CMD");
        assert_eq!(i32::from_ne_bytes(b[4..8].try_into().unwrap()), 7);
        assert_eq!(u32::from_ne_bytes(b[24..28].try_into().unwrap()), 2);
        assert_eq!(
            u64::from_ne_bytes(b[16..24].try_into().unwrap()),
            iov.as_ptr() as u64
        );
        assert!(possible_cpus() >= 1);
    }

    fn mask() -> Vec<usize> {
        let set = thread_mask();
        // SAFETY: CPU_ISSET reads the set.
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }

    /// A loop pins itself when another loop of its queue is busy, stays
    /// pinned while requests keep overlapping, and unpins (back to the
    /// mask it started with) after UNPIN_AFTER requests alone.
    #[test]
    fn affinity_follows_the_queue_load() {
        // A thread of its own: the test changes its thread's mask.
        std::thread::spawn(|| {
            let start = mask();
            let cpu = start[0];
            let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let mut a = Affinity::new(cpu, busy.clone());
            for _ in 0..10 {
                a.enter();
                a.leave();
            }
            assert!(!a.pinned);
            assert_eq!(mask(), start);
            busy.store(1, std::sync::atomic::Ordering::Relaxed); // another loop busy
            a.enter();
            assert!(a.pinned);
            assert_eq!(mask(), vec![cpu]);
            a.leave();
            busy.store(0, std::sync::atomic::Ordering::Relaxed);
            for i in 0..UNPIN_AFTER {
                assert!(a.pinned, "unpinned early, after {i} quiet requests");
                a.enter();
                a.leave();
            }
            assert!(!a.pinned);
            assert_eq!(mask(), start);
            assert_eq!(busy.load(std::sync::atomic::Ordering::Relaxed), 0);
        })
        .join()
        .unwrap();
    }
}
