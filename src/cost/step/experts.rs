//! A mixture-of-experts layer on the expert grid: where its tokens go (what that costs on the
//! links is [`crate::cost::links::exchanges`]).
//!
//! Megatron-core's MoE (`megatron/core/transformer/moe/`: `router.py`'s `TopKRouter`,
//! `token_dispatcher.py`'s `MoEAlltoAllTokenDispatcher`, `experts.py`'s `TEGroupedMLP`) on the
//! layout's expert grid ([`crate::model::layout`]: the stage's `TP·CP·DP` ranks as
//! `ETP × EP × EDP`). Per micro-batch, a rank holds `T = b·s/CP` tokens of its sequences, and with
//! sequence parallelism (which Megatron-core requires for MoE under TP) `T/TP` of them enter the
//! MoE layer on each rank:
//!
//! 1. the **router** (`h → E`, replicated over TP) scores them and picks `k` experts each;
//! 2. the **dispatch** all-to-all sends each of the `T·k/TP` routes to the EP rank holding its
//!    expert (EP ranks `ETP` apart); with ETP > 1 an all-gather over the ETP group follows, so
//!    each rank of it runs every route of the group on its `1/ETP` of each expert;
//! 3. the rank's `E/EP` experts run as one **grouped GEMM** over `R = T·k·ETP/TP` routes (the
//!    busiest rank's: times the load imbalance, below) — SwiGLU of width `f_e/ETP`;
//! 4. the **combine** (a reduce-scatter over ETP, then the all-to-all back) returns each route to
//!    its token, weighted by its router probability.
//!
//! Backward runs both all-to-alls again (the gradients' dispatch and combine), and full
//! recomputation runs the forward's again.
//!
//! **Load imbalance** is a stated factor `ι ≥ 1`, the busiest rank's routes over the mean: the
//! step waits for the busiest rank, in its grouped GEMM and in the all-to-all it receives. `ι =
//! 1` is perfectly balanced routing, what NVIDIA's published MoE benchmarks force
//! (`--moe-router-force-load-balancing`); a run with a capacity factor `c` (token dropping)
//! never exceeds `ι = c`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::layout::{Cluster, Layout};
use crate::model::Shape;

/// How the dispatch and combine cross nodes. Megatron-core's `alltoall` dispatcher sends every
/// route to its expert's rank directly, so a token with `k` experts on other nodes crosses the
/// network `k` times; DeepEP's internode kernels (`--moe-token-dispatcher-type flex
/// --moe-enable-deepep`; DeepSeek-AI 2025, `deepseek-ai/DeepEP`, "normal kernels") send a token
/// once to each node that holds any of its experts, over RDMA to the rank of the same local
/// index, which forwards it over NVLink to the experts' ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dispatcher {
    /// One message per route (Megatron-core's default).
    #[default]
    AllToAll,
    /// One message per token and destination node (DeepEP).
    DeepEp,
}

impl Dispatcher {
    /// Whether this is the default, [`Dispatcher::AllToAll`].
    pub fn is_default(&self) -> bool {
        *self == Dispatcher::AllToAll
    }
}

/// The load imbalance of perfectly balanced routing: every rank gets the mean.
pub const BALANCED: f64 = 1.0;

/// The largest load imbalance trainplan takes: 16 times the mean.
pub const MAX_IMBALANCE: f64 = 16.0;

/// How one MoE layer's routed experts fall on one GPU for one micro-batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Routed {
    /// Routes the busiest rank's grouped GEMM runs, `R = ι·T·k·ETP/TP`.
    pub routes: f64,
    /// Routes it sends in each all-to-all, `ι·T·k/TP` (before the ETP all-gather).
    pub sent: f64,
    /// Experts on the rank, `E/EP`.
    pub local_experts: f64,
    /// Each expert's SwiGLU width on the rank, `f_e/ETP`.
    pub width: f64,
    /// The shared experts' width together, `f_s` (split over TP like a dense MLP).
    pub shared: f64,
    /// Routed experts `E`.
    pub experts: f64,
    /// Experts a token goes to, `k`.
    pub per_token: f64,
    /// Group-limited routing, `(groups, groups a token)` ([`crate::model::Experts::groups`]).
    pub groups: Option<(f64, f64)>,
}

impl Routed {
    /// The routing of `shape`'s MoE layers under `layout` with `tokens = b·s/CP` tokens on the
    /// rank and load imbalance `imbalance`; `None` for a dense shape.
    pub fn of(shape: &Shape, layout: &Layout, tokens: f64, imbalance: f64) -> Option<Routed> {
        let e = shape.experts.as_ref()?;
        let (tp, etp, ep) = (layout.tp as f64, layout.etp as f64, layout.ep as f64);
        let k = f64::from(e.per_token);
        let sent = imbalance * tokens * k / tp;
        Some(Routed {
            routes: sent * etp,
            sent,
            local_experts: f64::from(e.routed) / ep,
            width: e.ffn as f64 / etp,
            shared: e.shared_ffn as f64,
            experts: f64::from(e.routed),
            per_token: k,
            groups: e
                .groups
                .map(|g| (f64::from(g.count), f64::from(g.per_token))),
        })
    }

