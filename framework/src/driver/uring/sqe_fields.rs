//! SQE fields that the io-uring crate's builders do not set: the byte
//! limit of a multishot receive (Linux 6.17's `IORING_RECV_MSHOT_LIM`,
//! carried in `optlen`), and, for fault injection only, a field a receive
//! must leave zero.

use io_uring::squeue::Entry;

// `Entry` is `#[repr(C)]` around the kernel's 64-byte `struct io_uring_sqe`.
const _: () = assert!(std::mem::size_of::<Entry>() == 64);

/// Offset of `optlen` (`__u32`, in a union with `file_index`).
const OPTLEN: usize = 44;
/// Offset of `addr2` (`__u64`, in a union with `off`); a receive's must be
/// zero. Its low half is written.
const ADDR2: usize = 8;

/// Makes a multishot receive end by itself, without `IORING_CQE_F_MORE`,
/// once it has received `bytes` in total.
pub(crate) fn limit_multishot(sqe: &mut Entry, bytes: u32) {
    write_u32(sqe, OPTLEN, bytes);
}

/// Makes the kernel refuse a receive with `EINVAL`, the way a kernel before
/// 6.17 refuses a byte limit.
pub(crate) fn poison_recv(sqe: &mut Entry) {
    // Only a receive: for other operations `addr2` may be a pointer, which
    // this would corrupt.
    assert_eq!(sqe.get_opcode(), u32::from(io_uring::opcode::Recv::CODE));
    write_u32(sqe, ADDR2, 1);
}

fn write_u32(sqe: &mut Entry, offset: usize, value: u32) {
    assert!(offset + 4 <= std::mem::size_of::<Entry>());
    // SAFETY: the four bytes lie inside the entry (asserted above), where
    // the kernel's layout puts an integer field; `write_unaligned` needs no
    // alignment, and any value is valid for the integer.
    unsafe {
        (sqe as *mut Entry)
            .cast::<u8>()
            .add(offset)
            .cast::<u32>()
            .write_unaligned(value);
    }
}

/// Makes a `NOP` complete with `res` (`IORING_NOP_INJECT_RESULT`, Linux
/// 6.10+): tests tell completions apart by it.
#[cfg(test)]
pub(crate) fn inject_nop_result(sqe: &mut Entry, res: i32) {
    /// `nop_flags` shares its offset with `rw_flags`.
    const NOP_FLAGS: usize = 28;
    /// `len`, which an injecting `NOP` completes with.
    const LEN: usize = 24;
    write_u32(sqe, NOP_FLAGS, 1);
    write_u32(sqe, LEN, res as u32);
}
