//! Replacing a running server without refusing a connection
//! ([`ServerBuilder::take_over`]), on both backends: the new server joins
//! the old one's port, clients connecting in a loop are served throughout,
//! and the old one stops. FAULTS E4's window (connections queued in a
//! listener that closes) is closed by the kernel's hand-over when
//! `net.ipv4.tcp_migrate_req` is 1, and counted when it is 0; each case
//! runs in a private network namespace that sets it.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use percore_test_kit::*;

/// Flood threads.
const CLIENTS: usize = 4;

/// Two-core servers on `127.0.0.1:0`.
fn two_cores(backend: Backend) -> ServerBuilder {
    let cores: Vec<usize> = percore::runtime::cpus::available()
        .into_iter()
        .take(2)
        .collect();
    builder(backend)
        .cores(cores)
        .drain_timeout(Duration::from_secs(2))
}

/// Starts a server, a second one taking its port over, clients in a loop,
/// and stops the first once both served; returns what the clients saw
/// once the second served on alone for a while.
fn hand_over(backend: Backend, migrate_req: bool) -> Outcomes {
    private_network(migrate_req).expect("private network namespace");
    let old = two_cores(backend).start(|_core| PlainEcho).expect("start");
    check_backend(&old, backend);
    let addr = old.local_addr();
    let new = two_cores(backend)
        .address(addr)
        .take_over(true)
        .start(|_core| PlainEcho)
        .expect("take over");
    check_backend(&new, backend);
    assert_eq!(new.local_addr(), addr);
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CLIENTS)
            .map(|_| scope.spawn(|| flood(addr, |_| done.load(Relaxed))))
            .collect();
        let shared = |s: &Vec<StatsSnapshot>| sum(s, |c| c.accepted) >= 300;
        wait_until(
            Duration::from_secs(60),
            "the old server to serve",
            || old.stats(),
            shared,
        );
        wait_until(
            Duration::from_secs(60),
            "the new server to serve",
            || new.stats(),
            shared,
        );
        old.shutdown();
        old.join().expect("the old server stops");
        let at_stop = sum(&new.stats(), |c| c.accepted);
        wait_until(
            Duration::from_secs(60),
            "the new server to serve alone",
            || new.stats(),
            |s| sum(s, |c| c.accepted) >= at_stop + 1000,
        );
        done.store(true, Relaxed);
        threads
            .into_iter()
            .map(|t| t.join().expect("client thread"))
            .fold(Outcomes::default(), |a, b| a + b)
    });
    new.shutdown();
    new.join().expect("the new server stops");
    println!(
        "{backend} take-over, tcp_migrate_req={}: {seen:?}",
        u8::from(migrate_req)
    );
    assert_eq!(
        seen.refused, 0,
        "a connection was refused during the hand-over: {seen:?}"
    );
    assert!(seen.echoed >= 1600, "too few echoes: {seen:?}");
    seen
}

