//! When a core moves connections: the policy, [`MovePolicy`].
//!
//! Each core looks every `interval` at how busy every core of its server
//! was over the last one (the fraction of the interval its thread ran,
//! from the threads' CPU clocks). A core busier than the mean by more
//! than `margin`, and busier than the least busy core by more than that
//! too, orders up to `per_interval` of its connections to that core;
//! they go as they reach a request boundary. The orders are replaced at
//! each look (and cancelled once the core is no longer hot), so a core
//! never moves more than `per_interval` per interval. A core that took
//! connections in within `cooldown` moves none out: a connection just
//! moved is not moved on at once, and two cores never trade the same
//! connections back and forth.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::context;
use crate::stats::CoreStats;

/// How a server's cores move connections between them (see
/// [`ServerBuilder::move_connections`](crate::ServerBuilder::move_connections)
/// and `docs/operating.md`, "Moving connections").
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct MovePolicy {
    /// How often each core looks at the cores' load (500 ms).
    pub interval: Duration,
    /// How much busier than the mean, and than the least busy core, a
    /// core must be to move connections: a fraction of the interval
    /// (0.15, 15 points of CPU).
    pub margin: f64,
    /// The most connections a core moves per interval (4).
    pub per_interval: usize,
    /// How long a core that took connections in moves none out (5 s).
    pub cooldown: Duration,
}

impl Default for MovePolicy {
    fn default() -> Self {
        MovePolicy {
            interval: Duration::from_millis(500),
            margin: 0.15,
            per_interval: 4,
            cooldown: Duration::from_secs(5),
        }
    }
}

impl MovePolicy {
    /// Sets [`interval`](Self::interval) (at least 10 ms).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Sets [`margin`](Self::margin) (clamped to 0..=1).
    pub fn margin(mut self, margin: f64) -> Self {
        self.margin = if margin.is_nan() {
            0.15
        } else {
            margin.clamp(0.0, 1.0)
        };
        self
    }

    /// Sets [`per_interval`](Self::per_interval).
    pub fn per_interval(mut self, count: usize) -> Self {
        self.per_interval = count;
        self
    }

    /// Sets [`cooldown`](Self::cooldown).
    pub fn cooldown(mut self, cooldown: Duration) -> Self {
        self.cooldown = cooldown;
        self
    }
}

/// The core this one should move connections to, given every core's
/// busy fraction: `None` unless it is hot (see the module docs).
pub(crate) fn decide(busy: &[f64], me: usize, margin: f64) -> Option<usize> {
    let mine = *busy.get(me)?;
    let mean = busy.iter().sum::<f64>() / busy.len() as f64;
    let (idlest, least) = busy
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != me)
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    (mine > mean + margin && mine > least + margin).then_some(idlest)
}

/// Starts the policy on this core: a task that looks every interval
/// until the core stops.
pub(crate) fn spawn(policy: MovePolicy) {
    let (me, shared, peers) = context::with_core(|core| {
        let shared = core.shared.clone();
        let peers: Option<Vec<Arc<CoreStats>>> = (0..shared.peer_count())
            .map(|i| shared.peer(i).map(|peer| peer.stats.clone()))
            .collect();
        (shared.index(), shared, peers.unwrap_or_default())
    });
    // A lone core has nowhere to move to; a peer gone already (a core
    // that failed to start) leaves the server stopping.
    if peers.len() < 2 || me >= peers.len() {
        return;
    }
    crate::executor::current::with_executor(|executor| {
        executor.spawn_detached(async move {
            let stop = crate::core::stopping::shutdown_signal();
            let looking = Looking::new(policy, me, peers);
            let _ = crate::future::select(stop, looking.run(&shared)).await;
            shared.moves.set(0, 0);
        })
    });
}

/// What one core's policy remembers between looks.
struct Looking {
    policy: MovePolicy,
    me: usize,
    peers: Vec<Arc<CoreStats>>,
    /// Each core's CPU time at the last look, in µs.
    cpu_us: Vec<u64>,
    at: Instant,
    /// This core's moves in and out at the last look.
    moved_in: u64,
    moved_out: u64,
    /// No moves out before this: the core took connections in.
    calm_until: Option<Instant>,
}

impl Looking {
    fn new(policy: MovePolicy, me: usize, peers: Vec<Arc<CoreStats>>) -> Looking {
        let cpu_us = peers.iter().map(|s| s.cpu_time_us.get()).collect();
        let stats = &peers[me];
        Looking {
            moved_in: stats.moved_in.get(),
            moved_out: stats.moved_out.get(),
            policy,
            me,
            cpu_us,
            at: Instant::now(),
            peers,
            calm_until: None,
        }
    }

    async fn run(mut self, shared: &crate::core::shared::CoreShared) {
        loop {
            crate::time::sleep(self.policy.interval).await;
            let target = self.look();
            match target {
                Some(to) => shared.moves.set(to, self.policy.per_interval),
                None => shared.moves.set(0, 0),
            }
        }
    }

    /// One look: every core's busy fraction since the last, this core's
    /// moves since, and where it should move connections now.
    fn look(&mut self) -> Option<usize> {
        let now = Instant::now();
        let wall = now.saturating_duration_since(self.at).as_micros().max(1) as f64;
        self.at = now;
        let busy: Vec<f64> = self
            .peers
            .iter()
            .zip(&mut self.cpu_us)
            .map(|(stats, last)| {
                let cpu = stats.cpu_time_us.get();
                let ran = cpu.saturating_sub(*last) as f64;
                *last = cpu;
                (ran / wall).clamp(0.0, 1.0)
            })
            .collect();
        let stats = &self.peers[self.me];
        let (moved_in, moved_out) = (stats.moved_in.get(), stats.moved_out.get());
        if moved_in > self.moved_in {
            self.calm_until = Some(now + self.policy.cooldown);
        }
        if moved_out > self.moved_out {
            tracing::info!(
                moved = moved_out - self.moved_out,
                busy = ?Percent(&busy),
                "moved connections to idler cores"
            );
        }
        (self.moved_in, self.moved_out) = (moved_in, moved_out);
        if self.calm_until.is_some_and(|until| now < until) {
            return None;
        }
        decide(&busy, self.me, self.policy.margin)
    }
}

/// Busy fractions as whole percents, for the log.
struct Percent<'a>(&'a [f64]);

impl std::fmt::Debug for Percent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|b| (b * 100.0).round() as u32))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::decide;

    #[test]
    fn a_hot_core_moves_to_the_idlest() {
        assert_eq!(decide(&[0.9, 0.2], 0, 0.15), Some(1));
        assert_eq!(decide(&[0.9, 0.5, 0.1], 0, 0.15), Some(2));
        // The cold core and the middle one never move.
        assert_eq!(decide(&[0.9, 0.2], 1, 0.15), None);
        assert_eq!(decide(&[0.9, 0.5, 0.1], 1, 0.15), None);
    }

    #[test]
    fn balanced_or_nearly_so_stays() {
        assert_eq!(decide(&[0.5, 0.5], 0, 0.15), None);
        // Above the mean by less than the margin.
        assert_eq!(decide(&[0.6, 0.4], 0, 0.15), None);
        assert_eq!(decide(&[1.0; 4], 2, 0.15), None);
        // A lone core has nowhere to go; a bad index stays.
        assert_eq!(decide(&[1.0], 0, 0.15), None);
        assert_eq!(decide(&[1.0, 0.0], 5, 0.15), None);
    }
}
