//! TCP sockets with owned-buffer, completion-style I/O on both backends.

mod listener;
mod stream;

pub(crate) use listener::{bind_probe, bind_reuseport};
pub use listener::TcpListener;
pub use stream::{Read, TcpStream};
