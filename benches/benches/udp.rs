//! `cargo bench -p percore-benches --bench udp [-- --quick]`: datagrams
//! received per server CPU-second, at 64 and 1,200 bytes, by percore
//! (io_uring, epoll; one `recv_from` per datagram, and `recv_batch` of 32),
//! tokio's `UdpSocket` on a current-thread runtime, and a blocking std
//! loop (`recv_from`, and `recvmmsg` of 32), alternated round by round in
//! one run; each cell is the median of its rounds.
//!
//! A round: a sender on CPU 1 fills the receiving socket's queue (its
//! buffer forced to 64 MiB where the process may, `SO_RCVBUFFORCE`) with
//! datagrams and an end mark, then the receiver on CPU 0 drains it. What
//! it measures: datagrams received divided by the receiving thread's CPU
//! time (`CLOCK_THREAD_CPUTIME_ID`) while draining, which is what the
//! receive path costs a busy server, with no wake-ups and no sender
//! beside it; a batch is always full. What it does not: the cost of
//! waking an idle receiver, replies, several cores, or figures to compare
//! across runs or machines (only ratios within one run mean anything).
//! A word after the options keeps the receivers whose name holds it
//! (`-- --quick epoll`), for a profile of one.

use std::net::{SocketAddr, UdpSocket as StdUdp};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// One receiver's way of taking datagrams.
#[derive(Clone, Copy, Debug)]
enum Receiver {
    PercoreUring,
    PercoreUringBatch,
    PercoreEpoll,
    PercoreEpollBatch,
    Tokio,
    Std,
    StdBatch,
}

impl Receiver {
    const ALL: [Receiver; 7] = [
        Receiver::PercoreUring,
        Receiver::PercoreUringBatch,
        Receiver::PercoreEpoll,
        Receiver::PercoreEpollBatch,
        Receiver::Tokio,
        Receiver::Std,
        Receiver::StdBatch,
    ];

    fn name(self) -> &'static str {
        match self {
            Receiver::PercoreUring => "percore uring",
            Receiver::PercoreUringBatch => "percore uring, batch 32",
            Receiver::PercoreEpoll => "percore epoll",
            Receiver::PercoreEpollBatch => "percore epoll, batch 32",
            Receiver::Tokio => "tokio current-thread",
            Receiver::Std => "std blocking",
            Receiver::StdBatch => "std blocking, recvmmsg 32",
        }
    }
}

const BATCH: usize = 32;

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a writable timespec for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn pin(cpu: usize) {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
}

/// Drains `socket` up to the end mark (a one-byte datagram); the count
/// of full-size datagrams and the thread's CPU time spent.
///
/// The clock starts once the receiver is set up (a percore core or a
/// tokio runtime made, the socket adopted), right before its loop.
fn receive(how: Receiver, socket: StdUdp, size: usize) -> (u64, Duration) {
    pin(0);
    match how {
        Receiver::PercoreUring | Receiver::PercoreUringBatch => {
            percore_receive(percore::Backend::Uring, socket, size, how)
        }
        Receiver::PercoreEpoll | Receiver::PercoreEpollBatch => {
            percore_receive(percore::Backend::Epoll, socket, size, how)
        }
        Receiver::Tokio => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .expect("tokio runtime");
            rt.block_on(async move {
                socket.set_nonblocking(true).expect("nonblocking");
                let socket = tokio::net::UdpSocket::from_std(socket).expect("tokio socket");
                let mut buf = vec![0u8; 2048];
                let mut n = 0u64;
                let start = thread_cpu();
                loop {
                    let (len, _) = socket.recv_from(&mut buf).await.expect("recv");
                    if len == 1 {
                        break (n, thread_cpu() - start);
                    }
                    n += u64::from(len == size);
                }
            })
        }
        Receiver::Std => {
            let mut buf = vec![0u8; 2048];
            let mut n = 0u64;
            let start = thread_cpu();
            loop {
                let (len, _) = socket.recv_from(&mut buf).expect("recv");
                if len == 1 {
                    break (n, thread_cpu() - start);
                }
                n += u64::from(len == size);
            }
        }
        Receiver::StdBatch => std_recvmmsg(&socket, size),
    }
}

fn percore_receive(
    backend: percore::Backend,
    socket: StdUdp,
    size: usize,
    how: Receiver,
) -> (u64, Duration) {
    let batch = matches!(
        how,
        Receiver::PercoreUringBatch | Receiver::PercoreEpollBatch
    );
    percore::block_on(backend, async move {
        let socket = percore::net::UdpSocket::from_std(socket).expect("adopt");
        let mut n = 0u64;
        let start = thread_cpu();
        if batch {
            let mut b = percore::net::Batch::new(BATCH, 2048);
            loop {
                let (res, back) = socket.recv_batch(b).await;
                res.expect("recv_batch");
                for (bytes, _) in back.iter() {
                    if bytes.len() == 1 {
                        return (n, thread_cpu() - start);
                    }
                    n += u64::from(bytes.len() == size);
                }
                b = back;
            }
        }
        let mut buf = Vec::with_capacity(2048);
        loop {
            let (res, mut back) = socket.recv_from(buf).await;
            let meta = res.expect("recv_from");
            if meta.len == 1 {
                return (n, thread_cpu() - start);
            }
            n += u64::from(meta.len == size);
            back.clear();
            buf = back;
        }
    })
    .expect("block_on")
}