    /// Routes each of the rank's experts runs, `R / (E/EP)`.
    pub fn per_expert(&self) -> f64 {
        self.routes / self.local_experts
    }
}

/// How the EP groups of a world fall on its nodes. Megatron-core numbers expert ranks ETP
/// fastest, then EP, expert DP and PP (`parallel_state.py`, the expert `RankGenerator`'s order
/// `tp-ep-dp-pp`), so with ETP = `stride` dividing the node's GPUs the world is `groups` runs of
/// `n` blocks of `stride` GPUs, and a node holds `p = gpus_per_node/stride` blocks; each run
/// holds `stride` EP groups, interleaved (a group's ranks `stride` apart, one in each block),
/// which fall on nodes alike. Run `j` starts `(j·n) mod p` blocks into a node; the offsets
/// repeat every `p/gcd(n, p)` runs, so at most `p` runs are looked at. A group whose size
/// neither divides nor is a multiple of `p` straddles nodes unevenly: EP 12 on nodes of 8 is
/// 8 + 4 and 4 + 8; EP 6 is 6, then 2 + 4 and 4 + 2. The step is charged for the worst group
/// of the world, PP stages included (an overestimate where a stage's groups all lie better).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Ranks of a group, `n`.
    pub n: u64,
    /// EP ranks a node holds, `p`.
    pub per_node: u64,
    /// The most members of one group in one node, over every group.
    pub most: u64,
    /// The fewest members of one group in one node (counting only nodes the group is on).
    pub fewest: u64,
}

impl Placement {
    /// The placement of `groups` runs of `n` blocks of `stride` GPUs on nodes of `gpus_per_node`.
    pub fn of(gpus_per_node: u64, stride: u64, n: u64, groups: u64) -> Placement {
        let p = (gpus_per_node / stride.max(1)).max(1);
        let n = n.max(1);
        let period = p / gcd(n, p);
        let mut placement = Placement {
            n,
            per_node: p,
            most: 0,
            fewest: u64::MAX,
        };
        for j in 0..groups.clamp(1, period) {
            for part in parts(n, p, (j * n) % p) {
                placement.most = placement.most.max(part);
                placement.fewest = placement.fewest.min(part);
            }
        }
        placement
    }

    /// Whether every group lies inside one node.
    pub fn in_one_node(&self) -> bool {
        self.fewest >= self.n
    }

    /// Whether every group's nodes each hold the same number of its members.
    pub fn even(&self) -> bool {
        self.fewest == self.most
    }
}

