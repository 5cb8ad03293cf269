//! The failure lines' rate limit, driven with made-up instants, and their
//! text.

use std::io;
use std::time::{Duration, Instant};

use super::super::client::{Failure, IoFailure};
use super::super::warn::{FailureLog, Line, Reason, Role, INTERVAL};

fn os(code: i32) -> IoFailure {
    IoFailure::from(&io::Error::from_raw_os_error(code))
}

/// At most one line per interval; the next line carries the count of
/// failures left out since the last, which then starts again.
#[test]
fn one_line_per_interval_with_the_count_left_out() {
    let log = FailureLog::default();
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    assert_eq!(INTERVAL, Duration::from_secs(1));
    assert_eq!(log.admit(t0), Some(0), "the first failure is logged");
    assert_eq!(log.admit(at(1)), None);
    assert_eq!(log.admit(at(500)), None);
    assert_eq!(log.admit(at(999)), None);
    assert_eq!(
        log.admit(at(1000)),
        Some(3),
        "a second later, with 3 left out"
    );
    assert_eq!(log.admit(at(1500)), None);
    assert_eq!(
        log.admit(at(9000)),
        Some(1),
        "a quiet spell keeps the count"
    );
    assert_eq!(log.admit(at(10_000)), Some(0), "and then starts it again");
    // An instant before the last line (another reading of the clock) is
    // within the interval, never an underflow.
    assert_eq!(log.admit(at(9500)), None);
}

fn line(role: Role, reason: Reason, suppressed: u64) -> String {
    Line {
        role,
        upstream: "127.0.0.1:18410",
        reason,
        suppressed,
    }
    .to_string()
}

/// A line names the upstream and the reason; running out of descriptors
/// says what to raise; the count left out is spelt out.
#[test]
fn line_text() {
    let refused = Reason::Failed(Failure::Connect(os(libc::ECONNREFUSED)));
    let reason = io::Error::from_raw_os_error(libc::ECONNREFUSED);
    assert_eq!(
        line(Role::Upstream, refused, 0),
        format!("upstream 127.0.0.1:18410: connect failed: {reason}")
    );
    assert_eq!(
        line(
            Role::Upstream,
            Reason::Failed(Failure::Connect(os(libc::EMFILE))),
            0
        ),
        "upstream 127.0.0.1:18410: connect failed: Too many open files (os error 24); \
         the proxy is out of file descriptors: raise its limit (ulimit -n)"
    );
    let enfile = line(
        Role::Upstream,
        Reason::Failed(Failure::Connect(os(libc::ENFILE))),
        0,
    );
    assert!(
        enfile.contains("(os error 23); the system's file table is full: raise fs.file-max"),
        "{enfile}"
    );
    assert_eq!(
        line(Role::Upstream, Reason::Failed(Failure::Deadline), 1),
        "upstream 127.0.0.1:18410: no answer before the deadline \
         (1 more upstream failure on this core not logged since the last line)"
    );
    assert_eq!(
        line(Role::Mirror, Reason::Status(503), 7),
        "mirror 127.0.0.1:18410: answered 503 \
         (7 more upstream failures on this core not logged since the last line)"
    );
    assert_eq!(
        line(
            Role::Mirror,
            Reason::Failed(Failure::Bad("malformed status line or header")),
            0
        ),
        "mirror 127.0.0.1:18410: bad response: malformed status line or header"
    );
}
