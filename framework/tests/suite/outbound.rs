//! Handlers that talk to other servers, written with the public API only:
//! a TCP relay that copies both ways at once (`future::try_join`), two
//! backend requests run together (`future::join`), and a read dropped as
//! the loser of a `future::select`. The backends are plain `std::net`
//! servers on threads of their own.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use percore::future::{join, select, try_join, Either};
use percore::net::{Stream, TcpStream};
use percore::time::{sleep, timeout};
use percore::{Connection, Handler};
use percore_test_kit::*;

/// Copies `from` to `to` until `from` ends, then passes the end on.
async fn pump(from: &Stream, to: &Stream) -> std::io::Result<()> {
    while let Some(buf) = from.read().await? {
        let (res, _) = to.write_all(buf).await;
        res?;
    }
    to.shutdown_write()
}

/// Relays each client to `backend`, both directions at once.
struct Relay {
    backend: SocketAddr,
}

impl Handler for Relay {
    async fn serve(&self, client: Connection) -> std::io::Result<()> {
        let backend = timeout(IO_TIMEOUT, TcpStream::connect(self.backend)).await??;
        try_join(pump(&client, &backend), pump(&backend, &client)).await?;
        Ok(())
    }
}

/// A backend on a thread of its own: `serve` runs for each connection.
fn spawn_backend(serve: impl Fn(std::net::TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the backend");
    let addr = listener.local_addr().expect("backend address");
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream));
        }
    });
    addr
}

/// Echoes until the end of stream, then half-closes.
fn echo_backend() -> SocketAddr {
    spawn_backend(|mut stream| {
        let mut reader = stream.try_clone().expect("clone");
        if std::io::copy(&mut reader, &mut stream).is_ok() {
            let _ = stream.shutdown(Shutdown::Write);
        }
    })
}

/// Asks two backends at once, each for one line, and answers with both.
struct Both {
    backends: [SocketAddr; 2],
}

async fn ask(addr: SocketAddr, question: &'static [u8]) -> std::io::Result<Vec<u8>> {
    let conn = timeout(IO_TIMEOUT, TcpStream::connect(addr)).await??;
    let (res, _) = conn.write_all(question).await;
    res?;
    let mut answer = Vec::new();
    while !answer.ends_with(b"\n") {
        let Some(buf) = conn.read().await? else {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        };
        answer.extend_from_slice(&buf);
    }
    Ok(answer)
}

impl Handler for Both {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let [a, b] = self.backends;
        let answer = match timeout(IO_TIMEOUT, join(ask(a, b"a\n"), ask(b, b"b\n"))).await {
            Ok((a, b)) => [a?, b?].concat(),
            Err(_) => b"deadline\n".to_vec(),
        };
        let (res, _) = conn.write_all(answer).await;
        res
    }
}

/// Reads with a short timer as its rival, then echoes what comes after.
struct Patient;

