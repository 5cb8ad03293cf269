//! Cross-core messaging (`submit_to`) on a real two-core server, on both
//! backends: every ordered pair of cores (self included), a burst that
//! fills the target's mailbox, a core stopping with messages queued and
//! senders waiting, one called after the stop by a core still draining (a
//! core stays, answering, until every core has drained), and a
//! real-thread stress of cross-core round trips (FAULTS E6: 10^6 in
//! release, 10^5 in debug, every answer checked; a hang guard, no time
//! bound). The round-trip rate of both
//! backends side by side is the ignored test `round_trip_rate` (run it in
//! release with `--ignored --nocapture`).
//!
//! `submit_to` needs a core: the server's handler reads one command line
//! per connection, runs that scenario on the core that accepted it, and
//! writes one result line back (`ok ...` or `error ...`).

use std::cell::Cell;
use std::future::poll_fn;
use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use percore::{core_count, core_index, spawn_local, submit_to, Connection, Handler, SubmitError};
use percore_test_kit::*;

/// The hang detector of the stress run (FAULTS E6): far beyond the
/// seconds the run takes even on a busy machine, never its verdict.
const STRESS_LIMIT: Duration = Duration::from_secs(300);

/// The failure guard of one measurement of `round_trip_rate`.
const RATE_LIMIT: Duration = Duration::from_secs(60);

backend_tests! {
    /// A call that panics on its target is answered `NoReply`, counted in
    /// the target core's `panics` (not the caller's), and the target goes
    /// on answering calls.
    fn a_panicking_call_counts_on_its_target(backend) {
        quiet_expected_panics();
        let Some(server) = TwoCores::start(backend) else { return };
        let reply = server.run("panic-call");
        let target = parse_counts(&reply)["target"];
        let stats = wait_until(
            IO_TIMEOUT,
            "the panic counted",
            || server.handle.stats(),
            |s| s.iter().map(|c| c.panics).sum::<u64>() == 1,
        );
        assert_eq!(stats[target].panics, 1, "{stats:?}");
        assert_eq!(stats[1 - target].panics, 0, "{stats:?}");
        server.stop();
    }

    /// From every core, a call to every core (itself included) runs there
    /// and answers; a bad index fails with `NoSuchCore`.
    fn every_pair_of_cores(backend) {
        let Some(server) = TwoCores::start(backend) else { return };
        let reply = server.run("pairs");
        assert_eq!(reply, "ok pairs=4", "{reply}");
        server.stop();
    }

    /// A connection still draining after the stop calls the other core,
    /// which has no connection of its own and finished its drain at once:
    /// the call is answered (a core stays until every core has drained),
    /// where it used to fail with `NoReply`.
    fn a_drained_core_answers_its_peers(backend) {
        let Some(server) = TwoCores::start(backend) else { return };
        let mut conn = server.command("after-stop");
        assert_eq!(read_line(&mut conn), "waiting");
        server.handle.shutdown();
        let reply = read_line(&mut conn);
        assert_eq!(reply, "ok answered=1", "{reply}");
        server.join();
    }

    /// 5,000 concurrent calls from one core to the other while the target
    /// is held busy: the mailbox (1,024) fills, the other senders wait for
    /// room, and every call is answered exactly once with its own result.
    fn burst_fills_the_mailbox(backend) {
        let Some(server) = TwoCores::start(backend) else { return };
        let reply = server.run("burst 5000");
        assert_eq!(reply, "ok answered=5000", "{reply}");
        server.stop();
    }

    /// The server stops while the target core is held with a full
    /// mailbox and more senders waiting for room. The target has no
    /// connection of its own, so its drain is over at once; it stays, as
    /// long as the sender's core is still draining, and answers: every
    /// call is answered, none fails with `NoReply`, none is lost.
    fn a_stopping_core_answers_the_calls_queued(backend) {
        let Some(server) = TwoCores::start(backend) else { return };
        let calls = 3000;
        let mut conn = server.command(&format!("stop {calls}"));
        assert_eq!(read_line(&mut conn), "ready", "the sender did not queue its calls");
        // Every call is queued or waiting for room, the target is held:
        // stop the server, then let the target go.
        server.handle.shutdown();
        server.gate.open();
        let reply = read_line(&mut conn);
        let counts = parse_counts(&reply);
        let (answered, no_reply, ran) = (counts["answered"], counts["no_reply"], counts["ran"]);
        assert_eq!((answered, no_reply, ran), (calls, 0, calls), "{reply}");
        server.join();
    }

    /// Real threads, real eventfds: 64 tasks on one core make 10^5 (debug)
    /// or 10^6 (release) round trips to the other in total, and every one
    /// is answered with its own result (the handler checks each answer).
    /// The verdict is the count; how long it took is printed, not judged
    /// (the rate is `round_trip_rate`'s): on a loaded machine the run may
    /// take far longer, and [`STRESS_LIMIT`] only detects a hang.
    fn stress_round_trips(backend) {
        let Some(server) = TwoCores::start(backend) else { return };
        let total = if cfg!(debug_assertions) { 100_000 } else { 1_000_000 };
        let limit = STRESS_LIMIT.as_secs();
        let reply = server.run_within(&format!("trips {total} 64 {limit}"), STRESS_LIMIT + IO_TIMEOUT);
        let counts = parse_counts(&reply);
        assert_eq!(counts["trips"], total, "{reply}");
        let ms = counts["ms"];
        println!("{backend}: {total} cross-core round trips (64 in flight) in {ms} ms");
        server.stop();
    }

    /// A call whose closure panics before it makes its future gets
    /// `NoReply`, and the core that ran it goes on answering calls.
    fn a_call_that_panics_gets_no_reply(backend) {
        let result = percore::block_on(backend, async {
            let failed = submit_to(0, || -> std::future::Ready<usize> {
                panic!("a call told to panic")
            })
            .await;
            let next = submit_to(0, || async { core_index() + 7 }).await;
            (failed, next)
        })
        .expect("the core survives the call's panic");
        assert_eq!(result, (Err(SubmitError::NoReply), Ok(7)));
    }

    /// A `block_on` core is a server of one: it can call itself, and
    /// nothing else.
    fn block_on_core_calls_itself(backend) {
        let result = percore::block_on(backend, async {
            assert_eq!((core_index(), core_count()), (0, 1));
            let mine = submit_to(0, || async { core_index() + 40 }).await;
            let other = submit_to(1, || async {}).await;
            (mine, other)
        })
        .expect("block_on");
        assert_eq!(result, (Ok(40), Err(SubmitError::NoSuchCore)));
    }
}

