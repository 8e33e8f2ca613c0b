//! What a step sends over links: the topology and the ring collectives' times
//! ([`topology`], a leaf that [`crate::cost::Machine`] names), the exchanges each parallelism
//! makes in a step ([`exchanges`]: context parallelism's keys and values, the MoE layer's
//! all-to-alls and gathers, the experts' dispatch, hybrid sharding's replicas); in this file, the link a group of ranks uses and how much of a transfer
//! hides behind compute. Uses `step` and `chip` of [`crate::cost`].

pub mod exchanges;
pub mod placement;
pub mod topology;

use crate::cost::links::topology::Link;
use crate::cost::Machine;
use crate::model::layout::Cluster;
/// Whether every group of `size` ranks `stride` apart lies in one scale-up domain of
/// `cluster`, the ranks filling domains of [`Cluster::scale_up`] GPUs in order (Megatron-core
/// numbers ranks TP fastest, then CP, then EP or DP, then PP: `RankGenerator`'s order
/// `tp-cp-ep-dp-pp`, `megatron/core/parallel_state.py`, so a kind's groups tile the world in
/// runs of `S = stride·size` ranks, the first run `0 … S − 1`).
///
/// Exact: every group does when the whole cluster is one domain (`GPUs ≤ D`), or when `S`
/// divides `D` (each run lies in a domain); otherwise the run over a domain boundary `j·D` that
/// `S` does not divide holds a group with ranks on both sides (with `S` dividing the GPUs, as
/// every group kind's does). So TP 8 × CP 2 × EP 4 (runs of 64) on 512 GPUs in domains of
/// 72 straddles (ranks 64 to 127 are 8 in the first rack and 56 in the second), and in
/// domains of 64 (64 of each 72 used) does not. A group of one rank `stride` apart within a
/// domain counts as inside it, as it did when the domain was the node.
pub fn in_one_domain(cluster: &Cluster, stride: u64, size: u64) -> bool {
    let domain = cluster.scale_up;
    let span = stride.saturating_mul(size);
    cluster.gpus <= domain || (span <= domain && (size <= 1 || domain % span == 0))
}

/// The fewest ranks of one group of `size` ranks `stride` apart in one scale-up domain it is
/// on, over every group of the cluster ([`in_one_domain`]'s order). Where `stride` divides
/// the domain, exactly as [`Placement::of`](crate::cost::step::experts::Placement::of) counts them (EP 12 on domains of 8 is 8 + 4, so
/// 4); where it is at least the domain, 1 (a domain holds one rank of a group); otherwise
/// counted over the groups' starts (`straddled`, below).
pub fn fewest_per_domain(cluster: &Cluster, stride: u64, size: u64) -> u64 {
    let (domain, stride, size) = (cluster.scale_up, stride.max(1), size.max(1));
    let runs = cluster.gpus / stride.saturating_mul(size).max(1);
    if stride >= domain {
        1
    } else if domain % stride == 0 {
        blocks_fewest(domain / stride, size, runs)
    } else {
        straddled(domain, stride, size, runs)
    }
}

/// [`Placement::of`](crate::cost::step::experts::Placement::of)'s `fewest` without walking each group's whole domains: runs of `n`
/// blocks on domains of `p` blocks, run `j` starting `(j·n) mod p` blocks into a domain, hold
/// `min(p − offset, n)` of a group in the first domain, then `p` in each whole one, then the
/// rest; the offsets repeat every `p/gcd(n, p)` runs.
fn blocks_fewest(p: u64, n: u64, runs: u64) -> u64 {
    let period = p / gcd(n % p, p);
    let mut fewest = n;
    for j in 0..runs.clamp(1, period) {
        let offset = ((u128::from(j) * u128::from(n)) % u128::from(p)) as u64;
        let first = (p - offset).min(n);
        let rest = n - first;
        fewest = fewest.min(first);
        if rest >= p {
            fewest = fewest.min(p);
        }
        if rest % p > 0 {
            fewest = fewest.min(rest % p);
        }
    }
    fewest.max(1)
}

/// Most group starts [`straddled`] looks at before it settles for 1, a bound from below.
const STARTS: u64 = 1 << 14;

