//! `percore::fs` beyond one buffer, on both backends: gathered writes and
//! scattered reads read back byte for byte and fill buffers in order,
//! registered (fixed) buffers read and write like any other, `allocate`
//! reserves and extends, and a read dropped while it waits gives its
//! buffer back (dropped) once the kernel or the pool is done with it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percore::buf::{FixedBuf, IoBuf, IoBufMut};
use percore::fs::{File, OpenOptions};
use percore_test_kit::{backend_tests, on_core, Rng, TempDir};

/// `RLIMIT_MEMLOCK`'s soft limit: under a few MiB a core cannot register
/// its buffers, and its file calls use them as plain memory.
fn memlock() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is writable for the call.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    limit.rlim_cur
}

async fn read_write(path: &std::path::Path) -> File {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(true);
    options.open(path).await.expect("open to read and write")
}

/// A `Vec` whose drop is counted: the test sees when the buffer a
/// dropped read took is finally let go.
struct Counted {
    bytes: Vec<u8>,
    drops: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: the bytes are the Vec's heap memory, which stays put when the
// wrapper moves.
unsafe impl IoBuf for Counted {
    fn stable_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.bytes.len()
    }
}

// SAFETY: as for `IoBuf`; `set_init` is the Vec's own.
unsafe impl IoBufMut for Counted {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.bytes.as_mut_ptr()
    }
    fn bytes_total(&self) -> usize {
        self.bytes.capacity()
    }
    unsafe fn set_init(&mut self, n: usize) {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.bytes.set_init(n) }
    }
}

