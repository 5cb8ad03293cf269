//! The workload list and the round-robin runner.
//!
//! What it measures: for every workload, `warmup + iterations` rounds; in
//! each round every executor runs one iteration in turn (A B C D A B C D …),
//! so slow drifts of this noisy VM hit all executors alike. The servers of
//! one service (echo over TCP or a Unix socket, HTTP, fan-out, HTTPS) are
//! started once, one per executor, and stay
//! up for all workloads of that service; an idle server is parked and
//! costs nothing measurable. The HTTPS servers' certificates are made for
//! the run with `openssl` and removed after it; without `openssl` the
//! HTTPS workloads are skipped. What it does not: run executors
//! concurrently against each other, or retry a failed iteration (a failure
//! ends that executor's cell and is reported, never replaced by a number).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::probe::{Probe, Sample};
use crate::report::Row;
use crate::server::{self, Executor, RunningServer, Service, Supplies};
use crate::stats::{self, Summary};
use crate::sys::Placement;
use crate::tls::TestCertificates;

mod workloads;
pub use workloads::*;

/// How long stopping one server may take before the run moves on.
pub const STOP_LIMIT: Duration = Duration::from_secs(5);

/// Where the runner prints: `out` for results and skip lines (stdout),
/// `progress` for progress (stderr).
pub struct Console<'a> {
    /// Lines that also go to the report's notes.
    pub out: &'a mut dyn FnMut(&str),
    /// Progress lines.
    pub progress: &'a mut dyn FnMut(&str),
}

impl std::fmt::Debug for Console<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console").finish_non_exhaustive()
    }
}

/// Everything one run produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Result rows in report order.
    pub rows: Vec<Row>,
    /// Skip and warning lines.
    pub notes: Vec<String>,
}

struct Cell<'s> {
    server: &'s RunningServer,
    samples: Vec<Sample>,
    failed: Option<String>,
}

fn note(outcome: &mut Outcome, console: &mut Console<'_>, line: String) {
    (console.out)(&line);
    outcome.notes.push(line);
}

/// Runs `jobs` on `executors` with servers and clients where `placement`
/// says; the calling thread runs the clients.
pub fn run(
    jobs: &[Job],
    executors: &[Executor],
    placement: &Placement,
    mode: &Mode,
    console: &mut Console<'_>,
) -> Outcome {
    let mut outcome = Outcome::default();
    let total = jobs.len();
    let mut done = 0usize;
    let mut claimed: Vec<u32> = Vec::new();
    for group in 0..Service::GROUPS {
        let js: Vec<&Job> = jobs.iter().filter(|j| j.service.group() == group).collect();
        if js.is_empty() {
            continue;
        }
        let mut services: Vec<Service> = Vec::new();
        for j in &js {
            if !services.contains(&j.service) {
                services.push(j.service);
            }
        }
        let mut servers: Vec<RunningServer> = Vec::new();
        placement.unpin();
        let mut upstreams: Option<Upstreams> = None;
        if group == 2 {
            match Upstreams::start(placement, &mut claimed) {
                Ok(u) => {
                    note(&mut outcome, console, u.describe());
                    upstreams = Some(u);
                }
                Err(why) => {
                    note(
                        &mut outcome,
                        console,
                        format!("skipped: fan-out workloads: {why}"),
                    );
                    done += js.len();
                    continue;
                }
            }
        }
        let upstream_addrs: Vec<SocketAddr> =
            upstreams.as_ref().map(|u| u.addrs()).unwrap_or_default();
        let mut certificates: Option<TestCertificates> = None;
        if services.contains(&Service::Https) {
            match TestCertificates::generate() {
                Ok(c) => certificates = Some(c),
                Err(why) => {
                    note(
                        &mut outcome,
                        console,
                        format!("skipped: https workloads: {why}"),
                    );
                    done += js.len();
                    continue;
                }
            }
        }
        if services.contains(&Service::Api) {
            note(&mut outcome, console, crate::api_servers::describe());
        }
        let supplies = Supplies {
            upstreams: &upstream_addrs,
            certificates: certificates.as_ref(),
        };
        for &e in executors {
            for &service in &services {
                match server::start(e, service, &placement.server_cpus, &claimed, &supplies) {
                    Ok(s) => {
                        if !s.has_cpu_time() {
                            note(
                                &mut outcome,
                                console,
                                format!(
                                    "warning: {} {} server: no thread named {}* found; server CPU not reported",
                                    e.name(),
                                    service.name(),
                                    e.thread_prefix()
                                ),
                            );
                        }
                        claimed.extend_from_slice(s.tids());
                        servers.push(s);
                    }
                    Err(why) => note(
                        &mut outcome,
                        console,
                        format!(
                            "skipped: {} ({} workloads): {why}",
                            e.name(),
                            service.name()
                        ),
                    ),
                }
            }
        }
        if !placement.pin_client() {
            note(
                &mut outcome,
                console,
                "warning: could not pin the client thread".to_string(),
            );
        }
        for job in js {
            done += 1;
            let t0 = Instant::now();
            let mut cells: Vec<Cell<'_>> = servers
                .iter()
                .filter(|s| s.service == job.service)
                .map(|s| Cell {
                    server: s,
                    samples: Vec::new(),
                    failed: None,
                })
                .collect();
            for round in 0..mode.warmup + mode.iterations {
                for c in cells.iter_mut().filter(|c| c.failed.is_none()) {
                    let cpu = || c.server.cpu_seconds();
                    let mut probe = Probe::new(&cpu);
                    let result = (job.run)(&c.server.target(), &mut probe)
                        .and_then(|load| Ok((load, probe.window()?)));
                    match result {
                        Ok((load, window)) if round >= mode.warmup => {
                            c.samples.push(Sample { load, window })
                        }
                        Ok(_) => {}
                        Err(e) => c.failed = Some(e.to_string()),
                    }
                }
            }
            for c in &cells {
                if let Some(why) = &c.failed {
                    note(
                        &mut outcome,
                        console,
                        format!(
                            "failed: {} on {}: {why} (cell left out)",
                            job.id(),
                            c.server.executor.name()
                        ),
                    );
                }
            }
            check_open_loop(job, &cells, mode, &mut |l| note(&mut outcome, console, l));
            outcome.rows.extend(rows_of(job, &cells));
            (console.progress)(&format!(
                "[{done}/{total}] {} ({:.1} s)",
                job.id(),
                t0.elapsed().as_secs_f64()
            ));
        }
        for s in servers {
            let (name, service) = (s.executor.name(), s.service);
            if let Err(e) = s.stop(STOP_LIMIT) {
                note(
                    &mut outcome,
                    console,
                    format!(
                        "warning: {name} {} server did not stop cleanly: {e}",
                        service.name()
                    ),
                );
            }
        }
        if let Some(u) = upstreams {
            u.stop();
        }
        // The servers have read their certificates: their directory goes.
        drop(certificates);
    }
    outcome
}

