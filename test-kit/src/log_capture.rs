//! The process's log (INFO and above) captured in memory, for tests that
//! check what an operator would read. Memory only, so logging needs no
//! descriptor (one case runs the process out of them). Spans log a line
//! when they close. The subscriber is
//! process-wide: a test binary installs it on first use.

use std::io;
use std::sync::{Mutex, Once};

/// Everything logged since the start or the last [`clear`].
static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl io::Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        LOG.lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber (once per process).
pub fn install() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        tracing_subscriber::fmt()
            .with_writer(|| Capture)
            // A span's closing line carries what it recorded last.
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_ansi(false)
            .init();
    });
}

/// Forgets what was captured so far.
pub fn clear() {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The WARN lines captured so far that mention `needle`.
pub fn warnings(needle: &str) -> Vec<String> {
    install();
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// The lines captured so far that mention every one of `needles`.
pub fn lines_with(needles: &[&str]) -> Vec<String> {
    install();
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .map(str::to_owned)
        .collect()
}

/// A point in the captured log, to read only what came after it: the
/// log is the process's, and a line of an earlier test can match (a port
/// number reused by a later test's server).
#[derive(Debug, Clone, Copy)]
pub struct Mark(usize);

/// Where the captured log ends now.
pub fn mark() -> Mark {
    install();
    Mark(LOG.lock().unwrap_or_else(|e| e.into_inner()).len())
}

impl Mark {
    /// The lines captured since this mark that mention every one of
    /// `needles` (all of them if the log was cleared since).
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
        let since = log.get(self.0..).unwrap_or(&log[..]);
        String::from_utf8_lossy(since)
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_owned)
            .collect()
    }
}
