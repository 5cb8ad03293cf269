//! An owned sub-range of a buffer.

use std::ops::Range;

use super::IoBuf;

/// A range of an owned buffer, itself an owned buffer: lets a write resume
/// after a partial send, or send part of a buffer, without copying.
#[derive(Debug)]
pub struct Slice<B> {
    buf: B,
    range: Range<usize>,
}

impl<B: IoBuf> Slice<B> {
    /// The bytes `range` of `buf`.
    ///
    /// # Panics
    ///
    /// When `range` is not within `buf.bytes_init()`.
    pub fn new(buf: B, range: Range<usize>) -> Self {
        assert!(
            range.start <= range.end && range.end <= buf.bytes_init(),
            "slice {range:?} out of bounds of a {}-byte buffer",
            buf.bytes_init()
        );
        Slice { buf, range }
    }

    /// The range within the inner buffer.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// Gives the whole buffer back.
    pub fn into_inner(self) -> B {
        self.buf
    }
}

// SAFETY: the slice's bytes are a sub-range of `buf`'s initialised bytes,
// which are stable by `B`'s own contract.
unsafe impl<B: IoBuf> IoBuf for Slice<B> {
    fn stable_ptr(&self) -> *const u8 {
        self.buf.stable_ptr().wrapping_add(self.range.start)
    }
    fn bytes_init(&self) -> usize {
        self.range.len()
    }
    fn fixed_index(&self) -> Option<u16> {
        self.buf.fixed_index()
    }
}
