//! The HTTP client over HTTP/2 against this crate's own server, on both
//! backends: in clear text with prior knowledge (GET, POST, HEAD, a
//! streamed body, the body limit, as over HTTP/1), over TLS when ALPN
//! chooses `h2` (and HTTP/1.1 when the server offers only that), many
//! requests at once on one connection within the server's limit on
//! streams, and a stop's GOAWAY with requests in flight; and against
//! nginx's `http2` listener. (Feature `h2`.)
#![cfg(feature = "h2")]

use crate::support;

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use percore::tls::{self, ServerTls};
use percore::Server;
use percore_handlers::client::{self, Client, ErrorKind};
use percore_test_kit::*;
use support::client::on_core;
use support::http::*;

/// What the client is asked of.
#[derive(Default)]
struct Api {
    /// Requests of `/wait` begun and not yet answered, and the most at once.
    waiting: Cell<usize>,
    most: Arc<AtomicUsize>,
    /// Told when `/hold` requests come, so the test can stop the server.
    held: Option<Arc<Mutex<mpsc::Sender<()>>>>,
}

impl Service for Api {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            "/stream" => {
                for piece in [&b"one,"[..], b"two,", b"three"] {
                    res.write(piece);
                    res.flush().await?;
                }
            }
            "/big" => res.write(&[b'x'; 100_000]),
            "/trailers" => {
                res.write(b"body");
                res.trailer("grpc-status", b"0")?;
                res.trailer("x-parts", b"1")?;
            }
            "/trailers-only" => res.trailer("x-empty", b"yes")?,
            "/version" => res.write(format!("v{}", req.version()).as_bytes()),
            "/echo" => {
                let body = req.body().await?.to_vec();
                let method = req.method().to_owned();
                res.header("X-Method", method.as_bytes())?;
                res.write(&body);
            }
            // Held until `WIDE` are waiting at once, or the server's
            // limit on streams (2 in that test) passes a short wait.
            "/wait" => {
                let now = self.waiting.get() + 1;
                self.waiting.set(now);
                self.most.fetch_max(now, Ordering::Relaxed);
                for _ in 0..20 {
                    if self.waiting.get() >= WIDE {
                        break;
                    }
                    percore::time::sleep(Duration::from_millis(5)).await;
                }
                self.waiting.set(self.waiting.get() - 1);
                res.write(b"waited");
            }
            "/hold" => {
                if let Some(held) = &self.held {
                    let _ = held.lock().unwrap().send(());
                }
                percore::time::sleep(Duration::from_millis(200)).await;
                res.write(b"held");
            }
            _ => res.send(200, Some(b"text/plain"), b"hello")?,
        }
        Ok(())
    }
}

/// Requests `/wait` sends at once.
const WIDE: usize = 16;

/// A client that speaks HTTP/2 in clear text without asking.
fn prior_knowledge() -> client::Config {
    let mut config = client::Config::default();
    config.http2_prior_knowledge = true;
    config
}

/// `n` GETs of `url` sent at once from tasks of the core: their statuses
/// and bodies.
async fn at_once(client: &Client, url: &str, n: usize) -> Vec<(u16, Vec<u8>)> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url) = (client.clone(), url.to_owned());
            percore::spawn_local(async move {
                let mut r = client.get(&url).send().await.expect("get");
                (r.status(), r.body().await.expect("body").to_vec())
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.push(task.await.expect("the request's task"));
    }
    all
}

