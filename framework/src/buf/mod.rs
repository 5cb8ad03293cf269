//! Owned buffers for completion-style I/O.
//!
//! The kernel may read a send buffer, or write a receive buffer, after the
//! future that started the operation was dropped. So I/O takes buffers by
//! value ([`IoBuf`]) and gives them back with the result ([`BufResult`]),
//! and received data arrives in a [`RecvBuf`] lease from the core's pool.
//! A file read fills a buffer the caller lends ([`IoBufMut`]).
//! Several buffers sent together by one gathered write are an [`IoBufs`];
//! several filled by one scattered file read, an [`IoBufsMut`].

pub(crate) mod fixed;
mod io_buf;
mod io_buf_mut;
pub(crate) mod io_bufs;
pub(crate) mod io_bufs_mut;
mod recv;
mod slice;

pub use fixed::FixedBuf;
pub use io_buf::IoBuf;
pub use io_buf_mut::IoBufMut;
pub use io_bufs::IoBufs;
pub use io_bufs_mut::IoBufsMut;
pub use recv::RecvBuf;
pub use slice::Slice;

/// The result of an operation that took an owned buffer: the buffer comes
/// back whether the operation succeeded or not.
pub type BufResult<T, B> = (std::io::Result<T>, B);
