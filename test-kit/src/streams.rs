//! [`Streams`]: many echo streams of patterned bytes, driven by a few client
//! threads with `poll(2)`, each byte checked in order.

use super::target::{ClientSock, Target};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{pattern, Rng};

/// A set of echo streams driven from a few client threads.
///
/// Each connection sends its [`pattern`] in writes of random size (up to
/// `max_write`) while reading what comes back, and checks every byte
/// against what it sent, in order. Threads multiplex their connections
/// with `poll(2)` on non-blocking sockets.
#[derive(Debug, Clone)]
pub struct Streams {
    /// Connections.
    pub conns: usize,
    /// Bytes each connection sends.
    pub bytes: usize,
    /// The largest write, in bytes.
    pub max_write: usize,
    /// Client threads the connections are spread over.
    pub threads: usize,
    /// Shut the write side after the last byte and expect the server's end
    /// of stream after the last echoed byte; otherwise close once all bytes
    /// are back.
    pub half_close: bool,
    /// The whole run fails after this long.
    pub limit: Duration,
    /// Pattern ids start here (so two runs can use disjoint patterns).
    pub first_id: usize,
}

impl Default for Streams {
    fn default() -> Self {
        Streams {
            conns: 16,
            bytes: 64 * 1024,
            max_write: 16 * 1024,
            threads: 4,
            half_close: true,
            limit: Duration::from_secs(60),
            first_id: 0,
        }
    }
}

/// What a stream run did so far (readable from other threads while it runs).
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes echoed back and checked.
    pub echoed: std::sync::atomic::AtomicU64,
    /// Connections that finished with every byte back.
    pub finished: std::sync::atomic::AtomicUsize,
}

struct StreamConn {
    id: usize,
    sock: ClientSock,
    data: &'static [u8],
    sent: usize,
    received: usize,
    write_rng: Rng,
    write_shut: bool,
}

impl Streams {
    /// Runs every stream against `target` (a TCP address or a Unix socket
    /// path); `Err` describes the first failure.
    pub fn run(&self, target: impl Into<Target>) -> Result<(), String> {
        self.run_with(target, &Progress::default())
    }

