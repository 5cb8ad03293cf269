//! The README's quick start, word for word but for the port (`PORT`, 8080
//! if unset): keep the two in sync. `tests/suite/hello.rs` runs it as a
//! newcomer would and reads what it prints.

use percore_handlers::http::{self, HttpError, HttpHandler, Response, Routed, Router};

async fn hello(_: &(), req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> http::Result {
    let name = req.param_str("name")?; // percent-decoded
    if name.len() > 64 {
        // An HttpError's reason is for the client: `400 Bad Request: name too long`.
        return Err(HttpError::new(400, "name too long").into());
    }
    let text = format!("hello, {name}\n");
    res.send(200, Some(b"text/plain"), text.as_bytes())?;
    Ok(())
}

async fn motd(_: &(), _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> http::Result {
    // `?` takes any error. The client gets a bare 500, the log says why
    // (`environment variable not found` when MOTD is not set).
    let motd = std::env::var("MOTD")?;
    res.send(200, Some(b"text/plain"), format!("{motd}\n").as_bytes())?;
    Ok(())
}

fn main() -> Result<(), percore::MainError> {
    // The one change from the README: the port from `PORT`, if set.
    let port = std::env::var("PORT").unwrap_or_else(|_| "8080".into());
    percore::Server::builder()
        .address(format!("127.0.0.1:{port}").parse()?)
        // Runs once on each core's thread: per-core state needs no locks.
        .serve(|_core| {
            let routes = Router::new(())
                .get("/hello/{name}", hello)
                .get("/motd", motd)
                .build();
            HttpHandler::new(routes.expect("routes that do not conflict"))
        })?;
    Ok(())
}
