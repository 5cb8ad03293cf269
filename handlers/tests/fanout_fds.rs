//! The fan-out proxy out of file descriptors, on both backends: a connect
//! that fails with `EMFILE` is a 502 whose body gives the OS's reason
//! ("Too many open files (os error 24)"), not an uncategorized error kind.
//!
//! The test lowers the process's soft `RLIMIT_NOFILE` and fills every
//! free descriptor below it, so it has a test binary of its own and runs
//! its cases one at a time: nothing else may need a descriptor meanwhile.

#[macro_use]
#[path = "support/http.rs"]
mod common;
#[path = "support/fanout.rs"]
mod fake;

use std::fs::File;
use std::sync::Mutex;

use common::*;
use fake::{proxy, refused_addr};

/// One case at a time: the descriptor limit is per process.
static SERIAL: Mutex<()> = Mutex::new(());

/// The process out of descriptors until dropped: the soft limit lowered
/// to a little above what is open, and every free slot below it filled.
struct Starved {
    saved: libc::rlimit,
    _fillers: Vec<File>,
}

impl Starved {
    fn new() -> Starved {
        let open = std::fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .count();
        let mut saved = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut saved) };
        assert_eq!(got, 0);
        let low = libc::rlimit {
            rlim_cur: (open as libc::rlim_t + 16).min(saved.rlim_cur),
            rlim_max: saved.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        let set = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) };
        assert_eq!(set, 0);
        let mut fillers = Vec::new();
        loop {
            match File::open("/dev/null") {
                Ok(f) => fillers.push(f),
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
                Err(e) => panic!("filling the descriptor table: {e}"),
            }
        }
        Starved {
            saved,
            _fillers: fillers,
        }
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        // SAFETY: setrlimit reads the struct it is given.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.saved) };
    }
}

http_tests! {
    /// With no descriptor left, the proxy's connect fails with `EMFILE`:
    /// a 502 naming the upstream and "Too many open files (os error 24)".
    /// With descriptors back, the same client connection gets the usual
    /// refusal.
    fn emfile_names_the_os_reason(backend) {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dead = refused_addr();
        let px = proxy(backend, &[dead], |_| {});
        let mut c = Client::connect(px.addr);
        // The client's connection is accepted and open before the limit.
        assert_eq!(c.roundtrip(&get("/")).status, 502);

        let starved = Starved::new();
        let r = c.roundtrip(&get("/"));
        drop(starved);
        let text = String::from_utf8_lossy(&r.body).into_owned();
        assert_eq!(r.status, 502, "{text}");
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(text.contains(&format!("upstream {dead}: connect failed: {emfile}")), "{text}");
        assert!(text.contains("Too many open files (os error 24)"), "{text}");

        let r = c.roundtrip(&get("/"));
        let text = String::from_utf8_lossy(&r.body).into_owned();
        assert!(text.contains("Connection refused (os error "), "{text}");
    }
}
