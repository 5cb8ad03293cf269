//! The HTTP client against this crate's own HTTP server, on both
//! backends: GET, POST with a body, HEAD, keep-alive reuse seen as one
//! accepted connection, a chunked body streamed with `chunk`, the body
//! limit, `localhost` resolved off the core, and the client used from
//! inside a `Service`.

use crate::support;

use std::io;

use percore_handlers::client::{Client, ErrorKind};
use percore_test_kit::http::*;
use percore_test_kit::*;
use support::client::on_core;
use support::http::*;

/// What the client is tested against.
struct Api;

impl Service for Api {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        match req.path() {
            // Three pieces, flushed one by one: a chunked body.
            "/stream" => {
                for piece in [&b"one,"[..], b"two,", b"three"] {
                    res.write(piece);
                    res.flush().await?;
                }
            }
            "/big" => res.write(&[b'x'; 100_000]),
            "/echo" => {
                let body = req.body().await?.to_vec();
                let method = req.method().to_owned();
                res.header("X-Method", method.as_bytes())?;
                res.write(&body);
            }
            _ => res.send(200, Some(b"text/plain"), b"hello")?,
        }
        Ok(())
    }
}

fn api(backend: Backend) -> TestServer {
    TestServer::start(backend, Config::default(), || Api)
}

backend_tests! {
    parallel;
    /// GET and POST with a body, HEAD, over one kept-alive connection.
    fn get_post_head_on_one_connection(backend) {
        let server = api(backend);
        let base = format!("http://{}", server.addr);
        on_core(backend, async move {
            let client = Client::new();
            for _ in 0..5 {
                let mut r = client.get(&format!("{base}/")).send().await.expect("get");
                assert_eq!(r.status(), 200);
                assert_eq!(r.header("content-type"), Some(&b"text/plain"[..]));
                assert_eq!(r.header("Content-Type"), Some(&b"text/plain"[..]));
                assert!(r.headers().any(|(name, _)| name.eq_ignore_ascii_case("content-length")));
                assert_eq!(&r.body().await.expect("body")[..], b"hello");
                // Read whole: nothing more comes.
                assert_eq!(r.chunk().await.expect("chunk"), None);
            }
            let mut r = client
                .post(&format!("{base}/echo"))
                .header("X-Test", "1")
                .body(&b"posted body"[..])
                .send()
                .await
                .expect("post");
            assert_eq!(r.header("x-method"), Some(&b"POST"[..]));
            assert_eq!(&r.body().await.expect("body")[..], b"posted body");
            let mut r = client.head(&format!("{base}/big")).send().await.expect("head");
            assert_eq!(r.header("content-length"), Some(&b"100000"[..]));
            assert!(r.body().await.expect("no body").is_empty());
            let mut r = client.get(&format!("{base}/")).send().await.expect("get");
            assert_eq!(&r.body().await.expect("body")[..], b"hello");
        });
        assert_eq!(server.stats().accepted, 1, "one connection for every request");
    }

    /// A chunked body streamed piece by piece, then the connection reused.
    fn streams_a_chunked_body(backend) {
        let server = api(backend);
        let base = format!("http://{}", server.addr);
        on_core(backend, async move {
            let client = Client::new();
            let mut r = client.get(&format!("{base}/stream")).send().await.expect("get");
            assert_eq!(r.header("transfer-encoding"), Some(&b"chunked"[..]));
            let mut got = Vec::new();
            while let Some(piece) = r.chunk().await.expect("chunk") {
                assert!(!piece.is_empty(), "no empty pieces");
                got.extend_from_slice(&piece);
            }
            assert_eq!(got, b"one,two,three");
            let mut r = client.get(&format!("{base}/big")).send().await.expect("get");
            let mut n = 0;
            while let Some(piece) = r.chunk().await.expect("chunk") {
                assert!(piece.iter().all(|&b| b == b'x'));
                n += piece.len();
            }
            assert_eq!(n, 100_000);
        });
        assert_eq!(server.stats().accepted, 1, "the connection was reused");
    }

    /// `body` stops at the limit, and says so; the limit is the
    /// request's, and `chunk` has none.
    fn the_body_limit_is_told(backend) {
        let server = api(backend);
        let base = format!("http://{}", server.addr);
        on_core(backend, async move {
            let client = Client::new();
            let url = format!("{base}/big");
            let mut r = client.get(&url).max_body(1000).send().await.expect("get");
            let e = r.body().await.expect_err("over the limit");
            assert_eq!(e.kind(), ErrorKind::TooLarge);
            assert_eq!(
                e.to_string(),
                format!("GET {url}: the response body is over the limit of 1000 bytes")
            );
            let mut r = client.get(&url).send().await.expect("get");
            assert_eq!(r.body().await.expect("within the default").len(), 100_000);
        });
    }

    /// `localhost` is resolved (on a thread, off the core) and cached.
    fn resolves_localhost(backend) {
        let server = api(backend);
        let url = format!("http://localhost:{}/", server.addr.port());
        on_core(backend, async move {
            let client = Client::new();
            for _ in 0..3 {
                let mut r = client.get(&url).send().await.expect("get localhost");
                assert_eq!(&r.body().await.expect("body")[..], b"hello");
            }
        });
    }

    /// A service that calls another with the client and passes the
    /// answer on: the client made per core by the factory.
    fn a_service_calls_another(backend) {
        let upstream = api(backend);
        let url = format!("http://{}/echo", upstream.addr);
        let front = TestServer::start(backend, Config::default(), move || Gateway {
            client: Client::new(),
            url: url.clone(),
        });
        let mut c = percore_test_kit::http::Client::connect(front.addr);
        for _ in 0..3 {
            let r = c.roundtrip(&post("/", "text/plain", b"through"));
            assert_eq!(r.status, 200);
            assert_eq!(r.body, b"POST:through");
        }
        assert_eq!(upstream.stats().accepted, 1, "the gateway's connection was reused");
    }
}

/// Forwards the body of each request to `url` and answers with the
/// method and body it echoes.
struct Gateway {
    client: Client,
    url: String,
}

impl Service for Gateway {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        let body = req.body().await?.to_vec();
        let mut answer = self.client.post(&self.url).body(body).send().await?;
        let method = answer.header("x-method").unwrap_or_default().to_vec();
        let echoed = answer.body().await?;
        res.write(&method);
        res.write(b":");
        res.write(&echoed);
        Ok(())
    }
}
