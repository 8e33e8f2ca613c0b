//! The parallel layout: tensor parallel (TP), context parallel (CP), pipeline parallel (PP),
//! data parallel (DP), the ZeRO stage and hybrid sharding, with the rules of SPEC.md §3.
//!
//! - `TP × CP × PP × DP = GPUs`; DP is the rest, so TP·CP·PP must divide the GPU count.
//! - TP stays inside a node (it must divide the GPUs per node, so TP groups never straddle one)
//!   and divides both the attention heads and the KV heads (Megatron-LM's head split).
//! - CP splits each sequence over `CP` ranks (Megatron-core's context parallelism; Llama Team
//!   2024, §3.3.2): weights are whole on each, activations split; the sequence rule (the
//!   sequence divides into `2·CP` chunks) belongs to the step.
//! - `1 ≤ PP ≤ L`; stages may be uneven, and the one with ⌈L/PP⌉ layers is the one that must fit.
//! - ZeRO stage 0 to 3 (Rajbhandari et al., SC 2020), sharding over the DP × CP ranks that hold
//!   the same weights, as Megatron-core's distributed optimizer does
//!   (`get_data_parallel_group(with_context_parallel=True)`).
//! - **Hybrid sharding**: the DP group as `replicate × shard`; ZeRO shards over `DP/replicate × CP`
//!   ranks and the `replicate` copies all-reduce their gradient shards (PyTorch HSDP,
//!   torchtitan's `data_parallel_replicate_degree`, Megatron-core's
//!   `--num-distributed-optimizer-instances`). `replicate` divides DP; above 1 it needs ZeRO ≥ 1.
//!
//! - **Expert parallelism** (a mixture of experts only; Megatron-core's `parallel_state`): the
//!   MoE layers regroup the same `TP × CP × DP` ranks of a stage as `ETP × EP × EDP`: the routed
//!   experts spread over EP ranks (EP divides the routed experts), each expert's matrices split
//!   over ETP ranks (ETP, `--expert-tensor-parallel-size`, defaults to TP and, as TP, stays
//!   inside a node and divides the expert's width), and EDP = TP·CP·DP/(ETP·EP) copies of each,
//!   over which ZeRO shards the experts' state (the expert data-parallel group). So ETP·EP
//!   divides TP·CP·DP, and with hybrid sharding `replicate` divides EDP too.
//!
//! **Rank order** (which groups stay inside a node): Megatron-core's default `tp-cp-ep-dp-pp`,
//! fastest-varying first. A TP group is `TP` neighbouring ranks; a CP group `CP` ranks `TP`
//! apart; the DP (and ZeRO shard) group ranks `TP·CP` apart, the shard group the fastest part of
//! it; a pipeline's stages `TP·CP·DP` apart. The expert grid runs `etp-ep-edp` the same way
//! (Megatron-core's `tp-ep-dp-pp` with ETP for TP): an EP group is `EP` ranks `ETP` apart.

use std::fmt;

use itertools::iproduct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::model::Shape;

/// A ZeRO stage, 0 (none) to 3. Stage k shards over the data-parallel group: from stage 1 the
/// optimizer state, from stage 2 the gradients too, at stage 3 the weights too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ZeroStage(u8);

impl ZeroStage {
    /// The four stages, in order.
    pub const ALL: [ZeroStage; 4] = [ZeroStage(0), ZeroStage(1), ZeroStage(2), ZeroStage(3)];

    /// Stage `stage`, if it is 0 to 3.
    pub fn new(stage: u8) -> Result<Self> {
        if stage <= 3 {
            Ok(ZeroStage(stage))
        } else {
            Err(Error::invalid("zero", stage, "a ZeRO stage: 0, 1, 2 or 3"))
        }
    }

    /// The stage as a number.
    pub fn get(self) -> u8 {
        self.0
    }

    /// Whether this stage shards the optimizer state (stage ≥ 1).
    pub fn shards_optimizer(self) -> bool {
        self.0 >= 1
    }

    /// Whether this stage shards the gradients (stage ≥ 2).
    pub fn shards_gradients(self) -> bool {
        self.0 >= 2
    }

    /// Whether this stage shards the weights (stage 3).
    pub fn shards_weights(self) -> bool {
        self.0 >= 3
    }
}

