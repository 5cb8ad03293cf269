//! [`Failure`]: why a request body could not be read, whichever protocol
//! carried it; recorded by the body's reader, so the connection answers
//! correctly whatever the service did with the error.

use std::io;

use super::proto::HttpError;

/// Why a body could not be read. Recorded by the reader, so the connection
/// loop answers correctly whatever the service did with the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Answer with this error (400, 408, 413, 431), then close.
    Refused(HttpError),
    /// The peer went away (end of stream, reset, write failure): close
    /// without answering.
    Gone,
}

pub(crate) fn failure_error(f: Failure) -> io::Error {
    match f {
        Failure::Refused(e) if e.status == 408 => io::Error::new(io::ErrorKind::TimedOut, e),
        Failure::Refused(e) => io::Error::new(io::ErrorKind::InvalidData, e),
        Failure::Gone => io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed before the end of the request body",
        ),
    }
}