    /// As [`Streams::run`], reporting into `progress`.
    pub fn run_with(&self, target: impl Into<Target>, progress: &Progress) -> Result<(), String> {
        let target = target.into();
        let addr = &target;
        let deadline = Instant::now() + self.limit;
        let threads = self.threads.clamp(1, self.conns.max(1));
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let ids: Vec<usize> = (t..self.conns)
                        .step_by(threads)
                        .map(|i| self.first_id + i)
                        .collect();
                    scope.spawn(move || self.run_thread(addr, ids, deadline, progress))
                })
                .collect();
            let mut first_error = None;
            for handle in handles {
                let result = handle
                    .join()
                    .unwrap_or_else(|_| Err("a client thread panicked".to_owned()));
                if let Err(e) = result {
                    first_error.get_or_insert(e);
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    }

    fn run_thread(
        &self,
        addr: &Target,
        ids: Vec<usize>,
        deadline: Instant,
        progress: &Progress,
    ) -> Result<(), String> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut conns = Vec::with_capacity(ids.len());
        for id in ids {
            let sock = addr
                .connect()
                .map_err(|e| format!("conn {id}: connect to {addr}: {e}"))?;
            sock.set_nonblocking(true).map_err(|e| e.to_string())?;
            conns.push(StreamConn {
                id,
                sock,
                data: pattern(id, self.bytes),
                sent: 0,
                received: 0,
                write_rng: Rng::new(id as u64 + 1),
                write_shut: false,
            });
        }
        let mut buf = vec![0u8; 64 * 1024];
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(conns.len());
        while !conns.is_empty() {
            if Instant::now() >= deadline {
                let state: Vec<String> = conns
                    .iter()
                    .take(8)
                    .map(|c| format!("conn {} sent {} got {}", c.id, c.sent, c.received))
                    .collect();
                return Err(format!(
                    "streams timed out after {:?}; {} connections unfinished: {}",
                    self.limit,
                    conns.len(),
                    state.join(", ")
                ));
            }
            fds.clear();
            fds.extend(conns.iter().map(|c| libc::pollfd {
                fd: c.sock.as_raw_fd(),
                events: libc::POLLIN
                    | if c.sent < c.data.len() {
                        libc::POLLOUT
                    } else {
                        0
                    },
                revents: 0,
            }));
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("poll: {e}"));
            }
            let mut i = 0;
            while i < conns.len() {
                let revents = fds[i].revents;
                let done = if revents == 0 {
                    false
                } else {
                    self.service(&mut conns[i], revents, &mut buf, progress)?
                };
                if done {
                    progress.finished.fetch_add(1, Relaxed);
                    conns.swap_remove(i);
                    fds.swap_remove(i);
                } else {
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// Handles one connection's readiness; `Ok(true)` when it is finished.
    fn service(
        &self,
        c: &mut StreamConn,
        revents: i16,
        buf: &mut [u8],
        progress: &Progress,
    ) -> Result<bool, String> {
        use std::io::ErrorKind::{Interrupted, WouldBlock};
        let id = c.id;
        if revents & libc::POLLOUT != 0 && c.sent < c.data.len() {
            let want = c
                .write_rng
                .between(1, self.max_write)
                .min(c.data.len() - c.sent);
            match c.sock.write(&c.data[c.sent..c.sent + want]) {
                Ok(n) => c.sent += n,
                Err(e) if e.kind() == WouldBlock || e.kind() == Interrupted => {}
                Err(e) => return Err(format!("conn {id}: write after {} bytes: {e}", c.sent)),
            }
        }
        if self.half_close && c.sent == c.data.len() && !c.write_shut {
            c.sock
                .shutdown(std::net::Shutdown::Write)
                .map_err(|e| format!("conn {id}: shutdown: {e}"))?;
            c.write_shut = true;
        }
        if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            loop {
                match c.sock.read(buf) {
                    Ok(0) => {
                        if c.received != c.data.len() {
                            return Err(format!(
                                "conn {id}: end of stream after {} of {} bytes (sent {})",
                                c.received,
                                c.data.len(),
                                c.sent
                            ));
                        }
                        return Ok(true);
                    }
                    Ok(n) => {
                        if c.received + n > c.sent {
                            return Err(format!(
                                "conn {id}: got {} bytes back but sent only {}",
                                c.received + n,
                                c.sent
                            ));
                        }
                        let expected = &c.data[c.received..c.received + n];
                        if expected != &buf[..n] {
                            let at = expected
                                .iter()
                                .zip(&buf[..n])
                                .position(|(a, b)| a != b)
                                .unwrap_or(0);
                            return Err(format!(
                                "conn {id}: echoed byte {} differs (expected {:#04x}, got {:#04x})",
                                c.received + at,
                                expected[at],
                                buf[at]
                            ));
                        }
                        c.received += n;
                        progress
                            .echoed
                            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                        if !self.half_close && c.received == c.data.len() {
                            return Ok(true);
                        }
                    }
                    Err(e) if e.kind() == WouldBlock => break,
                    Err(e) if e.kind() == Interrupted => {}
                    Err(e) => {
                        return Err(format!(
                            "conn {id}: read after {} of {} bytes: {e}",
                            c.received,
                            c.data.len()
                        ))
                    }
                }
            }
        }
        Ok(false)
    }
}

/// Polls `fut` at most `polls + 1` times, then drops it if it has not
/// finished. The task re-queues itself after each poll, and a core polls
/// at most 256 tasks per loop turn before it goes to the kernel, so a few
/// hundred polls span one or more trips to the kernel: a way to drop an
/// operation at an arbitrary point of its life, finer than the 1 ms timer.
pub async fn within_polls<F: std::future::Future>(polls: usize, fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut left = polls;
    std::future::poll_fn(|cx| {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(cx) {
            return std::task::Poll::Ready(Some(v));
        }
        if left == 0 {
            return std::task::Poll::Ready(None);
        }
        left -= 1;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}
