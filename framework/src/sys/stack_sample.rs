//! Samples another thread's stack: the stall watchdog's backtrace of a
//! core that is stuck in a task's poll.
//!
//! A thread cannot be unwound from outside, so the watchdog sends the
//! stalled thread a real-time signal ([`signal_number`]), and the handler,
//! running on that thread, records its return addresses into a static
//! buffer; the watchdog symbolizes them afterwards, outside the handler.
//!
//! What runs in the handler, and why it is safe there:
//! - atomics only, on static memory: no allocation, no lock, no
//!   `Mutex`, no `tracing`; `errno` is saved and restored;
//! - `gettid`, a plain system call;
//! - glibc's `backtrace`, which POSIX does not list as async-signal-safe.
//!   Two things make it unsafe in general and neither applies here: its
//!   first call loads `libgcc_s` (`dlopen`, which allocates), so
//!   [`install`] calls it once on the watchdog's thread before the handler
//!   can run; and the unwinder finds each frame's unwind tables through
//!   the loader, which takes the loader's lock unless glibc offers
//!   `_dl_find_object` (glibc 2.35 and later, used by libgcc 12 and
//!   later: lock-free, and documented as async-signal-safe). Walking frame
//!   pointers instead would need every frame to keep them, which neither
//!   Rust's release builds nor its precompiled `std` do, and the
//!   `backtrace` crate's `trace_unsynchronized` calls the same unwinder
//!   behind a contract it does not promise in a handler.
//!
//! One capture at a time in the process: a capture wanted while another
//! is under way (two servers stalling at once) is skipped, not queued.

use std::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Frames kept per capture; the deepest ones are dropped.
pub(crate) const MAX_FRAMES: usize = 64;

/// The buffer is free for a capture.
const FREE: u8 = 0;
/// A watchdog claimed the buffer and signalled [`TARGET`].
const CLAIMED: u8 = 1;
/// The handler is writing the frames.
const WRITING: u8 = 2;
/// The frames are written; the watchdog reads them and frees the buffer.
const DONE: u8 = 3;

/// Who owns the buffer: the watchdog between `FREE` and `CLAIMED` and
/// after `DONE`, the handler between `CLAIMED` and `DONE`. A handler that
/// comes too late finds `FREE` (the watchdog gave up) or another claim
/// (whose target it is not), and writes nothing.
static STATE: AtomicU8 = AtomicU8::new(FREE);
/// The thread id (`gettid`) the current claim wants sampled.
static TARGET: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
static FRAMES: [AtomicUsize; MAX_FRAMES] = [const { AtomicUsize::new(0) }; MAX_FRAMES];

/// The signal percore samples a core's stack with: `SIGRTMIN + 5`. Real-time
/// signals are not merged with other signals or used by the C library
/// beyond the first few below `SIGRTMIN`.
pub(crate) fn signal_number() -> libc::c_int {
    libc::SIGRTMIN() + 5
}

