//! TCP sockets with owned-buffer, completion-style I/O on both backends.

mod listener;
mod stream;

pub use listener::TcpListener;
pub(crate) use listener::{bind_probe, bind_reuseport};
pub use stream::{Read, TcpStream, WriteAll, WriteAllVectored};
