//! User code that panics outside a task's poll, on both backends: the
//! panic is caught, counted and logged, the core goes on, and nothing the
//! kernel still holds is freed. Each of these panics used to unwind out of
//! the core's loop.
//!
//! - a detached task's output whose destructor panics;
//! - a log subscriber that panics while a task's panic is logged;
//! - a user waker that panics when its I/O completes, or its timer fires.

use std::future::Future;
use std::io::Write;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use percore::net::TcpStream;
use percore::{block_on, core_stats, spawn_local};
use percore_test_kit::*;

/// Panics when dropped.
struct PanicsWhenDropped;

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("told to panic: an output's destructor");
    }
}

/// A waker of the user's that panics when woken.
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("told to panic: a waker");
    }
}

/// A log subscriber that panics at every error it is given, as the fmt
/// subscriber does when the reader of stderr is gone.
struct PanickingSubscriber;

impl tracing::Subscriber for PanickingSubscriber {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::ERROR
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {
        panic!("told to panic: a log subscriber");
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Lets the core's loop turn until `done`, or fails after a minute.
async fn turn_until(done: impl Fn() -> bool) {
    for _ in 0..60_000 {
        if done() {
            return;
        }
        percore::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the core never got there");
}

/// A connected pair: the test's blocking end and the core's end.
async fn pair(listener: &std::net::TcpListener) -> (std::net::TcpStream, TcpStream) {
    let addr = listener.local_addr().expect("addr");
    let ours = TcpStream::connect(addr).await.expect("connect");
    let (theirs, _) = listener.accept().expect("accept");
    theirs.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    (theirs, ours)
}

/// The core still serves I/O: a round trip through a fresh connection.
async fn still_serves(listener: &std::net::TcpListener) {
    let (mut peer, stream) = pair(listener).await;
    peer.write_all(b"still here").expect("write");
    let buf = stream.read().await.expect("read").expect("bytes");
    assert_eq!(&buf[..], b"still here");
}

backend_tests! {
    /// A detached task whose output panics when the core drops it.
    fn a_detached_outputs_panicking_destructor_is_caught(backend) {
        quiet_expected_panics();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        block_on(backend, async move {
            drop(spawn_local(async { PanicsWhenDropped }));
            turn_until(|| core_stats().panics == 1).await;
            still_serves(&listener).await;
            assert_eq!(core_stats().panics, 1);
        })
        .expect("block_on");
    }

    /// A task's panic logged to a subscriber that panics as well.
    fn a_panicking_log_subscriber_is_caught(backend) {
        quiet_expected_panics();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let _subscriber = tracing::subscriber::set_default(PanickingSubscriber);
        block_on(backend, async move {
            let task = spawn_local(async { panic!("told to panic: a task") });
            assert_eq!(task.await, Err(percore::JoinError::Panicked));
            still_serves(&listener).await;
            assert_eq!(core_stats().panics, 1);
        })
        .expect("block_on");
    }

    /// A read whose waker (a user's) panics when its data arrives: the
    /// data is kept, and another connection's data that arrived with it
    /// reaches its reader.
    fn a_panicking_waker_of_a_read_is_caught(backend) {
        quiet_expected_panics();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        block_on(backend, async move {
            let (mut first_peer, first) = pair(&listener).await;
            let (mut second_peer, second) = pair(&listener).await;
            let panicking = Waker::from(Arc::new(PanickingWaker));
            let mut read = pin!(first.read());
            let polled = read.as_mut().poll(&mut Context::from_waker(&panicking));
            assert!(polled.is_pending());
            let other = spawn_local(async move { second.read().await });
            percore::time::sleep(Duration::from_millis(1)).await;
            first_peer.write_all(b"first").expect("write");
            second_peer.write_all(b"second").expect("write");
            let got = other.await.expect("join").expect("read").expect("bytes");
            assert_eq!(&got[..], b"second");
            turn_until(|| core_stats().panics == 1).await;
            let got = std::future::poll_fn(|cx| read.as_mut().poll(cx)).await;
            assert_eq!(&got.expect("read").expect("bytes")[..], b"first");
            still_serves(&listener).await;
        })
        .expect("block_on");
    }

    /// A timer whose waker panics when it fires: a timer due with it still
    /// fires.
    fn a_panicking_waker_of_a_timer_is_caught(backend) {
        quiet_expected_panics();
        block_on(backend, async move {
            let panicking = Waker::from(Arc::new(PanickingWaker));
            let mut first = pin!(percore::time::sleep(Duration::from_millis(5)));
            let polled = first.as_mut().poll(&mut Context::from_waker(&panicking));
            assert!(polled.is_pending());
            percore::time::sleep(Duration::from_millis(5)).await;
            turn_until(|| core_stats().panics == 1).await;
            let fired = std::future::poll_fn(|cx| Poll::Ready(first.as_mut().poll(cx))).await;
            assert!(fired.is_ready(), "the panicking timer still fired");
        })
        .expect("block_on");
    }
}
