//! The `echo` binary as an operator runs it, in a child process, on both
//! backends where one applies:
//!
//! - FAULTS D1: io_uring denied (fault injection `uring_setup=EPERM` and
//!   `ENOSYS`, and a real seccomp filter answering EPERM or ENOSYS to
//!   `io_uring_setup`): `--backend auto` falls back to epoll for every core
//!   and says why; `--backend uring` fails fast with a clear message and a
//!   non-zero exit.
//! - FAULTS D7: `--cores 0,0` and a CPU we may not use are refused.
//! - FAULTS C1: under `prlimit --nofile=64:64` with 200 clients the server
//!   does not spin on EMFILE, and accepts again once fds free up.
//! - FAULTS C2: registering the write buffers fails (memlock): a warning
//!   naming the limit, and the server still serves.
//! - The open-file limit is raised to what the connection limit needs, or
//!   a warning says what it allows.
//!
//! Stopping it is in `stop_signals.rs`.

use crate::echo_child;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use echo_child::{echo_cmd, serve, stop, ECHO};
use percore_test_kit::*;

/// Runs `cmd`, which must fail to start: returns its log, checking the
/// exit status is non-zero and it came within `limit`.
fn refused(cmd: Command, limit: Duration) -> String {
    match ChildServer::spawn(cmd, limit) {
        Ok(child) => panic!(
            "echo started on {} but should have refused:\n{}",
            child.addr,
            child.log()
        ),
        Err(f) => {
            let status = f.status.unwrap_or_else(|| {
                panic!("echo neither served nor exited in {limit:?}:\n{}", f.log)
            });
            assert!(!status.success(), "echo exited with success:\n{}", f.log);
            assert!(f.elapsed < limit, "echo took {:?} to fail", f.elapsed);
            f.log
        }
    }
}

/// A short echo workload: pings and a 1 MiB stream over 4 connections.
fn exercise(addr: std::net::SocketAddr) {
    for _ in 0..5 {
        ping(addr);
    }
    Streams {
        conns: 4,
        bytes: 256 * 1024,
        max_write: 32 * 1024,
        threads: 2,
        ..Streams::default()
    }
    .run(addr)
    .unwrap_or_else(|e| panic!("{e}"));
}

/// The `(N backend, M cores)` part of the listening line.
fn listening_line(log: &str) -> &str {
    log.lines()
        .find(|l| l.contains("listening on"))
        .unwrap_or_default()
}

