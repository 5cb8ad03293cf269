//! A server's [`percore::Readiness`], on both backends: not ready before
//! `start` returns, ready while it serves, unready from the moment a stop
//! is asked for; with an unready delay it serves on, unready, until the
//! delay ends or a second stop request cuts it short.

use std::time::Duration;

use percore::Readiness;
use percore_test_kit::*;

backend_tests! {
    /// Ready between the start and the stop; the handle's readiness is the
    /// one given to the builder.
    fn ready_from_start_to_stop(backend) {
        let readiness = Readiness::new();
        let builder = builder(backend).readiness(readiness.clone());
        assert!(!readiness.is_ready() && !readiness.is_serving());
        let server = builder.start(|_core| PlainEcho).expect("start");
        assert!(readiness.is_ready() && server.readiness().is_ready());
        ping(server.local_addr());
        server.shutdown();
        assert!(!readiness.is_ready() && readiness.is_leaving());
        server.join().expect("join");
        assert!(!readiness.is_ready());
    }

    /// During the unready delay the server is unready but still accepts
    /// and serves; a second stop request begins the stop at once.
    fn unready_delay_serves_on(backend) {
        let server = builder(backend)
            .unready_delay(Duration::from_secs(3600))
            .start(|_core| PlainEcho)
            .expect("start");
        let readiness = server.readiness();
        server.shutdown();
        assert!(!readiness.is_ready());
        // Still accepting and serving: a fresh connection is echoed.
        ping(server.local_addr());
        server.shutdown();
        server.join().expect("a second request stops it, not the hour");
    }
}
