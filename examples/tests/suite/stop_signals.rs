//! Stopping the `echo` binary as an operator does, on both backends:
//! SIGTERM drains and exits 0, also when nobody reads the log any more; a
//! second signal exits at once and says so, unless it is the same one sent
//! twice at once (GNU `timeout`); Ctrl-C with an idle client stops at
//! once; SIGHUP stops as SIGTERM does
//! unless it is ignored (`nohup`); a log written to a file is
//! plain text; a server started with `--take-over` replaces a running one;
//! a server restarted right after a kill gets the port.

use crate::echo_child;

use std::io::{BufRead, ErrorKind, Read, Write};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use echo_child::{echo_cmd, example_cmd, serve, stop, HTTP_ECHO};
use percore_test_kit::*;

/// An `echo` with a half-second drain, and a client it has served once.
fn serving_a_client(backend: &str) -> (ChildServer, std::net::TcpStream) {
    let child = serve(echo_cmd(&["--backend", backend, "--drain-ms", "500"]));
    let mut client = connect(child.addr);
    roundtrip(&mut client, b"before the stop");
    (child, client)
}

backend_process_tests! {
    /// SIGTERM: a graceful stop, exit status 0, even with an idle connection
    /// open (which the drain deadline ends; the stop's wait of a minute is
    /// the hang guard), and the idle connection closed.
    fn sigterm_stops_with_status_zero(backend) {
        let (child, mut idle) = serving_a_client(backend);
        let started = Instant::now();
        let log = stop(child, Duration::from_secs(60));
        println!("{backend}: SIGTERM took {:?}", started.elapsed());
        assert!(log.contains("stopped"), "{log}");
        let mut buf = [0u8; 8];
        match idle.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("{backend}: the idle connection was not closed: {other:?}"),
        }
    }

    /// Ctrl-C with an idle client connected: `echo` closes the connection
    /// and exits 0 at once, not at the drain deadline (two minutes here;
    /// the stop's wait of a minute is the hang guard).
    fn ctrl_c_stops_at_once_with_an_idle_client(backend) {
        let child = serve(echo_cmd(&["--backend", backend, "--drain-ms", "120000"]));
        let mut idle = connect(child.addr);
        roundtrip(&mut idle, b"then nothing more");
        child.signal(libc::SIGINT);
        let (exit, log) = child.wait(Duration::from_secs(60));
        assert_eq!(exit.code(), Some(0), "{backend}: {log}");
        assert!(log.contains("stopped"), "{backend}: {log}");
        let mut buf = [0u8; 8];
        assert_eq!(idle.read(&mut buf).expect("read the close"), 0, "{backend}: the idle connection was not closed");
    }

    /// A restart without refusing connections: a second server started with
    /// `--take-over` on the first one's port says it shares the port, both
    /// serve, and after the first one's SIGTERM the second serves alone.
    fn take_over_replaces_a_running_server(backend) {
        let old = serve(echo_cmd(&["--backend", backend]));
        let port = old.addr.port().to_string();
        let new = serve(echo_cmd(&[
            "--backend",
            backend,
            "--port",
            &port,
            "--take-over",
        ]));
        assert_eq!(new.addr, old.addr);
        assert!(
            new.log().contains("take-over: sharing the port"),
            "{backend}: {}",
            new.log()
        );
        for _ in 0..20 {
            ping(old.addr);
        }
        let addr = old.addr;
        stop(old, Duration::from_secs(60));
        for _ in 0..20 {
            ping(addr);
        }
        let log = stop(new, Duration::from_secs(60));
        assert!(log.contains("stopped"), "{backend}: {log}");
    }

    /// A log nobody reads any more (stderr a pipe whose reader exited, as
    /// with `echo | head`): SIGTERM still stops the server gracefully, the
    /// connection still open is served until then, and `--stats` goes on.
    /// The log's failed writes are dropped instead of panicking in
    /// whichever thread logs next.
    fn sigterm_stops_when_the_log_reader_is_gone(backend) {
        let mut child = echo_cmd(&["--backend", backend, "--drain-ms", "500", "--stats"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn echo");
        let mut log = std::io::BufReader::new(child.stderr.take().expect("piped stderr"));
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                log.read_line(&mut line).expect("read the log") > 0,
                "echo exited"
            );
            if let Some(addr) = parse_listening(&strip_ansi(&line)) {
                break addr;
            }
        };
        let mut open = connect(addr);
        drop(log);
        roundtrip(&mut open, b"after the log reader left");
        // The stats thread's lines (one a second) are dropped too, and the
        // thread goes on.
        std::thread::sleep(Duration::from_millis(1500));
        let threads = std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .expect("the child's threads")
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .collect::<Vec<_>>();
        assert!(
            threads.iter().any(|name| name.trim() == "stats"),
            "{backend}: the stats thread is gone: {threads:?}"
        );
        // SAFETY: `kill` only sends a signal to the child's pid, which is
        // ours to signal until `wait_timeout` below reaps it.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let status = wait_timeout(&mut child, Duration::from_secs(60));
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let status = status.unwrap_or_else(|| panic!("{backend}: SIGTERM did not stop echo"));
        assert!(status.success(), "{backend}: echo exited with {status}");
    }

    /// The same signal twice within a few milliseconds, as GNU `timeout`
    /// sends SIGTERM (to the process, then to its group): one graceful stop,
    /// exit status 0, not an exit without draining.
    fn the_same_signal_sent_twice_at_once_stops_gracefully(backend) {
        let (child, open) = serving_a_client(backend);
        let sent = Instant::now();
        child.signal(libc::SIGTERM);
        // The second after the first was handled (two signals pending at
        // once are one), within the 100 ms that make it a duplicate.
        assert!(
            child.wait_for_log("SIGTERM received", Duration::from_secs(60)),
            "{}",
            child.log()
        );
        if sent.elapsed() > Duration::from_millis(80) {
            println!(
                "skipped ({backend}): the first signal took {:?} to be logged",
                sent.elapsed()
            );
            drop(open);
            let (exit, log) = child.wait(Duration::from_secs(60));
            assert_eq!(exit.code(), Some(0), "{backend}: {log}");
            return;
        }
        child.signal(libc::SIGTERM);
        drop(open);
        let (exit, log) = child.wait(Duration::from_secs(60));
        assert_eq!(exit.code(), Some(0), "{backend}: {log}");
        assert!(
            !log.contains("exiting without draining"),
            "{backend}: {log}"
        );
        assert!(log.contains("stopped"), "{backend}: {log}");
    }

    /// SIGHUP (the terminal went away) stops the server gracefully, saying
    /// which signal came, rather than killing it mid-request; a server started
    /// with SIGHUP ignored, as `nohup` starts it, runs on.
    fn sighup_stops_gracefully_unless_ignored(backend) {
        let child = serve(echo_cmd(&["--backend", backend, "--drain-ms", "500"]));
        let mut open = connect(child.addr);
        roundtrip(&mut open, b"before the hang-up");
        child.signal(libc::SIGHUP);
        let (exit, log) = child.wait(Duration::from_secs(60));
        assert!(exit.success(), "{backend}: {exit} after SIGHUP:\n{log}");
        assert!(
            log.contains("SIGHUP received: stopping"),
            "{backend}: {log}"
        );
        assert!(log.contains("draining"), "{backend}: {log}");
        assert!(log.contains("stopped"), "{backend}: {log}");

        let mut cmd = echo_cmd(&["--backend", backend, "--drain-ms", "500"]);
        // SAFETY: signal(2) is async-signal-safe, all that may run between
        // fork and exec; it only sets this child's SIGHUP to ignored.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                Ok(())
            });
        }
        let child = serve(cmd);
        child.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(300));
        let mut after = connect(child.addr);
        roundtrip(&mut after, b"still serving after the hang-up");
        let log = stop(child, Duration::from_secs(60));
        assert!(!log.contains("SIGHUP"), "{backend}: {log}");
    }

    /// A server restarted the moment the last one died (as a supervisor does
    /// after a kill) gets the port: on io_uring the dead one's listeners
    /// outlive it by a few milliseconds, which must not be refused as
    /// "another server on this port".
    fn a_restart_right_after_a_kill_gets_the_port(backend) {
        let mut child = serve(echo_cmd(&["--backend", backend]));
        let port = child.addr.port().to_string();
        for _ in 0..3 {
            child.signal(libc::SIGKILL);
            let mut status = 0;
            // SAFETY: waitpid(2) on our own child's pid, with a writable
            // status; it reaps the child at once, unlike `ChildServer::wait`,
            // which lingers for the child's last log lines.
            let rc = unsafe { libc::waitpid(child.pid() as libc::pid_t, &mut status, 0) };
            assert_eq!(rc, child.pid() as libc::pid_t, "waitpid");
            child = serve(echo_cmd(&["--backend", backend, "--port", &port]));
        }
        let log = stop(child, Duration::from_secs(60));
        assert!(log.contains("stopped"), "{backend}: {log}");
    }
}

