//! A mixture-of-experts layer on the expert grid: where its tokens go, and what that costs.
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

use crate::cost::topology::{Link, Topology};
use crate::error::{Error, Result};
use crate::model::layout::Layout;
use crate::model::Shape;

/// What an MoE layer recomputes beyond the step's recomputation, as Megatron-core's
/// `--recompute-modules` names it (`transformer_config.py`, `recompute_modules`): its routed
/// part's activation function (`moe_act`: SwiGLU's output, the down projection's input, is
/// recomputed from the up projection's output), or the whole MoE layer (`moe`: only the layer's
/// input is kept; the router, the dispatch, the experts and the combine run again in the
/// backward).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MoeRecompute {
    /// Nothing beyond the step's recomputation.
    #[default]
    None,
    /// SwiGLU's output of every route (`moe_act`).
    Act,
    /// The whole MoE layer (`moe`).
    Layer,
}

impl MoeRecompute {
    /// Whether this is [`MoeRecompute::None`] (for serde's `skip_serializing_if`).
    pub fn is_none(&self) -> bool {
        *self == MoeRecompute::None
    }
}

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

/// The expected number of nodes among `nodes` (each holding `E/nodes` of the `E` experts) that a
/// token's `k` distinct experts, drawn uniformly, fall on: `nodes · (1 − C(E − E/nodes, k) /
/// C(E, k))`, the chance that a given node holds none of them being the hypergeometric
/// `Π_{i<k} (E − E/nodes − i)/(E − i)`. Balanced routing is what the published runs force.
pub fn nodes_reached(experts: f64, per_token: f64, nodes: f64) -> f64 {
    if nodes <= 1.0 {
        return 1.0;
    }
    nodes * reach(experts, per_token, experts / nodes)
}

/// The chance that a token's `k` distinct experts of `E`, drawn uniformly, include one of the
/// `held` a node holds: `1 − Π_{i<k} (E − held − i)/(E − i)` (hypergeometric).
fn reach(experts: f64, per_token: f64, held: f64) -> f64 {
    let elsewhere = experts - held;
    let k = per_token.round() as u64;
    let none = (0..k)
        .map(|i| ((elsewhere - i as f64) / (experts - i as f64)).max(0.0))
        .product::<f64>();
    1.0 - none
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
        })
    }

    /// Routes each of the rank's experts runs, `R / (E/EP)`.
    pub fn per_expert(&self) -> f64 {
        self.routes / self.local_experts
    }
}

/// MoE layers among layers `start .. start + n` of `shape` (0 for a dense shape).
pub fn moe_layers_in(shape: &Shape, start: u64, n: u64) -> u64 {
    let Some(e) = &shape.experts else {
        return 0;
    };
    let clamp = |x: u64| u32::try_from(x.min(u64::from(shape.layers))).unwrap_or(shape.layers);
    let (lo, hi) = (clamp(start), clamp(start.saturating_add(n)));
    u64::from(e.layers.count(hi) - e.layers.count(lo))
}

