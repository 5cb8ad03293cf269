//! [`Plan`]: the sizes and counts of a run, full or quick.

use super::Workload;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Sizes and counts of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Rounds: each runs every implementation of a workload once, in turn.
    pub rounds: usize,
    /// Sizes of the sequentially written files.
    pub seq_sizes: Vec<u64>,
    /// Bytes per write of the sequential writes.
    pub seq_chunks: Vec<usize>,
    /// A cell writes or reads at least this many bytes (small files are
    /// written again, each time a new file).
    pub min_volume: u64,
    /// Size of the vectored-write files and of the vectored-read file.
    pub vec_size: u64,
    /// Passes over the vectored-read file per cold cell.
    pub cold_passes: u64,
    /// Files in each tree of `open_close`.
    pub tree_files: usize,
    /// Passes over a tree per cell.
    pub tree_passes: usize,
    /// Tree depths.
    pub depths: Vec<usize>,
    /// Size of the warm file of `rand_read` and `warm_read`.
    pub warm_size: u64,
    /// Reads per `rand_read` and `warm_read` cell.
    pub reads: usize,
    /// Queue depths of `rand_read`.
    pub queue_depths: Vec<usize>,
}

impl Plan {
    /// The full run; `big` adds a 1 GiB sequential file.
    pub fn full(big: bool) -> Plan {
        let mut seq_sizes = vec![MIB, 64 * MIB, 256 * MIB];
        if big {
            seq_sizes.push(GIB);
        }
        Plan {
            rounds: 3,
            seq_sizes,
            seq_chunks: vec![64 * KIB as usize, MIB as usize],
            min_volume: 64 * MIB,
            vec_size: 64 * MIB,
            cold_passes: 1,
            tree_files: 1000,
            tree_passes: 10,
            depths: vec![1, 4, 16],
            warm_size: 256 * MIB,
            reads: 100_000,
            queue_depths: vec![1, 32],
        }
    }

    /// Every cell once, with tiny sizes: checks that everything runs.
    pub fn quick() -> Plan {
        Plan {
            rounds: 1,
            seq_sizes: vec![MIB],
            seq_chunks: vec![64 * KIB as usize, MIB as usize],
            min_volume: MIB,
            vec_size: MIB,
            cold_passes: 1,
            tree_files: 20,
            tree_passes: 1,
            depths: vec![1, 4, 16],
            warm_size: 4 * MIB,
            reads: 2000,
            queue_depths: vec![1, 32],
        }
    }

    /// How the table header describes it.
    pub fn describe(&self) -> String {
        format!(
            "{} round(s); files of {}; vectored {}; trees of {} files; warm file {}, {} reads per cell",
            self.rounds,
            self.seq_sizes
                .iter()
                .map(|s| super::size_label(*s))
                .collect::<Vec<_>>()
                .join(", "),
            super::size_label(self.vec_size),
            self.tree_files,
            super::size_label(self.warm_size),
            self.reads,
        )
    }

    /// Every workload, in table order.
    pub fn workloads(&self) -> Vec<Workload> {
        let mut w = Vec::new();
        for &size in &self.seq_sizes {
            for &chunk in &self.seq_chunks {
                w.push(Workload::SeqWrite { size, chunk });
            }
        }
        w.push(Workload::Writev {
            size: self.vec_size,
        });
        w.push(Workload::Readv { cold: false });
        w.push(Workload::Readv { cold: true });
        for &depth in &self.depths {
            w.push(Workload::OpenClose { depth });
        }
        for &qd in &self.queue_depths {
            w.push(Workload::RandRead { qd });
        }
        w.push(Workload::WarmRead);
        w
    }

    /// Files a `size`-byte write cell writes, one after the other.
    pub fn files_per_cell(&self, size: u64) -> u64 {
        (self.min_volume / size).max(1)
    }

    /// Passes over the vectored-read file per cell.
    pub fn readv_passes(&self, cold: bool) -> u64 {
        if cold {
            self.cold_passes
        } else {
            (4 * self.min_volume / self.vec_size).max(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_has_every_kind() {
        let q = Plan::quick().workloads();
        let f = Plan::full(false).workloads();
        let kind = |w: &Workload| w.to_string().split('/').next().unwrap().to_string();
        let mut qk: Vec<_> = q.iter().map(kind).collect();
        let mut fk: Vec<_> = f.iter().map(kind).collect();
        qk.dedup();
        fk.dedup();
        assert_eq!(qk, fk);
        assert!(Plan::full(true).seq_sizes.contains(&GIB));
    }
}
