//! The exchanges a step makes beyond the per-layer TP collectives: context parallelism's keys
//! and values, an MoE layer's TP collectives, all-to-alls and expert-TP gathers, and hybrid
//! sharding's all-reduce across replicas.
//!
//! A mixture of experts' dispatch and combine ([`dispatch`]) is the all-to-all of the routes a
//! rank sends over its EP group (NVLink inside a node, the NICs across), Megatron-core's, or
//! DeepEP's, which sends a token once to each node its experts are on ([`nodes_reached`],
//! fewer under group-limited routing: [`nodes_reached_grouped`]).
//! Where the tokens go is [`crate::cost::step::experts`].

use crate::cost::chip::operations::StageCompute;
use crate::cost::chip::stack_chip;
use crate::cost::links::hidden;
use crate::cost::links::in_one_domain;
use crate::cost::links::link_for;
use crate::cost::links::topology::all_reduce;
use crate::cost::links::topology::reduce_scatter;
use crate::cost::links::topology::send;
use crate::cost::links::topology::Link;
use crate::cost::links::topology::Topology;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::experts::deepep_block;
use crate::cost::step::experts::placement;
use crate::cost::step::experts::Dispatcher;
use crate::cost::step::experts::Placement;
use crate::cost::step::experts::Routed;
use crate::cost::step::stack::CpComm;
use crate::cost::step::MoeRecompute;
use crate::cost::step::Recompute;
use crate::cost::Machine;
use crate::model::layout::{Cluster, Layout};
use crate::model::Shape;
/// Exposed seconds of one layer's context-parallel exchange per micro-batch on the CP group
/// (`CP` ranks `TP` apart), for `tokens` tokens of this rank and the layer's attention core
/// `(forward, backward)` seconds. A K and V chunk is `4·g·T/t` bytes (BF16).
///
/// - **Ring** (Megatron-core): forward runs `CP − 1` steps, each sending the chunk in hand to
///   the next rank while attention runs on it, `1/CP` of the core; only what a send lasts
///   beyond its block is exposed. Backward sends the chunk and its gradients (twice the bytes)
///   behind `1/CP` of the backward core. The sends are point to point: NVLink while every CP
///   group lies in one scale-up domain with its TP ranks ([`in_one_domain`]), else one NIC.
/// - **All-gather** (Llama 3): K and V all-gathered before attention and their gradients
///   reduce-scattered after, exposed, over the group's NICs.
///
/// A recomputed forward repeats its exchange: under full, selective and save-qkv
/// recomputation (all recompute attention), half of it under selective-layer.
pub fn cp_exchange(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    tokens: f64,
    recompute: Recompute,
    (attention_forward, attention_backward): (f64, f64),
    comm: Option<CpComm>,
) -> f64 {
    let cp = layout.cp;
    if cp <= 1 {
        return 0.0;
    }
    let forwards = match recompute {
        Recompute::None | Recompute::SelectiveOp => 1.0,
        Recompute::SelectiveLayer => 1.5,
        Recompute::Full | Recompute::Selective | Recompute::SaveQkv => 2.0,
    };
    // A rank's K and V in BF16, `2·(k + v)·T/t` bytes (`4·g·T/t` for grouped-query attention;
    // latent attention exchanges every head's own K and V, not the latent).
    let w = shape.attention_widths();
    let chunk = 2.0 * (w.key + w.value) * tokens / layout.tp as f64;
    let n = cp as f64;
    match comm {
        Some(CpComm::Ring) => {
            let link = if in_one_domain(&machine.cluster, layout.tp, cp) {
                machine.topology.intra()
            } else {
                machine.topology.inter()
            };
            let forward = (send(link, chunk) - attention_forward / n).max(0.0);
            let backward = (send(link, 2.0 * chunk) - attention_backward / n).max(0.0);
            (n - 1.0) * (forwards * forward + backward)
        }
        Some(CpComm::AllGather) => {
            let link = link_for(machine, layout.tp, cp);
            let one = reduce_scatter(link, cp, n * chunk);
            forwards * one + one
        }
        None => 0.0,
    }
}

/// Seconds for `replicas` hybrid-sharding replicas to all-reduce a shard (`bytes` over `shards`
/// ranks) over `link`; none with one replica.
pub fn across_replicas(link: Link, replicas: u64, shards: u64, bytes: f64) -> f64 {
    if replicas > 1 {
        all_reduce(link, replicas, bytes / shards as f64)
    } else {
        0.0
    }
}