impl fmt::Display for ZeroStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<'de> Deserialize<'de> for ZeroStage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let stage = u8::deserialize(d)?;
        ZeroStage::new(stage).map_err(serde::de::Error::custom)
    }
}

impl Serialize for ZeroStage {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

/// One way to spread the model over the cluster. Build it with [`Layout::new`],
/// [`Layout::with`] or [`layouts`], which check the rules for the brief and shape; the fields
/// are public to read. Plan files written before CP and hybrid sharding read as CP 1 and one
/// shard group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "LayoutFields", into = "LayoutFields")]
pub struct Layout {
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Context-parallel degree: ranks each sequence is split over.
    #[serde(default = "one")]
    pub cp: u64,
    /// Pipeline-parallel degree (stages).
    pub pp: u64,
    /// Data-parallel degree: GPUs / (TP·CP·PP).
    pub dp: u64,
    /// ZeRO stage.
    pub zero: ZeroStage,
    /// Hybrid sharding: copies of the ZeRO-sharded state, each sharded over `DP/replicate × CP`
    /// ranks (1: one shard group, the whole DP × CP).
    pub replicate: u64,
    /// Expert-parallel degree: ranks the routed experts of each MoE layer are spread over (1
    /// for a dense model).
    pub ep: u64,
    /// Expert tensor-parallel degree: ranks each expert's matrices are split over (TP unless
    /// set, as in Megatron-core).
    pub etp: u64,
}

/// A [`Layout`] as a plan file holds it: CP, replicas and EP 1 when left out, ETP the TP;
/// written without the fields at their defaults, so a dense plan reads as it did before
/// experts.
#[derive(Serialize, Deserialize)]
#[serde(rename = "Layout", expecting = "struct Layout")]
struct LayoutFields {
    tp: u64,
    #[serde(default = "one")]
    cp: u64,
    pp: u64,
    dp: u64,
    zero: ZeroStage,
    #[serde(default = "one")]
    replicate: u64,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    ep: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etp: Option<u64>,
}

impl From<LayoutFields> for Layout {
    fn from(f: LayoutFields) -> Layout {
        Layout {
            tp: f.tp,
            cp: f.cp,
            pp: f.pp,
            dp: f.dp,
            zero: f.zero,
            replicate: f.replicate,
            ep: f.ep,
            etp: f.etp.unwrap_or(f.tp),
        }
    }
}

impl From<Layout> for LayoutFields {
    fn from(l: Layout) -> LayoutFields {
        LayoutFields {
            tp: l.tp,
            cp: l.cp,
            pp: l.pp,
            dp: l.dp,
            zero: l.zero,
            replicate: l.replicate,
            ep: l.ep,
            // Written with experts, or where it is not the TP.
            etp: (l.ep > 1 || l.etp != l.tp).then_some(l.etp),
        }
    }
}

/// The parallel degrees a layout is asked for, beside TP and PP: context parallelism and the
/// hybrid-sharding replicas (both 1 by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Degrees {
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Context-parallel degree.
    pub cp: u64,
    /// Pipeline-parallel degree.
    pub pp: u64,
    /// Hybrid-sharding replicas.
    pub replicate: u64,
    /// Expert-parallel degree (1 for a dense model).
    pub ep: u64,
    /// Expert tensor-parallel degree; `None` for the TP (Megatron-core's default).
    pub etp: Option<u64>,
}

impl Degrees {
    /// TP and PP alone (CP 1, one shard group, no expert parallelism).
    pub fn tp_pp(tp: u64, pp: u64) -> Self {
        Degrees {
            tp,
            cp: 1,
            pp,
            replicate: 1,
            ep: 1,
            etp: None,
        }
    }
}

/// The cluster as a layout sees it: how many GPUs, how many share a node (a host), and how
/// many of a scale-up (NVLink) domain the ranks fill (and so the fast links tensor parallelism
/// needs). A brief gives one (`Brief::cluster`, or `&brief` itself).
///
/// Ranks fill hosts and domains in order: ranks `j·S` to `(j+1)·S − 1` sit in domain `j`, for
/// `S` = [`Cluster::scale_up`]; a GPU count that is not a multiple of `S` leaves the last
/// domain part full (512 GPUs in domains of 72: seven full, 8 GPUs in the eighth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cluster {
    /// GPUs in the cluster.
    pub gpus: u64,
    /// GPUs per node (a host).
    pub gpus_per_node: u64,
    /// GPUs of each scale-up domain the ranks fill (a multiple of the node's): the node's own
    /// on an 8-GPU board; on an NVL72 rack 72, or the 64 of them a job uses. Tensor and expert
    /// tensor parallelism stay inside one.
    pub scale_up: u64,
}

