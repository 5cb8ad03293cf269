//! Server configuration that must be refused or honoured exactly (FAULTS
//! D7): a CPU listed twice, a CPU this process may not use, an empty list;
//! and with a valid list, one thread per CPU, each pinned to its own CPU.

use std::io::ErrorKind;
use std::time::Duration;

use percore_test_kit::*;

/// The CPUs thread `name` of this process may run on.
fn thread_affinity(name: &str, before: &[std::ffi::OsString]) -> Vec<Vec<usize>> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name || before.contains(&task.file_name()) {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned();
        found.push(percore::runtime::cpus::parse_list(&list).expect("Cpus_allowed_list"));
    }
    found
}

/// Answers each connection with what filling a fixed write buffer gave.
struct FillFixed;

impl percore::Handler for FillFixed {
    async fn serve(&self, conn: percore::Connection) -> std::io::Result<()> {
        let line = match percore::buf::FixedBuf::take() {
            Some(mut buf) => {
                let n = buf.extend_from_slice(&vec![0xAA; 1 << 20]);
                format!("capacity {} wrote {n}\n", buf.capacity())
            }
            None => "none\n".to_owned(),
        };
        let (res, _) = conn.write_all(line.into_bytes()).await;
        res
    }
}

backend_tests! {
    /// Receive buffers so large that their pools' sizes overflow: the
    /// core goes without a fixed write pool (and a buffer ring) instead of
    /// mapping a wrapped-around size and writing past it.
    fn receive_buffers_too_large_to_map_are_refused(backend) {
        let size = (1usize << 60) + 4096;
        let server = builder(backend).recv_buffers(16, size).start(|_core| FillFixed).expect("start");
        let mut conn = connect(server.local_addr());
        let mut reply = String::new();
        std::io::Read::read_to_string(&mut conn, &mut reply).expect("the reply");
        assert_eq!(reply, "none\n");
        server.shutdown();
        server.join().expect("join");
    }

    /// Never two cores on one CPU, never a core on a CPU we may not use.
    fn bad_cpu_lists_are_refused(backend) {
        let cpu = server_cpu();
        let err = builder(backend).cores([cpu, cpu]).start(|_core| PlainEcho).expect_err("a CPU listed twice");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("listed twice"), "unclear error: {err}");

        let missing = 4096;
        let err = builder(backend).cores([missing]).start(|_core| PlainEcho).expect_err("a CPU that does not exist");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("not available"), "unclear error: {err}");

        let err = builder(backend).cores([]).start(|_core| PlainEcho).expect_err("no CPU");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(err.to_string().contains("empty"), "unclear error: {err}");
    }

    /// Every available CPU gets one core thread pinned to it alone, each
    /// with its own listener on the shared port.
    fn one_pinned_core_per_cpu(backend) {
        let cpus = percore::runtime::cpus::available();
        // Threads of other tests' servers in this binary may carry the
        // same names: only the threads this server starts count.
        let before: Vec<_> = std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .flatten()
            .map(|t| t.file_name())
            .collect();
        let server = builder(backend).cores(cpus.clone()).start(|_core| PlainEcho).expect("start");
        check_backend(&server, backend);
        let stats = server.stats();
        assert_eq!(stats.iter().map(|s| s.cpu).collect::<Vec<_>>(), cpus);
        for &cpu in &cpus {
            let affinity = thread_affinity(&format!("percore-{cpu}"), &before);
            assert_eq!(affinity, vec![vec![cpu]], "core thread for CPU {cpu}");
        }
        // The port serves; with several cores the kernel spreads
        // connections over their listeners.
        for _ in 0..64 {
            ping(server.local_addr());
        }
        let stats = wait_until(Duration::from_secs(60), "connections to close", || server.stats(), |s| sum(s, |c| c.active) == 0);
        assert_eq!(sum(&stats, |c| c.accepted), 64);
        if cpus.len() > 1 {
            assert!(stats.iter().all(|s| s.accepted > 0), "a core's listener got nothing: {stats:?}");
        }
        server.shutdown();
        server.join().expect("join");
    }
}