backend_tests! {
    /// Random bytes go out in gathered writes of every shape (a tuple, an
    /// array with an empty buffer, a `Vec` of many pieces), then come back
    /// through scattered reads whose buffers split the bytes at other
    /// places: each buffer holds exactly its share, in order.
    fn gathered_and_scattered(backend) {
        let scratch = TempDir::tmp("vectored");
        let path = scratch.path("f");
        let mut rng = Rng::new(0x5eed_0001);
        let mut data = vec![0u8; 200_000];
        rng.fill(&mut data);
        let expected = data.clone();
        let read_back = on_core(backend, async move {
            let file = read_write(&path).await;
            let (a, b) = (data[..10].to_vec(), data[10..5_000].to_vec());
            let (res, _) = file.writev_at((a, b), 0).await;
            assert_eq!(res.expect("tuple"), 5_000);
            let arr = [data[5_000..6_000].to_vec(), Vec::new(), data[6_000..9_000].to_vec()];
            let (res, _) = file.writev_at(arr, 5_000).await;
            assert_eq!(res.expect("array"), 4_000);
            let pieces: Vec<Vec<u8>> = data[9_000..].chunks(1_000).map(<[u8]>::to_vec).collect();
            let (res, back) = file.writev_at(pieces, 9_000).await;
            assert_eq!(res.expect("vec"), 191_000, "one call of {} pieces", back.len());
            file.sync_data().await.expect("sync");

            let mut read_back = Vec::new();
            let mut pos = 0u64;
            loop {
                let bufs = [Vec::with_capacity(7), Vec::with_capacity(4_093), Vec::with_capacity(30_000)];
                let (res, bufs) = file.readv_at(bufs, pos).await;
                let n = res.expect("readv");
                if n == 0 {
                    break;
                }
                // Filled in order: a buffer has bytes only if those before
                // it are full.
                let lens: Vec<usize> = bufs.iter().map(Vec::len).collect();
                assert_eq!(lens.iter().sum::<usize>(), n, "{lens:?}");
                for (i, buf) in bufs.iter().enumerate().skip(1) {
                    if !buf.is_empty() {
                        assert_eq!(bufs[i - 1].len(), bufs[i - 1].capacity(), "{lens:?}");
                    }
                }
                bufs.iter().for_each(|b| read_back.extend_from_slice(b));
                pos += n as u64;
            }
            file.close().await.expect("close");
            read_back
        });
        assert_eq!(read_back.len(), expected.len());
        assert!(read_back == expected, "the bytes read back differ");
    }

    /// Registered buffers: written at scattered offsets, read back both
    /// through registered buffers and through a plain `Vec`.
    fn fixed_buffers(backend) {
        let scratch = TempDir::tmp("fixed");
        let path = scratch.path("f");
        on_core(backend, async move {
            let file = OpenOptions::new().read(true).write(true).create(true).open(&path).await.expect("open");
            let mut buf = FixedBuf::take().expect("a free registered buffer");
            if backend == percore::Backend::Uring && memlock() >= 4 << 20 {
                // Registered with the ring: the calls below are
                // `READ_FIXED`/`WRITE_FIXED`.
                assert!(buf.fixed_index().is_some(), "the core's buffers are registered");
            }
            let cap = buf.capacity();
            let pattern: Vec<u8> = (0..cap).map(|i| (i % 251) as u8).collect();
            assert_eq!(buf.extend_from_slice(&pattern), cap);
            for k in [0u64, 3, 1] {
                let (res, back) = file.write_fixed_at(buf, k * cap as u64).await;
                assert_eq!(res.expect("write_fixed_at"), cap);
                buf = back;
            }
            // The hole at 2 × cap reads as zeroes.
            for (k, want) in [(0u64, &pattern), (1, &pattern), (3, &pattern)] {
                let (res, back) = file.read_fixed_at(buf, k * cap as u64).await;
                assert_eq!(res.expect("read_fixed_at"), cap);
                assert!(back.as_slice() == &want[..], "block {k}");
                buf = back;
            }
            let (res, back) = file.read_fixed_at(buf, 2 * cap as u64).await;
            assert_eq!(res.expect("the hole"), cap);
            assert!(back.as_slice().iter().all(|&b| b == 0), "a hole reads as zeroes");
            let (res, back) = file.read_fixed_at(back, 4 * cap as u64).await;
            assert_eq!(res.expect("at the end"), 0);
            assert!(back.is_empty(), "nothing read, nothing held");
            let (res, plain) = file.read_at(Vec::with_capacity(cap), 3 * cap as u64).await;
            assert_eq!(res.expect("read_at"), cap);
            assert!(plain == pattern);
        });
    }

    /// `allocate` extends a file with zeroes and reserves its blocks;
    /// `FALLOC`'s errors keep their kind.
    fn allocate_reserves_and_extends(backend) {
        let scratch = TempDir::tmp("allocate");
        let path = scratch.path("f");
        on_core(backend, async move {
            let file = read_write(&path).await;
            file.allocate(0, 1 << 20).await.expect("allocate 1 MiB");
            let meta = file.metadata().await.expect("metadata");
            assert_eq!(meta.len(), 1 << 20);
            assert!(meta.blocks() * 512 >= 1 << 20, "{} blocks of 512 bytes", meta.blocks());
            let (res, buf) = file.read_at(Vec::with_capacity(4096), 4096).await;
            assert_eq!(res.expect("read"), 4096);
            assert!(buf.iter().all(|&b| b == 0));
            let read_only = File::open(&path).await.expect("open");
            let err = read_only.allocate(0, 4096).await.expect_err("not open for writing");
            assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
        });
    }

    /// A file opened on the core (`RESOLVE_CACHED`, which adds
    /// `O_NONBLOCK` for the open) is left as asked: blocking unless the
    /// options said `O_NONBLOCK`.
    fn opened_as_asked(backend) {
        use std::os::fd::AsRawFd;
        let scratch = TempDir::tmp("flags");
        let path = scratch.path("f");
        std::fs::write(&path, b"x").expect("write");
        let (plain, nonblocking) = on_core(backend, async move {
            // Twice: the first open may have warmed the dentry cache.
            for _ in 0..2 {
                drop(File::open(&path).await.expect("open"));
            }
            let flags = |f: &File| {
                // SAFETY: a plain call on an open fd.
                unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) }
            };
            let plain = flags(&File::open(&path).await.expect("open"));
            let mut options = OpenOptions::new();
            options.read(true).custom_flags(libc::O_NONBLOCK);
            let nonblocking = flags(&options.open(&path).await.expect("open"));
            (plain, nonblocking)
        });
        assert_eq!(plain & libc::O_NONBLOCK, 0, "flags {plain:#x}");
        assert_ne!(nonblocking & libc::O_NONBLOCK, 0, "flags {nonblocking:#x}");
    }

    /// A read dropped while it waits on an empty FIFO (the ring's read on
    /// io_uring, a pool job on epoll) keeps its buffer until the wait
    /// ends, then drops it: no buffer is leaked or freed early.
    fn dropped_read_drops_its_buffer(backend) {
        let scratch = TempDir::tmp("fifo");
        let path = scratch.path("f");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: `c` is a NUL-terminated path for the call's duration.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let drops = Arc::new(AtomicUsize::new(0));
        let seen = drops.clone();
        let after = on_core(backend, async move {
            let fifo = OpenOptions::new().read(true).write(true).open(&path).await.expect("open");
            let unblock = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open");
            let buf = Counted { bytes: Vec::with_capacity(64), drops: seen.clone() };
            let read = fifo.read_at(buf, 0);
            let waited = percore::time::timeout(Duration::from_millis(50), read).await;
            assert!(waited.is_err(), "an empty FIFO has nothing to read");
            std::io::Write::write_all(&mut &unblock, b"!").expect("write to the FIFO");
            // The core reaps the completion (or the pool's reply) and
            // drops the buffer; a hang here is a leak.
            while seen.load(Ordering::SeqCst) == 0 {
                percore::time::sleep(Duration::from_millis(5)).await;
            }
            drop(fifo);
            seen.load(Ordering::SeqCst)
        });
        assert_eq!(after, 1, "the buffer is dropped exactly once");
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
