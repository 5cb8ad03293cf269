//! The [`IoBufsMut`] trait: several owned buffers one scattered read fills
//! in order ([`File::readv_at`](crate::fs::File::readv_at)).

use super::IoBufMut;

/// Several owned buffers that one scattered read fills in order, each
/// from its start up to its capacity ([`IoBufMut::bytes_total`]): the
/// first is filled before the second gets a byte.
///
/// Implemented for arrays `[B; N]` and `Vec<B>` of one [`IoBufMut`] type.
/// Sealed, as [`IoBufs`](super::IoBufs) is, for the same reason: the
/// kernel may write the buffers after the read's future was dropped, so
/// only collections whose buffers keep their bytes in place while the
/// collection moves can implement it.
///
/// ```
/// use percore::buf::IoBufsMut;
///
/// fn fillable(_bufs: impl IoBufsMut) {}
///
/// fillable([Vec::<u8>::with_capacity(4096), Vec::with_capacity(4096)]);
/// fillable(vec![vec![0u8; 512].into_boxed_slice(); 8]);
/// ```
pub trait IoBufsMut: sealed::Scatter + Unpin + 'static {}

impl<T: sealed::Scatter + Unpin + 'static> IoBufsMut for T {}

pub(crate) mod sealed {
    /// What a scattered read writes into. Out of users' reach: see
    /// [`IoBufsMut`](super::IoBufsMut) for why.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a collection of buffers for a scattered read",
        note = "`IoBufsMut` takes an array or a `Vec` of one `IoBufMut` type"
    )]
    pub trait Scatter {
        /// How many buffers.
        fn count(&self) -> usize;

        /// Where buffer `index` (`index < count()`) may be written, and
        /// how many bytes: its whole capacity, from its start.
        fn spare(&mut self, index: usize) -> (*mut u8, usize);

        /// Marks the first `n` bytes of buffer `index` as filled.
        ///
        /// # Safety
        ///
        /// `n` is at most the length `spare(index)` gave, and those bytes
        /// were written.
        unsafe fn set_init(&mut self, index: usize, n: usize);
    }
}

fn spare<B: IoBufMut>(buf: &mut B) -> (*mut u8, usize) {
    (buf.stable_mut_ptr(), buf.bytes_total())
}

impl<B: IoBufMut, const N: usize> sealed::Scatter for [B; N] {
    fn count(&self) -> usize {
        N
    }
    fn spare(&mut self, index: usize) -> (*mut u8, usize) {
        spare(&mut self[index])
    }
    unsafe fn set_init(&mut self, index: usize, n: usize) {
        // SAFETY: the caller's promise, passed on.
        unsafe { self[index].set_init(n) }
    }
}

impl<B: IoBufMut> sealed::Scatter for Vec<B> {
    fn count(&self) -> usize {
        self.len()
    }
    fn spare(&mut self, index: usize) -> (*mut u8, usize) {
        spare(&mut self[index])
    }
    unsafe fn set_init(&mut self, index: usize, n: usize) {
        // SAFETY: the caller's promise, passed on.
        unsafe { self[index].set_init(n) }
    }
}
