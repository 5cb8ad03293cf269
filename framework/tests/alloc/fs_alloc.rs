//! File reads and writes allocate nothing in steady state, on both
//! backends: after warm-up, 2,000 rounds of every call that moves bytes
//! (`read_at`, `write_at`, `readv_at`, `writev_at`, `read_fixed_at`,
//! `write_fixed_at`) over a file in the page cache make zero heap
//! allocations on the core's thread.
//!
//! On epoll a call is made inline with `RWF_NOWAIT` when the file
//! system takes it, and otherwise on the file pool, whose read and write
//! jobs allocate nothing either: on Linux 6.18 ext4 refuses `RWF_NOWAIT`
//! for buffered writes, so there the writes below go through the pool.
//! On failure the sizes of the first allocations
//! are printed; `PERCORE_ALLOC_TRAP=1` aborts at the first one with its
//! backtrace.

use std::sync::atomic::Ordering;

use percore::buf::FixedBuf;
use percore::fs::{File, OpenOptions};
use percore_test_kit::alloc::{ALLOCS, COUNTING, SIZES, TRACKED, TRAP};
use percore_test_kit::backend_tests;

const WARM_UP: usize = 200;
const MEASURED: usize = 2_000;
const FILE_LEN: usize = 256 * 1024;

/// One round of every call, at an offset that moves round to round.
async fn round(file: &File, i: usize, state: &mut State) {
    let pos = ((i * 4096) % (FILE_LEN - 64 * 1024)) as u64;
    let (res, buf) = file.read_at(std::mem::take(&mut state.plain), pos).await;
    assert_eq!(res.expect("read_at"), buf.capacity());
    let (res, mut buf) = file.write_at(buf, pos).await;
    assert_eq!(res.expect("write_at"), buf.len());
    buf.clear();
    state.plain = buf;

    let (res, bufs) = file.readv_at(std::mem::take(&mut state.many), pos).await;
    assert_eq!(res.expect("readv_at"), 3 * 4096);
    let (res, mut bufs) = file.writev_at(bufs, pos).await;
    assert_eq!(res.expect("writev_at"), 3 * 4096);
    bufs.iter_mut().for_each(Vec::clear);
    state.many = bufs;

    let fixed = state.fixed.take().expect("a fixed buffer");
    let (res, fixed) = file.read_fixed_at(fixed, pos).await;
    assert_eq!(res.expect("read_fixed_at"), fixed.capacity());
    let (res, fixed) = file.write_fixed_at(fixed, pos).await;
    assert_eq!(res.expect("write_fixed_at"), fixed.len());
    state.fixed = Some(fixed);
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
                round(&file, i, &mut state).await;
            }
            TRACKED.with(|t| t.set(true));
            ALLOCS.store(0, Ordering::SeqCst);
            COUNTING.store(true, Ordering::SeqCst);
            for i in 0..MEASURED {
                round(&file, WARM_UP + i, &mut state).await;
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