impl Cluster {
    /// The rule that `name = degree` breaks by not dividing the GPUs of a scale-up domain
    /// ([`Cluster::scale_up`]): a group (`what`) that divides the domain never straddles two
    /// (it divides the GPUs too); in words of the node where the node is the domain.
    fn inside(&self, name: &str, degree: u64, what: &str) -> String {
        if self.scale_up == self.gpus_per_node {
            format!(
                "{name} = {degree} must divide the {} GPUs per node ({what} stays inside a node)",
                self.scale_up
            )
        } else {
            format!(
                "{name} = {degree} must divide the {} GPUs of a scale-up domain used ({what} stays inside one NVLink domain)",
                self.scale_up
            )
        }
    }
}

/// A layout rule that a (TP, PP) pair breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Broken {
    /// TP does not divide the GPUs of a scale-up domain (the node's, unless larger).
    TpNode,
    /// TP does not divide the heads and the KV heads.
    TpHeads,
    /// TP does not divide a hybrid model's Mamba-2 heads and groups (Megatron-core's
    /// `MambaMixer` splits both over TP).
    TpMamba,
    /// PP is not between 1 and the layers.
    PpLayers,
    /// CP is zero.
    Cp,
    /// TP·CP·PP does not divide the GPUs.
    Gpus,
}

/// The first rule (TP, CP, PP) breaks for `shape` on `cluster`, if any. Allocation-free, so
/// the enumeration can call it for every triple.
fn broken_rule(cluster: &Cluster, shape: &Shape, tp: u64, cp: u64, pp: u64) -> Option<Broken> {
    let node = cluster.scale_up;
    if tp == 0 || tp > node || node % tp != 0 {
        Some(Broken::TpNode)
    } else if u64::from(shape.heads) % tp != 0 || u64::from(shape.kv_heads) % tp != 0 {
        Some(Broken::TpHeads)
    } else if shape
        .hybrid
        .as_ref()
        .is_some_and(|h| u64::from(h.mamba.heads) % tp != 0 || u64::from(h.mamba.groups) % tp != 0)
    {
        Some(Broken::TpMamba)
    } else if pp == 0 || pp > u64::from(shape.layers) {
        Some(Broken::PpLayers)
    } else if cp == 0 {
        Some(Broken::Cp)
    } else if tp
        .checked_mul(cp)
        .and_then(|x| x.checked_mul(pp))
        .is_none_or(|x| cluster.gpus % x != 0)
    {
        Some(Broken::Gpus)
    } else {
        None
    }
}

/// Whether `replicate` copies of the sharded state go with `dp` and `zero`: they divide DP, and
/// above 1 there is a ZeRO-sharded state to copy.
fn replicas_fit(dp: u64, replicate: u64, zero: ZeroStage) -> bool {
    replicate >= 1 && dp % replicate == 0 && (replicate == 1 || zero.shards_optimizer())
}

impl Layout {
    /// GPUs the layout holds: `TP × CP × PP × DP`, the brief's GPUs.
    pub fn gpus(&self) -> u64 {
        self.tp * self.cp * self.pp * self.dp
    }

    /// The layout (TP, PP, ZeRO) for `shape` on `cluster` (a brief, or its
    /// [`Cluster`]), with DP derived, or the rule it breaks.
    pub fn new(
        cluster: impl Into<Cluster>,
        shape: &Shape,
        tp: u64,
        pp: u64,
        zero: ZeroStage,
    ) -> Result<Self> {
        Layout::with(cluster, shape, Degrees::tp_pp(tp, pp), zero)
    }

