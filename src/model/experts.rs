//! Mixtures of experts and the other per-layer kinds of a decoder: which layers route their
//! tokens to experts ([`Experts`], [`LayerSet`]) and how attention is projected
//! ([`Attention`]: grouped-query or multi-head latent, with the vectors some families add).
//!
//! Sources, each family's modelling code in transformers 4.57 (`models/<family>/modeling_*.py`):
//! Mixtral (`MixtralSparseMoeBlock`: a router `h → E` without bias, E SwiGLU experts, every
//! layer), Qwen2-MoE (`Qwen2MoeSparseMoeBlock`: a shared expert and its sigmoid gate `h → 1`;
//! a layer is sparse when `(i + 1) % decoder_sparse_step == 0` and it is not in
//! `mlp_only_layers`), Qwen3-MoE (no shared expert; RMSNorm on each head's query and key),
//! DeepSeek-V3 (`DeepseekV3MoE`: shared experts of `n_shared_experts × moe_intermediate_size`,
//! the router's `e_score_correction_bias`; MoE from layer `first_k_dense_replace` on, every `moe_layer_freq`-th; multi-head latent
//! attention), gpt-oss (`GptOssMLP`: biases on the
//! experts and the router; a learned attention sink per head), Llama 4 (`Llama4TextMoe`: a
//! shared expert; MoE on the layers `interleave_moe_layer_step − 1, 2·step − 1, …`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::Shape;

/// A set of layers by index (0 is the first): every `step`-th from `first` on, or a list.
/// DeepSeek-V3's MoE layers are `{first: 3, step: 1}`; Llama 4 Maverick's (every second,
/// from the second) `{first: 1, step: 2}`; gpt-oss's sliding-window layers `{first: 0, step: 2}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LayerSet {
    /// Layers `first, first + step, first + 2·step, …` below the model's layer count.
    Every {
        /// The first layer in the set.
        first: u32,
        /// The distance between two layers of the set (1: every layer from `first` on).
        step: u32,
    },
    /// These layers, in increasing order.
    List(Vec<u32>),
}

impl LayerSet {
    /// Every layer.
    pub const ALL: LayerSet = LayerSet::Every { first: 0, step: 1 };

    /// The set of `layers` given as a list, written as a rule when one gives the same layers
    /// (so equal sets compare equal however a config wrote them).
    pub fn from_list(mut list: Vec<u32>, layers: u32) -> LayerSet {
        list.sort_unstable();
        list.dedup();
        if let [first, second, ..] = list[..] {
            let rule = LayerSet::Every {
                first,
                step: second - first,
            };
            if rule.indices(layers).eq(list.iter().copied()) {
                return rule;
            }
        } else if let [first] = list[..] {
            if first + 1 == layers {
                return LayerSet::Every { first, step: 1 };
            }
        }
        LayerSet::List(list)
    }

    /// The layers of the set below `layers`, in increasing order.
    pub fn indices(&self, layers: u32) -> impl Iterator<Item = u32> + '_ {
        let (rule, list) = match self {
            LayerSet::Every { first, step } => (
                Some((*first..layers).step_by((*step).max(1) as usize)),
                None,
            ),
            LayerSet::List(list) => (
                None,
                Some(list.iter().copied().filter(move |&i| i < layers)),
            ),
        };
        rule.into_iter().flatten().chain(list.into_iter().flatten())
    }

    /// How many of the first `layers` layers are in the set.
    pub fn count(&self, layers: u32) -> u32 {
        match self {
            LayerSet::Every { first, step } if *first < layers => {
                (layers - 1 - first) / (*step).max(1) + 1
            }
            LayerSet::Every { .. } => 0,
            LayerSet::List(list) => list.iter().filter(|&&i| i < layers).count() as u32,
        }
    }

    /// Whether layer `i` is in the set.
    pub fn contains(&self, i: u32) -> bool {
        match self {
            LayerSet::Every { first, step } => i >= *first && (i - first) % (*step).max(1) == 0,
            LayerSet::List(list) => list.binary_search(&i).is_ok(),
        }
    }

    /// Checks the set against a model of `layers` layers; the error names `field`.
    pub fn validate(&self, field: &str, layers: u32) -> Result<()> {
        match self {
            LayerSet::Every { step: 0, .. } => Err(Error::invalid(
                format!("{field}.step"),
                0,
                "a whole number ≥ 1",
            )),
            LayerSet::Every { .. } => Ok(()),
            LayerSet::List(list) => {
                if let Some(w) = list.windows(2).find(|w| w[0] >= w[1]) {
                    return Err(Error::invalid(
                        field,
                        format!("{} after {}", w[1], w[0]),
                        "layer numbers in increasing order, each once",
                    ));
                }
                match list.last() {
                    Some(&last) if last >= layers => Err(Error::invalid(
                        field,
                        last,
                        format!("layer numbers below the {layers} layers"),
                    )),
                    _ => Ok(()),
                }
            }
        }
    }
}

