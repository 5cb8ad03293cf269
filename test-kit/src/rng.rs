//! Seeded random bytes: the sending and the checking side of a test make
//! the same ones.

use std::sync::OnceLock;

/// A small, fast, seedable generator (xorshift64*): no dependency, and the
/// same seed gives the same bytes on the sending and the checking side.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose bytes depend only on `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// Fills `out` with random bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// 4 MiB of random bytes, made once per process. Each connection of a
/// stream test sends its own window of it (a distinct offset), so bytes
/// that cross from one connection to another are caught.
pub fn random_pool() -> &'static [u8] {
    static POOL: OnceLock<Vec<u8>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut pool = vec![0u8; 4 << 20];
        Rng::new(0x5EED).fill(&mut pool);
        pool
    })
}

/// Connection `id`'s `len` bytes of [`random_pool`].
pub fn pattern(id: usize, len: usize) -> &'static [u8] {
    let pool = random_pool();
    assert!(len <= pool.len() / 2, "pattern too long");
    let off = (id * 5003) % (pool.len() - len);
    &pool[off..off + len]
}
