//! TLS on both backends: an echo over TLS with a percore client, real
//! clients (`openssl s_client`: protocol versions, ALPN, SNI; Python's
//! `ssl`), clients that send garbage or plain HTTP instead of a handshake,
//! and a peer that leaves without `close_notify`. Peers that stall, stay
//! silent or ask for renegotiation are in `tls_peers`, with these helpers.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use percore::net::{Endpoint, Stream};
use percore::tls;
use percore_test_kit::*;

/// Echoes one read, then closes (with `close_notify`): what openssl's
/// client, which waits for the server's end, talks to.
struct EchoOnce;

impl percore::Handler for EchoOnce {
    async fn serve(&self, conn: percore::Connection) -> std::io::Result<()> {
        if let Some(buf) = conn.read().await? {
            conn.write_all(buf).await.0?;
        }
        conn.shutdown_write()
    }
}

/// A one-core echo server serving TLS with `cert`.
pub(crate) fn tls_echo(
    backend: Backend,
    cert: &TestCert,
    tweak: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> ServerHandle {
    let config = tls::server_config(&cert.cert, &cert.key).expect("server config");
    let server = tweak(builder(backend).tls(config))
        .start(|_core| PlainEcho)
        .expect("start");
    check_backend(&server, backend);
    server
}

/// Echoes `msg` through a percore TLS client; returns what came back and
/// the ALPN protocol.
pub(crate) fn echo_through_percore_client(
    backend: Backend,
    addr: std::net::SocketAddr,
    ca: &std::path::Path,
    msg: &'static [u8],
) -> (Vec<u8>, Option<Vec<u8>>) {
    let config = tls::client_config(ca).expect("client config");
    percore::block_on(backend, async move {
        let conn = Stream::connect(&Endpoint::Tcp(addr))
            .await
            .expect("connect");
        let conn = conn
            .connect_tls(config, "localhost")
            .await
            .expect("handshake");
        assert!(conn.is_tls());
        conn.write_all(msg.to_vec()).await.0.expect("write");
        conn.shutdown_write().expect("close_notify");
        let mut back = Vec::new();
        while let Some(buf) = conn.read().await.expect("read") {
            back.extend_from_slice(&buf);
        }
        (back, conn.tls_alpn())
    })
    .expect("block_on")
}

/// A blocking rustls client connected to `localhost` at `addr`.
pub(crate) fn blocking_tls_client(
    addr: std::net::SocketAddr,
    ca: &std::path::Path,
) -> tls::rustls::StreamOwned<tls::rustls::ClientConnection, std::net::TcpStream> {
    let config = tls::client_config(ca).expect("client config");
    let name = tls::rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = tls::rustls::ClientConnection::new(config, name).expect("client");
    tls::rustls::StreamOwned::new(conn, connect(addr))
}

/// One request through a blocking rustls client: `msg` echoed, or why not.
pub(crate) fn echo_once(
    addr: std::net::SocketAddr,
    ca: &std::path::Path,
    msg: &[u8],
) -> Result<(), String> {
    let mut client = blocking_tls_client(addr, ca);
    // A hang detector: an answer takes milliseconds.
    let limit = Some(Duration::from_secs(20));
    client
        .sock
        .set_read_timeout(limit)
        .map_err(|e| e.to_string())?;
    client.write_all(msg).map_err(|e| format!("write: {e}"))?;
    let mut back = vec![0; msg.len()];
    client
        .read_exact(&mut back)
        .map_err(|e| format!("read: {e}"))?;
    if back != msg {
        return Err(format!("echoed {back:?}"));
    }
    Ok(())
}

/// A client that has sent its ClientHello and read the server's first
/// answer, then stalls in the handshake: by then the server has seen it
/// begin.
pub(crate) struct Begun {
    client: tls::rustls::StreamOwned<tls::rustls::ClientConnection, std::net::TcpStream>,
}

impl Begun {
    pub(crate) fn new(addr: std::net::SocketAddr, ca: &std::path::Path) -> Begun {
        let mut client = blocking_tls_client(addr, ca);
        let tls::rustls::StreamOwned { conn, sock } = &mut client;
        while conn.wants_write() {
            conn.write_tls(sock).expect("ClientHello");
        }
        conn.read_tls(sock).expect("the server's answer");
        conn.process_new_packets().expect("the server's answer");
        Begun { client }
    }

    /// Ends the handshake and echoes `msg`.
    pub(crate) fn finish(mut self, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        self.client.write_all(msg)?;
        let mut back = vec![0; msg.len()];
        self.client.read_exact(&mut back)?;
        Ok(back)
    }
}

/// Runs `openssl s_client` against `addr` with `args`, sending `input`;
/// returns its exit status success and its output.
pub(crate) fn s_client(addr: std::net::SocketAddr, args: &[&str], input: &[u8]) -> (bool, String) {
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &addr.to_string(), "-ign_eof"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn openssl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("input");
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("output");
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("errors");
    let status = child.wait().expect("wait");
    (status.success(), out + &err)
}

/// Runs `openssl s_client` against `addr` with `args` and, once it has
/// connected, for each step sends its input and waits until the output
/// shows its text; its input stays open meanwhile. `Ok` when every step's
/// text came, else `Err` with the output, once the client ended or
/// `limit` passed: a hang detector, as each answer is expected at once.
pub(crate) fn s_client_until(
    addr: std::net::SocketAddr,
    args: &[&str],
    steps: &[(&[u8], &str)],
    limit: Duration,
) -> Result<String, String> {
    let mut child = Command::new("openssl")
        // Not `-ign_eof`, which turns the `R` and `Q` commands off.
        .args(["s_client", "-connect", &addr.to_string()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn openssl");
    let output = Arc::new(std::sync::Mutex::new(String::new()));
    let readers: Vec<_> = [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ]
    .into_iter()
    .map(|mut pipe| {
        let output = Arc::clone(&output);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]);
                output.lock().expect("output").push_str(&text);
            }
        })
    })
    .collect();
    let text = || output.lock().expect("output").clone();
    let mut stdin = child.stdin.take().expect("stdin");
    // The request goes once the handshake is done, as a user would type it.
    let connected = wait_for(limit, || text().contains("Verify return code"));
    let found = connected
        && steps.iter().all(|(input, wanted)| {
            stdin.write_all(input).is_ok() && wait_for(limit, || text().contains(wanted))
        });
    let _ = child.kill();
    let _ = child.wait();
    drop(stdin);
    for reader in readers {
        reader.join().expect("reader");
    }
    if found {
        Ok(text())
    } else {
        Err(text())
    }
}

