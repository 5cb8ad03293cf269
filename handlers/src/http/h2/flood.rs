//! Flood detection for HTTP/2 (FAULTS L3): a client that sends frames
//! which cost the server work but carry no request or response, such as
//! PING, SETTINGS, WINDOW_UPDATE, PRIORITY, empty DATA or unknown
//! frames, in a loop, is cut off with GOAWAY `ENHANCE_YOUR_CALM`.
//!
//! The rule is nginx's: what a client sends beyond payload is tolerated
//! in proportion to the payload that flows. Frame headers and frames of no
//! payload type are *overhead*; DATA, HEADERS and CONTINUATION payloads,
//! both ways, are *payload*. A connection whose received overhead passes
//! a fixed allowance plus the payload so far is a flood. A real client's
//! overhead (a WINDOW_UPDATE per window of a download, a keep-alive PING)
//! stays far below that; a flood of 17-byte PINGs reaches the default
//! allowance (1 MiB) after about 60,000 frames, whatever the rate, so the CPU a flood can
//! take is bounded by bytes, not by the machine's speed.

use std::cell::Cell;

const FRAME_HEAD: usize = 9;
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;

/// Splits one direction's bytes into frames, across reads.
#[derive(Debug, Default)]
pub(super) struct FrameMeter {
    /// Bytes to pass over before the first frame (the client's preface).
    skip: usize,
    head: [u8; FRAME_HEAD],
    have: usize,
    /// Payload bytes left of the current frame, and whether they count
    /// as payload.
    left: usize,
    useful: bool,
}

/// Bytes seen one way, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) overhead: u64,
    pub(super) payload: u64,
}

impl FrameMeter {
    /// A meter that passes over the first `skip` bytes.
    pub(super) fn skipping(skip: usize) -> Self {
        FrameMeter {
            skip,
            ..FrameMeter::default()
        }
    }

    /// Counts `bytes`, the next ones of the direction, into `tally`.
    pub(super) fn feed(&mut self, mut bytes: &[u8], tally: &mut Tally) {
        let skipped = self.skip.min(bytes.len());
        self.skip -= skipped;
        bytes = &bytes[skipped..];
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = self.left.min(bytes.len());
                if self.useful {
                    tally.payload += n as u64;
                } else {
                    tally.overhead += n as u64;
                }
                self.left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (FRAME_HEAD - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == FRAME_HEAD {
                self.have = 0;
                tally.overhead += FRAME_HEAD as u64;
                let len = u32::from_be_bytes([0, self.head[0], self.head[1], self.head[2]]);
                self.left = len as usize;
                self.useful = matches!(self.head[3], DATA | HEADERS | CONTINUATION);
            }
        }
    }
}

/// One connection's meters and verdict, shared by its I/O (which feeds
/// them) and its loop (which acts on the verdict).
#[derive(Debug, Default)]
pub(super) struct FloodGuard {
    /// Overhead the connection may send before it must be matched by
    /// payload.
    allowance: u64,
    received: Cell<Tally>,
    sent: Cell<Tally>,
    flooded: Cell<bool>,
}

impl FloodGuard {
    pub(super) fn new(allowance: u64) -> Self {
        FloodGuard {
            allowance,
            ..FloodGuard::default()
        }
    }

    /// Counts received bytes; true once the connection is a flood.
    pub(super) fn received(&self, meter: &mut FrameMeter, bytes: &[u8]) -> bool {
        let mut tally = self.received.get();
        meter.feed(bytes, &mut tally);
        self.received.set(tally);
        let payload = tally.payload + self.sent.get().payload;
        if tally.overhead > self.allowance + payload {
            self.flooded.set(true);
        }
        self.flooded.get()
    }

    /// Counts sent bytes.
    pub(super) fn sent(&self, meter: &mut FrameMeter, bytes: &[u8]) {
        let mut tally = self.sent.get();
        meter.feed(bytes, &mut tally);
        self.sent.set(tally);
    }

    /// Whether the connection has been found a flood.
    pub(super) fn flooded(&self) -> bool {
        self.flooded.get()
    }

    /// What the connection received so far.
    pub(super) fn received_tally(&self) -> Tally {
        self.received.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, len: usize) -> Vec<u8> {
        let mut f = (len as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, 0, 0, 0, 0, 1]);
        f.resize(FRAME_HEAD + len, 7);
        f
    }

    #[test]
    fn frames_split_anywhere_count_the_same() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(4, 6)); // SETTINGS
        bytes.extend(frame(HEADERS, 20));
        bytes.extend(frame(DATA, 100));
        bytes.extend(frame(6, 8)); // PING
        bytes.extend(frame(DATA, 0));
        let whole = {
            let mut t = Tally::default();
            FrameMeter::skipping(24).feed(&bytes, &mut t);
            t
        };
        assert_eq!(
            whole,
            Tally {
                overhead: 5 * 9 + 6 + 8,
                payload: 120
            }
        );
        for cut in 0..bytes.len() {
            let (mut t, mut m) = (Tally::default(), FrameMeter::skipping(24));
            m.feed(&bytes[..cut], &mut t);
            m.feed(&bytes[cut..], &mut t);
            assert_eq!(t, whole, "cut at {cut}");
        }
    }

    const ALLOWANCE: u64 = 1024 * 1024;

    #[test]
    fn a_ping_flood_is_found_and_a_download_is_not() {
        let guard = FloodGuard::new(ALLOWANCE);
        let (mut inbound, mut outbound) = (FrameMeter::default(), FrameMeter::default());
        // A download: a WINDOW_UPDATE (13 bytes) per 64 KiB sent.
        for _ in 0..10_000 {
            guard.sent(&mut outbound, &frame(DATA, 65_536));
            assert!(!guard.received(&mut inbound, &frame(8, 4)));
        }
        let ping = frame(6, 8);
        let guard = FloodGuard::new(ALLOWANCE);
        let mut inbound = FrameMeter::default();
        let pings = (0..100_000)
            .take_while(|_| !guard.received(&mut inbound, &ping))
            .count();
        assert_eq!(pings as u64, ALLOWANCE / 17, "PINGs before the cut");
        assert!(guard.flooded());
    }
}
