//! Blocking `std::net` clients with read and write timeouts: a timeout is
//! a failure guard, never a way to wait for the server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Guard against a hung test: every client socket operation times out
/// after this long, which fails the test with a message instead. A hang
/// detector only, never a verdict: a minute, so that a reply slowed by a
/// loaded machine still arrives.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// A blocking client connection with [`IO_TIMEOUT`] on reads and writes.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("set_read_timeout");
    stream
        .set_write_timeout(Some(IO_TIMEOUT))
        .expect("set_write_timeout");
    stream.set_nodelay(true).expect("set_nodelay");
    stream
}

/// Writes `msg` and reads exactly as many bytes back; they must match.
pub fn roundtrip(stream: &mut TcpStream, msg: &[u8]) {
    stream
        .write_all(msg)
        .unwrap_or_else(|e| panic!("write: {e}"));
    let mut back = vec![0u8; msg.len()];
    stream
        .read_exact(&mut back)
        .unwrap_or_else(|e| panic!("read echo of {} bytes: {e}", msg.len()));
    assert_eq!(back, msg, "echo differs from what was sent");
}

/// A new connection echoes one message.
pub fn ping(addr: SocketAddr) {
    let mut stream = connect(addr);
    roundtrip(&mut stream, b"ping: is the server still serving?");
}

/// Reads until end of stream; returns what came. A reset counts as the
/// end too (returned as `Err` with the bytes so far).
pub fn read_to_end(stream: &mut TcpStream) -> Result<Vec<u8>, (Vec<u8>, std::io::Error)> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((out, e)),
        }
    }
}

/// Makes `close` send a reset (`SO_LINGER` 0), then closes.
pub fn reset(stream: TcpStream) {
    crate::upstream::set_linger_zero(&stream);
    drop(stream);
}