/// The calling thread's kernel id, to aim a sample at it later.
pub(crate) fn thread_id() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Installs the handler, once per process. `Err` says why samples cannot
/// be taken (the signal already has another handler, or `sigaction`
/// failed); the watchdog then reports stalls without a backtrace.
pub(crate) fn install() -> Result<(), &'static str> {
    static INSTALLED: OnceLock<Result<(), &'static str>> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let mut warm = [std::ptr::null_mut(); 4];
        // SAFETY: `warm` is a writable array of 4 pointers. Called here, in
        // a plain thread, so that its one-time `dlopen` of libgcc_s never
        // happens inside the handler.
        unsafe { libc::backtrace(warm.as_mut_ptr(), warm.len() as libc::c_int) };
        let signal = signal_number();
        // SAFETY: sigaction is plain old data; all-zero is a valid value.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one into `old`.
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0 {
            return Err("sigaction failed");
        }
        if old.sa_sigaction != libc::SIG_DFL {
            return Err("the sampling signal (SIGRTMIN+5) already has a handler");
        }
        // SAFETY: as above.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // Interrupted calls restart: the sampled thread carries on as if
        // nothing happened.
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action.sa_mask` is a valid sigset_t to clear.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialised and `on_signal` only does
        // what the module docs list as safe in a handler.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err("sigaction failed");
        }
        Ok(())
    })
}

/// Whether the signal's handler is still [`on_signal`].
fn still_ours() -> bool {
    // SAFETY: sigaction is plain old data; all-zero is a valid value.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `current`.
    let read = unsafe { libc::sigaction(signal_number(), std::ptr::null(), &mut current) };
    read == 0
        && current.sa_sigaction == on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t
}

extern "C" fn on_signal(_: libc::c_int) {
    // SAFETY: __errno_location returns this thread's errno slot, valid
    // for the thread's life.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    if STATE
        .compare_exchange(CLAIMED, WRITING, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        if thread_id() == TARGET.load(Ordering::Relaxed) {
            let mut frames = [std::ptr::null_mut(); MAX_FRAMES];
            // SAFETY: `frames` is a writable array of MAX_FRAMES pointers;
            // see the module docs for why the call is safe here.
            let n = unsafe { libc::backtrace(frames.as_mut_ptr(), MAX_FRAMES as libc::c_int) };
            let n = (n.max(0) as usize).min(MAX_FRAMES);
            for (slot, ip) in FRAMES.iter().zip(&frames[..n]) {
                slot.store(*ip as usize, Ordering::Relaxed);
            }
            COUNT.store(n, Ordering::Relaxed);
            STATE.store(DONE, Ordering::Release);
        } else {
            // A late signal from an abandoned capture: the claim is not ours.
            STATE.store(CLAIMED, Ordering::Release);
        }
    }
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// Why a sample has no frames.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SampleError {
    /// The handler could not be installed (the reason).
    NotInstalled(&'static str),
    /// Another sample was under way.
    Busy,
    /// The signal could not be sent (the thread is gone).
    Gone,
    /// The thread did not answer within the wait.
    NoAnswer,
}

impl std::fmt::Display for SampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleError::NotInstalled(why) => f.write_str(why),
            SampleError::Busy => f.write_str("another stack sample was under way"),
            SampleError::Gone => f.write_str("the thread is gone"),
            SampleError::NoAnswer => f.write_str("the thread did not answer the signal"),
        }
    }
}

/// The return addresses of thread `tid` of this process, innermost first
/// (the handler's own frames included), waiting at most `wait` for them.
pub(crate) fn sample(tid: i32, wait: Duration) -> Result<Vec<usize>, SampleError> {
    install().map_err(SampleError::NotInstalled)?;
    if !still_ours() {
        // The program took the signal over since: sending it now would
        // run its handler, or kill the process if it reset the default.
        return Err(SampleError::NotInstalled(
            "the sampling signal (SIGRTMIN+5) got another handler",
        ));
    }
    if STATE
        .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return Err(SampleError::Busy);
    }
    TARGET.store(tid, Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    // tgkill by thread id, not pthread_kill: a thread that has exited and
    // been joined leaves a dangling pthread_t (undefined behaviour to
    // use), while a stale id only fails with ESRCH. `STATE` is published
    // with release ordering by the claim before the signal can arrive.
    // SAFETY: a plain system call on integers.
    let sent = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal_number()) };
    if sent != 0 {
        STATE.store(FREE, Ordering::Release);
        return Err(SampleError::Gone);
    }
    let deadline = Instant::now() + wait;
    loop {
        match STATE.load(Ordering::Acquire) {
            DONE => {
                let n = COUNT.load(Ordering::Relaxed);
                let frames = FRAMES[..n]
                    .iter()
                    .map(|f| f.load(Ordering::Relaxed))
                    .collect();
                STATE.store(FREE, Ordering::Release);
                return Ok(frames);
            }
            CLAIMED if Instant::now() >= deadline => {
                // Give up only if the handler has not begun; once it has,
                // it finishes in bounded time and the frames are taken.
                if STATE
                    .compare_exchange(CLAIMED, FREE, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return Err(SampleError::NoAnswer);
                }
            }
            _ => std::thread::sleep(Duration::from_micros(200)),
        }
    }
}
