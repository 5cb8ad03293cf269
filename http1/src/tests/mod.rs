//! Tests of the protocol core as a connection loop would drive it: a small
//! in-memory [`Machine`] plays the service layer, so every FAULTS.md row can
//! be checked on exact bytes, at every split, without a socket.

mod faults;
mod fuzz;
mod retry;
mod shotgun;

use super::{header_storage, max_head_len, parse_head, BodyDecoder, HeadRetry, Limits};

/// What the connection loop would do for each request in a byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// A complete request, ready for the handler.
    Request {
        method: String,
        path: String,
        version: u8,
        body: Vec<u8>,
        keep_alive: bool,
        expect_continue: bool,
    },
    /// An error response with this status; the connection then closes.
    Error(u16),
}

/// The service-layer loop, minus the socket.
pub(super) struct Machine {
    limits: Limits,
    buf: Vec<u8>,
    retry: HeadRetry,
    /// Calls of `parse_head` so far.
    pub(super) parses: usize,
    body: Option<(Event, BodyDecoder)>,
    pub(super) events: Vec<Event>,
    pub(super) closed: bool,
}

impl Machine {
    pub(super) fn new(limits: Limits) -> Self {
        Self {
            limits,
            buf: Vec::new(),
            retry: HeadRetry::default(),
            parses: 0,
            body: None,
            events: Vec::new(),
            closed: false,
        }
    }

    /// Whether a request is waiting for more body bytes.
    pub(super) fn in_body(&self) -> Option<&BodyDecoder> {
        self.body.as_ref().map(|(_, dec)| dec)
    }

    /// Appends `bytes` and processes everything that is complete.
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        if self.closed {
            return;
        }
        self.buf.extend_from_slice(bytes);
        // Every pass consumes at least one byte or returns, so this bound
        // only guards against a progress bug turning into a hang.
        for _ in 0..2 * self.buf.len() + 4 {
            if self.closed || !self.step() {
                return;
            }
        }
        panic!("no progress on {:?}", String::from_utf8_lossy(&self.buf));
    }

    /// The end of the input. An incomplete head whose retry is not due yet
    /// is parsed once more: in the connection loop such a head ends at the
    /// head timeout (408) if no more bytes come, and this stands in for
    /// that end without modelling time.
    pub(super) fn finish(&mut self) {
        if self.closed || self.body.is_some() || self.buf.is_empty() {
            return;
        }
        self.retry.reset();
        self.feed(b"");
    }

    /// One head or body step; `false` when more input is needed.
    fn step(&mut self) -> bool {
        let Some((event, dec)) = &mut self.body else {
            // As the connection loop does: an incomplete head is parsed
            // again only when that may tell something new.
            if !self.retry.due(&self.buf, max_head_len(&self.limits)) {
                return false;
            }
            self.parses += 1;
            let mut storage = header_storage::<100>();
            return match parse_head(&self.buf, &mut storage, &self.limits) {
                Ok(None) => {
                    self.retry.tried(self.buf.len());
                    false
                }
                Ok(Some(head)) => {
                    self.retry.reset();
                    assert!(head.head_len <= self.buf.len(), "head_len past input");
                    let event = Event::Request {
                        method: head.method.to_owned(),
                        path: head.target.to_owned(),
                        version: head.version,
                        body: Vec::new(),
                        keep_alive: head.keep_alive,
                        expect_continue: head.expect_continue,
                    };
                    let dec = BodyDecoder::new(head.body, &self.limits);
                    let n = head.head_len;
                    self.buf.drain(..n);
                    self.body = Some((event, dec));
                    true
                }
                Err(e) => self.fail(e.status),
            };
        };
        match dec.decode(&self.buf) {
            Ok(d) => {
                assert!(d.consumed <= self.buf.len(), "consumed past input");
                assert!(d.data.end <= d.consumed, "data past consumed");
                if let Event::Request { body, .. } = event {
                    body.extend_from_slice(&self.buf[d.data.clone()]);
                }
                self.buf.drain(..d.consumed);
                if d.done {
                    if let Some((event, _)) = self.body.take() {
                        let keep = matches!(
                            event,
                            Event::Request {
                                keep_alive: true,
                                ..
                            }
                        );
                        self.events.push(event);
                        self.closed = !keep;
                    }
                    return true;
                }
                !self.buf.is_empty()
            }
            Err(e) => self.fail(e.status),
        }
    }

    fn fail(&mut self, status: u16) -> bool {
        self.events.push(Event::Error(status));
        self.closed = true;
        false
    }
}

/// Events for `input` fed in one piece, with default limits.
pub(super) fn run(input: &[u8]) -> Vec<Event> {
    let mut m = Machine::new(Limits::default());
    m.feed(input);
    m.events
}

/// Events for `input` fed in pieces cut at `cuts` (ascending offsets).
pub(super) fn run_split(input: &[u8], cuts: &[usize]) -> Vec<Event> {
    let mut m = Machine::new(Limits::default());
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        m.feed(&input[from..cut]);
        from = cut;
    }
    m.events
}

/// The status of the single error `input` must produce.
pub(super) fn status(input: &[u8]) -> u16 {
    match run(input).as_slice() {
        [.., Event::Error(s)] => *s,
        other => panic!(
            "expected an error for {:?}, got {other:?}",
            String::from_utf8_lossy(input)
        ),
    }
}

/// A request event with default flags, for comparisons.
pub(super) fn request(method: &str, path: &str, body: &[u8]) -> Event {
    Event::Request {
        method: method.into(),
        path: path.into(),
        version: 1,
        body: body.to_vec(),
        keep_alive: true,
        expect_continue: false,
    }
}
