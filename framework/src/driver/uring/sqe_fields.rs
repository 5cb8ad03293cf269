//! SQE fields that the io-uring crate's builders do not set: the byte
//! limit of a multishot receive (Linux 6.17's `IORING_RECV_MSHOT_LIM`,
//! carried in `optlen`), and, for fault injection only, its flags.

use io_uring::squeue::Entry;

// `Entry` is `#[repr(C)]` around the kernel's 64-byte `struct io_uring_sqe`.
const _: () = assert!(std::mem::size_of::<Entry>() == 64);

/// Offset of `ioprio` (`__u16`), which holds a receive's flags.
const IOPRIO: usize = 2;
/// Offset of `optlen` (`__u32`, in a union with `file_index`).
const OPTLEN: usize = 44;

/// Makes a multishot receive end by itself, without `IORING_CQE_F_MORE`,
/// once it has received `bytes` in total.
pub(crate) fn limit_multishot(sqe: &mut Entry, bytes: u32) {
    write(sqe, OPTLEN, bytes);
}

/// Sets a receive flag bit no kernel knows, so the kernel refuses the SQE
/// with `EINVAL` the way a kernel before 6.17 refuses a byte limit.
pub(crate) fn poison_recv_flags(sqe: &mut Entry) {
    let flags = read::<u16>(sqe, IOPRIO) | 1 << 15;
    write(sqe, IOPRIO, flags);
}

fn write<T: Copy>(sqe: &mut Entry, offset: usize, value: T) {
    assert!(offset + std::mem::size_of::<T>() <= std::mem::size_of::<Entry>());
    // SAFETY: the range lies inside the entry (asserted above), where the
    // kernel's layout puts a plain integer field of type `T`; any bit
    // pattern is a valid value for it, and `write_unaligned` needs no
    // alignment.
    unsafe {
        (sqe as *mut Entry)
            .cast::<u8>()
            .add(offset)
            .cast::<T>()
            .write_unaligned(value);
    }
}

fn read<T: Copy>(sqe: &Entry, offset: usize) -> T {
    assert!(offset + std::mem::size_of::<T>() <= std::mem::size_of::<Entry>());
    // SAFETY: as in `write`; the builders zero every byte of an entry
    // before setting fields, so the bytes read are initialised.
    unsafe {
        (sqe as *const Entry)
            .cast::<u8>()
            .add(offset)
            .cast::<T>()
            .read_unaligned()
    }
}
