//! A server's UDP addresses, on both backends: every core gets its own
//! socket of a `SO_REUSEPORT` group and a datagram handler; senders are
//! answered beside a TCP listener; a stop ends handlers that wait through
//! `until_stopped`; a second server is refused the address unless it takes
//! it over, and then answers alone once the first has stopped.

use std::net::{SocketAddr, UdpSocket as StdUdp};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percore::net::UdpSocket;
use percore::{until_stopped, Connection, DatagramHandler, Handler};
use percore_test_kit::*;

/// Answers each datagram with its bytes and the core's index; counts its
/// clean ends (the stop seen) in `ended`.
struct Echo {
    core: u8,
    ended: Arc<AtomicUsize>,
}

impl DatagramHandler for Echo {
    async fn serve(&self, socket: UdpSocket) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(2048);
        while let Some((res, mut got)) = until_stopped(socket.recv_from(buf)).await {
            let meta = res?;
            got.truncate(meta.len);
            got.push(self.core);
            if let Some(peer) = meta.peer {
                let (res, back) = socket.send_to(got, peer).await;
                res?;
                got = back;
            }
            got.clear();
            buf = got;
        }
        self.ended.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// The stream side the builder always has.
struct Nothing;

impl Handler for Nothing {
    async fn serve(&self, _conn: Connection) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends `body` from `client` to `to` and returns the answer.
fn ask(client: &StdUdp, to: SocketAddr, body: &[u8]) -> Vec<u8> {
    client.send_to(body, to).expect("send");
    let mut buf = [0u8; 2048];
    let (n, from) = client.recv_from(&mut buf).expect("an answer");
    assert_eq!(from, to);
    buf[..n].to_vec()
}

/// Two cores where the machine has two CPUs for this process.
fn cpus() -> Vec<usize> {
    percore::runtime::cpus::available()
        .into_iter()
        .take(2)
        .collect()
}

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn client() -> StdUdp {
    let client = StdUdp::bind("127.0.0.1:0").expect("bind client");
    client.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    client
}

fn server(
    backend: percore::Backend,
    tcp: SocketAddr,
    at: SocketAddr,
    take_over: bool,
    ended: &Arc<AtomicUsize>,
) -> std::io::Result<percore::ServerHandle> {
    let ended = ended.clone();
    builder(backend)
        .address(tcp)
        .cores(cpus())
        .drain_timeout(Duration::from_secs(60))
        .take_over(take_over)
        .add_udp(at, move |core| Echo {
            core: core.index as u8,
            ended: ended.clone(),
        })
        .start(|_core| Nothing)
}

backend_tests! {
    /// Twenty senders each get their datagram back from one of the two
    /// cores; the stop ends both handlers through `until_stopped` (a
    /// minute's drain deadline never comes into it: the count of clean
    /// ends says so).
    fn udp_served_on_every_core_until_the_stop(backend) {
        let ended = Arc::new(AtomicUsize::new(0));
        let handle = server(backend, any(), any(), false, &ended).expect("start");
        check_backend(&handle, backend);
        let [at] = handle.udp_addrs()[..] else { panic!("one UDP address") };
        assert_ne!(at.port(), 0);
        for i in 0..20u8 {
            let answer = ask(&client(), at, &[i; 100]);
            assert_eq!(answer.len(), 101);
            assert_eq!(&answer[..100], &[i; 100]);
            assert!(usize::from(answer[100]) < cpus().len(), "core index {}", answer[100]);
        }
        handle.shutdown();
        handle.join().expect("join");
        assert_eq!(ended.load(Ordering::SeqCst), cpus().len(), "every handler saw the stop");
    }

    /// A second server on the same UDP address is refused; with
    /// take-over it joins, and once the first has stopped it answers
    /// every sender.
    fn udp_take_over_joins_then_serves_alone(backend) {
        let ended = Arc::new(AtomicUsize::new(0));
        let first = server(backend, any(), any(), false, &ended).expect("start");
        let at = first.udp_addrs()[0];
        let refused = server(backend, any(), at, false, &ended).expect_err("the address is taken");
        assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse, "{refused}");
        let second = server(backend, first.local_addr(), at, true, &ended).expect("take over");
        first.shutdown();
        first.join().expect("join the first");
        for i in 0..10u8 {
            let answer = ask(&client(), at, &[i; 10]);
            assert_eq!(&answer[..10], &[i; 10]);
        }
        second.shutdown();
        second.join().expect("join the second");
        assert_eq!(ended.load(Ordering::SeqCst), 2 * cpus().len());
    }
}
