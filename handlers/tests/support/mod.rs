//! What the handlers' tests share beyond `percore-test-kit`: servers of
//! this crate's handlers. The echo tests start [`start_echo`] servers; the
//! HTTP and fan-out tests use [`http`] and [`fanout`], the client tests
//! [`client`] too.

pub(crate) mod client;
pub(crate) mod fanout;
#[cfg(feature = "h2")]
#[allow(dead_code, reason = "only the client's HTTP/2 tests use it")]
pub(crate) mod h2origin;
#[allow(dead_code, reason = "only the suite's HTTP/2 tests use it")]
pub(crate) mod h2raw;
pub(crate) mod http;
#[allow(
    dead_code,
    unused_imports,
    reason = "only the suite's WebSocket tests use it"
)]
pub(crate) mod ws;
#[cfg(feature = "h2")]
#[allow(dead_code, reason = "only the suite's HTTP/2 WebSocket tests use it")]
pub(crate) mod ws_h2;

use percore::{Backend, ServerBuilder, ServerHandle};
use percore_handlers::echo::Echo;
use percore_test_kit::check_backend;

/// Starts the echo handler on a one-core test server and checks the
/// backend.
#[allow(dead_code, reason = "only the echo tests start the echo handler")]
pub(crate) fn start_echo(builder: ServerBuilder, backend: Backend) -> ServerHandle {
    let handle = builder.start(|_core| Echo).expect("start the echo server");
    check_backend(&handle, backend);
    handle
}

/// [`percore_test_kit::child_main`] with the echo handler: the body of a
/// test binary's child-entry test.
#[allow(dead_code, reason = "only one echo test re-runs itself as a server")]
pub(crate) fn child_main() {
    percore_test_kit::child_main(|_core| Echo);
}
