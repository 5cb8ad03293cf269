//! The driver's promises, tested on a real ring with the kernel conditions
//! that break them made on purpose: a full SQ while a completion is being
//! dispatched, cancellations and wake-up reads that cannot be queued, user
//! wakers that panic, and a driver dropped without its drain.

use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types};

use super::buf_ring::BUF_GROUP;
use super::ops::{Op, OpState};
use super::{
    fault, sqe_fields, BufConfig, Driver, OpKey, OpKind, Retained, RingConfig, CANCEL_TOKEN,
};
use crate::stats::CoreStats;

/// A test's driver, drained when dropped, also when an assertion failed.
struct Drained(Driver);

impl std::ops::Deref for Drained {
    type Target = Driver;
    fn deref(&self) -> &Driver {
        &self.0
    }
}

impl std::ops::DerefMut for Drained {
    fn deref_mut(&mut self) -> &mut Driver {
        &mut self.0
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        self.0.drain(Instant::now() + Duration::from_secs(60));
    }
}

fn driver(entries: u32, stream_cap: usize, faults: fault::Counted) -> Drained {
    Drained(raw_driver(entries, stream_cap, faults))
}

/// A small driver: `entries` SQ slots, a CQ that holds every test's
/// completions, and multishot streams paused after `stream_cap`.
fn raw_driver(entries: u32, stream_cap: usize, faults: fault::Counted) -> Driver {
    let ring = RingConfig {
        entries,
        cq_entries: 1024,
        sqpoll_idle_ms: None,
        batch_wait_usec: None,
    };
    let bufs = BufConfig {
        count: 16,
        size: 4096,
        stream_cap,
    };
    let wake_fd = Arc::new(crate::sys::eventfd().expect("eventfd"));
    Driver::with_faults(
        ring,
        bufs,
        None,
        wake_fd,
        Arc::new(CoreStats::default()),
        faults,
    )
    .expect("io_uring driver")
}

fn nop(res: i32) -> squeue::Entry {
    let mut sqe = opcode::Nop::new().build();
    sqe_fields::inject_nop_result(&mut sqe, res);
    sqe
}

/// A slot the test fills by hand, as `push` would.
fn slot(d: &mut Drained, state: OpState) -> usize {
    d.ops.insert(Op {
        kind: OpKind::Send,
        state,
        retained: Retained::None,
    })
}

/// Submits `sqe` now, without reaping anything.
fn submit(d: &mut Drained, sqe: &squeue::Entry) {
    // SAFETY: the test's SQEs point at no memory (NOPs, polls and
    // cancellations), or at memory that outlives the ring.
    while unsafe { d.ring.submission().push(sqe) }.is_err() {
        d.ring.submit().expect("submit");
    }
    d.ring.submit().expect("submit");
}

struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Panics;

impl Wake for Panics {
    fn wake(self: Arc<Self>) {
        panic!("a user waker panicked");
    }
}

/// Completions copied off the CQ must be dispatched in the kernel's order
/// even when dispatching one of them reaps again: here a stream paused by
/// back-pressure queues its cancellation into a full SQ, which submits and
/// reaps from inside the outer reap.
#[test]
fn completions_go_out_in_the_kernels_order_when_a_dispatch_reaps() {
    let mut d = driver(8, 1, fault::Counted::default());
    let before: Vec<usize> = (0..10)
        .map(|i| {
            let key = slot(&mut d, OpState::Waiting(None));
            submit(&mut d, &nop(i).user_data(key as u64));
            key
        })
        .collect();
    // A multishot poll on a readable eventfd completes at once, with
    // `F_MORE`: a stream whose first completion fills its queue.
    let readable = crate::sys::eventfd().expect("eventfd");
    crate::sys::eventfd_signal(std::os::fd::AsFd::as_fd(&readable)).expect("signal");
    let stream = d.ops.insert(Op {
        kind: OpKind::Recv,
        state: OpState::Stream {
            first: None,
            queue: Default::default(),
            waker: None,
            ended: false,
            cancelling: false,
        },
        retained: Retained::None,
    });
    let poll = opcode::PollAdd::new(types::Fd(readable.as_raw_fd()), libc::POLLIN as u32)
        .multi(true)
        .build()
        .user_data(stream as u64);
    submit(&mut d, &poll);
    let after: Vec<usize> = (10..100)
        .map(|i| {
            let key = slot(&mut d, OpState::Waiting(None));
            submit(&mut d, &nop(i).user_data(key as u64));
            key
        })
        .collect();
    // An SQ left full, so that the stream's cancellation must reap first.
    // SAFETY: NOPs point at no memory.
    while unsafe { d.ring.submission().push(&nop(0).user_data(CANCEL_TOKEN)) }.is_ok() {}
    d.reap();
    let paused = d.stats.backpressure_pauses.get();
    d.drain(Instant::now() + Duration::from_secs(60));
    drop(readable);
    // NOPs complete as they are submitted, so the kernel posted theirs in
    // key order; the poll's lands among them where the kernel ran it.
    let nops: Vec<usize> = before.iter().chain(&after).copied().collect();
    let order: Vec<usize> = d
        .dispatched
        .iter()
        .map(|&u| u as usize)
        .filter(|k| nops.contains(k))
        .collect();
    assert_eq!(order, nops, "dispatched out of the kernel's order");
    let at = d.dispatched.iter().position(|&u| u as usize == stream);
    assert!(
        at.is_some_and(|at| at < super::REAP_BATCH),
        "the stream's completion is in the first batch copied: {at:?}"
    );
    assert!(paused >= 1, "the pause queued a cancellation");
}