/// Cross-core round trips per second on both backends, side by side in
/// one run: one call in flight (the latency of a round trip, both cores
/// sleeping and waking through their eventfds each time) and 64 in flight
/// (the throughput, with batching). Run in release:
/// `cargo test --release -p percore-rt --test suite -- messaging --ignored --nocapture`.
#[test]
#[ignore = "a measurement; run it in release with --ignored --nocapture"]
fn round_trip_rate() {
    let _serial = serial();
    let scale = if cfg!(debug_assertions) { 1 } else { 10 };
    let mut rows = Vec::new();
    for backend in [Backend::Uring, Backend::Epoll] {
        let Some(backend) = require(backend) else {
            continue;
        };
        let Some(server) = TwoCores::start(backend) else {
            return;
        };
        let limit = RATE_LIMIT.as_secs();
        // Warm up, then measure each shape.
        server.run_within(&format!("trips {} 1 {limit}", 2_000 * scale), RATE_LIMIT);
        for (trips, in_flight) in [(20_000 * scale, 1), (50_000 * scale, 64)] {
            let command = format!("trips {trips} {in_flight} {limit}");
            let reply = server.run_within(&command, RATE_LIMIT);
            let ms = parse_counts(&reply)["ms"].max(1);
            let per_sec = trips as f64 * 1000.0 / ms as f64;
            let c = parse_counts(&reply);
            rows.push(format!(
                "messaging/{backend}/in_flight={in_flight}: {trips} round trips in {ms} ms = {per_sec:.0}/s \
                 (one call: p50 {} us, p99 {} us, max {} us)",
                c["p50_us"], c["p99_us"], c["max_us"]
            ));
        }
        server.stop();
    }
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!("cross-core round-trip rate ({build} build):");
    for row in rows {
        println!("  {row}");
    }
}