fn std_recvmmsg(socket: &StdUdp, size: usize) -> (u64, Duration) {
    let mut bufs = vec![[0u8; 2048]; BATCH];
    // SAFETY: plain C data, all zeroes is empty.
    let mut iovs: Vec<libc::iovec> = vec![unsafe { std::mem::zeroed() }; BATCH];
    // SAFETY: as above.
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; BATCH];
    for i in 0..BATCH {
        iovs[i] = libc::iovec {
            iov_base: bufs[i].as_mut_ptr().cast(),
            iov_len: 2048,
        };
        hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    let mut n = 0u64;
    let start = thread_cpu();
    loop {
        // SAFETY: `hdrs` holds BATCH headers, each pointing at its own
        // iovec over its own buffer, all live for the call.
        let got = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                hdrs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        assert!(got > 0, "recvmmsg: {}", std::io::Error::last_os_error());
        for h in &hdrs[..got as usize] {
            if h.msg_len == 1 {
                return (n, thread_cpu() - start);
            }
            n += u64::from(h.msg_len as usize == size);
        }
    }
}

/// The receive buffer, forced large where the process may.
fn size_queue(socket: &StdUdp) -> usize {
    let fd = socket.as_raw_fd();
    let want: libc::c_int = 64 << 20;
    let set = |opt| {
        // SAFETY: the kernel reads an int from a live local.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&want as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    if set(libc::SO_RCVBUFFORCE) != 0 {
        set(libc::SO_RCVBUF);
    }
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes an int and its length into live locals.
    unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    got as usize
}

/// Fills `to`'s queue with `count` datagrams of `size` bytes, 64 per
/// `sendmmsg`, and the end mark.
fn fill(to: SocketAddr, size: usize, count: usize) {
    let socket = StdUdp::bind("127.0.0.1:0").expect("bind sender");
    socket.connect(to).expect("connect");
    let payload = vec![0x5au8; size];
    // SAFETY: plain C data, all zeroes is empty.
    let mut iov: libc::iovec = unsafe { std::mem::zeroed() };
    iov.iov_base = payload.as_ptr().cast_mut().cast();
    iov.iov_len = size;
    // SAFETY: as above.
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; 64];
    for h in &mut hdrs {
        h.msg_hdr.msg_iov = &mut iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    let mut sent = 0;
    while sent < count {
        let n = (count - sent).min(64);
        // SAFETY: `n` ≤ 64 headers, each pointing at `iov` over
        // `payload`, live for the call.
        let got = unsafe { libc::sendmmsg(socket.as_raw_fd(), hdrs.as_mut_ptr(), n as u32, 0) };
        assert!(got > 0, "sendmmsg: {}", std::io::Error::last_os_error());
        sent += got as usize;
    }
    socket.send(&[1]).expect("end mark");
}

/// One round of one cell: datagrams received per server CPU-second.
fn round(how: Receiver, size: usize, count: usize) -> Option<f64> {
    let socket = StdUdp::bind("127.0.0.1:0").expect("bind");
    let room = size_queue(&socket);
    // What a queued datagram takes of the buffer (its buffer's true size,
    // with room to spare), so that none is dropped.
    let per = size.next_power_of_two().max(512) + 1536;
    let count = count.min(room / per);
    fill(socket.local_addr().expect("addr"), size, count);
    let receiver = std::thread::Builder::new()
        .name("receiver".into())
        .spawn(move || receive(how, socket, size))
        .expect("receiver thread");
    let (got, cpu) = receiver.join().ok()?;
    Some(got as f64 / cpu.as_secs_f64())
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // A word not a flag keeps the receivers whose name holds it (`epoll`).
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let chosen = |how: &Receiver| {
        filter.is_empty() || filter.iter().any(|f| how.name().contains(f.as_str()))
    };
    let (rounds, count) = if quick { (3, 5_000) } else { (7, 20_000) };
    if !Receiver::ALL.iter().any(chosen) {
        // The filter is another target's (cargo bench passes the same
        // arguments to every target): nothing of ours to run.
        println!("udp: no receiver matches {filter:?}; nothing to run");
        return;
    }
    pin(1);
    let sizes = [64usize, 1200];
    let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); sizes.len()]; Receiver::ALL.len()];
    for _ in 0..rounds {
        for (si, &size) in sizes.iter().enumerate() {
            for (ri, how) in Receiver::ALL.iter().enumerate() {
                if !chosen(how) {
                    continue;
                }
                if let Some(v) = round(*how, size, count) {
                    samples[ri][si].push(v);
                }
            }
        }
    }
    let cells: Vec<Vec<Option<f64>>> = samples
        .into_iter()
        .map(|row| row.into_iter().map(median).collect())
        .collect();
    println!("udp: datagrams received per server CPU-second, median of {rounds} rounds");
    println!("(receiver on CPU 0 draining a full queue, sender on CPU 1)\n");
    println!("| receiver | 64 B | 1,200 B | 64 B ÷ tokio | 1,200 B ÷ tokio | 64 B ÷ std | 1,200 B ÷ std |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let tokio = &cells[4];
    let std_row = &cells[5];
    for (how, row) in Receiver::ALL.iter().zip(&cells) {
        let show = |c: Option<f64>| c.map_or("failed".to_owned(), |v| format!("{v:.0}"));
        let ratio = |i: usize, base: &[Option<f64>]| match (row[i], base[i]) {
            (Some(v), Some(b)) => format!("{:.2}", v / b),
            _ => "n/a".to_owned(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            how.name(),
            show(row[0]),
            show(row[1]),
            ratio(0, tokio),
            ratio(1, tokio),
            ratio(0, std_row),
            ratio(1, std_row),
        );
    }
}