/// The fan-out upstreams, or why there are none.
#[cfg(feature = "percore")]
struct Upstreams(crate::percore_servers::Upstreams, usize);

#[cfg(feature = "percore")]
impl Upstreams {
    /// Starts them on the client's CPU (the proxies' CPU holds the proxy
    /// alone) and adds their threads to `claimed`.
    fn start(placement: &Placement, claimed: &mut Vec<u32>) -> Result<Upstreams, String> {
        let cpu = placement
            .client_cpu
            .or(placement.server_cpus.first().copied())
            .unwrap_or(0);
        let percore_thread = |n: &str| Executor::Uring.owns_thread(n);
        let before = crate::sys::threads_matching(&percore_thread).unwrap_or_default();
        let u = crate::percore_servers::Upstreams::start(FAN_OUT_UPSTREAMS, cpu)
            .map_err(|e| format!("the HttpEcho upstreams did not start: {e}"))?;
        let tids = crate::sys::threads_matching(&percore_thread).unwrap_or_default();
        claimed.extend(tids.into_iter().filter(|t| !before.contains(t)));
        Ok(Upstreams(u, cpu))
    }

    fn addrs(&self) -> Vec<SocketAddr> {
        self.0.addrs.clone()
    }

    fn describe(&self) -> String {
        format!(
            "note: fan-out upstreams: {} percore HttpEcho servers ({} backend) on CPU {} with the client; \
             server CPU counts the proxy's threads only",
            self.0.addrs.len(),
            self.0.backend,
            self.1
        )
    }

    fn stop(self) {
        self.0.stop();
    }
}

/// Without percore there are no upstreams: fan-out is skipped.
#[cfg(not(feature = "percore"))]
struct Upstreams;

#[cfg(not(feature = "percore"))]
impl Upstreams {
    fn start(_placement: &Placement, _claimed: &mut Vec<u32>) -> Result<Upstreams, String> {
        Err("built without the `percore` feature (the upstreams are percore servers)".to_string())
    }

    fn addrs(&self) -> Vec<SocketAddr> {
        Vec::new()
    }

    fn describe(&self) -> String {
        String::new()
    }

    fn stop(self) {}
}

