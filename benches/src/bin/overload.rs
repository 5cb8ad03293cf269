//! `overload`: one core offered far more requests than it can serve, with
//! and without shedding ([`Config::shed_queue_delay`]).
//!
//! A percore server on CPU 0 serves `GET /work`, which spins a fixed
//! amount of work (`--work` rounds of xorshift, about 100 µs here) before
//! its 200. A tokio client on CPU 1 keeps `--conns` connections asking
//! without pause (a closed loop, as wrk's: a shed request is asked again
//! at once, ignoring its `Retry-After`), reconnecting when an answer
//! closes its connection. Rows: unloaded (one connection), then
//! overloaded with shedding off and with each `--shed-ms` bound. For each:
//! served and shed requests per second, and the served requests' p50 and
//! p99 latency (from the request's write to its whole answer) with the
//! p99 ÷ the unloaded p99. Measured over `--secs` after a second of
//! warm-up; each row on a server of its own.
//!
//! `OVERLOAD_STATS=1` prints each row's server core stats to stderr.
//!
//! ```text
//! overload [--secs 5] [--conns 1000] [--work 100000] [--shed-ms 0.5,1,5]
//!          [--backend uring|epoll] [--port 18460]
//! ```

use std::cell::RefCell;
use std::hint::black_box;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use percore::{Backend, Server, ServerHandle};
use percore_handlers::http::{Config, HttpHandler, Request, Response, Service};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `GET /work`: a fixed amount of CPU work, then 200.
struct Work(u64);

impl Service for Work {
    async fn call(&self, _: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let mut x = black_box(0x9E37_79B9_7F4A_7C15u64);
        for _ in 0..self.0 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        res.send(
            200,
            Some(b"text/plain"),
            if black_box(x) == 0 { b"0" } else { b"1" },
        )?;
        Ok(())
    }
}

struct Options {
    secs: u64,
    conns: usize,
    work: u64,
    shed_ms: Vec<f64>,
    backend: Backend,
    port: u16,
}

fn options() -> Options {
    let mut o = Options {
        secs: 5,
        conns: 1000,
        work: 100_000,
        shed_ms: vec![1.0, 5.0],
        backend: Backend::Uring,
        port: 18460,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--secs" => o.secs = value.parse().expect("--secs N"),
            "--conns" => o.conns = value.parse().expect("--conns N"),
            "--work" => o.work = value.parse().expect("--work N"),
            "--backend" => o.backend = value.parse().expect("--backend uring|epoll"),
            "--port" => o.port = value.parse().expect("--port N"),
            "--shed-ms" => {
                o.shed_ms = value
                    .split(',')
                    .map(|v| {
                        v.parse()
                            .expect("--shed-ms N[,N...] (milliseconds, 0.5 allowed)")
                    })
                    .collect()
            }
            other => panic!("unknown option {other}"),
        }
    }
    o
}

fn start(o: &Options, shed: Option<Duration>) -> ServerHandle {
    let (work, mut config) = (o.work, Config::default());
    config.shed_queue_delay = shed;
    config.max_requests = u32::MAX;
    Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], o.port)))
        .cores([0])
        .backend(o.backend)
        // Overloaded turns run long by design: no stall reports.
        .stall_threshold(None)
        .start(move |_| HttpHandler::with_config(Work(work), config))
        .expect("start")
}

/// What the clients saw in the measured window.
struct Tally {
    served: Histogram<u64>,
    shed: u64,
    failed: u64,
}

