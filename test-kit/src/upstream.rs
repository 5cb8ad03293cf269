//! Scripted fake upstreams on `std::net` threads, for the tests of a
//! proxy.
//!
//! A fake upstream accepts connections on `127.0.0.1:0` and runs its script
//! on each, on a thread of its own (so a blackhole never blocks the next
//! connection). It counts accepted connections, records every request's
//! bytes, and counts connections the proxy closed (seen as end of stream by
//! [`Conn::wait_close`]).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An address nothing listens on, for the rest of the test process
/// (FAULTS F1): a socket bound to it that never listens, kept open, so a
/// connect is refused and no server started meanwhile (by a test running
/// in parallel) can take the port, as one could after a bind and close.
pub fn refused_addr() -> SocketAddr {
    use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
    // SAFETY: `socket` has no memory effects; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: a descriptor just opened and owned by nothing else.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let any_port = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a valid socket and a pointer to a live `sockaddr_in` of the
    // length given.
    let rc = unsafe {
        libc::bind(
            socket.as_raw_fd(),
            (&any_port as *const libc::sockaddr_in).cast(),
            len,
        )
    };
    assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
    let mut bound = any_port;
    let mut bound_len = len;
    // SAFETY: a valid socket; `bound` is a live `sockaddr_in` whose size
    // `bound_len` gives, which the kernel writes within.
    let rc = unsafe {
        libc::getsockname(
            socket.as_raw_fd(),
            (&mut bound as *mut libc::sockaddr_in).cast(),
            &mut bound_len,
        )
    };
    assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
    // Kept for the process's life: the port stays this test's.
    let _ = socket.into_raw_fd();
    SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, u16::from_be(bound.sin_port)))
}

/// What a fake upstream saw, shared with its threads.
#[derive(Debug, Default)]
pub struct Seen {
    /// Connections accepted.
    pub accepted: AtomicUsize,
    /// Connections the proxy closed.
    pub closed_by_peer: AtomicUsize,
    /// Every request read, in order.
    pub requests: Mutex<Vec<Vec<u8>>>,
    /// Scripts that returned, their connection closed by the fake.
    pub finished: AtomicUsize,
}

/// One accepted connection, as a script sees it.
#[derive(Debug)]
pub struct Conn {
    /// The accepted connection.
    pub stream: TcpStream,
    /// Index of this connection among those accepted (0-based).
    pub index: usize,
    seen: Arc<Seen>,
    buf: Vec<u8>,
}

impl Conn {
    /// Reads one request (head, and a `Content-Length` body) and records
    /// it; `None` at end of stream or error.
    pub fn read_request(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                let total = end + 4 + len;
                if self.buf.len() >= total {
                    let req: Vec<u8> = self.buf.drain(..total).collect();
                    self.seen
                        .requests
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(req.clone());
                    return Some(req);
                }
            }
            let mut chunk = [0u8; 8192];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.seen.closed_by_peer.fetch_add(1, Ordering::SeqCst);
                    return None;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }

    /// Writes `bytes`, ignoring a peer that went away.
    pub fn send(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// Answers 200 with `body` (keep-alive).
    pub fn ok(&mut self, body: &[u8]) {
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
        self.send(head.as_bytes());
        self.send(body);
    }

    /// Waits up to `limit` for the proxy to close the connection; counts it.
    pub fn wait_close(&mut self, limit: Duration) -> bool {
        let _ = self.stream.set_read_timeout(Some(limit));
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.seen.closed_by_peer.fetch_add(1, Ordering::SeqCst);
                    return true;
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                    self.seen.closed_by_peer.fetch_add(1, Ordering::SeqCst);
                    return true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Closes with a reset (`SO_LINGER 0`) instead of a FIN.
    pub fn reset(self) {
        set_linger_zero(&self.stream);
        drop(self.stream);
    }
}

/// `SO_LINGER {on, 0}`: `close` sends RST.
pub fn set_linger_zero(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on an open socket with a correctly sized option.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
}

/// A scripted upstream; stops accepting when dropped.
#[derive(Debug)]
pub struct Fake {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it saw.
    pub seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Fake {
    /// Runs `script` on every accepted connection, each on its own thread,
    /// and closes the connection when the script returns. Connection reads
    /// time out after a minute (a hang detector, far beyond any answer's
    /// delay on a loaded machine) so no thread outlives a test for long.
    pub fn start(script: impl Fn(Conn) + Send + Sync + 'static) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake upstream");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(script);
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let index = seen.accepted.fetch_add(1, Ordering::SeqCst);
                            let _ = stream.set_nonblocking(false);
                            let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
                            let _ = stream.set_nodelay(true);
                            let conn = Conn {
                                stream,
                                index,
                                seen: seen.clone(),
                                buf: Vec::new(),
                            };
                            let script = script.clone();
                            let seen = seen.clone();
                            std::thread::spawn(move || {
                                script(conn);
                                seen.finished.fetch_add(1, Ordering::SeqCst);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            })
        };
        Fake {
            addr,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// A fake that answers every request on a connection with "ok" (and,
    /// like every fake, records it).
    pub fn answering_ok() -> Fake {
        Fake::start(|mut c: Conn| {
            while c.read_request().is_some() {
                c.ok(b"ok");
            }
        })
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.seen.accepted.load(Ordering::SeqCst)
    }

    /// Connections the proxy closed so far.
    pub fn closed_by_peer(&self) -> usize {
        self.seen.closed_by_peer.load(Ordering::SeqCst)
    }

    /// Connections whose script returned and which the fake closed.
    pub fn finished(&self) -> usize {
        self.seen.finished.load(Ordering::SeqCst)
    }

    /// Every request read so far, in order.
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.seen
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits until `check` holds (polling), up to `limit`; returns whether it did.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The entries of a combined body: (upstream, status, body) per element.
/// A tiny reader for exactly the format the proxy writes.
pub fn entries(body: &[u8]) -> Vec<(String, u16, String)> {
    let text = std::str::from_utf8(body).expect("UTF-8 JSON");
    assert!(
        text.starts_with('[') && text.ends_with(']'),
        "not an array: {text}"
    );
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("{\"upstream\":\"") {
        rest = &rest[i + 13..];
        let (upstream, r) = rest.split_once('"').expect("upstream");
        let r = r.strip_prefix(",\"status\":").expect("status");
        let (status, r) = r.split_once(',').expect("status end");
        let r = r.split_once(",\"body\":\"").expect("body").1;
        // The body string ends at the first unescaped quote.
        let mut body = String::new();
        let mut chars = r.char_indices();
        let mut end = r.len();
        while let Some((j, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, e)) = chars.next() {
                        body.push(match e {
                            'n' => '\n',
                            'r' => '\r',
                            't' => '\t',
                            other => other,
                        });
                    }
                }
                '"' => {
                    end = j;
                    break;
                }
                c => body.push(c),
            }
        }
        out.push((
            upstream.to_owned(),
            status.parse().expect("status code"),
            body,
        ));
        rest = &r[end..];
    }
    out
}
