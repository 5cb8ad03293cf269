//! A connection flood: clients that open batches of connections, send a
//! message on each and read its echo, counting what became of each, for
//! tests of what a stopping (or replaced) server does to connections
//! still arriving.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::Add;
use std::time::{Duration, Instant};

/// Connections a flood thread has in flight at once.
pub const FLOOD_BATCH: usize = 32;

/// What the clients saw: a full echo, a connection reset or closed before
/// its echo, or a refusal.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcomes {
    /// Messages echoed in full.
    pub echoed: u32,
    /// Connections reset or closed before their echo.
    pub lost: u32,
    /// Connections refused.
    pub refused: u32,
}

impl Add for Outcomes {
    type Output = Outcomes;
    fn add(self, o: Outcomes) -> Outcomes {
        Outcomes {
            echoed: self.echoed + o.echoed,
            lost: self.lost + o.lost,
            refused: self.refused + o.refused,
        }
    }
}

/// Floods `addr` with batches of connections until `done` holds after a
/// batch (a batch stops connecting at its first refusal). Anything but an
/// echo, a loss or a refusal fails the test (a hang is a read timeout),
/// as does a flood still running after 120 s (a hang detector).
pub fn flood(addr: SocketAddr, done: impl Fn(&Outcomes) -> bool) -> Outcomes {
    let mut seen = Outcomes::default();
    let msg = super::pattern(7, 100);
    let gone = |e: &std::io::Error| {
        matches!(
            e.kind(),
            ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof | ErrorKind::BrokenPipe
        )
    };
    let give_up = Instant::now() + Duration::from_secs(120);
    while !done(&seen) {
        assert!(
            Instant::now() < give_up,
            "the flood was not told to end in 120 s"
        );
        let mut batch = Vec::with_capacity(FLOOD_BATCH);
        for _ in 0..FLOOD_BATCH {
            match TcpStream::connect_timeout(&addr, super::IO_TIMEOUT) {
                Ok(c) => batch.push(c),
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    seen.refused += 1;
                    break;
                }
                // The handshake was answered, then the listener closed.
                Err(e) if gone(&e) => seen.lost += 1,
                Err(e) => panic!("connect: {e}"),
            }
        }
        for client in &mut batch {
            client
                .set_read_timeout(Some(super::IO_TIMEOUT))
                .expect("timeout");
            let mut back = [0u8; 100];
            match client
                .write_all(msg)
                .and_then(|()| client.read_exact(&mut back))
            {
                Ok(()) => {
                    assert_eq!(&back[..], msg);
                    seen.echoed += 1;
                }
                Err(e) if gone(&e) => seen.lost += 1,
                Err(e) => panic!("a client neither got its echo nor was closed: {e}"),
            }
        }
    }
    seen
}