/// One closed-loop client on `addr` until `end`, counting from `from`.
async fn client(addr: SocketAddr, tally: Rc<RefCell<Tally>>, from: Instant, end: Instant) {
    const GET: &[u8] = b"GET /work HTTP/1.1\r\nHost: bench\r\n\r\n";
    let mut stream: Option<TcpStream> = None;
    let mut buf = vec![0u8; 4096];
    while Instant::now() < end {
        let conn = match &mut stream {
            Some(conn) => conn,
            None => match TcpStream::connect(addr).await {
                Ok(conn) => {
                    let _ = conn.set_nodelay(true);
                    stream.insert(conn)
                }
                Err(_) => {
                    tally.borrow_mut().failed += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let sent = Instant::now();
        let (status, closes) = match exchange(conn, GET, &mut buf).await {
            Ok(answer) => answer,
            Err(_) => {
                stream = None;
                if sent >= from {
                    tally.borrow_mut().failed += 1;
                }
                continue;
            }
        };
        if closes {
            stream = None;
        }
        if sent < from {
            continue;
        }
        let mut t = tally.borrow_mut();
        if status == 200 {
            let _ = t.served.record((sent.elapsed().as_micros() as u64).max(1));
        } else {
            t.shed += 1;
        }
    }
}

/// Sends one GET and reads its answer: the status, and whether the
/// server closes the connection after it.
async fn exchange(conn: &mut TcpStream, get: &[u8], buf: &mut [u8]) -> io::Result<(u16, bool)> {
    conn.write_all(get).await?;
    let mut have = 0;
    loop {
        let n = conn.read(&mut buf[have..]).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        have += n;
        let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = std::str::from_utf8(&buf[..end]).map_err(|_| io::ErrorKind::InvalidData)?;
        let status: u16 = head
            .get(9..12)
            .and_then(|s| s.parse().ok())
            .ok_or(io::ErrorKind::InvalidData)?;
        let closes = head.to_ascii_lowercase().contains("\r\nconnection: close");
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut rest = (end + 4 + length).saturating_sub(have);
        while rest > 0 {
            let n = conn.read(&mut buf[..rest.min(4096)]).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            rest -= n;
        }
        return Ok((status, closes));
    }
}

/// Runs `conns` clients against a server started with `shed`: (served/s,
/// shed/s, failed, p50 µs, p99 µs).
fn row(o: &Options, conns: usize, shed: Option<Duration>) -> (f64, f64, u64, u64, u64) {
    let server = start(o, shed);
    let addr = server.local_addr();
    let (secs, tally) = (
        o.secs,
        Tally {
            served: Histogram::new(3).expect("histogram"),
            shed: 0,
            failed: 0,
        },
    );
    let tally = thread::spawn(move || {
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        let tally = Rc::new(RefCell::new(tally));
        let from = Instant::now() + Duration::from_secs(1);
        let end = from + Duration::from_secs(secs);
        local.block_on(&rt, async {
            let tasks: Vec<_> = (0..conns)
                .map(|_| tokio::task::spawn_local(client(addr, tally.clone(), from, end)))
                .collect();
            for task in tasks {
                task.await.expect("client task");
            }
        });
        Rc::try_unwrap(tally).ok().expect("tasks done").into_inner()
    })
    .join()
    .expect("client thread");
    if std::env::var("OVERLOAD_STATS").is_ok_and(|v| v == "1") {
        for c in server.stats() {
            eprintln!("{c}");
        }
    }
    server.shutdown();
    server.join().expect("join");
    let s = secs as f64;
    let h = &tally.served;
    (
        h.len() as f64 / s,
        tally.shed as f64 / s,
        tally.failed,
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
    )
}

fn main() {
    let o = options();
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
    println!(
        "backend {}, one core (CPU 0), GET /work of {} rounds, client on CPU 1, {} s per row",
        o.backend, o.work, o.secs
    );
    println!(
        "{:<22} {:>6} {:>10} {:>10} {:>7} {:>9} {:>9} {:>10}",
        "mode", "conns", "served/s", "shed/s", "failed", "p50 µs", "p99 µs", "p99÷base"
    );
    let mut rows: Vec<(String, usize, Option<Duration>)> = vec![
        ("unloaded".into(), 1, None),
        ("overload, no shedding".into(), o.conns, None),
    ];
    for &ms in &o.shed_ms {
        let bound = Some(Duration::from_secs_f64(ms / 1000.0));
        rows.push((format!("overload, shed at {ms} ms"), o.conns, bound));
    }
    let mut base = None;
    for (name, conns, shed) in rows {
        let (served, shed_rate, failed, p50, p99) = row(&o, conns, shed);
        let base_p99 = *base.get_or_insert(p99.max(1));
        println!(
            "{name:<22} {conns:>6} {served:>10.0} {shed_rate:>10.0} {failed:>7} {p50:>9} {p99:>9} {:>10.1}",
            p99 as f64 / base_p99 as f64
        );
    }
}
