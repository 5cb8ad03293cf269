//! Per-core tuning, with defaults sized for this project's target machines.

use crate::driver::uring::{BufConfig, RingConfig};

/// Settings every core of a server (or a `block_on` core) is built with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoreConfig {
    pub(crate) ring: RingConfig,
    pub(crate) bufs: BufConfig,
    /// Free heap-pool buffers a core keeps for reuse.
    pub(crate) pool_keep: usize,
    /// Registered write buffers per core (each `bufs.size` bytes). 16 ×
    /// 64 KiB = 1 MiB per core: two cores stay well under an 8 MiB
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
            // 256 × 64 KiB = 16 MiB of receive buffers per core, none of it
            // locked memory: buffer rings are not charged to RLIMIT_MEMLOCK,
            // and only the buffers in use are ever touched (the ring is kept
            // shallow). 64 KiB, as tokio's echo reads: a bulk transfer on
            // epoll then makes less than half the `recv` and `send` calls it
            // made with 32 KiB (1 GB echoed: 37,765 instead of 83,348), which
            // took its operations per CPU-second on `cargo bench`'s
            // bidirectional/64KiB cell from 0.84–0.87 to 0.99–1.03 of
            // tokio-ct. Small messages do not notice (duels within 1 %).
            bufs: BufConfig {
                count: 256,
                size: 64 * 1024,
                stream_cap: 16,
            },
            pool_keep: 256,
            fixed_count: 16,
        }
    }
}
