//! Test support shared by percore's crates: the framework's, the
//! handlers' and the example binaries' integration tests.
//!
//! - [`backend_tests!`] stamps each test out once per backend (tokio's
//!   `rt_test!` pattern): a test written as `fn name(backend)` becomes
//!   `uring::name` and `epoll::name`. The uring variant prints
//!   `skipped: <reason>` and returns when io_uring is unavailable here.
//!   [`backend_process_tests!`] does the same for tests that run a server
//!   in a child process, and hands them the backend's command-line name.
//! - Every stamped test holds [`serial`] while it runs: tests count the
//!   process's fds, RSS and CPU time, which tests running alongside in the
//!   same process would disturb (and the machine has two cores anyway).
//!   Tests that read nothing process-wide hold [`shared`] and run together.
//!   A crate's integration tests are a few binaries of many files each
//!   (`tests/suite/`, `tests/alloc/`): the lock spans the binary.
//! - Clients are blocking `std::net` sockets with read and write timeouts:
//!   a timeout is a failure guard, never a way to wait for the server.
//! - [`count_allocations!`] installs the counting allocator of [`alloc`]
//!   in the test binary that calls it.
//!
//! The kit depends on `percore` and is a dev-dependency of it: its
//! integration tests link the one `percore` library the kit links.
#![doc(test(attr(deny(warnings))))]

pub mod alloc;
mod backend;
mod bound_client;
mod certs;
mod child;
mod client;
mod flood;
mod haproxy;
mod hosts;
pub mod http;
pub mod log_capture;
mod netns;
mod nginx;
mod panics;
mod postgres;
mod probe;
mod prometheus;
mod race;
mod rng;
mod scratch;
mod server;
mod silent;
mod streams;
mod target;
mod tools;
pub mod upstream;
pub mod ws;

pub use backend::{require, serial, shared, uring_unavailable};
pub use bound_client::connect_from;
pub use certs::TestCert;
pub use child::{
    child_command, child_main, parse_listening, parse_serving, rerun_under_fault, server_command,
    stat_from_log, strip_ansi, wait_timeout, ChildServer, StartFailure, CHILD_ENV,
};
pub use client::{connect, ping, read_to_end, reset, roundtrip, IO_TIMEOUT};
pub use flood::{flood, Outcomes, FLOOD_BATCH};
pub use haproxy::{Haproxy, StatRow};
pub use hosts::Hosts;
pub use netns::private_network;
pub use nginx::Nginx;
pub use panics::quiet_expected_panics;
pub use percore::{Backend, Server, ServerBuilder, ServerHandle, StatsSnapshot};
pub use postgres::Postgres;
pub use probe::{
    core_thread_ticks, cpu_ticks, fd_count, fd_table, settle_fds, vm_rss_kib, wait_until,
};
pub use prometheus::Prometheus;
pub use race::{join2, Deadline};
pub use rng::{pattern, random_pool, Rng};
pub use scratch::{on_core, TempDir};
pub use server::{builder, check_backend, idle_in_flight, server_cpu, sum, PlainEcho};
pub use silent::Silent;
pub use streams::{within_polls, Progress, Streams};
pub use target::{ClientSock, Target};
pub use tools::{curl, installed, python3, python_module, wrk};

/// Writes each test once and stamps it out per backend, into modules
/// `uring` and `epoll`. Each stamped test holds [`serial`], and skips
/// with a printed reason where [`require`] says the backend cannot run.
///
/// Tests that read nothing process-wide (no fd counts, RSS or CPU time)
/// may start with `parallel;`: they then hold [`shared`] instead, and run
/// alongside each other (but never beside a [`serial`] test).
///
/// ```ignore
/// percore_test_kit::backend_tests! {
///     /// Doc comment.
///     fn echoes(backend) { ... }
/// }
/// ```
#[macro_export]
macro_rules! backend_tests {
    (parallel; $($(#[$meta:meta])* fn $name:ident($backend:ident) $body:block)+) => {
        $(
            $(#[$meta])*
            fn $name($backend: $crate::Backend) $body
        )+

        $crate::__stamp_backend!(uring, Uring, $crate::shared(), |backend| backend; $($name)+);
        $crate::__stamp_backend!(epoll, Epoll, $crate::shared(), |backend| backend; $($name)+);
    };
    ($($(#[$meta:meta])* fn $name:ident($backend:ident) $body:block)+) => {
        $(
            $(#[$meta])*
            fn $name($backend: $crate::Backend) $body
        )+

        $crate::__stamp_backend!(uring, Uring, $crate::serial(), |backend| backend; $($name)+);
        $crate::__stamp_backend!(epoll, Epoll, $crate::serial(), |backend| backend; $($name)+);
    };
}

/// [`backend_tests!`] for tests of a server in a child process: the test
/// gets the backend's command-line name (`"uring"`, `"epoll"`), for a
/// `--backend` argument.
///
/// ```ignore
/// percore_test_kit::backend_process_tests! {
///     /// Doc comment.
///     fn stops_on_sigterm(backend) { ... }
/// }
/// ```
#[macro_export]
macro_rules! backend_process_tests {
    ($($(#[$meta:meta])* fn $name:ident($backend:ident) $body:block)+) => {
        $(
            $(#[$meta])*
            fn $name($backend: &'static str) $body
        )+

        $crate::__stamp_backend!(uring, Uring, $crate::serial(), |_backend| "uring"; $($name)+);
        $crate::__stamp_backend!(epoll, Epoll, $crate::serial(), |_backend| "epoll"; $($name)+);
    };
}

/// One backend's module of stamped tests, each holding `$guard` (the
/// [`serial`] or the [`shared`] lock) while it runs; the argument each test gets is made from the backend by `|$b| $arg`.
#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_backend {
    ($module:ident, $variant:ident, $guard:expr, |$b:ident| $arg:expr; $($name:ident)+) => {
        mod $module {
            $(
                #[test]
                fn $name() {
                    let _serial = $guard;
                    if let Some($b) = $crate::require($crate::Backend::$variant) {
                        super::$name($arg);
                    }
                }
            )+
        }
    };
}
