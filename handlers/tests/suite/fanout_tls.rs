//! The fan-out proxy to HTTPS upstreams, on both backends: the answers
//! come back through TLS on kept-alive connections, and an upstream whose
//! certificate does not match the name, or comes from a CA the proxy does
//! not trust, is refused (502) without a request being sent to it.

use crate::support;

use std::net::SocketAddr;

use percore::tls;
use percore::{Server, ServerHandle};
use percore_handlers::http::{HttpEcho, HttpHandler};
use percore_handlers::proxy::UpstreamTls;
use percore_test_kit::http::*;
use percore_test_kit::log_capture;
use percore_test_kit::upstream::entries;
use percore_test_kit::*;
use support::fanout::proxy_counted;
use support::http::TestServer;

/// A hang detector for counters that have no notification.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// `HttpEcho` over TLS with `cert`'s certificate, on one core.
fn https_echo(backend: Backend, cert: &std::path::Path, key: &std::path::Path) -> ServerHandle {
    let tls = tls::server_config(cert, key).expect("server config");
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

/// Full handshakes the upstream finished, and those that failed.
fn handshakes(server: &ServerHandle) -> (u64, u64) {
    let stats = server.stats();
    (
        sum(&stats, |s| s.tls_handshakes),
        sum(&stats, |s| s.tls_failures),
    )
}

backend_tests! {
    parallel;
    /// Two HTTPS upstreams checked against their IP address (the
    /// default): three requests, each answered by both, over one TLS
    /// connection per upstream kept alive across them.
    fn answers_come_back_over_kept_alive_tls(backend) {
        let Some(cert) = TestCert::new(&format!("fanout-tls-{backend}")) else { return };
        let ups = [
            https_echo(backend, &cert.cert, &cert.key),
            https_echo(backend, &cert.cert, &cert.key),
        ];
        let addrs: Vec<SocketAddr> = ups.iter().map(ServerHandle::local_addr).collect();
        let client_tls = tls::client_config(&cert.ca).expect("client config");
        let (px, counted) = proxy_counted(backend, &addrs, |c| {
            c.upstream_tls = Some(UpstreamTls::new(client_tls));
        });
        let mut c = Client::connect(px.addr);
        for round in 0..3 {
            let payload = format!("round {round}");
            let r = c.roundtrip(&post("/p", "text/plain", payload.as_bytes()));
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            let e = entries(&r.body);
            assert_eq!(e.len(), 2, "{}", String::from_utf8_lossy(&r.body));
            for (_, status, body) in &e {
                assert_eq!((*status, body.as_str()), (200, payload.as_str()));
            }
        }
        let stats = counted.get();
        assert_eq!((stats.connects, stats.reuses, stats.errors_connect), (2, 4, 0));
        for up in &ups {
            assert_eq!(handshakes(up), (1, 0), "one handshake per upstream");
        }
        drop(c);
        drop(px);
        for up in ups {
            up.shutdown();
            up.join().expect("join");
        }
    }

    /// A server name the certificate does not carry: the handshake is
    /// refused by the proxy, the client gets 502, and the upstream sees
    /// a failed handshake and no request.
    fn a_certificate_for_another_name_is_refused(backend) {
        let Some(cert) = TestCert::new(&format!("fanout-name-{backend}")) else { return };
        log_capture::install();
        let up = https_echo(backend, &cert.cert, &cert.key);
        let client_tls = tls::client_config(&cert.ca).expect("client config");
        let (px, counted) = proxy_counted(backend, &[up.local_addr()], |c| {
            c.upstream_tls = Some(UpstreamTls::new(client_tls).server_name("api.example"));
        });
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(&get("/"));
        assert_eq!(r.status, 502, "{}", String::from_utf8_lossy(&r.body));
        let stats = counted.get();
        assert_eq!((stats.connects, stats.errors_connect, stats.sub_requests), (1, 1, 0));
        let seen = wait_until(LIMIT, "the failed handshake", || handshakes(&up), |h| h.1 == 1);
        assert_eq!(seen, (0, 1));
        let why = "TLS handshake failed: the certificate is not for this server name";
        let lines = log_capture::lines_with(&[&up.local_addr().to_string(), why]);
        assert!(!lines.is_empty(), "the proxy logs why");
        drop(c);
        drop(px);
        up.shutdown();
        up.join().expect("join");
    }

    /// An upstream whose certificate another CA signed: refused, 502.
    fn a_certificate_from_an_untrusted_ca_is_refused(backend) {
        let Some(cert) = TestCert::new(&format!("fanout-ca-{backend}")) else { return };
        let Some(other) = TestCert::new(&format!("fanout-ca2-{backend}")) else { return };
        log_capture::install();
        let up = https_echo(backend, &other.cert, &other.key);
        let client_tls = tls::client_config(&cert.ca).expect("client config");
        let (px, counted) = proxy_counted(backend, &[up.local_addr()], |c| {
            c.upstream_tls = Some(UpstreamTls::new(client_tls).server_name("localhost"));
        });
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(&get("/"));
        assert_eq!(r.status, 502, "{}", String::from_utf8_lossy(&r.body));
        let stats = counted.get();
        assert_eq!((stats.errors_connect, stats.sub_requests), (1, 0));
        let seen = wait_until(LIMIT, "the refused handshake", || handshakes(&up), |h| h.1 == 1);
        assert_eq!(seen, (0, 1));
        let why = "TLS handshake failed: the certificate is not signed by a trusted CA";
        let lines = log_capture::lines_with(&[&up.local_addr().to_string(), why]);
        assert!(!lines.is_empty(), "the proxy logs why");
        drop(c);
        drop(px);
        up.shutdown();
        up.join().expect("join");
    }

    /// TLS to a plain-HTTP upstream fails the handshake: 502, nothing
    /// forwarded in the clear.
    fn a_plain_upstream_is_not_spoken_to_in_the_clear(backend) {
        let Some(cert) = TestCert::new(&format!("fanout-plain-{backend}")) else { return };
        let up = TestServer::echo(backend);
        let client_tls = tls::client_config(&cert.ca).expect("client config");
        let (px, counted) = proxy_counted(backend, &[up.addr], |c| {
            c.upstream_tls = Some(UpstreamTls::new(client_tls));
        });
        let mut c = Client::connect(px.addr);
        let r = c.roundtrip(&get("/"));
        assert_eq!(r.status, 502, "{}", String::from_utf8_lossy(&r.body));
        let stats = counted.get();
        assert_eq!((stats.errors_connect, stats.sub_requests), (1, 0));
        drop(c);
        drop(px);
    }
}
