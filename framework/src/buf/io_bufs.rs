//! The [`IoBufs`] trait: several owned buffers sent in order by one
//! gathered write ([`Stream::write_all_vectored`]).
//!
//! [`Stream::write_all_vectored`]: crate::net::Stream::write_all_vectored

use super::IoBuf;

/// Several owned buffers that one gathered write sends in order, without
/// copying them into one: a header and a body, or a response in pieces.
///
/// Implemented for arrays `[B; N]` and `Vec<B>` of one [`IoBuf`] type, and
/// for tuples of two to four buffers of any `IoBuf` types (the usual shape
/// is a small header and a body of another type). Buffers may be empty;
/// they are skipped.
///
/// The trait is sealed: the kernel may read the buffers after the write's
/// future was dropped, so only collections whose every buffer keeps its
/// bytes in place while the collection moves (which [`IoBuf`] promises of
/// each) can implement it.
///
/// ```
/// use percore::buf::IoBufs;
///
/// fn sendable(_bufs: impl IoBufs) {}
///
/// sendable((String::from("HTTP/1.1 200 OK\r\n\r\n"), vec![0u8; 1024]));
/// sendable([&b"a"[..], b"b", b""]);
/// sendable(vec![bytes::Bytes::from_static(b"many"); 64]);
/// ```
pub trait IoBufs: sealed::Gather + Unpin + 'static {}

impl<T: sealed::Gather + Unpin + 'static> IoBufs for T {}

pub(crate) mod sealed {
    /// What a gathered write reads from its buffers. Out of users' reach:
    /// see [`IoBufs`](super::IoBufs) for why.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a collection of buffers for a gathered write",
        note = "`IoBufs` takes a tuple of two to four `IoBuf`s, or an array or a `Vec` of one `IoBuf` type; one buffer alone goes to `write_all`"
    )]
    pub trait Gather {
        /// How many buffers, empty ones included.
        fn count(&self) -> usize;

        /// The bytes of buffer `index` (`index < count()`).
        fn bytes(&self, index: usize) -> &[u8];
    }
}

/// The bytes a send hands the kernel: those `stable_ptr` and
/// `bytes_init` describe, which [`IoBuf`]'s contract keeps in place while
/// the buffer moves (as it does into a dropped write's slot). Not
/// `as_bytes`, which an implementation may override with bytes that move.
fn sent<B: IoBuf>(buf: &B) -> &[u8] {
    // SAFETY: the trait's contract: `bytes_init` initialised bytes live at
    // `stable_ptr` for as long as `buf` does.
    unsafe { std::slice::from_raw_parts(buf.stable_ptr(), buf.bytes_init()) }
}

impl<B: IoBuf, const N: usize> sealed::Gather for [B; N] {
    fn count(&self) -> usize {
        N
    }
    fn bytes(&self, index: usize) -> &[u8] {
        sent(&self[index])
    }
}

impl<B: IoBuf> sealed::Gather for Vec<B> {
    fn count(&self) -> usize {
        self.len()
    }
    fn bytes(&self, index: usize) -> &[u8] {
        sent(&self[index])
    }
}

/// Implements `Gather` for a tuple of distinct buffer types.
macro_rules! gather_tuple {
    ($count:literal; $($index:tt $ty:ident),+) => {
        impl<$($ty: IoBuf),+> sealed::Gather for ($($ty,)+) {
            fn count(&self) -> usize {
                $count
            }
            fn bytes(&self, index: usize) -> &[u8] {
                match index {
                    $($index => sent(&self.$index),)+
                    _ => panic!("buffer {index} of a {}-tuple", $count),
                }
            }
        }
    };
}

gather_tuple!(2; 0 A, 1 B);
gather_tuple!(3; 0 A, 1 B, 2 C);
gather_tuple!(4; 0 A, 1 B, 2 C, 3 D);
