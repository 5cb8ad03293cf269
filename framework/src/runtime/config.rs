//! Per-core tuning, with defaults sized for this project's target machines.

use crate::driver::uring::{BufConfig, RingConfig};

/// Settings every core of a server (or a `block_on` core) is built with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoreConfig {
    pub(crate) ring: RingConfig,
    pub(crate) bufs: BufConfig,
    /// Free heap-pool buffers a core keeps for reuse.
    pub(crate) pool_keep: usize,
    /// Registered write buffers per core (each `bufs.size` bytes). 32 ×
    /// 32 KiB = 1 MiB per core: two cores stay well under an 8 MiB
    /// `RLIMIT_MEMLOCK`.
    pub(crate) fixed_count: u16,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            ring: RingConfig {
                entries: 1024,
                cq_entries: 4096,
                sqpoll_idle_ms: None,
                // Off: see `ServerBuilder::wait_batching` for why.
                batch_wait_usec: None,
            },
            // 256 × 32 KiB = 8 MiB of receive buffers per core, none of it
            // locked memory: buffer rings are not charged to RLIMIT_MEMLOCK.
            // 32 KiB rather than 16 KiB: bulk transfers then need half the
            // sends per byte, which closed most of the gap to tokio's 64 KiB
            // reads on the 1 MiB throughput and 16 KiB streaming benchmarks.
            bufs: BufConfig {
                count: 256,
                size: 32 * 1024,
                stream_cap: 16,
            },
            pool_keep: 256,
            fixed_count: 32,
        }
    }
}
