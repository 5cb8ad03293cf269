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
//! open ones from a hot core to an idle one at a boundary between a read
//! and its echo.
//!
//! Beside percore, the same clients against tokio's echo servers on the
//! same two CPUs: `tokio-ct`, a current-thread runtime per CPU each with
//! its listener in one `SO_REUSEPORT` group (the hash places connections
//! as it does percore's, and nothing moves them), and `tokio-mt`, the
//! multi-thread runtime with two workers on one listener (work stealing).
//! Their per-core CPU is each runtime's (each worker's) thread time; they
//! send no core tag, so where their heavy connections ran is not shown.
//!
//! ```text
//! steer_skew [--runs 2] [--secs 3] [--heavy 4] [--backend uring|epoll]
//!            [--modes hash,steer,move,tokio-ct,tokio-mt]
//! ```

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use percore::{
    move_connection, Backend, Connection, Handler, MoveMeter, MoveOutcome, MovePolicy, MovedState,
    Server, ServerHandle, Steering,
};
use percore_benches::server::{ServerControl, Service, Supplies};
use percore_benches::target::Target;
use percore_benches::{sys, tokio_servers};
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
    // Its round trips per interval: the policy's budget moves the
    // connections that fit it, heavy or light.
    let mut meter = MoveMeter::new();
    while let Some(buf) = conn.read().await? {
        if let Some(core) = meter.move_wanted() {
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

struct Options {
    runs: usize,
    secs: u64,
    heavy: usize,
    backend: Backend,
    modes: Vec<String>,
}

/// The modes a run alternates, in this order.
const MODES: [&str; 5] = ["hash", "steer", "move", "tokio-ct", "tokio-mt"];

fn options() -> Options {
    let mut o = Options {
        runs: 2,
        secs: 3,
        heavy: 4,
        backend: Backend::Uring,
        modes: MODES.iter().map(|m| m.to_string()).collect(),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--runs" => o.runs = value.parse().expect("--runs N"),
            "--secs" => o.secs = value.parse().expect("--secs N"),
            "--heavy" => o.heavy = value.parse().expect("--heavy N"),
            "--backend" => o.backend = value.parse().expect("--backend uring|epoll"),
            "--modes" => {
                o.modes = value.split(',').map(str::to_string).collect();
                if let Some(m) = o.modes.iter().find(|m| !MODES.contains(&m.as_str())) {
                    panic!("unknown mode {m}: {}", MODES.join(", "));
                }
            }
            other => panic!("unknown option {other}"),
        }
    }
    o
}

/// A server under the skewed load.
enum Subject {
    Percore(ServerHandle),
    /// A tokio server of this process, with its runtimes' threads.
    Tokio(Box<dyn ServerControl>, Vec<u32>),
}

impl Subject {
    fn start(mode: &str, addr: SocketAddr, backend: Backend) -> Subject {
        let (cpus, none) = ([0, 1], Supplies::default());
        let (control, prefix) = match mode {
            "hash" | "steer" | "move" => return Subject::Percore(start(addr, backend, mode)),
            "tokio-ct" => (
                tokio_servers::start_ct_at(addr, Service::Echo, &cpus, &none),
                "tokio-ct",
            ),
            _ => (
                tokio_servers::start_mt(Service::Echo, &Target::Tcp(addr), &cpus, &none),
                "tokio-mt",
            ),
        };
        let control = control.expect("start the tokio server");
        // Its threads name themselves a moment after the start.
        let mut tids = Vec::new();
        for _ in 0..100 {
            tids = sys::threads_named(prefix).expect("list threads");
            if tids.len() >= 2 {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(tids.len(), 2, "two {prefix} threads");
        Subject::Tokio(control, tids)
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Subject::Percore(server) => server.local_addr(),
            Subject::Tokio(control, _) => control.target().tcp().expect("a TCP server"),
        }
    }

    /// Whether it tells each connection its core first.
    fn tags(&self) -> bool {
        matches!(self, Subject::Percore(_))
    }

    /// Connections moved between cores so far (`None`: no moves here).
    fn moves(&self) -> Option<u64> {
        match self {
            Subject::Percore(server) => Some(server.stats().iter().map(|c| c.moved_in).sum()),
            Subject::Tokio(..) => None,
        }
    }

    /// Each core's CPU seconds so far.
    fn cpu(&self) -> Vec<f64> {
        match self {
            Subject::Percore(server) => cpu(server),
            Subject::Tokio(_, tids) => tids
                .iter()
                .map(|&t| sys::thread_cpu_ns(t).unwrap_or(0) as f64 / 1e9)
                .collect(),
        }
    }

    fn stop(self) {
        match self {
            Subject::Percore(server) => {
                server.shutdown();
                server.join().expect("join");
            }
            Subject::Tokio(control, _) => control.stop().expect("stop the tokio server"),
        }
    }
}

/// A percore server in `mode`: `hash`, `steer` or `move`.
fn start(addr: SocketAddr, backend: Backend, mode: &str) -> ServerHandle {
    let mut builder = Server::builder()
        .address(addr)
        .cores([0, 1])
        .backend(backend)
        .steering(if mode == "steer" {
            Steering::Load
        } else {
            Steering::Off
        })
        .stall_threshold(None);
    if mode == "move" {
        builder = builder.move_connections(MovePolicy::default());
    }
    builder
        .start(|core| CoreTag(core.index as u8))
        .expect("start")
}

/// `stream` and the core it landed on, which `tags` servers say first
/// (`u8::MAX` for the others).
fn tagged(mut stream: TcpStream, tags: bool) -> (TcpStream, u8) {
    stream.set_nodelay(true).expect("nodelay");
    let mut tag = [u8::MAX; 1];
    if tags {
        stream.read_exact(&mut tag).expect("tag");
    }
    (stream, tag[0])
}

fn round_trip(stream: &mut TcpStream, buf: &mut [u8; 64]) {
    stream.write_all(buf).expect("write");
    stream.read_exact(buf).expect("read");
}

/// One measured run: (max ÷ mean CPU, round trips/s, the heavy ones'
/// cores).
fn run(server: &Subject, ports: &[u16], heavy: usize, secs: u64) -> (f64, f64, Vec<u8>) {
    let (addr, tags) = (server.addr(), server.tags());
    let stop = AtomicBool::new(false);
    let trips = AtomicU64::new(0);
    let mut light: Vec<TcpStream> = (0..12)
        .map(|_| tagged(TcpStream::connect(addr).expect("connect"), tags).0)
        .collect();
    let measured = thread::scope(|s| {
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
        let mut free = ports.iter().filter_map(|&port| {
            let from = SocketAddr::from(([127, 0, 0, 1], port));
            match connect_from(from, addr) {
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => None,
                connected => Some(connected.expect("connect_from")),
            }
        });
        for _ in 0..heavy {
            let stream = free.next().expect("a free port hashed to core 0");
            let (mut stream, core) = tagged(stream, tags);
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
        let (cpu0, trips0, t0) = (server.cpu(), trips.load(Relaxed), Instant::now());
        thread::sleep(Duration::from_secs(secs));
        let (cpu1, trips1, elapsed) = (server.cpu(), trips.load(Relaxed), t0.elapsed());
        stop.store(true, Relaxed);
        let busy: Vec<f64> = cpu0.iter().zip(&cpu1).map(|(a, b)| b - a).collect();
        let mean = busy.iter().sum::<f64>() / busy.len() as f64;
        let max = busy.iter().cloned().fold(0.0, f64::max);
        let rate = (trips1 - trips0) as f64 / elapsed.as_secs_f64();
        (max / mean, rate, cores)
    });
    // Reset, not closed: a close would leave their ports in TIME_WAIT,
    // and the next run's heavy connections may need one of them.
    for c in light {
        percore_test_kit::reset(c);
    }
    measured
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
    let probe = start(SocketAddr::from(([127, 0, 0, 1], 0)), o.backend, "hash");
    let addr = probe.local_addr();
    // Spares: a port may still be held when a run wants it (a light
    // connection's ephemeral port, say), and a run then takes the next.
    let mut ports = HashSet::new();
    while ports.len() < o.heavy * 8 {
        let (stream, core) = tagged(TcpStream::connect(addr).expect("connect"), true);
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
        for name in &o.modes {
            let server = Subject::start(name, addr, o.backend);
            thread::sleep(Duration::from_millis(300));
            let (skew, rate, cores) = run(&server, &ports, o.heavy, o.secs);
            let cores = if server.tags() {
                format!("{cores:?}")
            } else {
                "-".to_string()
            };
            let moves = server.moves().map_or("-".to_string(), |n| n.to_string());
            println!("{name:<8} {round:>4} {skew:>14.2} {rate:>12.0} {moves:>6}  {cores}");
            server.stop();
        }
    }
}