/// Logging to a file, as an operator redirects it: plain text, no colour
/// codes (`NO_COLOR` unset, so only the terminal check keeps them out).
#[test]
fn a_log_file_gets_no_colour_codes() {
    let _serial = serial();
    let path = std::env::temp_dir().join(format!("percore-echo-log-{}", std::process::id()));
    let file = std::fs::File::create(&path).expect("create the log file");
    let mut child = echo_cmd(&[])
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::null())
        .stderr(file)
        .spawn()
        .expect("spawn echo");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut log = String::new();
    while !log.contains("listening on") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        log = std::fs::read_to_string(&path).unwrap_or_default();
    }
    // SAFETY: `kill` only sends a signal to the child's pid, which is ours
    // to signal until `wait` below reaps it.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().expect("wait for echo");
    let log = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    assert!(status.success(), "echo exited with {status}:\n{log}");
    assert!(log.contains("listening on"), "{log}");
    assert!(
        !log.contains('\x1b'),
        "colour codes in the log file:\n{log}"
    );
}

/// A second signal during the drain (of a request half received) exits
/// at once, with the shell's status for death by that signal, and says so on stderr (without that line the
/// log would end mid-drain, like a crash).
#[test]
fn a_second_signal_exits_at_once() {
    let _serial = serial();
    for (signal, status) in [
        (libc::SIGTERM, 143),
        (libc::SIGINT, 130),
        (libc::SIGHUP, 129),
    ] {
        // A drain of two minutes, which only the second signal cuts short
        // within the minute the test waits.
        let child = serve(example_cmd(HTTP_ECHO, &["--drain-ms", "120000"]));
        let _mid_request = a_request_half_sent(child.addr);
        child.signal(signal);
        assert!(
            child.wait_for_log("draining", Duration::from_secs(60)),
            "{}",
            child.log()
        );
        // Past the window in which the same signal counts as sent twice.
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        child.signal(signal);
        let (exit, log) = child.wait(Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(60), "{log}");
        assert_eq!(exit.code(), Some(status), "{log}");
        assert!(
            log.contains("second stop signal: exiting without draining"),
            "{log}"
        );
    }
}

/// A request whose body is half sent, once `http_echo` has begun to read
/// it (its `100 Continue` says so): it waits for the rest (its body
/// timeout is 30 s), so the drain has a request to wait for.
fn a_request_half_sent(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let mut client = connect(addr);
    client
        .write_all(
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n",
        )
        .expect("send a request head");
    let mut head = [0u8; 25];
    client.read_exact(&mut head).expect("read 100 Continue");
    assert_eq!(&head, b"HTTP/1.1 100 Continue\r\n\r\n");
    client.write_all(b"half").expect("send half the body");
    client
}
