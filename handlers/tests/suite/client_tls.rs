//! The HTTP client over `https://`, on both backends: answers come back
//! over one kept-alive TLS connection, by IP address and by name, and a
//! server whose certificate comes from a CA the client does not trust is
//! refused in the handshake.

use crate::support;

use std::net::SocketAddr;

use percore::tls;
use percore::{Server, ServerHandle};
use percore_handlers::client::{Client, Config, ErrorKind};
use percore_handlers::http::{HttpEcho, HttpHandler, HELLO};
use percore_test_kit::*;
use support::client::on_core;

/// `HttpEcho` over TLS with `cert`'s certificate, on one core.
fn https_echo(backend: Backend, cert: &TestCert) -> ServerHandle {
    let tls = tls::server_config(&cert.cert, &cert.key).expect("server config");
    let server = Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], 0)))
        .cores([server_cpu()])
        .backend(backend)
        .tls(tls)
        .start(|_core| HttpHandler::new(HttpEcho))
        .expect("start");
    check_backend(&server, backend);
    server
}

/// A client that trusts `ca`.
fn client_trusting(ca: &std::path::Path) -> Config {
    let mut config = Config::default();
    config.tls = Some(tls::client_config(ca).expect("client config"));
    config
}

backend_tests! {
    parallel;
    /// GET and POST by IP address over one TLS connection, then by name
    /// (`localhost`, its own origin and so its own connection).
    fn answers_over_kept_alive_tls(backend) {
        let Some(cert) = TestCert::new(&format!("client-tls-{backend}")) else { return };
        let server = https_echo(backend, &cert);
        let port = server.local_addr().port();
        let config = client_trusting(&cert.ca);
        on_core(backend, async move {
            let client = Client::with_config(config);
            let by_ip = format!("https://127.0.0.1:{port}/");
            for _ in 0..3 {
                let mut r = client.get(&by_ip).send().await.expect("get");
                assert_eq!(&r.body().await.expect("body")[..], HELLO);
            }
            let mut r = client.post(&by_ip).body("over tls").send().await.expect("post");
            assert_eq!(&r.body().await.expect("body")[..], b"over tls");
            let by_name = format!("https://localhost:{port}/");
            let mut r = client.get(&by_name).send().await.expect("get by name");
            assert_eq!(&r.body().await.expect("body")[..], HELLO);
        });
        let handshakes = sum(&server.stats(), |s| s.tls_handshakes);
        assert_eq!(handshakes, 2, "one connection per origin, kept alive");
    }

    /// A certificate from another CA fails the handshake, and says why.
    fn untrusted_ca_is_refused(backend) {
        let Some(cert) = TestCert::new(&format!("client-tls-ca-{backend}")) else { return };
        let Some(other) = TestCert::new(&format!("client-tls-ca2-{backend}")) else { return };
        let server = https_echo(backend, &cert);
        let url = format!("https://{}/", server.local_addr());
        let config = client_trusting(&other.ca);
        let e = on_core(backend, async move {
            Client::with_config(config).get(&url).send().await.expect_err("untrusted")
        });
        assert!(matches!(e.kind(), ErrorKind::Tls(_)), "{e}");
        assert!(e.to_string().contains("not signed by a trusted CA"), "{e}");
    }
}
