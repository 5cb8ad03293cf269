//! `send_paths`: the CPU a sender spends per MiB of a file sent over
//! loopback TCP, by three kernel paths, measured side by side in one run:
//!
//! - `read+send`: `pread` 64 KiB into a buffer, then `send` it (what
//!   `StaticFiles` does today, on either backend);
//! - `splice`: file → pipe → socket, 64 KiB at a time, no user copy;
//! - `sendfile`: file → socket in one call, no user copy (nginx's
//!   `sendfile on`).
//!
//! The file is warm (in the page cache); a thread drains the socket. Each
//! path runs `--rounds` times alternated, and the median of the sending
//! thread's CPU time (user + system, `CLOCK_THREAD_CPUTIME_ID`) per MiB
//! is reported with its ratio to `read+send`. Synchronous calls on
//! blocking sockets: this measures the kernel's work per path, not a
//! runtime.
//!
//! ```text
//! send_paths [--mib 1024] [--rounds 3] [--dir /var/tmp]
//! ```

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const CHUNK: usize = 64 * 1024;
const FILE: usize = 1 << 20;

fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is writable for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn check(n: isize, what: &str) -> io::Result<usize> {
    if n < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(n as usize)
}

#[derive(Clone, Copy)]
enum Path {
    ReadSend,
    Splice,
    Sendfile,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::ReadSend => "read+send",
            Path::Splice => "splice",
            Path::Sendfile => "sendfile",
        }
    }
}

/// Sends the 1 MiB file `mib` times by `path`; returns the sending
/// thread's CPU seconds.
fn send(path: Path, file: &std::fs::File, mib: usize) -> io::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let out = TcpStream::connect(listener.local_addr()?)?;
    let (mut sink, _) = listener.accept()?;
    let drain = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        while matches!(sink.read(&mut buf), Ok(n) if n > 0) {}
    });
    let (fd, sock) = (file.as_raw_fd(), out.as_raw_fd());
    let mut buf = vec![0u8; CHUNK];
    let pipe = {
        let mut fds = [0; 2];
        // SAFETY: `fds` is writable for the call.
        check(unsafe { libc::pipe(fds.as_mut_ptr()) } as isize, "pipe")?;
        // SAFETY: `pipe` just made both, owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    };
    let start = thread_cpu();
    for _ in 0..mib {
        let mut off = 0usize;
        while off < FILE {
            let n = match path {
                Path::ReadSend => {
                    // SAFETY: `buf` is writable for `CHUNK` bytes.
                    let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), CHUNK, off as i64) };
                    let n = check(n, "pread")?;
                    let mut sent = 0;
                    while sent < n {
                        let rest = &buf[sent..n];
                        // SAFETY: `rest` is initialised and borrowed for the call.
                        let k = unsafe { libc::send(sock, rest.as_ptr().cast(), rest.len(), 0) };
                        sent += check(k, "send")?;
                    }
                    n
                }
                Path::Splice => {
                    let mut pos = off as i64;
                    // SAFETY: plain fds and an offset variable of ours.
                    let n = unsafe {
                        libc::splice(
                            fd,
                            &mut pos,
                            pipe.1.as_raw_fd(),
                            std::ptr::null_mut(),
                            CHUNK,
                            0,
                        )
                    };
                    let n = check(n, "splice in")?;
                    let mut sent = 0;
                    while sent < n {
                        // SAFETY: plain fds.
                        let k = unsafe {
                            libc::splice(
                                pipe.0.as_raw_fd(),
                                std::ptr::null_mut(),
                                sock,
                                std::ptr::null_mut(),
                                n - sent,
                                0,
                            )
                        };
                        sent += check(k, "splice out")?;
                    }
                    n
                }
                Path::Sendfile => {
                    let mut pos = off as i64;
                    // SAFETY: plain fds and an offset variable of ours.
                    let n = unsafe { libc::sendfile(sock, fd, &mut pos, CHUNK) };
                    check(n, "sendfile")?
                }
            };
            off += n;
        }
    }
    let cpu = thread_cpu() - start;
    drop(out);
    let _ = drain.join();
    Ok(cpu)
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: usize = arg(&args, "--mib", "1024").parse().expect("--mib N");
    let rounds: usize = arg(&args, "--rounds", "3").parse().expect("--rounds N");
    let dir = std::path::PathBuf::from(arg(&args, "--dir", "/var/tmp"));
    let path = dir.join(format!("send_paths-{}", std::process::id()));
    let data: Vec<u8> = (0..FILE).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(&path, &data)?;
    let file = std::fs::File::open(&path)?;
    let paths = [Path::ReadSend, Path::Splice, Path::Sendfile];
    let mut cpu = vec![Vec::new(); paths.len()];
    for _ in 0..rounds {
        for (i, &p) in paths.iter().enumerate() {
            cpu[i].push(send(p, &file, mib)?);
        }
    }
    let _ = std::fs::remove_file(&path);
    println!("{mib} MiB per run, {rounds} rounds alternated, a warm 1 MiB file, loopback TCP");
    println!("| path | sender CPU per MiB (median) | ratio to read+send |");
    println!("|---|---|---|");
    let medians: Vec<f64> = cpu
        .iter_mut()
        .map(|v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2] / mib as f64
        })
        .collect();
    for (i, p) in paths.iter().enumerate() {
        println!(
            "| {} | {:.1} µs | {:.2} |",
            p.name(),
            medians[i] * 1e6,
            medians[i] / medians[0]
        );
    }
    Ok(())
}
