//! FAULTS N3, for live connections: a raw `Handler` that opts in moves
//! its connection to another core at a boundary between two echoes, and
//! goes on echoing there byte for byte, with the bytes in flight at the
//! moment of the move (received by the kernel, not yet read) carried
//! over; moves are counted on both cores; and a stop that comes while
//! connections move loses no byte. A handler that meters its
//! connections ([`MoveMeter`]) takes an operator's orders too: they have
//! no budget of load.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use percore::{
    move_connection, move_wanted, Connection, Handler, MoveMeter, MoveOutcome, MovedState,
};
use percore_test_kit::*;

/// Echoes, and moves its connection whenever its core asks: after a
/// read, before its echo, so that the bytes just read go as unread bytes
/// (the echo is the target's) and the rest of what the client sent is
/// received by the kernel on the way. `metered` asks through a
/// [`MoveMeter`], else through [`move_wanted`].
struct MovingEcho {
    metered: bool,
}

impl Handler for MovingEcho {
    async fn serve(&self, mut conn: Connection) -> std::io::Result<()> {
        let mut meter = MoveMeter::new();
        while let Some(buf) = conn.read().await? {
            let wanted = if self.metered {
                meter.move_wanted()
            } else {
                move_wanted()
            };
            if let Some(core) = wanted {
                match move_connection(conn, core, buf.to_vec(), ()).await {
                    MoveOutcome::Moved => return Ok(()),
                    MoveOutcome::Stayed { conn: stayed, .. } => conn = stayed,
                    MoveOutcome::Closed(e) => return Err(e),
                }
                continue;
            }
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }

    async fn serve_moved(&self, conn: Connection, state: MovedState) -> std::io::Result<()> {
        assert!(state.take::<()>().is_some(), "the state travels");
        self.serve(conn).await
    }
}

/// A two-core echo server on `127.0.0.1:0`; `None` (skipped) on a
/// machine with one CPU.
fn two_cores(backend: Backend, drain: Duration) -> Option<ServerHandle> {
    limited(backend, drain, 10_000)
}

/// [`two_cores`] with `max` connections per core.
fn limited(backend: Backend, drain: Duration, max: usize) -> Option<ServerHandle> {
    start(backend, drain, max, false)
}

/// A two-core server of [`MovingEcho`], metered or not.
fn start(backend: Backend, drain: Duration, max: usize, metered: bool) -> Option<ServerHandle> {
    let cores: Vec<usize> = percore::runtime::cpus::available()
        .into_iter()
        .take(2)
        .collect();
    if cores.len() < 2 {
        println!("skipped: needs two CPUs");
        return None;
    }
    let server = builder(backend)
        .cores(cores)
        .drain_timeout(drain)
        .max_connections(max)
        .start(move |_| MovingEcho { metered })
        .expect("start");
    check_backend(&server, backend);
    Some(server)
}

/// The core the one open connection is on.
fn core_of_the_connection(server: &ServerHandle) -> usize {
    let cores = wait_until(
        Duration::from_secs(60),
        "the connection to be counted open",
        || server.stats(),
        |cores| cores.iter().map(|c| c.active).sum::<u64>() == 1,
    );
    cores.iter().position(|c| c.active == 1).expect("one core")
}

/// Sends `data` from another thread while this one reads the echo: all of
/// it must come back, in order.
fn echo_all(stream: &mut TcpStream, data: &'static [u8]) {
    let mut writer = stream.try_clone().expect("clone");
    let sending = std::thread::spawn(move || writer.write_all(data).expect("write"));
    let mut back = vec![0u8; data.len()];
    stream.read_exact(&mut back).expect("read the echo");
    sending.join().expect("writer");
    assert!(back == data, "the echo differs from what was sent");
}

/// Orders the connection on core `on` to the other one, streams a
/// quarter megabyte `pattern(i)` through it meanwhile, and waits until
/// the other core has taken `moved_in` in all: the core it is on now.
fn move_mid_stream(
    server: &ServerHandle,
    stream: &mut TcpStream,
    on: usize,
    i: usize,
    moved_in: u64,
) -> usize {
    let to = 1 - on;
    assert!(server.move_connections(on, to, 1));
    echo_all(stream, pattern(i, 256 * 1024));
    wait_until(
        Duration::from_secs(60),
        "the move to be counted",
        || server.stats(),
        |cores| cores[to].moved_in == moved_in,
    );
    to
}

/// Ends the client's side; the server must end its own cleanly, with no
/// byte more.
fn end_cleanly(stream: &mut TcpStream) {
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    assert_eq!(read_to_end(stream).expect("a clean end"), b"");
}

backend_tests! {
    /// One connection moved back and forth six times while a quarter
    /// megabyte streams through it each time: each move happens at the
    /// first read of the chunk, with what it read carried as unread bytes
    /// and the rest in the kernel's queue or on its way; every byte comes
    /// back once, in order.
    fn a_raw_handler_echoes_across_moves(backend) {
        let Some(server) = two_cores(backend, Duration::from_secs(10)) else { return };
        let mut stream = connect(server.local_addr());
        roundtrip(&mut stream, b"hello");
        let mut on = core_of_the_connection(&server);
        for i in 0..6 {
            on = move_mid_stream(&server, &mut stream, on, i, i as u64 / 2 + 1);
        }
        // The source counts its move out when it hears back, which may
        // come after the echo.
        let stats = wait_until(
            Duration::from_secs(60),
            "the moves out to be counted",
            || server.stats(),
            |cores| sum(cores, |s| s.moved_out) == 6 && cores[1 - on].active == 0,
        );
        assert_eq!(sum(&stats, |s| s.moved_in), 6);
        assert_eq!(sum(&stats, |s| s.moves_refused), 0);
        assert_eq!(sum(&stats, |s| s.accepted), 1, "moved, not accepted again");
        assert_eq!(stats[on].active, 1, "open on the core it moved to last");
        roundtrip(&mut stream, b"still here");
        end_cleanly(&mut stream);
        wait_until(
            Duration::from_secs(60),
            "the connection to close",
            || server.stats(),
            |cores| cores.iter().all(|c| c.active == 0),
        );
        server.shutdown();
        server.join().expect("join");
    }

    /// A connection metered by a [`MoveMeter`] that has not seen an
    /// interval of the policy (there is none) takes an operator's order
    /// all the same, there and back, and echoes every byte.
    fn a_metered_connection_takes_an_operators_order(backend) {
        let Some(server) = start(backend, Duration::from_secs(10), 10_000, false) else { return };
        let mut stream = connect(server.local_addr());
        roundtrip(&mut stream, b"hello");
        let first = core_of_the_connection(&server);
        let mut on = first;
        for i in 0..2 {
            on = move_mid_stream(&server, &mut stream, on, i, 1);
        }
        assert_eq!(on, first, "back where it opened");
        let stats = wait_until(
            Duration::from_secs(60),
            "the moves out to be counted",
            || server.stats(),
            |cores| sum(cores, |s| s.moved_out) == 2,
        );
        assert_eq!(sum(&stats, |s| s.moves_refused), 0);
        roundtrip(&mut stream, b"still here");
        end_cleanly(&mut stream);
        server.shutdown();
        server.join().expect("join");
    }

    /// A connection that streamed 64 KiB at once reads in bulk (io_uring
    /// arms a single-shot receive into a pool buffer ahead of its next
    /// read), and its peer, having sent it all, waits for the echo: the
    /// move ends that receive rather than wait for bytes that never
    /// come, and the echo comes back whole from the other core.
    fn a_bulk_reader_moves_while_its_peer_waits(backend) {
        let Some(server) = two_cores(backend, Duration::from_secs(10)) else { return };
        let mut stream = connect(server.local_addr());
        roundtrip(&mut stream, b"hello");
        let on = core_of_the_connection(&server);
        for i in 0..3 {
            echo_all(&mut stream, pattern(i, 64 * 1024));
        }
        assert!(server.move_connections(on, 1 - on, 1));
        echo_all(&mut stream, pattern(3, 64 * 1024));
        wait_until(
            Duration::from_secs(60),
            "the move to be counted",
            || server.stats(),
            |cores| cores[1 - on].moved_in == 1 && cores[on].moved_out == 1,
        );
        echo_all(&mut stream, pattern(4, 64 * 1024));
        end_cleanly(&mut stream);
        server.shutdown();
        server.join().expect("join");
    }

    /// Orders that cannot be carried out are refused or ignored: a bad
    /// index is refused, and a move to the connection's own core leaves
    /// it serving there.
    fn a_move_to_its_own_core_stays(backend) {
        let Some(server) = two_cores(backend, Duration::from_secs(10)) else { return };
        assert!(!server.move_connections(2, 0, 1));
        assert!(!server.move_connections(0, 7, 1));
        let mut stream = connect(server.local_addr());
        roundtrip(&mut stream, b"hello");
        let on = core_of_the_connection(&server);
        assert!(server.move_connections(on, on, 1));
        roundtrip(&mut stream, b"stays");
        roundtrip(&mut stream, b"stays again");
        let stats = server.stats();
        assert_eq!(sum(&stats, |s| s.moved_in), 0);
        assert_eq!(stats[on].active, 1);
        drop(stream);
        server.shutdown();
        server.join().expect("join");
    }

    /// A core at its connection limit refuses a connection moved to it:
    /// the connection stays, with the bytes read for the move given back
    /// to it, and goes on echoing where it was; the refusal is counted.
    fn a_move_to_a_full_core_stays(backend) {
        let Some(server) = limited(backend, Duration::from_secs(10), 1) else { return };
        let addr = server.local_addr();
        let mut first = connect(addr);
        roundtrip(&mut first, b"hello");
        let on = core_of_the_connection(&server);
        // One connection on the other core too: connections until the
        // hash puts one there (those it puts on the full core wait in its
        // backlog; 64 all there has a chance of 2^-64).
        let mut others = Vec::new();
        wait_until(
            Duration::from_secs(60),
            "a connection on the other core",
            || {
                if others.len() < 64 {
                    others.push(connect(addr));
                }
                server.stats()
            },
            |cores| cores[1 - on].active == 1,
        );
        assert!(server.move_connections(on, 1 - on, 1));
        roundtrip(&mut first, b"stays where it is");
        roundtrip(&mut first, b"and goes on");
        let stats = wait_until(
            Duration::from_secs(60),
            "the refusal to be counted",
            || server.stats(),
            |cores| cores[on].moves_refused == 1,
        );
        assert_eq!(sum(&stats, |s| s.moved_in), 0);
        assert_eq!(stats[on].active, 1);
        drop((first, others));
        server.shutdown();
        server.join().expect("join");
    }

    /// Eight connections stream while their cores are told to move them
    /// back and forth, and the server stops in the middle: a move to a
    /// stopping core comes back, a stopping core moves nothing out, and
    /// every client gets every byte it sent echoed, then a clean end.
    fn a_stop_during_moves_loses_nothing(backend) {
        let Some(server) = two_cores(backend, Duration::from_secs(60)) else { return };
        let addr = server.local_addr();
        let streams: Vec<TcpStream> = (0..8).map(|_| connect(addr)).collect();
        wait_until(
            Duration::from_secs(60),
            "the connections to be counted open",
            || server.stats(),
            |cores| cores.iter().map(|c| c.active).sum::<u64>() == 8,
        );
        let clients: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(id, mut stream)| {
                std::thread::spawn(move || {
                    for round in 0..64 {
                        echo_all(&mut stream, pattern(id * 64 + round, 32 * 1024));
                    }
                    stream.shutdown(std::net::Shutdown::Write).expect("shutdown");
                    read_to_end(&mut stream).expect("a clean end")
                })
            })
            .collect();
        // Orders back and forth, on until every client is done.
        let ordering = std::sync::atomic::AtomicBool::new(true);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut from = 0;
                while ordering.load(std::sync::atomic::Ordering::Relaxed) {
                    server.move_connections(from, 1 - from, 2);
                    from = 1 - from;
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
            wait_until(
                Duration::from_secs(60),
                "a few moves before the stop",
                || server.stats(),
                |cores| sum(cores, |s| s.moved_in) >= 4,
            );
            server.shutdown();
            for client in clients {
                assert_eq!(client.join().expect("client"), b"", "nothing after the echoes");
            }
            ordering.store(false, std::sync::atomic::Ordering::Relaxed);
        });
        let stats = server.stats();
        assert_eq!(sum(&stats, |s| s.moved_in), sum(&stats, |s| s.moved_out));
        println!(
            "moved {} times, {} refused",
            sum(&stats, |s| s.moved_in),
            sum(&stats, |s| s.moves_refused)
        );
        server.join().expect("join");
    }
}
