//! `steer_skew`: a skewed load on a two-core echo server, placed by the
//! kernel's `SO_REUSEPORT` hash, by steering ([`Steering::Load`]), and
//! by the hash with live connections moved ([`MovePolicy`]), alternated
//! in one run.
//!
//! A few heavy connections (ping-pong of 64 bytes as fast as they can)
//! come from local ports the hash puts on core 0, opened 300 ms apart, so
//! that steering sees the load of the ones before; a dozen light ones
//! (one round trip each every millisecond, round robin) from any port.
//! Measured over `--secs` once all are open: each core's CPU time (the
//! max ÷ mean of the two: 1.0 is even, 2.0 is one core doing all) and
//! the round trips per second, and the connections moved. Steering
//! places connections when they open; moving (the `move` mode) takes
//! open ones from a hot core to an idle one at a boundary between two
//! echoes.
//!
//! ```text
//! steer_skew [--runs 2] [--secs 3] [--heavy 4] [--backend uring|epoll]
//! ```

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use percore::{
    move_connection, move_wanted, Backend, Connection, Handler, MoveOutcome, MovePolicy,
    MovedState, Server, ServerHandle, Steering,
};
use percore_test_kit::connect_from;

/// Tells the client its core's index, then echoes; moves its connection
/// when its core asks (only the `move` mode's policy does), between a
/// read and its echo.
struct CoreTag(u8);

impl Handler for CoreTag {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let (res, _) = conn.write_all(vec![self.0]).await;
        res?;
        echo(conn).await
    }

    async fn serve_moved(&self, conn: Connection, _: MovedState) -> std::io::Result<()> {
        echo(conn).await
    }
}

async fn echo(mut conn: Connection) -> std::io::Result<()> {
    while let Some(buf) = conn.read().await? {
        if let Some(core) = move_wanted() {
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

/// How connections are placed.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Hash,
    Steer,
    Move,
}

struct Options {
    runs: usize,
    secs: u64,
    heavy: usize,
    backend: Backend,
}

fn options() -> Options {
    let mut o = Options {
        runs: 2,
        secs: 3,
        heavy: 4,
        backend: Backend::Uring,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--runs" => o.runs = value.parse().expect("--runs N"),
            "--secs" => o.secs = value.parse().expect("--secs N"),
            "--heavy" => o.heavy = value.parse().expect("--heavy N"),
            "--backend" => o.backend = value.parse().expect("--backend uring|epoll"),
            other => panic!("unknown option {other}"),
        }
    }
    o
}

fn start(addr: SocketAddr, backend: Backend, mode: Mode) -> ServerHandle {
    let mut builder = Server::builder()
        .address(addr)
        .cores([0, 1])
        .backend(backend)
        .steering(if mode == Mode::Steer {
            Steering::Load
        } else {
            Steering::Off
        })
        .stall_threshold(None);
    if mode == Mode::Move {
        builder = builder.move_connections(MovePolicy::default());
    }
    builder
        .start(|core| CoreTag(core.index as u8))
        .expect("start")
}

fn tagged(mut stream: TcpStream) -> (TcpStream, u8) {
    stream.set_nodelay(true).expect("nodelay");
    let mut tag = [0u8; 1];
    stream.read_exact(&mut tag).expect("tag");
    (stream, tag[0])
}

fn round_trip(stream: &mut TcpStream, buf: &mut [u8; 64]) {
    stream.write_all(buf).expect("write");
    stream.read_exact(buf).expect("read");
}

/// One measured run: (max ÷ mean CPU, round trips/s, the heavy ones'
/// cores).
fn run(server: &ServerHandle, ports: &[u16], secs: u64) -> (f64, f64, Vec<u8>) {
    let addr = server.local_addr();
    let stop = AtomicBool::new(false);
    let trips = AtomicU64::new(0);
    let mut light: Vec<TcpStream> = (0..12)
        .map(|_| tagged(TcpStream::connect(addr).expect("connect")).0)
        .collect();
    thread::scope(|s| {
        s.spawn(|| {
            let mut buf = [7u8; 64];
            while !stop.load(Relaxed) {
                for c in &mut light {
                    round_trip(c, &mut buf);
                    trips.fetch_add(1, Relaxed);
                }
                thread::sleep(Duration::from_millis(1));
            }
        });
        let mut cores = Vec::new();
        for &port in ports {
            let from = SocketAddr::from(([127, 0, 0, 1], port));
            let (mut stream, core) = tagged(connect_from(from, addr).expect("connect_from"));
            cores.push(core);
            let (stop, trips) = (&stop, &trips);
            s.spawn(move || {
                let mut buf = [9u8; 64];
                while !stop.load(Relaxed) {
                    round_trip(&mut stream, &mut buf);
                    trips.fetch_add(1, Relaxed);
                }
                percore_test_kit::reset(stream);
            });
            thread::sleep(Duration::from_millis(300));
        }
        let (cpu0, trips0, t0) = (cpu(server), trips.load(Relaxed), Instant::now());
        thread::sleep(Duration::from_secs(secs));
        let (cpu1, trips1, elapsed) = (cpu(server), trips.load(Relaxed), t0.elapsed());
        stop.store(true, Relaxed);
        let busy: Vec<f64> = cpu0.iter().zip(&cpu1).map(|(a, b)| b - a).collect();
        let mean = busy.iter().sum::<f64>() / busy.len() as f64;
        let max = busy.iter().cloned().fold(0.0, f64::max);
        let rate = (trips1 - trips0) as f64 / elapsed.as_secs_f64();
        (max / mean, rate, cores)
    })
}

/// Each core's CPU seconds so far.
fn cpu(server: &ServerHandle) -> Vec<f64> {
    server
        .stats()
        .iter()
        .map(|c| c.cpu_time.as_secs_f64())
        .collect()
}

fn main() {
    let o = options();
    // Ports the hash puts on core 0 of a two-core server on this port.
    let probe = start(SocketAddr::from(([127, 0, 0, 1], 0)), o.backend, Mode::Hash);
    let addr = probe.local_addr();
    let mut ports = HashSet::new();
    while ports.len() < o.heavy {
        let (stream, core) = tagged(TcpStream::connect(addr).expect("connect"));
        if core == 0 {
            ports.insert(stream.local_addr().expect("local").port());
        }
        percore_test_kit::reset(stream);
    }
    let ports: Vec<u16> = ports.into_iter().collect();
    probe.shutdown();
    probe.join().expect("join");
    println!(
        "backend {}, {} heavy connections hashed to core 0, 12 light, {} s per run",
        o.backend, o.heavy, o.secs
    );
    println!(
        "{:<8} {:>4} {:>14} {:>12} {:>6}  heavy opened on cores",
        "mode", "run", "cpu max/mean", "trips/s", "moves"
    );
    for round in 0..o.runs {
        for mode in [Mode::Hash, Mode::Steer, Mode::Move] {
            let server = start(addr, o.backend, mode);
            thread::sleep(Duration::from_millis(300));
            let (skew, rate, cores) = run(&server, &ports, o.secs);
            let name = match mode {
                Mode::Hash => "hash",
                Mode::Steer => "steer",
                Mode::Move => "move",
            };
            let moves: u64 = server.stats().iter().map(|c| c.moved_in).sum();
            println!("{name:<8} {round:>4} {skew:>14.2} {rate:>12.0} {moves:>6}  {cores:?}");
            server.shutdown();
            server.join().expect("join");
        }
    }
}
