//! tokio-postgres inside a percore handler, against a real PostgreSQL
//! that the test starts: 1,000 concurrent HTTP requests each insert a row
//! and read it back through the core, while the same core keeps answering
//! plain requests.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percore_handlers::http::{HttpHandler, Response, Routed, Router};
use percore_test_kit::{builder, check_backend, Postgres};
use percore_tokio::CompatExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OnceCell;
use tokio_postgres::{Client, NoTls};

/// Requests in flight at once, each on its own connection.
const REQUESTS: usize = 1000;
/// PostgreSQL connections per core; tokio-postgres pipelines the queries
/// of concurrent requests on each.
const CLIENTS: usize = 4;
/// A hang detector, not a speed limit.
const HANG: Duration = Duration::from_secs(60);

/// One core's state: its database clients, connected on first use, and
/// which one the next request takes.
struct Db {
    config: String,
    clients: [OnceCell<Client>; CLIENTS],
    next: Cell<usize>,
}

impl Db {
    async fn client(&self) -> io::Result<&Client> {
        let i = self.next.get();
        self.next.set((i + 1) % CLIENTS);
        self.clients[i]
            .get_or_try_init(|| async {
                let (client, connection) = tokio_postgres::connect(&self.config, NoTls)
                    .compat()
                    .await
                    .map_err(io::Error::other)?;
                // The connection's I/O runs as a task of this core.
                percore_tokio::spawn_local(async move {
                    if let Err(e) = connection.await {
                        eprintln!("postgres connection: {e}");
                    }
                });
                Ok::<_, io::Error>(client)
            })
            .await
    }
}

/// `POST /rows/{id}`: inserts `(id, 'v{id}')`, reads the row back and
/// answers its value.
async fn put_row(db: &Rc<Db>, req: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    let id: i32 = req.param("id")?;
    let client = db.client().await?;
    let value = async {
        client
            .execute(
                "INSERT INTO rows (id, value) VALUES ($1, $2)",
                &[&id, &format!("v{id}")],
            )
            .await?;
        let row = client
            .query_one("SELECT value FROM rows WHERE id = $1", &[&id])
            .await?;
        Ok::<String, tokio_postgres::Error>(row.get(0))
    }
    .compat()
    .await
    .map_err(io::Error::other)?;
    res.send(200, Some(b"text/plain"), value.as_bytes())?;
    Ok(())
}

async fn ping(_: &Rc<Db>, _: &mut Routed<'_, '_>, res: &mut Response<'_>) -> io::Result<()> {
    res.send(200, Some(b"text/plain"), b"pong")?;
    Ok(())
}

/// Creates the table with a client on a runtime of the test's own.
fn create_table(config: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, connection) = tokio_postgres::connect(config, NoTls)
            .await
            .expect("connect");
        let conn = tokio::spawn(connection);
        client
            .batch_execute("CREATE TABLE rows (id integer PRIMARY KEY, value text NOT NULL)")
            .await
            .expect("create table");
        drop(client);
        conn.await.expect("join").expect("connection");
    });
}

/// One request on a connection of its own: the status and the body.
async fn request(addr: SocketAddr, head: String) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(head.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await.expect("receive");
    let text = String::from_utf8(answer).expect("UTF-8 answer");
    let status = text
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

/// Pings `addr` one request at a time until `done`; the slowest answer
/// and how many there were.
fn ping_until(addr: SocketAddr, done: &AtomicBool) -> (Duration, usize) {
    let (mut slowest, mut count) = (Duration::ZERO, 0);
    loop {
        let start = Instant::now();
        let resp = percore_test_kit::http::one(addr, b"GET /ping HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(resp.status, 200);
        assert_eq!(resp.body, b"pong");
        slowest = slowest.max(start.elapsed());
        count += 1;
        if done.load(Ordering::Acquire) {
            return (slowest, count);
        }
    }
}

percore_test_kit::backend_tests! {
    /// 1,000 concurrent inserts and reads through tokio-postgres, each
    /// row correct, while plain requests keep being answered.
    fn thousand_concurrent_queries(backend) {
        // 1. A PostgreSQL of the test's own, with the table.
        let Some(pg) = Postgres::start() else { return };
        create_table(&pg.config());

        // 2. A one-core server whose routes query it.
        let config = pg.config();
        let server = builder(backend)
            .start(move |_core| {
                let db = Rc::new(Db {
                    config: config.clone(),
                    clients: Default::default(),
                    next: Cell::new(0),
                });
                let routes = Router::new(db)
                    .post("/rows/{id}", put_row)
                    .get("/ping", ping)
                    .build();
                HttpHandler::new(routes.expect("routes that do not conflict"))
            })
            .expect("server starts");
        check_backend(&server, backend);
        let addr = server.local_addr();

        // 3. The requests at once, and pings beside them.
        let done = Arc::new(AtomicBool::new(false));
        let pinger = {
            let done = done.clone();
            std::thread::spawn(move || ping_until(addr, &done))
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let answers = rt.block_on(async {
            let requests: Vec<_> = (0..REQUESTS)
                .map(|id| {
                    let head = format!(
                        "POST /rows/{id} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    tokio::spawn(request(addr, head))
                })
                .collect();
            let mut answers = Vec::with_capacity(REQUESTS);
            for r in requests {
                answers.push(r.await.expect("request task"));
            }
            answers
        });
        done.store(true, Ordering::Release);
        let (slowest_ping, pings) = pinger.join().expect("pinger");

        // 4. Every row as written; the pings were answered.
        for (id, (status, body)) in answers.iter().enumerate() {
            assert_eq!(*status, 200, "request {id}: {body}; PostgreSQL log: {}", pg.log());
            assert_eq!(body, &format!("v{id}"), "request {id}");
        }
        assert!(pings >= 1);
        assert!(slowest_ping < HANG, "a ping took {slowest_ping:?}");
        println!("{REQUESTS} rows; {pings} pings beside them, the slowest {slowest_ping:?}");

        // 5. The rows are in the table, once each.
        let rt_check = |q: &'static str| {
            rt.block_on(async {
                let (client, connection) = tokio_postgres::connect(&pg.config(), NoTls).await.expect("connect");
                tokio::spawn(connection);
                client.query_one(q, &[]).await.expect("query").get::<_, i64>(0)
            })
        };
        assert_eq!(rt_check("SELECT count(*) FROM rows"), REQUESTS as i64);
        server.shutdown();
        server.join().expect("server stops cleanly");
    }
}