    /// The layout of `degrees` and `zero` for `shape` on `cluster`, with DP derived, or the
    /// rule it breaks.
    pub fn with(
        cluster: impl Into<Cluster>,
        shape: &Shape,
        degrees: Degrees,
        zero: ZeroStage,
    ) -> Result<Self> {
        let cluster = cluster.into();
        let Degrees {
            tp,
            cp,
            pp,
            replicate,
            ep,
            etp,
        } = degrees;
        let etp = etp.unwrap_or(tp);
        let message = match broken_rule(&cluster, shape, tp, cp, pp) {
            None => {
                let dp = cluster.gpus / (tp * cp * pp);
                if replicate == 0 || dp % replicate != 0 {
                    return Err(Error::Layout(format!(
                        "replicate = {replicate} must divide DP = {dp} (the data-parallel group as replicate × shard)"
                    )));
                }
                if replicate > 1 && !zero.shards_optimizer() {
                    return Err(Error::Layout(format!(
                        "replicate = {replicate} needs ZeRO 1 to 3: at ZeRO 0 every data-parallel rank holds the whole state already"
                    )));
                }
                experts_fit(&cluster, shape, tp, tp * cp * dp, replicate, ep, etp)?;
                return Ok(Layout {
                    tp,
                    cp,
                    pp,
                    dp,
                    zero,
                    replicate,
                    ep,
                    etp,
                });
            }
            Some(Broken::TpNode) => cluster.inside("tp", tp, "TP"),
            Some(Broken::TpHeads) => format!(
                "tp = {tp} does not divide the {} attention heads and {} KV heads of {}",
                shape.heads, shape.kv_heads, shape.name
            ),
            Some(Broken::TpMamba) => {
                let m = shape.hybrid.as_ref().map(|h| h.mamba);
                format!(
                    "tp = {tp} does not divide the {} Mamba-2 heads and {} groups of {} (Megatron-core splits both over TP)",
                    m.map_or(0, |m| m.heads),
                    m.map_or(0, |m| m.groups),
                    shape.name
                )
            }
            Some(Broken::PpLayers) => format!(
                "pp = {pp} must be between 1 and the {} layers of {}",
                shape.layers, shape.name
            ),
            Some(Broken::Cp) => "cp = 0 must be at least 1".to_string(),
            Some(Broken::Gpus) if cp == 1 => format!(
                "tp × pp = {tp} × {pp} = {} does not divide the {} GPUs",
                tp * pp,
                cluster.gpus
            ),
            Some(Broken::Gpus) => format!(
                "tp × cp × pp = {tp} × {cp} × {pp} = {} does not divide the {} GPUs",
                u128::from(tp) * u128::from(cp) * u128::from(pp),
                cluster.gpus
            ),
        };
        Err(Error::Layout(message))
    }

    /// The layout of this one's degrees and ZeRO stage on `cluster`, with DP derived, by the
    /// rules a layout keeps whatever its shape — TP and ETP inside a node, TP × CP × PP dividing
    /// the GPUs, the replicas dividing DP and each expert's copies, ETP × EP dividing a stage's
    /// ranks — or the rule it breaks. [`Layout::with`] keeps these and the shape's; this is for
    /// a layout read back without its shape (a shard's plan of a model from a config file).
    pub fn on_cluster(&self, cluster: impl Into<Cluster>) -> Result<Layout> {
        let cluster = cluster.into();
        let Layout {
            tp,
            cp,
            pp,
            zero,
            replicate,
            ep,
            etp,
            ..
        } = *self;
        let node = cluster.scale_up;
        let in_node = |d: u64| d != 0 && d <= node && node % d == 0;
        let stage = tp.checked_mul(cp).and_then(|x| x.checked_mul(pp));
        let message = if !in_node(tp) {
            cluster.inside("tp", tp, "TP")
        } else if pp == 0 || cp == 0 {
            format!("cp = {cp} and pp = {pp} must be at least 1")
        } else if stage.is_none_or(|x| cluster.gpus % x != 0) {
            format!(
                "tp × cp × pp = {tp} × {cp} × {pp} = {} does not divide the {} GPUs",
                u128::from(tp) * u128::from(cp) * u128::from(pp),
                cluster.gpus
            )
        } else {
            let dp = cluster.gpus / (tp * cp * pp);
            let ranks = tp * cp * dp;
            if !replicas_fit(dp, replicate, zero) {
                format!(
                    "replicate = {replicate} must divide DP = {dp}, and above 1 needs ZeRO 1 to 3"
                )
            } else if !in_node(etp) {
                cluster.inside("etp", etp, "expert TP")
            } else if ep == 0 || ep.checked_mul(etp).is_none_or(|x| ranks % x != 0) {
                format!(
                    "etp × ep = {etp} × {ep} must divide TP × CP × DP = {ranks} (the ranks of a pipeline stage)"
                )
            } else if (ranks / (ep * etp)) % replicate != 0 {
                format!(
                    "replicate = {replicate} must divide the {} copies of each expert (EDP = TP·CP·DP / (ETP·EP))",
                    ranks / (ep * etp)
                )
            } else {
                return Ok(Layout { dp, ..*self });
            }
        };
        Err(Error::Layout(message))
    }

