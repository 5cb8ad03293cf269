//! A raw-bytes HTTP/1.1 client, for tests that check the exact bytes a
//! server sends.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::IO_TIMEOUT;

/// A parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// Header fields, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Resp {
    /// The first value of `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the response carries `Connection: close`.
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A raw HTTP/1.1 client on one connection, keeping bytes it read past a
/// response for the next one (pipelining).
#[derive(Debug)]
pub struct Client {
    /// The connection, for tests that need the socket itself.
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `addr` with [`IO_TIMEOUT`] on reads and writes.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// The client's own address (the server's peer).
    pub fn local_addr(&self) -> SocketAddr {
        self.stream.local_addr().expect("local address")
    }

    /// Sends `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> &mut Self {
        self.stream.write_all(bytes).expect("send request");
        self
    }

    /// Sends `bytes`, tolerating a server that already closed.
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads more bytes; `false` at end of stream.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            return match self.stream.read(&mut chunk) {
                Ok(0) => false,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    true
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => false,
                Err(e) => panic!("read a response: {e}"),
            };
        }
    }

    /// Takes exactly `n` bytes.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.fill(), "connection closed inside a response");
        }
        self.buf.drain(..n).collect()
    }

    /// Takes one line, including its CRLF.
    fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                return self.buf.drain(..i + 2).collect();
            }
            assert!(self.fill(), "connection closed inside a response head");
        }
    }

    /// Reads one response; `head_only` for the answer to HEAD.
    pub fn response_to(&mut self, head_only: bool) -> Resp {
        let status_line = String::from_utf8(self.line()).expect("ASCII status line");
        assert!(
            status_line.starts_with("HTTP/1.1 ") && status_line.len() >= 14,
            "bad status line {status_line:?}"
        );
        let status: u16 = status_line[9..12].parse().expect("status code");
        let mut headers = Vec::new();
        loop {
            let line = String::from_utf8(self.line()).expect("ASCII header");
            let line = line.trim_end_matches("\r\n");
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("header has a colon");
            headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        let mut resp = Resp {
            status,
            headers,
            body: Vec::new(),
        };
        if head_only || status == 100 || status == 204 || status == 304 {
            return resp;
        }
        if let Some(len) = resp.header("content-length") {
            let len: usize = len.parse().expect("numeric Content-Length");
            resp.body = self.take(len);
        } else if resp.header("transfer-encoding") == Some("chunked") {
            loop {
                let size_line = String::from_utf8(self.line()).expect("chunk size");
                let size = usize::from_str_radix(size_line.trim_end(), 16).expect("hex size");
                if size == 0 {
                    assert_eq!(self.line(), b"\r\n", "no trailers are sent");
                    break;
                }
                let data = self.take(size);
                resp.body.extend_from_slice(&data);
                assert_eq!(self.take(2), b"\r\n");
            }
        } else {
            // Delimited by the close (an HTTP/1.0 streamed response).
            while self.fill() {}
            resp.body = std::mem::take(&mut self.buf);
        }
        resp
    }

    /// Reads one response.
    pub fn response(&mut self) -> Resp {
        self.response_to(false)
    }

    /// Sends `bytes` and reads one response.
    pub fn roundtrip(&mut self, bytes: &[u8]) -> Resp {
        self.send(bytes);
        self.response()
    }

    /// Asserts the server closes with no further bytes within `limit`.
    pub fn expect_eof_within(&mut self, limit: Duration) -> Duration {
        let started = Instant::now();
        self.stream
            .set_read_timeout(Some(limit))
            .expect("set timeout");
        let mut chunk = [0u8; 4096];
        let result = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set timeout");
        if let Err(e) = result {
            panic!("expected the server to close within {limit:?}: {e}");
        }
        assert!(
            self.buf.is_empty(),
            "unexpected bytes before the close: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        started.elapsed()
    }

    /// [`Client::expect_eof_within`] the hang guard's limit.
    pub fn expect_eof(&mut self) -> Duration {
        self.expect_eof_within(IO_TIMEOUT)
    }

    /// Everything until the server closes.
    pub fn read_to_end(&mut self) -> Vec<u8> {
        while self.fill() {}
        std::mem::take(&mut self.buf)
    }

    /// Half-closes: the server reads end of stream.
    pub fn shutdown_write(&mut self) {
        self.stream
            .shutdown(Shutdown::Write)
            .expect("shutdown(SHUT_WR)");
    }

    /// Closes with a reset (`SO_LINGER` 0) instead of a FIN.
    pub fn reset(self) {
        use std::os::fd::AsRawFd;
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket fd and a pointer to a live `linger` of
        // the size given.
        let rc = unsafe {
            libc::setsockopt(
                self.stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "setsockopt(SO_LINGER)");
    }
}

/// Sends `bytes` on a new connection, half-closes, and returns every byte
/// the server sent before closing.
pub fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut c = Client::connect(addr);
    // The server may answer and close before it read everything.
    let _ = c.try_send(bytes);
    let _ = c.stream.shutdown(Shutdown::Write);
    c.read_to_end()
}

/// Sends `bytes` on a new connection and reads one response.
pub fn one(addr: SocketAddr, bytes: &[u8]) -> Resp {
    Client::connect(addr).roundtrip(bytes)
}

/// Sends `bytes`, expects exactly one error response with `status`,
/// `Connection: close`, then the close.
pub fn expect_error(addr: SocketAddr, bytes: &[u8], status: u16) {
    let mut c = Client::connect(addr);
    let _ = c.try_send(bytes);
    let resp = c.response();
    assert_eq!(
        resp.status,
        status,
        "status for {:?}",
        String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
    );
    assert!(resp.closes(), "error responses carry Connection: close");
    c.expect_eof();
}

/// Sends `bytes`, expects one response with `status` after which the
/// connection stays open: a service's refusal of a whole request. Returns
/// it, and the client to go on with.
pub fn expect_kept_error(addr: SocketAddr, bytes: &[u8], status: u16) -> (Resp, Client) {
    let mut c = Client::connect(addr);
    let resp = c.roundtrip(bytes);
    let sent = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    assert_eq!(resp.status, status, "status for {sent:?}");
    assert!(
        !resp.closes(),
        "{sent:?} closed the connection: {:?}",
        resp.headers
    );
    (resp, c)
}

/// `GET path` with a Host header.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// `POST path` with a Content-Length body and a content type.
pub fn post(path: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

/// Replaces every `Date:` value by a fixed one, so responses made in
/// different seconds compare equal.
pub fn normalize_dates(bytes: &[u8]) -> Vec<u8> {
    const NAME: &[u8] = b"\r\nDate: ";
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(NAME) && i + NAME.len() + 29 <= bytes.len() {
            out.extend_from_slice(NAME);
            out.extend_from_slice(b"Thu, 01 Jan 1970 00:00:00 GMT");
            i += NAME.len() + 29;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The status codes of every response in a byte stream (by status line).
pub fn statuses(bytes: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(bytes);
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}