impl Handler for Patient {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let first = match select(conn.read(), sleep(Duration::from_millis(50))).await {
            Either::Left(_) => "read",
            Either::Right(()) => "timer",
        };
        let (res, _) = conn.write_all(format!("{first}\n")).await;
        res?;
        while let Some(buf) = conn.read().await? {
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

/// Sends small writes to a backend that reads them all as fast as they
/// come, until its own client says something; the two run under `select`,
/// or under `try_join` with the client's word as the error that ends it.
struct Chatty {
    sink: SocketAddr,
    by_try_join: bool,
}

impl Handler for Chatty {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let sink = timeout(IO_TIMEOUT, TcpStream::connect(self.sink)).await??;
        let chatter = async {
            loop {
                let (res, _) = sink.write_all(&b"chatter"[..]).await;
                res?;
            }
        };
        let heard = if self.by_try_join {
            let listen = async {
                conn.read().await?;
                Err(std::io::Error::other("heard"))
            };
            let res: std::io::Result<((), ())> = try_join(chatter, listen).await;
            res.is_err_and(|e| e.to_string() == "heard")
        } else {
            matches!(select(chatter, conn.read()).await, Either::Right(_))
        };
        let answer = if heard {
            &b"heard\n"[..]
        } else {
            &b"other\n"[..]
        };
        let (res, _) = conn.write_all(answer).await;
        res
    }
}

/// Reads and throws away until the end of stream.
fn sink_backend() -> SocketAddr {
    spawn_backend(|mut stream| {
        let _ = std::io::copy(&mut stream, &mut std::io::sink());
    })
}

backend_tests! {
    /// 2 MiB through the relay to an echo backend and back, written by one
    /// client thread while another reads, so both directions carry bytes
    /// at once; the client's half-close reaches the backend, whose own
    /// end comes back.
    fn relay_copies_both_ways_at_once(backend) {
        let server = builder(backend)
            .start(move |_| Relay { backend: echo_backend() })
            .expect("start");
        check_backend(&server, backend);
        let client = connect(server.local_addr());
        let sent = pattern(7, 2 << 20);
        let mut writer = client.try_clone().expect("clone");
        let writing = std::thread::spawn(move || {
            writer.write_all(sent).expect("write through the relay");
            writer.shutdown(Shutdown::Write).expect("half-close");
        });
        let mut reader = client;
        let back = read_to_end(&mut reader).expect("read through the relay to its end");
        writing.join().expect("writer");
        assert!(back == sent, "{} bytes came back of {}, or other bytes", back.len(), sent.len());
        server.shutdown();
        server.join().expect("join");
    }

    /// A backend that resets ends the relay at once: the direction still
    /// waiting for the client is dropped, so the client sees its
    /// connection end instead of hanging, and the core holds nothing.
    fn relay_ends_both_ways_when_the_backend_resets(backend) {
        let server = builder(backend)
            .start(move |_| Relay {
                backend: backend_that_resets(),
            })
            .expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        client.write_all(b"hello").expect("write");
        let started = Instant::now();
        let end = read_to_end(&mut client);
        assert!(
            started.elapsed() < IO_TIMEOUT / 2,
            "the client waited {:?} for the end: {end:?}",
            started.elapsed()
        );
        if let Err((_, e)) = &end {
            assert!(
                !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
                "the client's read timed out instead of seeing the end"
            );
        }
        wait_until(IO_TIMEOUT, "no connection left on the core", || sum(&server.stats(), |s| s.active), |&n| n == 0);
        server.shutdown();
        server.join().expect("join");
    }

    /// Two backend requests run together: each backend answers only once
    /// both have been asked, which a handler asking one after the other
    /// would never see.
    fn join_runs_two_backend_requests_at_once(backend) {
        let both_asked = Arc::new(Barrier::new(2));
        let answering = |name: &'static str, barrier: Arc<Barrier>| {
            spawn_backend(move |mut stream| {
                let mut question = [0u8; 2];
                if stream.read_exact(&mut question).is_ok() {
                    barrier.wait();
                    let _ = stream.write_all(format!("{name}\n").as_bytes());
                }
            })
        };
        let backends = [
            answering("from a", both_asked.clone()),
            answering("from b", both_asked),
        ];
        let server = builder(backend).start(move |_| Both { backends }).expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        let answer = read_to_end(&mut client).expect("the answer");
        assert_eq!(String::from_utf8_lossy(&answer), "from a\nfrom b\n");
        server.shutdown();
        server.join().expect("join");
    }

    /// The read that lost a `select` to a timer was dropped; the bytes the
    /// client sends afterwards reach the next read, none lost.
    fn select_drops_the_losing_read_without_losing_bytes(backend) {
        let server = builder(backend).start(|_| Patient).expect("start");
        check_backend(&server, backend);
        let mut client = connect(server.local_addr());
        let mut line = [0u8; 6];
        client.read_exact(&mut line).expect("the select's outcome");
        assert_eq!(&line, b"timer\n");
        roundtrip(&mut client, b"after the timer");
        client.shutdown(Shutdown::Write).expect("half-close");
        assert_eq!(read_to_end(&mut client).expect("the end"), b"");
        server.shutdown();
        server.join().expect("join");
    }

    /// A future whose I/O is always ready (small sends that the backend
    /// reads as fast as they come, so on epoll each is accepted at once)
    /// does not starve the other under `select` or `try_join`: each is
    /// polled first in turn, so the client's read still gets I/O budget.
    fn combinators_are_fair_to_a_future_beside_a_busy_one(backend) {
        for by_try_join in [false, true] {
            let server = builder(backend)
                .start(move |_| Chatty { sink: sink_backend(), by_try_join })
                .expect("start");
            check_backend(&server, backend);
            let mut client = connect(server.local_addr());
            std::thread::sleep(Duration::from_millis(50));
            client.write_all(b"x").expect("write");
            let mut line = [0u8; 6];
            client.read_exact(&mut line).expect("an answer within the client's timeout");
            assert_eq!(&line, b"heard\n", "by_try_join: {by_try_join}");
            server.shutdown();
            server.join().expect("join");
        }
    }
}

/// Reads the relay's first bytes, then resets its connection.
fn backend_that_resets() -> SocketAddr {
    spawn_backend(|mut stream| {
        let mut first = [0u8; 5];
        if stream.read_exact(&mut first).is_ok() {
            reset(stream);
        }
    })
}
