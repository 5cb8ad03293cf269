//! [`AlignedBuf`]: heap memory aligned for `O_DIRECT`.

use std::alloc::{self, Layout};
use std::fmt;
use std::ptr::NonNull;

use crate::buf::{IoBuf, IoBufMut};

/// A zeroed, fixed-size buffer whose start is aligned to `align` bytes,
/// as reads and writes on a file opened with `O_DIRECT` need (the
/// device's logical block size, 512 or 4096 bytes).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer owns its allocation outright, as a `Box<[u8]>` does.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zero bytes starting at a multiple of `align`.
    ///
    /// # Panics
    ///
    /// When `align` is not a power of two, `len` is zero, or the size
    /// overflows; aborts if the allocation fails, as `Vec` does.
    pub fn zeroed(len: usize, align: usize) -> AlignedBuf {
        assert!(len > 0, "an AlignedBuf holds at least one byte");
        let layout = Layout::from_size_align(len, align).expect("a power-of-two alignment");
        // SAFETY: `layout` has a non-zero size (asserted above).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(ptr) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, layout }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.as_bytes()
    }

    /// The bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` zeroed-then-owned bytes, borrowed mutably with
        // `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this very layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.layout.size())
            .field("align", &self.layout.align())
            .finish()
    }
}

// SAFETY: the bytes live in the buffer's own heap allocation, all
// initialised (zeroed) from the start, and never move.
unsafe impl IoBuf for AlignedBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.layout.size()
    }
}

// SAFETY: as for `IoBuf`; every byte is writable, and always initialised,
// so `set_init` has nothing to record.
unsafe impl IoBufMut for AlignedBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.layout.size()
    }
    unsafe fn set_init(&mut self, _n: usize) {}
}
