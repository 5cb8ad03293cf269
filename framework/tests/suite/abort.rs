//! `JoinHandle::abort`, on both backends: an aborted task's future is
//! dropped at once (its I/O cancelled, its socket closed), awaiting its
//! handle gives `JoinError::Aborted`, a finished task keeps its output,
//! a task that aborts itself is dropped when its poll returns, a
//! destructor that panics under `abort` ends only its own task, and so
//! does one of a buffer the kernel still held when its write was dropped.

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::rc::Rc;
use std::time::Duration;

use percore::net::{TcpListener, TcpStream};
use percore::{block_on, spawn_local, JoinError, JoinHandle};
use percore_test_kit::*;

/// Sets its flag when dropped.
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

backend_tests! {
    /// A task waiting on a timer is dropped by `abort`, before the caller
    /// awaits anything, and its handle says so.
    fn an_aborted_task_is_dropped_at_once(backend) {
        block_on(backend, async {
            let dropped = Rc::new(Cell::new(false));
            let flag = DropFlag(dropped.clone());
            let task = spawn_local(async move {
                let _flag = flag;
                percore::time::sleep(Duration::from_secs(30)).await;
                7
            });
            percore::time::sleep(Duration::from_millis(5)).await;
            assert!(!dropped.get());
            task.abort();
            assert!(dropped.get(), "the future was not dropped by abort");
            assert!(task.is_finished());
            assert_eq!(task.await, Err(JoinError::Aborted));
        })
        .expect("block_on");
    }

    /// Aborting a task blocked in a read cancels the read and closes the
    /// socket it owned: the peer sees the end of the stream.
    fn aborting_a_reader_closes_its_socket(backend) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        block_on(backend, async move {
            let reader = spawn_local(async move {
                let stream = TcpStream::connect(addr).await?;
                stream.read().await.map(|_| ())
            });
            // Let the task connect and start its read (the kernel completes
            // the handshake without an accept), then take the peer's end.
            percore::time::sleep(Duration::from_millis(20)).await;
            let (mut peer, _) = listener.accept().expect("accept");
            peer.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            reader.abort();
            assert!(matches!(reader.await, Err(JoinError::Aborted)));
            // On io_uring the socket closes once the cancelled read's
            // completion is in: let the core's loop take it.
            percore::time::sleep(Duration::from_millis(20)).await;
            let mut buf = [0u8; 1];
            assert_eq!(peer.read(&mut buf).expect("read"), 0, "the socket is still open");
        })
        .expect("block_on");
    }

    /// A task that already finished keeps its output; aborting twice, or
    /// after the handle was awaited elsewhere, changes nothing.
    fn a_finished_task_keeps_its_output(backend) {
        block_on(backend, async {
            let task = spawn_local(async { 42 });
            percore::time::sleep(Duration::from_millis(5)).await;
            assert!(task.is_finished());
            task.abort();
            task.abort();
            assert_eq!(task.await, Ok(42));
        })
        .expect("block_on");
    }

    /// A task that aborts itself through its own handle runs on to its
    /// next await and is dropped there; the handle gives `Aborted`.
    fn a_task_can_abort_itself(backend) {
        block_on(backend, async {
            let own: Rc<RefCell<Option<JoinHandle<()>>>> = Rc::default();
            let reached = Rc::new(Cell::new(0));
            let dropped = Rc::new(Cell::new(false));
            let (handle_slot, steps, flag) = (own.clone(), reached.clone(), DropFlag(dropped.clone()));
            let task = spawn_local(async move {
                let _flag = flag;
                // Wait until the spawner has put the handle in place.
                percore::time::sleep(Duration::from_millis(5)).await;
                if let Some(me) = handle_slot.borrow().as_ref() {
                    me.abort();
                }
                steps.set(1);
                percore::time::sleep(Duration::from_millis(5)).await;
                steps.set(2);
            });
            *own.borrow_mut() = Some(task);
            percore::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(reached.get(), 1, "the task did not stop at its next await");
            assert!(dropped.get(), "the self-aborted future was not dropped");
            let task = own.borrow_mut().take().expect("handle");
            assert_eq!(task.await, Err(JoinError::Aborted));
        })
        .expect("block_on");
    }

    /// A future whose destructor panics when `abort` drops it ends as a
    /// panicked task; the task that aborted it goes on.
    fn a_destructor_panicking_under_abort_ends_only_its_own_task(backend) {
        quiet_expected_panics();
        block_on(backend, async {
            struct PanicOnDrop;
            impl Drop for PanicOnDrop {
                fn drop(&mut self) {
                    panic!("a destructor told to panic");
                }
            }
            let task = spawn_local(async {
                let _bomb = PanicOnDrop;
                percore::time::sleep(Duration::from_secs(30)).await;
            });
            percore::time::sleep(Duration::from_millis(5)).await;
            task.abort();
            assert!(task.is_finished());
            assert_eq!(task.await, Err(JoinError::Panicked));
        })
        .expect("the aborting task runs on");
    }

    /// A task left running when the core stops, whose destructor panics,
    /// ends as a cancelled task; the stop goes on and `block_on` returns.
    fn a_destructor_panicking_at_the_core_stop_ends_only_its_own_task(backend) {
        quiet_expected_panics();
        let output = block_on(backend, async {
            struct PanicOnDrop;
            impl Drop for PanicOnDrop {
                fn drop(&mut self) {
                    panic!("a destructor told to panic");
                }
            }
            drop(spawn_local(async {
                let _bomb = PanicOnDrop;
                percore::time::sleep(Duration::from_secs(30)).await;
            }));
            percore::time::sleep(Duration::from_millis(5)).await;
            7
        })
        .expect("block_on");
        assert_eq!(output, 7);
    }

    /// Aborting a listener's accept loop closes the listener: a new
    /// connection is refused.
    fn aborting_an_accept_loop_closes_the_listener(backend) {
        block_on(backend, async {
            let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
            let addr = listener.local_addr();
            let acceptor = spawn_local(async move {
                loop {
                    let _ = listener.accept().await;
                }
            });
            percore::time::sleep(Duration::from_millis(5)).await;
            acceptor.abort();
            assert_eq!(acceptor.await, Err(JoinError::Aborted));
            // As above: the listener closes once its accept is cancelled.
            percore::time::sleep(Duration::from_millis(20)).await;
            let refused = std::net::TcpStream::connect(addr);
            assert!(refused.is_err(), "the listener outlived its aborted task");
        })
        .expect("block_on");
    }

    /// A write dropped while its send is in flight leaves the buffer with
    /// the kernel (io_uring) until the send completes; the buffer's
    /// destructor then runs in the core's loop, and a panic there ends
    /// nothing else: the core goes on and `block_on` returns. (On epoll
    /// the buffer is dropped with the write, in the task that dropped it.)
    fn a_buffer_destructor_panicking_after_its_send_ends_nothing_else(backend) {
        quiet_expected_panics();
        struct PanicOnDrop(Vec<u8>);
        impl Drop for PanicOnDrop {
            fn drop(&mut self) {
                panic!("a buffer destructor told to panic");
            }
        }
        // SAFETY: the bytes are the Vec's, which lives as long as the
        // buffer and is never changed after it is made.
        unsafe impl percore::buf::IoBuf for PanicOnDrop {
            fn stable_ptr(&self) -> *const u8 {
                self.0.as_ptr()
            }
            fn bytes_init(&self) -> usize {
                self.0.len()
            }
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let output = block_on(backend, async move {
            let stream = TcpStream::connect(addr).await.expect("connect");
            let (peer, _) = listener.accept().expect("accept");
            let writer = spawn_local(async move {
                // Far more than the socket buffers hold: the send waits.
                let write = stream.write_all(PanicOnDrop(vec![7; 64 << 20]));
                let _ = percore::time::timeout(Duration::from_millis(50), write).await;
                stream
            });
            let stream = writer.await;
            // The peer leaves with the bytes unread: the send ends.
            drop(peer);
            percore::time::sleep(Duration::from_millis(50)).await;
            drop(stream);
            percore::time::sleep(Duration::from_millis(20)).await;
            7
        })
        .expect("block_on");
        assert_eq!(output, 7);
    }
}
