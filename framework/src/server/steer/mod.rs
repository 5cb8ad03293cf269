//! Steering new connections to the cores with room: a classic BPF program
//! on each TCP listener's `SO_REUSEPORT` group draws the listening socket
//! of each new connection at random, weighted by the cores' load, instead
//! of the kernel's hash of the connection's addresses (which can put a
//! few busy connections all on one core).
//!
//! One thread per server measures the cores every [`PERIOD`] (their open
//! connections and the CPU time their threads used: `weights`), and
//! attaches a new program (`program`) when some core's share moved by
//! [`STEP`] or more. It changes nothing for connections already open.
//!
//! **Socket order.** The program returns an index in the group, and the
//! group's order is the order in which its sockets began listening. A
//! server that made the group bound its cores' sockets in core order, so
//! core `i` is index `i`. Others may join later (a server taking this one
//! over): their sockets go after ours, which keep their indices, even when
//! those leave again (the kernel fills a leaver's slot with the last
//! socket, which is never one of ours). But while they are there, a
//! program returning only our indices would give them nothing, so
//! steering is paused (the program taken off, the hash back) while the
//! port has more listening sockets than ours, and resumed when it has not.
//! A server that joined a running one's group (a take-over) has its
//! sockets after the old ones; when those leave, the kernel moves ours
//! into their slots in an order we cannot see. So such a server never
//! steers that group, and says so once.
//!
//! At a stop the program is taken off before the cores close their
//! listeners (a closing socket moves the others), and the thread's
//! duplicates of the listening sockets are closed with it, so a core's
//! close is the socket's last.

mod program;
mod weights;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::core::shared::CoreShared;
use crate::net::Endpoint;
use crate::sys::reuseport;
use weights::Load;

/// How new connections are placed on the cores (see
/// [`ServerBuilder::steering`](crate::ServerBuilder::steering)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Steering {
    /// The kernel's hash of each connection's addresses (the default).
    #[default]
    Off,
    /// A weighted random draw, each core weighted by its room: its idle
    /// CPU time and its open connections against the mean.
    Load,
}

/// A server's steering, as [`StatsReader::steering`](crate::StatsReader::steering)
/// reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SteeringStats {
    /// Whether a program steers at least one listener's connections now.
    pub active: bool,
    /// Programs attached so far (one per listener each time the weights
    /// moved).
    pub attaches: u64,
}

/// How often the cores' load is measured.
const PERIOD: Duration = Duration::from_millis(200);

/// How far a core's share must move for a new program to be attached.
const STEP: f64 = 0.05;

/// A share is published in parts per million.
const PPM: f64 = 1_000_000.0;

/// What the server and the steering thread share.
pub(crate) struct Control {
    groups: Mutex<Vec<Group>>,
    active: AtomicBool,
    attaches: AtomicU64,
}

/// One TCP listener's group.
struct Group {
    addr: SocketAddr,
    /// A duplicate of each core's listening socket, in group order; empty
    /// once the server stops.
    sockets: Vec<OwnedFd>,
    mode: Mode,
    /// The shares of the program attached now.
    attached: Option<Vec<f64>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Steered whenever the group holds only our sockets.
    Steer,
    /// Paused: the port has other servers' sockets too.
    Shared,
    /// Never steered (a take-over, a refusal, no socket table).
    Never,
}

impl Control {
    /// A server's steering over its TCP listeners: each one's socket per
    /// core, in core order, its address and whether it joined a running
    /// server's group. `None` when there is nothing to steer.
    pub(crate) fn new(listeners: Vec<(SocketAddr, Vec<OwnedFd>, bool)>) -> Option<Arc<Control>> {
        let groups: Vec<Group> = listeners
            .into_iter()
            .map(|(addr, sockets, joined)| {
                let mode = if joined {
                    tracing::info!(
                        %addr,
                        "steering off for this listener: it joined a running server's \
                         listeners (take-over), and the kernel's order of its sockets is \
                         unknown once those leave; it steers after a restart without take-over"
                    );
                    Mode::Never
                } else {
                    Mode::Steer
                };
                Group {
                    addr,
                    sockets,
                    mode,
                    attached: None,
                }
            })
            .collect();
        if groups.is_empty() || groups.iter().all(|g| g.mode == Mode::Never) {
            return None;
        }
        Some(Arc::new(Control {
            groups: Mutex::new(groups),
            active: AtomicBool::new(false),
            attaches: AtomicU64::new(0),
        }))
    }

    pub(crate) fn stats(&self) -> SteeringStats {
        SteeringStats {
            active: self.active.load(Ordering::Relaxed),
            attaches: self.attaches.load(Ordering::Relaxed),
        }
    }

    /// Takes every program off and closes the duplicates: the server
    /// stops. Called before the cores are told, so no core closes its
    /// listener while a program still counts it.
    pub(crate) fn stop(&self) {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        for group in groups.iter_mut() {
            if group.attached.take().is_some() {
                if let Some(socket) = group.sockets.first() {
                    // Failing, the program stays until the sockets close;
                    // an index past the group's end falls back to the hash.
                    let _ = reuseport::detach(socket.as_fd());
                }
            }
            group.sockets.clear();
            group.mode = Mode::Never;
        }
        self.active.store(false, Ordering::Relaxed);
    }