/// The fewest ranks in one domain of `D` of a group of `n` ranks `s` apart, for `s < D` not
/// dividing `D`, over `runs` runs of `S = s·n` ranks: the group starting `b` ranks into a
/// domain has `min(n, ⌈(D − b)/s⌉)` ranks in its first domain and `⌊o/s⌋ + 1` in its last, `o`
/// its last rank's place in that domain; a domain between them holds `⌊D/s⌋` or `⌈D/s⌉`,
/// counted as `⌊D/s⌋` wherever a group reaches past a domain's length (a bound from below).
/// The starts are `a + S·c` for `a < s` and `c` below `runs` and the period `D/gcd(S, D)`:
/// exact at the first and last domain, beyond [`STARTS`] of them 1.
fn straddled(domain: u64, stride: u64, size: u64, runs: u64) -> u64 {
    let span = stride.saturating_mul(size);
    let period = domain / gcd(span % domain, domain);
    let cs = runs.clamp(1, period);
    if cs.saturating_mul(stride) > STARTS {
        return 1;
    }
    let reach = stride * (size - 1);
    let mut fewest = if reach > domain {
        (domain / stride).clamp(1, size)
    } else {
        size
    };
    for c in 0..cs {
        let base = ((u128::from(span) * u128::from(c)) % u128::from(domain)) as u64;
        for a in 0..stride {
            let b = (base + a) % domain;
            let first = (domain - b).div_ceil(stride).min(size);
            if first < size {
                let last = ((b + reach) % domain) / stride + 1;
                fewest = fewest.min(first).min(last);
            }
        }
    }
    fewest.max(1)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The link a group of `size` ranks, `stride` apart, uses: NVLink when every such group lies
/// in one scale-up domain ([`in_one_domain`]: the node, or an NVL72 rack); otherwise the
/// network, where NCCL spreads the ring over the NICs of the group's members in each domain
/// (one 400 Gb/s NIC per GPU), so the bus bandwidth is the per-NIC figure times the fewest
/// members a domain holds of a group ([`fewest_per_domain`]: the slowest group sets the step),
/// at most NVLink's.
pub fn link_for(machine: &Machine, stride: u64, size: u64) -> Link {
    let cluster = &machine.cluster;
    if in_one_domain(cluster, stride, size) {
        return machine.topology.intra();
    }
    let per_domain = fewest_per_domain(cluster, stride, size);
    let mut link = machine.topology.inter();
    link.bytes_per_second =
        (link.bytes_per_second * per_domain as f64).min(machine.topology.intra().bytes_per_second);
    link
}

/// Seconds hidden of `comm` behind `window` seconds of compute, at most `overlap` of it.
pub fn hidden(comm: f64, overlap: f64, window: f64) -> f64 {
    (overlap * comm).min(window.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::cost::step::experts::Placement;

    /// 512 GPUs on hosts of 4 in scale-up domains of `domain` (used) GPUs: B200 figures on
    /// NVL72's hosts.
    fn nvl(gpus: u64, domain: u64) -> Brief {
        Brief {
            gpus,
            gpus_per_node: 4,
            scale_up_gpus: Some(72),
            scale_up_used: (domain != 72).then_some(domain),
            ..Brief::default()
        }
    }

    #[test]
    fn groups_ride_nvlink_where_their_runs_divide_the_domain() {
        // 512 GPUs in domains of 72: seven full, 8 GPUs in the eighth (ranks 504 to 511).
        let c = nvl(512, 72).cluster();
        assert_eq!(c.scale_up, 72);
        // TP 8: runs of 8 divide 72, so every TP group is in one rack.
        assert!(in_one_domain(&c, 1, 8));
        // TP 8 × CP 2 × EP 4, runs of 64: ranks 64 to 127 are 8 in the first rack (64 to 71)
        // and 56 in the second; CP 2 over TP 8 (runs of 16: ranks 64 to 79) straddles too.
        assert!(!in_one_domain(&c, 1, 64));
        assert!(!in_one_domain(&c, 8, 2));
        // Using 64 of each 72 (eight domains of 64), every run of 64, 32 or 16 is in one.
        let c = nvl(512, 64).cluster();
        assert!(in_one_domain(&c, 1, 64) && in_one_domain(&c, 8, 2) && in_one_domain(&c, 8, 4));
        assert!(!in_one_domain(&c, 64, 8));
        // A job inside one domain never leaves it.
        assert!(in_one_domain(&nvl(64, 72).cluster(), 1, 64));
        // On nodes of 8 that are their own domain: runs of 8 stay; CP 3 over 24 GPUs (ranks 6
        // to 8) straddles two nodes.
        let b = Brief {
            gpus: 24,
            ..Brief::default()
        };
        assert!(in_one_domain(&b.cluster(), 1, 8) && !in_one_domain(&b.cluster(), 1, 3));
    }

    #[test]
    fn the_fewest_ranks_of_a_group_in_a_domain_worked_by_hand() {
        // Runs of 64 on 512 GPUs in domains of 72 start 0, 64, 56, 48, 40, 32, 24 and 16
        // ranks into a rack: 64; 8 + 56; 16 + 48; 24 + 40; 32 + 32; 40 + 24; 48 + 16; 56 + 8.
        let c = nvl(512, 72).cluster();
        assert_eq!(fewest_per_domain(&c, 1, 64), 8);
        // EP 4 at ETP 8 (runs of 32 in blocks of 8, nine blocks a rack): the run at rank 64
        // has one block in the first rack and three in the second.
        assert_eq!(fewest_per_domain(&c, 8, 4), 1);
        // DP 32 sixteen ranks apart (runs of 512, one): 16 does not divide 72; the group at
        // rank 15 has ranks 15, 31, …, 63 (4) in the first rack, then 4 or 5 in each of the
        // next six and one (rank 511) in the eighth's 8 GPUs.
        assert_eq!(fewest_per_domain(&c, 16, 32), 1);
        // Four ranks 32 apart (runs of 128): the one at rank 0 has ranks 0, 32 and 64 in the
        // first rack and 96 in the second.
        assert_eq!(fewest_per_domain(&c, 32, 4), 1);
        // Two ranks 16 apart, runs of 32: the run at 64 holds ranks 64 to 95, and the group
        // at 64 has 64 in the first rack and 80 in the second.
        assert_eq!(fewest_per_domain(&c, 16, 2), 1);
        // CP 3 on 24 GPUs on nodes of 8: runs 0–2, 3–5, 6–8 (2 + 1): 1.
        let b = Brief {
            gpus: 24,
            ..Brief::default()
        };
        assert_eq!(fewest_per_domain(&b.cluster(), 1, 3), 1);
        // Six ranks 3 apart on 72 GPUs in nodes of 8... on 36 GPUs in domains of 8 (runs of
        // 18): the group at 0 is 0, 3, 6 | 9, 12, 15; the one at 1 is 1, 4, 7 | 10, 13 | 16:
        // 1 in the third node.
        let b = Brief {
            gpus: 36,
            ..Brief::default()
        };
        assert_eq!(fewest_per_domain(&b.cluster(), 3, 6), 1);
        // Whole domains of 64: DP 8 at stride 64 has one rank in each.
        assert_eq!(fewest_per_domain(&nvl(512, 64).cluster(), 64, 8), 1);
    }

    /// Every group of `size` ranks `stride` apart on `gpus` GPUs in domains of `domain`,
    /// walked rank by rank: whether each lies in one domain, and the fewest of one in a domain
    /// it is on.
    fn walked(gpus: u64, domain: u64, stride: u64, size: u64) -> (bool, u64) {
        let span = stride * size;
        let (mut inside, mut fewest) = (true, size);
        for start in (0..gpus).step_by(span as usize) {
            for a in 0..stride {
                let mut counts = std::collections::BTreeMap::new();
                for i in 0..size {
                    *counts
                        .entry((start + a + i * stride) / domain)
                        .or_insert(0u64) += 1;
                }
                if counts.len() > 1 {
                    inside = false;
                    fewest = fewest.min(*counts.values().min().unwrap());
                }
            }
        }
        (inside, fewest)
    }

    #[test]
    fn the_rule_agrees_with_every_group_walked_rank_by_rank() {
        for domain in 1..=12u64 {
            for stride in 1..=14u64 {
                for size in 1..=7u64 {
                    for runs in 1..=6u64 {
                        let gpus = stride * size * runs;
                        let c = Cluster {
                            gpus,
                            gpus_per_node: 1,
                            scale_up: domain,
                        };
                        let (inside, fewest) = walked(gpus, domain, stride, size);
                        let case = format!(
                            "{gpus} GPUs, domains of {domain}, {size} ranks {stride} apart"
                        );
                        // A lone rank sits where it sits: the rule's only inexactness, kept
                        // as it was when the domain was the node.
                        if size > 1 {
                            assert_eq!(in_one_domain(&c, stride, size), inside, "{case}");
                        }
                        if inside {
                            continue;
                        }
                        let counted = fewest_per_domain(&c, stride, size);
                        if stride >= domain || domain % stride == 0 || stride * (size - 1) <= domain
                        {
                            assert_eq!(counted, fewest, "{case}");
                        } else {
                            assert!(counted <= fewest, "{case}: {counted} > {fewest}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_fewest_of_blocks_is_placement_s() {
        for p in 1..=12 {
            for n in 1..=40 {
                for runs in 1..=15 {
                    assert_eq!(
                        blocks_fewest(p, n, runs),
                        Placement::of(p, 1, n, runs).fewest,
                        "{p} {n} {runs}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_straddling_group_rides_the_nics_of_its_fewest_members_in_a_domain() {
        let b = nvl(512, 72);
        let m = b.machine();
        let (nvlink, nic) = (m.topology.intra(), m.topology.inter());
        assert_eq!(link_for(&m, 1, 8), nvlink);
        // Runs of 64 straddle with 8 ranks on one side: 8 NICs of 46 GB/s, 368 GB/s, under
        // the 370 of NVLink.
        let l = link_for(&m, 1, 64);
        assert_eq!(l.latency, nic.latency);
        assert!((l.bytes_per_second - 8.0 * 46e9).abs() < 1.0);
        assert_eq!(link_for(&nvl(512, 64).machine(), 1, 64), nvlink);
        // On the default's nodes of 8 nothing changes: 16 ranks ride 8 NICs a node.
        let d = Brief::default().machine();
        assert_eq!(link_for(&d, 1, 8), d.topology.intra());
        assert!((link_for(&d, 1, 16).bytes_per_second - 368e9).abs() < 1.0);
    }
}
