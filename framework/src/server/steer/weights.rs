//! How much of the new connections each core should get: its share, from
//! how loaded it is now.
//!
//! A core's room is the product of two terms, each between 0 and 1:
//! - its idle time, `1 - busy`, where `busy` is the fraction of the last
//!   interval its thread ran (a core at 100% has no room, whatever its
//!   connections);
//! - its connections against the mean, `1 - active / (2 · mean + SLACK)`:
//!   a core with the mean has about half its room, one with twice the
//!   mean or more has next to none, an empty one all of it. Relative to
//!   the mean, so that it says as much on 64 cores as on 2; the slack
//!   keeps a handful of connections (one open on one core at the moment
//!   of the look) from swinging the shares.
//!
//! The shares are the rooms normalised, above a floor: every core keeps at
//! least `FLOOR / n` of the new connections, so a stale measurement never
//! starves a core, and with no room anywhere (every core saturated) the
//! shares are equal, which is what the kernel's hash would give.

/// What the shares of all cores above their rooms leave to the floor.
const FLOOR: f64 = 0.05;

/// Connections that say next to nothing about a core's load.
const SLACK: f64 = 8.0;

/// One core's load, as the steering thread measured it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Load {
    /// Connections open on the core.
    pub(crate) active: u64,
    /// The fraction of the last interval the core's thread ran, 0 to 1.
    pub(crate) busy: f64,
}

/// Each core's share of the new connections: non-negative, summing to 1.
pub(crate) fn shares(loads: &[Load]) -> Vec<f64> {
    let n = loads.len();
    if n == 0 {
        return Vec::new();
    }
    let mean = loads.iter().map(|l| l.active as f64).sum::<f64>() / n as f64;
    let rooms: Vec<f64> = loads
        .iter()
        .map(|l| {
            let idle = (1.0 - l.busy).clamp(0.0, 1.0);
            let conns = if mean > 0.0 {
                (1.0 - l.active as f64 / (2.0 * mean + SLACK)).clamp(0.0, 1.0)
            } else {
                1.0
            };
            idle * conns
        })
        .collect();
    let total: f64 = rooms.iter().sum();
    let floor = FLOOR / n as f64;
    rooms
        .iter()
        .map(|&room| {
            if total > f64::EPSILON {
                floor + (1.0 - FLOOR) * room / total
            } else {
                1.0 / n as f64
            }
        })
        .collect()
}

/// Whether `new` differs from `old` enough to attach a new program: some
/// core's share moved by `step` or more.
pub(crate) fn moved(old: &[f64], new: &[f64], step: f64) -> bool {
    old.len() != new.len() || old.iter().zip(new).any(|(a, b)| (a - b).abs() >= step)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(active: u64, busy: f64) -> Load {
        Load { active, busy }
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn idle_or_equal_cores_share_equally() {
        assert!(close(&shares(&[load(0, 0.0); 4]), &[0.25; 4]));
        assert!(close(&shares(&[load(10, 0.5); 2]), &[0.5; 2]));
        // Every core saturated: no room anywhere, the hash's split.
        assert!(close(&shares(&[load(10, 1.0), load(0, 1.0)]), &[0.5; 2]));
        assert!(close(&shares(&[load(3, 0.2)]), &[1.0]));
    }

    #[test]
    fn a_loaded_core_gets_the_floor() {
        // Twice the mean of connections: next to no room.
        let s = shares(&[load(1000, 0.0), load(0, 0.0)]);
        assert!(s[0] < 0.035 && s[1] > 0.965, "{s:?}");
        // One connection on one core says little.
        let s = shares(&[load(1, 0.0), load(0, 0.0)]);
        assert!(s[0] > 0.45, "{s:?}");
        // Busy all the time: no room.
        let s = shares(&[load(0, 1.0), load(0, 0.1)]);
        assert!(close(&s, &[0.025, 0.975]), "{s:?}");
        // Busier than the other: less.
        let s = shares(&[load(5, 0.8), load(5, 0.2)]);
        assert!(s[0] < 0.3 && s[1] > 0.7, "{s:?}");
        assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn out_of_range_measurements_are_clamped() {
        let s = shares(&[load(0, 1.7), load(0, -0.5)]);
        assert!(close(&s, &[0.025, 0.975]), "{s:?}");
    }

    #[test]
    fn small_moves_keep_the_program() {
        assert!(!moved(&[0.5, 0.5], &[0.53, 0.47], 0.05));
        assert!(moved(&[0.5, 0.5], &[0.56, 0.44], 0.05));
        assert!(moved(&[0.5, 0.5], &[1.0], 0.05));
    }
}
