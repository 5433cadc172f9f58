//! How long the allocator keeps freed memory before handing it back (set
//! by `rxfs mount` and `rxfs bench`).
//!
//! mimalloc returns ("purges") memory unused for
//! `purge_delay` ms (1 s by default). A mounted filesystem frees and
//! reallocates in waves (a checkpoint's log vectors, a burst of in-core
//! inodes): memory purged between two waves is faulted back in, and with
//! transparent huge pages each such fault zeroes 2 MiB. Measured on the
//! FUSE daemon creating empty files (2 vCPUs, `perf record`): the kernel's
//! zeroing of those pages (`clear_page_erms` under
//! `do_huge_pmd_anonymous_page`, reached from mimalloc's page set-up) took
//! 3% of the daemon's CPU with one creating thread and 5.6% with two; 0.06
//! faults per create by default, 0.02 with purging off. Memory unused for
//! [`PURGE_DELAY_MS`] is still given back, so an idle daemon shrinks.
//!
//! Tried and dropped: no transparent huge pages for the daemon
//! (`PR_SET_THP_DISABLE`). Its memory after 20,000 creates by two threads
//! fell from 180-198 MiB to 67 MiB (`VmHWM`: each of the 32-64 event
//! loops' allocator heaps faults whole 2 MiB pages in), but its user time
//! per create rose (small pages, more TLB misses): 5 interleaved rounds,
//! one thread 8.1k -> 7.6k creates/s.

/// Purge delay set by [`keep_freed_memory`], in milliseconds.
pub const PURGE_DELAY_MS: i64 = 10_000;

/// mimalloc's `mi_option_purge_delay` (v3's `mi_option_e`; checked
/// against its default below before it is set).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// Its default in the mimalloc this crate is built with.
const DEFAULT_PURGE_DELAY_MS: i64 = 1000;

/// Keep freed memory for [`PURGE_DELAY_MS`] before purging it. Does
/// nothing if the option does not hold its known default (another
/// mimalloc, or `MIMALLOC_PURGE_DELAY` set by the user, who then decides).
/// Returns whether the delay was set.
pub fn keep_freed_memory() -> bool {
    // SAFETY: mi_option_get/set take an option index and a value, no
    // pointers; an index mimalloc does not know is ignored by it.
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) as i64 != DEFAULT_PURGE_DELAY_MS {
            return false;
        }
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS as _);
        libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) as i64 == PURGE_DELAY_MS
    }
}

#[cfg(test)]
mod tests {
    /// The environment variable that would make mimalloc start with
    /// another purge delay.
    const ENV: &str = "MIMALLOC_PURGE_DELAY";

    #[test]
    fn the_purge_delay_option_is_the_one_we_think() {
        // The index names purge_delay in the mimalloc we link: it holds the
        // documented default, and setting it is read back. With the
        // variable set, the check runs in a child without it.
        if std::env::var_os(ENV).is_some() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "alloc_tuning::tests::the_purge_delay_option_is_the_one_we_think",
                ])
                .env_remove(ENV)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{text}");
            assert!(text.contains("1 passed"), "{text}");
            return;
        }
        assert!(super::keep_freed_memory());
        // SAFETY: as in keep_freed_memory.
        let now = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(now as i64, super::PURGE_DELAY_MS);
    }
}