/// A cancellation the SQ cannot take is queued again until it is: an
/// orphaned idle receive must not hold its socket for ever.
#[test]
fn a_cancellation_that_cannot_be_queued_is_retried() {
    let mut d = driver(
        8,
        16,
        fault::Counted {
            cancel_refused: 1,
            wake_refused: 0,
        },
    );
    let (_peer, socket) = crate::sys::socket_pair().expect("socketpair");
    let socket = Rc::new(socket);
    let sqe = opcode::RecvMulti::new(types::Fd(socket.as_raw_fd()), BUF_GROUP).build();
    // SAFETY: the receive writes only into the driver's ring buffers, and
    // the slot keeps the socket open.
    let key = unsafe { d.push(sqe, OpKind::Recv, true, Retained::Fd(socket.clone())) };
    d.park(Some(Duration::ZERO));
    assert!(d.release(key, Retained::None).is_none(), "still in flight");
    assert_eq!(d.faults.cancel_refused, 0, "the cancellation was refused");
    let deadline = Instant::now() + Duration::from_secs(60);
    while d.in_flight() > 0 && Instant::now() < deadline {
        d.park(Some(Duration::from_millis(100)));
    }
    assert_eq!(d.in_flight(), 0, "the orphan was never cancelled");
    let mut dead = Vec::new();
    d.take_graveyard(&mut dead);
    drop(dead);
    assert_eq!(Rc::strong_count(&socket), 1, "the socket is closed");
    d.drain(Instant::now() + Duration::from_secs(60));
}

/// A wake-up read that cannot be armed must not let the core sleep: it
/// would sleep through every remote wake and the stop.
#[test]
fn a_wake_read_that_cannot_be_armed_does_not_let_the_core_sleep() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Refused at creation and at the first park.
        let mut d = driver(
            8,
            16,
            fault::Counted {
                cancel_refused: 0,
                wake_refused: 2,
            },
        );
        assert!(!d.wake_armed());
        crate::sys::eventfd_signal(std::os::fd::AsFd::as_fd(&*d.wake_fd)).expect("signal");
        d.park(None);
        // Armed now; the notification already sent completes it.
        d.park(None);
        let woke = !d.wake_armed();
        d.drain(Instant::now() + Duration::from_secs(60));
        let _ = done.send(woke);
    });
    let woke = finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the core slept through its notification");
    assert!(woke, "the wake-up read completed");
}

/// A user waker that panics when its completion is dispatched loses no
/// other completion: the panic is kept for the core to record.
#[test]
fn a_panicking_waker_loses_no_completion() {
    let mut d = driver(8, 16, fault::Counted::default());
    let counted = Arc::new(Count(AtomicUsize::new(0)));
    let panics = Waker::from(Arc::new(Panics));
    let counts = Waker::from(counted.clone());
    let first = slot(&mut d, OpState::Waiting(Some(panics)));
    let second = slot(&mut d, OpState::Waiting(Some(counts)));
    submit(&mut d, &nop(1).user_data(first as u64));
    submit(&mut d, &nop(2).user_data(second as u64));
    let reaped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.reap()));
    assert!(reaped.is_ok(), "the waker's panic unwound through the reap");
    let mut caught = 0;
    crate::unwind::take(|_| caught += 1);
    assert_eq!(caught, 1, "the panic is kept for the core");
    assert_eq!(counted.0.load(Ordering::SeqCst), 1, "the second task woke");
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(d.poll_op(OpKey(second), &mut cx), Poll::Ready((c, _)) if c.res == 2));
    assert!(matches!(d.poll_op(OpKey(first), &mut cx), Poll::Ready((c, _)) if c.res == 1));
    d.drain(Instant::now() + Duration::from_secs(60));
}

