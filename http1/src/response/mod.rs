//! The response side: the head scanner ([`head`]) and the parser of a
//! whole response over a growing buffer ([`ResponseParser`]), which the
//! client, the proxy's branches and its drain read upstream answers with.

pub mod head;
mod reader;

pub use reader::{Answer, ResponseError, ResponseLimits, ResponseParser};

#[cfg(test)]
mod tests;
