//! [`File::cached`]: whether a range of a file is in the page cache, so
//! that a caller can choose a call that reads the pages on the core
//! (`sendfile`, through [`Stream::send_file`](crate::net::Stream::send_file))
//! only when no page has to come from the disk.

use std::io;

use super::File;

/// `cachestat(2)`'s system call number (Linux 6.5), the same on every
/// architecture that has it; `libc` does not name it yet.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

impl File {
    /// Whether every page of bytes `pos..pos + len` is in the page cache
    /// now (`cachestat`). `false` where the kernel cannot say (before
    /// Linux 6.5): the caller then takes the path that never blocks.
    ///
    /// A snapshot: memory pressure may evict a page right after.
    pub fn cached(&self, pos: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let page = 4096;
        let first = pos / page;
        let last = (pos + len - 1) / page;
        let range = CachestatRange {
            off: first * page,
            len: (last - first + 1) * page,
        };
        let mut stat = Cachestat::default();
        // SAFETY: `range` is readable and `stat` writable for the call,
        // both `repr(C)` as the kernel lays them out; flags must be 0.
        let res = unsafe {
            libc::syscall(
                SYS_CACHESTAT,
                libc::c_long::from(self.raw()),
                &range as *const CachestatRange,
                &mut stat as *mut Cachestat,
                0 as libc::c_long,
            )
        };
        if res != 0 {
            tracing::trace!(error = %io::Error::last_os_error(), "cachestat");
            return false;
        }
        stat.nr_cache > last - first
    }
}
