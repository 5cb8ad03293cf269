//! Cookbook: a PostgreSQL client per core, with tokio-postgres through
//! percore-tokio (`--features postgres`).
//!
//! Each core connects its own client on first use and keeps it; the
//! client's connection runs as a task of that core, and the queries of
//! concurrent requests are pipelined on it. A client whose connection
//! died is replaced at the next request. For more than one connection
//! per core, keep a few and take them in turn.
//!
//! ```text
//! cookbook_postgres --database 'host=127.0.0.1 user=postgres' [--port 8092]
//! curl -d 'buy milk' localhost:8092/notes     # 201, the new note's id
//! curl localhost:8092/notes/1                 # buy milk
//! ```

use std::cell::RefCell;
use std::io;
use std::rc::Rc;

use clap::Parser;
use percore_examples::{exit_with, init_logging, parse_args, run, CommonArgs};
use percore_handlers::http::{HttpError, HttpHandler, Response, Routed, Router};
use percore_tokio::CompatExt;
use tokio_postgres::{Client, NoTls};

/// One per core: the database's address and this core's client.
struct Db {
    config: String,
    client: RefCell<Option<Rc<Client>>>,
}

impl Db {
    /// This core's client, connected if it has none or its connection died.
    async fn client(&self) -> io::Result<Rc<Client>> {
        if let Some(client) = self.client.borrow().as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let (client, connection) = tokio_postgres::connect(&self.config, NoTls)
            .compat()
            .await
            .map_err(unavailable)?;
        // The connection does the client's I/O: a task of this core.
        percore_tokio::spawn_local(async move {
            if let Err(e) = connection.await {
                tracing::warn!("postgres connection: {e}");
            }
        });
        let client = Rc::new(client);
        *self.client.borrow_mut() = Some(client.clone());
        Ok(client)
    }
}

/// A database failure, as the 503 the client gets (the cause is logged).
fn unavailable(e: tokio_postgres::Error) -> io::Error {
    tracing::warn!("postgres: {e}");
    HttpError::new(503, "database unavailable").into()
}

type Req<'a, 'b, 'c> = &'a mut Routed<'b, 'c>;
type Res<'a, 'b> = &'a mut Response<'b>;

async fn add_note(db: &Db, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let text = String::from_utf8(req.body().await?.to_vec())
        .map_err(|_| HttpError::new(400, "a note is UTF-8 text"))?;
    let client = db.client().await?;
    let row = client
        .query_one(
            "INSERT INTO notes (text) VALUES ($1) RETURNING id",
            &[&text],
        )
        .compat()
        .await
        .map_err(unavailable)?;
    let id: i64 = row.get(0);
    Ok(res.send(201, Some(b"text/plain"), format!("{id}\n").as_bytes())?)
}

async fn get_note(db: &Db, req: Req<'_, '_, '_>, res: Res<'_, '_>) -> io::Result<()> {
    let id: i64 = req.param("id")?;
    let client = db.client().await?;
    let row = client
        .query_opt("SELECT text FROM notes WHERE id = $1", &[&id])
        .compat()
        .await
        .map_err(unavailable)?;
    let row = row.ok_or_else(|| HttpError::new(404, format!("no note {id}")))?;
    let text: String = row.get(0);
    Ok(res.send(200, Some(b"text/plain"), text.as_bytes())?)
}

/// Creates the table before the server starts, on a tokio runtime of
/// its own that ends with this call.
fn create_schema(config: &str) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(config, NoTls).await?;
        let connection = tokio::spawn(connection);
        let created = client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS notes (id bigserial PRIMARY KEY, text text NOT NULL)",
            )
            .await;
        drop(client);
        let _ = connection.await;
        created
    })
    .map_err(|e| io::Error::other(format!("postgres: {e}")))
}

/// Notes kept in PostgreSQL, one client per core.
#[derive(Debug, Parser)]
#[command(name = "cookbook_postgres")]
struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// The database, as a libpq connection string
    #[arg(
        long,
        value_name = "CONFIG",
        default_value = "host=127.0.0.1 user=postgres"
    )]
    database: String,
}

fn main() {
    let Cli { common, database } = parse_args("8092");
    init_logging();
    if let Err(e) = create_schema(&database) {
        exit_with(1, &format!("cookbook_postgres: {e}"));
    }
    let factory = move |_: &percore::CoreContext| {
        let db = Db {
            config: database.clone(),
            client: RefCell::new(None),
        };
        let routes = Router::new(db)
            .post("/notes", add_note)
            .get("/notes/{id}", get_note);
        HttpHandler::new(routes.build().expect("the routes do not conflict"))
    };
    if let Err(e) = run("cookbook_postgres", &common, factory) {
        exit_with(1, &format!("cookbook_postgres: {e}"));
    }
}
