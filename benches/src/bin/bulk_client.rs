//! `bulk_client`: one connection streaming bytes through an echo server for
//! a fixed time, for `benches/bulk_duel.sh`.
//!
//! Usage: `bulk_client PORT SECONDS [CHUNK] [--lockstep]`. Writes
//! CHUNK-byte buffers (default 1 MiB) to 127.0.0.1:PORT without waiting for
//! the echo, reads the echo concurrently, stops writing after SECONDS,
//! half-closes, and reads until every byte written has come back. With
//! `--lockstep` it writes one CHUNK and reads its whole echo before the next
//! (the pattern of `cargo bench`'s `unidirectional` cells). Prints the bytes
//! echoed, or fails (exit status 1) if the echo differs in length or content,
//! or stalls for 10 s.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const STALL: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = parse(&args).and_then(|args| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|runtime| {
                runtime.block_on(async {
                    if args.lockstep {
                        lockstep(args.port, args.window, args.chunk).await
                    } else {
                        stream(args.port, args.window, args.chunk).await
                    }
                })
            })
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(bytes) => {
            println!("{bytes}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bulk_client: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Args {
    port: u16,
    window: Duration,
    chunk: usize,
    lockstep: bool,
}

/// PORT, SECONDS and CHUNK (1 MiB when left out), both of the last
/// positive, and whether `--lockstep` was given.
fn parse(args: &[String]) -> Result<Args, String> {
    let lockstep = args.iter().any(|a| a == "--lockstep");
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--lockstep")
        .collect();
    let (port, secs, chunk) = match args[..] {
        [port, secs] => (port, secs, "1048576"),
        [port, secs, chunk] => (port, secs, chunk),
        _ => return Err("usage: bulk_client PORT SECONDS [CHUNK] [--lockstep]".to_string()),
    };
    let port = port.parse().map_err(|e| format!("PORT: {e}"))?;
    let window = secs
        .parse()
        .map_err(|e| format!("SECONDS: {e}"))
        .and_then(|s| Duration::try_from_secs_f64(s).map_err(|e| format!("SECONDS: {e}")))
        .and_then(|d| {
            if d.is_zero() {
                Err("SECONDS must be positive".to_string())
            } else {
                Ok(d)
            }
        })?;
    let chunk = match chunk.parse() {
        Ok(0) => return Err("CHUNK must be positive".to_string()),
        Ok(n) => n,
        Err(e) => return Err(format!("CHUNK: {e}")),
    };
    Ok(Args {
        port,
        window,
        chunk,
        lockstep,
    })
}

/// Streams for `window`; returns the bytes that came back.
async fn stream(port: u16, window: Duration, chunk: usize) -> std::io::Result<u64> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    s.set_nodelay(true)?;
    let (mut r, mut w) = s.split();
    let out = vec![0x5a; chunk];
    let deadline = Instant::now() + window;
    let writer = async {
        let mut written = 0u64;
        while Instant::now() < deadline {
            w.write_all(&out).await?;
            written += chunk as u64;
        }
        w.shutdown().await?;
        Ok::<u64, std::io::Error>(written)
    };
    let reader = async {
        let mut back = vec![0u8; 1 << 20];
        let mut got = 0u64;
        loop {
            match tokio::time::timeout(STALL, r.read(&mut back)).await {
                Ok(Ok(0)) => return Ok(got),
                Ok(Ok(n)) => got += n as u64,
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(std::io::Error::other("the echo stalled for 10 s")),
            }
        }
    };
    let (written, got) = tokio::try_join!(writer, reader)?;
    if got != written {
        return Err(std::io::Error::other(format!(
            "wrote {written} bytes, {got} came back"
        )));
    }
    Ok(got)
}

/// Round trips of one `chunk` each for `window`; returns the bytes that
/// came back, every one of them checked.
async fn lockstep(port: u16, window: Duration, chunk: usize) -> std::io::Result<u64> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
    s.set_nodelay(true)?;
    let (mut r, mut w) = s.split();
    let out: Vec<u8> = (0..chunk).map(|i| (i % 251) as u8).collect();
    let mut back = vec![0u8; chunk];
    let deadline = Instant::now() + window;
    let mut got = 0u64;
    while Instant::now() < deadline {
        let round = async { tokio::try_join!(w.write_all(&out), r.read_exact(&mut back)) };
        match tokio::time::timeout(STALL, round).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(std::io::Error::other("the echo stalled for 10 s")),
        }
        if back != out {
            return Err(std::io::Error::other("the echo differs from what was sent"));
        }
        got += chunk as u64;
    }
    Ok(got)
}