/// MoE layers on the stage of `stages` (layers per stage) at `index`, counted as the most that
/// any stage of its run holds — the run of equal stages [`crate::cost::step::StageKinds`] lets
/// the first stand for — so the run's representative never holds or runs less than a stage of
/// it. Exact where every stage of the run holds the same number (every layer MoE, or MoE from
/// a layer on); for an interleaved rule (Llama 4's every second layer) at most one layer more
/// than a stage of the run holds.
pub fn moe_layers_of_run(shape: &Shape, stages: &[u64], index: u64) -> u64 {
    if shape.experts.is_none() {
        return 0;
    }
    let i = index as usize;
    let last = stages.len() - 1;
    let start: u64 = stages[..i].iter().sum();
    let layers = stages[i];
    let mut most = moe_layers_in(shape, start, layers);
    // A middle stage's run: the following middle stages of the same layers.
    if i != 0 && i != last {
        let mut at = start + layers;
        for &n in stages[i + 1..last].iter().take_while(|&&n| n == layers) {
            most = most.max(moe_layers_in(shape, at, n));
            at += n;
        }
    }
    most
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

/// Seconds of an all-to-all in which each rank of a group placed as `placement` sends `bytes`
/// spread evenly over the group (`bytes/n` to each, its own share staying): the share for ranks
/// in its node over NVLink and the rest over its own NIC at the network's per-GPU figure, at once
/// (NCCL posts every send and receive together), after one latency of the slower link it uses.
/// The step waits for the slowest rank: NVLink's busiest is in a node with the `most` of its
/// group, the NIC's busiest in one with the `fewest`.
pub fn all_to_all(topology: &Topology, placement: &Placement, bytes: f64) -> f64 {
    let n = placement.n;
    if n <= 1 {
        return 0.0;
    }
    let share = bytes / n as f64;
    let near = (placement.most - 1) as f64 * share;
    let far = (n - placement.fewest) as f64 * share;
    exchange(topology, !placement.in_one_node(), near, far)
}

/// Seconds to move `near` bytes over NVLink and `far` over the NIC at once, after one latency
/// of the slower link used (`across`: the group spans nodes).
fn exchange(topology: &Topology, across: bool, near: f64, far: f64) -> f64 {
    let (intra, inter): (Link, Link) = (topology.intra(), topology.inter());
    let latency = if across { inter.latency } else { intra.latency };
    latency + (near / intra.bytes_per_second).max(far / inter.bytes_per_second)
}

/// The placement of `layout`'s EP groups on nodes of `gpus_per_node` ([`Placement`]).
pub fn placement(gpus_per_node: u64, layout: &Layout) -> Placement {
    let (n, stride) = (layout.ep, layout.etp);
    let groups = layout.gpus() / (n * stride).max(1);
    Placement::of(gpus_per_node, stride, n, groups)
}

/// Whether `dispatcher` runs `layout`'s EP groups where they lie: DeepEP sends between nodes
/// a whole node's ranks at a time (its `Buffer` takes `rdma_rank = rank / 8` and asserts
/// fewer than 8 ranks or a multiple of 8, `deepep/csrc/deep_ep.cpp`), so each EP group must lie
/// inside one node or on whole nodes; EP 12 on nodes of 8 (8 + 4) is refused. The `alltoall`
/// dispatcher runs any placement.
pub fn dispatcher_allowed(
    gpus_per_node: u64,
    layout: &Layout,
    dispatcher: Dispatcher,
) -> Result<()> {
    let p = placement(gpus_per_node, layout);
    if dispatcher == Dispatcher::DeepEp && !p.in_one_node() && !p.even() {
        return Err(Error::invalid(
            "--ep-dispatcher",
            "deepep",
            format!(
                "alltoall where EP {} splits its groups unevenly over nodes of {gpus_per_node} \
                 GPUs ({} and {} ranks of a group in a node; DeepEP needs each group inside one \
                 node or on whole nodes)",
                layout.ep, p.most, p.fewest
            ),
        ));
    }
    Ok(())
}

/// Seconds of one dispatch (or combine) of `r`'s routes over the EP group of `layout`, each
/// route `bytes_per_route` (its token's `2h` BF16 bytes), by `dispatcher`: the `alltoall`
/// dispatcher is [`all_to_all`] of the routes; DeepEP sends each of the rank's tokens once to
/// each other node its experts are on ([`nodes_reached`]) and forwards within the node over
/// NVLink, so the network carries tokens times remote nodes instead of routes off the node;
/// DeepEP runs only groups inside a node or on whole nodes ([`dispatcher_allowed`]).
pub fn dispatch(
    topology: &Topology,
    gpus_per_node: u64,
    layout: &Layout,
    r: &Routed,
    bytes_per_route: f64,
    dispatcher: Dispatcher,
) -> f64 {
    let n = layout.ep;
    let placement = placement(gpus_per_node, layout);
    let bytes = bytes_per_route * r.sent;
    if dispatcher == Dispatcher::AllToAll || placement.in_one_node() {
        return all_to_all(topology, &placement, bytes);
    }
    let tokens = r.sent / r.per_token;
    // Each node holds a token's experts with the same chance, `reached/nodes`; the other nodes'
    // share is remote.
    let nodes = n as f64 / placement.most as f64;
    let reached = nodes_reached(r.experts, r.per_token, nodes);
    let remote = reached * (nodes - 1.0) / nodes;
    let far = tokens * remote * bytes_per_route;
    // Every route off the rank crosses NVLink once, sent within the node or forwarded there.
    let near = bytes * (n - 1) as f64 / n as f64;
    exchange(topology, true, near, far)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::model::layout::{Degrees, ZeroStage};
    use crate::model::{Experts, LayerSet};

    fn mixtral() -> Shape {
        let mut s = Shape::new("mixtral", 32, 4096, 14336, 32, 8, 32000).unwrap();
        s.experts = Some(Experts::plain(8, 2, 14336));
        s
    }

    fn layout(shape: &Shape, tp: u64, ep: u64, etp: Option<u64>) -> Layout {
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

    #[test]
    fn a_stage_counts_the_moe_layers_of_its_run() {
        let mut s = mixtral();
        // DeepSeek's rule: dense first three, MoE after. 32 layers on 4 stages of 8.
        s.experts.as_mut().unwrap().layers = LayerSet::Every { first: 3, step: 1 };
        let stages = [8, 8, 8, 8];
        assert_eq!(moe_layers_of_run(&s, &stages, 0), 5);
        assert_eq!(moe_layers_of_run(&s, &stages, 1), 8);
        assert_eq!(moe_layers_of_run(&s, &stages, 3), 8);
        // Llama 4's rule, every second layer from the second, on stages of 3: the first
        // middle stage (layers 3..6) holds 2 (3 and 5), the next (6..9) 1; its run counts 2.
        s.experts.as_mut().unwrap().layers = LayerSet::Every { first: 1, step: 2 };
        let stages = [3, 3, 3, 3, 20];
        assert_eq!(moe_layers_in(&s, 6, 3), 1);
        assert_eq!(moe_layers_of_run(&s, &stages, 1), 2);
        assert_eq!(moe_layers_of_run(&s, &stages, 0), 1);
        assert_eq!(moe_layers_of_run(&s, &stages, 4), 10);
        // A dense shape has none.
        let dense = crate::model::preset("8b").unwrap();
        assert_eq!(moe_layers_of_run(&dense, &[16, 16], 1), 0);
    }

    #[test]
    fn an_all_to_all_inside_a_node_runs_on_nvlink_and_across_on_the_nics() {
        let t = Topology::default();
        let gb = 1e9;
        // 8 ranks in one node: 7/8 of the bytes over NVLink.
        let inside = all_to_all(&t, &Placement::of(8, 1, 8, 4), 8.0 * gb);
        let nvlink = t.intra();
        assert!((inside - (nvlink.latency + 7.0 * gb / nvlink.bytes_per_second)).abs() < 1e-12);
        // 32 ranks over 4 nodes: 7/32 stay in the node, 24/32 leave over the NIC, which is
        // slower, so it sets the time.
        let across = all_to_all(&t, &Placement::of(8, 1, 32, 1), 32.0 * gb);
        let nic = t.inter();
        assert!((across - (nic.latency + 24.0 * gb / nic.bytes_per_second)).abs() < 1e-12);
        // Ranks 2 apart: 4 of the group in a node.
        let strided = all_to_all(&t, &Placement::of(8, 2, 8, 2), 8.0 * gb);
        assert!((strided - (nic.latency + 4.0 * gb / nic.bytes_per_second)).abs() < 1e-12);
        assert_eq!(all_to_all(&t, &Placement::of(8, 1, 1, 8), gb), 0.0);
    }

    #[test]
    fn a_group_that_straddles_nodes_unevenly_waits_for_its_rank_with_fewest_node_mates() {
        // EP 12 on nodes of 8, ranks numbered EP fastest: the first group is ranks 0–11 (8 in
        // node 0, 4 in node 1), the second 12–23 (4 in node 1, 8 in node 2).
        let p = Placement::of(8, 1, 12, 2);
        assert_eq!((p.most, p.fewest), (8, 4));
        assert!(!p.in_one_node() && !p.even());
        // A rank of the 4 sends 8 of its 12 shares over the NIC, not the 4 a full node's rank
        // sends; NVLink's busiest rank (of the 8) sends 7.
        let (t, gb) = (Topology::default(), 1e9);
        let (nic, nvlink) = (t.inter(), t.intra());
        let got = all_to_all(&t, &p, 12.0 * gb);
        let want =
            nic.latency + (8.0 * gb / nic.bytes_per_second).max(7.0 * gb / nvlink.bytes_per_second);
        assert!((got - want).abs() < 1e-12, "{got} {want}");
        // EP 6: one group fits in node 0; with two or more the second is ranks 6–11, 2 + 4,
        // and the third 12–17, 4 + 2; the offsets repeat every 8/gcd(6, 8) = 4 groups.
        assert!(Placement::of(8, 1, 6, 1).in_one_node());
        let six = Placement::of(8, 1, 6, 1_000);
        assert_eq!((six.most, six.fewest), (6, 2));
        // ETP 2 leaves 4 EP ranks a node: EP 6 is 4 + 2, then 2 + 4.
        let strided = Placement::of(8, 2, 6, 2);
        assert_eq!((strided.per_node, strided.most, strided.fewest), (4, 4, 2));
        // Groups that divide, or are multiples of, the node are even.
        for (n, groups) in [(2, 64), (4, 32), (8, 16), (16, 8), (64, 2)] {
            let even = Placement::of(8, 1, n, groups);
            assert!(even.even(), "{n}");
            assert_eq!(even.most, n.min(8));
        }
    }

    #[test]
    fn a_token_s_experts_reach_nodes_as_the_hypergeometric_gives() {
        // 8 of 128 experts over 4 nodes of 32: a node holds none with probability
        // Π_{i<8} (96 − i)/(128 − i) = 0.0927473 (worked in Python), so 4·(1 − 0.0927473) =
        // 3.6290109.
        let n = nodes_reached(128.0, 8.0, 4.0);
        assert!((n - 3.629_010_9).abs() < 1e-6, "{n}");
        // One node, or top-1: one node.
        assert_eq!(nodes_reached(128.0, 8.0, 1.0), 1.0);
        assert!((nodes_reached(8.0, 1.0, 4.0) - 1.0).abs() < 1e-12);
        // Every expert taken reaches every node.
        assert!((nodes_reached(8.0, 8.0, 2.0) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn deepep_sends_a_token_once_to_each_remote_node() {
        // Qwen3-235B's routing (128 experts, top-8) over EP 32 on 4 nodes of 8, TP 1, 4,096
        // tokens: alltoall sends 24/32 of the 32,768 routes across; DeepEP 4,096 tokens times
        // 3.629·3/4 remote nodes, 2.2× fewer bytes on the NIC.
        let mut s = mixtral();
        if let Some(e) = s.experts.as_mut() {
            e.routed = 128;
            e.per_token = 8;
            e.ffn = 1536;
        }
        let brief = Brief {
            gpus: 256,
            ..Brief::default()
        };
        let degrees = Degrees {
            ep: 32,
            etp: Some(1),
            ..Degrees::tp_pp(1, 1)
        };
        let l = Layout::with(&brief, &s, degrees, ZeroStage::new(1).unwrap()).unwrap();
        let r = Routed::of(&s, &l, 4096.0, BALANCED).unwrap();
        let t = Topology::default();
        let nic = t.inter();
        let route = 2.0 * 4096.0;
        let a2a = dispatch(&t, 8, &l, &r, route, Dispatcher::AllToAll);
        let want = nic.latency + 24.0 / 32.0 * 32_768.0 * route / nic.bytes_per_second;
        assert!((a2a - want).abs() < 1e-12, "{a2a} {want}");
        let deepep = dispatch(&t, 8, &l, &r, route, Dispatcher::DeepEp);
        let remote = nodes_reached(128.0, 8.0, 4.0) * 3.0 / 4.0;
        let want = nic.latency + 4096.0 * remote * route / nic.bytes_per_second;
        assert!((deepep - want).abs() < 1e-12, "{deepep} {want}");
        // EP 12 over 24 GPUs, nodes of 8 (groups 8 + 4 and 4 + 8): DeepEP moves a node's 8
        // ranks together and refuses it; alltoall runs it.
        let mut wide = s.clone();
        if let Some(e) = wide.experts.as_mut() {
            e.routed = 96;
        }
        let twelve = Degrees {
            ep: 12,
            etp: Some(1),
            ..Degrees::tp_pp(1, 1)
        };
        let small = Brief {
            gpus: 24,
            ..brief.clone()
        };
        let l = Layout::with(&small, &wide, twelve, ZeroStage::new(1).unwrap()).unwrap();
        let refused = dispatcher_allowed(8, &l, Dispatcher::DeepEp).unwrap_err();
        assert!(refused.to_string().contains("8 and 4 ranks"), "{refused}");
        assert!(dispatcher_allowed(8, &l, Dispatcher::AllToAll).is_ok());
        // Whole nodes (EP 32 on 4 nodes) and one node (EP 8) are DeepEP's.
        let whole = Layout::with(&brief, &s, degrees, ZeroStage::new(1).unwrap()).unwrap();
        assert!(dispatcher_allowed(8, &whole, Dispatcher::DeepEp).is_ok());
        // Inside one node the two are the same.
        let degrees = Degrees {
            ep: 8,
            etp: Some(1),
            ..Degrees::tp_pp(1, 1)
        };
        let l = Layout::with(&brief, &s, degrees, ZeroStage::new(1).unwrap()).unwrap();
        let r = Routed::of(&s, &l, 4096.0, BALANCED).unwrap();
        assert_eq!(
            dispatch(&t, 8, &l, &r, route, Dispatcher::DeepEp),
            dispatch(&t, 8, &l, &r, route, Dispatcher::AllToAll)
        );
    }
}
