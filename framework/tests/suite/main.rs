//! The framework's integration tests, one module per subject, in one binary
//! (each file its own binary cost a link per file). Tests that change what
//! the whole process does (the counting allocator, `SIGPIPE`) have binaries
//! of their own beside this one.

mod abort;
mod churn_no_leak;
mod core_panics;
mod custom_handler;
mod drain_deadline;
mod drop_in_flight;
mod fs;
mod fs_vectored;
mod give_back;
mod handler_panic;
mod messaging;
mod moving;
mod outbound;
mod overload_hold;
mod read_ahead;
mod readiness;
mod runtime_io;
mod send_file;
mod server_config;
mod spawn_blocking;
mod sqpoll_idle;
mod stall;
mod steering;
mod take_over;
mod task_wakers;
mod tls;
mod tls_peers;
mod udp;
mod udp_server;
mod under_faults;
mod unix;
mod until_stopped;
mod write_behind;
mod write_vectored;