/// SMs the experts' dispatch and combine kernels hold while they run beside compute: 20, the
/// budget Megatron-core gives DeepEP (`moe_deepep_num_sms`, `transformer_config.py`).
pub const COMM_SMS: f64 = 20.0;

/// One MoE layer's compute per micro-batch (`compute`: all, forward, GEMMs) with its exposed
/// TP collectives and its expert-parallel traffic ([`crate::cost::step::experts`]): the dense layer's TP
/// collectives `tp_layer` halved without shared experts (only attention's remain; the routed
/// experts' split is ETP's), with one more all-reduce's worth (`tp_one`) where `moe`
/// recomputation runs the shared experts' forward again, hidden as far as the stack overlaps
/// them (`overlap`); per
/// direction a dispatch and a combine all-to-all of the routes the rank sends (`2h` bytes
/// each, BF16) over the EP group (ranks `ETP` apart), and with ETP > 1 an all-gather and a
/// reduce-scatter of its routes over the ETP group (inside a node). Full recomputation repeats
/// the forward's two of each, selective-layer half of them. Megatron-core runs them exposed
/// unless `--overlap-moe-expert-parallel-comm` is set (`ep_overlap`), or DualPipe pairs the
/// chunks (DualPipeV on a stack that overlaps it, [`crate::cost::step::stack::VSchedules`]):
/// then each micro-batch's
/// all-to-alls run beside another's compute, hidden behind the MoE layer's compute as far as it
/// lasts (the ETP gathers stay exposed), and that compute, short of the SMs the
/// communication holds ([`COMM_SMS`] of the chip's), takes `1/(1 − COMM_SMS/SMs)` as long.
pub fn moe_layer_comm(
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    d: &Detailed,
    r: &Routed,
    (tp_layer, tp_one, overlap): (f64, f64, f64),
    compute: StageCompute,
) -> (StageCompute, f64, f64) {
    let shared = r.shared > 0.0;
    let tp_moe = if shared { tp_layer } else { tp_layer / 2.0 };
    // `moe` recomputes the shared experts (with none or selective recomputation, the only
    // steps the recompute modules go with), and with them their all-gather and reduce-scatter.
    let tp_moe = if shared && d.options.moe_recompute == MoeRecompute::Layer {
        tp_moe + tp_one
    } else {
        tp_moe
    };
    let tp_moe = tp_moe - hidden(tp_moe, overlap, compute.2);
    let h = shape.hidden as f64;
    let topology = &machine.topology;
    let a2a = dispatch(
        topology,
        &machine.cluster,
        layout,
        r,
        2.0 * h,
        d.options.ep_dispatcher,
    );
    let etp = if layout.etp > 1 {
        2.0 * reduce_scatter(
            link_for(machine, 1, layout.etp),
            layout.etp,
            2.0 * h * r.routes,
        )
    } else {
        0.0
    };
    // A recomputed MoE layer (`moe`) runs its forward's dispatch and combine again.
    let pairs = match (d.step.recompute, d.options.moe_recompute) {
        (Recompute::Full, _) | (_, MoeRecompute::Layer) => 3.0,
        (Recompute::SelectiveLayer, _) => 2.5,
        _ => 2.0,
    };
    let all_to_alls = pairs * 2.0 * a2a;
    // DualPipe pairs each forward chunk with a backward chunk and runs the one's all-to-alls
    // beside the other's compute (DeepSeek-V3 §3.2.1, Figure 4), as the overlap does.
    let paired = d.step.schedule == crate::cost::step::Schedule::DualPipeV
        && d.options.stack.settings().v_schedules.overlaps();
    let exposed = if d.options.ep_overlap || paired {
        // While they run beside compute, the dispatch and combine kernels hold
        // `COMM_SMS` of the chip's SMs, and the compute beside them runs on the rest.
        let share = stack_chip(machine, d.options.stack)
            .ok()
            .flatten()
            .map_or(0.0, |c| COMM_SMS / f64::from(c.sms));
        let beside = hidden(all_to_alls, 1.0, compute.0);
        all_to_alls - beside + beside * share / (1.0 - share)
    } else {
        all_to_alls
    };
    (compute, tp_moe, exposed + pairs * etp)
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

/// [`nodes_reached`] under group-limited routing (DeepSeek-V3 §2.1.2: "each token will be
/// sent to at most M nodes"; its `n_group`, `topk_group`): the `E` experts in `G` groups of
/// consecutive experts, a token's `M` groups drawn uniformly and its `k` experts uniformly from
/// their pool of `P = M·E/G`. With `nodes` a multiple of `G` (a group over `nodes/G` nodes) a
/// node is reached when its group is drawn and one of its `E/nodes` experts is:
/// `nodes · (M/G) · reach(P, k, E/nodes)`; with `G` a multiple of `nodes` (`g = G/nodes` groups
/// a node) the node holds `j` of the drawn groups with the hypergeometric chance
/// `C(g, j)·C(G − g, M − j)/C(G, M)`, and then `j·E/G` of the pool: `nodes · Σ_j C(g, j)·C(G −
/// g, M − j)/C(G, M) · reach(P, k, j·E/G)`. Groups and nodes that neither divide route as
/// without groups. DeepSeek-V3's 8 of 256 from 4 of 8 groups on 8 nodes: 3.6 nodes, against
/// 5.3 without the limit.
pub fn nodes_reached_grouped(
    experts: f64,
    per_token: f64,
    nodes: f64,
    (groups, drawn): (f64, f64),
) -> f64 {
    if nodes <= 1.0 {
        return 1.0;
    }
    let pool = drawn * experts / groups;
    let (n, g) = (nodes.round() as u64, groups.round() as u64);
    if n % g == 0 {
        return nodes * (drawn / groups) * reach(pool, per_token, experts / nodes);
    }
    if g % n != 0 {
        return nodes_reached(experts, per_token, nodes);
    }
    let (per_node, m) = (g / n, drawn.round() as u64);
    let chances: f64 = (0..=per_node.min(m))
        .map(|j| {
            let ways = choose(per_node, j) * choose(g - per_node, m - j) / choose(g, m);
            ways * reach(pool, per_token, j as f64 * experts / groups)
        })
        .sum();
    nodes * chances
}

/// `C(n, k)` as a float (0 where `k > n`).
fn choose(n: u64, k: u64) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product()
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

/// Seconds of one dispatch (or combine) of `r`'s routes over the EP group of `layout`, each
/// route `bytes_per_route` (its token's `2h` BF16 bytes), by `dispatcher`: the `alltoall`
/// dispatcher is [`all_to_all`] of the routes, NVLink among the group's members in one
/// scale-up domain (the node, or an NVL72 rack); DeepEP sends each of the rank's tokens once to
/// each other block of ranks its experts are on ([`nodes_reached`]; a block is the node, or
/// DeepEP's 8 ranks in a larger domain: [`deepep_block`]) and forwards within the block over
/// NVLink, so the network carries tokens times remote blocks outside the rank's domain instead
/// of routes off the domain (the remote blocks inside it are reached over NVLink); DeepEP runs
/// only groups inside a block or on whole blocks
/// ([`crate::cost::step::experts::dispatcher_allowed`]).
pub fn dispatch(
    topology: &Topology,
    cluster: &Cluster,
    layout: &Layout,
    r: &Routed,
    bytes_per_route: f64,
    dispatcher: Dispatcher,
) -> f64 {
    let n = layout.ep;
    let domains = placement(cluster.scale_up, layout);
    let bytes = bytes_per_route * r.sent;
    if dispatcher == Dispatcher::AllToAll || domains.in_one_node() {
        return all_to_all(topology, &domains, bytes);
    }
    let tokens = r.sent / r.per_token;
    // Each block holds a token's experts with the same chance, `reached/blocks`; the other
    // blocks' share is remote, and of the `blocks − 1` others, those in the rank's domain
    // (`per_domain − 1`, the domain's members over the block's, for the rank whose domain
    // holds the fewest of its group: the step waits for it) are reached over NVLink.
    let block = placement(deepep_block(cluster), layout);
    let blocks = n as f64 / block.most as f64;
    let reached = match r.groups {
        Some(groups) => nodes_reached_grouped(r.experts, r.per_token, blocks, groups),
        None => nodes_reached(r.experts, r.per_token, blocks),
    };
    let remote = reached * (blocks - 1.0) / blocks;
    let per_domain = (domains.fewest / block.most).max(1) as f64;
    // (One block a group, in a domain that splits DeepEP's blocks, which
    // `dispatcher_allowed` refuses: every remote token over the NIC.)
    let outside = if blocks > 1.0 {
        (blocks - per_domain).max(0.0) / (blocks - 1.0)
    } else {
        1.0
    };
    let far = tokens * remote * outside * bytes_per_route;
    // Every route off the rank crosses NVLink once, sent within the block or forwarded there;
    // the tokens for blocks in the rank's domain cross it once more.
    let near =
        bytes * (n - 1) as f64 / n as f64 + tokens * remote * (1.0 - outside) * bytes_per_route;
    exchange(topology, true, near, far)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::cost::links::topology::Topology;
    use crate::cost::step::experts::dispatcher_allowed;
    use crate::cost::step::experts::tests::mixtral;
    use crate::cost::step::experts::Dispatcher;
    use crate::cost::step::experts::Placement;
    use crate::cost::step::experts::BALANCED;
    use crate::model::layout::Degrees;
    use crate::model::layout::ZeroStage;

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
    fn ep_groups_ride_nvlink_inside_a_scale_up_domain_and_deepep_keeps_its_blocks_of_8() {
        // Hosts of 4 in NVL72 racks, 256 GPUs, EP 32 at ETP 1 over 128 experts (8 a token).
        let mut s = mixtral();
        if let Some(e) = s.experts.as_mut() {
            e.routed = 128;
            e.per_token = 8;
            e.ffn = 1536;
        }
        let rack = |used: Option<u64>| Brief {
            gpus: 256,
            gpus_per_node: 4,
            scale_up_gpus: Some(72),
            scale_up_used: used,
            ..Brief::default()
        };
        let degrees = Degrees {
            ep: 32,
            etp: Some(1),
            ..Degrees::tp_pp(1, 1)
        };
        let (b72, b64) = (rack(None), rack(Some(64)));
        let l = Layout::with(&b72, &s, degrees, ZeroStage::new(1).unwrap()).unwrap();
        let r = Routed::of(&s, &l, 4096.0, BALANCED).unwrap();
        let t = Topology::default();
        let (nvlink, nic) = (t.intra(), t.inter());
        let route = 2.0 * 4096.0;
        let bytes = route * r.sent;
        // Racks of 64 used: each group of 32 is in one rack, all over NVLink.
        let a2a = dispatch(&t, &b64.cluster(), &l, &r, route, Dispatcher::AllToAll);
        let want = nvlink.latency + 31.0 / 32.0 * bytes / nvlink.bytes_per_second;
        assert!((a2a - want).abs() < 1e-12, "{a2a} {want}");
        // Racks of 72: runs of 32 start 0, 32, 64, 24, 56, 16, 48 and 8 ranks into a rack;
        // the run at 64 is 8 + 24 and the one at 56 is 16 + 16, so the slowest rank sends
        // 24/32 of its routes over its NIC.
        let p = placement(72, &l);
        assert_eq!((p.most, p.fewest), (32, 8));
        let a2a = dispatch(&t, &b72.cluster(), &l, &r, route, Dispatcher::AllToAll);
        let want = nic.latency + 24.0 / 32.0 * bytes / nic.bytes_per_second;
        assert!((a2a - want).abs() < 1e-12, "{a2a} {want}");
        // DeepEP moves 8 ranks at a time (4 blocks a group); the slowest rank's rack holds
        // one of its blocks, so the 3 others it reaches are over the NIC.
        let deepep = dispatch(&t, &b72.cluster(), &l, &r, route, Dispatcher::DeepEp);
        let remote = nodes_reached(128.0, 8.0, 4.0) * 3.0 / 4.0;
        let want = nic.latency + 4096.0 * remote * route / nic.bytes_per_second;
        assert!((deepep - want).abs() < 1e-12, "{deepep} {want}");
        assert!(dispatcher_allowed(&b72.cluster(), &l, Dispatcher::DeepEp).is_ok());
        // EP 12 in a rack is still refused by DeepEP: its blocks of 8 split as 8 + 4.
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
            ..b72.clone()
        };
        let l = Layout::with(&small, &wide, twelve, ZeroStage::new(1).unwrap()).unwrap();
        // 68 of each 72 used: DeepEP's blocks of 8 would straddle racks.
        let sixty_eight = Brief {
            scale_up_used: Some(68),
            ..small.clone()
        };
        let e = dispatcher_allowed(&sixty_eight.cluster(), &l, Dispatcher::DeepEp).unwrap_err();
        assert!(
            e.to_string().contains(
                "the 68 GPUs used of a scale-up domain are not whole blocks of DeepEP's 8 ranks"
            ),
            "{e}"
        );
        let e = dispatcher_allowed(&small.cluster(), &l, Dispatcher::DeepEp).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid --ep-dispatcher = deepep: alltoall where EP 12 splits its groups unevenly over DeepEP's blocks of 8 ranks (its RDMA rank is rank / 8) (8 and 4 ranks of a group in a block; DeepEP needs each group inside one block or on whole blocks)"
        );
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

    /// Distinct nodes a token reaches, averaged over every choice of its `drawn` groups of
    /// `groups` and its `k` experts of their pool, counted one by one: `experts` consecutive
    /// experts, `nodes` nodes of consecutive experts.
    fn reached_by_counting(
        experts: usize,
        groups: usize,
        drawn: usize,
        k: usize,
        nodes: usize,
    ) -> f64 {
        use itertools::Itertools;
        let (per_group, per_node) = (experts / groups, experts / nodes);
        let (mut sum, mut ways) = (0.0, 0.0);
        for chosen in (0..groups).combinations(drawn) {
            let pool: Vec<usize> = chosen
                .iter()
                .flat_map(|g| g * per_group..(g + 1) * per_group)
                .collect();
            for picked in pool.iter().combinations(k) {
                let mut hit: Vec<usize> = picked.iter().map(|&&e| e / per_node).collect();
                hit.sort_unstable();
                hit.dedup();
                sum += hit.len() as f64;
                ways += 1.0;
            }
        }
        sum / ways
    }

    #[test]
    fn group_limited_routing_reaches_the_nodes_counting_gives() {
        // 16 experts in 4 groups, a token's 3 from 2 groups: over 8 nodes (a group on two)
        // and over 2 nodes (two groups a node), against counting every choice.
        for nodes in [2usize, 4, 8] {
            let formula = nodes_reached_grouped(16.0, 3.0, nodes as f64, (4.0, 2.0));
            let counted = reached_by_counting(16, 4, 2, 3, nodes);
            assert!(
                (formula - counted).abs() < 1e-12,
                "{nodes}: {formula} {counted}"
            );
        }
        // DeepSeek-V3 (256 experts, 8 groups, 8 experts from 4) on 8 nodes: at most 4, 3.63
        // (4·(1 − Π_{i<8}(96 − i)/(128 − i))), against 5.3 without the limit.
        let v3 = nodes_reached_grouped(256.0, 8.0, 8.0, (8.0, 4.0));
        assert!((v3 - 3.629_010_9).abs() < 1e-6, "{v3}");
        assert!(nodes_reached(256.0, 8.0, 8.0) > 5.2);
        // Three nodes neither divide nor are divided by 8 groups: routed as without them.
        assert_eq!(
            nodes_reached_grouped(240.0, 8.0, 3.0, (8.0, 4.0)),
            nodes_reached(240.0, 8.0, 3.0)
        );
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
        let nodes = brief.cluster();
        let nic = t.inter();
        let route = 2.0 * 4096.0;
        let a2a = dispatch(&t, &nodes, &l, &r, route, Dispatcher::AllToAll);
        let want = nic.latency + 24.0 / 32.0 * 32_768.0 * route / nic.bytes_per_second;
        assert!((a2a - want).abs() < 1e-12, "{a2a} {want}");
        let deepep = dispatch(&t, &nodes, &l, &r, route, Dispatcher::DeepEp);
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
        let refused = dispatcher_allowed(&nodes, &l, Dispatcher::DeepEp).unwrap_err();
        assert!(refused.to_string().contains("8 and 4 ranks"), "{refused}");
        assert!(dispatcher_allowed(&nodes, &l, Dispatcher::AllToAll).is_ok());
        // Whole nodes (EP 32 on 4 nodes) and one node (EP 8) are DeepEP's.
        let whole = Layout::with(&brief, &s, degrees, ZeroStage::new(1).unwrap()).unwrap();
        assert!(dispatcher_allowed(&nodes, &whole, Dispatcher::DeepEp).is_ok());
        // Inside one node the two are the same.
        let degrees = Degrees {
            ep: 8,
            etp: Some(1),
            ..Degrees::tp_pp(1, 1)
        };
        let l = Layout::with(&brief, &s, degrees, ZeroStage::new(1).unwrap()).unwrap();
        let r = Routed::of(&s, &l, 4096.0, BALANCED).unwrap();
        assert_eq!(
            dispatch(&t, &nodes, &l, &r, route, Dispatcher::DeepEp),
            dispatch(&t, &nodes, &l, &r, route, Dispatcher::AllToAll)
        );
    }
}
