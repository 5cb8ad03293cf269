//! The example servers' command line as an operator meets it, before any
//! server starts: `--help` and usage errors, also when their reader has
//! gone (`--help | head -1`).

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Output, Stdio};

const BINARIES: &[&str] = &[
    env!("CARGO_BIN_EXE_echo"),
    env!("CARGO_BIN_EXE_http_echo"),
    env!("CARGO_BIN_EXE_fanout"),
    env!("CARGO_BIN_EXE_counter"),
    env!("CARGO_BIN_EXE_stats_collector"),
    // Built only with the `axum` feature, which test.sh enables.
    #[cfg(feature = "axum")]
    env!("CARGO_BIN_EXE_axum_app"),
];

/// The write end of a pipe whose read end is already closed, as a reader
/// such as `head` leaves it.
fn pipe_without_reader() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints for the call.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 just returned both descriptors and nothing else owns
    // them; the read end is closed at once.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// `binary args`, with no backend or fault inherited from the environment.
fn command(binary: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(binary);
    cmd.args(args)
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT")
        .stdin(Stdio::null());
    cmd
}

fn run(mut cmd: Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"))
}

/// `--help` exits 0 with the usage on stdout, and still does when nobody
/// reads it: the unread rest is dropped, not a panic (status 101).
#[test]
fn help_to_a_reader_that_left() {
    for binary in BINARIES {
        let out = run(command(binary, &["--help"]));
        assert!(out.status.success(), "{binary} --help: {}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("--port <N>"), "{binary} --help:\n{text}");

        let mut cmd = command(binary, &["--help"]);
        cmd.stdout(pipe_without_reader());
        let out = run(cmd);
        assert!(
            out.status.success(),
            "{binary} --help | head: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A usage error exits 2 naming the flag, and still exits 2 when its
/// stderr has no reader.
#[test]
fn usage_errors_to_a_reader_that_left() {
    for binary in BINARIES {
        let out = run(command(binary, &["--port", "abc"]));
        assert_eq!(out.status.code(), Some(2), "{binary}: {}", out.status);
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains("invalid value 'abc' for '--port <N>': expected a number"),
            "{binary}:\n{text}"
        );

        let mut cmd = command(binary, &["--port", "abc"]);
        cmd.stderr(pipe_without_reader());
        let out = run(cmd);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{binary} 2>closed: {}",
            out.status
        );
    }
}

/// Each bad value is refused with exit status 2 and a message that names
/// its flag and says what was expected.
#[test]
fn bad_values_name_their_flag() {
    let cases: [(&[&str], &str); 11] = [
        (
            &["--backend", "foo"],
            "invalid value 'foo' for '--backend <B>': unknown backend \"foo\"",
        ),
        (
            &["--wait-batch-us", "1000001"],
            "invalid value '1000001' for '--wait-batch-us <N>': expected a number 0-1000000",
        ),
        (
            &["--upstream", "127.0.0.1:1", "--idle-timeout-ms", "0"],
            "invalid value '0' for '--idle-timeout-ms <N>': expected a number from 1",
        ),
        (
            &["--cores", "1-0"],
            "invalid value '1-0' for '--cores <LIST>': invalid CPU list \"1-0\"",
        ),
        (
            &["--cores", "4095"],
            "invalid value '4095' for '--cores <LIST>': CPU 4095 is not available to this process",
        ),
        (
            &["--cores", "0,0"],
            "invalid value '0,0' for '--cores <LIST>': CPU 0 is listed twice",
        ),
        (
            &["--upstream", "127.0.0.1:0"],
            "invalid value '127.0.0.1:0' for '--upstream <HOST:PORT>': port 0 is no server's port",
        ),
        (
            &["--upstream", "127.0.0.1:1", "--max-response-body", "0"],
            "invalid value '0' for '--max-response-body <BYTES>': expected a number from 1",
        ),
        (
            &[
                "--upstream",
                "127.0.0.1:1",
                "--drain-ms",
                "99999999999999999999",
            ],
            "invalid value '99999999999999999999' for '--drain-ms <N>': \
             99999999999999999999 is too large",
        ),
        (
            &["--upstream", "127.0.0.1:1", "--max-pending", "0"],
            "invalid value '0' for '--max-pending <N>': expected a number from 1",
        ),
        (
            &["--upstream", "127.0.0.1:1", "--timeout-ms", "0"],
            "invalid value '0' for '--timeout-ms <N>': expected a number from 1",
        ),
    ];
    for (args, message) in cases {
        let out = run(command(BINARIES[2], args));
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "fanout {args:?}:\n{text}");
        assert!(
            text.starts_with(&format!("error: {message}")),
            "fanout {args:?}:\n{text}"
        );
    }
}