/// Installs, in the child between fork and exec, a seccomp filter that
/// answers `errno` to `io_uring_setup` and allows everything else.
fn deny_io_uring(cmd: &mut Command, errno: i32) -> bool {
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (cmd, errno);
        return false;
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
        const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
        const RET_K: u16 = 0x06; // BPF_RET | BPF_K
        let stmt = |code, k| libc::sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        };
        let jump = |k, jt, jf| libc::sock_filter {
            code: JEQ_K,
            jt,
            jf,
            k,
        };
        // struct seccomp_data: nr at offset 0, arch at offset 4.
        let filter = [
            stmt(LD_W_ABS, 4),
            jump(AUDIT_ARCH, 1, 0),
            stmt(RET_K, libc::SECCOMP_RET_ALLOW),
            stmt(LD_W_ABS, 0),
            jump(libc::SYS_io_uring_setup as u32, 0, 1),
            stmt(RET_K, libc::SECCOMP_RET_ERRNO | errno as u32),
            stmt(RET_K, libc::SECCOMP_RET_ALLOW),
        ];
        // SAFETY: the closure runs in the forked child before exec and makes
        // only async-signal-safe calls (two prctl); `filter` was built before
        // the fork and stays alive in the child's copy of this process.
        unsafe {
            cmd.pre_exec(move || {
                let prog = libc::sock_fprog {
                    len: filter.len() as u16,
                    filter: filter.as_ptr() as *mut libc::sock_filter,
                };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::prctl(
                        libc::PR_SET_SECCOMP,
                        libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                        &prog as *const libc::sock_fprog as libc::c_ulong,
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        true
    }
}

/// Asserts a log of an `auto` start under a denied io_uring.
fn assert_fell_back(log: &str, cause: &str, cores: usize) {
    assert!(
        log.contains("falling back to the epoll backend"),
        "no fallback line:\n{log}"
    );
    assert!(
        log.contains(cause),
        "the fallback line does not say {cause:?}:\n{log}"
    );
    assert_eq!(
        log.matches("falling back to the epoll backend").count(),
        1,
        "logged more than once:\n{log}"
    );
    let line = listening_line(log);
    let cores = match cores {
        1 => "1 core".to_owned(),
        n => format!("{n} cores"),
    };
    assert!(
        line.contains(&format!("(epoll backend, {cores})")),
        "not epoll on every core: {line}"
    );
    assert!(
        !log.contains("io_uring ready"),
        "a core set up io_uring after all:\n{log}"
    );
}

/// Every CPU this process may use, as a `--cores` list.
fn all_cpus() -> (String, usize) {
    let cpus = percore::runtime::cpus::available();
    (
        cpus.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        cpus.len(),
    )
}

/// FAULTS D1 by fault injection: EPERM (seccomp, `io_uring_disabled`) and
/// ENOSYS (no io_uring) each make `auto` fall back on every core, logged
/// once with the cause; `uring` fails fast.
#[test]
fn d1_injected_setup_errors_fall_back_by_cause() {
    let _serial = serial();
    let (cores, n) = all_cpus();
    for (errno, cause) in [("EPERM", "denied"), ("ENOSYS", "not supported")] {
        let fault = format!("uring_setup={errno}");
        let mut cmd = echo_cmd(&["--backend", "auto", "--cores", &cores]);
        cmd.env("PERCORE_FAULT", &fault);
        let child = serve(cmd);
        exercise(child.addr);
        let log = stop(child, Duration::from_secs(60));
        assert_fell_back(&log, cause, n);

        let mut cmd = echo_cmd(&["--backend", "uring"]);
        cmd.env("PERCORE_FAULT", &fault);
        let log = refused(cmd, Duration::from_secs(60));
        assert!(
            log.contains("io_uring backend requested but io_uring_setup failed"),
            "unclear error:\n{log}"
        );
        assert!(
            log.contains(cause) && log.contains("--backend epoll"),
            "the error names neither cause nor way out:\n{log}"
        );
    }
}

/// FAULTS D1 for real: a seccomp filter answering EPERM, then ENOSYS, to
/// `io_uring_setup` (no fault injection).
#[test]
fn d1_seccomp_denied_io_uring_falls_back() {
    let _serial = serial();
    if let Some(reason) = uring_unavailable() {
        println!("skipped: io_uring is unavailable anyway ({reason})");
        return;
    }
    let (cores, n) = all_cpus();
    for (errno, cause) in [(libc::EPERM, "denied"), (libc::ENOSYS, "not supported")] {
        let mut cmd = echo_cmd(&["--backend", "auto", "--cores", &cores]);
        if !deny_io_uring(&mut cmd, errno) {
            println!("skipped: no seccomp filter for this architecture");
            return;
        }
        let child = serve(cmd);
        exercise(child.addr);
        let log = stop(child, Duration::from_secs(60));
        assert_fell_back(&log, cause, n);

        let mut cmd = echo_cmd(&["--backend", "uring"]);
        deny_io_uring(&mut cmd, errno);
        let log = refused(cmd, Duration::from_secs(60));
        assert!(
            log.contains("io_uring backend requested but io_uring_setup failed"),
            "unclear error:\n{log}"
        );
    }
}

/// FAULTS D7: a CPU listed twice, or one this process may not use, is
/// refused at start with a message saying so.
#[test]
fn d7_bad_core_lists_are_refused() {
    let _serial = serial();
    let cpus = percore::runtime::cpus::available();
    let missing = if cpus.contains(&7) { 4095 } else { 7 };
    let twice = format!("{0},{0}", cpus[0]);
    let log = refused(echo_cmd(&["--cores", &twice]), Duration::from_secs(60));
    assert!(log.contains("listed twice"), "{log}");
    let log = refused(
        echo_cmd(&["--cores", &missing.to_string()]),
        Duration::from_secs(60),
    );
    assert!(log.contains("not available"), "{log}");
}

/// `PERCORE_BACKEND` overrides the flag and says so; a value that names
/// no backend is refused like a bad flag, not silently ignored; an empty
/// one counts as unset.
#[test]
fn percore_backend_overrides_and_is_checked() {
    let _serial = serial();
    let mut cmd = echo_cmd(&["--backend", "uring"]);
    cmd.env("PERCORE_BACKEND", "epoll");
    let child = serve(cmd);
    let log = stop(child, Duration::from_secs(60));
    assert!(
        log.contains("PERCORE_BACKEND=epoll overrides the uring backend asked for"),
        "{log}"
    );
    assert!(listening_line(&log).contains("(epoll backend"), "{log}");

    let mut cmd = echo_cmd(&[]);
    cmd.env("PERCORE_BACKEND", "bogus");
    let log = refused(cmd, Duration::from_secs(60));
    assert!(
        log.contains(
            "PERCORE_BACKEND=\"bogus\": unknown backend \"bogus\": \
             expected uring, epoll or auto\n"
        ),
        "{log}"
    );

    let mut cmd = echo_cmd(&["--backend", "epoll"]);
    cmd.env("PERCORE_BACKEND", "");
    let log = stop(serve(cmd), Duration::from_secs(60));
    assert!(listening_line(&log).contains("(epoll backend"), "{log}");
}

/// FAULTS C2: registering the fixed write buffers fails (the memlock
/// limit; injected, since root is exempt): one warning naming the limit,
/// and the server serves with plain buffers.
#[test]
fn c2_memlock_too_low_for_registered_buffers() {
    let _serial = serial();
    if require(Backend::Uring).is_none() {
        return;
    }
    let mut cmd = Command::new("prlimit");
    cmd.args([
        "--memlock=65536:65536",
        "--",
        ECHO,
        "--port",
        "0",
        "--host",
        "127.0.0.1",
        "--backend",
        "uring",
        "--cores",
        &server_cpu().to_string(),
    ])
    .env("RUST_LOG", "info")
    .env("PERCORE_FAULT", "register_buffers=ENOMEM")
    .env_remove("PERCORE_BACKEND");
    let child = serve(cmd);
    exercise(child.addr);
    let log = stop(child, Duration::from_secs(60));
    assert!(
        log.contains("could not register the fixed write buffers"),
        "no warning:\n{log}"
    );
    assert!(
        log.contains("ulimit -l"),
        "the warning does not name the limit:\n{log}"
    );
    assert!(listening_line(&log).contains("(uring backend"), "{log}");
}

backend_process_tests! {
    /// FAULTS C1: out of fds under `prlimit --nofile=64:64` with 200 clients
    /// connected. Accepting backs off instead of spinning (the process uses
    /// under 5% of a CPU over 2 s), the reserve fd lets queued clients be
    /// closed promptly, and once the clients go away a new one is served.
    fn c1_fd_exhaustion_does_not_spin_and_recovers(backend) {
        let mut cmd = Command::new("prlimit");
        cmd.args([
            "--nofile=64:64",
            "--",
            ECHO,
            "--port",
            "0",
            "--host",
            "127.0.0.1",
            "--cores",
            &server_cpu().to_string(),
            "--stats",
        ])
        .args(["--backend", backend])
        .env("RUST_LOG", "info")
        .env_remove("PERCORE_BACKEND")
        .env_remove("PERCORE_FAULT");
        let child = serve(cmd);
        let addr = child.addr;
        let pid = child.pid().to_string();
        let mut clients = Vec::new();
        for i in 0..200 {
            let mut c = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
                .unwrap_or_else(|e| panic!("connect {i}: {e}"));
            // Some are accepted and served; the rest wait in the backlog or
            // are closed by the server's reserve-fd drain.
            let _ = c.write_all(b"hello");
            clients.push(c);
        }
        assert!(
            child.wait_for_log("out of file descriptors", Duration::from_secs(60)),
            "no EMFILE warning:\n{}",
            child.log()
        );
        let before = cpu_ticks(&pid);
        let started = Instant::now();
        std::thread::sleep(Duration::from_secs(2));
        let ticks = cpu_ticks(&pid) - before;
        let window = started.elapsed();
        println!(
            "{backend}: out of fds with 200 clients: {} ms of CPU in {window:?}",
            ticks * 10
        );
        assert!(
            ticks * 10 * 20 <= window.as_millis() as u64,
            "accept spins: {} ms of CPU in {window:?}",
            ticks * 10
        );
        // Some queued clients were closed for lack of fds rather than left
        // hanging; some were served.
        let mut served = 0;
        let mut closed = 0;
        for c in &mut clients {
            c.set_nonblocking(true).expect("nonblocking");
            let mut buf = [0u8; 5];
            match c.read(&mut buf) {
                Ok(5) => served += 1,
                Ok(0) => closed += 1,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => closed += 1,
                _ => {}
            }
        }
        println!("{backend}: {served} clients served, {closed} closed by the reserve-fd drain");
        assert!(served > 0 && closed > 0, "served {served}, closed {closed}");
        drop(clients);
        // Accepting resumes once fds free up (after at most one backoff;
        // a minute is the hang guard).
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut c = connect(addr);
            let mut back = [0u8; 4];
            c.set_read_timeout(Some(Duration::from_millis(1500)))
                .expect("timeout");
            if c.write_all(b"back").is_ok() && c.read_exact(&mut back).is_ok() {
                assert_eq!(&back, b"back");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no new connection was served after the clients left:\n{}",
                child.log()
            );
        }
        let log = stop(child, Duration::from_secs(60));
        let fd_errors = stat_from_log(&log, "err_fd").unwrap_or(0);
        assert!(
            fd_errors > 0 || log.contains("out of file descriptors"),
            "{log}"
        );
    }

    /// The foundation issue's memory figure (and FAULTS B5's budget): 10,000
    /// idle connections, each echoed once so the server has accepted it and
    /// armed its receive. An idle connection holds no receive buffer, so the
    /// server's RSS grows by little per connection; the server still serves.
    fn idle_connections_cost_little_memory(backend) {
        const CONNS: usize = 10_000;
        let child = serve(echo_cmd(&[
            "--backend",
            backend,
            "--cores",
            &server_cpu().to_string(),
            "--max-connections",
            "20000",
            // A stall report's symbolization would add tens of MiB.
            "--stall-ms",
            "0",
        ]));
        let addr = child.addr;
        let pid = child.pid().to_string();
        for _ in 0..10 {
            ping(addr);
        }
        let rss_before = vm_rss_kib(&pid);
        let started = Instant::now();
        let mut conns = Vec::with_capacity(CONNS);
        for i in 0..CONNS {
            let mut c = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
                .unwrap_or_else(|e| panic!("connect {i}: {e}"));
            c.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            c.write_all(b"x").expect("write");
            conns.push(c);
        }
        for c in &mut conns {
            let mut b = [0u8; 1];
            c.read_exact(&mut b)
                .expect("echo of an idle connection's byte");
        }
        let rss_after = vm_rss_kib(&pid);
        let per_conn = (rss_after.saturating_sub(rss_before) * 1024) as f64 / CONNS as f64;
        println!(
            "{backend}: {CONNS} idle connections in {:?}: server RSS {rss_before} -> {rss_after} KiB, {per_conn:.0} bytes per connection",
            started.elapsed()
        );
        ping(addr);
        // No receive buffer per idle connection: 32 KiB each would be
        // 320 MiB; the task, socket state and slab slots are far less.
        assert!(
            per_conn < 4096.0,
            "{backend}: {per_conn:.0} bytes of RSS per idle connection"
        );
        drop(conns);
        stop(child, Duration::from_secs(60));
    }

    /// At `--max-connections`, accepting pauses and the log says so (once,
    /// however many clients wait); the waiting client is served once a
    /// connection closes.
    fn the_connection_limit_is_logged(backend) {
        let child = serve(echo_cmd(&[
            "--backend",
            backend,
            "--cores",
            &server_cpu().to_string(),
            "--max-connections",
            "1",
        ]));
        let mut first = connect(child.addr);
        roundtrip(&mut first, b"holds the only slot");
        let mut waiting: Vec<TcpStream> = (0..3).map(|_| connect(child.addr)).collect();
        assert!(
            child.wait_for_log("connection limit reached", Duration::from_secs(60)),
            "{backend}: {}",
            child.log()
        );
        drop(first);
        roundtrip(&mut waiting[0], b"served after the first left");
        drop(waiting);
        let log = stop(child, Duration::from_secs(60));
        assert_eq!(
            log.matches("connection limit reached").count(),
            1,
            "{backend}: {log}"
        );
    }
}

/// The open-file limit at start, fitted to the connection limit: a soft
/// limit below what one core of 1,000 connections needs (1,040 with the
/// cores' and the process's own descriptors) is raised to that, up to the
/// hard limit, and logged; a hard limit far below it is raised to and
/// warned about, naming the connections it allows.
#[test]
fn the_open_file_limit_is_fitted_to_the_connection_limit() {
    let _serial = serial();
    let cpu = server_cpu().to_string();
    let under = |limits: &str| {
        let mut cmd = Command::new("prlimit");
        cmd.args([&format!("--nofile={limits}"), "--", ECHO])
            .args(["--port", "0", "--host", "127.0.0.1", "--cores", &cpu])
            .args(["--max-connections", "1000"])
            .env("RUST_LOG", "info")
            .env_remove("PERCORE_BACKEND")
            .env_remove("PERCORE_FAULT");
        serve(cmd)
    };
    let soft = |child: &ChildServer| {
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.pid()))
            .expect("the server's limits");
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .expect("an open-files line")
            .to_owned();
        line.split_whitespace().nth(3).expect("soft").to_owned()
    };

    let child = under("256:4096");
    assert_eq!(soft(&child), "1040");
    let log = child.log();
    assert!(log.contains("raised the open-file limit"), "{log}");
    assert!(!log.contains("the open-file limit allows"), "{log}");
    ping(child.addr);
    stop(child, Duration::from_secs(60));

    let child = under("256:512");
    assert_eq!(soft(&child), "512");
    let log = child.log();
    assert!(
        log.contains("the open-file limit allows about 472 connections, not the 1000 configured"),
        "{log}"
    );
    ping(child.addr);
    stop(child, Duration::from_secs(60));
}
