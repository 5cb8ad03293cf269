//! Filling a gathered send's message header from its buffers (the spaces
//! themselves, and each core's pool of them, are in `driver::msg_space`).

use super::send_msg::Cursor;
use crate::buf::io_bufs::sealed::Gather;
pub(crate) use crate::driver::msg_space::{MsgSpace, IOV_MAX, KEEP_IOVECS};

impl MsgSpace {
    /// Points the header at the unsent bytes of `bufs` from `from` on, at
    /// most [`IOV_MAX`] non-empty buffers of them. The pointers are valid
    /// while `bufs` is neither dropped nor changed, which the caller holds
    /// to until the kernel is done.
    pub(crate) fn fill(&mut self, bufs: &impl Gather, from: Cursor) -> *const libc::msghdr {
        self.iov.clear();
        let count = bufs.count();
        let needed = (count - from.index).min(IOV_MAX);
        if needed > self.iov.capacity() {
            // Doubling, as `reserve` does, but for a send that fits in
            // `KEEP_IOVECS` never past it: a space grown past that is
            // freed rather than kept (40 doubled for 64 would be 80).
            let room = if needed <= KEEP_IOVECS {
                (self.iov.capacity() * 2).clamp(needed, KEEP_IOVECS)
            } else {
                needed
            };
            self.iov.reserve_exact(room);
        }
        let mut offset = from.offset;
        for index in from.index..count {
            if self.iov.len() == IOV_MAX {
                break;
            }
            let bytes = &bufs.bytes(index)[offset..];
            offset = 0;
            if !bytes.is_empty() {
                self.iov.push(libc::iovec {
                    iov_base: bytes.as_ptr().cast_mut().cast(),
                    iov_len: bytes.len(),
                });
            }
        }
        self.hdr.msg_iov = self.iov.as_mut_ptr();
        self.hdr.msg_iovlen = self.iov.len() as _;
        &self.hdr
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::msg_space::{MsgSpaces, RESERVED, RESERVED_IOVECS};

    /// Fills `space` and returns the iovecs, as the kernel finds them
    /// through the header `fill` returned.
    fn fill_iovecs(space: &mut MsgSpace, bufs: &impl Gather, from: Cursor) -> Vec<libc::iovec> {
        let hdr = space.fill(bufs, from);
        // SAFETY: `hdr` is `space`'s header, unchanged since `fill` pointed
        // it at `msg_iovlen` iovecs in `space`'s array; `space` is borrowed.
        unsafe { std::slice::from_raw_parts((*hdr).msg_iov, (*hdr).msg_iovlen as _) }.to_vec()
    }

    fn lengths(iovecs: &[libc::iovec]) -> Vec<usize> {
        iovecs.iter().map(|v| v.iov_len).collect()
    }

    #[test]
    fn fill_skips_empty_buffers_and_starts_at_the_cursor() {
        let bufs = (b"head".to_vec(), Vec::new(), b"body".to_vec());
        let mut space = MsgSpace::new();
        let iovecs = fill_iovecs(&mut space, &bufs, Cursor::default());
        assert_eq!(lengths(&iovecs), [4, 4]);
        let from = Cursor {
            index: 0,
            offset: 3,
        };
        let iovecs = fill_iovecs(&mut space, &bufs, from);
        assert_eq!(lengths(&iovecs), [1, 4]);
        assert_eq!(iovecs[0].iov_base.cast_const(), bufs.0[3..].as_ptr().cast());
    }

    #[test]
    fn fill_carries_at_most_iov_max_buffers() {
        let bufs = vec![&b"x"[..]; IOV_MAX * 2 + 5];
        let mut space = MsgSpace::new();
        let iovecs = fill_iovecs(&mut space, &bufs, Cursor::default());
        assert_eq!(iovecs.len(), IOV_MAX);
        let from = Cursor {
            index: IOV_MAX * 2,
            offset: 0,
        };
        assert_eq!(fill_iovecs(&mut space, &bufs, from).len(), 5);
    }

    /// A space that grows for a longer write, up to [`KEEP_IOVECS`]
    /// buffers, grows to that length and no more, so that it is kept: a
    /// space of 40 iovecs doubled for a write of 64 would hold 80, and be
    /// freed.
    #[test]
    fn a_space_grown_within_the_limit_is_kept() {
        let spaces = MsgSpaces::new();
        let mut space = spaces.take();
        space.fill(&vec![&b"a"[..]; 40], Cursor::default());
        spaces.put(space);
        let mut space = spaces.take();
        space.fill(&vec![&b"a"[..]; KEEP_IOVECS], Cursor::default());
        let capacity = space.iov.capacity();
        spaces.put(space);
        assert_eq!(
            spaces.free.borrow().len(),
            RESERVED,
            "a space for {KEEP_IOVECS} buffers (room for {capacity}) is kept"
        );
    }

    #[test]
    fn spares_are_reused_unless_they_grew_large() {
        let spaces = MsgSpaces::new();
        let mut space = spaces.take();
        space.fill(&[&b"a"[..]; 8], Cursor::default());
        let small = &*space as *const MsgSpace;
        spaces.put(space);
        assert_eq!(
            spaces.free.borrow().len(),
            RESERVED,
            "a small space is kept"
        );
        let space = spaces.take();
        assert_eq!(&*space as *const MsgSpace, small, "a small space is reused");
        let mut big = spaces.take();
        big.fill(&vec![&b"a"[..]; KEEP_IOVECS + 1], Cursor::default());
        spaces.put(big);
        spaces.put(space);
        // The large one was a reserved spare.
        assert_eq!(
            spaces.free.borrow().len(),
            RESERVED - 1,
            "a large space is freed"
        );
    }

    /// A core's first sends, as many at once as it keeps spares for, each
    /// of as many buffers as a spare has room for, find their space ready.
    #[test]
    fn the_reserved_spares_fit_the_first_sends() {
        let spaces = MsgSpaces::new();
        let bufs = vec![&b"a"[..]; RESERVED_IOVECS];
        let taken: Vec<_> = (0..RESERVED)
            .map(|_| {
                let mut space = spaces.take();
                let room = space.iov.capacity();
                space.fill(&bufs, Cursor::default());
                assert_eq!(space.iov.capacity(), room, "a reserved space grew");
                space
            })
            .collect();
        assert!(spaces.free.borrow().is_empty());
        for space in taken {
            spaces.put(space);
        }
        assert_eq!(spaces.free.borrow().len(), RESERVED);
    }
}
