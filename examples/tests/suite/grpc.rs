//! `grpc_echo` as a gRPC client sees it, on both backends: tonic's client
//! (over hyper's HTTP/2 client, which leaves deadlines to the server) and
//! Python's `grpcio`, in clear text and over TLS: unary calls, a status
//! on errors, server streaming in order, `grpc-timeout` honoured by the
//! server, and the connection still serving after each.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use percore_examples::grpc::echo_v1::echo_client::EchoClient;
use percore_examples::grpc::echo_v1::{EchoRequest, StreamRequest};
use percore_test_kit::*;
use tonic::codegen::http;

const GRPC_ECHO: &str = env!("CARGO_BIN_EXE_grpc_echo");
const PROTO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");

fn start(backend: &str, tls: Option<&TestCert>) -> ChildServer {
    let mut cmd = Command::new(GRPC_ECHO);
    cmd.args(["--port", "0", "--host", "127.0.0.1", "--backend", backend])
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
    if let Some(cert) = tls {
        cmd.arg("--tls-cert")
            .arg(&cert.cert)
            .arg("--tls-key")
            .arg(&cert.key);
    }
    ChildServer::spawn(cmd, Duration::from_secs(60))
        .unwrap_or_else(|f| panic!("grpc_echo did not start: {f:?}"))
}

fn stop(server: ChildServer) {
    server.signal(libc::SIGTERM);
    let (status, log) = server.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}: {log}");
}

/// hyper's HTTP/2 client as the service tonic's client calls.
#[derive(Clone)]
struct H2(SendRequest<tonic::body::Body>);

impl tower_service::Service<http::Request<tonic::body::Body>> for H2 {
    type Response = http::Response<Incoming>;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, hyper::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.0.send_request(req))
    }
}

/// The calls of every test, through tonic's client on one connection.
async fn tonic_calls(addr: SocketAddr) {
    let socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(socket))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    let origin: http::Uri = format!("http://{addr}").parse().expect("origin");
    let mut client = EchoClient::with_origin(H2(sender), origin);

    let reply = client
        .unary(EchoRequest {
            message: "hello".into(),
            delay_ms: 0,
        })
        .await
        .expect("unary")
        .into_inner();
    assert_eq!(reply.message, "hello");

    let status = client
        .unary(EchoRequest {
            message: "fail:5".into(),
            delay_ms: 0,
        })
        .await
        .expect_err("a status");
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(status.message(), "failed as asked (5)");

    let mut stream = client
        .server_stream(StreamRequest {
            message: "tick".into(),
            count: 5,
            interval_ms: 1,
        })
        .await
        .expect("server stream")
        .into_inner();
    let mut got = Vec::new();
    while let Some(reply) = stream.message().await.expect("a reply") {
        got.push(reply.message);
    }
    assert_eq!(got, ["tick 0", "tick 1", "tick 2", "tick 3", "tick 4"]);

    // A minute's work with a deadline of 300 ms: nothing on this side
    // enforces it, so the status is the server's.
    let mut slow = tonic::Request::new(EchoRequest {
        message: "slow".into(),
        delay_ms: 60_000,
    });
    slow.set_timeout(Duration::from_millis(300));
    let status = client.unary(slow).await.expect_err("the deadline");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");

    let reply = client
        .unary(EchoRequest {
            message: "after".into(),
            delay_ms: 0,
        })
        .await
        .expect("unary after");
    assert_eq!(reply.into_inner().message, "after");
}

/// The same calls from Python's grpcio, over TLS if `ca` is given: what
/// the script prints.
fn grpcio_calls(target: &str, ca: Option<&Path>) -> Option<String> {
    if !python_module("grpc") || !python_module("grpc_tools") {
        return None;
    }
    let stubs = std::env::temp_dir().join(format!("percore-grpc-stubs-{}", std::process::id()));
    std::fs::create_dir_all(&stubs).expect("stub directory");
    let out = Command::new("python3")
        .args(["-m", "grpc_tools.protoc", "-I", PROTO_DIR])
        .arg(format!("--python_out={}", stubs.display()))
        .arg(format!("--grpc_python_out={}", stubs.display()))
        .arg("echo.proto")
        .output()
        .expect("run grpc_tools.protoc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ca = ca.map(|p| p.display().to_string()).unwrap_or_default();
    let out = python3(GRPCIO_SCRIPT, &[&stubs.display().to_string(), target, &ca])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).expect("UTF-8"))
}

const GRPCIO_SCRIPT: &str = r#"
import sys
stubs, target, ca = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, stubs)
import grpc, echo_pb2, echo_pb2_grpc
if ca:
    creds = grpc.ssl_channel_credentials(root_certificates=open(ca, 'rb').read())
    channel = grpc.secure_channel(target, creds)
else:
    channel = grpc.insecure_channel(target)
stub = echo_pb2_grpc.EchoStub(channel)
print('unary', stub.Unary(echo_pb2.EchoRequest(message='hi'), timeout=60).message)
try:
    stub.Unary(echo_pb2.EchoRequest(message='fail:7'), timeout=60)
except grpc.RpcError as e:
    print('status', e.code().name, e.details())
for r in stub.ServerStream(echo_pb2.StreamRequest(message='s', count=3, interval_ms=1), timeout=60):
    print('stream', r.message)
try:
    stub.Unary(echo_pb2.EchoRequest(message='slow', delay_ms=60000), timeout=0.3)
except grpc.RpcError as e:
    print('deadline', e.code().name)
print('unary', stub.Unary(echo_pb2.EchoRequest(message='after'), timeout=60).message)
"#;

const GRPCIO_EXPECTED: &str = "unary hi\nstatus PERMISSION_DENIED failed as asked (7)\nstream s 0\nstream s 1\nstream s 2\ndeadline DEADLINE_EXCEEDED\nunary after\n";

backend_process_tests! {
    /// tonic's client in clear text (prior knowledge): unary, a status,
    /// a stream of five in order, a deadline the server enforces, and
    /// the connection serving after each.
    fn tonic_client_calls_grpc_echo(backend) {
        let server = start(backend, None);
        let addr = server.addr;
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(async { tokio::time::timeout(Duration::from_secs(60), tonic_calls(addr)).await })
            .expect("the calls hung");
        stop(server);
    }

    /// Python's grpcio in clear text and over TLS (ALPN `h2`, the test
    /// CA): the same calls, the same answers.
    fn grpcio_calls_grpc_echo(backend) {
        let server = start(backend, None);
        if let Some(out) = grpcio_calls(&server.addr.to_string(), None) {
            assert_eq!(out, GRPCIO_EXPECTED, "{backend}, clear text");
        }
        stop(server);
        let Some(cert) = TestCert::new(&format!("grpc-{backend}")) else { return };
        let server = start(backend, Some(&cert));
        let target = format!("localhost:{}", server.addr.port());
        if let Some(out) = grpcio_calls(&target, Some(&cert.ca)) {
            assert_eq!(out, GRPCIO_EXPECTED, "{backend}, TLS");
        }
        stop(server);
    }
}
