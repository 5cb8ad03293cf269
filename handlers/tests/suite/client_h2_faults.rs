//! The HTTP client over HTTP/2 against a scripted origin, on both
//! backends: requests the server did not take (past a GOAWAY's last
//! stream, or refused) are sent again and answered; a request it took
//! and then dropped with the connection, a reset stream, and a request
//! never answered fail, each saying why. (Feature `h2`.)
#![cfg(feature = "h2")]

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use percore_handlers::client::{self, Client, ClientError, ErrorKind, Op};
use percore_test_kit::*;
use support::client::on_core;
use support::h2origin::{H2Origin, Script};

/// `n` GETs of `url` at once over HTTP/2 in clear text: what each got
/// (its body, or its error).
fn gets(backend: Backend, url: String, n: usize) -> Vec<Result<Vec<u8>, ClientError>> {
    on_core(backend, async move {
        let mut config = client::Config::default();
        config.http2_prior_knowledge = true;
        config.head_timeout = Duration::from_millis(300);
        let client = Client::with_config(config);
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let (client, url) = (client.clone(), url.clone());
                percore::spawn_local(async move {
                    let mut r = client.get(&url).send().await?;
                    assert_eq!(r.status(), 200);
                    Ok(r.body().await?.to_vec())
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.push(task.await.expect("the request's task"));
        }
        all
    })
}

backend_tests! {
    parallel;
    /// A GOAWAY that names the first of two requests as the last taken:
    /// the first is answered on its connection, the second sent again on
    /// a new one.
    fn a_request_past_goaway_is_sent_again(backend) {
        let origin = H2Origin::start(Script::GoAwayAfterTwo);
        let got = gets(backend, format!("http://{}/", origin.addr), 2);
        let mut bodies: Vec<_> = got.into_iter().map(|r| r.expect("answered")).collect();
        bodies.sort();
        assert_eq!(bodies, vec![b"again".to_vec(), b"first".to_vec()]);
        assert_eq!(origin.connections.load(Ordering::SeqCst), 2);
    }

    /// A request the GOAWAY names as taken, whose connection then ends
    /// unanswered, fails: the server may have acted on it.
    fn a_taken_request_left_unanswered_fails(backend) {
        let origin = H2Origin::start(Script::GoAwayUnanswered);
        let url = format!("http://{}/", origin.addr);
        let e = gets(backend, url.clone(), 1).remove(0).expect_err("unanswered");
        assert_eq!(e.kind(), ErrorKind::Closed, "{e}");
        assert_eq!(
            e.to_string(),
            format!("GET {url}: the server closed the connection before answering")
        );
        assert_eq!(origin.connections.load(Ordering::SeqCst), 1, "not sent again");
    }

    /// A refused stream is sent again, on the same connection.
    fn a_refused_stream_is_sent_again(backend) {
        let origin = H2Origin::start(Script::RefuseFirst);
        let got = gets(backend, format!("http://{}/", origin.addr), 1);
        assert_eq!(got.into_iter().map(|r| r.expect("answered")).collect::<Vec<_>>(), vec![b"answered".to_vec()]);
        assert_eq!(origin.connections.load(Ordering::SeqCst), 1);
    }

    /// A reset stream fails with the server's reason.
    fn a_reset_stream_fails_with_its_reason(backend) {
        let origin = H2Origin::start(Script::Reset);
        let url = format!("http://{}/", origin.addr);
        let e = gets(backend, url.clone(), 1).remove(0).expect_err("reset");
        assert_eq!(e.kind(), ErrorKind::Reset, "{e}");
        assert_eq!(
            e.to_string(),
            format!("GET {url}: the server reset the HTTP/2 stream (INTERNAL_ERROR)")
        );
    }

    /// An origin that never answers: the head timeout passes, for each
    /// of the requests sharing its connection.
    fn a_request_never_answered_times_out(backend) {
        let origin = H2Origin::start(Script::Never);
        for got in gets(backend, format!("http://{}/", origin.addr), 3) {
            let e = got.expect_err("never answered");
            assert_eq!(e.kind(), ErrorKind::Timeout(Op::ReadHead), "{e}");
        }
        assert_eq!(origin.connections.load(Ordering::SeqCst), 1);
    }
}
