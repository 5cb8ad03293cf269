//! An HTTP/1.1 client for code running on a core. For now, the pieces
//! the fan-out proxy runs its upstream exchanges on: the per-origin
//! keep-alive pool, the connect, the exchange and the response parser.

pub(crate) mod connect;
pub(crate) mod exchange;
pub(crate) mod parse;
pub(crate) mod pool;

pub use pool::PoolConfig;

#[cfg(test)]
mod tests;