/// Members per node of a group of `n` starting `offset` into a node of `p`: the first node's
/// `min(p − offset, n)`, then whole nodes, then what is left.
fn parts(n: u64, p: u64, offset: u64) -> impl Iterator<Item = u64> {
    let first = (p - offset).min(n);
    let rest = n - first;
    std::iter::once(first)
        .chain(std::iter::repeat_n(p, (rest / p) as usize))
        .chain((rest % p > 0).then_some(rest % p))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The placement of `layout`'s EP groups on nodes (or scale-up domains) of `gpus_per_node`
/// ([`Placement`]).
pub fn placement(gpus_per_node: u64, layout: &Layout) -> Placement {
    let (n, stride) = (layout.ep, layout.etp);
    let groups = layout.gpus() / (n * stride).max(1);
    Placement::of(gpus_per_node, stride, n, groups)
}

/// DeepEP's NVLink peers: its `Buffer` numbers ranks `rdma_rank = rank / 8` and
/// `nvl_rank = rank % 8` (`NUM_MAX_NVL_PEERS = 8`, `deepep/csrc/kernels/configs.cuh`), and
/// sends between RDMA ranks over the network, within one over NVLink.
pub const DEEPEP_NVL_PEERS: u64 = 8;

/// The ranks DeepEP moves between as one ([`DEEPEP_NVL_PEERS`]): on a cluster whose node is
/// its own NVLink domain, the node (8 GPUs on every such board the presets know); in a domain
/// larger than the node (an NVL72 rack of hosts of 4), DeepEP's 8 ranks, two hosts of 4 over
/// NVLink. DeepEP does not officially support NVLink domains larger than 8 (Megatron-LM's
/// DeepSeek-V3 GB200 guide ran EP 32 on a community patch); HybridEP, which spans the rack,
/// is not modelled.
pub fn deepep_block(cluster: &Cluster) -> u64 {
    if cluster.scale_up > cluster.gpus_per_node {
        DEEPEP_NVL_PEERS.min(cluster.scale_up)
    } else {
        cluster.gpus_per_node
    }
}

/// Whether `dispatcher` runs `layout`'s EP groups where they lie: DeepEP sends between nodes
/// a whole node's ranks at a time (its `Buffer` takes `rdma_rank = rank / 8` and asserts
/// fewer than 8 ranks or a multiple of 8, `deepep/csrc/deep_ep.cpp`), so each EP group must lie
/// inside one node or on whole nodes; EP 12 on nodes of 8 (8 + 4) is refused. In a scale-up
/// domain larger than the node the same holds of DeepEP's blocks of 8 ranks
/// ([`deepep_block`]), and the GPUs used of a domain must be whole blocks (68 of a rack's 72
/// are not). The `alltoall` dispatcher runs any placement.
pub fn dispatcher_allowed(
    cluster: &Cluster,
    layout: &Layout,
    dispatcher: Dispatcher,
) -> Result<()> {
    if dispatcher != Dispatcher::DeepEp {
        return Ok(());
    }
    let block = deepep_block(cluster);
    if cluster.scale_up % block != 0 {
        return Err(Error::invalid(
            "--ep-dispatcher",
            "deepep",
            format!(
                "alltoall where the {} GPUs used of a scale-up domain are not whole blocks of DeepEP's {block} ranks (its RDMA rank is rank / {block}): a block would straddle two domains",
                cluster.scale_up
            ),
        ));
    }
    let p = placement(block, layout);
    if !p.in_one_node() && !p.even() {
        let (nodes, unit) = if block == cluster.gpus_per_node {
            (format!("nodes of {block} GPUs"), "node")
        } else {
            (
                format!("DeepEP's blocks of {block} ranks (its RDMA rank is rank / {block})"),
                "block",
            )
        };
        return Err(Error::invalid(
            "--ep-dispatcher",
            "deepep",
            format!(
                "alltoall where EP {} splits its groups unevenly over {nodes} ({} and {} ranks \
                 of a group in a {unit}; DeepEP needs each group inside one {unit} or on whole \
                 {unit}s)",
                layout.ep, p.most, p.fewest
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::model::layout::{Degrees, ZeroStage};
    use crate::model::Experts;

    /// Mixtral 8x7B's shape (the MoE tests of `cost` share it).
    pub(crate) fn mixtral() -> Shape {
        let mut s = Shape::new("mixtral", 32, 4096, 14336, 32, 8, 32000).unwrap();
        s.experts = Some(Experts::plain(8, 2, 14336));
        s
    }

    /// A layout of `shape` on 64 GPUs at TP `tp` × PP 1, ZeRO 1, with `ep` and `etp`.
    pub(crate) fn layout(shape: &Shape, tp: u64, ep: u64, etp: Option<u64>) -> Layout {
        let brief = Brief {
            gpus: 64,
            ..Brief::default()
        };
        let degrees = Degrees {
            ep,
            etp,
            ..Degrees::tp_pp(tp, 1)
        };
        Layout::with(&brief, shape, degrees, ZeroStage::new(1).unwrap()).unwrap()
    }

    #[test]
    fn routes_are_the_tokens_times_k_over_the_expert_grid() {
        let s = mixtral();
        // TP 2, ETP 2 (the default), EP 8: 4,096 tokens, 2,048 a rank after the sequence
        // split; each sends its 2,048 × 2 routes and, after the ETP gather, runs 8,192 on
        // half of each of its one expert.
        let r = Routed::of(&s, &layout(&s, 2, 8, None), 4096.0, BALANCED).unwrap();
        assert_eq!((r.sent, r.routes, r.local_experts), (4096.0, 8192.0, 1.0));
        assert_eq!(r.width, 7168.0);
        // ETP 1 under TP 2: every rank runs its own routes on whole experts.
        let r = Routed::of(&s, &layout(&s, 2, 4, Some(1)), 4096.0, 1.25).unwrap();
        assert_eq!((r.sent, r.routes, r.local_experts), (5120.0, 5120.0, 2.0));
        assert_eq!(r.per_expert(), 2560.0);
        // Work is conserved: routes × width summed over the 64 ranks is every token's k
        // experts at full width, whatever the grid.
        for (tp, ep, etp) in [(1, 8, None), (2, 8, None), (2, 4, Some(1)), (4, 2, Some(2))] {
            let l = layout(&s, tp, ep, etp);
            let r = Routed::of(&s, &l, 4096.0, BALANCED).unwrap();
            let ranks = (l.tp * l.dp) as f64;
            let work = r.routes * r.width * ranks;
            assert_eq!(work, l.dp as f64 * 4096.0 * 2.0 * 14336.0, "{l:?}");
        }
    }
}
