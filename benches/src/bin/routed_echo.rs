//! `routed_echo`: `http_echo`'s `GET` answer through percore's router, to
//! count what routing costs (`benches/instructions.sh`).
//!
//! Twelve routes, as a small API has; `GET /` and
//! `GET /users/{id}/posts/{post}` (both parameters parsed as numbers)
//! answer `{"message":"Hello!"}` as `http_echo` does, so
//! `URL_PATH=/users/7/posts/35 benches/instructions.sh
//! target/release/routed_echo` against `http_echo` is the router's cost.
//!
//! With `--trace on`, each request runs in the router's tracing span and a
//! subscriber logs every span's close (to nowhere), so the difference is
//! what the span costs when it is used; `--trace idle` turns the span on
//! with no subscriber, which is what it costs when nothing listens.
//!
//! Usage: `routed_echo [--port P] [--cores 0,1] [--backend uring|epoll|auto]
//! [--trace off|idle|on]` on 127.0.0.1:P (default 8080); stops on SIGINT or
//! SIGTERM.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use percore::Backend;
use percore_benches::cli::parse_cpu_list;
use percore_handlers::http::{HttpHandler, Response, Routed, Router, HELLO};

async fn hello(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    res.send(200, Some(b"application/json"), HELLO)?;
    Ok(())
}

async fn post(_: &(), req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    let (_, _): (u32, u32) = (req.param("id")?, req.param("post")?);
    res.send(200, Some(b"application/json"), HELLO)?;
    Ok(())
}

fn main() -> ExitCode {
    let mut port = 8080u16;
    let mut cores = None;
    let mut backend = Backend::Auto;
    let mut trace = "off".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().unwrap_or_default();
        match arg.as_str() {
            "--port" => port = value.parse().unwrap_or(port),
            "--cores" => cores = parse_cpu_list(&value).ok(),
            "--backend" => backend = value.parse().unwrap_or(Backend::Auto),
            "--trace" if ["off", "idle", "on"].contains(&value.as_str()) => trace = value,
            other => {
                eprintln!("routed_echo: unknown option {other}");
                return ExitCode::from(2);
            }
        }
    }
    if trace == "on" {
        tracing_subscriber::fmt()
            .with_writer(io::sink)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .init();
    }
    let traced = trace != "off";
    let mut builder = percore::Server::builder()
        .address(SocketAddr::from(([127, 0, 0, 1], port)))
        .backend(backend);
    if let Some(cores) = cores {
        builder = builder.cores(cores);
    }
    let served = builder.serve(move |_core| {
        let routes = Router::new(())
            .get("/", hello)
            .get("/health", hello)
            .get("/users", hello)
            .post("/users", hello)
            .get("/users/{id}", hello)
            .get("/users/{id}/posts", hello)
            .get("/users/{id}/posts/{post}", post)
            .delete("/users/{id}/posts/{post}", hello)
            .get("/search", hello)
            .get("/orders/{id}", hello)
            .get("/static/{*path}", hello)
            .get("/stats", hello)
            .trace(traced);
        HttpHandler::new(routes.build().expect("the routes do not conflict"))
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("routed_echo: {e}");
            ExitCode::FAILURE
        }
    }
}