/// An orphan keeps what its operation retained as well as what its
/// dropped future handed over, both until the final completion.
#[test]
fn an_orphan_keeps_what_it_retained_and_what_it_was_given() {
    let mut d = driver(8, 16, fault::Counted::default());
    let (_peer, socket) = crate::sys::socket_pair().expect("socketpair");
    let socket: Rc<OwnedFd> = Rc::new(socket);
    let sqe = opcode::RecvMulti::new(types::Fd(socket.as_raw_fd()), BUF_GROUP).build();
    // SAFETY: as above.
    let key = unsafe { d.push(sqe, OpKind::Recv, true, Retained::Fd(socket.clone())) };
    d.park(Some(Duration::ZERO));
    let given = Retained::Buffer(socket.clone(), Box::new(vec![0u8; 16]));
    assert!(d.release(key, given).is_none());
    let mut dead = Vec::new();
    d.take_graveyard(&mut dead);
    drop(dead);
    assert_eq!(Rc::strong_count(&socket), 3, "both stay with the slot");
    d.drain(Instant::now() + Duration::from_secs(60));
    let mut dead = Vec::new();
    d.take_graveyard(&mut dead);
    drop(dead);
    assert_eq!(Rc::strong_count(&socket), 1, "both go at the completion");
}

/// The kernel here takes a multishot receive's byte limit, and the probe
/// says so; under the `recv_limit_refused` fault it would say no.
#[test]
fn the_receive_limit_is_probed_once_at_start() {
    let d = driver(8, 16, fault::Counted::default());
    if fault::recv_limit_refused() {
        assert!(!d.recv_limit);
    } else if d.multishot {
        println!("multishot receive limit: {}", d.recv_limit);
    }
}

/// Dropping a driver with an operation in flight and no drain is a bug of
/// the caller: debug builds say so (after draining, so the test itself
/// frees nothing the kernel holds).
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "no drain")]
fn dropping_a_driver_with_io_in_flight_and_no_drain_is_caught() {
    let mut d = raw_driver(8, 16, fault::Counted::default());
    let (_peer, socket) = crate::sys::socket_pair().expect("socketpair");
    let socket = Rc::new(socket);
    let sqe = opcode::RecvMulti::new(types::Fd(socket.as_raw_fd()), BUF_GROUP).build();
    // SAFETY: as above.
    let _key = unsafe { d.push(sqe, OpKind::Recv, true, Retained::Fd(socket.clone())) };
    d.park(Some(Duration::ZERO));
    drop(d);
}

/// A standing receive holds a completion queue only while completions
/// wait in it, and one completion at a time waits in the slot itself:
/// a reader that takes each as it comes never borrows one of the core's
/// spares (an idle connection holds no queue, and no allocation follows
/// warm-up).
#[test]
fn a_drained_stream_lends_its_queue_back() {
    let mut d = driver(8, 16, fault::Counted::default());
    let (peer, socket) = crate::sys::socket_pair().expect("socketpair");
    let socket = Rc::new(socket);
    let sqe = opcode::RecvMulti::new(types::Fd(socket.as_raw_fd()), BUF_GROUP).build();
    // SAFETY: the receive writes only into the driver's ring buffers, and
    // the slot keeps the socket open.
    let key = unsafe { d.push(sqe, OpKind::Recv, true, Retained::Fd(socket.clone())) };
    let queue_has_room = |d: &Drained| match &d.ops.get(key.0).expect("slot").state {
        OpState::Stream { queue, .. } => queue.has_room(),
        _ => unreachable!("a multishot slot"),
    };
    assert!(!queue_has_room(&d), "armed, before any completion");
    // The spares the core made at start: no round takes one.
    let spares = d.spare_queues.len();
    assert!(spares > 0, "spare queues made at start");
    let waker = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
    let mut cx = Context::from_waker(&waker);
    let mut peer = std::fs::File::from(peer);
    for round in 0..3 {
        std::io::Write::write_all(&mut peer, b"ping").expect("write");
        let deadline = Instant::now() + Duration::from_secs(60);
        let cqe = loop {
            d.park(Some(Duration::from_millis(100)));
            if let Poll::Ready(cqe) = d.poll_stream(key, &mut cx) {
                break cqe.expect("a completion");
            }
            assert!(Instant::now() < deadline, "no completion in round {round}");
        };
        assert_eq!(cqe.res, 4, "round {round}");
        let ring = d.buf_ring.clone().expect("buffer ring");
        let bid = io_uring::cqueue::buffer_select(cqe.flags).expect("a ring buffer");
        // SAFETY: the completion just taken reported `bid` with 4 bytes,
        // and nothing else holds it; dropping the lease gives it back.
        let lease = unsafe { crate::buf::RecvBuf::from_ring(ring, bid, 4) };
        drop(lease);
        assert!(
            !queue_has_room(&d),
            "round {round}: the drained queue was kept"
        );
        assert_eq!(d.spare_queues.len(), spares, "round {round}: no queue lent");
    }
    assert!(d.release(key, Retained::None).is_none(), "still in flight");
    drop(peer);
    d.drain(Instant::now() + Duration::from_secs(60));
}
