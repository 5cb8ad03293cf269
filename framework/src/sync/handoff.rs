//! A value handed to another core that always answers: the receiver
//! takes it, or it comes back.
//!
//! A connection moved to another core travels in a [`Handoff`] inside a
//! cross-core message. Three things can happen to that message: the
//! target runs it and takes the connection; the target runs it and
//! refuses (it is stopping, or full); or the target never runs it (its
//! mailbox closed at its stop, dropping what was queued). The sender
//! hears of each through one reply: [`Reply::Taken`] for the first,
//! [`Reply::Returned`] with the value for the other two, sent by the
//! hand-off's destructor. So the value is owned at every moment by
//! exactly one side and is never lost: served once, or closed once by
//! whoever holds it last (a reply that finds its receiver gone is
//! dropped with the channel).

use super::oneshot;

/// What the sender of a [`Handoff`] learns.
#[derive(Debug)]
pub enum Reply<T> {
    /// The receiver took the value: it is the receiver's now.
    Taken,
    /// The receiver did not take it (or never saw it): here it is back.
    Returned(T),
}

/// A value on its way to another thread, with the way back.
pub struct Handoff<T> {
    value: Option<T>,
    reply: Option<oneshot::Sender<Reply<T>>>,
}

/// A hand-off of `value`, and the receiver of its outcome.
pub fn handoff<T>(value: T) -> (Handoff<T>, oneshot::Receiver<Reply<T>>) {
    let (tx, rx) = oneshot::channel();
    (
        Handoff {
            value: Some(value),
            reply: Some(tx),
        },
        rx,
    )
}

impl<T> Handoff<T> {
    /// The value, to look at (and note a refusal in) before deciding.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.value.as_mut()
    }

    /// Offers the value to `take`: what it makes of it, and the sender
    /// learns [`Reply::Taken`]; or, if `take` gives it back, the value
    /// returns to the sender, as when the hand-off is dropped. Should
    /// `take` panic, the value is dropped with it, and the sender learns
    /// nothing but the channel's close.
    pub fn accept<R>(mut self, take: impl FnOnce(T) -> Result<R, T>) -> Option<R> {
        let value = self.value.take()?;
        match take(value) {
            Ok(taken) => {
                if let Some(reply) = self.reply.take() {
                    reply.send(Reply::Taken);
                }
                Some(taken)
            }
            Err(value) => {
                self.value = Some(value);
                None
            }
        }
    }
}

impl<T> Drop for Handoff<T> {
    /// Not taken (refused, or dropped unrun with its message): the value
    /// goes back to the sender.
    fn drop(&mut self) {
        if let (Some(reply), Some(value)) = (self.reply.take(), self.value.take()) {
            reply.send(Reply::Returned(value));
        }
    }
}

impl<T> std::fmt::Debug for Handoff<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff")
            .field("holds", &self.value.is_some())
            .finish()
    }
}