/// A two-core server running [`Scenarios`], and the gate its "stop"
/// scenario holds the target core on.
struct TwoCores {
    handle: ServerHandle,
    gate: Arc<Gate>,
}

impl TwoCores {
    /// `None` (after printing why) when this process may use fewer than
    /// two CPUs.
    fn start(backend: Backend) -> Option<TwoCores> {
        let cpus = percore::runtime::cpus::available();
        if cpus.len() < 2 {
            println!("skipped: cross-core tests need 2 CPUs, this process may use {cpus:?}");
            return None;
        }
        let gate = Arc::new(Gate::default());
        let shared = gate.clone();
        let handle = builder(backend)
            .cores(cpus[..2].iter().copied())
            .start(move |_core| Scenarios {
                gate: shared.clone(),
            })
            .expect("start a two-core server");
        check_backend(&handle, backend);
        Some(TwoCores { handle, gate })
    }

    /// Sends a command on a new connection; returns the connection.
    fn command(&self, line: &str) -> TcpStream {
        let mut conn = connect(self.handle.local_addr());
        conn.write_all(format!("{line}\n").as_bytes())
            .expect("send the command");
        conn
    }

    /// Runs a scenario and returns its result line, which must be `ok ...`.
    fn run(&self, line: &str) -> String {
        self.run_within(line, IO_TIMEOUT)
    }

    /// As [`TwoCores::run`], failing if no answer comes within `limit`.
    fn run_within(&self, line: &str, limit: Duration) -> String {
        let mut conn = self.command(line);
        conn.set_read_timeout(Some(limit))
            .expect("set_read_timeout");
        let reply = read_line(&mut conn);
        assert!(reply.starts_with("ok"), "{line}: {reply}");
        reply
    }

    fn stop(self) {
        self.handle.shutdown();
        self.join();
    }

    fn join(self) {
        self.handle.join().expect("every core stops cleanly");
    }
}

/// Reads one line (the read timeout of [`connect`] is the failure guard).
fn read_line(conn: &mut TcpStream) -> String {
    let mut line = String::new();
    BufReader::new(conn)
        .read_line(&mut line)
        .expect("read a result line");
    line.trim_end().to_owned()
}

/// `ok a=1 b=2` as a map.
fn parse_counts(line: &str) -> std::collections::HashMap<String, usize> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.parse()
                    .unwrap_or_else(|_| panic!("{line}: {k} is not a number")),
            )
        })
        .collect()
}

/// Holds a core's thread inside a message until the test opens it: the
/// only way to keep a target busy on purpose. `entered` tells the sender
/// the target is held.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Gate {
    /// Called on the held core: marks it entered, waits to be let go (at
    /// most [`IO_TIMEOUT`], the failure guard).
    fn hold(&self) {
        let mut state = self.state.lock().unwrap();
        state.0 = true;
        self.cv.notify_all();
        let deadline = Instant::now() + IO_TIMEOUT;
        while !state.1 && Instant::now() < deadline {
            state = self.cv.wait_timeout(state, IO_TIMEOUT).unwrap().0;
        }
    }

    fn entered(&self) -> bool {
        self.state.lock().unwrap().0
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}

/// The test handler: one scenario per connection, on the accepting core.
struct Scenarios {
    gate: Arc<Gate>,
}