backend_tests! {
    /// With `tcp_migrate_req` on, not one connection is refused or lost
    /// while the old server stops, though it closes listeners with
    /// connections queued in them.
    fn take_over_loses_no_connection_with_migration(backend) {
        let seen = hand_over(backend, true);
        assert_eq!(seen.lost, 0, "{seen:?}");
    }

    /// Without it, nothing is refused either; what the old listeners hold
    /// when they close is reset (at most the connections in flight).
    fn take_over_refuses_nothing_without_migration(backend) {
        let seen = hand_over(backend, false);
        assert!(seen.lost <= (CLIENTS * FLOOD_BATCH) as u32, "{seen:?}");
    }

    /// A server stopping at its connection limit leaves the connections
    /// queued in its listener to the kernel, which hands them to the
    /// server taking its place (instead of taking and closing them).
    fn a_server_at_its_limit_hands_its_queue_over(backend) {
        private_network(true).expect("private network namespace");
        let old = builder(backend)
            .max_connections(1)
            .drain_timeout(Duration::from_millis(300))
            .start(|_core| PlainEcho)
            .expect("start");
        check_backend(&old, backend);
        let addr = old.local_addr();
        let mut held = connect(addr);
        roundtrip(&mut held, b"the one connection the old server may have");
        let new = builder(backend).address(addr).take_over(true).start(|_core| PlainEcho).expect("take over");
        // The kernel spreads these over both listeners: the new server
        // echoes its share; the rest wait in the old one's queue.
        let msg = pattern(5, 100);
        let mut clients: Vec<TcpStream> = (0..16).map(|_| connect(addr)).collect();
        let mut waiting = Vec::new();
        for (i, client) in clients.iter_mut().enumerate() {
            client.write_all(msg).expect("write");
            client.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
            let mut back = [0u8; 100];
            match client.read_exact(&mut back) {
                Ok(()) => assert_eq!(&back[..], msg),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => waiting.push(i),
                Err(e) => panic!("client {i}: {e}"),
            }
        }
        assert!(!waiting.is_empty(), "no client landed in the old server's queue");
        let old_stats = old.stats_reader();
        old.shutdown();
        for &i in &waiting {
            let client = &mut clients[i];
            client.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            let mut back = [0u8; 100];
            client
                .read_exact(&mut back)
                .unwrap_or_else(|e| panic!("queued client {i} was not handed over: {e}"));
            assert_eq!(&back[..], msg);
        }
        old.join().expect("the old server stops");
        assert_eq!(sum(&old_stats.snapshot(), |c| c.closed_unserved), 0);
        drop(held);
        new.shutdown();
        new.join().expect("join");
    }

    /// With nobody on the port, a server taking it over serves it alone,
    /// and a later server is refused it as usual.
    fn take_over_of_a_free_port_serves_it(backend) {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = probe.local_addr().expect("addr");
        drop(probe);
        let server = builder(backend).address(addr).take_over(true).start(|_core| PlainEcho).expect("start");
        check_backend(&server, backend);
        assert_eq!(server.local_addr(), addr);
        ping(addr);
        let err = builder(backend).address(addr).start(|_core| PlainEcho).expect_err("port in use");
        assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
        server.shutdown();
        server.join().expect("join");
    }

    /// A take-over of an address whose port only a neighbour on another
    /// specific address listens on (127.0.0.2:P beside 127.0.0.3:P) has
    /// nobody to replace: it serves alone, as on a free port.
    fn take_over_beside_a_neighbour_serves_alone(backend) {
        // 127.0.0.3, which no other test uses, held (without
        // SO_REUSEPORT) until the neighbour has the same port: no other
        // server can be on it for the take-over to join.
        let (neighbour, addr) = loop {
            let probe = std::net::TcpListener::bind("127.0.0.3:0").expect("bind 127.0.0.3");
            let addr = probe.local_addr().expect("addr");
            if let Ok(neighbour) = std::net::TcpListener::bind(("127.0.0.2", addr.port())) {
                break (neighbour, addr);
            }
        };
        let server = builder(backend).address(addr).take_over(true).start(|_core| PlainEcho).expect("a neighbour is no reason to refuse");
        ping(addr);
        ping_std(&neighbour);
        server.shutdown();
        server.join().expect("join");
    }

    /// Taking over needs the running server's port, and only a port that
    /// can be shared: one held without `SO_REUSEPORT` is refused, saying so.
    fn take_over_needs_a_port_that_can_be_shared(backend) {
        let err = builder(backend).take_over(true).start(|_core| PlainEcho).expect_err("port 0");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("port 0"), "unclear error: {err}");
        let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = other.local_addr().expect("addr");
        let err = builder(backend).address(addr).take_over(true).start(|_core| PlainEcho).expect_err("not shareable");
        assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
        assert!(err.to_string().contains("cannot be shared"), "unclear error: {err}");
        ping_std(&other);
    }

    /// A take-over on another address than the running server's would make
    /// a second group that neither shares its connections nor takes over
    /// its queue: refused, naming the address to take over instead, also
    /// for an address of the other family (`[::1]:P` beside `0.0.0.0:P`).
    fn take_over_on_another_address_is_refused(backend) {
        let old = builder(backend).address("0.0.0.0:0".parse().unwrap()).start(|_core| PlainEcho).expect("start");
        let port = old.local_addr().port();
        let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let err = builder(backend).address(loopback).take_over(true).start(|_core| PlainEcho).expect_err("another address");
        assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
        assert!(err.to_string().contains(&format!("listens on 0.0.0.0:{port}")), "unclear error: {err}");
        // The other family binds beside it without a conflict, which is no
        // free port either.
        if std::net::TcpListener::bind("[::1]:0").is_ok() {
            let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
            let err = builder(backend).address(v6).take_over(true).start(|_core| PlainEcho).expect_err("another family");
            assert!(err.to_string().contains(&format!("listens on 0.0.0.0:{port}")), "unclear error: {err}");
        }
        ping(loopback);
        old.shutdown();
        old.join().expect("join");
    }

    /// The running server's address is looked up in the network namespace
    /// of the thread that takes over, where its sockets are: a listener on
    /// the same port in the process's first namespace is no reason to
    /// refuse.
    fn take_over_looks_in_the_callers_network_namespace(backend) {
        let elsewhere = std::net::TcpListener::bind("0.0.0.0:0").expect("bind");
        let port = elsewhere.local_addr().expect("addr").port();
        private_network(true).expect("private network namespace");
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let old = builder(backend).address(addr).start(|_core| PlainEcho).expect("start");
        let new = builder(backend).address(addr).take_over(true).start(|_core| PlainEcho).expect("take over");
        old.shutdown();
        old.join().expect("the old server stops");
        ping(addr);
        new.shutdown();
        new.join().expect("join");
        drop(elsewhere);
    }
}

/// The other program's listener still works after the refused take-over.
fn ping_std(listener: &std::net::TcpListener) {
    let mut client = connect(listener.local_addr().expect("addr"));
    let (mut served, _) = listener.accept().expect("accept");
    client.write_all(b"x").expect("write");
    let mut got = [0u8; 1];
    served.read_exact(&mut got).expect("read");
    assert_eq!(&got, b"x");
}
