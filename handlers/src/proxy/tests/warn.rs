//! The failure lines' text (their rate limit is `log_limit`'s, tested
//! there).

use std::io;

use super::super::warn::{Line, Reason, Role};
use crate::client::exchange::{Failure, IoFailure};

fn os(code: i32) -> IoFailure {
    IoFailure::from(&io::Error::from_raw_os_error(code))
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
        line(Role::Upstream, Reason::CutOff(200), 0),
        "upstream 127.0.0.1:18410: the last 200 requests sent to it were answered by the \
         others first and its branches cancelled (hung, or always slower than the others?)"
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
