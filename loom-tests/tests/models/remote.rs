//! `Remote`, the bounded cross-core inbox (task wakes and `submit_to`
//! messages): exactly-once, in-order delivery under concurrent push and
//! drain, back-pressure when full, and close at core stop.
#![cfg(loom)]

use std::collections::VecDeque;

use loom::thread;
use loom_tests::{check, waker, Core, Doorbell};
use percore::sync::PushError;

/// Sends `items` one after the other the way `submit_to` does, through
/// the framework's own `CoreSide::send` (push or register the waker, then
/// unpark): on `Full`
/// register this sender's waker and wait for it, then retry; on `Closed`
/// hand the item back. Returns the items refused as closed.
fn send_all(core: &Core<u32>, items: impl IntoIterator<Item = u32>) -> (Vec<u32>, usize) {
    let bell = Doorbell::new();
    let waker = waker(&bell);
    let mut refused = Vec::new();
    let mut fulls = 0;
    for item in items {
        let mut item = item;
        loop {
            match core.side().send(item, Some(&waker)) {
                Ok(()) => break,
                Err(PushError::Full(back)) => {
                    assert_eq!(back, item, "a full push returns the item it was given");
                    item = back;
                    fulls += 1;
                    bell.wait();
                }
                Err(PushError::Closed(back)) => {
                    refused.push(back);
                    break;
                }
            }
        }
    }
    (refused, fulls)
}

/// Asserts that `got` holds each of `0..n` per sender exactly once and in
/// each sender's order (`sender * 10 + seq`).
fn assert_exactly_once_in_order(got: &[u32], senders: u32, per_sender: u32) {
    assert_eq!(
        got.len() as u32,
        senders * per_sender,
        "lost or duplicated: {got:?}"
    );
    for s in 0..senders {
        let mine: Vec<u32> = got.iter().copied().filter(|x| x / 10 == s).collect();
        let want: Vec<u32> = (0..per_sender).map(|i| s * 10 + i).collect();
        assert_eq!(mine, want, "sender {s} out of order or lost: {got:?}");
    }
}

/// Two senders push two items each while the core drains and parks:
/// every item is delivered once, each sender's in its order.
#[test]
fn concurrent_push_and_drain() {
    check("remote::concurrent_push_and_drain", || {
        let core = Core::<u32>::new(4);
        let senders: Vec<_> = (0..2u32)
            .map(|s| {
                let core = core.clone();
                thread::spawn(move || {
                    for i in 0..2 {
                        core.send(s * 10 + i).unwrap();
                    }
                })
            })
            .collect();
        let mut got = VecDeque::new();
        while got.len() < 4 {
            core.drain(&mut got);
            if got.len() < 4 {
                core.park();
            }
        }
        for s in senders {
            s.join().unwrap();
        }
        assert_exactly_once_in_order(got.make_contiguous(), 2, 2);
    });
}

/// Capacity 1, one sender with three items: pushes that find the queue
/// full get their item back and wait; the core's drain wakes them. All
/// three arrive, in order, and neither side sleeps forever.
#[test]
fn full_queue_back_pressure() {
    check("remote::full_queue_back_pressure", || {
        let core = Core::<u32>::new(1);
        let sender = {
            let core = core.clone();
            thread::spawn(move || send_all(&core, 0..3))
        };
        let mut got = VecDeque::new();
        while got.len() < 3 {
            core.drain(&mut got);
            if got.len() < 3 {
                core.park();
            }
        }
        let (refused, _fulls) = sender.join().unwrap();
        assert!(refused.is_empty());
        assert_exactly_once_in_order(got.make_contiguous(), 1, 3);
    });
}

/// Capacity 1, two senders with two items each: both may be waiting for
/// room at once; one drain wakes every waiting sender.
#[test]
fn full_queue_two_senders() {
    check("remote::full_queue_two_senders", || {
        let core = Core::<u32>::new(1);
        let senders: Vec<_> = (0..2u32)
            .map(|s| {
                let core = core.clone();
                thread::spawn(move || send_all(&core, [s * 10, s * 10 + 1]))
            })
            .collect();
        let mut got = VecDeque::new();
        while got.len() < 4 {
            core.drain(&mut got);
            if got.len() < 4 {
                core.park();
            }
        }
        for s in senders {
            assert!(s.join().unwrap().0.is_empty());
        }
        assert_exactly_once_in_order(got.make_contiguous(), 2, 2);
    });
}

/// The core stops (`Core::close_mailbox`) while a sender pushes three items
/// into a queue of two, possibly waiting for room. Every item ends up in
/// exactly one place: drained by the core, handed back by `close`, or
/// refused to the sender with `Closed`. Close wakes a waiting sender, so it
/// never sleeps forever; nothing is queued after close.
#[test]
fn close_hands_back_everything() {
    check("remote::close_hands_back_everything", || {
        let core = Core::<u32>::new(2);
        let sender = {
            let core = core.clone();
            thread::spawn(move || send_all(&core, 0..3))
        };
        let mut drained = VecDeque::new();
        core.drain(&mut drained);
        let mut leftover = VecDeque::new();
        core.mailbox.close(&mut leftover);
        let (refused, _fulls) = sender.join().unwrap();
        // Closed for good.
        assert_eq!(core.mailbox.push(9), Err(PushError::Closed(9)));
        let mut after = VecDeque::new();
        assert_eq!(core.drain(&mut after), 0, "an item was queued after close");
        // Accepted items: drained then handed back, in push order; refused
        // ones come after every accepted one.
        let mut all: Vec<u32> = drained.iter().chain(leftover.iter()).copied().collect();
        let accepted = all.len();
        all.extend(&refused);
        assert_eq!(
            all,
            [0, 1, 2],
            "lost, duplicated or reordered (accepted {accepted})"
        );
    });
}