    /// This layout's degrees.
    pub fn degrees(&self) -> Degrees {
        Degrees {
            tp: self.tp,
            cp: self.cp,
            pp: self.pp,
            replicate: self.replicate,
            ep: self.ep,
            etp: Some(self.etp),
        }
    }

    /// Copies of each expert, the expert data-parallel degree `EDP = TP·CP·DP / (ETP·EP)`
    /// (Megatron-core's `expert_data_parallel_size`); the DP × CP group for a dense model.
    pub fn expert_dp(&self) -> u64 {
        self.tp * self.cp * self.dp / (self.etp * self.ep).max(1)
    }

    /// Ranks the ZeRO-sharded state of the routed experts is divided over: `EDP/replicate`.
    pub fn expert_shard_group(&self) -> u64 {
        (self.expert_dp() / self.replicate.max(1)).max(1)
    }

    /// The layout in words: `TP 8 × CP 16 × PP 16 × DP 8, ZeRO 2` (CP only above 1), and with
    /// hybrid sharding the shard groups: `ZeRO 3 over 64 ranks × 2 replicas`.
    pub fn describe(&self) -> String {
        let cp = if self.cp > 1 {
            format!(" × CP {}", self.cp)
        } else {
            String::new()
        };
        let hybrid = if self.replicate > 1 {
            format!(
                " over {} ranks × {} replicas",
                crate::format::thousands(self.shard_group()),
                self.replicate
            )
        } else {
            String::new()
        };
        let experts = match (self.ep, self.etp) {
            (1, etp) if etp == self.tp => String::new(),
            (ep, etp) if etp == self.tp => format!(" × EP {ep}"),
            (ep, etp) => format!(" × EP {ep} (ETP {etp})"),
        };
        format!(
            "TP {}{cp} × PP {} × DP {}{experts}, ZeRO {}{hybrid}",
            self.tp,
            self.pp,
            crate::format::thousands(self.dp),
            self.zero
        )
    }

    /// Ranks the ZeRO-sharded state is divided over: `DP/replicate × CP` (the DP × CP group
    /// holds the same weights; Megatron-core shards its distributed optimizer over it).
    pub fn shard_group(&self) -> u64 {
        self.dp / self.replicate.max(1) * self.cp
    }

    /// Layers on the busiest pipeline stage, `⌈L / PP⌉`.
    pub fn layers_on_busiest_stage(&self, shape: &Shape) -> u64 {
        u64::from(shape.layers).div_ceil(self.pp)
    }
}

/// Every valid layout for `shape` on `cluster` (a brief, or its [`Cluster`]), ordered by TP,
/// then PP, then EP and ETP for a mixture of experts (by [`expert_degrees`]'s default rule),
/// then ZeRO.
pub fn layouts(cluster: impl Into<Cluster>, shape: &Shape) -> Vec<Layout> {
    layouts_with(cluster, shape, &[1], &[1], &ExpertSpace::default())
}

/// The expert-parallel degrees a search tries with each layout of a mixture of experts; empty
/// lists mean the default rule ([`expert_degrees`]). A dense shape takes EP 1 and its TP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpertSpace {
    /// EP degrees (empty: every divisor of the routed experts).
    pub eps: Vec<u64>,
    /// ETP degrees (empty: 1 and the layout's TP).
    pub etps: Vec<u64>,
}