impl Handler for Scenarios {
    async fn serve(&self, conn: Connection) -> io::Result<()> {
        let line = read_command(&conn).await?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| {
            words
                .get(i)
                .and_then(|w| w.parse::<usize>().ok())
                .unwrap_or(0)
        };
        let reply = match words.first().copied() {
            Some("pairs") => pairs().await,
            Some("burst") => burst(arg(1)).await,
            Some("stop") => stop_pending(&conn, arg(1), self.gate.clone()).await,
            Some("after-stop") => call_after_stop(&conn).await,
            Some("panic-call") => panic_call().await,
            Some("trips") => {
                let limit = match words.get(3) {
                    Some(_) => Duration::from_secs(arg(3) as u64),
                    None => STRESS_LIMIT,
                };
                trips(arg(1), arg(2).max(1), limit).await
            }
            _ => Err(format!("unknown command {line:?}")),
        };
        let line = match reply {
            Ok(ok) => format!("ok {ok}\n"),
            Err(e) => format!("error {e}\n"),
        };
        conn.write_all(line.into_bytes()).await.0?;
        conn.shutdown_write()
    }
}

async fn read_command(conn: &Connection) -> io::Result<String> {
    let mut line = Vec::new();
    while !line.contains(&b'\n') {
        match conn.read().await? {
            Some(buf) => line.extend_from_slice(&buf),
            None => break,
        }
    }
    Ok(String::from_utf8_lossy(&line).trim().to_owned())
}

/// The other core of a two-core server.
fn other_core() -> usize {
    (core_index() + 1) % core_count()
}

/// Lets the other tasks of this core run once.
async fn yield_now() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await;
}

/// Yields until `cond` holds or [`IO_TIMEOUT`] passes.
async fn until(what: &str, cond: impl Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + IO_TIMEOUT;
    while !cond() {
        if Instant::now() >= deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        yield_now().await;
    }
    Ok(())
}

/// Core `src` calls core `dst` for every ordered pair.
async fn pairs() -> Result<String, String> {
    let n = core_count();
    let mut checked = 0;
    for src in 0..n {
        let row = submit_to(src, move || async move {
            let me = core_index();
            let mut row = Vec::new();
            for dst in 0..core_count() {
                row.push((me, dst, submit_to(dst, || async { core_index() }).await));
            }
            row
        })
        .await
        .map_err(|e| format!("call to core {src}: {e}"))?;
        for (me, dst, ran_on) in row {
            if me != src || ran_on != Ok(dst) {
                return Err(format!("{src}->{dst}: ran on {me}, answered {ran_on:?}"));
            }
            checked += 1;
        }
    }
    match submit_to(n, || async {}).await {
        Err(SubmitError::NoSuchCore) => Ok(format!("pairs={checked}")),
        other => Err(format!("call to core {n} of {n}: {other:?}")),
    }
}

/// `count` concurrent calls to a target held busy until all are queued or
/// waiting for room, so the mailbox surely fills.
async fn burst(count: usize) -> Result<String, String> {
    let target = other_core();
    let (release, held) = std::sync::mpsc::channel::<()>();
    let hold = spawn_local(submit_to(target, move || {
        let _ = held.recv_timeout(IO_TIMEOUT);
        async {}
    }));
    let started = Rc::new(Cell::new(0));
    let calls: Vec<_> = (0..count)
        .map(|i| {
            let started = started.clone();
            spawn_local(async move {
                started.set(started.get() + 1);
                submit_to(target, move || async move { (core_index(), i * 2) }).await
            })
        })
        .collect();
    until("every call to start", || started.get() == count).await?;
    let _ = release.send(());
    hold.await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let mut answered = 0;
    for (i, call) in calls.into_iter().enumerate() {
        match call.await {
            Ok(Ok((ran_on, v))) if ran_on == target && v == i * 2 => answered += 1,
            other => return Err(format!("call {i}: {other:?}")),
        }
    }
    Ok(format!("answered={answered}"))
}

