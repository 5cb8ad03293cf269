//! FAULTS N1 seen from `/metrics`: a route that blocks its core is counted
//! in `percore_stalls_total`, and its duration in
//! `percore_stall_duration_seconds`, on both backends.

use std::io;
use std::time::Duration;

use percore::Readiness;
use percore_handlers::http::{HttpHandler, Request, Response, Service};
use percore_handlers::metrics::Metrics;
use percore_test_kit::http::*;
use percore_test_kit::*;

/// Never inlined: a stall report's backtrace would name it.
#[inline(never)]
fn percore_test_route_blocks(how_long: Duration) {
    std::thread::sleep(how_long);
    std::hint::black_box(());
}

/// `/block` blocks its core for 300 ms; anything else answers at once.
struct Blocking;

impl Service for Blocking {
    async fn call(&self, req: &mut Request<'_>, res: &mut Response<'_>) -> io::Result<()> {
        if req.path() == "/block" {
            percore_test_route_blocks(Duration::from_millis(300));
        }
        res.send(200, None, b"ok")?;
        Ok(())
    }
}

/// The value of the sample `name{core="..."}` in a scrape.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{core=")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn scrape(metrics: &Metrics) -> String {
    let mut out = Vec::new();
    metrics.render(&mut out);
    String::from_utf8(out).expect("a scrape is UTF-8")
}

backend_tests! {
    parallel;
    /// A 300 ms block against a 100 ms threshold: counted, its duration
    /// recorded, and the request still answered, as is the next one.
    fn a_blocking_route_shows_in_metrics(backend) {
        let readiness = Readiness::new();
        let metrics = Metrics::new(readiness.clone());
        let server = builder(backend)
            .readiness(readiness)
            .stall_threshold(Some(Duration::from_millis(100)))
            .start(|_core| HttpHandler::new(Blocking))
            .expect("start");
        metrics.set_server(server.stats_reader());
        assert_eq!(sample(&scrape(&metrics), "percore_stalls_total"), Some(0.0));
        let addr = server.local_addr();
        assert_eq!(one(addr, b"GET /block HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
        assert_eq!(one(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
        let text = wait_until(Duration::from_secs(60), "the stall's end in the scrape", || scrape(&metrics), |text| {
            sample(text, "percore_stall_duration_seconds_count").is_some_and(|n| n >= 1.0)
        });
        assert!(sample(&text, "percore_stalls_total").is_some_and(|n| n >= 1.0), "{text}");
        // At least the block's 300 ms.
        assert!(sample(&text, "percore_stall_duration_seconds_sum").is_some_and(|s| s >= 0.3), "{text}");
        server.shutdown();
        server.join().expect("join");
    }
}