impl ExpertSpace {
    /// Checks the lists against the shapes searched: each needs a mixture of experts among
    /// them, and each EP must divide every one's routed experts and each ETP every one's
    /// expert width (Megatron-core's rules), so that no listed degree is silently dropped.
    pub fn check(&self, shapes: &[Shape]) -> Result<()> {
        let moe: Vec<(&Shape, &crate::model::Experts)> = shapes
            .iter()
            .filter_map(|s| s.experts.as_ref().map(|e| (s, e)))
            .collect();
        for (flag, list) in [("--ep", &self.eps), ("--etp", &self.etps)] {
            if let (Some(&first), true) = (list.first(), moe.is_empty()) {
                return Err(Error::invalid(
                    flag,
                    first,
                    "a mixture of experts among the models (dense models take EP 1 and their TP)",
                ));
            }
        }
        for &ep in &self.eps {
            if let Some((s, e)) = moe.iter().find(|(_, e)| u64::from(e.routed) % ep != 0) {
                return Err(Error::invalid(
                    "--ep",
                    ep,
                    format!("a divisor of the {} routed experts of {}", e.routed, s.name),
                ));
            }
        }
        for &etp in &self.etps {
            if let Some((s, e)) = moe.iter().find(|(_, e)| e.ffn % etp != 0) {
                return Err(Error::invalid(
                    "--etp",
                    etp,
                    format!("a divisor of the experts' width {} of {}", e.ffn, s.name),
                ));
            }
        }
        Ok(())
    }
}

/// The (EP, ETP) pairs of `space` for a layout of TP `tp` of `shape`, in increasing order: a
/// dense shape's is `(1, TP)` alone; a mixture of experts's, each EP of the list or, by
/// default, every divisor of its routed experts (Megatron-core requires `E mod EP = 0`), with
/// each ETP of the list or, by default, 1 (NVIDIA's MoE recipes' choice: experts whole on a
/// rank) and the TP (Megatron-core's default). Pairs that break a rule of
/// [`Layout::with`] are left to the caller.
pub fn expert_degrees(space: &ExpertSpace, shape: &Shape, tp: u64) -> Vec<(u64, u64)> {
    let Some(experts) = &shape.experts else {
        return vec![(1, tp)];
    };
    let routed = u64::from(experts.routed);
    let eps: Vec<u64> = if space.eps.is_empty() {
        (1..=routed).filter(|d| routed % d == 0).collect()
    } else {
        space.eps.clone()
    };
    let mut etps = if space.etps.is_empty() {
        vec![1, tp]
    } else {
        space.etps.clone()
    };
    etps.sort_unstable();
    etps.dedup();
    iproduct!(eps, etps).collect()
}

/// Every valid layout for `shape` on `cluster` with each CP degree of `cps`, each replica
/// count of `replicates` and, for a mixture of experts, each (EP, ETP) of `experts` (those
/// that break a rule left out), ordered by TP, then PP, then CP, then EP and ETP, then ZeRO,
/// then replicas (the layouts that differ only in ZeRO and replicas one after another, as the
/// search's shared work needs). With `cps = replicates = [1]` these are [`layouts`].
pub fn layouts_with(
    cluster: impl Into<Cluster>,
    shape: &Shape,
    cps: &[u64],
    replicates: &[u64],
    experts: &ExpertSpace,
) -> Vec<Layout> {
    let cluster = cluster.into();
    // TP divides the KV heads (which divide the heads) and PP divides the GPUs, which bounds
    // the loops however large the node or the cluster.
    let max_tp = cluster.scale_up.min(u64::from(shape.kv_heads));
    let max_pp = u64::from(shape.layers).min(cluster.gpus);
    iproduct!(1..=max_tp, 1..=max_pp, cps.iter().copied())
        .filter(|&(tp, pp, cp)| broken_rule(&cluster, shape, tp, cp, pp).is_none())
        .flat_map(|(tp, pp, cp)| {
            let dp = cluster.gpus / (tp * cp * pp);
            // The expert degrees outside ZeRO and replicas: the layouts that differ only in
            // those come one after another, as the search's shared work needs (its stage
            // shares and unsharded times hold for one set of degrees, experts' included).
            iproduct!(
                expert_degrees(experts, shape, tp),
                ZeroStage::ALL,
                replicates.iter().copied()
            )
            .filter(move |&((ep, etp), zero, replicate)| {
                replicas_fit(dp, replicate, zero)
                    && experts_fit(&cluster, shape, tp, tp * cp * dp, replicate, ep, etp).is_ok()
            })
            .map(move |((ep, etp), zero, replicate)| Layout {
                tp,
                cp,
                pp,
                dp,
                zero,
                replicate,
                ep,
                etp,
            })
        })
        .collect()
}

