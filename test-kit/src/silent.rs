//! [`Silent`]: many TCP connections that never send a byte, each opened
//! again as soon as the server closes it: the attacker that tries to
//! fill a server's per-core places (TLS handshakes, connections, head
//! reads) with peers that do nothing.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Silent connections held open by a thread of their own until dropped.
#[derive(Debug)]
pub struct Silent {
    stop: Arc<AtomicBool>,
    reopened: Arc<AtomicU64>,
    open: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Silent {
    /// Opens `count` connections to `addr` and keeps that many open: a
    /// connection the server closes (or resets) is opened again at once.
    pub fn hold(addr: SocketAddr, count: usize) -> Silent {
        let stop = Arc::new(AtomicBool::new(false));
        let reopened = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, reopened, open) = (stop.clone(), reopened.clone(), open.clone());
            std::thread::Builder::new()
                .name("silent".into())
                .spawn(move || renew(addr, count, &stop, &reopened, &open))
                .expect("spawn the silent connections' thread")
        };
        Silent {
            stop,
            reopened,
            open,
            thread: Some(thread),
        }
    }

    /// Connections opened again after the server closed them.
    pub fn reopened(&self) -> u64 {
        self.reopened.load(Relaxed)
    }

    /// Connections open now.
    pub fn open(&self) -> u64 {
        self.open.load(Relaxed)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Connects, bounded by a generous timeout (a full backlog holds a
/// connect until the server accepts).
fn open(addr: SocketAddr) -> Option<TcpStream> {
    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()
}

fn renew(
    addr: SocketAddr,
    count: usize,
    stop: &AtomicBool,
    reopened: &AtomicU64,
    open_now: &AtomicU64,
) {
    let mut conns: Vec<Option<TcpStream>> = Vec::with_capacity(count);
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(count);
    let mut buf = [0u8; 4096];
    conns.resize_with(count, || None);
    let mut first = true;
    while !stop.load(Relaxed) {
        // Fill every empty place (all of them at the start).
        for conn in &mut conns {
            if conn.is_none() && !stop.load(Relaxed) {
                *conn = open(addr);
                if conn.is_some() && !first {
                    reopened.fetch_add(1, Relaxed);
                }
            }
        }
        first = false;
        open_now.store(conns.iter().flatten().count() as u64, Relaxed);
        fds.clear();
        fds.extend(conns.iter().map(|c| libc::pollfd {
            fd: c.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        }));
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd entries.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
        if n <= 0 {
            continue;
        }
        for (conn, fd) in conns.iter_mut().zip(&fds) {
            if fd.revents == 0 {
                continue;
            }
            let Some(sock) = conn else { continue };
            // Whatever the server sent (an alert) is read and dropped; a
            // close or a reset ends the connection.
            let _ = sock.set_nonblocking(true);
            let closed = loop {
                match std::io::Read::read(sock, &mut buf) {
                    Ok(0) => break true,
                    Ok(_) => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => break true,
                }
            };
            if closed {
                *conn = None;
            }
        }
    }
}
