//! Cookbook: a CRUD JSON service whose errors are JSON too.
//!
//! Handlers return `HttpError`s (`404 no item 7`) with `?`; the router's
//! `error_body` writes every error answer, the router's own (404, 405, 413)
//! and the server's (400 for a malformed request) among them, as
//! `{"status":404,"error":"no item 7"}`. The items live in one map shared
//! by all cores (see `cookbook_state` for the other places state lives).
//!
//! ```text
//! cookbook_crud [--port 8091]
//! curl -d '{"name":"pen"}' -H 'Content-Type: application/json' localhost:8091/items
//! curl localhost:8091/items/1
//! curl -X PUT -d '{"name":"ink"}' -H 'Content-Type: application/json' localhost:8091/items/1
//! curl -X DELETE localhost:8091/items/1
//! ```

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;
use percore_examples::{exit_with, init_logging, parse_args, run, CommonArgs};
use percore_handlers::http::{HttpError, HttpHandler, Response, Routed, Router};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize)]
struct Item {
    id: u64,
    name: String,
}

/// What a client sends to create or replace an item.
#[derive(Deserialize)]
struct NewItem {
    name: String,
}

/// The items, and the last id given. The lock is never held across an
/// `.await`, so a core never waits for another core's request.
#[derive(Default)]
struct Store {
    items: BTreeMap<u64, Item>,
    last_id: u64,
}

type Db = Arc<Mutex<Store>>;
type Req<'a, 'b, 'c> = &'a mut Routed<'b, 'c>;
type Res<'a, 'b> = &'a mut Response<'b>;

fn lock(db: &Db) -> std::sync::MutexGuard<'_, Store> {
    db.lock().unwrap_or_else(PoisonError::into_inner)
}

fn not_found(id: u64) -> io::Error {
    HttpError::new(404, format!("no item {id}")).into()
}

/// A name the service accepts: not empty, at most 100 bytes.
fn checked(new: NewItem) -> Result<String, HttpError> {
    if new.name.is_empty() || new.name.len() > 100 {
        return Err(HttpError::new(422, "name must be 1 to 100 bytes"));
    }
    Ok(new.name)
}

async fn create(db: &Db, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let name = checked(req.json().await?)?;
    let item = {
        let mut store = lock(db);
        store.last_id += 1;
        let item = Item {
            id: store.last_id,
            name,
        };
        store.items.insert(item.id, item.clone());
        item
    };
    res.header("Location", format!("/items/{}", item.id).as_bytes())?;
    Ok(res.json(201, &item)?)
}

async fn list(db: &Db, _: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let items: Vec<Item> = lock(db).items.values().cloned().collect();
    Ok(res.json(200, &items)?)
}

async fn read(db: &Db, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let id: u64 = req.param("id")?;
    let item = lock(db)
        .items
        .get(&id)
        .cloned()
        .ok_or_else(|| not_found(id))?;
    Ok(res.json(200, &item)?)
}

async fn update(db: &Db, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let id: u64 = req.param("id")?;
    let name = checked(req.json().await?)?;
    let item = Item { id, name };
    match lock(db).items.get_mut(&id) {
        Some(stored) => *stored = item.clone(),
        None => return Err(not_found(id)),
    }
    Ok(res.json(200, &item)?)
}

async fn delete(db: &Db, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let id: u64 = req.param("id")?;
    lock(db).items.remove(&id).ok_or_else(|| not_found(id))?;
    Ok(res.send(204, None, b"")?)
}

/// Every error answer's body: `{"status":404,"error":"no item 7"}`.
fn json_error(error: &HttpError, body: &mut Vec<u8>) -> &'static str {
    let value = serde_json::json!({ "status": error.status, "error": error.reason });
    // Writing a `Value` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(body, &value);
    "application/json"
}

/// A CRUD JSON service: /items and /items/{id}, errors as JSON.
#[derive(Debug, Parser)]
#[command(name = "cookbook_crud")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() {
    let Cli { common } = parse_args("8091");
    init_logging();
    let db = Db::default();
    let factory = move |_: &percore::CoreContext| {
        let routes = Router::new(db.clone())
            .post("/items", create)
            .get("/items", list)
            .get("/items/{id}", read)
            .put("/items/{id}", update)
            .delete("/items/{id}", delete)
            .error_body(json_error);
        HttpHandler::new(routes.build().expect("the routes do not conflict"))
    };
    if let Err(e) = run("cookbook_crud", &common, factory) {
        exit_with(1, &format!("cookbook_crud: {e}"));
    }
}
