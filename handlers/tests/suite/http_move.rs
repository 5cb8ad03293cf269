//! FAULTS N3, in the HTTP layer: a kept-alive HTTP/1.1 connection, plain
//! or TLS, moves to another core at a request boundary when its core is
//! ordered to move one, and goes on there: every request answered once,
//! in order, byte for byte, including requests pipelined behind the
//! last one answered before the move; the request count travels (the
//! per-connection request limit holds across the move), and both cores
//! count the requests they served and the move.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percore::tls::{self, rustls};
use percore::{MovePolicy, Server, ServerHandle};
use percore_handlers::http::{Config, HttpHandler, Request, Response, Service};
use percore_test_kit::http::{get, Client};
use percore_test_kit::*;

/// Set by `/gate…` once it is being served.
static ENTERED: AtomicBool = AtomicBool::new(false);
/// What `/gate…` waits for before it answers.
static OPEN: AtomicBool = AtomicBool::new(false);

/// Answers each request with its path and the core that served it.
/// `/gate…` first waits for the test to open the gate: requests the
/// client pipelines meanwhile are not in the read being served, and wait
/// in the kernel when the connection moves at the boundary after it.
struct WhereAmI;

impl Service for WhereAmI {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        if req.path().starts_with("/gate") {
            ENTERED.store(true, Ordering::SeqCst);
            while !OPEN.load(Ordering::SeqCst) {
                percore::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let body = format!("{} on {}", req.path(), percore::core_index());
        res.send(200, None, body.as_bytes())?;
        Ok(())
    }
}

/// A two-core server of [`WhereAmI`], TLS with `tls`; `None` (skipped)
/// on a machine with one CPU.
fn two_cores(
    backend: Backend,
    config: Config,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> Option<ServerHandle> {
    moving_cores(backend, config, tls, None)
}

/// [`two_cores`], with the moving policy `policy` on.
fn moving_cores(
    backend: Backend,
    config: Config,
    tls: Option<Arc<rustls::ServerConfig>>,
    policy: Option<MovePolicy>,
) -> Option<ServerHandle> {
    let cores: Vec<usize> = percore::runtime::cpus::available()
        .into_iter()
        .take(2)
        .collect();
    if cores.len() < 2 {
        println!("skipped: needs two CPUs");
        return None;
    }
    let mut builder = Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores(cores)
        .backend(backend)
        .stall_threshold(None);
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    if let Some(policy) = policy {
        builder = builder.move_connections(policy);
    }
    let server = builder
        .start(move |_| HttpHandler::with_config(WhereAmI, config))
        .expect("start");
    check_backend(&server, backend);
    Some(server)
}

/// The body `WhereAmI` answers `path` with on core `core`.
fn on(path: &str, core: usize) -> Vec<u8> {
    format!("{path} on {core}").into_bytes()
}

/// The core that answered: the digit after " on ".
fn core_in(body: &[u8]) -> usize {
    let text = String::from_utf8_lossy(body);
    let (_, core) = text.rsplit_once(" on ").expect("a core in the body");
    core.parse().expect("a core index")
}

/// Sends `/gate{tag}` with `send`, then, once it is being served, the
/// `batch` behind it and the order to move from `from`; then opens the
/// gate.
fn through_the_gate(
    server: &ServerHandle,
    from: usize,
    send: &mut dyn FnMut(&[u8]),
    tag: &str,
    batch: &[u8],
) {
    ENTERED.store(false, Ordering::SeqCst);
    OPEN.store(false, Ordering::SeqCst);
    send(&get(&format!("/gate{tag}")));
    wait_until(
        Duration::from_secs(60),
        "the gate to be entered",
        || ENTERED.load(Ordering::SeqCst),
        |entered| *entered,
    );
    send(batch);
    assert!(server.move_connections(from, 1 - from, 1));
    OPEN.store(true, Ordering::SeqCst);
}

fn wait_moved(server: &ServerHandle, to: usize, count: u64) {
    wait_until(
        Duration::from_secs(60),
        "the move to be counted",
        || server.stats(),
        |cores| cores[to].moved_in == count,
    );
}

type TlsClient = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn tls_connect(addr: SocketAddr, ca: &std::path::Path) -> TlsClient {
    let config: Arc<rustls::ClientConfig> = tls::client_config(ca).expect("client config");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(config, name).expect("client");
    rustls::StreamOwned::new(conn, connect(addr))
}

/// Reads `n` responses of `WhereAmI` (their bodies) off a TLS client.
fn tls_bodies(client: &mut TlsClient, n: usize) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    let mut bodies = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while bodies.len() < n {
        if let Some((body, used)) = one_response(&buf) {
            bodies.push(body);
            buf.drain(..used);
            continue;
        }
        let got = client.read(&mut chunk).expect("read a response");
        assert!(got > 0, "closed after {} responses", bodies.len());
        buf.extend_from_slice(&chunk[..got]);
    }
    assert!(buf.is_empty(), "bytes after the last response");
    bodies
}

/// The body of the complete response at the start of `buf` (a
/// `Content-Length` one, as `WhereAmI` sends), and its length.
fn one_response(buf: &[u8]) -> Option<(Vec<u8>, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 "), "{head}");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .expect("a length")
        .trim()
        .parse()
        .expect("numeric");
    let body = buf.get(end..end + len)?;
    Some((body.to_vec(), end + len))
}

backend_tests! {
    /// A kept-alive connection ordered to move: it moves at its next
    /// request boundary (after the answer it was writing, or the next
    /// one), so the request after next is answered on the other core;
    /// back and forth four times. The requests are counted on both cores,
    /// and the connection on the core it moved to last.
    fn a_kept_alive_connection_moves(backend) {
        let Some(server) = two_cores(backend, Config::default(), None) else { return };
        let mut client = Client::connect(server.local_addr());
        let first = client.roundtrip(&get("/0"));
        let mut here = core_in(&first.body);
        for i in 1..=4u64 {
            let to = 1 - here;
            assert!(server.move_connections(here, to, 1));
            let path = format!("/{i}");
            let body = client.roundtrip(&get(&path)).body;
            assert!(body == on(&path, here) || body == on(&path, to), "{body:?}");
            wait_moved(&server, to, i.div_ceil(2));
            let path = format!("/{i}b");
            assert_eq!(client.roundtrip(&get(&path)).body, on(&path, to), "answered after it");
            here = to;
        }
        let stats = server.stats();
        assert!(stats.iter().all(|s| s.requests >= 2), "both cores served: {stats:?}");
        assert_eq!(sum(&stats, |s| s.requests), 9);
        assert_eq!(stats[here].active, 1);
        wait_until(
            Duration::from_secs(60),
            "the moves out to be counted",
            || server.stats(),
            |cores| sum(cores, |s| s.moved_out) == 4,
        );
        server.shutdown();
        server.join().expect("join");
    }

    /// Requests pipelined behind one being served when the move is
    /// ordered: they are not in the read being served, so they wait in
    /// the kernel (in the receive's queue on io_uring, in the socket on
    /// epoll) and travel with the connection; each is answered once, in
    /// order, on the other core.
    fn pipelined_requests_cross_the_move(backend) {
        let Some(server) = two_cores(backend, Config::default(), None) else { return };
        let mut client = Client::connect(server.local_addr());
        let here = core_in(&client.roundtrip(&get("/0")).body);
        let mut batch = Vec::new();
        for i in 0..20 {
            batch.extend_from_slice(&get(&format!("/p{i}")));
        }
        through_the_gate(&server, here, &mut |bytes| {
            client.send(bytes);
        }, "", &batch);
        assert_eq!(client.response().body, on("/gate", here));
        for i in 0..20 {
            let path = format!("/p{i}");
            assert_eq!(client.response().body, on(&path, 1 - here), "once, in order");
        }
        let stats = server.stats();
        assert_eq!(sum(&stats, |s| s.requests), 22, "each answered once");
        assert_eq!(stats[1 - here].requests, 20);
        server.shutdown();
        server.join().expect("join");
    }

    /// The request limit counts across a move: with four requests per
    /// connection, the fourth, served on the other core, is answered
    /// with `Connection: close`.
    fn the_request_limit_travels(backend) {
        let mut config = Config::default();
        config.max_requests = 4;
        let Some(server) = two_cores(backend, config, None) else { return };
        let mut client = Client::connect(server.local_addr());
        let here = core_in(&client.roundtrip(&get("/1")).body);
        assert!(server.move_connections(here, 1 - here, 1));
        assert!(!client.roundtrip(&get("/2")).closes());
        wait_moved(&server, 1 - here, 1);
        let third = client.roundtrip(&get("/3"));
        assert_eq!(third.body, on("/3", 1 - here));
        assert!(!third.closes());
        let fourth = client.roundtrip(&get("/4"));
        assert!(fourth.closes(), "the fourth of four closes: {:?}", fourth.headers);
        client.expect_eof();
        server.shutdown();
        server.join().expect("join");
    }

    /// A moved connection is no new one: its idle timeout (a minute),
    /// not the head timeout of a new connection (a fifth of a second),
    /// bounds the wait for its next request on the other core.
    fn a_moved_connection_keeps_its_idle_timeout(backend) {
        let mut config = Config::default();
        config.head_timeout = Duration::from_millis(200);
        config.idle_timeout = Duration::from_secs(60);
        let Some(server) = two_cores(backend, config, None) else { return };
        let mut client = Client::connect(server.local_addr());
        let here = core_in(&client.roundtrip(&get("/1")).body);
        // Ordered while `/gate` is served: it moves right after it.
        through_the_gate(&server, here, &mut |bytes| {
            client.send(bytes);
        }, "", b"");
        assert_eq!(client.response().body, on("/gate", here));
        wait_moved(&server, 1 - here, 1);
        // Idle for five head timeouts: a new connection would be closed.
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(client.roundtrip(&get("/3")).body, on("/3", 1 - here));
        server.shutdown();
        server.join().expect("join");
    }

    /// Over TLS: the session moves with the connection, with the
    /// records of pipelined requests received by the kernel and not yet
    /// decrypted; each request is answered once, in order, on the other
    /// core; three times, back and forth.
    fn a_tls_connection_moves_with_its_session(backend) {
        let Some(cert) = TestCert::new(&format!("http-move-{backend}")) else { return };
        let config = tls::server_config(&cert.cert, &cert.key).expect("server config");
        let Some(server) = two_cores(backend, Config::default(), Some(config)) else { return };
        let mut client = tls_connect(server.local_addr(), &cert.ca);
        client.write_all(&get("/0")).expect("write");
        let mut here = core_in(&tls_bodies(&mut client, 1)[0]);
        for round in 0..3 {
            let mut batch = Vec::new();
            for i in 0..10 {
                batch.extend_from_slice(&get(&format!("/r{round}p{i}")));
            }
            let tag = round.to_string();
            let mut send = |bytes: &[u8]| client.write_all(bytes).expect("write");
            through_the_gate(&server, here, &mut send, &tag, &batch);
            let bodies = tls_bodies(&mut client, 11);
            assert_eq!(bodies[0], on(&format!("/gate{round}"), here));
            for (i, body) in bodies[1..].iter().enumerate() {
                let path = format!("/r{round}p{i}");
                assert_eq!(*body, on(&path, 1 - here), "once, in order");
            }
            here = 1 - here;
        }
        let stats = server.stats();
        assert_eq!(sum(&stats, |s| s.moved_in), 3);
        assert_eq!(sum(&stats, |s| s.requests), 34);
        assert_eq!(sum(&stats, |s| s.tls_handshakes), 1, "no second handshake");
        server.shutdown();
        server.join().expect("join");
    }

    /// The policy, not an order: busy connections all on one core (those
    /// of a dozen that the hash put on core 0) make it hot while core 1
    /// idles, and it moves some of them there; the requests of every
    /// connection are answered once, in order, and both cores count
    /// requests. What the test waits for is a count of moves, not a time.
    fn the_policy_moves_busy_connections(backend) {
        let policy = MovePolicy::default()
            .interval(Duration::from_millis(100))
            .margin(0.05)
            .per_interval(2);
        // As many requests per connection as the wait for the moves
        // takes, on a loaded machine.
        let mut config = Config::default();
        config.max_requests = u32::MAX;
        let Some(server) = moving_cores(backend, config, None, Some(policy)) else {
            return;
        };
        let addr = server.local_addr();
        let mut busy = Vec::new();
        while busy.len() < 4 {
            let mut client = Client::connect(addr);
            if core_in(&client.roundtrip(&get("/hello")).body) == 0 {
                busy.push(client);
            }
        }
        let moved = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for (id, mut client) in busy.into_iter().enumerate() {
                let moved = &moved;
                scope.spawn(move || {
                    let mut n = 0u64;
                    // Busy until the moves are counted, and some after.
                    let mut after = 0;
                    while after < 200 {
                        let path = format!("/c{id}/{n}");
                        let body = client.roundtrip(&get(&path)).body;
                        assert_eq!(&body[..body.len() - 5], path.as_bytes(), "once, in order");
                        n += 1;
                        if moved.load(std::sync::atomic::Ordering::Relaxed) {
                            after += 1;
                        }
                    }
                });
            }
            wait_until(
                Duration::from_secs(60),
                "the policy to move a connection to core 1",
                || server.stats(),
                |cores| cores[1].moved_in > 0,
            );
            moved.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let stats = wait_until(
            Duration::from_secs(60),
            "core 0 to count its moves out",
            || server.stats(),
            |cores| cores[0].moved_out > 0,
        );
        assert!(stats[1].requests > 0, "core 1 served some: {stats:?}");
        println!(
            "moves: {:?} in, {:?} out; requests {:?}",
            stats.iter().map(|s| s.moved_in).collect::<Vec<_>>(),
            stats.iter().map(|s| s.moved_out).collect::<Vec<_>>(),
            stats.iter().map(|s| s.requests).collect::<Vec<_>>()
        );
        server.shutdown();
        server.join().expect("join");
    }
}
