//! File reads and writes allocate nothing in steady state, on both
//! backends: after warm-up, 2,000 rounds of every call that moves bytes
//! (`read_at`, `write_at`, `readv_at`, `writev_at`, `read_fixed_at`,
//! `write_fixed_at`) over a file in the page cache make zero heap
//! allocations on the core's thread.
//!
//! On epoll these are the inline `RWF_NOWAIT` calls. A call the kernel
//! will not make that way goes to the pool, whose job allocates, and is
//! outside this test: on Linux 6.18 that is every buffered write to ext4
//! and every call on tmpfs (`EOPNOTSUPP`), so where the test's file
//! system refuses `RWF_NOWAIT` writes, epoll's rounds are reads only,
//! and the test says so. On failure the sizes of the first allocations
//! are printed; `PERCORE_ALLOC_TRAP=1` aborts at the first one with its
//! backtrace.

use std::sync::atomic::Ordering;

use percore::buf::FixedBuf;
use percore::fs::{File, OpenOptions};
use percore_test_kit::alloc::{ALLOCS, COUNTING, SIZES, TRACKED, TRAP};
use percore_test_kit::backend_tests;

percore_test_kit::count_allocations!();

const WARM_UP: usize = 200;
const MEASURED: usize = 2_000;
const FILE_LEN: usize = 256 * 1024;

/// One round of every call, at an offset that moves round to round.
async fn round(file: &File, i: usize, state: &mut State, writes: bool) {
    let pos = ((i * 4096) % (FILE_LEN - 64 * 1024)) as u64;
    let (res, mut buf) = file.read_at(std::mem::take(&mut state.plain), pos).await;
    assert_eq!(res.expect("read_at"), buf.capacity());
    if writes {
        let (res, back) = file.write_at(buf, pos).await;
        assert_eq!(res.expect("write_at"), back.len());
        buf = back;
    }
    buf.clear();
    state.plain = buf;

    let (res, mut bufs) = file.readv_at(std::mem::take(&mut state.many), pos).await;
    assert_eq!(res.expect("readv_at"), 3 * 4096);
    if writes {
        let (res, back) = file.writev_at(bufs, pos).await;
        assert_eq!(res.expect("writev_at"), 3 * 4096);
        bufs = back;
    }
    bufs.iter_mut().for_each(Vec::clear);
    state.many = bufs;

    let fixed = state.fixed.take().expect("a fixed buffer");
    let (res, mut fixed) = file.read_fixed_at(fixed, pos).await;
    assert_eq!(res.expect("read_fixed_at"), fixed.capacity());
    if writes {
        let (res, back) = file.write_fixed_at(fixed, pos).await;
        assert_eq!(res.expect("write_fixed_at"), back.len());
        fixed = back;
    }
    state.fixed = Some(fixed);
}

/// Whether the file system under `path` takes a buffered write with
/// `RWF_NOWAIT` (else epoll sends every write to the pool).
fn nowait_writes(path: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    let byte = [7u8];
    let iov = libc::iovec {
        iov_base: byte.as_ptr().cast_mut().cast(),
        iov_len: 1,
    };
    // SAFETY: `iov` names one readable byte for the call.
    unsafe { libc::pwritev2(file.as_raw_fd(), &iov, 1, 0, libc::RWF_NOWAIT) == 1 }
}

struct State {
    plain: Vec<u8>,
    many: [Vec<u8>; 3],
    fixed: Option<FixedBuf>,
}

backend_tests! {
    fn reads_and_writes_allocate_nothing(backend) {
        let dir = std::env::temp_dir().join(format!("percore-fs-alloc-{}-{backend:?}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test's directory");
        let path = dir.join("f");
        // Written and synced first: the rounds overwrite blocks the file
        // already has, in the page cache.
        std::fs::write(&path, vec![7u8; FILE_LEN]).expect("write the file");
        std::fs::File::open(&path).and_then(|f| f.sync_all()).expect("sync");
        let writes = backend == percore::Backend::Uring || nowait_writes(&path);
        if !writes {
            println!(
                "epoll: reads only: this file system refuses RWF_NOWAIT writes, which go to the pool"
            );
        }
        TRAP.store(std::env::var_os("PERCORE_ALLOC_TRAP").is_some(), Ordering::SeqCst);
        let allocs = percore::block_on(backend, async move {
            let mut options = OpenOptions::new();
            let file = options.read(true).write(true).open(&path).await.expect("open");
            let mut state = State {
                plain: Vec::with_capacity(16 * 1024),
                many: [Vec::with_capacity(4096), Vec::with_capacity(4096), Vec::with_capacity(4096)],
                fixed: FixedBuf::take(),
            };
            for i in 0..WARM_UP {
                round(&file, i, &mut state, writes).await;
            }
            TRACKED.with(|t| t.set(true));
            COUNTING.store(true, Ordering::SeqCst);
            for i in 0..MEASURED {
                round(&file, WARM_UP + i, &mut state, writes).await;
            }
            COUNTING.store(false, Ordering::SeqCst);
            TRACKED.with(|t| t.set(false));
            ALLOCS.load(Ordering::SeqCst)
        })
        .expect("run a core");
        let _ = std::fs::remove_dir_all(&dir);
        let sizes: Vec<usize> = SIZES.iter().map(|s| s.load(Ordering::SeqCst)).collect();
        assert_eq!(allocs, 0, "allocations in {MEASURED} rounds; first sizes {sizes:?}");
    }
}
