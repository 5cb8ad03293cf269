//! A statsd collector: every core receives statsd lines on its own UDP
//! socket (one `SO_REUSEPORT` group) and aggregates them in its own
//! thread-local totals, with no lock; `GET /metrics` asks every core for
//! its totals with `submit_to` and answers the sum in Prometheus's text
//! format.
//!
//! ```text
//! stats_collector [--port 9102] [--udp-port 8125] [--cores 0,1] [--backend auto]
//! echo 'requests:1|c' > /dev/udp/127.0.0.1/8125
//! curl 127.0.0.1:9102/metrics
//! ```
//!
//! Lines that do not parse are counted (`statsd_bad_lines_total`) and
//! skipped; a datagram longer than `--max-datagram` is counted
//! (`statsd_truncated_datagrams_total`) and skipped whole, as its last
//! line is cut; each core keeps at most `--max-names` names, counting the
//! lines past that (`statsd_names_over_limit_total`), so no sender can
//! grow the memory without bound. A gauge's value is the one set last,
//! by whichever core received it (each sender's socket reaches one core).

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Instant;

use clap::Parser;
use percore::net::UdpSocket;
use percore::{core_count, submit_to, until_stopped, DatagramHandler, Server};
use percore_examples::statsd::Aggregate;
use percore_examples::{exit_with, init_logging, number, parse_args, positive, CommonArgs};
use percore_handlers::http::{HttpHandler, Response, Routed, Router};

thread_local! {
    /// This core's totals: each core is one thread.
    static TOTALS: RefCell<Aggregate> = RefCell::new(Aggregate::default());
}

/// The clock gauge changes are ordered by, shared by the cores.
fn now() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[derive(Debug, Parser)]
#[command(name = "stats_collector")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// The UDP port statsd lines come to (0 picks one)
    #[arg(long, default_value = "8125", value_parser = number::<u16>)]
    udp_port: u16,
    /// The longest datagram taken whole (bytes)
    #[arg(long, default_value = "8192", value_parser = positive::<usize>)]
    max_datagram: usize,
    /// The most metric names each core keeps
    #[arg(long, default_value = "10000", value_parser = positive::<usize>)]
    max_names: usize,
    /// The kernel's receive buffer per core socket (bytes)
    #[arg(long, default_value = "4194304", value_parser = positive::<usize>)]
    recv_buffer: usize,
}

/// One core's receiver.
struct Collector {
    max_datagram: usize,
    max_names: usize,
    recv_buffer: usize,
}

impl DatagramHandler for Collector {
    async fn serve(&self, socket: UdpSocket) -> io::Result<()> {
        // Capped by `net.core.rmem_max`; a smaller buffer only drops more
        // under a burst, so a refusal is not fatal.
        if let Err(e) = socket.set_recv_buffer_size(self.recv_buffer) {
            tracing::warn!(error = %e, "cannot size the UDP receive buffer");
        }
        let mut buf = Vec::with_capacity(self.max_datagram);
        while let Some((res, got)) = until_stopped(socket.recv_from(buf)).await {
            buf = got;
            match res {
                Ok(meta) if meta.truncated() => {
                    TOTALS.with(|t| {
                        let mut t = t.borrow_mut();
                        t.datagrams += 1;
                        t.truncated += 1;
                    });
                }
                Ok(meta) => {
                    let bytes = &buf[..meta.len];
                    TOTALS.with(|t| t.borrow_mut().datagram(bytes, now(), self.max_names));
                }
                // An ICMP error for a datagram this socket never sent, or
                // a transient failure: the call's, not the socket's.
                Err(e) => tracing::debug!(error = %e, "receive failed"),
            }
            buf.clear();
        }
        Ok(())
    }
}

type Req<'a, 'b, 'c> = &'a mut Routed<'b, 'c>;
type Res<'a, 'b> = &'a mut Response<'b>;

/// Every core's totals, summed.
async fn metrics(_: &(), _: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let mut all = Aggregate::default();
    for core in 0..core_count() {
        let totals = submit_to(core, || async { TOTALS.with(|t| t.borrow().clone()) }).await;
        match totals {
            Ok(totals) => all.merge(&totals),
            Err(e) => {
                res.set_status(503);
                res.write(format!("core {core} did not answer: {e}\n").as_bytes());
                return Ok(());
            }
        }
    }
    res.set_status(200);
    res.header("content-type", b"text/plain; version=0.0.4")?;
    res.write(all.render().as_bytes());
    Ok(())
}

fn main() {
    let cli: Cli = parse_args("9102");
    init_logging();
    if let Err(e) = run(cli) {
        exit_with(1, &format!("stats_collector: {e}"));
    }
}

fn run(cli: Cli) -> io::Result<()> {
    let common = &cli.common;
    let mut builder = Server::builder()
        .address(SocketAddr::new(common.host, common.port))
        .backend(common.backend)
        .drain_timeout(common.drain)
        .take_over(common.take_over)
        .max_connections(common.max_connections);
    if let Some(cores) = &common.cores {
        builder = builder.cores(cores.iter().copied());
    }
    let (max_datagram, max_names, recv_buffer) = (cli.max_datagram, cli.max_names, cli.recv_buffer);
    let handle = builder
        .add_udp(SocketAddr::new(common.host, cli.udp_port), move |_core| {
            Collector {
                max_datagram,
                max_names,
                recv_buffer,
            }
        })
        .start(|_core| {
            let routes = Router::new(()).get("/metrics", metrics);
            HttpHandler::new(routes.build().expect("one route cannot conflict"))
        })?;
    handle.shutdown_on_signals()?;
    tracing::info!(
        "stats_collector listening on {} (statsd on udp {}; {} backend, {} cores)",
        handle.local_addr(),
        handle.udp_addrs()[0],
        handle.backend(),
        handle.stats().len(),
    );
    handle.join()
}