fn experts_fit(
    cluster: &Cluster,
    shape: &Shape,
    tp: u64,
    ranks: u64,
    replicate: u64,
    ep: u64,
    etp: u64,
) -> Result<()> {
    let Some(experts) = &shape.experts else {
        if ep != 1 {
            return Err(Error::Layout(format!(
                "ep = {ep} needs a mixture of experts: {} is dense (EP 1)",
                shape.name
            )));
        }
        if etp != tp {
            return Err(Error::Layout(format!(
                "etp = {etp} needs a mixture of experts: {} is dense (its MLPs take the TP, {tp})",
                shape.name
            )));
        }
        return Ok(());
    };
    let node = cluster.scale_up;
    let message = if ep == 0 || u64::from(experts.routed) % ep != 0 {
        format!(
            "ep = {ep} must divide the {} routed experts of {}",
            experts.routed, shape.name
        )
    } else if etp == 0 || etp > node || node % etp != 0 {
        cluster.inside("etp", etp, "expert TP")
    } else if experts.ffn % etp != 0 {
        format!(
            "etp = {etp} must divide the experts' width {} of {}",
            experts.ffn, shape.name
        )
    } else if ranks % (ep * etp) != 0 {
        format!(
            "etp × ep = {etp} × {ep} = {} must divide TP × CP × DP = {ranks} (the ranks of a pipeline stage)",
            etp * ep
        )
    } else if (ranks / (ep * etp)) % replicate.max(1) != 0 {
        format!(
            "replicate = {replicate} must divide the {} copies of each expert (EDP = TP·CP·DP / (ETP·EP))",
            ranks / (ep * etp)
        )
    } else {
        return Ok(());
    };
    Err(Error::Layout(message))
}

/// A layout of Llama 3 70B on the default brief's cluster, for tests.
#[cfg(test)]
pub(crate) fn layout_70b(tp: u64, pp: u64, zero: u8) -> Layout {
    let shape = crate::model::preset("70b").expect("a preset");
    let zero = ZeroStage::new(zero).expect("a ZeRO stage");
    let brief = crate::brief::Brief::default();
    Layout::new(&brief, &shape, tp, pp, zero).expect("a valid layout")
}

