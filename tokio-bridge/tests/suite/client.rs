//! HTTP clients from a percore handler: hyper's client over a tokio
//! socket (what a tokio-based client such as reqwest does), and the same
//! client over a percore socket ([`Io`]), against a local server.

use std::io::{Read, Write};
use std::net::SocketAddr;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;
use percore::net::TcpStream;
use percore::{Connection, Handler};
use percore_test_kit::upstream::Fake;
use percore_test_kit::{builder, check_backend, connect};
use percore_tokio::hyper::{Exec, Io};
use percore_tokio::CompatExt;

/// Asks `upstream` for `/` once per command byte: `t` over a tokio
/// socket, `p` over a percore one; answers the bodies it got.
struct Fetch {
    upstream: SocketAddr,
}

impl Handler for Fetch {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        let Some(cmds) = conn.read().await? else {
            return Ok(());
        };
        let mut answer = Vec::new();
        for &cmd in cmds.iter() {
            let body = match cmd {
                b't' => via_tokio(self.upstream).compat().await,
                b'p' => via_percore(self.upstream).await,
                _ => Err(std::io::Error::other("unknown command")),
            }?;
            answer.extend_from_slice(&body);
            answer.push(b'\n');
        }
        let (res, _) = conn.write_all(answer).await;
        res?;
        conn.shutdown_write()
    }
}

fn get(upstream: SocketAddr) -> Request<Empty<Bytes>> {
    Request::get(format!("http://{upstream}/"))
        .header("host", upstream.to_string())
        .body(Empty::new())
        .expect("a valid request")
}

/// hyper's client on a tokio socket, its connection a task of the core.
async fn via_tokio(upstream: SocketAddr) -> std::io::Result<Bytes> {
    let socket = tokio::net::TcpStream::connect(upstream).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(socket))
        .await
        .map_err(std::io::Error::other)?;
    percore_tokio::spawn_local(connection);
    let response = sender
        .send_request(get(upstream))
        .await
        .map_err(std::io::Error::other)?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?;
    Ok(body.to_bytes())
}

/// The same client on a percore socket, its connection spawned by
/// hyper's executor on the core: no tokio involved.
async fn via_percore(upstream: SocketAddr) -> std::io::Result<Bytes> {
    let socket = TcpStream::connect(upstream).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(Io::new(socket.into()))
        .await
        .map_err(std::io::Error::other)?;
    hyper::rt::Executor::execute(&Exec, connection);
    let response = sender
        .send_request(get(upstream))
        .await
        .map_err(std::io::Error::other)?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?;
    Ok(body.to_bytes())
}

percore_test_kit::backend_tests! {
    /// Both clients get the upstream's answer, many times over, on
    /// connections served at once.
    fn clients_in_handlers(backend) {
        let upstream = Fake::start(|mut c| {
            while c.read_request().is_some() {
                c.ok(b"from upstream");
            }
        });
        let up = upstream.addr;
        let server = builder(backend)
            .start(move |_core| Fetch { upstream: up })
            .expect("server starts");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let clients: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut c = connect(addr);
                    c.write_all(b"tptp").expect("send");
                    let mut answer = Vec::new();
                    c.read_to_end(&mut answer).expect("answer");
                    answer
                })
            })
            .collect();
        for client in clients {
            assert_eq!(client.join().expect("client"), b"from upstream\n".repeat(4));
        }
        assert_eq!(upstream.accepted(), 32);
        server.shutdown();
        server.join().expect("server stops cleanly");
    }
}
