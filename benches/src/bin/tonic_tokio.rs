//! `tonic_tokio`: the gRPC baseline `benches/h2.sh` measures `grpc_echo`
//! against: the same generated `echo.v1.Echo` service (the examples'
//! `proto/echo.proto`, code from `examples/src/grpc/echo_v1.rs`) with the
//! same `Unary` method, served by tonic's own server
//! (`tonic::transport::Server`, its defaults and `TCP_NODELAY`) on one
//! tokio current-thread runtime per listed CPU, pinned, each with its own
//! SO_REUSEPORT listener. `ServerStream` answers UNIMPLEMENTED: the
//! benchmark calls `Unary` only.
//!
//! Usage: `tonic_tokio [--port P] [--cores 0,1]`, listening on
//! 127.0.0.1:P (default 50051), in the clear (h2c), until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use percore_benches::cli::parse_cpu_list;
use percore_benches::signals::block_stop_signals;
use percore_benches::tokio_servers::{start_ct_with, stopped};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::codegen::tokio_stream::wrappers::TcpListenerStream;
use tonic::{Code, Request, Response, Status};

/// Package `echo.v1`, as the examples generate it.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    unreachable_pub,
    dead_code
)]
mod echo_v1 {
    include!("../../../examples/src/grpc/echo_v1.rs");
}

use echo_v1::echo_server::{Echo, EchoServer};
use echo_v1::{EchoReply, EchoRequest, StreamRequest};

/// The service, one per runtime; `Unary` as `grpc_echo` answers it.
struct EchoService {
    core: u32,
}

#[tonic::async_trait]
impl Echo for EchoService {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let EchoRequest { message, delay_ms } = request.into_inner();
        if let Some(code) = message.strip_prefix("fail:") {
            let code = code
                .parse::<i32>()
                .map_err(|_| Status::invalid_argument(format!("not a status code: {code:?}")))?;
            return Err(Status::new(
                Code::from_i32(code),
                format!("failed as asked ({code})"),
            ));
        }
        if delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(delay_ms.into())).await;
        }
        Ok(Response::new(EchoReply {
            message,
            core: self.core,
        }))
    }

    type ServerStreamStream = tonic::codegen::BoxStream<EchoReply>;

    async fn server_stream(
        &self,
        _: Request<StreamRequest>,
    ) -> Result<Response<Self::ServerStreamStream>, Status> {
        Err(Status::unimplemented("tonic_tokio serves Unary only"))
    }
}

struct Options {
    port: u16,
    cores: Vec<usize>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        port: 50051,
        cores: Vec::new(),
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => o.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--cores" => o.cores = parse_cpu_list(&value()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// One runtime's tonic server, until `stop` says so.
async fn serve(listener: TcpListener, mut stop: watch::Receiver<bool>, core: u32) {
    let result = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(EchoServer::new(EchoService { core }))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
            stopped(&mut stop).await;
        })
        .await;
    if let Err(e) = result {
        eprintln!("tonic_tokio: {e}");
    }
}

fn main() -> ExitCode {
    let o = match parse(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("tonic_tokio: {e}\nusage: tonic_tokio [--port P] [--cores 0,1]");
            return ExitCode::from(2);
        }
    };
    let signals = block_stop_signals();
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    // The core field of the reply: the first listed CPU (one runtime in the
    // benchmark), as `grpc_echo` reports its core's index.
    let server = match start_ct_with(addr, &o.cores, |listener, stop| serve(listener, stop, 0)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tonic_tokio: cannot start on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "tonic_tokio: gRPC (h2c) on {} ({} current_thread runtime(s))",
        server.target(),
        o.cores.len().max(1)
    );
    signals.wait();
    match server.stop() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tonic_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}