/// Every ZeRO stage and hybrid-sharding replica count (1, 2, 4) of `shape` at TP `tp`, CP `cp`
/// and PP `pp` on the default brief's cluster, ZeRO 0 with one shard group first: for tests of
/// what the layouts of one set of degrees share.
#[cfg(test)]
pub(crate) fn every_sharding(shape: &Shape, tp: u64, cp: u64, pp: u64) -> Vec<Layout> {
    let brief = crate::brief::Brief::default();
    iproduct!(0..=3, [1, 2, 4])
        // Replicas of the sharded state need a ZeRO stage that shards it.
        .filter(|&(zero, replicate)| zero > 0 || replicate == 1)
        .map(|(zero, replicate)| {
            let degrees = Degrees {
                tp,
                cp,
                pp,
                replicate,
                ep: 1,
                etp: None,
            };
            let zero = ZeroStage::new(zero).expect("a ZeRO stage");
            Layout::with(&brief, shape, degrees, zero).expect("a valid layout")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::model::preset;
    use itertools::Itertools;

    #[test]
    fn dp_is_the_rest_of_the_gpus() {
        let l = Layout::new(
            &Brief::default(),
            &preset("70b").unwrap(),
            8,
            4,
            ZeroStage(1),
        );
        assert_eq!(l.unwrap().dp, 64);
    }

    #[test]
    fn the_default_cluster_offers_four_tp_degrees_and_power_of_two_pp() {
        let b = Brief::default();
        let s = preset("70b").unwrap();
        let all = layouts(&b, &s);
        let tps: Vec<u64> = all.iter().map(|l| l.tp).sorted().dedup().collect();
        let pps: Vec<u64> = all.iter().map(|l| l.pp).sorted().dedup().collect();
        // TP divides 8 and the 64 heads and 8 KV heads.
        assert_eq!(tps, [1, 2, 4, 8]);
        // PP ≤ 80 layers and TP·PP | 2048: powers of two up to 64, for every TP (8 × 64 = 512).
        assert_eq!(pps, [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(all.len(), 4 * 7 * 4);
    }

    #[test]
    fn each_rule_is_refused_with_the_value_that_broke_it() {
        let b = Brief::default();
        let s = preset("70b").unwrap();
        let z = ZeroStage(0);
        let err = |tp, pp| Layout::new(&b, &s, tp, pp, z).unwrap_err().to_string();
        assert!(err(3, 1).contains("tp = 3"));
        assert!(err(16, 1).contains("tp = 16"));
        assert!(err(0, 1).contains("tp = 0"));
        assert!(err(1, 81).contains("pp = 81"));
        assert!(err(1, 0).contains("pp = 0"));
        assert!(err(8, 3).contains("does not divide the 2048 GPUs"));
        let odd_heads = Shape::new("odd", 4, 96, 256, 6, 2, 10).unwrap();
        let e = Layout::new(&b, &odd_heads, 4, 1, z)
            .unwrap_err()
            .to_string();
        assert!(e.contains("6 attention heads"), "{e}");
    }

    #[test]
    fn tp_stays_inside_a_scale_up_domain_not_a_host() {
        // Megatron-Bridge's GB200 Llama 3 70B recipe runs TP 8 on hosts of 4 in one NVL72
        // rack; on hosts of 4 that are their own domain TP 8 is refused.
        let s = crate::model::preset("70b").unwrap();
        let hosts = Brief {
            gpus: 512,
            gpus_per_node: 4,
            ..Brief::default()
        };
        let e = Layout::new(&hosts, &s, 8, 8, ZeroStage::new(1).unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid layout: tp = 8 must divide the 4 GPUs per node (TP stays inside a node)"
        );
        let rack = Brief {
            scale_up_gpus: Some(72),
            ..hosts.clone()
        };
        let l = Layout::new(&rack, &s, 8, 8, ZeroStage::new(1).unwrap()).unwrap();
        assert_eq!(l.dp, 8);
        assert_eq!(layouts(&rack, &s).iter().map(|l| l.tp).max(), Some(8));
        // TP 16 does not divide 72 (its groups would straddle racks); it divides 64.
        let wide = Layout { tp: 16, ..l };
        let e = wide.on_cluster(&rack).unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid layout: tp = 16 must divide the 72 GPUs of a scale-up domain used (TP stays inside one NVLink domain)"
        );
        let used = Brief {
            scale_up_used: Some(64),
            ..rack
        };
        assert_eq!(wide.on_cluster(&used).unwrap().dp, 4);
    }

    #[test]
    fn the_enumeration_agrees_with_the_constructor() {
        let b = Brief {
            gpus: 96,
            gpus_per_node: 4,
            ..Brief::default()
        };
        for shape in crate::model::presets() {
            let listed = layouts(&b, &shape);
            let mut built = Vec::new();
            for tp in 0..=9 {
                for pp in 0..=130 {
                    for zero in ZeroStage::ALL {
                        built.extend(Layout::new(&b, &shape, tp, pp, zero));
                    }
                }
            }
            assert_eq!(listed, built);
        }
    }

    #[test]
    fn a_layout_read_back_without_its_shape_keeps_the_machine_s_rules() {
        let b = Brief::default();
        // Every layout the rules give for a shape keeps the shape-free rules as it is.
        for shape in crate::model::presets() {
            for l in layouts(&b, &shape) {
                assert_eq!(l.on_cluster(&b).unwrap(), l);
            }
        }
        let l = layout_70b(8, 4, 1);
        let tp3 = Layout { tp: 3, ..l };
        let e = tp3.on_cluster(&b).unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid layout: tp = 3 must divide the 8 GPUs per node (TP stays inside a node)"
        );
        // DP is derived: a DP that does not make up the GPUs reads back as the one that does.
        assert_eq!(Layout { dp: 7, ..l }.on_cluster(&b).unwrap(), l);
        for bad in [
            Layout { pp: 0, ..l },
            Layout { cp: 3, ..l },
            Layout { replicate: 3, ..l },
            Layout { etp: 16, ..l },
            Layout { ep: 1024, ..l },
        ] {
            assert!(bad.on_cluster(&b).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn zero_stages_above_three_are_refused() {
        assert!(ZeroStage::new(4).is_err());
        assert_eq!(ZeroStage::new(2).unwrap().get(), 2);
    }
}
