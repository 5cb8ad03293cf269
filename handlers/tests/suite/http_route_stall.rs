//! FAULTS N1 through the router, on both backends: a route that blocks
//! its core is reported with its name (`label="GET /block/{ms}"`) and a
//! backtrace naming the route's function, and a request on another
//! connection of the core is answered after it.

use std::time::Duration;

use percore::Server;
use percore_handlers::http::{HttpHandler, Routed, Router};
use percore_test_kit::http::{one, Client};
use percore_test_kit::*;

/// The route's function, which the backtrace must name: never inlined.
#[inline(never)]
fn percore_test_route_blocks_its_core(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
    std::hint::black_box(());
}

async fn block(
    _: &(),
    req: &mut Routed<'_, '_>,
    res: &mut percore_handlers::http::Response<'_>,
) -> std::io::Result<()> {
    let ms: u64 = req.param("ms")?;
    percore_test_route_blocks_its_core(ms);
    res.send(200, None, b"blocked")?;
    Ok(())
}

async fn quick(
    _: &(),
    _: &mut Routed<'_, '_>,
    res: &mut percore_handlers::http::Response<'_>,
) -> std::io::Result<()> {
    res.send(200, None, b"quick")?;
    Ok(())
}

backend_tests! {
    /// Serial: the log is the process's, and a test beside this one could
    /// stall too.
    fn a_blocking_route_is_reported_by_name(backend) {
        log_capture::install();
        log_capture::clear();
        let server = Server::builder()
            .address(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .cores([server_cpu()])
            .backend(backend)
            .stall_threshold(Some(Duration::from_millis(50)))
            .start(|_core| {
                HttpHandler::new(Router::new(()).get("/block/{ms}", block).get("/quick", quick).build().expect("routes"))
            })
            .expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let mut other = Client::connect(addr);
        assert_eq!(other.roundtrip(b"GET /quick HTTP/1.1\r\nHost: t\r\n\r\n").status, 200);
        let blocked = std::thread::spawn(move || one(addr, b"GET /block/200 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
        // Answered, once the core is free again.
        assert_eq!(other.roundtrip(b"GET /quick HTTP/1.1\r\nHost: t\r\n\r\n").status, 200);
        assert_eq!(blocked.join().expect("the blocked client").body, b"blocked");
        let reports = wait_until(Duration::from_secs(60), "the stall reported", || log_capture::lines_with(&["core stalled", "/block/{ms}"]), |l| !l.is_empty());
        assert!(reports[0].contains(r#"label="GET /block/{ms}""#), "{reports:#?}");
        let frames = log_capture::lines_with(&["percore_test_route_blocks_its_core"]);
        assert!(!frames.is_empty(), "the backtrace names the route's function: {reports:#?}");
        server.shutdown();
        server.join().expect("join");
    }
}
