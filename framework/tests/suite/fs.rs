//! `percore::fs` on both backends: data written out of order reads back
//! byte for byte, offsets past 4 GiB work, `O_DIRECT` works aligned and
//! says `InvalidInput` misaligned, errors keep their kind, and neither a
//! read dropped in flight nor thousands of opens leak an fd.

use std::io::ErrorKind;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use percore::fs::{self, AlignedBuf, File, OpenOptions};
use percore::spawn_local;
use percore_test_kit::{backend_tests, fd_count, fd_table, on_core, Rng, TempDir};

/// A failure guard only: no verdict waits on it.
const HANG: Duration = Duration::from_secs(60);

/// Waits on the core (so that it reaps completions and pool replies)
/// until the fd count is back to `baseline`.
async fn settle(baseline: usize) -> usize {
    let deadline = Instant::now() + HANG / 2;
    loop {
        let n = fd_count();
        if n <= baseline || Instant::now() >= deadline {
            return n;
        }
        percore::time::sleep(Duration::from_millis(5)).await;
    }
}

backend_tests! {
    /// 1. Random data is cut into random-sized pieces. 2. Each piece is
    /// written by its own task, all at once, in shuffled order. 3. The
    /// file reads back equal to the data.
    fn concurrent_writes_read_back(backend) {
        let dir = TempDir::tmp("concurrent");
        let path = dir.path("data");
        on_core(backend, async move {
            let mut rng = Rng::new(0x5eed);
            let mut data = vec![0u8; 1 << 20];
            rng.fill(&mut data);
            let mut pieces = Vec::new();
            let mut at = 0;
            while at < data.len() {
                let len = rng.between(1, 64 * 1024).min(data.len() - at);
                pieces.push((at, len));
                at += len;
            }
            for i in (1..pieces.len()).rev() {
                pieces.swap(i, rng.between(0, i + 1));
            }
            let file = Rc::new(File::create(&path).await.expect("create"));
            let tasks: Vec<_> = pieces
                .into_iter()
                .map(|(at, len)| {
                    let file = file.clone();
                    let piece = data[at..at + len].to_vec();
                    spawn_local(async move {
                        let (res, _) = file.write_all_at(piece, at as u64).await;
                        res
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("the task ran").expect("write");
            }
            file.sync_all().await.expect("fsync");
            let file = File::open(&path).await.expect("open");
            let (res, back) = file.read_exact_at(Vec::with_capacity(data.len()), 0).await;
            res.expect("read back");
            assert!(back == data, "the file differs from what was written");
            assert_eq!(file.metadata().await.expect("metadata").len(), data.len() as u64);
            let (res, _) = file.read_at(Vec::with_capacity(16), data.len() as u64).await;
            assert_eq!(res.expect("read at the end"), 0);
        });
    }

    /// A sparse file: bytes written 5 GiB in read back, and the length
    /// counts the hole.
    fn offset_past_4_gib(backend) {
        let dir = TempDir::tmp("sparse");
        let path = dir.path("sparse");
        on_core(backend, async move {
            let pos = 5 << 30;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .await
                .expect("create");
            let (res, _) = file.write_all_at(b"past four gigabytes".to_vec(), pos).await;
            res.expect("write");
            let (res, back) = file.read_exact_at(Vec::with_capacity(19), pos).await;
            res.expect("read");
            assert_eq!(back, b"past four gigabytes");
            let (res, hole) = file.read_exact_at(vec![1u8; 8].into_boxed_slice(), 1 << 32).await;
            res.expect("read the hole");
            assert_eq!(&hole[..], &[0; 8]);
            assert_eq!(file.metadata().await.expect("metadata").len(), pos + 19);
            file.set_len(10).await.expect("truncate");
            assert_eq!(fs::metadata(&path).await.expect("metadata").len(), 10);
            file.close().await.expect("close");
        });
    }

    /// `O_DIRECT`: an aligned write and read work; a misaligned one is
    /// `InvalidInput`. tmpfs refuses `O_DIRECT`, so the file goes under
    /// /var/tmp (or the target directory), and the test skips, saying
    /// why, if that refuses too.
    fn direct_io(backend) {
        let base = ["/var/tmp", env!("CARGO_TARGET_TMPDIR")]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let dir = TempDir::new(&base, "direct");
        let path = dir.path("direct");
        on_core(backend, async move {
            let opened = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .await;
            let file = match opened {
                Err(e) if e.kind() == ErrorKind::InvalidInput => {
                    println!("skipped: {} refuses O_DIRECT ({e})", base.display());
                    return;
                }
                opened => opened.expect("open with O_DIRECT"),
            };
            let mut buf = AlignedBuf::zeroed(8192, 4096);
            buf.as_mut_slice().iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
            let (res, buf) = file.write_all_at(buf, 4096).await;
            res.expect("an aligned O_DIRECT write");
            let (res, back) = file.read_exact_at(AlignedBuf::zeroed(8192, 4096), 4096).await;
            res.expect("an aligned O_DIRECT read");
            assert_eq!(back.as_slice(), buf.as_slice());

            let (res, _) = file.read_at(buf, 1).await;
            let e = res.expect_err("a misaligned offset");
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains("O_DIRECT"), "{e}");
        });
    }

    /// Missing file, directory opened to write, bad options: each error
    /// keeps its kind.
    fn errors_keep_their_kind(backend) {
        let dir = TempDir::tmp("errors");
        let root = dir.dir().to_path_buf();
        on_core(backend, async move {
            let e = File::open(root.join("missing")).await.expect_err("missing");
            assert_eq!(e.kind(), ErrorKind::NotFound);
            let e = fs::metadata(root.join("missing")).await.expect_err("missing");
            assert_eq!(e.kind(), ErrorKind::NotFound);
            let e = File::create(&root).await.expect_err("a directory");
            assert_eq!(e.kind(), ErrorKind::IsADirectory);
            let e = OpenOptions::new().open(root.join("x")).await.expect_err("no access");
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            File::create(root.join("x")).await.expect("create");
            let e = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(root.join("x"))
                .await
                .expect_err("exists");
            assert_eq!(e.kind(), ErrorKind::AlreadyExists);
            let e = fs::create_dir(root.join("x")).await.expect_err("exists");
            assert_eq!(e.kind(), ErrorKind::AlreadyExists);
            let e = fs::remove_file(&root).await.expect_err("a directory");
            assert_eq!(e.kind(), ErrorKind::IsADirectory);

            // The path operations, end to end.
            fs::create_dir(root.join("sub")).await.expect("mkdir");
            assert!(fs::metadata(root.join("sub")).await.expect("stat").is_dir());
            fs::rename(root.join("x"), root.join("sub/y")).await.expect("rename");
            assert!(fs::metadata(root.join("sub/y")).await.expect("stat").is_file());
            fs::remove_file(root.join("sub/y")).await.expect("unlink");
            let e = fs::remove_file(root.join("sub/y")).await.expect_err("gone");
            assert_eq!(e.kind(), ErrorKind::NotFound);
        });
    }

    /// `PermissionDenied` as a non-root user; as root (CI), a full and
    /// then read-only tmpfs the test mounts gives `StorageFull` and
    /// `ReadOnlyFilesystem` instead, or the test says why not.
    fn permission_and_full_device(backend) {
        let dir = TempDir::tmp("perm");
        let root = dir.dir().to_path_buf();
        // SAFETY: `geteuid` reads the process's credentials, nothing else.
        if unsafe { libc::geteuid() } != 0 {
            let path = root.join("locked");
            std::fs::write(&path, b"x").expect("create");
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o000))
                .expect("chmod 0");
            on_core(backend, async move {
                let e = File::open(&path).await.expect_err("mode 0");
                assert_eq!(e.kind(), ErrorKind::PermissionDenied);
            });
            return;
        }
        let mnt = root.join("mnt");
        std::fs::create_dir(&mnt).expect("mkdir");
        let mount = |args: &[&str]| {
            std::process::Command::new("mount")
                .args(args)
                .arg(&mnt)
                .output()
                .map_err(|e| e.to_string())
                .and_then(|o| if o.status.success() { Ok(()) } else {
                    Err(String::from_utf8_lossy(&o.stderr).into_owned())
                })
        };
        if let Err(why) = mount(&["-t", "tmpfs", "-o", "size=64k", "tmpfs"]) {
            println!("skipped: cannot mount a small tmpfs as root: {why}");
            return;
        }
        let inner = mnt.clone();
        on_core(backend, async move {
            let file = File::create(inner.join("big")).await.expect("create");
            let (res, _) = file.write_all_at(vec![7u8; 1 << 20], 0).await;
            assert_eq!(res.expect_err("64 KiB device").kind(), ErrorKind::StorageFull);
        });
        let remounted = mount(&["-o", "remount,ro"]);
        let inner = mnt.clone();
        if remounted.is_ok() {
            on_core(backend, async move {
                let e = File::create(inner.join("new")).await.expect_err("read-only");
                assert_eq!(e.kind(), ErrorKind::ReadOnlyFilesystem);
            });
        }
        let _ = std::process::Command::new("umount").arg(&mnt).status();
        if let Err(why) = remounted {
            println!("skipped: read-only part, cannot remount: {why}");
        }
    }

    /// A read dropped while it waits on an empty FIFO leaves no fd open
    /// once the FIFO has data (on epoll the pool's read then returns and
    /// drops the job's file; on io_uring the read is cancelled).
    fn dropped_read_leaks_no_fd(backend) {
        let dir = TempDir::tmp("fifo");
        let path = dir.path("fifo");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: `c` is a NUL-terminated path for the call's duration.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let (left, baseline) = on_core(backend, async move {
            // Inside the core: its ring or epoll and eventfd are open.
            let baseline = fd_count();
            // O_RDWR: opening a FIFO so never waits for the other end.
            let fifo = OpenOptions::new().read(true).write(true).open(&path).await.expect("open");
            let unblock = std::fs::OpenOptions::new().read(true).write(true).open(&path).expect("open");
            let read = fifo.read_at(Vec::with_capacity(64), 0);
            let waited = percore::time::timeout(Duration::from_millis(50), read).await;
            assert!(waited.is_err(), "an empty FIFO has nothing to read");
            drop(fifo);
            std::io::Write::write_all(&mut &unblock, b"!").expect("write to the FIFO");
            drop(unblock);
            (settle(baseline).await, baseline)
        });
        assert!(left <= baseline, "{left} fds open, {baseline} before: {:?}", fd_table());
    }

    /// 10,000 opens and closes (half by `close`, half by drop) end with
    /// the fds of before.
    fn open_close_cycles_leak_no_fd(backend) {
        let dir = TempDir::tmp("cycles");
        let path = dir.path("f");
        std::fs::write(&path, b"x").expect("create");
        let (left, baseline) = on_core(backend, async move {
            let baseline = fd_count();
            for i in 0..10_000 {
                let file = File::open(&path).await.expect("open");
                if i % 2 == 0 {
                    file.close().await.expect("close");
                } else {
                    drop(file);
                }
            }
            (settle(baseline).await, baseline)
        });
        assert!(left <= baseline, "{left} fds open, {baseline} before: {:?}", fd_table());
    }
}
