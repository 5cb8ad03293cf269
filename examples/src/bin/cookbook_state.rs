//! Cookbook: the three places state lives in a percore server.
//!
//! - **Shared by all cores**: made once, put in an `Arc`, cloned into each
//!   core's handler by the factory. Use it for what every core reads
//!   (configuration) or rarely writes (atomics, a `Mutex` held briefly).
//! - **Per core**: made by the factory on each core's thread, owned by that
//!   core's handler. A `Cell` or `RefCell` is enough: nothing else touches
//!   it, so it needs no lock.
//! - **Owned by one core**: a `thread_local!` that only core 0 uses; any
//!   core reaches it with `submit_to(0, ..)`, which runs the closure on
//!   core 0 and brings back its answer.
//!
//! ```text
//! cookbook_state [--port 8090] [--cores 0,1]
//! curl localhost:8090/shared    # requests seen by all cores
//! curl localhost:8090/local     # requests seen by the core that answers
//! curl -X PUT localhost:8090/owned/colour -d blue; curl localhost:8090/owned/colour
//! ```

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use clap::Parser;
use percore::{core_index, submit_to};
use percore_examples::{exit_with, init_logging, parse_args, run, CommonArgs};
use percore_handlers::http::{HttpError, HttpHandler, Response, Routed, Router};

/// Made once in `main`, shared by every core.
struct Shared {
    greeting: String,
    requests: AtomicU64,
}

/// One per core: the factory makes it on the core's thread.
struct App {
    shared: Arc<Shared>,
    requests: Cell<u64>,
}

thread_local! {
    /// Used on core 0 only: the keys of `/owned/{key}`.
    static OWNED: RefCell<HashMap<String, String>> = RefCell::new(HashMap::new());
}

/// The core that owns `OWNED` (the first core the server runs on).
const OWNER: usize = 0;

type Req<'a, 'b, 'c> = &'a mut Routed<'b, 'c>;
type Res<'a, 'b> = &'a mut Response<'b>;

async fn shared_count(app: &App, _: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let n = app.shared.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let body = format!("{}: request {n} of all cores\n", app.shared.greeting);
    Ok(res.send(200, Some(b"text/plain"), body.as_bytes())?)
}

async fn local_count(app: &App, _: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    app.requests.set(app.requests.get() + 1);
    let body = format!("request {} of core {}\n", app.requests.get(), core_index());
    Ok(res.send(200, Some(b"text/plain"), body.as_bytes())?)
}

async fn put_owned(_: &App, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let key = req.param_str("key")?.into_owned();
    let value = String::from_utf8_lossy(req.body().await?).into_owned();
    // The closure runs on core 0; only what it returns comes back.
    submit_to(OWNER, move || async move {
        OWNED.with(|map| map.borrow_mut().insert(key, value));
    })
    .await
    .map_err(io::Error::other)?;
    Ok(res.send(204, None, b"")?)
}

async fn get_owned(_: &App, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let key = req.param_str("key")?.into_owned();
    let found = submit_to(OWNER, move || async move {
        OWNED.with(|map| map.borrow().get(&key).cloned())
    })
    .await
    .map_err(io::Error::other)?;
    let value = found.ok_or_else(|| HttpError::new(404, "no such key"))?;
    Ok(res.send(200, Some(b"text/plain"), value.as_bytes())?)
}

/// State shared by all cores, per core, and owned by one core.
#[derive(Debug, Parser)]
#[command(name = "cookbook_state")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() {
    let Cli { common } = parse_args("8090");
    init_logging();
    let shared = Arc::new(Shared {
        greeting: "hello".to_owned(),
        requests: AtomicU64::new(0),
    });
    let factory = move |_: &percore::CoreContext| {
        let app = App {
            shared: shared.clone(),
            requests: Cell::new(0),
        };
        let routes = Router::new(app)
            .get("/shared", shared_count)
            .get("/local", local_count)
            .put("/owned/{key}", put_owned)
            .get("/owned/{key}", get_owned);
        HttpHandler::new(routes.build().expect("the routes do not conflict"))
    };
    if let Err(e) = run("cookbook_state", &common, factory) {
        exit_with(1, &format!("cookbook_state: {e}"));
    }
}