/// The mixture of experts of a shape's MoE layers: a router sends each token to `per_token`
/// of `routed` SwiGLU experts of width `ffn` (and every token through the shared experts), and
/// the outputs are summed by the router's weights. The other layers are dense, of the shape's
/// FFN width.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experts {
    /// Routed experts E (Mixtral 8, DeepSeek-V3 256).
    pub routed: u32,
    /// Experts each token is routed to, k (Mixtral 2, DeepSeek-V3 8).
    pub per_token: u32,
    /// One routed expert's SwiGLU width f_e (`moe_intermediate_size`; Mixtral's
    /// `intermediate_size`).
    pub ffn: u64,
    /// The shared experts' SwiGLU width together, which every token goes through (DeepSeek-V3:
    /// `n_shared_experts × moe_intermediate_size` = 2,048; Qwen2-MoE:
    /// `shared_expert_intermediate_size`; Llama 4: `intermediate_size`); 0 for none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_ffn: u64,
    /// Qwen2-MoE's sigmoid gate on the shared experts' output, a `h → 1` projection.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_gate: bool,
    /// Biases on each routed expert's projections (gpt-oss): `2·f_e + h` an expert.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub biases: bool,
    /// A bias on the router (gpt-oss): E.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub router_bias: bool,
    /// DeepSeek-V3's routing-score correction (its auxiliary-loss-free balancing, DeepSeek-AI
    /// 2024 §2.1.2): E a layer, stored in the checkpoint beside the router and counted in its
    /// published 671,026,419,200 (set by the balancing rule, not by the optimizer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub score_bias: bool,
    /// Group-limited routing (DeepSeek-V3's node-limited routing, §2.1.2; DeepSeek-V2's
    /// device-limited, §2.1.3; HF `n_group`, `topk_group`; Megatron-core's
    /// `--moe-router-num-groups`, `--moe-router-group-topk`): the routed experts in `count`
    /// groups, a token's experts drawn from `per_token` of them; `None` routes over all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Groups>,
    /// The layers whose MLP is this mixture.
    pub layers: LayerSet,
}

