//! WebSockets over HTTP/2 (RFC 8441) from the `h2` crate's client, made
//! blocking for the tests: one HTTP/2 connection per [`H2Client`], driven
//! by a thread of its own, and each WebSocket's stream bridged to one end
//! of a Unix socket pair, whose other end a [`WsClient`] reads and writes
//! as it would a TCP connection. So the raw frames of the HTTP/1.1 tests
//! (and their conformance table) run over a stream unchanged.
//!
//! The bridge passes each side's end on: the server's `END_STREAM` (or
//! reset) shuts the pair's write side down, and the test's shutdown of
//! its side sends `END_STREAM`, or `RST_STREAM CANCEL` after
//! [`H2Ws::reset`].

use std::future::poll_fn;
use std::net::{Shutdown, SocketAddr};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::Poll;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::ext::Protocol;
use http::{HeaderMap, Method, Request};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) use percore_test_kit::ws::*;

/// A minute: any wait longer is a hang.
const HANG: Duration = Duration::from_secs(60);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// One HTTP/2 connection in clear text (prior knowledge).
pub(crate) struct H2Client {
    send: SendRequest<Bytes>,
}

/// How the server ended a WebSocket's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// `END_STREAM`.
    End,
    /// `RST_STREAM` (or the connection's end) with this reason.
    Reset(Option<h2::Reason>),
}

/// An answer to an extended CONNECT: its status and fields, and the
/// WebSocket when it is a 200.
pub(crate) struct Opened {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) ws: Option<H2Ws>,
}

/// A WebSocket on an HTTP/2 stream, as a raw client.
pub(crate) struct H2Ws {
    pub(crate) client: WsClient<StdUnixStream>,
    reset: Arc<AtomicBool>,
    ended: Arc<Mutex<Option<Ended>>>,
    pump: Option<JoinHandle<()>>,
}

impl H2Client {
    /// Connects to `addr`, and waits for the server's SETTINGS (by a
    /// request of `/` answered).
    pub(crate) fn connect(addr: SocketAddr) -> H2Client {
        let (tx, rx) = mpsc::channel();
        // The connection's thread ends with the connection, once every
        // handle to it is dropped.
        std::thread::spawn(move || {
            runtime().block_on(async move {
                let socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
                let (send, conn) = h2::client::handshake(socket).await.expect("handshake");
                tx.send(send).expect("hand the connection over");
                let _ = conn.await;
            });
        });
        let send = rx.recv_timeout(HANG).expect("an HTTP/2 connection");
        let client = H2Client { send };
        let (status, _) = client.get("/");
        assert!(status > 0);
        client
    }

    /// Whether the server's SETTINGS allow extended CONNECT.
    pub(crate) fn connect_protocol(&self) -> bool {
        self.send.is_extended_connect_protocol_enabled()
    }

    /// `GET path`: its status and body.
    pub(crate) fn get(&self, path: &str) -> (u16, Vec<u8>) {
        let send = self.send.clone();
        let path = path.to_owned();
        on_thread(move || {
            runtime().block_on(async move {
                let mut send = send.ready().await.expect("ready");
                let req = Request::get(format!("http://localhost{path}"))
                    .body(())
                    .expect("request");
                let (resp, _) = send.send_request(req, true).expect("send");
                let resp = resp.await.expect("response");
                let status = resp.status().as_u16();
                let mut body = resp.into_body();
                let mut got = Vec::new();
                while let Some(data) = body.data().await {
                    let data = data.expect("data");
                    let _ = body.flow_control().release_capacity(data.len());
                    got.extend_from_slice(&data);
                }
                (status, got)
            })
        })
    }

    /// A plain `CONNECT` to `authority` (no `:protocol`): its status.
    pub(crate) fn plain_connect(&self, authority: &str) -> u16 {
        let send = self.send.clone();
        let authority = authority.to_owned();
        on_thread(move || {
            runtime().block_on(async move {
                let mut send = send.ready().await.expect("ready");
                let req = Request::builder()
                    .method(Method::CONNECT)
                    .uri(authority)
                    .body(())
                    .expect("request");
                let (resp, _stream) = send.send_request(req, false).expect("send");
                resp.await.expect("response").status().as_u16()
            })
        })
    }

    /// An extended CONNECT to `path` with `:protocol` `protocol` and
    /// `fields`; with a 200, the stream bridged to a [`WsClient`].
    pub(crate) fn open(&self, path: &str, protocol: &str, fields: &[(&str, &str)]) -> Opened {
        let mut req = Request::builder()
            .method(Method::CONNECT)
            .uri(format!("http://localhost{path}"))
            .extension(Protocol::from(protocol));
        for (name, value) in fields {
            req = req.header(*name, *value);
        }
        let req = req.body(()).expect("request");
        let send = self.send.clone();
        let (tx, rx) = mpsc::channel();
        let reset = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(Mutex::new(None));
        let (flag, end) = (reset.clone(), ended.clone());
        let pump = std::thread::spawn(move || {
            runtime().block_on(async move {
                let mut send = send.ready().await.expect("ready");
                let (resp, stream) = send.send_request(req, false).expect("send");
                let resp = resp.await.expect("response");
                let (parts, recv) = resp.into_parts();
                if parts.status != 200 {
                    let _ = tx.send((parts.status.as_u16(), parts.headers, None));
                    return;
                }
                let (ours, theirs) = StdUnixStream::pair().expect("socket pair");
                theirs.set_nonblocking(true).expect("nonblocking");
                let theirs = tokio::net::UnixStream::from_std(theirs).expect("tokio socket");
                let _ = tx.send((200, parts.headers, Some(ours)));
                let how = pump(theirs, stream, recv, &flag).await;
                *end.lock().expect("ended") = Some(how);
            });
        });
        let (status, headers, ours) = rx.recv_timeout(HANG).expect("an answer");
        let ws = ours.map(|ours| {
            ours.set_read_timeout(Some(HANG)).expect("timeout");
            ours.set_write_timeout(Some(HANG)).expect("timeout");
            H2Ws {
                client: WsClient::new(ours),
                reset,
                ended,
                pump: Some(pump),
            }
        });
        Opened {
            status,
            headers,
            ws,
        }
    }

