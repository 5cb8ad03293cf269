//! FAULTS N3, at accept: connections that the kernel's `SO_REUSEPORT`
//! hash puts all on one core are spread over both cores when steering is
//! on ([`Steering::Load`]), and go mostly to the other core when one holds
//! many connections; each connection is served, its messages echoed once
//! and in order. With steering off, the same connections all land on one
//! core (the tests' premise). And a server taking this one over pauses
//! its steering, which resumes when that one leaves.

use std::collections::HashSet;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use percore::{Connection, Handler, Steering};
use percore_test_kit::*;

/// Connections made from the ports found to hash to core 0.
const CONNECTIONS: usize = 200;

/// Connections held open on core 0 to load it.
const HELD: usize = 100;

/// Tells the client its core's index, then echoes.
struct CoreTag(u8);

impl Handler for CoreTag {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let (res, _) = conn.write_all(vec![self.0]).await;
        res?;
        while let Some(buf) = conn.read().await? {
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

/// Two-core servers on `127.0.0.1:0`, the given steering.
fn two_cores(backend: Backend, steering: Steering) -> ServerBuilder {
    let cores: Vec<usize> = percore::runtime::cpus::available()
        .into_iter()
        .take(2)
        .collect();
    builder(backend).cores(cores).steering(steering)
}

fn start(builder: ServerBuilder, backend: Backend) -> ServerHandle {
    let server = builder
        .start(|core| CoreTag(core.index as u8))
        .expect("start");
    check_backend(&server, backend);
    server
}

/// The core that accepted `stream`, as its first byte says.
fn core_of(stream: &mut TcpStream) -> u8 {
    let mut tag = [0u8; 1];
    stream.read_exact(&mut tag).expect("the core's tag");
    tag[0]
}

/// Three numbered messages, each echoed once and in order, then a reset
/// (no `TIME_WAIT`, so the local port can be bound again at once).
fn exchange(mut stream: TcpStream) {
    for i in 0..3u8 {
        roundtrip(&mut stream, &[b'm', i, b'\n']);
    }
    reset(stream);
}

/// Local ports whose connections to `addr` the hash puts on core 0.
fn ports_on_core_zero(addr: SocketAddr) -> Vec<u16> {
    let mut ports = HashSet::new();
    for _ in 0..20 * CONNECTIONS {
        let mut stream = connect(addr);
        let port = stream.local_addr().expect("local address").port();
        if core_of(&mut stream) == 0 {
            ports.insert(port);
        }
        reset(stream);
        if ports.len() == CONNECTIONS {
            return ports.into_iter().collect();
        }
    }
    panic!("only {} ports of 4000 hash to core 0", ports.len());
}

/// Connects from each port and serves an exchange; returns how many
/// connections each core accepted. A port some other connection took
/// meanwhile (the held ones get ephemeral ports) is skipped, a few at
/// most.
fn from_ports(addr: SocketAddr, ports: &[u16]) -> [usize; 2] {
    let mut per_core = [0usize; 2];
    let mut skipped = 0;
    for &port in ports {
        let from = SocketAddr::from(([127, 0, 0, 1], port));
        let mut stream = match connect_from(from, addr) {
            Ok(stream) => stream,
            Err(e)
                if e.kind() == ErrorKind::AddrInUse || e.kind() == ErrorKind::AddrNotAvailable =>
            {
                skipped += 1;
                continue;
            }
            Err(e) => panic!("from {from}: {e}"),
        };
        per_core[usize::from(core_of(&mut stream))] += 1;
        exchange(stream);
    }
    assert!(
        skipped <= ports.len() / 10,
        "{skipped} ports of {} taken",
        ports.len()
    );
    per_core
}

fn stop(server: ServerHandle) {
    server.shutdown();
    server.join().expect("join");
}

/// Until a program steers (the first goes on as the server starts).
fn wait_steering(server: &ServerHandle, active: bool) {
    let reader = server.stats_reader();
    wait_until(
        Duration::from_secs(60),
        if active {
            "steering to begin"
        } else {
            "steering to pause"
        },
        || reader.steering(),
        |s| s.active == active,
    );
}

backend_tests! {
    /// Serial, in a network namespace of its own: the test binds local
    /// ports that a neighbour's connections could take.
    fn hashed_to_one_core_yet_spread_by_steering(backend) {
        if percore::runtime::cpus::available().len() < 2 {
            println!("skipped: needs two CPUs");
            return;
        }
        private_network(true).expect("private network namespace");
        // 1. With steering off, find ports the hash puts on core 0, and
        //    check that it does so every time: the premise.
        let off = start(two_cores(backend, Steering::Off), backend);
        let addr = off.local_addr();
        let ports = ports_on_core_zero(addr);
        let hashed = from_ports(addr, &ports);
        assert_eq!(hashed[1], 0, "the hash puts them all on core 0: {hashed:?}");
        assert_eq!(off.stats_reader().steering().attaches, 0);
        stop(off);
        // 2. The same port, steering on: the same connections spread.
        let on = start(two_cores(backend, Steering::Load).address(addr), backend);
        wait_steering(&on, true);
        let spread = from_ports(addr, &ports);
        assert!(
            spread[0] >= CONNECTIONS / 5 && spread[1] >= CONNECTIONS / 5,
            "each core gets a share: {spread:?}"
        );
        assert!(spread[0] + spread[1] >= CONNECTIONS * 9 / 10);
        // 3. Core 0 loaded with open connections: new ones go elsewhere.
        let mut held = Vec::new();
        while held.len() < HELD {
            let mut stream = connect(addr);
            if core_of(&mut stream) == 0 {
                held.push(stream);
            } else {
                reset(stream);
            }
        }
        let reader = on.stats_reader();
        wait_until(
            Duration::from_secs(60),
            "core 0's weight to fall below 20%",
            || reader.snapshot(),
            |cores| cores[0].steering_weight_ppm < 200_000,
        );
        let elsewhere = from_ports(addr, &ports);
        assert!(
            elsewhere[1] >= (elsewhere[0] + elsewhere[1]) * 3 / 4,
            "most go to the idle core: {elsewhere:?}"
        );
        println!("steering off: {hashed:?}; on: {spread:?}; core 0 loaded: {elsewhere:?}");
        // 4. The held connections are still served, each once.
        for (i, stream) in held.iter_mut().enumerate() {
            let msg = format!("held {i}\n");
            roundtrip(stream, msg.as_bytes());
        }
        let stats = on.stats();
        let weights: u64 = stats.iter().map(|s| s.steering_weight_ppm).sum();
        assert!((990_000..=1_000_000).contains(&weights), "shares sum to 1: {weights}");
        assert!(reader.steering().attaches >= 2, "re-attached as core 0 filled");
        let accepted = sum(&stats, |s| s.accepted) as usize;
        let expected = spread[0] + spread[1] + elsewhere[0] + elsewhere[1] + HELD;
        assert!(accepted >= expected, "accepted {accepted}, expected {expected} or more");
        drop(held);
        stop(on);
    }

    /// Serial: two servers on one port.
    fn a_take_over_pauses_steering_until_it_leaves(backend) {
        let first = start(two_cores(backend, Steering::Load), backend);
        let addr = first.local_addr();
        wait_steering(&first, true);
        // 1. A server joins the port: the first pauses (else the joiner
        //    would get no connection), the joiner never steers.
        let joiner = start(
            two_cores(backend, Steering::Load).address(addr).take_over(true),
            backend,
        );
        wait_steering(&first, false);
        assert_eq!(joiner.stats_reader().steering().attaches, 0);
        let mut served = 0;
        while sum(&joiner.stats(), |s| s.accepted) == 0 {
            let mut stream = connect(addr);
            core_of(&mut stream);
            exchange(stream);
            served += 1;
            assert!(served < 10_000, "the joiner gets connections while shared");
        }
        wait_until(
            Duration::from_secs(60),
            "the paused server's weights to read 0",
            || first.stats(),
            |cores| cores.iter().all(|s| s.steering_weight_ppm == 0),
        );
        // 2. It leaves: the first steers again, and serves alone.
        stop(joiner);
        wait_steering(&first, true);
        let mut stream = connect(addr);
        core_of(&mut stream);
        exchange(stream);
        stop(first);
    }
}
