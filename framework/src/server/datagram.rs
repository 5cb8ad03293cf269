//! A server's UDP addresses: one `SO_REUSEPORT` socket per core on each,
//! and the [`DatagramHandler`] that serves it there.
//!
//! The kernel gives each sender's datagrams to one socket of the group (by
//! a hash of the addresses), so a core sees a sender's datagrams in order
//! and the cores share the senders. A take-over joins the running server's
//! group as a TCP take-over does: both receive until the old one stops;
//! datagrams still queued in its sockets then are lost with them (UDP has
//! no hand-over).

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;

use super::CoreContext;
use crate::net::{bind_udp, UdpSocket};
use crate::DatagramHandler;

/// A core's datagram task, made on its thread.
pub(crate) type DatagramTask = Pin<Box<dyn Future<Output = io::Result<()>>>>;

/// Makes a core's task for one UDP address from its socket: the factory's
/// handler, its type erased.
type MakeTask = Arc<dyn Fn(&CoreContext, UdpSocket) -> DatagramTask + Send + Sync>;

/// A UDP address to serve and the factory of its handlers.
#[derive(Clone)]
pub(crate) struct DatagramSpec {
    pub(crate) addr: SocketAddr,
    make: MakeTask,
}

impl DatagramSpec {
    pub(crate) fn new<D, F>(addr: SocketAddr, factory: F) -> DatagramSpec
    where
        D: DatagramHandler,
        F: Fn(&CoreContext) -> D + Send + Sync + 'static,
    {
        let make: MakeTask = Arc::new(move |ctx: &CoreContext, socket: UdpSocket| {
            let handler = factory(ctx);
            Box::pin(async move { handler.serve(socket).await }) as DatagramTask
        });
        DatagramSpec { addr, make }
    }
}

impl fmt::Debug for DatagramSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Udp").field("addr", &self.addr).finish()
    }
}

/// One core's socket of one UDP address, with what makes its task.
pub(crate) struct DatagramParts {
    socket: OwnedFd,
    make: MakeTask,
}

impl DatagramParts {
    /// Registers the socket with this core and makes its task (running the
    /// factory).
    pub(crate) fn start(self, ctx: &CoreContext) -> io::Result<DatagramTask> {
        let socket = UdpSocket::from_fd(self.socket)?;
        Ok((self.make)(ctx, socket))
    }
}

/// Binds every UDP address for `cores` cores and deals the sockets out:
/// `[core][address]`, with the addresses bound (the port chosen, when 0).
pub(crate) fn bind_all(
    specs: &[DatagramSpec],
    cores: usize,
    take_over: bool,
) -> io::Result<(Vec<Vec<DatagramParts>>, Vec<SocketAddr>)> {
    let mut per_core: Vec<Vec<DatagramParts>> = (0..cores).map(|_| Vec::new()).collect();
    let mut addrs = Vec::with_capacity(specs.len());
    for spec in specs {
        let (sockets, addr) = bind_group(spec.addr, cores, take_over)?;
        addrs.push(addr);
        for (parts, socket) in per_core.iter_mut().zip(sockets) {
            parts.push(DatagramParts {
                socket,
                make: spec.make.clone(),
            });
        }
    }
    Ok((per_core, addrs))
}

/// Binds `count` sockets on `addr` in one `SO_REUSEPORT` group.
///
/// Without `take_over`, a socket without `SO_REUSEPORT` is bound first,
/// which fails if anything holds the port (another server's group
/// included, which the kernel would let us join silently); it also
/// chooses the port when `addr`'s is 0. With it, the group is joined.
fn bind_group(
    addr: SocketAddr,
    count: usize,
    take_over: bool,
) -> io::Result<(Vec<OwnedFd>, SocketAddr)> {
    let named = |e: io::Error| {
        let verb = if take_over { "take over" } else { "serve" };
        io::Error::new(e.kind(), format!("cannot {verb} UDP {addr}: {e}"))
    };
    if take_over && addr.port() == 0 {
        return Err(named(io::Error::new(
            io::ErrorKind::InvalidInput,
            "take-over needs the port of the running server, not port 0",
        )));
    }
    let addr = if take_over {
        addr
    } else {
        let probe = bind_udp(addr, false).map_err(named)?;
        crate::sys::local_addr(probe.as_fd())?
    };
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count {
        sockets.push(bind_udp(addr, true).map_err(named)?);
    }
    Ok((sockets, addr))
}