    /// A WebSocket on `path` with `Sec-WebSocket-Version: 13` and
    /// `fields`; panics on another answer than 200.
    pub(crate) fn websocket(&self, path: &str, fields: &[(&str, &str)]) -> H2Ws {
        let mut all = vec![("sec-websocket-version", "13")];
        all.extend_from_slice(fields);
        let opened = self.open(path, "websocket", &all);
        assert_eq!(opened.status, 200, "{:?}", opened.headers);
        opened.ws.expect("the WebSocket")
    }
}

impl H2Ws {
    /// Resets the stream (`RST_STREAM CANCEL`).
    pub(crate) fn reset(&mut self) {
        self.reset.store(true, Ordering::SeqCst);
        let _ = self.client.stream.shutdown(Shutdown::Write);
    }

    /// Sends `END_STREAM`: the client sends nothing more.
    pub(crate) fn end(&mut self) {
        let _ = self.client.stream.shutdown(Shutdown::Write);
    }

    /// How the server ended the stream, once it did (after the client saw
    /// the end of its reads).
    pub(crate) fn ended(&mut self) -> Option<Ended> {
        if let Some(pump) = self.pump.take() {
            let _ = self.client.stream.shutdown(Shutdown::Write);
            pump.join().expect("the bridge");
        }
        *self.ended.lock().expect("ended")
    }
}

/// Runs `f` on a thread of its own (a runtime of its own), for its result.
fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("the client's thread")
}

/// Copies between the socket pair's end and the stream, both ways, until
/// both have ended.
async fn pump(
    mut pair: tokio::net::UnixStream,
    mut send: h2::SendStream<Bytes>,
    mut recv: h2::RecvStream,
    reset: &AtomicBool,
) -> Ended {
    // Toward the test: what was received and not yet written to the pair.
    let mut inbound = Bytes::new();
    let mut server_ended: Option<Ended> = None;
    // Toward the server: read from the pair and not yet sent.
    let mut outbound = Bytes::new();
    let mut client_ended = false;
    // The stream took no more of the test's bytes.
    let mut refused = false;
    let mut buf = vec![0u8; 64 * 1024];
    poll_fn(|cx| loop {
        let mut progress = false;
        // Server to test.
        if !inbound.is_empty() {
            match Pin::new(&mut pair).poll_write(cx, &inbound) {
                Poll::Ready(Ok(n)) => {
                    let _ = recv.flow_control().release_capacity(n);
                    let _ = inbound.split_to(n);
                    progress = true;
                }
                Poll::Ready(Err(_)) => {
                    // The test closed its end.
                    let n = inbound.len();
                    let _ = recv.flow_control().release_capacity(n);
                    inbound.clear();
                }
                Poll::Pending => {}
            }
        } else if server_ended.is_none() {
            match recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    inbound = data;
                    progress = true;
                }
                Poll::Ready(Some(Err(e))) => {
                    server_ended = Some(Ended::Reset(e.reason()));
                    let _ = Pin::new(&mut pair).poll_shutdown(cx);
                    progress = true;
                }
                Poll::Ready(None) => {
                    server_ended = Some(Ended::End);
                    let _ = Pin::new(&mut pair).poll_shutdown(cx);
                    progress = true;
                }
                Poll::Pending => {}
            }
        }
        // Test to server; once the stream takes no more, what the test
        // still writes is read and dropped, as a closed socket would.
        if !client_ended {
            if !outbound.is_empty() {
                send.reserve_capacity(outbound.len());
                match send.poll_capacity(cx) {
                    Poll::Ready(Some(Ok(n))) if n > 0 => {
                        let piece = outbound.split_to(n.min(outbound.len()));
                        if send.send_data(piece, false).is_err() {
                            outbound.clear();
                            refused = true;
                        }
                        progress = true;
                    }
                    Poll::Ready(Some(Ok(_))) => {}
                    Poll::Ready(Some(Err(_)) | None) => {
                        outbound.clear();
                        refused = true;
                        progress = true;
                    }
                    Poll::Pending => {}
                }
            } else {
                let mut read = ReadBuf::new(&mut buf);
                match Pin::new(&mut pair).poll_read(cx, &mut read) {
                    Poll::Ready(Ok(())) if !read.filled().is_empty() => {
                        if !refused {
                            outbound = Bytes::copy_from_slice(read.filled());
                        }
                        progress = true;
                    }
                    Poll::Ready(_) => {
                        client_ended = true;
                        if refused {
                            // Nothing to end: the stream is over.
                        } else if reset.load(Ordering::SeqCst) {
                            send.send_reset(h2::Reason::CANCEL);
                        } else {
                            let _ = send.send_data(Bytes::new(), true);
                        }
                        progress = true;
                    }
                    Poll::Pending => {}
                }
            }
        }
        if let Some(how) = server_ended {
            if client_ended && inbound.is_empty() {
                return Poll::Ready(how);
            }
        }
        if !progress {
            return Poll::Pending;
        }
    })
    .await
}
