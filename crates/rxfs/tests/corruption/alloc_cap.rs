//! A global allocator for the corruption test binary that refuses
//! allocations a damaged image must never cause: one request above
//! [`MAX_SINGLE`] bytes, or more than [`MAX_LIVE`] bytes live at once.
//! A refusal prints the seed being run (straight to fd 2: the test
//! harness's output capture would be lost when the process aborts) and then
//! returns null, which aborts the process: the run fails loudly.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The fixture image itself is 320 MiB; nothing else may come close.
pub const MAX_SINGLE: usize = 512 << 20;
/// Two copies of the fixture plus working memory.
pub const MAX_LIVE: usize = 1536 << 20;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static SEED: AtomicU64 = AtomicU64::new(u64::MAX);

pub fn set_seed(seed: u64) {
    SEED.store(seed, Ordering::Relaxed);
}

pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

pub struct CapAlloc;

/// A fixed-size formatter that never allocates.
struct StackBuf {
    b: [u8; 160],
    n: usize,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let k = s.len().min(self.b.len() - self.n);
        self.b[self.n..self.n + k].copy_from_slice(&s.as_bytes()[..k]);
        self.n += k;
        Ok(())
    }
}

fn refuse(size: usize) {
    let mut m = StackBuf { b: [0; 160], n: 0 };
    let _ = std::fmt::Write::write_fmt(
        &mut m,
        format_args!(
            "\nALLOCATION CAP: {size} bytes requested with {} live, seed {}\n",
            LIVE.load(Ordering::Relaxed),
            SEED.load(Ordering::Relaxed) as i64
        ),
    );
    unsafe { libc::write(2, m.b.as_ptr().cast(), m.n) };
}

fn admit(size: usize) -> bool {
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    if size > MAX_SINGLE || live > MAX_LIVE {
        LIVE.fetch_sub(size, Ordering::Relaxed);
        refuse(size);
        return false;
    }
    PEAK.fetch_max(live, Ordering::Relaxed);
    true
}

unsafe impl GlobalAlloc for CapAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !admit(layout.size()) {
            return std::ptr::null_mut();
        }
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && !admit(new_size - layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if new_size > layout.size() {
                LIVE.fetch_sub(new_size - layout.size(), Ordering::Relaxed);
            }
        } else if new_size < layout.size() {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        p
    }
}