fn check_open_loop(job: &Job, cells: &[Cell<'_>], mode: &Mode, note: &mut dyn FnMut(String)) {
    let Some(rate) = job.target_rate else {
        return;
    };
    for c in cells.iter().filter(|c| c.failed.is_none()) {
        let errors: u64 = c.samples.iter().map(|s| s.load.errors).sum();
        let ops: u64 = c.samples.iter().map(|s| s.load.ops).sum();
        let expected = rate * mode.open_loop_window.as_secs_f64() * c.samples.len() as f64;
        if errors > 0 || (ops as f64) < 0.9 * expected {
            note(format!(
                "warning: {} on {}: {ops} of ~{expected:.0} requests answered, {errors} unanswered \
                 (rate not sustained; latencies include the backlog)",
                job.id(),
                c.server.executor.name()
            ));
        }
    }
}

fn sum_windows(samples: &[Sample]) -> (Option<f64>, u64, u64) {
    let cpu = samples
        .iter()
        .map(|s| s.window.server_cpu_s)
        .sum::<Option<f64>>();
    let ops = samples.iter().map(|s| s.load.ops).sum();
    let allocs = samples.iter().map(|s| s.window.allocs).sum();
    (cpu, ops, allocs)
}

fn rows_of(job: &Job, cells: &[Cell<'_>]) -> Vec<Row> {
    let mut rows = Vec::new();
    for m in &job.metrics {
        let summaries: Vec<(Executor, Option<Summary>, &Cell<'_>)> = cells
            .iter()
            .filter(|c| c.failed.is_none() && !c.samples.is_empty())
            .map(|c| {
                let vals: Option<Vec<f64>> = c.samples.iter().map(|s| (m.value)(s)).collect();
                (c.server.executor, vals.and_then(|v| Summary::of(&v)), c)
            })
            .collect();
        let base = summaries
            .iter()
            .find(|(e, _, _)| *e == Executor::BASELINE)
            .and_then(|(_, s, _)| *s);
        for (e, s, c) in &summaries {
            let Some(s) = s else { continue };
            let (cpu, ops, allocs) = sum_windows(&c.samples);
            let (speed, verdict) = match base {
                Some(_) if *e == Executor::BASELINE => (Some(1.0), Some(stats::Verdict::Baseline)),
                Some(b) => (
                    Some(stats::speedup(s.median, b.median, m.better)),
                    Some(stats::verdict(s.median, s.cv, b.median, b.cv, m.better)),
                ),
                None => (None, None),
            };
            let workload = if m.suffix.is_empty() {
                job.workload.clone()
            } else {
                format!("{}/{}", job.workload, m.suffix)
            };
            rows.push(Row {
                category: job.category.to_string(),
                workload,
                executor: e.name().to_string(),
                median: s.median,
                unit: m.unit.to_string(),
                cv: s.cv,
                n: s.n,
                better: m.better,
                speed,
                verdict,
                server_cpu_s: cpu,
                ops_per_cpu_s: cpu.filter(|c| *c > 0.0).map(|c| ops as f64 / c),
                allocs_per_op: (ops > 0).then(|| allocs as f64 / ops as f64),
            });
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_are_unique_and_complete() {
        for mode in [Mode::quick(), Mode::full()] {
            let js = jobs(&mode);
            let mut ids: Vec<String> = js.iter().map(Job::id).collect();
            let n = ids.len();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), n, "duplicate job ids");
            for want in [
                "socket_latency/pingpong/1B",
                "socket_latency/concurrent/16",
                "socket_throughput/unidirectional/1MiB",
                "socket_throughput/bidirectional/64KiB",
                "streaming/16KiB",
                "http_server/single_conn",
                "http_server/concurrent/32",
                "accept_churn/burst/100",
                "open_loop/http/10k_rps",
                "fan_out/fork_join/1",
                "fan_out/fork_join/16",
                "fan_out/concurrent_parents",
                "local_socket_latency/pingpong/64B/1",
                "local_socket_latency/pingpong/64B/16",
                "local_socket_throughput/unidirectional/64KiB",
                "local_socket_throughput/bidirectional/64KiB",
                "https/keepalive",
                "https/handshake",
                "h2_server/streams/1x1",
                "h2_server/streams/16x10",
                "api/users",
            ] {
                assert!(ids.iter().any(|i| i == want), "missing {want}");
            }
            let local = ids
                .iter()
                .filter(|i| i.starts_with("local_socket_"))
                .count();
            assert_eq!(local, if mode.quick { 4 } else { 12 }, "{ids:?}");
            assert_eq!(
                ids.iter()
                    .any(|i| i == "local_socket_throughput/bidirectional/1MiB"),
                !mode.quick
            );
            assert_eq!(
                ids.iter().any(|i| i == "http_server/connections/1000"),
                mode.sweep
            );
            assert_eq!(ids.iter().any(|i| i == "fan_out/fork_join/64"), !mode.quick);
            assert_eq!(
                ids.iter().any(|i| i == "h2_server/streams/100x10"),
                !mode.quick
            );
        }
    }

    #[test]
    fn sizes_are_named() {
        assert_eq!(size_name(64), "64B");
        assert_eq!(size_name(1024), "1KiB");
        assert_eq!(size_name(16 << 10), "16KiB");
        assert_eq!(size_name(1 << 20), "1MiB");
    }

    #[test]
    fn unix_jobs_need_the_unix_server() {
        for j in jobs(&Mode::full()) {
            assert_eq!(
                j.service == Service::UnixEcho,
                j.category.starts_with("local_socket_"),
                "{}",
                j.id()
            );
        }
    }

    #[test]
    fn https_jobs_need_the_https_server() {
        for j in jobs(&Mode::quick()) {
            assert_eq!(
                j.service == Service::Https,
                j.category == "https",
                "{}",
                j.id()
            );
            assert!(j.service.group() < Service::GROUPS, "{}", j.id());
        }
    }
}
