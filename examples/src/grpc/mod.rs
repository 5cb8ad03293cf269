//! The gRPC echo service's messages, server and client, generated from
//! `proto/echo.proto` by `tonic-prost-build` 0.14 (with
//! `build_transport(false)`: the client runs over any HTTP/2 service) and
//! kept here, so that building the examples needs no `protoc`. After a
//! change to the `.proto` file, generate it anew with that crate's
//! `configure().build_transport(false).out_dir(..).compile_protos(..)`.
//!
//! Needs the `grpc` feature.

/// Package `echo.v1`.
#[allow(missing_docs, clippy::all, clippy::pedantic, unreachable_pub)]
pub mod echo_v1 {
    include!("echo_v1.rs");
}
