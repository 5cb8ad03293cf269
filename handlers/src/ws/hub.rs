//! Broadcast across cores: each core keeps its own registry of the
//! WebSockets subscribed to a topic (a `thread_local!`, no lock), and a
//! publish reaches every core's through the framework's cross-core
//! messaging ([`percore::submit_to`]).
//!
//! A publish sends the message (its `Bytes`, shared, not copied) to
//! each core in turn, and each core queues it on its subscribers'
//! connections; one publisher's messages reach every subscriber once and
//! in the order published. A subscriber too slow for its send queue is
//! dropped there (see [`WsConfig::max_send_queue`](super::WsConfig)) and
//! leaves the registry; the others are not held up.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use super::message::Message;
use super::outbox::Sender;

thread_local! {
    /// This core's subscribers, by topic.
    static TOPICS: RefCell<HashMap<String, Vec<(u64, Sender)>>> = RefCell::new(HashMap::new());
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// A WebSocket's place in a topic's registry on its core; dropping it
/// leaves the topic.
#[derive(Debug)]
pub struct Subscription {
    topic: String,
    id: u64,
}

/// Subscribes the connection `sender` sends on to `topic`, on this core.
pub fn subscribe(topic: &str, sender: Sender) -> Subscription {
    let id = NEXT_ID.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    TOPICS.with(|t| {
        t.borrow_mut()
            .entry(topic.to_owned())
            .or_default()
            .push((id, sender));
    });
    Subscription {
        topic: topic.to_owned(),
        id,
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // At a core's end the registry may be gone already.
        let _ = TOPICS.try_with(|t| {
            let mut topics = t.borrow_mut();
            if let Some(subs) = topics.get_mut(&self.topic) {
                subs.retain(|(id, _)| *id != self.id);
                if subs.is_empty() {
                    topics.remove(&self.topic);
                }
            }
        });
    }
}

/// Queues `msg` on every subscriber of `topic` on this core; returns how
/// many took it. A subscriber whose connection is closing or too slow is
/// skipped (and its connection, if slow, dropped).
pub fn publish_local(topic: &str, msg: &Message) -> usize {
    // The senders are cloned out first: a send never re-enters the
    // registry, but a drop of a subscription might.
    let subs: Vec<Sender> = TOPICS.with(|t| {
        t.borrow()
            .get(topic)
            .map(|subs| subs.iter().map(|(_, s)| s.clone()).collect())
            .unwrap_or_default()
    });
    subs.iter().filter(|s| s.send(msg).is_ok()).count()
}

/// Queues `msg` on every subscriber of `topic` on every core of the
/// server, this one first; returns how many took it. Awaited before the
/// next publish, one publisher's messages arrive in order everywhere.
/// A core that has stopped is skipped.
///
/// # Panics
///
/// Outside a percore core thread.
pub async fn publish(topic: &str, msg: &Message) -> usize {
    let here = percore::core_index();
    let mut delivered = publish_local(topic, msg);
    for core in (0..percore::core_count()).filter(|&c| c != here) {
        let (topic, msg) = (topic.to_owned(), msg.clone());
        if let Ok(n) =
            percore::submit_to(core, move || async move { publish_local(&topic, &msg) }).await
        {
            delivered += n;
        }
    }
    delivered
}

/// How many subscribers `topic` has on this core.
pub fn local_subscribers(topic: &str) -> usize {
    TOPICS.with(|t| t.borrow().get(topic).map_or(0, Vec::len))
}
