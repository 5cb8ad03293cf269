//! `pg_roundtrip`: the cost of one tokio-based client round trip (a
//! PostgreSQL `SELECT 1` over tokio-postgres) from a task on a percore
//! core (through percore-tokio, on io_uring and on epoll) against the same
//! from a task on a tokio current-thread runtime.
//!
//! Each side connects once, warms up, then times `--queries` sequential
//! queries, one at a time (latency, not throughput); the sides take turns,
//! `--rounds` times, and each side's median of its round medians is
//! printed, with the percore sides' ratios to tokio's. What it does not
//! measure: many queries in flight at once (pipelining hides the wake's
//! cost), or a loaded core.
//!
//! Usage: `pg_roundtrip --config "host=127.0.0.1 port=5432 user=postgres"
//! [--queries 2000] [--rounds 3]`; `benches/axum_percore.sh` starts a
//! PostgreSQL and runs it.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use percore_tokio::CompatExt;
use tokio_postgres::NoTls;

/// Queries before the timed ones, per round.
const WARM_UP: usize = 200;

/// Times `n` sequential `SELECT 1`s on a fresh connection; the latencies,
/// sorted. `spawn` runs the connection's background future.
async fn time_queries(
    config: String,
    n: usize,
    spawn: impl FnOnce(
        tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
    ),
) -> Result<Vec<Duration>, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(&config, NoTls).await?;
    spawn(connection);
    let statement = client.prepare("SELECT 1").await?;
    for _ in 0..WARM_UP {
        client.query_one(&statement, &[]).await?;
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let row = client.query_one(&statement, &[]).await?;
        times.push(start.elapsed());
        assert_eq!(row.get::<_, i32>(0), 1);
    }
    times.sort();
    Ok(times)
}

fn on_tokio(config: &str, n: usize) -> Result<Vec<Duration>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(time_queries(config.to_owned(), n, |c| {
        tokio::spawn(c);
    }))
    .map_err(|e| e.to_string())
}

fn on_percore(backend: percore::Backend, config: &str, n: usize) -> Result<Vec<Duration>, String> {
    let config = config.to_owned();
    let times = percore::block_on(
        backend,
        time_queries(config, n, |c| {
            percore_tokio::spawn_local(c);
        })
        .compat(),
    )
    .map_err(|e| e.to_string())?;
    times.map_err(|e| e.to_string())
}

fn median(times: &[Duration]) -> Duration {
    times[times.len() / 2]
}

fn parse() -> Result<(String, usize, usize), String> {
    let (mut config, mut n, mut rounds) = (None, 2000, 3);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--config" => config = Some(value()?),
            "--queries" => n = value()?.parse().map_err(|e| format!("--queries: {e}"))?,
            "--rounds" => rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let config = config.ok_or("--config is required")?;
    Ok((config, n.max(1), rounds.max(1)))
}

fn main() -> ExitCode {
    let (config, n, rounds) = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "pg_roundtrip: {e}\nusage: pg_roundtrip --config CONFIG [--queries N] [--rounds R]"
            );
            return ExitCode::from(2);
        }
    };
    let sides = ["tokio-ct", "uring", "epoll"];
    let mut medians: [Vec<Duration>; 3] = Default::default();
    let mut p99s: [Vec<Duration>; 3] = Default::default();
    for _ in 0..rounds {
        for (i, side) in sides.iter().enumerate() {
            let times = match *side {
                "tokio-ct" => on_tokio(&config, n),
                "uring" => on_percore(percore::Backend::Uring, &config, n),
                _ => on_percore(percore::Backend::Epoll, &config, n),
            };
            match times {
                Ok(t) => {
                    medians[i].push(median(&t));
                    p99s[i].push(t[t.len() * 99 / 100]);
                }
                Err(e) => {
                    eprintln!("pg_roundtrip: {side}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let summary: Vec<(Duration, Duration)> = (0..3)
        .map(|i| {
            medians[i].sort();
            p99s[i].sort();
            (median(&medians[i]), median(&p99s[i]))
        })
        .collect();
    println!("SELECT 1 round trip, {n} sequential queries x {rounds} rounds (median of round medians; p99)");
    for (i, side) in sides.iter().enumerate() {
        let (med, p99) = summary[i];
        let ratio = med.as_secs_f64() / summary[0].0.as_secs_f64();
        println!(
            "  {side:<9} median {:>7.1} us  p99 {:>7.1} us  ÷ tokio-ct {ratio:.3}",
            med.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }
    ExitCode::SUCCESS
}
