//! The [`IoBufMut`] trait: memory the kernel may fill.

/// A buffer the kernel may write into while percore owns it: the
/// destination of a file read.
///
/// A read fills the buffer from its start, up to [`bytes_total`]
/// bytes, and then marks what it filled with [`set_init`].
///
/// # Safety
///
/// Implementors promise that:
/// - `stable_mut_ptr()` points to `bytes_total()` writable bytes;
/// - the pointer and the bytes stay valid while the value exists, even if
///   the value itself is moved (the bytes live on the heap, not inline);
/// - after `set_init(n)`, the first `n` bytes count as initialised
///   (`bytes_init() >= n`).
///
/// [`bytes_total`]: IoBufMut::bytes_total
/// [`set_init`]: IoBufMut::set_init
pub unsafe trait IoBufMut: super::IoBuf {
    /// Start of the writable bytes.
    fn stable_mut_ptr(&mut self) -> *mut u8;

    /// How many bytes, from `stable_mut_ptr()`, may be written: a
    /// `Vec`'s capacity, a boxed slice's length.
    fn bytes_total(&self) -> usize;

    /// Marks the first `n` bytes as initialised.
    ///
    /// # Safety
    ///
    /// - `n <= bytes_total()`;
    /// - the first `n` bytes were written (by the kernel or the caller).
    unsafe fn set_init(&mut self, n: usize);
}

// SAFETY: a Vec's spare capacity lives on the heap with its bytes; moving
// the Vec moves neither.
unsafe impl IoBufMut for Vec<u8> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.capacity()
    }
    unsafe fn set_init(&mut self, n: usize) {
        if n > self.len() {
            // SAFETY: the caller wrote the first `n <= capacity` bytes.
            unsafe { self.set_len(n) };
        }
    }
}

// SAFETY: a boxed slice's bytes live on the heap and are all initialised
// from the start, so `set_init` has nothing to record.
unsafe impl IoBufMut for Box<[u8]> {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.len()
    }
    unsafe fn set_init(&mut self, _n: usize) {}
}
