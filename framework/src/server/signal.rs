//! Stopping servers on SIGINT, SIGTERM and SIGHUP.
//!
//! The signal handler only writes an eventfd (async-signal-safe); a
//! watcher thread reads it and stops every registered server. The first
//! signal starts a graceful stop; a second one exits at once, for an
//! operator who does not want to wait for the drain (the same signal
//! again within 100 ms counts as the first one sent twice, as GNU
//! `timeout` sends it), with the shell's
//! status for death by that signal (130 for SIGINT, 143 for SIGTERM, 129
//! for SIGHUP) and one line on stderr saying so, so that it does not look
//! like a crash.
//!
//! SIGHUP (the terminal that started the server went away) would
//! otherwise kill the process on the spot, losing every request in
//! flight; it stops gracefully instead, unless it is ignored when the
//! server starts (as under `nohup`), which is left as it is: such a
//! server is meant to outlive its terminal.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::server::Stopper;
use crate::sys::cvt;

static SIGNAL_FD: AtomicI32 = AtomicI32::new(-1);
/// The first stop signal: when it came (`CLOCK_MONOTONIC` nanoseconds, low
/// byte cleared) and its number (the low byte); 0 before it. One word, set
/// once by compare-and-swap, so that two handlers running at once on two
/// threads agree on which came first and what it was.
static FIRST: AtomicU64 = AtomicU64::new(0);

fn stoppers() -> &'static Mutex<Vec<Stopper>> {
    static STOPPERS: OnceLock<Mutex<Vec<Stopper>>> = OnceLock::new();
    STOPPERS.get_or_init(|| Mutex::new(Vec::new()))
}

/// The same signal again within this is the same stop sent twice, not an
/// operator's second signal: GNU `timeout` signals the process and then
/// its process group, which holds the process, a few microseconds apart.
const DUPLICATE_WITHIN_NS: u64 = 100_000_000;

/// `CLOCK_MONOTONIC` in nanoseconds (async-signal-safe); `None` if the
/// clock cannot be read.
fn monotonic_ns() -> Option<u64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) is async-signal-safe and writes only `now`,
    // which is live and writable for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (rc == 0).then(|| {
        (now.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(now.tv_nsec as u64)
    })
}

extern "C" fn on_signal(signal: libc::c_int) {
    let now = monotonic_ns();
    // Bit 8 keeps the word non-zero even at time 0.
    let first = (now.unwrap_or(0) & !0x1ff) | 0x100 | (signal as u64 & 0xff);
    if let Err(earlier) = FIRST.compare_exchange(0, first, Ordering::SeqCst, Ordering::SeqCst) {
        let same_signal = earlier & 0xff == signal as u64 & 0xff;
        // Without a clock, never a duplicate: a second signal must still
        // be able to end the process.
        let soon =
            now.is_some_and(|now| now.saturating_sub(earlier & !0x1ff) < DUPLICATE_WITHIN_NS);
        if same_signal && soon {
            return;
        }
        const LINE: &[u8] = b"percore: second stop signal: exiting without draining\n";
        // SAFETY: write(2) and _exit(2) are async-signal-safe; LINE is a
        // static byte string. A failed write changes nothing.
        unsafe {
            libc::write(2, LINE.as_ptr().cast(), LINE.len());
            libc::_exit(128 + signal);
        }
    }
    let fd = SIGNAL_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: write(2) is async-signal-safe; `one` outlives the call.
        unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
    }
}

/// Registers `stopper` to be called on the first SIGINT, SIGTERM or
/// SIGHUP (see the module docs).
pub(crate) fn on_stop_signal(stopper: Stopper) -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    stoppers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(stopper);
    INSTALLED
        .get_or_init(|| install().map_err(|e| e.to_string()))
        .clone()
        .map_err(io::Error::other)
}

fn install() -> io::Result<()> {
    // A blocking eventfd: the watcher thread sleeps in read(2).
    // SAFETY: eventfd(2) takes no pointers and only creates a descriptor.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) })?;
    // SAFETY: eventfd just returned this fd and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    // The watcher first, then the handlers: a handler must never find
    // `SIGNAL_FD` naming a closed descriptor (whatever reused its number
    // would get the write), and once the thread runs it owns the eventfd
    // for the life of the process.
    std::thread::Builder::new()
        .name("percore-signals".into())
        .spawn(move || loop {
            let mut value: u64 = 0;
            // SAFETY: `value` is a writable u64 for the call's duration, and
            // `fd` stays open: this thread owns it and never exits.
            let n = unsafe {
                libc::read(
                    fd.as_raw_fd(),
                    &mut value as *mut u64 as *mut libc::c_void,
                    8,
                )
            };
            if n == 8 {
                // A subscriber that panics (the fmt subscriber does when
                // stderr is a pipe whose reader is gone) must cost neither
                // this thread nor the stop of any server (each logs too).
                let signal = name((FIRST.load(Ordering::SeqCst) & 0xff) as libc::c_int);
                let _ = std::panic::catch_unwind(|| {
                    tracing::info!(
                        "{signal} received: stopping; a second stop signal exits at once"
                    );
                });
                for stopper in stoppers().lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| stopper.stop()));
                }
            }
        })?;
    SIGNAL_FD.store(raw, Ordering::SeqCst);
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        if signal == libc::SIGHUP && ignored(signal)? {
            continue;
        }
        // SAFETY: sigaction is plain old data; zeroed is a valid value.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action` is fully initialised and live for the call, and
        // the handler only makes async-signal-safe calls.
        cvt(unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) })?;
    }
    Ok(())
}

/// Whether `signal` is ignored (`SIG_IGN`), as `nohup` leaves SIGHUP.
fn ignored(signal: libc::c_int) -> io::Result<bool> {
    // SAFETY: sigaction is plain old data; zeroed is a valid value.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `current`,
    // which is writable for the call.
    cvt(unsafe { libc::sigaction(signal, std::ptr::null(), &mut current) })?;
    Ok(current.sa_sigaction == libc::SIG_IGN)
}

/// The signal's name, for the log.
fn name(signal: libc::c_int) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a stop signal",
    }
}
