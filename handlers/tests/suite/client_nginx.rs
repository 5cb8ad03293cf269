//! The HTTP client against a real third-party server: nginx serving a
//! static file on 127.0.0.1, on both backends. Skips (printing why) when
//! `/usr/sbin/nginx` is missing; CI installs it with apt-get.

use std::time::Duration;

use percore_handlers::client::Client;
use percore_test_kit::*;

const STATIC: &str = "static file from nginx\n";

/// nginx serving [`STATIC`] as `/index.txt`, and 64 KiB as `/big.txt`.
fn nginx() -> Option<Nginx> {
    Nginx::start(|dir| {
        std::fs::write(dir.join("html/index.txt"), STATIC).expect("static file");
        std::fs::write(dir.join("html/big.txt"), vec![b'n'; 64 * 1024]).expect("big file");
        format!("  root {}/html;\n  default_type text/plain;", dir.display())
    })
}

backend_tests! {
    parallel;
    /// The file, nginx's 404, a HEAD and a streamed larger file, over
    /// kept-alive connections.
    fn static_files(backend) {
        let Some(nginx) = nginx() else { return };
        let base = format!("http://{}", nginx.addr);
        let log = nginx.log();
        percore::block_on(backend, async move {
            let job = async {
                let client = Client::new();
                for _ in 0..3 {
                    let mut r = client.get(&format!("{base}/index.txt")).send().await.expect("get");
                    assert_eq!(r.status(), 200, "nginx log: {log}");
                    assert_eq!(r.header("server").map(|s| s.starts_with(b"nginx")), Some(true));
                    assert_eq!(&r.body().await.expect("body")[..], STATIC.as_bytes());
                }
                let mut r = client.get(&format!("{base}/missing")).send().await.expect("get");
                assert_eq!(r.status(), 404);
                r.body().await.expect("the 404 page");
                let mut r = client.head(&format!("{base}/index.txt")).send().await.expect("head");
                assert_eq!(r.status(), 200);
                assert!(r.body().await.expect("no body").is_empty());
                let mut r = client.get(&format!("{base}/big.txt")).send().await.expect("get");
                let mut n = 0;
                while let Some(piece) = r.chunk().await.expect("chunk") {
                    n += piece.len();
                }
                assert_eq!(n, 64 * 1024);
            };
            percore::time::timeout(Duration::from_secs(60), job).await.expect("the client hung")
        })
        .expect("run a core");
    }
}