backend_tests! {
    parallel;
    /// With prior knowledge, GET, POST with a body, HEAD, a streamed
    /// body, a large one and the body limit behave as over HTTP/1, all
    /// on one HTTP/2 connection.
    fn prior_knowledge_answers_as_h1(backend) {
        let server = TestServer::start(backend, Config::default(), Api::default);
        let base = format!("http://{}", server.addr);
        on_core(backend, async move {
            let client = Client::with_config(prior_knowledge());
            let mut r = client.get(&format!("{base}/version")).send().await.expect("get");
            assert_eq!(r.status(), 200);
            assert_eq!(&r.body().await.expect("body")[..], b"v2", "served over HTTP/2");
            let mut r = client.get(&format!("{base}/")).send().await.expect("get");
            assert_eq!(r.header("Content-Type"), Some(&b"text/plain"[..]));
            assert_eq!(&r.body().await.expect("body")[..], b"hello");
            assert_eq!(r.chunk().await.expect("chunk"), None);
            let mut r = client
                .post(&format!("{base}/echo"))
                .header("X-Test", "1")
                .header("Connection", "keep-alive")
                .body(vec![b'b'; 200_000])
                .send()
                .await
                .expect("post");
            assert_eq!(r.header("x-method"), Some(&b"POST"[..]));
            assert_eq!(r.body().await.expect("body").len(), 200_000, "a body past the windows");
            let mut r = client.head(&format!("{base}/big")).send().await.expect("head");
            assert_eq!(r.header("content-length"), Some(&b"100000"[..]));
            assert!(r.body().await.expect("no body").is_empty());
            let mut r = client.get(&format!("{base}/stream")).send().await.expect("get");
            let mut got = Vec::new();
            while let Some(piece) = r.chunk().await.expect("chunk") {
                assert!(!piece.is_empty(), "no empty pieces");
                got.extend_from_slice(&piece);
            }
            assert_eq!(got, b"one,two,three");
            let url = format!("{base}/big");
            let mut r = client.get(&url).max_body(1000).send().await.expect("get");
            let e = r.body().await.expect_err("over the limit");
            assert_eq!(e.kind(), ErrorKind::TooLarge);
            let mut r = client.get(&url).send().await.expect("get");
            assert_eq!(r.body().await.expect("within the limit").len(), 100_000);
        });
        assert_eq!(server.stats().accepted, 1, "one connection for every request");
        let h2 = server.http_stats();
        assert_eq!((h2.h2_connections, h2.h2_streams), (1, 7));
    }

    /// The server's trailer fields are read after the body, whole or
    /// in pieces, and after an empty body; a response without trailers
    /// has none.
    fn trailers_follow_the_body(backend) {
        let server = TestServer::start(backend, Config::default(), Api::default);
        let base = format!("http://{}", server.addr);
        on_core(backend, async move {
            let client = Client::with_config(prior_knowledge());
            let mut r = client.get(&format!("{base}/trailers")).send().await.expect("get");
            assert_eq!(r.trailers().count(), 0, "none before the body's end");
            assert_eq!(&r.body().await.expect("body")[..], b"body");
            let all: Vec<_> = r.trailers().map(|(n, v)| (n.to_owned(), v.to_vec())).collect();
            assert_eq!(
                all,
                [("grpc-status".to_owned(), b"0".to_vec()), ("x-parts".to_owned(), b"1".to_vec())]
            );
            assert_eq!(r.trailer("Grpc-Status"), Some(&b"0"[..]));
            let mut r = client.get(&format!("{base}/trailers")).send().await.expect("get");
            let mut got = Vec::new();
            while let Some(piece) = r.chunk().await.expect("chunk") {
                got.extend_from_slice(&piece);
            }
            assert_eq!((&got[..], r.trailer("x-parts")), (&b"body"[..], Some(&b"1"[..])));
            let mut r = client.get(&format!("{base}/trailers-only")).send().await.expect("get");
            assert!(r.body().await.expect("body").is_empty());
            assert_eq!(r.trailer("x-empty"), Some(&b"yes"[..]));
            let mut r = client.get(&format!("{base}/")).send().await.expect("get");
            assert_eq!(&r.body().await.expect("body")[..], b"hello");
            assert_eq!(r.trailers().count(), 0, "no trailers sent");
        });
    }

    /// `WIDE` requests at once share one connection and are served
    /// together.
    fn many_requests_share_one_connection(backend) {
        let server = TestServer::start(backend, Config::default(), Api::default);
        let url = format!("http://{}/wait", server.addr);
        on_core(backend, async move {
            let client = Client::with_config(prior_knowledge());
            let all = at_once(&client, &url, WIDE).await;
            assert!(all.iter().all(|(s, b)| *s == 200 && b == b"waited"), "{all:?}");
        });
        assert_eq!(server.stats().accepted, 1, "one connection for all");
        assert_eq!(server.http_stats().h2_streams, WIDE as u64);
    }

    /// A server that takes two streams at a time gets no more: the
    /// others wait for room, and every request is answered.
    fn the_servers_limit_on_streams_is_kept(backend) {
        let mut config = Config::default();
        config.h2.max_concurrent_streams = 2;
        let most = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&most);
        let server = TestServer::start(backend, config, move || Api {
            most: Arc::clone(&seen),
            ..Api::default()
        });
        let url = format!("http://{}/wait", server.addr);
        on_core(backend, async move {
            let client = Client::with_config(prior_knowledge());
            let all = at_once(&client, &url, 8).await;
            assert!(all.iter().all(|(s, b)| *s == 200 && b == b"waited"), "{all:?}");
        });
        assert_eq!(server.stats().accepted, 1, "one connection for all");
        let most = most.load(Ordering::Relaxed);
        assert!((1..=2).contains(&most), "at most 2 streams at once, saw {most}");
        let h2 = server.http_stats();
        assert_eq!((h2.h2_streams, h2.h2_streams_reset), (8, 0), "none opened past the limit");
    }

    /// A connection without a stream for the pool's idle timeout is
    /// closed; the next request makes a new one.
    fn an_idle_connection_is_closed(backend) {
        let server = TestServer::start(backend, Config::default(), Api::default);
        let url = format!("http://{}/", server.addr);
        let closed = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&closed);
        std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel::<()>();
            let server = &server;
            scope.spawn(move || {
                // Once the first answer is in, waits for the server to see
                // the connection closed.
                rx.recv_timeout(Duration::from_secs(60)).expect("the first answer");
                let until = std::time::Instant::now() + Duration::from_secs(60);
                let mut gone = false;
                while !gone && std::time::Instant::now() < until {
                    gone = server.stats().active == 0;
                    std::thread::sleep(Duration::from_millis(10));
                }
                seen.store(usize::from(gone) + 1, Ordering::SeqCst);
            });
            on_core(backend, async move {
                let mut config = prior_knowledge();
                config.pool.idle_timeout = Duration::from_millis(100);
                let client = Client::with_config(config);
                let mut r = client.get(&url).send().await.expect("get");
                assert_eq!(&r.body().await.expect("body")[..], b"hello");
                tx.send(()).expect("the watcher");
                while closed.load(Ordering::SeqCst) == 0 {
                    percore::time::sleep(Duration::from_millis(10)).await;
                }
                assert_eq!(closed.load(Ordering::SeqCst), 2, "closed once idle");
                let mut r = client.get(&url).send().await.expect("get again");
                assert_eq!(&r.body().await.expect("body")[..], b"hello");
            });
        });
        assert_eq!(server.stats().accepted, 2, "a new connection after the idle one closed");
    }

    /// A stop's GOAWAY with requests in flight: they are answered.
    fn a_stop_answers_the_requests_in_flight(backend) {
        let (tx, rx) = mpsc::channel();
        let tx = Arc::new(Mutex::new(tx));
        let server = TestServer::start(backend, Config::default(), move || Api {
            held: Some(Arc::clone(&tx)),
            ..Api::default()
        });
        let url = format!("http://{}/hold", server.addr);
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // Both requests are in the service: stop.
                for _ in 0..2 {
                    rx.recv_timeout(Duration::from_secs(60)).expect("held requests");
                }
                server.begin_stop();
            });
            on_core(backend, async move {
                let client = Client::with_config(prior_knowledge());
                let all = at_once(&client, &url, 2).await;
                assert_eq!(all, vec![(200, b"held".to_vec()); 2]);
            });
        });
    }

    /// nginx in clear text with prior knowledge: files, its 404 and a
    /// HEAD, several at once.
    fn nginx_over_h2(backend) {
        let h2_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let Some(nginx) = Nginx::start(|dir| {
            std::fs::write(dir.join("html/index.txt"), "from nginx\n").expect("static file");
            std::fs::write(dir.join("html/big.txt"), vec![b'n'; 200_000]).expect("big file");
            format!(
                "  listen 127.0.0.1:{h2_port} http2;\n  root {}/html;\n  default_type text/plain;",
                dir.display()
            )
        }) else {
            return;
        };
        let base = format!("http://127.0.0.1:{h2_port}");
        let log = nginx.log();
        on_core(backend, async move {
            let client = Client::with_config(prior_knowledge());
            let all = at_once(&client, &format!("{base}/index.txt"), 4).await;
            assert_eq!(all, vec![(200, b"from nginx\n".to_vec()); 4], "nginx log: {log}");
            let mut r = client.get(&format!("{base}/big.txt")).send().await.expect("get");
            assert_eq!(r.header("server").map(|s| s.starts_with(b"nginx")), Some(true));
            assert_eq!(r.body().await.expect("body"), vec![b'n'; 200_000]);
            let mut r = client.get(&format!("{base}/missing")).send().await.expect("get");
            assert_eq!(r.status(), 404);
            r.body().await.expect("the 404 page");
            let mut r = client.head(&format!("{base}/big.txt")).send().await.expect("head");
            assert_eq!(r.header("content-length"), Some(&b"200000"[..]));
            assert!(r.body().await.expect("no body").is_empty());
        });
    }

    /// ALPN chooses `h2`: requests sent at once, before the origin was
    /// known, share one connection.
    fn alpn_chooses_h2(backend) {
        let Some(cert) = TestCert::new(&format!("client-h2-{backend}")) else { return };
        let server = tls_api(backend, &cert, &[b"h2", b"http/1.1"]);
        let got = versions_over_tls(backend, server.local_addr().port(), &cert.ca, 4);
        assert_eq!(got, vec![b"v2".to_vec(); 5]);
        let handshakes = sum(&server.stats(), |s| s.tls_handshakes);
        assert_eq!(handshakes, 1, "one connection for all");
    }

    /// A server that offers only HTTP/1.1 is served so, from the pool.
    fn alpn_falls_back_to_http1(backend) {
        let Some(cert) = TestCert::new(&format!("client-h2-h1-{backend}")) else { return };
        let server = tls_api(backend, &cert, &[b"http/1.1"]);
        let got = versions_over_tls(backend, server.local_addr().port(), &cert.ca, 1);
        assert_eq!(got, vec![b"v1".to_vec(); 2]);
        let handshakes = sum(&server.stats(), |s| s.tls_handshakes);
        assert_eq!(handshakes, 1, "the connection made for h2 served HTTP/1.1, then was pooled");
    }
}

/// The server over TLS, offering `alpn`.
fn tls_api(backend: Backend, cert: &TestCert, alpn: &[&[u8]]) -> percore::ServerHandle {
    let tls = ServerTls::new(&cert.cert, &cert.key)
        .alpn(alpn)
        .build()
        .expect("server config");
    let server = Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores([server_cpu()])
        .backend(backend)
        .tls(tls)
        .start(|_core| HttpHandler::new(Api::default()))
        .expect("start");
    check_backend(&server, backend);
    server
}

/// `https` GETs of `/version`, `n` at once, from a client trusting `ca`.
fn versions_over_tls(backend: Backend, port: u16, ca: &std::path::Path, n: usize) -> Vec<Vec<u8>> {
    let mut config = client::Config::default();
    config.tls = Some(tls::client_config(ca).expect("client config"));
    let url = format!("https://127.0.0.1:{port}/version");
    on_core(backend, async move {
        let client = Client::with_config(config);
        let all = at_once(&client, &url, n).await;
        // Once more, after the origin is known.
        let mut r = client.get(&url).send().await.expect("again");
        let mut bodies: Vec<_> = all.into_iter().map(|(_, body)| body).collect();
        bodies.push(r.body().await.expect("body").to_vec());
        bodies
    })
}
