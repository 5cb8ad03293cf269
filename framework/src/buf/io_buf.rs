//! The [`IoBuf`] trait: memory that may be handed to the kernel.

use bytes::{Bytes, BytesMut};

/// A buffer whose bytes may be sent by the kernel while percore owns it.
///
/// # Safety
///
/// Implementors promise that:
/// - `stable_ptr()` points to `bytes_init()` initialised bytes;
/// - the pointer and the bytes stay valid and unchanged while the value
///   exists, even if the value itself is moved (the bytes must live on the
///   heap or in static memory, not inline in the value);
/// - neither method has side effects.
///
/// percore implements it for `Vec<u8>`, `Box<[u8]>`, `String`, static
/// bytes and strings (byte string literals included), `Bytes`,
/// `BytesMut`, and its own [`RecvBuf`](crate::buf::RecvBuf),
/// [`FixedBuf`](crate::buf::FixedBuf) and [`Slice`](crate::buf::Slice).
///
/// ```
/// use percore::buf::IoBuf;
///
/// fn sendable(buf: impl IoBuf) -> usize {
///     buf.as_bytes().len()
/// }
///
/// assert_eq!(sendable(b"ERR unknown command\n"), 20);
/// assert_eq!(sendable(&b"OK\n"[..]), 3);
/// assert_eq!(sendable(String::from("hi")), 2);
/// ```
pub unsafe trait IoBuf: Unpin + 'static {
    /// Start of the bytes to send.
    fn stable_ptr(&self) -> *const u8;

    /// How many bytes, from `stable_ptr()`, hold data.
    fn bytes_init(&self) -> usize;

    /// The index of the registered buffer these bytes lie in, if any; lets
    /// the io_uring backend send without pinning pages. Only percore's
    /// [`FixedBuf`](crate::buf::FixedBuf) (and slices of it) return `Some`.
    #[doc(hidden)]
    fn fixed_index(&self) -> Option<u16> {
        None
    }

    /// The bytes, for code that needs to look at them.
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the trait's contract: `bytes_init` initialised bytes live
        // at `stable_ptr` for as long as `self` does.
        unsafe { std::slice::from_raw_parts(self.stable_ptr(), self.bytes_init()) }
    }
}

// SAFETY: a Vec's bytes live on the heap; moving the Vec does not move them.
unsafe impl IoBuf for Vec<u8> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: a boxed slice's bytes live on the heap.
unsafe impl IoBuf for Box<[u8]> {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: a String's bytes live on the heap.
unsafe impl IoBuf for String {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: static memory never moves or goes away.
unsafe impl IoBuf for &'static [u8] {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: static memory never moves or goes away. A byte string literal
// (`b"..."`) is one of these, so it can be written without `[..]`.
unsafe impl<const N: usize> IoBuf for &'static [u8; N] {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        N
    }
}

// SAFETY: static memory never moves or goes away.
unsafe impl IoBuf for &'static str {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: `Bytes` is an immutable view of heap or static memory that it
// keeps alive; moving the handle does not move the bytes.
unsafe impl IoBuf for Bytes {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}

// SAFETY: `BytesMut` owns heap memory; moving the handle does not move it,
// and percore only reads it while it holds the value.
unsafe impl IoBuf for BytesMut {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.len()
    }
}
