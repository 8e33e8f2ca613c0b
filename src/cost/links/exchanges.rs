//! The exchanges a step makes beyond the per-layer TP collectives: context parallelism's keys
//! and values, an MoE layer's TP collectives, all-to-alls and expert-TP gathers, and hybrid
//! sharding's all-reduce across replicas.

use crate::cost::chip::operations::StageCompute;
use crate::cost::chip::stack_chip;
use crate::cost::links::experts::dispatch;
use crate::cost::links::hidden;
use crate::cost::links::link_for;
use crate::cost::links::topology::all_reduce;
use crate::cost::links::topology::reduce_scatter;
use crate::cost::links::topology::send;
use crate::cost::links::topology::Link;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::experts::Routed;
use crate::cost::step::stack::CpComm;
use crate::cost::step::MoeRecompute;
use crate::cost::step::Recompute;
use crate::cost::Machine;
use crate::model::layout::Layout;
use crate::model::Shape;
/// Exposed seconds of one layer's context-parallel exchange per micro-batch on the CP group
/// (`CP` ranks `TP` apart), for `tokens` tokens of this rank and the layer's attention core
/// `(forward, backward)` seconds. A K and V chunk is `4·g·T/t` bytes (BF16).
///
/// - **Ring** (Megatron-core): forward runs `CP − 1` steps, each sending the chunk in hand to
///   the next rank while attention runs on it, `1/CP` of the core; only what a send lasts
///   beyond its block is exposed. Backward sends the chunk and its gradients (twice the bytes)
///   behind `1/CP` of the backward core. The sends are point to point: NVLink while the CP
///   group fits in a node with its TP ranks, else one NIC.
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
    let g = f64::from(shape.kv_heads) * shape.head_dim() as f64;
    let chunk = 4.0 * g * tokens / layout.tp as f64;
    let n = cp as f64;
    match comm {
        Some(CpComm::Ring) => {
            let link = if layout.tp.saturating_mul(cp) <= machine.cluster.gpus_per_node {
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
/// unless `--overlap-moe-expert-parallel-comm` is set (`ep_overlap`): then each micro-batch's
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
    let node = machine.cluster.gpus_per_node;
    let a2a = dispatch(topology, node, layout, r, 2.0 * h, d.options.ep_dispatcher);
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
    let exposed = if d.options.ep_overlap {
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
