//! Which addresses listen on a TCP port in the calling thread's network
//! namespace, read from its `net/tcp` and `net/tcp6` in `/proc` (the
//! kernel's socket tables; no syscall tells it). For a take-over, which
//! must join the running server on its own address, and for steering,
//! which must know whether its port's group holds other servers' sockets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The `st` column of a listening socket.
const LISTEN: &str = "0A";

/// The distinct local addresses of the sockets listening on `port`;
/// `None` when neither table can be read (no `/proc`).
pub(crate) fn on_port(port: u16) -> Option<Vec<SocketAddr>> {
    // `/proc/net` is the namespace of the process's first thread, not
    // necessarily the caller's (a thread may have moved with `setns` or
    // `unshare`), whose sockets are the ones that met the port in use;
    // `thread-self` (Linux 3.17) is the caller's.
    let dir = net_dir();
    let v4 = std::fs::read_to_string(format!("{dir}/tcp")).ok();
    let v6 = std::fs::read_to_string(format!("{dir}/tcp6")).ok();
    if v4.is_none() && v6.is_none() {
        return None;
    }
    let mut found = Vec::new();
    for table in [v4, v6].iter().flatten() {
        for addr in listening(table) {
            if addr.port() == port && !found.contains(&addr) {
                found.push(addr);
            }
        }
    }
    Some(found)
}

/// The calling thread's network namespace's tables.
fn net_dir() -> &'static str {
    if std::path::Path::new("/proc/thread-self/net").exists() {
        "/proc/thread-self/net"
    } else {
        "/proc/net"
    }
}

/// How many sockets listen on exactly `address`; `None` when its table
/// cannot be read.
///
/// The kernel lists the listening sockets before the others, so the
/// table is read only up to the first that is not listening: a server
/// with many connections costs no more than an idle one.
pub(crate) fn count_at(address: SocketAddr) -> Option<usize> {
    use std::io::BufRead;
    let table = if address.is_ipv4() { "tcp" } else { "tcp6" };
    let file = std::fs::File::open(format!("{}/{table}", net_dir())).ok()?;
    let mut count = 0;
    for line in std::io::BufReader::new(file).lines().skip(1) {
        let line = line.ok()?;
        let mut fields = line.split_whitespace();
        let (Some(local), Some(state)) = (fields.nth(1), fields.nth(1)) else {
            continue;
        };
        if state != LISTEN {
            break;
        }
        if local_address(local)
            .is_some_and(|a| a.ip() == address.ip() && a.port() == address.port())
        {
            count += 1;
        }
    }
    Some(count)
}

/// The local addresses of a table's listening sockets (lines that do not
/// parse are skipped).
fn listening(table: &str) -> impl Iterator<Item = SocketAddr> + '_ {
    table.lines().skip(1).filter_map(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1)?;
        let state = fields.nth(1)?;
        (state == LISTEN).then(|| local_address(local)).flatten()
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address
/// is printed as 32-bit words in the machine's byte order, the port in
/// hex.
fn local_address(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = [0u8; 16];
    let words = ip.len() / 8;
    if !(words == 1 || words == 4) || ip.len() % 8 != 0 {
        return None;
    }
    for (i, chunk) in bytes.chunks_exact_mut(4).take(words).enumerate() {
        let word = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    let ip = if words == 1 {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(bytes))
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernels_listening_sockets() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let v6 = std::net::TcpListener::bind("[::1]:0").ok();
        let addr = v4.local_addr().expect("addr");
        assert_eq!(on_port(addr.port()), Some(vec![addr]));
        if let Some(v6) = v6 {
            let addr = v6.local_addr().expect("addr");
            assert_eq!(on_port(addr.port()), Some(vec![addr]));
        }
    }

    #[test]
    fn counts_the_sockets_listening_on_an_address() {
        let one = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = one.local_addr().expect("addr");
        // A read can miss a line while other tests open and close sockets
        // (the table moves under the reader between its pages): one read
        // of a hundred that sees it is the kernel's word.
        let seen = |count| (0..100).any(|_| count_at(addr) == Some(count));
        assert!(seen(1), "the listener was never counted");
        drop(one);
        assert!(seen(0), "the closed listener is still counted");
    }

    #[test]
    fn parses_both_tables_formats() {
        let port = 0x1F90;
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n\
            0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000\n\
            1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000\n\
            2: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 0\n\
            3: garbage\n";
        let found: Vec<SocketAddr> = listening(table).collect();
        if cfg!(target_endian = "little") {
            assert_eq!(
                found,
                vec![
                    SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
                    SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port),
                ]
            );
        }
        assert_eq!(local_address("0100007F"), None);
        assert_eq!(local_address("0100007:1F90"), None);
    }
}
