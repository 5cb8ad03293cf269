//! The server's listening sockets: one `SO_REUSEPORT` listener per core on
//! one port, refusing a port another server holds unless asked to take it
//! over.
//!
//! Taking over is how a server is restarted without refusing connections:
//! the new process joins the running one's `SO_REUSEPORT` group (the kernel
//! allows that only to the same user), both share new connections, and the
//! old one is then stopped. What the old one's listeners still hold when
//! they close is handed to the new one's only if
//! `net.ipv4.tcp_migrate_req` is 1; otherwise the kernel resets it.

use std::borrow::Cow;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

/// Where Linux (5.14+) says whether a closing listener's queued
/// connections move to another listener of its `SO_REUSEPORT` group.
const MIGRATE_REQ: &str = "/proc/sys/net/ipv4/tcp_migrate_req";

/// Binds `count` listeners on `address`, all in one `SO_REUSEPORT` group,
/// and returns them with the address bound (the port chosen when it was 0)
/// and whether they joined a running server's group. The group's order is
/// the order of the returned sockets (each joins it as it listens), after
/// the running server's when joined.
///
/// Without `take_over`, a probe socket without `SO_REUSEPORT` is bound
/// first: it fails if anything else holds the port, including another
/// server's reuse-port group, which the kernel would otherwise let us join
/// silently and split traffic with. With it, the group is joined on
/// purpose, and the log says whether anyone was there.
pub(crate) fn bind_group(
    address: SocketAddr,
    count: usize,
    backlog: i32,
    take_over: bool,
) -> io::Result<(Vec<OwnedFd>, SocketAddr, bool)> {
    if take_over && address.port() == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "take-over needs the port of the running server, not port 0",
        ));
    }
    // Whether a server already listens there (and is joined).
    let probe = if take_over {
        crate::net::bind_probe(address)
    } else {
        bind_probe_patiently(address)
    };
    let (address, joined) = match probe {
        Ok(probe) => {
            if take_over {
                // The probe binds beside a server on the other family's
                // wildcard (`[::1]:P` beside `0.0.0.0:P`), which takes the
                // connections meant for the server to replace: refused as
                // another address is. A server on some other specific
                // address is a neighbour, not the one to replace.
                if let Some(listening) = super::listening::on_port(address.port()) {
                    let wildcards: Vec<SocketAddr> = listening
                        .into_iter()
                        .filter(|a| a.ip().is_unspecified())
                        .collect();
                    among_running(address, &wildcards)?;
                }
            }
            (crate::sys::local_addr(probe.as_fd())?, false)
        }
        Err(e) if e.kind() == io::ErrorKind::AddrInUse && take_over => {
            same_address_as_running(address)?;
            (address, true)
        }
        Err(e) => return Err(in_use(address, e, false)),
    };
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = crate::net::bind_reuseport(address, backlog)
            .map_err(|e| in_use(address, e, take_over))?;
        sockets.push(socket);
    }
    if joined {
        announce_take_over(address);
    } else if take_over {
        tracing::info!(%address, "take-over: no server was listening on the port; serving it alone");
    }
    Ok((sockets, address, joined))
}

/// How long a port in use may take to come free before it is refused.
const PROBE_PATIENCE: Duration = Duration::from_millis(500);

/// Binds the probe, waiting a moment for a port in use to come free: a
/// process on io_uring that has just died (killed, or stopped by a second
/// signal) holds its listeners until the kernel has torn its rings down,
/// 5 to 12 ms after it was reaped (measured on Linux 6.18), and a
/// supervisor that restarts it at once must not be refused as if another
/// server were there.
fn bind_probe_patiently(address: SocketAddr) -> io::Result<OwnedFd> {
    let give_up = Instant::now() + PROBE_PATIENCE;
    loop {
        match crate::net::bind_probe(address) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(5));
            }
            probe => return probe,
        }
    }
}

/// Names the cause of a failed bind. A port in use is told apart by its
/// holder: one that shares it (`SO_REUSEPORT`, same user, as a percore
/// server does) could be taken over, any other cannot.
fn in_use(address: SocketAddr, e: io::Error, take_over: bool) -> io::Error {
    let in_use = e.kind() == io::ErrorKind::AddrInUse;
    let why: Cow<'_, str> = match (in_use, take_over) {
        (true, false) if crate::net::bind_probe_shared(address).is_ok() => {
            "address already in use by a server that shares its port (a percore server?); \
             to replace it without refusing connections, start this one with \
             `ServerBuilder::take_over(true)` (`--take-over` on the example servers)"
                .into()
        }
        (true, false) => "address already in use by another program".into(),
        (true, true) => "the port is held by a socket that cannot be shared (one without \
                         SO_REUSEPORT, or another user's)"
            .into(),
        (false, _) => e.to_string().into(),
    };
    let verb = if take_over { "take over" } else { "listen on" };
    io::Error::new(e.kind(), format!("cannot {verb} {address}: {why}"))
}

/// Refuses a take-over on another address than the running server's, say
/// `127.0.0.1:P` for a server on `0.0.0.0:P`: the kernel lets both bind,
/// but makes them two groups that neither share new connections (each
/// gets the ones its address matches best) nor hand over queued ones, so
/// the old server's stop would reset what its listeners hold. The
/// listening sockets of the calling thread's network namespace are read
/// from `/proc`; when neither table can be read, the take-over goes on.
fn same_address_as_running(address: SocketAddr) -> io::Result<()> {
    match super::listening::on_port(address.port()) {
        Some(listening) => among_running(address, &listening),
        None => Ok(()),
    }
}

/// Refuses `address` unless its IP is among `listening` (the addresses
/// listening on its port), or that is empty.
fn among_running(address: SocketAddr, listening: &[SocketAddr]) -> io::Result<()> {
    // By address only (`listening` is the port's): the tables carry no IPv6
    // scope or flow label, which a link-local address (`[fe80::1%2]:P`) has.
    if listening.is_empty() || listening.iter().any(|running| running.ip() == address.ip()) {
        return Ok(());
    }
    let names: Vec<String> = listening.iter().map(SocketAddr::to_string).collect();
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "cannot take over {address}: the server on port {} listens on {}, and only a \
             server on the same address shares its connections and takes over its queue \
             (take over {} instead)",
            address.port(),
            names.join(", "),
            names[0],
        ),
    ))
}

/// Whether a closing listener's queued connections go to another listener
/// of its group (and are reset only when there is none).
pub(crate) fn listeners_hand_over() -> bool {
    std::fs::read_to_string(MIGRATE_REQ).is_ok_and(|v| v.trim() == "1")
}

fn announce_take_over(address: SocketAddr) {
    if listeners_hand_over() {
        tracing::info!(
            %address,
            "take-over: sharing the port with the server already listening there; when it \
             stops, the connections its listeners still hold come here (tcp_migrate_req=1)"
        );
    } else {
        tracing::warn!(
            %address,
            "take-over: sharing the port with the server already listening there; when it \
             stops, connections still queued in its listeners are reset: set \
             net.ipv4.tcp_migrate_req=1 (Linux 5.14+) to have them handed over"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_take_over_matches_the_running_address_whatever_its_scope() {
        let running: SocketAddr = "[fe80::1]:8080".parse().unwrap();
        let scoped: SocketAddr = "[fe80::1%2]:8080".parse().unwrap();
        assert!(among_running(scoped, &[running]).is_ok());
        assert!(among_running(running, &[]).is_ok());
        let all: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let err =
            among_running("127.0.0.1:8080".parse().unwrap(), &[all]).expect_err("another address");
        assert!(err.to_string().contains("listens on 0.0.0.0:8080"), "{err}");
    }
}
