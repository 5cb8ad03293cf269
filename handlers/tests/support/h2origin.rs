//! A scripted HTTP/2 origin with frames written by hand, for what a real
//! server does not do on demand: a GOAWAY naming a chosen last stream, a
//! refused or reset stream, a request never answered. It reads frames
//! on blocking `std::net` sockets, a thread per connection, answers
//! SETTINGS and PING, and plays its [`Script`] on each request's HEADERS.

use std::io::{self, Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::h2raw::{frame, GOAWAY, HEADERS, PREFACE, RST_STREAM, SETTINGS};

const DATA: u8 = 0;
const PING: u8 = 6;
const ACK: u8 = 0x1;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const INTERNAL_ERROR: u32 = 0x2;
const REFUSED_STREAM: u32 = 0x7;

/// What the origin does with requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Script {
    /// On the first connection, once two requests came: GOAWAY naming
    /// the first as the last taken, an answer to it (`first`), and the
    /// end of the connection. Later connections answer `again`.
    GoAwayAfterTwo,
    /// GOAWAY naming the request as taken, and the end of the connection
    /// without an answer.
    GoAwayUnanswered,
    /// The first request refused (`REFUSED_STREAM`), the others answered
    /// `answered`.
    RefuseFirst,
    /// Every request reset with `INTERNAL_ERROR`.
    Reset,
    /// No request ever answered.
    Never,
}

/// The connections an origin serves: each (to end it at the drop) with
/// its thread.
type Served = Arc<Mutex<Vec<(TcpStream, JoinHandle<()>)>>>;

/// The origin, on `127.0.0.1:0`, stopped when dropped.
pub(crate) struct H2Origin {
    pub(crate) addr: SocketAddr,
    /// Connections accepted.
    pub(crate) connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    served: Served,
}

impl H2Origin {
    pub(crate) fn start(script: Script) -> H2Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the origin");
        let addr = listener.local_addr().expect("its address");
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped) = (Arc::clone(&connections), Arc::clone(&stop));
        let served = Arc::new(Mutex::new(Vec::new()));
        let threads = Arc::clone(&served);
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let Ok(handle) = conn.try_clone() else {
                    continue;
                };
                let n = count.fetch_add(1, Ordering::SeqCst);
                let thread = std::thread::spawn(move || {
                    // The client's end (reset, close), or the origin's
                    // drop, ends it.
                    let _ = serve(conn, script, n);
                });
                threads.lock().unwrap().push((handle, thread));
            }
        });
        H2Origin {
            addr,
            connections,
            stop,
            accept: Some(accept),
            served,
        }
    }
}

impl Drop for H2Origin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop to see the stop.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        for (conn, thread) in self.served.lock().unwrap().drain(..) {
            let _ = conn.shutdown(Shutdown::Both);
            let _ = thread.join();
        }
    }
}

/// A frame: type, flags, stream, payload.
type Frame = (u8, u8, u32, Vec<u8>);

/// One frame; `None` at the end of stream.
fn read_frame(s: &mut TcpStream) -> io::Result<Option<Frame>> {
    let mut head = [0; 9];
    match s.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0; len];
    s.read_exact(&mut payload)?;
    Ok(Some((head[3], head[4], stream, payload)))
}

/// `:status 200` (HPACK static index 8) and `body`, ending stream `id`.
fn answer(id: u32, body: &[u8]) -> Vec<u8> {
    let mut out = frame(HEADERS, END_HEADERS, id, &[0x88]);
    out.extend(frame(DATA, END_STREAM, id, body));
    out
}

fn goaway(last: u32) -> Vec<u8> {
    let mut payload = last.to_be_bytes().to_vec();
    payload.extend_from_slice(&0u32.to_be_bytes()); // NO_ERROR
    frame(GOAWAY, 0, 0, &payload)
}

/// Serves connection `n` (from 0) by `script`.
fn serve(mut s: TcpStream, script: Script, n: usize) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut preface = [0; 24];
    s.read_exact(&mut preface)?;
    assert_eq!(&preface[..], PREFACE, "the client's preface");
    s.write_all(&frame(SETTINGS, 0, 0, &[]))?;
    let mut requests = Vec::new();
    while let Some((kind, flags, id, payload)) = read_frame(&mut s)? {
        let out = match kind {
            SETTINGS if flags & ACK == 0 => frame(SETTINGS, ACK, 0, &[]),
            PING if flags & ACK == 0 => frame(PING, ACK, 0, &payload),
            HEADERS => {
                requests.push(id);
                let (out, end) = play(script, n, &requests);
                s.write_all(&out)?;
                if end {
                    // Ends the connection once the client has read it
                    // all: reading on until it closes, so that nothing
                    // unread turns the close into a reset.
                    s.shutdown(Shutdown::Write)?;
                    while read_frame(&mut s)?.is_some() {}
                    return Ok(());
                }
                continue;
            }
            _ => continue,
        };
        s.write_all(&out)?;
    }
    Ok(())
}

/// What `script` sends on connection `n` once `requests` came (the last
/// just now), and whether the connection then ends.
fn play(script: Script, n: usize, requests: &[u32]) -> (Vec<u8>, bool) {
    let id = requests[requests.len() - 1];
    let reset = |reason: u32| frame(RST_STREAM, 0, id, &reason.to_be_bytes());
    match script {
        Script::GoAwayAfterTwo if n == 0 => {
            if requests.len() < 2 {
                return (Vec::new(), false);
            }
            let mut out = goaway(requests[0]);
            out.extend(answer(requests[0], b"first"));
            (out, true)
        }
        Script::GoAwayAfterTwo => (answer(id, b"again"), false),
        Script::GoAwayUnanswered => (goaway(id), true),
        Script::RefuseFirst if n == 0 && requests.len() == 1 => (reset(REFUSED_STREAM), false),
        Script::RefuseFirst => (answer(id, b"answered"), false),
        Script::Reset => (reset(INTERNAL_ERROR), false),
        Script::Never => (Vec::new(), false),
    }
}