/// Group-limited routing ([`Experts::groups`]): DeepSeek-V3's 256 experts in 8 groups, a
/// token's 8 from the best 4, so that with the groups on 8 nodes a token reaches at most 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Groups {
    /// Groups of consecutive experts, `n_group`.
    pub count: u32,
    /// Groups a token's experts come from, `topk_group`.
    pub per_token: u32,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Experts {
    /// `routed` experts of width `ffn`, `per_token` a token, on every layer, with no shared
    /// expert, gate or bias: Mixtral's kind, and a family's ([`crate::model::family`]).
    pub fn plain(routed: u32, per_token: u32, ffn: u64) -> Experts {
        Experts {
            routed,
            per_token,
            ffn,
            shared_ffn: 0,
            shared_gate: false,
            biases: false,
            router_bias: false,
            score_bias: false,
            groups: None,
            layers: LayerSet::ALL,
        }
    }

    /// Checks every field; errors name `<model>.experts.<field>`.
    pub fn validate(&self, name: &str, layers: u32) -> Result<()> {
        let field = |f: &str| format!("{name}.experts.{f}");
        for (f, v) in [
            ("routed", u64::from(self.routed)),
            ("per_token", u64::from(self.per_token)),
            ("ffn", self.ffn),
        ] {
            if v == 0 {
                return Err(Error::invalid(field(f), v, "a whole number ≥ 1"));
            }
        }
        if self.per_token > self.routed {
            return Err(Error::invalid(
                field("per_token"),
                self.per_token,
                format!("at most the {} routed experts", self.routed),
            ));
        }
        if self.shared_gate && self.shared_ffn == 0 {
            return Err(Error::invalid(
                field("shared_gate"),
                true,
                "a gate only with shared experts (shared_ffn ≥ 1)",
            ));
        }
        if let Some(g) = self.groups {
            let groups_ok = g.count >= 2 && self.routed % g.count == 0;
            if !groups_ok {
                return Err(Error::invalid(
                    field("groups.count"),
                    g.count,
                    format!(
                        "2 or more groups that divide the {} routed experts",
                        self.routed
                    ),
                ));
            }
            let pool = u64::from(g.per_token) * u64::from(self.routed / g.count);
            if g.per_token == 0 || g.per_token >= g.count || pool < u64::from(self.per_token) {
                return Err(Error::invalid(
                    field("groups.per_token"),
                    g.per_token,
                    format!(
                        "1 to {} groups (fewer than all), holding at least the {} experts a token goes to",
                        g.count - 1,
                        self.per_token
                    ),
                ));
            }
        }
        self.layers.validate(&field("layers"), layers)?;
        if self.moe_layers(layers) == 0 {
            return Err(Error::invalid(
                field("layers"),
                "none",
                format!("at least one of the {layers} layers"),
            ));
        }
        Ok(())
    }

    /// The layers of a model of `layers` layers that are MoE.
    pub fn moe_layers(&self, layers: u32) -> u32 {
        self.layers.count(layers)
    }

    /// Parameters of one routed expert, `m·h·f_e`, plus `(m − 1)·f_e + h` with biases, for
    /// experts of `m` matrices: SwiGLU's 3 (gate, up, down; `2·f_e + h` of biases), or 2 for
    /// an up and a down projection (Nemotron-H's squared ReLU, [`crate::model::hybrid`]).
    pub(crate) fn expert_params_with(
        &self,
        hidden: u64,
        m: u64,
        mul: &impl Fn(u64, u64) -> Option<u64>,
        add: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<u64> {
        let matrices = mul(mul(hidden, self.ffn)?, m)?;
        if self.biases {
            add(matrices, add(mul(self.ffn, m - 1)?, hidden)?)
        } else {
            Some(matrices)
        }
    }

    /// Parameters every token of an MoE layer goes through besides its routed experts: the
    /// router (`E·h`, plus E for a bias and E for a score correction), the shared experts
    /// (`m·h·f_s`, `m` as [`Experts::expert_params_with`]'s) and their gate (`h`).
    pub(crate) fn common_params_with(
        &self,
        hidden: u64,
        m: u64,
        mul: &impl Fn(u64, u64) -> Option<u64>,
        add: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<u64> {
        let e = u64::from(self.routed);
        let vectors = u64::from(self.router_bias) + u64::from(self.score_bias);
        let router = add(mul(e, hidden)?, mul(e, vectors)?)?;
        add(router, self.shared_params_with(hidden, m, mul, add)?)
    }

    /// The shared experts' matrices `m·h·f_s` and their gate's `h`: every token's, counted
    /// alike in the layer's parameters and in a token's active ones.
    fn shared_params_with(
        &self,
        hidden: u64,
        m: u64,
        mul: &impl Fn(u64, u64) -> Option<u64>,
        add: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<u64> {
        let gate = if self.shared_gate { hidden } else { 0 };
        add(mul(mul(hidden, self.shared_ffn)?, m)?, gate)
    }

    /// The matrices one token multiplies in an MoE layer's MLP part: the router's `E·h`, the
    /// shared experts' `m·h·f_s` and their gate's `h`, and `k` routed experts' `m·h·f_e` each.
    pub(crate) fn active_matrix_params_with(
        &self,
        hidden: u64,
        m: u64,
        mul: &impl Fn(u64, u64) -> Option<u64>,
        add: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<u64> {
        let router = mul(u64::from(self.routed), hidden)?;
        let routed = mul(mul(mul(hidden, self.ffn)?, m)?, u64::from(self.per_token))?;
        add(
            add(router, self.shared_params_with(hidden, m, mul, add)?)?,
            routed,
        )
    }
}

/// Multi-head latent attention (DeepSeek-V2 §2.1, DeepSeek-V3): queries through a rank
/// `q_rank` bottleneck (or projected directly when `None`), keys and values from one
/// compressed latent of rank `kv_rank` plus a shared RoPE key of `rope_dim`.
/// Per layer (transformers' `DeepseekV3Attention`): `q_a_proj` `h·r_q`, `q_a_layernorm` `r_q`,
/// `q_b_proj` `r_q·a·(d_nope + d_rope)` (or `q_proj` `h·a·(d_nope + d_rope)`);
/// `kv_a_proj_with_mqa` `h·(r_kv + d_rope)`, `kv_a_layernorm` `r_kv`, `kv_b_proj`
/// `r_kv·a·(d_nope + d_v)`; `o_proj` `a·d_v·h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latent {
    /// The query's low rank r_q (`q_lora_rank`; DeepSeek-V3 1,536), `None` for a full query
    /// projection (DeepSeek-V2-Lite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_rank: Option<u64>,
    /// The key-value latent's rank r_kv (`kv_lora_rank`; 512).
    pub kv_rank: u64,
    /// Each head's query and key width without RoPE (`qk_nope_head_dim`; 128).
    pub nope_dim: u64,
    /// The RoPE part of each query and the shared key (`qk_rope_head_dim`; 64).
    pub rope_dim: u64,
    /// Each head's value width (`v_head_dim`; 128).
    pub v_dim: u64,
}

/// How a shape's attention is projected, beyond grouped-query attention's heads and widths:
/// multi-head latent attention in their place, and the vectors some families add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attention {
    /// Multi-head latent attention instead of grouped-query projections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latent: Option<Latent>,
    /// An RMSNorm on each head's query and key (Qwen3): `2·d` a layer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub qk_norm: bool,
    /// A learned attention sink per head (gpt-oss): `a` a layer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sinks: bool,
}

impl Attention {
    /// Whether this is plain grouped-query attention with nothing added.
    pub fn is_plain(&self) -> bool {
        *self == Attention::default()
    }

    /// Checks the latent ranks; errors name `<model>.attention.latent.<field>`.
    pub fn validate(&self, name: &str) -> Result<()> {
        if let Some(l) = &self.latent {
            for (f, v) in [
                ("q_rank", l.q_rank.unwrap_or(1)),
                ("kv_rank", l.kv_rank),
                ("nope_dim", l.nope_dim),
                ("rope_dim", l.rope_dim),
                ("v_dim", l.v_dim),
            ] {
                if v == 0 {
                    return Err(Error::invalid(
                        format!("{name}.attention.latent.{f}"),
                        v,
                        "a whole number ≥ 1",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The dense part of an MoE layer of `shape`: its attention and, in place of its MLP, its
/// shared experts (a SwiGLU of their width together, 0 for none) fed by the same normalised
/// input the router and the dispatch read.
pub fn moe_dense_part(shape: &Shape) -> Shape {
    let mut dense = shape.clone();
    dense.ffn = shape.experts.as_ref().map_or(shape.ffn, |e| e.shared_ffn);
    dense.experts = None;
    dense
}

/// The dense part of an MoE layer less its shared experts (attention, and the pre-MLP norm's
/// input and output that the MoE layer reads): what it keeps under `moe` recomputation, which
/// checkpoints the shared experts with the routed ones (Megatron-core's `MoELayer.forward`: its
/// checkpointed `custom_forward` adds `shared_experts(hidden_states)`), keeping only the MoE
/// layer's input.
pub fn without_shared(dense: &Shape) -> Shape {
    Shape {
        ffn: 0,
        ..dense.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_counts_the_layers_it_names() {
        // DeepSeek-V3: MoE from layer 3 of 61 on: 58 layers.
        let deepseek = LayerSet::Every { first: 3, step: 1 };
        assert_eq!(deepseek.count(61), 58);
        assert_eq!(deepseek.indices(61).count(), 58);
        assert!(!deepseek.contains(2) && deepseek.contains(3) && deepseek.contains(60));
        // Llama 4 Maverick: every second of 48 from the second: 1, 3, …, 47.
        let maverick = LayerSet::Every { first: 1, step: 2 };
        assert_eq!(maverick.count(48), 24);
        assert_eq!(maverick.indices(48).last(), Some(47));
        assert_eq!(LayerSet::Every { first: 48, step: 1 }.count(48), 0);
        assert_eq!(LayerSet::ALL.count(32), 32);
    }

    #[test]
    fn a_list_that_a_rule_gives_is_written_as_the_rule() {
        assert_eq!(
            LayerSet::from_list(vec![5, 1, 3, 7], 8),
            LayerSet::Every { first: 1, step: 2 }
        );
        // Not every second layer to the end: kept as a list.
        assert_eq!(
            LayerSet::from_list(vec![1, 3], 8),
            LayerSet::List(vec![1, 3])
        );
        assert_eq!(
            LayerSet::from_list(vec![7], 8),
            LayerSet::Every { first: 7, step: 1 }
        );
        let list = LayerSet::List(vec![0, 2, 3]);
        assert_eq!(list.count(3), 2);
        assert!(list.contains(2) && !list.contains(1));
        assert!(list.validate("m", 4).is_ok());
        assert!(list.validate("m", 3).is_err());
        assert!(LayerSet::List(vec![2, 2]).validate("m", 4).is_err());
    }

    #[test]
    fn a_set_is_written_as_its_rule_or_its_list() {
        let rule = LayerSet::Every { first: 3, step: 1 };
        assert_eq!(
            serde_json::to_string(&rule).unwrap(),
            r#"{"first":3,"step":1}"#
        );
        let list: LayerSet = serde_json::from_str("[0,4]").unwrap();
        assert_eq!(list, LayerSet::List(vec![0, 4]));
    }
}
