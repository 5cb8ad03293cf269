//! FAULTS N1: a handler that blocks its core. The stall is reported once,
//! with its duration and a backtrace naming the blocking function, the
//! counter counts it, and the core's other connections are answered
//! after it.

use std::io::{Read, Write};
use std::time::Duration;

use percore::{Connection, Handler};
use percore_test_kit::*;

const BLOCK: &[u8] = b"BLOCK!";
/// Makes the handler block for [`LONG`].
const BLOCK_LONG: &[u8] = b"LONG!!";

/// How long the handler blocks: four thresholds.
const BLOCKED: Duration = Duration::from_millis(200);
const THRESHOLD: Duration = Duration::from_millis(50);
/// Past the second after which a stall is logged while under way.
const LONG: Duration = Duration::from_millis(1500);

/// The function the backtrace must name: never inlined, so it keeps a
/// frame of its own.
#[inline(never)]
fn percore_test_blocks_its_core(how_long: Duration) {
    std::thread::sleep(how_long);
    std::hint::black_box(());
}

/// Echo that blocks its core's thread before echoing a buffer holding
/// [`BLOCK`].
struct Blocker;

impl Handler for Blocker {
    async fn serve(&self, conn: Connection) -> std::io::Result<()> {
        while let Some(buf) = conn.read().await? {
            if buf.windows(BLOCK.len()).any(|w| w == BLOCK) {
                percore_test_blocks_its_core(BLOCKED);
            }
            if buf.windows(BLOCK_LONG.len()).any(|w| w == BLOCK_LONG) {
                percore_test_blocks_its_core(LONG);
            }
            let (res, _) = conn.write_all(buf).await;
            res?;
        }
        conn.shutdown_write()
    }
}

/// `stalled_ms=N` of a log line.
fn stalled_ms(line: &str) -> u64 {
    let at = line.find("stalled_ms=").expect("a stalled_ms field") + "stalled_ms=".len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().expect("stalled_ms is a number")
}

backend_tests! {
    /// Serial: the log is the process's, and a test beside this one could
    /// stall too.
    fn a_blocking_handler_is_reported_once(backend) {
        log_capture::install();
        log_capture::clear();
        let server = builder(backend)
            .stall_threshold(Some(THRESHOLD))
            .start(|_core| Blocker)
            .expect("start");
        check_backend(&server, backend);
        let addr = server.local_addr();
        // 1. Two connections on the one core; the first blocks it.
        let mut blocked = connect(addr);
        let mut other = connect(addr);
        roundtrip(&mut other, b"before the stall");
        blocked.write_all(BLOCK).expect("write");
        // 2. The other connection is answered, after the stall.
        roundtrip(&mut other, b"during the stall");
        let mut echo = [0u8; BLOCK.len()];
        blocked.read_exact(&mut echo).expect("the blocked connection's echo");
        assert_eq!(echo, BLOCK);
        roundtrip(&mut blocked, b"after it");
        // 3. The stall's end is logged once, and its duration recorded.
        wait_until(Duration::from_secs(60), "the stall logged", || log_capture::warnings("core stalled"), |lines| {
            lines.iter().any(|l| stalled_ms(l) >= BLOCKED.as_millis() as u64)
        });
        // Stopped first: the watchdog then has logged every stall it
        // counted, one under way included.
        let reader = server.stats_reader();
        server.shutdown();
        server.join().expect("join");
        let stats = reader.snapshot();
        assert!(sum(&stats, |c| c.stall_durations.count()) >= 1);
        let reports = log_capture::warnings("core stalled");
        let long: Vec<&String> = reports.iter().filter(|l| stalled_ms(l) >= BLOCKED.as_millis() as u64).collect();
        assert_eq!(long.len(), 1, "one report of the 200 ms stall: {reports:#?}");
        // A loaded machine may stall the core briefly besides; each stall
        // seen is counted and logged once.
        assert_eq!(sum(&stats, |c| c.stalls), reports.len() as u64, "{reports:#?}");
        // 4. The backtrace was taken during the stall, on the core's
        // thread: its frames follow the line.
        assert!(long[0].ends_with("backtrace="), "a backtrace, not a reason for none: {}", long[0]);
        let frames = log_capture::lines_with(&["percore_test_blocks_its_core"]);
        assert!(!frames.is_empty(), "the backtrace names the blocking function: {long:#?}");
    }

    /// A stall past a second is logged while under way (a core stuck for
    /// good is reported), once, and its end at INFO with the whole length.
    fn a_long_stall_is_logged_while_under_way(backend) {
        log_capture::install();
        log_capture::clear();
        let server = builder(backend)
            .stall_threshold(Some(THRESHOLD))
            .start(|_core| Blocker)
            .expect("start");
        let mut blocked = connect(server.local_addr());
        roundtrip(&mut blocked, BLOCK_LONG);
        let reader = server.stats_reader();
        wait_until(Duration::from_secs(60), "the long stall's end", || log_capture::lines_with(&["core stall ended"]), |l| !l.is_empty());
        server.shutdown();
        server.join().expect("join");
        let under_way = log_capture::lines_with(&["WARN", "core stalled", "(still under way)"]);
        assert_eq!(under_way.len(), 1, "{under_way:#?}");
        assert!(stalled_ms(&under_way[0]) >= 1000, "{}", under_way[0]);
        let ended = log_capture::lines_with(&["core stall ended"]);
        assert_eq!(ended.len(), 1, "{ended:#?}");
        assert!(stalled_ms(&ended[0]) >= LONG.as_millis() as u64, "{}", ended[0]);
        let long_reports = log_capture::warnings("core stalled").into_iter().filter(|l| stalled_ms(l) >= 1000).count();
        assert_eq!(long_reports, 1, "one WARN for the long stall");
        assert!(sum(&reader.snapshot(), |c| c.stalls) >= 1);
    }

    /// With the watchdog off, nothing is counted or logged.
    fn no_watchdog_no_report(backend) {
        log_capture::install();
        log_capture::clear();
        let server = builder(backend)
            .stall_threshold(None)
            .start(|_core| Blocker)
            .expect("start");
        let mut blocked = connect(server.local_addr());
        roundtrip(&mut blocked, BLOCK);
        assert_eq!(sum(&server.stats(), |c| c.stalls), 0);
        assert!(log_capture::warnings("core stalled").is_empty());
        server.shutdown();
        server.join().expect("join");
    }
}
