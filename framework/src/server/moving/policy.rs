//! When a core moves connections: the policy, [`MovePolicy`].
//!
//! Each core looks every `interval` at how busy every core of its server
//! was over the last one (the fraction of the interval its thread ran,
//! from the threads' CPU clocks), and how many request boundaries its
//! own connections reached. A core busier than the mean by more than
//! `margin` of the mean, and busier than the least busy core by that
//! much too, orders moves to that core: up to `per_interval`
//! connections, carrying between them a budget of about
//! `(mine - target) / (2 * mine)` of its boundaries, the share that would
//! even the two if a boundary costs the same everywhere. A connection
//! that counts its own boundaries ([`MoveMeter`](super::MoveMeter))
//! takes an order only when its rate fits what is left of the budget;
//! they go as they reach a request boundary. The orders are replaced at
//! each look (and cancelled once the core is no longer hot), so a core
//! never moves more than `per_interval`, nor more than half the gap, per
//! interval. A core that took connections in within `cooldown` moves
//! none out: a connection just moved is not moved on at once, and two
//! cores never trade the same connections back and forth.
//!
//! The margin is relative to the mean so that the cores end within it
//! of the mean whatever the load (an absolute margin of 15 points at a
//! mean of 50% leaves a max ÷ mean of 1.3); a gap of less than
//! [`MIN_GAP`] is left alone, not worth a move at a low load.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::context;
use crate::core::moves::UNLIMITED;
use crate::stats::CoreStats;

/// How a server's cores move connections between them (see
/// [`ServerBuilder::move_connections`](crate::ServerBuilder::move_connections)
/// and `docs/pressure.md`, "Moving connections").
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct MovePolicy {
    /// How often each core looks at the cores' load (500 ms).
    pub interval: Duration,
    /// How much busier than the mean, and than the least busy core, a
    /// core must be to move connections: a fraction of the mean (0.10: a
    /// core that runs 10% more than the mean moves, so the cores end
    /// within 1.1 × the mean).
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
            margin: 0.10,
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
            0.10
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

/// The least gap of busy fraction between a core and the idlest that
/// moves connections (5 points of CPU).
pub(crate) const MIN_GAP: f64 = 0.05;

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
    let hot = mine > mean * (1.0 + margin) && mine - least > (mean * margin).max(MIN_GAP);
    hot.then_some(idlest)
}

/// The budget of a hot core's orders: the request boundaries, of the
/// `boundaries` it saw in the interval, that would even it (busy `mine`)
/// and the target (busy `target`) if each cost the same: half the gap,
/// `(mine - target) / (2 * mine)` of them. 0 when it is not busier.
pub(crate) fn budget(boundaries: u64, mine: f64, target: f64) -> u32 {
    if mine.is_nan() || target.is_nan() || mine <= target || mine <= 0.0 {
        return 0;
    }
    let share = ((mine - target) / (2.0 * mine)).clamp(0.0, 0.5);
    let room = (boundaries as f64 * share).round();
    // Below the unlimited mark: a policy's budget is always spent.
    room.min(f64::from(UNLIMITED - 1)) as u32
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
            shared.moves.set(0, 0, 0, false);
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
    /// This core's request boundaries at the last look.
    boundaries: u64,
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
            boundaries: context::with_core(|core| core.boundaries()),
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
            // Every look starts an epoch, with orders or none: the
            // meters count their boundaries by it.
            match self.look() {
                Some((to, budget)) => shared.moves.set(to, self.policy.per_interval, budget, true),
                None => shared.moves.set(0, 0, 0, true),
            }
        }
    }

    /// One look: every core's busy fraction since the last, this core's
    /// moves and boundaries since, and where it should move connections
    /// now, with what budget.
    fn look(&mut self) -> Option<(usize, u32)> {
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
        let boundaries = context::with_core(|core| core.boundaries());
        let seen = boundaries.wrapping_sub(self.boundaries);
        self.boundaries = boundaries;
        if self.calm_until.is_some_and(|until| now < until) {
            return None;
        }
        let to = decide(&busy, self.me, self.policy.margin)?;
        Some((to, budget(seen, busy[self.me], busy[to])))
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
    use super::{budget, decide};

    #[test]
    fn a_hot_core_moves_to_the_idlest() {
        assert_eq!(decide(&[0.9, 0.2], 0, 0.1), Some(1));
        assert_eq!(decide(&[0.9, 0.5, 0.1], 0, 0.1), Some(2));
        // 20% above the mean of 0.5.
        assert_eq!(decide(&[0.6, 0.4], 0, 0.1), Some(1));
        // The cold core and the middle one never move.
        assert_eq!(decide(&[0.9, 0.2], 1, 0.1), None);
        assert_eq!(decide(&[0.9, 0.5, 0.1], 1, 0.1), None);
    }

    #[test]
    fn the_margin_is_relative_to_the_mean() {
        // 1.2 × the mean at any load moves; 1.08 × does not.
        assert_eq!(decide(&[0.96, 0.64], 0, 0.1), Some(1));
        assert_eq!(decide(&[0.24, 0.16], 0, 0.1), Some(1));
        assert_eq!(decide(&[0.54, 0.46], 0, 0.1), None);
        // Too small a gap to be worth a move, however relative.
        assert_eq!(decide(&[0.03, 0.01], 0, 0.1), None);
    }

    #[test]
    fn balanced_or_nearly_so_stays() {
        assert_eq!(decide(&[0.5, 0.5], 0, 0.1), None);
        assert_eq!(decide(&[1.0; 4], 2, 0.1), None);
        assert_eq!(decide(&[0.0, 0.0], 0, 0.1), None);
        // A lone core has nowhere to go; a bad index stays.
        assert_eq!(decide(&[1.0], 0, 0.1), None);
        assert_eq!(decide(&[1.0, 0.0], 5, 0.1), None);
    }

    #[test]
    fn the_budget_is_half_the_gap() {
        // 1000 boundaries at 100% against 20%: 400 of them even it.
        assert_eq!(budget(1000, 1.0, 0.2), 400);
        // Against an idle core: half.
        assert_eq!(budget(1000, 0.8, 0.0), 500);
        assert_eq!(budget(999, 0.6, 0.3), 250);
        // Not busier, no boundaries, or nonsense: nothing.
        assert_eq!(budget(1000, 0.4, 0.4), 0);
        assert_eq!(budget(1000, 0.3, 0.4), 0);
        assert_eq!(budget(0, 1.0, 0.0), 0);
        assert_eq!(budget(1000, f64::NAN, 0.0), 0);
        // Never the unlimited mark.
        assert_eq!(budget(u64::MAX, 1.0, 0.0), u32::MAX - 1);
    }
}