    /// One look: attaches, pauses or resumes each group's program for
    /// `shares`; returns whether any steers.
    fn apply(&self, shares: &[f64]) -> bool {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        let mut any = false;
        for group in groups.iter_mut() {
            group.apply(shares, &self.attaches);
            any |= group.attached.is_some();
        }
        self.active.store(any, Ordering::Relaxed);
        any
    }
}

impl Group {
    fn apply(&mut self, shares: &[f64], attaches: &AtomicU64) {
        if self.mode == Mode::Never || self.sockets.is_empty() {
            return;
        }
        let ours = self.sockets.len();
        let Some(listening) = super::listening::count_at(self.addr) else {
            tracing::info!(
                addr = %self.addr,
                "steering off: the kernel's socket table cannot be read, so a server \
                 taking this one over would go unseen"
            );
            self.take_off();
            self.mode = Mode::Never;
            return;
        };
        let shared = listening > ours;
        match (self.mode, shared) {
            (Mode::Steer, true) => {
                tracing::info!(
                    addr = %self.addr,
                    listening,
                    ours,
                    "steering paused: another server listens in this port's group \
                     (a take-over); the kernel's hash places connections meanwhile"
                );
                self.take_off();
                self.mode = Mode::Shared;
                return;
            }
            (Mode::Shared, true) => return,
            (Mode::Shared, false) => {
                tracing::info!(addr = %self.addr, "steering resumed: the group holds only this server's sockets");
                self.mode = Mode::Steer;
            }
            _ => {}
        }
        if self
            .attached
            .as_deref()
            .is_some_and(|old| !weights::moved(old, shares, STEP))
        {
            return;
        }
        let program = program::draw(shares);
        match reuseport::attach_cbpf(self.sockets[0].as_fd(), &program) {
            Ok(()) => {
                attaches.fetch_add(1, Ordering::Relaxed);
                self.attached = Some(shares.to_vec());
            }
            Err(e) => {
                tracing::warn!(
                    addr = %self.addr,
                    error = %e,
                    "steering off: the kernel refused the reuseport BPF program; \
                     its hash places connections"
                );
                self.take_off();
                self.mode = Mode::Never;
            }
        }
    }

    fn take_off(&mut self) {
        if self.attached.take().is_some() {
            if let Err(e) = reuseport::detach(self.sockets[0].as_fd()) {
                tracing::debug!(addr = %self.addr, error = %e, "steering: cannot take the program off");
            }
        }
    }
}

/// The steering thread; stopped with [`stop`](Self::stop) or when dropped
/// (its thread sees the channel close).
pub(crate) struct Steerer {
    stop: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
}

impl Steerer {
    /// Starts measuring `cores` and steering through `control`.
    pub(crate) fn start(
        control: Arc<Control>,
        cores: Vec<Arc<CoreShared>>,
        addr: Endpoint,
    ) -> io::Result<Steerer> {
        let (stop, stopped) = mpsc::channel();
        let thread = thread::Builder::new()
            .name("percore-steer".into())
            .spawn(move || {
                let _span = tracing::info_span!("steer", %addr).entered();
                run(&control, &cores, &stopped);
            })?;
        Ok(Steerer { stop, thread })
    }

    pub(crate) fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

/// What the thread remembers of a core between looks.
#[derive(Clone, Copy)]
struct Seen {
    cpu_us: u64,
    busy: f64,
}

fn run(control: &Control, cores: &[Arc<CoreShared>], stopped: &mpsc::Receiver<()>) {
    let mut seen: Vec<Seen> = cores
        .iter()
        .map(|c| Seen {
            cpu_us: c.stats.cpu_time_us.get(),
            busy: 0.0,
        })
        .collect();
    let mut last = Instant::now();
    loop {
        // The first program goes on at once: equal shares on idle cores.
        let loads = measure(cores, &mut seen, last.elapsed());
        last = Instant::now();
        let shares = weights::shares(&loads);
        let steering = control.apply(&shares);
        for (core, share) in cores.iter().zip(&shares) {
            let ppm = if steering { (share * PPM) as u64 } else { 0 };
            core.stats.steer_weight_ppm.set(ppm);
        }
        if !matches!(
            stopped.recv_timeout(PERIOD),
            Err(mpsc::RecvTimeoutError::Timeout)
        ) {
            break;
        }
    }
    control.stop();
    for core in cores {
        core.stats.steer_weight_ppm.set(0);
    }
}

/// Each core's load since the last look. The cores publish their CPU time
/// every 100 ms, so a busy fraction is smoothed over two looks.
fn measure(cores: &[Arc<CoreShared>], seen: &mut [Seen], elapsed: Duration) -> Vec<Load> {
    let wall_us = elapsed.as_micros().max(1) as f64;
    cores
        .iter()
        .zip(seen.iter_mut())
        .map(|(core, seen)| {
            let cpu_us = core.stats.cpu_time_us.get();
            let now = cpu_us.saturating_sub(seen.cpu_us) as f64 / wall_us;
            seen.cpu_us = cpu_us;
            seen.busy = 0.5 * seen.busy + 0.5 * now.clamp(0.0, 1.0);
            Load {
                active: core.stats.active.get(),
                busy: seen.busy,
            }
        })
        .collect()
}
