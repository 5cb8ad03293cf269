//! `Stream::send_file` on both backends: a file sent with `sendfile`
//! arrives byte for byte, also to a reader that starts late (the socket
//! fills and the send waits for room), and from an offset; a range
//! reports whether it is in the page cache (`File::cached`), before and
//! after it is dropped from it.

use std::io::Read;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::time::Duration;

use percore::fs::File;
use percore::net::TcpStream;
use percore_test_kit::{backend_tests, Rng, TempDir};

/// A failure guard only: no verdict waits on it.
const HANG: Duration = Duration::from_secs(60);

/// More than loopback's socket buffers hold, so that a late reader makes
/// the sender wait.
const LEN: usize = 24 * 1024 * 1024 + 123;

/// Sends `path` from `from` to a reader that waits `late` before reading;
/// returns what the reader got.
fn send(backend: percore::Backend, path: std::path::PathBuf, from: u64, late: Duration) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let reader = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        std::thread::sleep(late);
        let mut got = Vec::new();
        conn.read_to_end(&mut got).expect("read");
        got
    });
    percore::block_on(backend, async move {
        percore::time::timeout(HANG, async {
            let file = File::open(&path).await.expect("open");
            let conn = TcpStream::connect(addr).await.expect("connect");
            let mut pos = from;
            loop {
                let n = conn
                    .send_file(&file, pos, 256 * 1024)
                    .await
                    .expect("send_file");
                if n == 0 {
                    break;
                }
                pos += n as u64;
            }
            assert_eq!(pos, LEN as u64, "sent to the end of the file");
        })
        .await
        .expect("the send hung")
    })
    .expect("run a core");
    reader.join().expect("reader")
}

fn on_tmpfs(dir: &std::path::Path) -> bool {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: `statfs` is plain integers, for which zero is valid.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `fs` writable for the call.
    let res = unsafe { libc::statfs(c.as_ptr(), &mut fs) };
    res == 0 && fs.f_type == libc::TMPFS_MAGIC
}

backend_tests! {
    /// The whole file, and its tail from an odd offset, byte for byte.
    fn sends_the_file(backend) {
        let scratch = TempDir::tmp("whole");
        let path = scratch.path("f");
        let mut data = vec![0u8; LEN];
        Rng::new(0xf11e).fill(&mut data);
        std::fs::write(&path, &data).expect("write");
        let got = send(backend, path.clone(), 0, Duration::ZERO);
        assert!(got == data, "{} bytes arrived of {}", got.len(), data.len());
        let got = send(backend, path, 1_000_001, Duration::ZERO);
        assert!(got[..] == data[1_000_001..], "the tail differs");
    }

    /// A reader that starts late: the socket's buffers fill, `sendfile`
    /// says `EAGAIN`, and the send waits for room (epoll's readiness,
    /// io_uring's `POLLOUT` poll) rather than spin or fail.
    fn waits_for_room(backend) {
        let scratch = TempDir::tmp("late");
        let path = scratch.path("f");
        let mut data = vec![0u8; LEN];
        Rng::new(0x1a7e).fill(&mut data);
        std::fs::write(&path, &data).expect("write");
        let got = send(backend, path, 0, Duration::from_millis(300));
        assert!(got == data, "{} bytes arrived of {}", got.len(), data.len());
    }

    /// `cached` says yes for a range just read, no once the file's pages
    /// were dropped from the page cache.
    fn knows_what_is_cached(backend) {
        let scratch = TempDir::tmp("cached");
        let path = scratch.path("f");
        std::fs::write(&path, vec![5u8; 1 << 20]).expect("write");
        let std_file = std::fs::File::open(&path).expect("open");
        std_file.sync_all().expect("sync");
        let dir = scratch.dir().to_path_buf();
        let (warm, cold) = percore::block_on(backend, async move {
            let file = File::open(&path).await.expect("open");
            let (res, _) = file.read_at(Vec::with_capacity(1 << 20), 0).await;
            res.expect("read");
            let warm = file.cached(0, 1 << 20);
            // SAFETY: a plain call on an open fd.
            let advised = unsafe {
                libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED)
            };
            assert_eq!(advised, 0, "posix_fadvise");
            (warm, file.cached(0, 1 << 20))
        })
        .expect("run a core");
        assert!(warm, "a range just read is in the page cache");
        if on_tmpfs(&dir) {
            // tmpfs pages have nowhere else to be: DONTNEED keeps them.
            println!("skipped the cold check: the test's directory is on tmpfs");
        } else {
            assert!(!cold, "a range dropped from the page cache is not cached");
        }
    }
}