/// Polls `done` every 10 ms until it holds (`true`) or `limit` passes.
pub(crate) fn wait_for(limit: Duration, done: impl Fn() -> bool) -> bool {
    let give_up = std::time::Instant::now() + limit;
    while std::time::Instant::now() < give_up {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

/// Python's `ssl` module as a client: an echo over TLS 1.3 and 1.2 with
/// ALPN, then a server name the certificate lacks, which Python refuses.
const PYTHON_CLIENT: &str = r#"
import socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
for version, name in ((ssl.TLSVersion.TLSv1_3, "localhost"),
                      (ssl.TLSVersion.TLSv1_2, "localhost"),
                      (ssl.TLSVersion.TLSv1_3, "wrong.example")):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ctx.maximum_version = version
    ctx.set_alpn_protocols(["http/1.1"])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
        try:
            s = ctx.wrap_socket(raw, server_hostname=name)
        except ssl.SSLCertVerificationError:
            print("refused", name)
            continue
        msg = b"hello from python"
        s.sendall(msg)
        back = b""
        while len(back) < len(msg):
            chunk = s.recv(len(msg) - len(back))
            if not chunk:
                break
            back += chunk
        print(s.version(), s.selected_alpn_protocol(), back.decode())
        s.unwrap()
        raw.close()
"#;

backend_tests! {
    /// Python's `ssl` client: echoes over TLS 1.3 and 1.2 with ALPN; a
    /// name the certificate lacks is refused by the client, and counted
    /// as a failed handshake by the server.
    fn python_ssl_client(backend) {
        let Some(cert) = TestCert::new(&format!("python-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let port = server.local_addr().port().to_string();
        let Some(out) = python3(PYTHON_CLIENT, &[&port, &cert.ca.display().to_string()]) else {
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "TLSv1.3 http/1.1 hello from python",
                "TLSv1.2 http/1.1 hello from python",
                "refused wrong.example",
            ]
        );
        let stats = wait_until(Duration::from_secs(60), "the connections closed", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.tls_failures) == 1
        });
        assert_eq!(sum(&stats, |c| c.tls_handshakes), 2);
        server.shutdown();
        server.join().expect("join");
    }

    /// A percore client echoes through a percore TLS server: every byte
    /// back, ALPN `http/1.1`, one handshake counted, and its cryptography's
    /// time.
    fn echo_over_tls(backend) {
        let Some(cert) = TestCert::new(&format!("echo-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let msg: &'static [u8] = pattern(7, 300 * 1024);
        let (back, alpn) = echo_through_percore_client(backend, server.local_addr(), &cert.ca, msg);
        assert_eq!(back.len(), msg.len());
        assert!(back == msg, "the echo differs");
        assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
        let stats = wait_until(Duration::from_secs(60), "the connection closed", || server.stats(), |s| sum(s, |c| c.active) == 0);
        assert_eq!(sum(&stats, |c| c.tls_handshakes), 1);
        assert_eq!(sum(&stats, |c| c.tls_failures), 0);
        assert_eq!(sum(&stats, |c| c.errors_io), 0);
        assert!(stats.iter().any(|c| !c.tls_handshake_time.is_zero()), "no handshake time in {stats:?}");
        server.shutdown();
        server.join().expect("join");
    }

    /// openssl's client: TLS 1.3 and 1.2 with SNI and ALPN echo; TLS 1.1
    /// is refused.
    fn openssl_clients(backend) {
        let Some(cert) = TestCert::new(&format!("openssl-{backend}")) else { return };
        let config = tls::server_config(&cert.cert, &cert.key).expect("server config");
        let server = builder(backend).tls(config).start(|_core| EchoOnce).expect("start");
        let addr = server.local_addr();
        let ca = cert.ca.display().to_string();
        for version in ["-tls1_3", "-tls1_2"] {
            let (ok, out) = s_client(addr, &[version, "-servername", "localhost", "-alpn", "http/1.1", "-CAfile", &ca, "-verify_return_error"], b"hello over openssl\n");
            assert!(ok, "{version}: {out}");
            assert!(out.contains("hello over openssl"), "{version}: no echo in {out}");
            assert!(out.contains("ALPN protocol: http/1.1"), "{version}: {out}");
            assert!(out.contains("Verify return code: 0 (ok)"), "{version}: {out}");
        }
        let (ok, out) = s_client(addr, &["-tls1_1", "-servername", "localhost"], b"old\n");
        assert!(!ok || !out.contains("old\n"), "TLS 1.1 was accepted: {out}");
        let stats = wait_until(Duration::from_secs(60), "the connections closed", || server.stats(), |s| sum(s, |c| c.active) == 0);
        assert_eq!(sum(&stats, |c| c.tls_handshakes), 2);
        assert_eq!(sum(&stats, |c| c.tls_failures), 1);
        server.shutdown();
        server.join().expect("join");
    }

    /// With a client CA, a client without a certificate, or with one from
    /// another CA, is refused; one the CA signed is served.
    fn client_certificates(backend) {
        let Some(cert) = TestCert::new(&format!("mtls-{backend}")) else { return };
        let stranger = TestCert::new(&format!("mtls-stranger-{backend}")).expect("openssl ran once");
        let config = tls::ServerTls::new(&cert.cert, &cert.key).client_ca(&cert.ca).build().expect("config");
        let server = builder(backend).tls(config).start(|_core| PlainEcho).expect("start");
        let addr = server.local_addr();
        let (client_cert, client_key) = cert.other("client.test");
        let (stranger_cert, stranger_key) = stranger.other("client.test");
        let trusted = tls::client_config_with_cert(&cert.ca, &client_cert, &client_key).expect("client config");
        let untrusted = tls::client_config_with_cert(&cert.ca, &stranger_cert, &stranger_key).expect("client config");
        let anonymous = tls::client_config(&cert.ca).expect("client config");
        let outcomes = percore::block_on(backend, async move {
            let mut outcomes = Vec::new();
            for config in [trusted, untrusted, anonymous] {
                let outcome = async {
                    let conn = Stream::connect(&Endpoint::Tcp(addr)).await?;
                    let conn = conn.connect_tls(config, "localhost").await?;
                    conn.write_all(b"who am I".to_vec()).await.0?;
                    conn.shutdown_write()?;
                    let mut back = Vec::new();
                    while let Some(buf) = conn.read().await? {
                        back.extend_from_slice(&buf);
                    }
                    Ok::<_, std::io::Error>(back)
                };
                outcomes.push(outcome.await);
            }
            outcomes
        })
        .expect("block_on");
        assert_eq!(outcomes[0].as_deref().expect("the trusted client is served"), b"who am I");
        assert!(outcomes[1].is_err(), "a client from another CA was served: {:?}", outcomes[1]);
        assert!(outcomes[2].is_err(), "a client without a certificate was served: {:?}", outcomes[2]);
        let stats = wait_until(Duration::from_secs(60), "the connections closed", || server.stats(), |s| sum(s, |c| c.active) == 0);
        assert_eq!(sum(&stats, |c| c.tls_handshakes), 1);
        assert_eq!(sum(&stats, |c| c.tls_failures), 2);
        server.shutdown();
        server.join().expect("join");
    }

    /// The certificate follows the name the client asks for, the default
    /// one any other name; a returning client resumes its session.
    fn sni_and_resumption(backend) {
        let Some(cert) = TestCert::new(&format!("sni-{backend}")) else { return };
        let (other_cert, other_key) = cert.other("other.test");
        let config = tls::ServerTls::new(&cert.cert, &cert.key).sni("other.test", &other_cert, &other_key).build().expect("config");
        let server = builder(backend).tls(config).start(|_core| EchoOnce).expect("start");
        let addr = server.local_addr();
        let ca = cert.ca.display().to_string();
        for (name, subject) in [("other.test", "other.test"), ("localhost", "localhost"), ("unknown.test", "localhost")] {
            let (ok, out) = s_client(addr, &["-servername", name, "-CAfile", &ca], b"sni\n");
            assert!(ok, "{name}: {out}");
            let served = out.lines().find_map(|l| l.trim().strip_prefix("0 s:")).unwrap_or_default().replace(' ', "");
            assert_eq!(served, format!("CN={subject}"), "{name}: {out}");
        }
        let session = cert.dir.join("session.pem").display().to_string();
        let (ok, out) = s_client(addr, &["-servername", "localhost", "-CAfile", &ca, "-sess_out", &session], b"first\n");
        assert!(ok && out.contains("New, TLSv1.3"), "{out}");
        let (ok, out) = s_client(addr, &["-servername", "localhost", "-CAfile", &ca, "-sess_in", &session], b"again\n");
        assert!(ok && out.contains("Reused, TLSv1.3"), "the session was not resumed: {out}");
        assert!(out.contains("again"), "{out}");
        server.shutdown();
        server.join().expect("join");
    }

    /// 1,000 clients that send random bytes instead of a ClientHello are
    /// closed and counted, while a TLS client connected before them keeps
    /// its echo going between every hundred, and a new client in the
    /// middle of them is served.
    fn garbage_instead_of_a_handshake(backend) {
        let Some(cert) = TestCert::new(&format!("garbage-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let addr = server.local_addr();
        let mut kept = blocking_tls_client(addr, &cert.ca);
        let mut rng = Rng::new(99);
        for i in 0..1000 {
            let mut sock = connect(addr);
            let junk: Vec<u8> = (0..rng.between(1, 4096)).map(|_| rng.between(0, 255) as u8).collect();
            let _ = sock.write_all(&junk);
            let mut rest = Vec::new();
            // The server answers with an alert or nothing, then closes.
            let _ = sock.read_to_end(&mut rest);
            if i % 100 == 0 {
                let msg = format!("after {i} garbage clients");
                kept.write_all(msg.as_bytes()).expect("write");
                let mut back = vec![0; msg.len()];
                kept.read_exact(&mut back).expect("the kept client's echo");
                assert_eq!(back, msg.as_bytes());
            }
            if i == 500 {
                let (back, _) = echo_through_percore_client(backend, addr, &cert.ca, b"still served");
                assert_eq!(back, b"still served");
            }
        }
        drop(kept);
        let stats = wait_until(Duration::from_secs(60), "every connection closed", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.tls_failures) == 1000
        });
        assert_eq!(sum(&stats, |c| c.tls_handshakes), 2);
        assert_eq!(sum(&stats, |c| c.panics), 0);
        server.shutdown();
        server.join().expect("join");
    }

    /// Plain HTTP sent to the TLS port gets nginx's answer in the clear
    /// (a raw request with a body still coming, then curl), is counted
    /// apart from the failed handshakes, and TLS clients go on being
    /// served.
    fn plain_http_gets_a_plain_400(backend) {
        let Some(cert) = TestCert::new(&format!("plain-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let addr = server.local_addr();
        let mut sock = connect(addr);
        sock.write_all(b"POST /form HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n").expect("send");
        // The rest of the body, sent after the answer may have gone out:
        // drained by the server, it does not turn the close into a reset.
        let _ = sock.write_all(&[b'x'; 100_000]);
        let mut answer = Vec::new();
        sock.read_to_end(&mut answer).expect("the answer, then the close");
        drop(sock);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        assert!(answer.contains("\r\nConnection: close\r\n"), "{answer}");
        assert!(answer.ends_with("\r\n\r\nThe plain HTTP request was sent to HTTPS port\n"), "{answer}");

        let mut counted = 1;
        if let Some(out) = curl(&["--include", &format!("http://{addr}/")]) {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert!(text.starts_with("HTTP/1.1 400 Bad Request"), "{text}");
            assert!(text.contains("The plain HTTP request was sent to HTTPS port"), "{text}");
            counted += 1;
        }
        let stats = wait_until(Duration::from_secs(60), "every connection closed", || server.stats(), |s| {
            sum(s, |c| c.active) == 0 && sum(s, |c| c.tls_plain_http) == counted
        });
        assert_eq!(sum(&stats, |c| c.tls_failures), 0);
        let (back, _) = echo_through_percore_client(backend, addr, &cert.ca, b"still served");
        assert_eq!(back, b"still served");
        server.shutdown();
        server.join().expect("join");
    }

    /// A peer that leaves without `close_notify` is an error to the
    /// reader (the data may be cut short), not a clean end.
    fn an_end_without_close_notify_is_an_error(backend) {
        let Some(cert) = TestCert::new(&format!("cut-{backend}")) else { return };
        let server = tls_echo(backend, &cert, |b| b);
        let config = tls::client_config(&cert.ca).expect("client config");
        let addr = server.local_addr();
        percore::block_on(backend, async move {
            let conn = Stream::connect(&Endpoint::Tcp(addr)).await.expect("connect");
            let conn = conn.connect_tls(Arc::clone(&config), "localhost").await.expect("handshake");
            conn.write_all(b"cut".to_vec()).await.0.expect("write");
            let back = conn.read().await.expect("read").expect("echo");
            assert_eq!(&back[..], b"cut");
            // Dropped: the socket closes with no close_notify.
        })
        .expect("block_on");
        let stats = wait_until(Duration::from_secs(60), "the connection ended", || server.stats(), |s| {
            sum(s, |c| c.active) == 0
        });
        assert_eq!(sum(&stats, |c| c.errors_io), 1, "the server's read took the cut for a clean end");
        server.shutdown();
        server.join().expect("join");
    }
}
