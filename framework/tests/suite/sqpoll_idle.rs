//! FAULTS D6: SQPOLL, when asked for. The kernel's submission thread goes
//! to sleep after its idle time, so an idle server burns no CPU; and a
//! submission after that sleep still gets through (the core wakes the
//! thread). On epoll the setting does nothing, and an idle core still
//! burns nothing.

use std::time::Duration;

use percore_test_kit::*;

/// This process's threads whose name starts with `prefix`, as
/// `task/<tid>` paths for [`cpu_ticks`].
fn threads(prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.starts_with(prefix) {
            found.push(format!("self/task/{}", task.file_name().to_string_lossy()));
        }
    }
    found
}

backend_tests! {
    /// SQPOLL with a 10 ms idle time: after a burst of echoes, one idle
    /// second costs the SQ thread and the core thread at most 30 ms of CPU
    /// together; then new connections are served again.
    fn sqpoll_thread_sleeps_when_idle(backend) {
        // An SQPOLL thread of an earlier ring in this process exits
        // asynchronously after its ring is gone.
        wait_until(Duration::from_secs(60), "earlier SQPOLL threads to exit", || threads("iou-sqp"), Vec::is_empty);
        let server = builder(backend).sqpoll(Some(Duration::from_millis(10))).start(|_core| PlainEcho).expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        let sq_threads = threads("iou-sqp");
        if backend == Backend::Uring {
            assert_eq!(sq_threads.len(), 1, "expected one SQPOLL thread: {sq_threads:?}");
        } else {
            assert!(sq_threads.is_empty(), "epoll started an SQPOLL thread");
        }
        let mut client = connect(addr);
        for i in 0..200 {
            roundtrip(&mut client, pattern(i, 512));
        }
        drop(client);
        wait_until(Duration::from_secs(60), "the connection to close", || server.stats(), |s| sum(s, |c| c.active) == 0);
        // Past the idle time, measure one second.
        std::thread::sleep(Duration::from_millis(100));
        let mut watched = sq_threads.clone();
        watched.extend(threads(&format!("percore-{}", server_cpu())));
        let before: Vec<u64> = watched.iter().map(|t| cpu_ticks(t)).collect();
        std::thread::sleep(Duration::from_secs(1));
        let after: Vec<u64> = watched.iter().map(|t| cpu_ticks(t)).collect();
        let spent: u64 = after.iter().zip(&before).map(|(a, b)| a - b).sum();
        println!("{backend}: idle second cost {} ms of CPU over {watched:?}", spent * 10);
        assert!(spent <= 3, "an idle server used {} ms of CPU in one second", spent * 10);
        // The sleeping SQ thread is woken for new work.
        for _ in 0..5 {
            ping(addr);
        }
        server.shutdown();
        server.join().expect("join");
    }
}
