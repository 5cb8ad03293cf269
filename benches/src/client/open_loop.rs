//! The open-loop HTTP client (wrk2-style): requests leave at their intended
//! times from a busy-polling epoll loop, and latency is measured from the
//! intended send time, so a slow server cannot hide its stalls
//! (no coordinated omission).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::keepalive::http_validate;
use super::*;
struct Epoll(RawFd);

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory-safety preconditions.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(Epoll(fd))
        }
    }

    fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both fds are open and `ev` is a valid epoll_event.
        if unsafe { libc::epoll_ctl(self.0, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Ready tokens, without blocking.
    fn poll(&self, events: &mut [libc::epoll_event]) -> io::Result<usize> {
        // SAFETY: `events` is a valid, writable buffer of the length passed.
        let n = unsafe { libc::epoll_wait(self.0, events.as_mut_ptr(), events.len() as i32, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: the fd is owned by this value and closed once.
        unsafe { libc::close(self.0) };
    }
}

struct OpenConn {
    stream: TcpStream,
    next_send: Instant,
    intended: Option<Instant>,
    buf: [u8; 4096],
    filled: usize,
}

/// Open-loop HTTP at a fixed `rate` (requests/s) over `conns` keep-alive
/// connections, wrk2-style: every request has an intended send time on a
/// per-connection schedule and its latency is measured from that time, so a
/// stalled server is charged for the requests it delayed (no coordinated
/// omission). One request in flight per connection. The client busy-polls
/// epoll on its own CPU. ops = answered requests; `errors` = requests still
/// unanswered `DRAIN` after the last send.
pub fn open_loop(
    addr: SocketAddr,
    conns: usize,
    rate: f64,
    window: Duration,
    probe: &mut Probe<'_>,
) -> io::Result<Load> {
    let ep = Epoll::new()?;
    let mut cs = Vec::with_capacity(conns);
    for i in 0..conns {
        let mut s = connect(addr)?;
        http_validate(&mut s)?;
        s.set_nonblocking(true)?;
        ep.add(s.as_raw_fd(), i as u64)?;
        cs.push(OpenConn {
            stream: s,
            next_send: Instant::now(),
            intended: None,
            buf: [0u8; 4096],
            filled: 0,
        });
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3)
        .map_err(|e| io::Error::other(format!("histogram: {e}")))?;
    let period = Duration::from_secs_f64(conns as f64 / rate);
    let stagger = Duration::from_secs_f64(1.0 / rate);
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut in_flight = 0usize;
    let mut ops = 0u64;
    let mut errors = 0u64;

    probe.start();
    let t0 = Instant::now();
    let end = t0 + window;
    let hard_end = end + DRAIN;
    for (i, c) in cs.iter_mut().enumerate() {
        c.next_send = t0 + stagger * i as u32;
    }
    loop {
        let now = Instant::now();
        if now >= end && in_flight == 0 {
            break;
        }
        if now >= hard_end {
            // Unanswered: charge them the time waited so far and count them.
            for c in cs.iter().filter(|c| c.intended.is_some()) {
                if let Some(t) = c.intended {
                    hist.saturating_record(now.duration_since(t).as_nanos() as u64);
                }
            }
            errors = in_flight as u64;
            break;
        }
        for c in cs.iter_mut() {
            if c.intended.is_none() && c.next_send <= now && c.next_send < end {
                match c.stream.write(http::REQUEST) {
                    Ok(n) if n == http::REQUEST.len() => {
                        c.intended = Some(c.next_send);
                        c.next_send += period;
                        in_flight += 1;
                    }
                    Ok(_) => return Err(io::Error::other("partial request write")),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let n = ep.poll(&mut events)?;
        for ev in &events[..n] {
            let c = &mut cs[ev.u64 as usize];
            loop {
                match c.stream.read(&mut c.buf[c.filled..]) {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "server closed",
                        ))
                    }
                    Ok(k) => c.filled += k,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                if c.filled == c.buf.len() {
                    break;
                }
            }
            while let Some(len) = http::frame_response(&c.buf[..c.filled])? {
                let at = Instant::now();
                let Some(t) = c.intended.take() else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "unsolicited HTTP response",
                    ));
                };
                hist.saturating_record(at.duration_since(t).as_nanos() as u64);
                in_flight -= 1;
                ops += 1;
                c.buf.copy_within(len..c.filled, 0);
                c.filled -= len;
            }
        }
    }
    probe.stop();
    Ok(Load {
        ops,
        bytes: 0,
        latency_ns: Some(hist),
        errors,
    })
}