/// `count` calls to a target that the test stops: the target is held in
/// the gate while every call is queued or waiting for room; the test is
/// told `ready`, stops the server and opens the gate.
async fn stop_pending(conn: &Connection, count: usize, gate: Arc<Gate>) -> Result<String, String> {
    let target = other_core();
    let held = gate.clone();
    drop(spawn_local(submit_to(target, move || {
        held.hold();
        async {}
    })));
    until("the target to be held", || gate.entered()).await?;
    let ran = Arc::new(AtomicUsize::new(0));
    let started = Rc::new(Cell::new(0));
    let calls: Vec<_> = (0..count)
        .map(|i| {
            let (started, ran) = (started.clone(), ran.clone());
            spawn_local(async move {
                started.set(started.get() + 1);
                submit_to(target, move || {
                    ran.fetch_add(1, Relaxed);
                    async move { i }
                })
                .await
            })
        })
        .collect();
    until("every call to start", || started.get() == count).await?;
    conn.write_all(&b"ready\n"[..])
        .await
        .0
        .map_err(|e| e.to_string())?;
    let (mut answered, mut no_reply) = (0, 0);
    for (i, call) in calls.into_iter().enumerate() {
        match call.await {
            Ok(Ok(v)) if v == i => answered += 1,
            Ok(Err(SubmitError::NoReply)) => no_reply += 1,
            other => return Err(format!("call {i}: {other:?}")),
        }
    }
    Ok(format!(
        "answered={answered} no_reply={no_reply} ran={}",
        ran.load(Relaxed)
    ))
}

/// A call to the other core that panics there, then one that answers.
async fn panic_call() -> Result<String, String> {
    let target = other_core();
    match submit_to(target, || async { panic!("the call was told to panic") }).await {
        Err(SubmitError::NoReply) => {}
        other => return Err(format!("the panicking call: {other:?}")),
    }
    match submit_to(target, || async { core_index() }).await {
        Ok(ran_on) if ran_on == target => Ok(format!("target={target}")),
        other => Err(format!("the call after the panic: {other:?}")),
    }
}

/// Waits for the stop, gives the other core time to finish its own (empty)
/// drain, then calls it.
async fn call_after_stop(conn: &Connection) -> Result<String, String> {
    conn.write_all(&b"waiting\n"[..])
        .await
        .0
        .map_err(|e| e.to_string())?;
    percore::shutdown_signal().await;
    percore::time::sleep(Duration::from_millis(200)).await;
    match submit_to(other_core(), || async { 7 }).await {
        Ok(7) => Ok("answered=1".to_owned()),
        other => Err(format!("the call after the stop: {other:?}")),
    }
}

/// `total` round trips to the other core from `workers` tasks, each making
/// its share one after the other; every answer is checked. Fails once
/// `limit` has passed. Worker 0 also times each of its round trips.
async fn trips(total: usize, workers: usize, limit: Duration) -> Result<String, String> {
    let target = other_core();
    let start = Instant::now();
    let timings = Rc::new(std::cell::RefCell::new(Vec::new()));
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let share = total / workers + usize::from(w < total % workers);
            let timings = timings.clone();
            spawn_local(async move {
                for i in 0..share {
                    let sent = Instant::now();
                    let v = submit_to(target, move || async move { i + 1 }).await;
                    if v != Ok(i + 1) {
                        return Err(format!("worker {w} trip {i}: {v:?}"));
                    }
                    if w == 0 {
                        timings.borrow_mut().push(sent.elapsed());
                    }
                }
                Ok(share)
            })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        done += task.await.map_err(|e| e.to_string())??;
        if start.elapsed() > limit {
            return Err(format!("{done} of {total} round trips after {limit:?}"));
        }
    }
    let elapsed = start.elapsed();
    let mut timings = timings.take();
    timings.sort();
    let at = |q: f64| {
        timings.get(((timings.len() as f64 * q) as usize).min(timings.len().saturating_sub(1)))
    };
    let us = |d: Option<&Duration>| d.map_or(0, |d| d.as_micros());
    Ok(format!(
        "trips={done} ms={} p50_us={} p99_us={} max_us={}",
        elapsed.as_millis(),
        us(at(0.5)),
        us(at(0.99)),
        us(timings.last()),
    ))
}
