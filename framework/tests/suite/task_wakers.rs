//! Wakers that leave their core, on both backends.
//!
//! A task's future and its scheduling flag share one allocation, which
//! wakers on other threads keep alive. These tests hold the executor to
//! what makes that sound: a `!Send` future is dropped on its own core even
//! when a foreign thread holds the last waker, and a wake from another
//! thread that arrives after its task ended reaches no other task.

use percore_test_kit::backend_tests;

use std::cell::Cell;
use std::future::{pending, poll_fn};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::thread::{self, ThreadId};
use std::time::Duration;

use percore::{block_on, spawn_local};

/// Records the thread it is dropped on.
struct DropProbe(Arc<Mutex<Option<ThreadId>>>);

impl Drop for DropProbe {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(thread::current().id());
    }
}

/// Hands the current task's waker to `to`, then never finishes.
async fn send_waker_and_wait(to: mpsc::Sender<Waker>) {
    poll_fn(|cx| {
        let _ = to.send(cx.waker().clone());
        Poll::Ready(())
    })
    .await;
    pending::<()>().await;
}

backend_tests! {
    fn future_dropped_on_its_core_while_a_foreign_thread_holds_its_waker(backend) {
        let dropped_on = Arc::new(Mutex::new(None));
        let probe = DropProbe(dropped_on.clone());
        let (tx, rx) = mpsc::channel();
        let core_thread = thread::current().id();
        block_on(backend, async move {
            // `Rc` makes the task's future `!Send`, as a connection's is.
            let held = Rc::new(probe);
            spawn_local(async move {
                let _held = held;
                send_waker_and_wait(tx).await;
            });
            percore::time::sleep(Duration::from_millis(20)).await;
        })
        .expect("block_on");
        // The core has stopped; its pending task was cancelled there.
        assert_eq!(*dropped_on.lock().unwrap(), Some(core_thread));
        let waker = rx.recv().expect("the task sent its waker");
        // Waking a task of a stopped core does nothing; this drop releases
        // the task's memory, with no future left in it.
        thread::spawn(move || {
            waker.wake_by_ref();
            drop(waker);
        })
        .join()
        .expect("the foreign thread");
    }

    fn late_remote_wake_reaches_no_other_task(backend) {
        let polls = block_on(backend, async {
            let (tx, rx) = mpsc::channel::<Waker>();
            // A task that ends at once, leaving its waker with a thread.
            spawn_local(async move {
                poll_fn(|cx| {
                    let _ = tx.send(cx.waker().clone());
                    Poll::Ready(())
                })
                .await;
            })
            .await
            .expect("the first task");
            // Its slab slot is free: the next task takes it.
            let polls = Rc::new(Cell::new(0u32));
            let counter = polls.clone();
            spawn_local(poll_fn(move |_| {
                counter.set(counter.get() + 1);
                Poll::<()>::Pending
            }));
            percore::time::sleep(Duration::from_millis(10)).await;
            let stale = rx.recv().expect("the first task's waker");
            thread::spawn(move || stale.wake()).join().expect("the foreign thread");
            percore::time::sleep(Duration::from_millis(50)).await;
            polls.get()
        })
        .expect("block_on");
        assert_eq!(polls, 1, "a stale wake polled the task that reused its slot");
    }
}
