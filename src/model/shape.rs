//! Model shapes: Llama-family decoders (SwiGLU MLP, grouped-query attention, RMSNorm) and
//! their parameter count, computed from the shape. Llama 3 unties the embeddings and has no
//! biases; the architectures read from Hugging Face configs ([`crate::input::hf`]) may tie them, carry
//! biases or set the head dimension apart from `h / heads`, route some layers' tokens to
//! experts ([`Experts`]) and project attention through latents ([`Attention`]).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::hybrid::Block;
use crate::model::{Architecture, Attention, Biases, Experts, Hybrid, Style};

/// One hybrid block's parameters on a TP group ([`Shape::block_params`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockParams {
    /// Split over TP.
    pub split: u64,
    /// Whole on every TP rank.
    pub whole: u64,
    /// Of the split ones, the matrices a low-precision step keeps copies of.
    pub matrices: u64,
}

/// The shape of a Llama-family decoder. Counts only; the parameter count is derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ShapeSpec", into = "ShapeSpec")]
pub struct Shape {
    /// The name plans carry, for example `llama3-70b`.
    pub name: String,
    /// Transformer layers L.
    pub layers: u32,
    /// Hidden size h.
    pub hidden: u64,
    /// SwiGLU FFN width f.
    pub ffn: u64,
    /// Attention (query) heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: u32,
    /// Vocabulary size V.
    pub vocab: u64,
    /// Width of one attention head d: `h / heads` for Llama; Mistral NeMo sets 128 with
    /// `h = 5,120` and 32 heads.
    pub head_dim: u64,
    /// Whether the output head shares the input embedding's matrix (Llama 3.2 1B and 3B).
    pub tied_embeddings: bool,
    /// The bias vectors of the linear layers.
    pub biases: Biases,
    /// RoPE, the norm's ε and the attention window, for the launchers.
    pub architecture: Architecture,
    /// The mixture of experts of the MoE layers, `None` for a dense model. A mixture of
    /// experts is counted exactly ([`Shape::params`], [`Shape::active_params`]) and planned on
    /// the expert grid.
    pub experts: Option<Experts>,
    /// Latent attention and the vectors some families add to attention.
    pub attention: Attention,
    /// Multi-token-prediction depths D (DeepSeek-V3 §2.2; Megatron-core's `--mtp-num-layers`):
    /// each a layer of the kind of the model's last (dense or MoE), a projection `2h → h` of
    /// the normalised hidden state and next embedding, and three norms, sharing the embedding
    /// and the output head; trained beside the model, left out of [`Shape::params`] and
    /// counted apart ([`Shape::mtp_params`]). 0 for none.
    pub mtp: u32,
    /// A hybrid model's pattern of blocks (Mamba-2, attention, MLP, experts: Nemotron-H),
    /// each of its `layers` one block; `None` for a decoder whose layers are each attention
    /// and an MLP ([`crate::model::hybrid`]).
    pub hybrid: Option<Hybrid>,
    /// The norm, the MLP's activation and the positions: Llama's, or GPT's
    /// ([`crate::model::Style`]).
    pub style: Style,
}

/// A shape as written in a file or built by a reader, before [`ShapeSpec::build`] checks it.
/// The fields Llama 3 leaves at their defaults (the head dimension `h / heads`, untied
/// embeddings, no biases) may be left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    /// The name.
    pub name: String,
    /// Layers L.
    pub layers: u32,
    /// Hidden size h.
    pub hidden: u64,
    /// FFN width f.
    pub ffn: u64,
    /// Attention heads.
    pub heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Vocabulary V.
    pub vocab: u64,
    /// Head dimension, when it is not `h / heads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u64>,
    /// Tied input embedding and output head.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tied_embeddings: bool,
    /// Bias vectors.
    #[serde(default, skip_serializing_if = "Biases::is_none")]
    pub biases: Biases,
    /// RoPE, ε and the attention window, when not Llama 3's.
    #[serde(default, skip_serializing_if = "Architecture::is_default")]
    pub architecture: Architecture,
    /// The mixture of experts, for a sparse model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<Experts>,
    /// Latent attention, query-key norms and sinks, when the model has them.
    #[serde(default, skip_serializing_if = "Attention::is_plain")]
    pub attention: Attention,
    /// Multi-token-prediction depths ([`Shape::mtp`]), when the model has them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp: u32,
    /// A hybrid model's pattern of blocks ([`Shape::hybrid`]), when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hybrid: Option<Hybrid>,
    /// The norm, the MLP's activation and the positions, when not Llama's.
    #[serde(default, skip_serializing_if = "Style::is_default")]
    pub style: Style,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A shape read from a document (a shard, a request), checked ([`ShapeSpec::build`]).
impl TryFrom<ShapeSpec> for Shape {
    type Error = Error;
    fn try_from(spec: ShapeSpec) -> Result<Self> {
        spec.build()
    }
}

impl From<Shape> for ShapeSpec {
    fn from(s: Shape) -> Self {
        let implicit =
            s.hidden % u64::from(s.heads) == 0 && s.hidden / u64::from(s.heads) == s.head_dim;
        ShapeSpec {
            head_dim: (!implicit).then_some(s.head_dim),
            name: s.name,
            layers: s.layers,
            hidden: s.hidden,
            ffn: s.ffn,
            heads: s.heads,
            kv_heads: s.kv_heads,
            vocab: s.vocab,
            tied_embeddings: s.tied_embeddings,
            biases: s.biases,
            architecture: s.architecture,
            experts: s.experts,
            attention: s.attention,
            mtp: s.mtp,
            hybrid: s.hybrid,
            style: s.style,
        }
    }
}

impl ShapeSpec {
    /// The shape, checked: every count positive; without an explicit head dimension the heads
    /// divide the hidden size; the KV heads divide the heads; the parameters fit in 64 bits.
    pub fn build(self) -> Result<Shape> {
        let name = self.name.as_str();
        let positive = [
            ("layers", u64::from(self.layers)),
            ("hidden", self.hidden),
            ("ffn", self.ffn),
            ("heads", u64::from(self.heads)),
            ("kv_heads", u64::from(self.kv_heads)),
            ("vocab", self.vocab),
            ("head_dim", self.head_dim.unwrap_or(1)),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(Error::invalid(
                    format!("{name}.{field}"),
                    v,
                    "a whole number ≥ 1",
                ));
            }
        }
        let head_dim = match self.head_dim {
            Some(d) => d,
            None if self.hidden % u64::from(self.heads) == 0 => self.hidden / u64::from(self.heads),
            None => {
                return Err(Error::invalid(
                    format!("{name}.heads"),
                    self.heads,
                    format!(
                        "a divisor of the hidden size {}, or an explicit head dimension",
                        self.hidden
                    ),
                ))
            }
        };
        if self.heads % self.kv_heads != 0 {
            return Err(Error::invalid(
                format!("{name}.kv_heads"),
                self.kv_heads,
                format!("a divisor of the {} attention heads", self.heads),
            ));
        }
        self.architecture.validate(name)?;
        self.attention.validate(name)?;
        if let Some(w) = &self.architecture.window_layers {
            w.validate(&format!("{name}.architecture.window_layers"), self.layers)?;
        }
        if let Some(experts) = &self.experts {
            experts.validate(name, self.layers)?;
        }
        if let Some(hybrid) = &self.hybrid {
            self.hybrid_allowed(hybrid)?;
        }
        let shape = Shape {
            name: self.name,
            layers: self.layers,
            hidden: self.hidden,
            ffn: self.ffn,
            heads: self.heads,
            kv_heads: self.kv_heads,
            vocab: self.vocab,
            head_dim,
            tied_embeddings: self.tied_embeddings,
            biases: self.biases,
            architecture: self.architecture,
            experts: self.experts,
            attention: self.attention,
            mtp: self.mtp,
            hybrid: self.hybrid,
            style: self.style,
        };
        if shape.counts().is_none() {
            return Err(Error::invalid(
                format!("{}.params", shape.name),
                "more than 2^64",
                "a shape whose parameters can be counted",
            ));
        }
        Ok(shape)
    }
}

impl ShapeSpec {
    /// The rules of a hybrid pattern beside the shape's own fields: the pattern itself
    /// ([`Hybrid::validate`]), the experts on exactly its `E` blocks (none without), and none
    /// of what trainplan does not count in a hybrid yet: latent attention, a sliding window,
    /// multi-token prediction, biases on a non-gated MLP.
    fn hybrid_allowed(&self, hybrid: &Hybrid) -> Result<()> {
        let name = self.name.as_str();
        hybrid.validate(name, self.layers)?;
        // The validated pattern has one block a layer.
        let elsewhere = |e: &Experts| {
            (0..self.layers)
                .zip(hybrid.blocks())
                .any(|(i, b)| e.layers.contains(i) != (b == Block::Moe))
        };
        match &self.experts {
            None if hybrid.counts().moe > 0 => {
                return Err(Error::invalid(
                    format!("{name}.hybrid.pattern"),
                    &hybrid.pattern,
                    "E blocks only with experts (the experts field describes them)",
                ))
            }
            Some(e) if elsewhere(e) => {
                return Err(Error::invalid(
                    format!("{name}.experts.layers"),
                    "not the pattern's E blocks",
                    "the layers the pattern marks E, and no others",
                ))
            }
            _ => {}
        }
        let refused = [
            (
                self.attention.latent.is_some(),
                "attention.latent",
                "latent attention",
            ),
            (
                self.architecture.sliding_window.is_some(),
                "architecture.sliding_window",
                "a sliding window",
            ),
            (self.mtp > 0, "mtp", "multi-token prediction"),
            (
                self.style.norm != crate::model::Norm::RmsNorm,
                "style.norm",
                "a LayerNorm",
            ),
            // The pattern's MLP blocks are gated as `hybrid.gated` says; the style names the
            // activation (SwiGLU, the default, leaves it to the flag).
            (
                self.style.mlp != crate::model::Mlp::Swiglu
                    && self.style.mlp.gated() != hybrid.gated,
                "style.mlp",
                "an MLP activation other than the pattern's gating",
            ),
            (
                !hybrid.gated && self.biases.mlp,
                "biases.mlp",
                "biases on squared-ReLU MLPs",
            ),
        ];
        if let Some((_, field, what)) = refused.iter().find(|(set, _, _)| *set) {
            return Err(Error::invalid(
                format!("{name}.{field}"),
                "set",
                format!("none in a hybrid model: {what} beside Mamba-2 blocks is not counted yet"),
            ));
        }
        Ok(())
    }
}

/// One layer's attention per token, by tensor, in elements (all heads, before TP splits them).
///
/// | tensor | grouped-query | latent (DeepSeek-V2 §2.1) |
/// |---|---|---|
/// | queries `query` | `a·d` | `a·(d_nope + d_rope)` |
/// | keys `key` as the core reads them | `kv·d` | `a·(d_nope + d_rope)`: each head's own, the shared RoPE key repeated |
/// | values `value` | `kv·d` | `a·d_v` |
/// | output `output`, the output projection's input | `a·d` | `a·d_v` |
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionWidths {
    /// Queries of every head.
    pub query: f64,
    /// Keys as the attention core reads them.
    pub key: f64,
    /// Values.
    pub value: f64,
    /// The core's output.
    pub output: f64,
    /// The latents of multi-head latent attention; `None` for grouped-query attention.
    pub latent: Option<LatentWidths>,
}

/// Multi-head latent attention's widths per token beyond the core's ([`crate::model::Latent`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatentWidths {
    /// The query latent's rank `r_q`; `None` where the query is projected from `h` directly.
    pub q_rank: Option<f64>,
    /// The key-value latent's rank `r_kv`.
    pub kv_rank: f64,
    /// The shared RoPE key's width `d_rope`.
    pub rope: f64,
    /// The key-value up-projection's output, `a·(d_nope + d_v)`.
    pub kv_up: f64,
    /// The queries' RoPE part, `a·d_rope`.
    pub query_rope: f64,
}

impl AttentionWidths {
    /// The attention input projections' output on all heads, what TP splits: `q + 2g` for
    /// grouped-query attention (Q, K and V), the up-projections' `a·d_qk + a·(d_nope + d_v)`
    /// for latent attention.
    pub fn projected(&self) -> f64 {
        match &self.latent {
            None => self.query + self.key + self.value,
            Some(l) => self.query + l.kv_up,
        }
    }
}

impl LatentWidths {
    /// The down-projections' output, `r_q + r_kv + d_rope` (without a query latent
    /// `r_kv + d_rope`): what they write per token from the layer's normalised input.
    pub fn down(&self) -> f64 {
        self.q_rank.unwrap_or(0.0) + self.kv_rank + self.rope
    }
}

/// A shape's parameters by kind (SPEC.md §2, extended by [`Biases`], tied embeddings, the
/// vectors of [`Attention`] and the MoE layers of [`Experts`]). The `layer_*` counts are a
/// dense layer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// One layer's matrices: `h·(a·d) + 2·h·(kv·d) + (a·d)·h + 3·h·f` — query, key and value,
    /// output, and SwiGLU's gate, up and down (with latent attention, its projections).
    layer_matrices: u64,
    /// One layer's biases split over TP with their matrices: query, key, value, gate and up;
    /// and the attention sinks, one a head.
    layer_split_biases: u64,
    /// One layer's vectors every TP rank holds whole: two RMSNorm weights (`2h`), the
    /// output and down-projection biases, and the query-key and latent norms.
    layer_whole: u64,
    /// One vocabulary-by-hidden matrix, `V·h`.
    embedding: u64,
    /// One dense layer: its matrices, biases and vectors.
    per_layer: u64,
    /// The matrices that multiply each token, `L_dense·layer_matrices +
    /// L_moe·moe_active_matrices + V·h` (`layer_matrices` is checked like the rest, though for
    /// a model whose layers are all MoE no layer is dense).
    matrices: u64,
    /// One MoE layer: attention, norms, router, every expert, the shared experts.
    moe_layer: u64,
    /// What one token goes through in an MoE layer: the same, with `k` of the routed experts.
    moe_active: u64,
    /// One MoE layer's parameters outside its routed experts that tensor parallelism splits:
    /// attention's matrices and split biases, and the shared experts' matrices (Megatron-core's
    /// shared experts are tensor-parallel like a dense MLP).
    moe_split: u64,
    /// One MoE layer's parameters outside its routed experts every TP rank holds whole: its
    /// norms and row-parallel biases, the router (`E·h` and its vectors; Megatron-core's
    /// `TopKRouter` weight is replicated over TP) and the shared experts' gate.
    moe_whole: u64,
    /// One routed expert, `3·h·f_e` (with its biases).
    expert: u64,
    /// The matrices one token multiplies in an MoE layer: attention's, the router's `E·h`,
    /// the shared experts' and their gate, and `k` routed experts'.
    moe_active_matrices: u64,
    /// The whole model, `N = L_dense·(per layer) + L_moe·(MoE layer) + (1 or 2)·V·h + h`.
    total: u64,
    /// What one token goes through, `N_active`: `N` with `k` routed experts of each MoE layer
    /// in place of all `E`.
    active: u64,
    /// The multi-token-prediction modules, `D·(last layer + 2·h² + 3h)`.
    mtp: u64,
    /// The matrices they multiply a token with, `D·(last layer's + 2·h² + V·h)`: the layer's
    /// (its `k` routed experts if MoE), the projection and the shared head again.
    mtp_matrices: u64,
}

impl Shape {
    /// A Llama-3-style shape (head dimension `h / heads`, untied embeddings, no biases),
    /// checked as [`ShapeSpec::build`] checks.
    pub fn new(
        name: &str,
        layers: u32,
        hidden: u64,
        ffn: u64,
        heads: u32,
        kv_heads: u32,
        vocab: u64,
    ) -> Result<Self> {
        ShapeSpec {
            name: name.to_string(),
            layers,
            hidden,
            ffn,
            heads,
            kv_heads,
            vocab,
            head_dim: None,
            tied_embeddings: false,
            biases: Biases::default(),
            architecture: Architecture::default(),
            experts: None,
            attention: Attention::default(),
            mtp: 0,
            hybrid: None,
            style: Default::default(),
        }
        .build()
    }

    /// The parameter counts with every product checked, `None` past `u64::MAX`.
    fn counts(&self) -> Option<Counts> {
        self.counts_with(u64::checked_mul, u64::checked_add)
    }

    /// The counts of a shape built by [`ShapeSpec::build`], which checked they fit: the same
    /// formula in plain arithmetic, which the search calls in its inner loops.
    fn counted(&self) -> Counts {
        self.counts_with(|a, b| Some(a * b), |a, b| Some(a + b))
            .expect("plain arithmetic always gives counts")
    }

    /// The counts (see [`Counts`]) with products `mul` and sums `add`, the whole model among
    /// them, so an overflow anywhere shows.
    #[inline(always)]
    fn counts_with(
        &self,
        mul: impl Fn(u64, u64) -> Option<u64>,
        add: impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<Counts> {
        let (h, f) = (self.hidden, self.ffn);
        let heads = u64::from(self.heads);
        let q = mul(heads, self.head_dim)?;
        let kv = mul(u64::from(self.kv_heads), self.head_dim)?;
        let b = self.biases;
        // Attention: grouped-query projections (`2·h·(a·d) + 2·h·(kv·d)`), or the latent
        // ones ([`crate::model::Latent`]) and their two norms.
        let (attention_matrices, latent_norms) = match &self.attention.latent {
            None => (add(mul(mul(h, q)?, 2)?, mul(mul(h, kv)?, 2)?)?, 0),
            Some(l) => {
                let qk = add(l.nope_dim, l.rope_dim)?;
                let query = match l.q_rank {
                    Some(r) => add(mul(h, r)?, mul(mul(r, heads)?, qk)?)?,
                    None => mul(mul(h, heads)?, qk)?,
                };
                let key_value = add(
                    mul(h, add(l.kv_rank, l.rope_dim)?)?,
                    mul(mul(l.kv_rank, heads)?, add(l.nope_dim, l.v_dim)?)?,
                )?;
                let output = mul(mul(heads, l.v_dim)?, h)?;
                let norms = add(l.q_rank.unwrap_or(0), l.kv_rank)?;
                (add(add(query, key_value)?, output)?, norms)
            }
        };
        // The MLP's matrices: 3 of `h·f` for SwiGLU, 2 for a non-gated MLP; each norm one
        // vector of `h` (RMSNorm) or two (LayerNorm's scale and shift).
        let m = self.style.mlp.matrices();
        let nw = self.style.norm.vectors();
        let layer_matrices = add(attention_matrices, mul(mul(h, f)?, m)?)?;
        let qkv_bias = if b.qkv { add(q, mul(kv, 2)?)? } else { 0 };
        let sinks = if self.attention.sinks { heads } else { 0 };
        let attention_split = add(qkv_bias, sinks)?;
        let gate_up_bias = if b.mlp { mul(f, m - 1)? } else { 0 };
        let qk_norm = if self.attention.qk_norm {
            mul(self.head_dim, 2 * nw)?
        } else {
            0
        };
        let norms = add(add(mul(h, 2 * nw)?, qk_norm)?, mul(latent_norms, nw)?)?;
        let attention_whole = add(norms, if b.output { h } else { 0 })?;
        let layer_whole = add(attention_whole, if b.mlp { h } else { 0 })?;
        let layer_split_biases = add(attention_split, gate_up_bias)?;
        let embedding = mul(self.vocab, h)?;
        let per_layer = add(add(layer_matrices, layer_split_biases)?, layer_whole)?;
        // An MoE layer: the same attention and norms, then the router, the experts and the
        // shared experts in place of the dense MLP.
        let attention = add(add(attention_matrices, attention_split)?, attention_whole)?;
        let none = (0, 0, 0, 0, 0, 0, 0);
        let (moe_layers, moe_layer, moe_active, moe_split, moe_whole, expert, moe_active_matrices) =
            match &self.experts {
                None => none,
                Some(e) => {
                    let expert = e.expert_params_with(h, m, &mul, &add)?;
                    let routing = e.common_params_with(h, m, &mul, &add)?;
                    let common = add(attention, routing)?;
                    let shared = mul(mul(h, e.shared_ffn)?, m)?;
                    let split = add(add(attention_matrices, attention_split)?, shared)?;
                    let active_matrices = add(
                        attention_matrices,
                        e.active_matrix_params_with(h, m, &mul, &add)?,
                    )?;
                    (
                        e.moe_layers(self.layers),
                        add(common, mul(expert, u64::from(e.routed))?)?,
                        add(common, mul(expert, u64::from(e.per_token))?)?,
                        split,
                        // The rest of the common part: norms, output biases, router, gate.
                        common - split,
                        expert,
                        active_matrices,
                    )
                }
            };
        let dense_layers = u64::from(self.layers - moe_layers);
        let moe_layers = u64::from(moe_layers);
        let tables = if self.tied_embeddings { 1 } else { 2 };
        // The embeddings, a learned position table and the final norm.
        let positions = self.style.position_params(h)?;
        let outside = add(add(mul(embedding, tables)?, mul(h, nw)?)?, positions)?;
        let dense = mul(dense_layers, per_layer)?;
        let total = add(add(dense, mul(moe_layers, moe_layer)?)?, outside)?;
        let active = add(add(dense, mul(moe_layers, moe_active)?)?, outside)?;
        let matrices = add(
            add(
                mul(dense_layers, layer_matrices)?,
                mul(moe_layers, moe_active_matrices)?,
            )?,
            embedding,
        )?;
        // Each multi-token-prediction depth: a layer of the last layer's kind (Megatron-core's
        // `MultiTokenPredictionLayer` builds the decoder's last layer spec; DeepSeek-V3's is
        // MoE), `eh_proj` of `2h·h`, `enorm`, `hnorm` and the final norm.
        let last_moe = self
            .experts
            .as_ref()
            .is_some_and(|e| e.layers.contains(self.layers - 1));
        let (last_layer, last_matrices) = if last_moe {
            (moe_layer, moe_active_matrices)
        } else {
            (per_layer, layer_matrices)
        };
        let projection = mul(mul(h, h)?, 2)?;
        let depths = u64::from(self.mtp);
        let mtp = mul(add(add(last_layer, projection)?, mul(h, 3 * nw)?)?, depths)?;
        let mtp_matrices = mul(add(add(last_matrices, projection)?, embedding)?, depths)?;
        // A hybrid model sums its blocks, each one norm and one mixer or MLP
        // ([`crate::model::hybrid`]).
        let (total, active, matrices, expert) = match &self.hybrid {
            None => (total, active, matrices, expert),
            Some(hybrid) => {
                let attention_block = add(
                    add(attention_matrices, attention_split)?,
                    add(add(h, qk_norm)?, if b.output { h } else { 0 })?,
                )?;
                let sums =
                    self.hybrid_sums(hybrid, attention_matrices, attention_block, &mul, &add)?;
                (
                    add(sums.0, outside)?,
                    add(sums.1, outside)?,
                    add(sums.2, embedding)?,
                    sums.3,
                )
            }
        };
        Some(Counts {
            mtp,
            mtp_matrices,
            layer_matrices,
            matrices,
            layer_split_biases,
            layer_whole,
            embedding,
            per_layer,
            moe_layer,
            moe_active,
            moe_split,
            moe_whole,
            expert,
            moe_active_matrices,
            total,
            active,
        })
    }

    /// A hybrid model's blocks summed: (every parameter, those a token goes through, the
    /// matrices a token multiplies), without the embeddings and the final norm; and one routed
    /// expert's parameters (`m·h·f_e`, [`Shape::expert_params`]). Per block
    /// ([`crate::model::hybrid`]; transformers' `NemotronHBlock`, each one RMSNorm of `h`):
    /// - `M`: [`crate::model::hybrid::Mamba::block_params`];
    /// - `*`: the attention's projections, biases and query-key norms;
    /// - `-`: `m·h·f` with `m` 3 for SwiGLU, 2 for an up and a down projection (Nemotron-H's
    ///   squared ReLU), and SwiGLU's biases;
    /// - `E`: the router `E·h` and its vectors, the shared experts `m·h·f_s` (and gate), and
    ///   `E` experts of `m·h·f_e` each (`k` of them for a token). Nemotron 3 Nano's: 344,064 +
    ///   128 + 19,955,712 + 128·2·2,688·1,856 + 2,688 = 1,297,468,160.
    fn hybrid_sums(
        &self,
        hybrid: &Hybrid,
        attention_matrices: u64,
        attention_block: u64,
        mul: &impl Fn(u64, u64) -> Option<u64>,
        add: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<(u64, u64, u64, u64)> {
        let h = self.hidden;
        let m = if hybrid.gated { 3 } else { 2 };
        let mamba_matrices = hybrid.mamba.matrix_params_with(h, mul, add)?;
        let mamba_block = hybrid.mamba.block_params_with(h, mul, add)?;
        let mlp_matrices = mul(mul(h, self.ffn)?, m)?;
        let mlp_biases = if self.biases.mlp {
            add(mul(self.ffn, m - 1)?, h)?
        } else {
            0
        };
        let mlp_block = add(add(mlp_matrices, mlp_biases)?, h)?;
        let (moe_block, moe_active, moe_matrices, one_expert) = match &self.experts {
            None => (0, 0, 0, 0),
            Some(e) => {
                let expert = e.expert_params_with(h, m, mul, add)?;
                // The router, the shared experts and the block's norm.
                let common = add(e.common_params_with(h, m, mul, add)?, h)?;
                (
                    add(common, mul(expert, u64::from(e.routed))?)?,
                    add(common, mul(expert, u64::from(e.per_token))?)?,
                    e.active_matrix_params_with(h, m, mul, add)?,
                    expert,
                )
            }
        };
        let c = hybrid.counts();
        let sum = |(a, b, c2, d): (u64, u64, u64, u64)| -> Option<u64> {
            add(
                add(mul(c.mamba, a)?, mul(c.attention, b)?)?,
                add(mul(c.mlp, c2)?, mul(c.moe, d)?)?,
            )
        };
        Some((
            sum((mamba_block, attention_block, mlp_block, moe_block))?,
            sum((mamba_block, attention_block, mlp_block, moe_active))?,
            sum((
                mamba_matrices,
                attention_matrices,
                mlp_matrices,
                moe_matrices,
            ))?,
            one_expert,
        ))
    }

    /// Whether `other` has the same dimensions, whatever its name.
    pub fn same_dimensions(&self, other: &Shape) -> bool {
        let dimensions = |s: &Shape| {
            (
                s.layers,
                s.hidden,
                s.ffn,
                s.heads,
                s.kv_heads,
                s.vocab,
                s.head_dim,
                s.tied_embeddings,
                s.biases,
                s.attention,
            )
        };
        dimensions(self) == dimensions(other)
            && self.experts == other.experts
            && self.hybrid == other.hybrid
            && self.style == other.style
    }

    /// Appends `shape` to `shapes` unless one of them has its dimensions already (the first
    /// name given wins).
    pub fn push_new(shapes: &mut Vec<Shape>, shape: Shape) {
        if !shapes.iter().any(|s| s.same_dimensions(&shape)) {
            shapes.push(shape);
        }
    }

    /// Head dimension d.
    pub fn head_dim(&self) -> u64 {
        self.head_dim
    }

    /// Width of the attention's queries and output, `a·d` (`h` for Llama).
    pub fn attention_width(&self) -> u64 {
        u64::from(self.heads) * self.head_dim
    }

    /// The widths per token of one layer's attention, tensor by tensor
    /// ([`AttentionWidths`]): grouped-query attention's, or multi-head latent attention's.
    pub fn attention_widths(&self) -> AttentionWidths {
        let a = f64::from(self.heads);
        match &self.attention.latent {
            None => {
                let q = a * self.head_dim as f64;
                let g = f64::from(self.kv_heads) * self.head_dim as f64;
                AttentionWidths {
                    query: q,
                    key: g,
                    value: g,
                    output: q,
                    latent: None,
                }
            }
            Some(l) => {
                let qk = (l.nope_dim + l.rope_dim) as f64;
                AttentionWidths {
                    query: a * qk,
                    key: a * qk,
                    value: a * l.v_dim as f64,
                    output: a * l.v_dim as f64,
                    latent: Some(LatentWidths {
                        q_rank: l.q_rank.map(|r| r as f64),
                        kv_rank: l.kv_rank as f64,
                        rope: l.rope_dim as f64,
                        kv_up: a * (l.nope_dim + l.v_dim) as f64,
                        query_rope: a * l.rope_dim as f64,
                    }),
                }
            }
        }
    }

    /// The attention core's width in FLOPs, `(q + o)/2` with `q` the queries' and `o` the
    /// output's width: causal attention runs `s·(q + o)` forward FLOPs a token (`QKᵀ` at `2·s·q`
    /// and `PV` at `2·s·o` over the keys before it, half of `s` on average). For grouped-query
    /// attention `a·d`, which [`Shape::attention_width`] gives; DeepSeek-V3's latent attention
    /// `128·(192 + 128)/2 = 20,480` (DeepSeek-V2 §2.1.2: query and key heads `d_nope + d_rope`
    /// wide, values `d_v`).
    pub fn attention_core_width(&self) -> f64 {
        let w = self.attention_widths();
        (w.query + w.output) / 2.0
    }

    /// The layers under a sliding window and its tokens, `(n, w)`, where a window is shorter
    /// than `seq` (a longer one sees every earlier token, as full causal attention does).
    pub fn windowed(&self, seq: u64) -> Option<(u32, u64)> {
        let a = &self.architecture;
        let w = a.sliding_window.filter(|&w| w < seq)?;
        let n = a
            .window_layers
            .as_ref()
            .map_or(self.layers, |set| set.count(self.layers));
        (n > 0).then_some((n, w))
    }

    /// The sequence the attention core of a mean layer costs as, in causal attention's count
    /// (`s·width` a token, the causal half of `2·s·width`): `s` for full causal attention. A
    /// query at position `p` under a window of `w` tokens attends to `min(p, w)` keys, so a
    /// windowed layer's mean is `w − w²/(2s)` keys a query against full attention's `s/2`
    /// (FlashAttention's sliding window skips the blocks outside it); with `n` of the `L`
    /// layers windowed, `(n·(2w − w²/s) + (L − n)·s)/L`. gpt-oss at s = 4,096, w = 128 on
    /// half its layers: (252 + 4,096)/2 = 2,174. Megatron-core's FLOP counter has counted windows either way
    /// across releases; this is the work the kernels do.
    pub fn attention_sequence(&self, seq: u64) -> f64 {
        let s = seq as f64;
        match self.windowed(seq) {
            None => s,
            Some((n, w)) => {
                let (n, l, w) = (f64::from(n), f64::from(self.layers), w as f64);
                (n * (2.0 * w - w * w / s) + (l - n) * s) / l
            }
        }
    }

    /// Parameters of one transformer layer (SPEC.md §2):
    /// `2h·(a·d) + 2·h·(kv·d) + 3·h·f + 2h` plus any biases — the query and output
    /// projections, the key and value projections of grouped-query attention, SwiGLU's gate, up
    /// and down matrices, and the two RMSNorm weight vectors. Llama 3 has no biases.
    pub fn params_per_layer(&self) -> u64 {
        self.counted().per_layer
    }

    /// Parameters of one layer's matrices, the ones that multiply: `2h·(a·d) + 2·h·(kv·d) + 3·h·f`.
    pub fn layer_matrix_params(&self) -> u64 {
        self.counted().layer_matrices
    }

    /// Parameters of one layer that tensor parallelism splits: the matrices and the biases of
    /// the column-parallel projections (query, key, value, gate, up).
    pub fn layer_split_params(&self) -> u64 {
        let c = self.counted();
        c.layer_matrices + c.layer_split_biases
    }

    /// Parameters of one layer every TP rank holds whole: the two RMSNorm vectors and the
    /// biases of the row-parallel projections (attention output, down), `2h` for Llama.
    pub fn layer_whole_params(&self) -> u64 {
        self.counted().layer_whole
    }

    /// Parameters of one vocabulary-by-hidden matrix, `V·h`: the input embedding, and the
    /// output head unless it is tied to it.
    pub fn embedding_params(&self) -> u64 {
        self.counted().embedding
    }

    /// Parameters of the whole model N (SPEC.md §2): `L · per_layer + 2·V·h + h` — the layers,
    /// the untied input embedding and output head (one `V·h` when tied), and the final RMSNorm.
    /// With experts, every expert of every MoE layer: `L_dense·(dense layer) + L_moe·(MoE
    /// layer) + 2·V·h + h`.
    pub fn params(&self) -> u64 {
        self.counted().total
    }

    /// Parameters one token goes through, `N_active`: [`Shape::params`] with `k` routed
    /// experts of each MoE layer in place of all `E` (the router, the shared experts and both
    /// embedding tables counted, as Mistral's 12.9B of Mixtral 8x7B and DeepSeek-V3's 37B
    /// count them). `N` for a dense model.
    pub fn active_params(&self) -> u64 {
        self.counted().active
    }

    /// Parameters of one MoE layer (attention, norms, router, every expert, shared experts),
    /// 0 for a dense model.
    pub fn moe_layer_params(&self) -> u64 {
        self.counted().moe_layer
    }

    /// Parameters a token goes through in one MoE layer, 0 for a dense model.
    pub fn moe_layer_active_params(&self) -> u64 {
        self.counted().moe_active
    }

    /// The MLPs' parameters over those a token goes through, the expansion an MoE law grades
    /// ([`crate::laws::LossLaw::at`]): `(L_dense·f + L_moe·(E·f_e + f_s)) /
    /// (L_dense·f + L_moe·(k·f_e + f_s))`, the `3h` of every SwiGLU matrix cancelling. 1 for a
    /// dense model; `E` for Ludziejewski et al.'s models (top-1 routing to `E` experts of the
    /// dense MLP's width, every layer, no shared expert), so their law reads it as its number
    /// of experts; Mixtral's 8 experts at top-2 give 4, DeepSeek-V3's 256 at top-8 beside one
    /// shared expert 28.6. The law gives no rule of its own for top-k or shared experts: this
    /// ratio of total to active expert capacity is the reading taken here.
    pub fn expansion(&self) -> f64 {
        let Some(e) = &self.experts else {
            return 1.0;
        };
        let moe = self.moe_layers() as f64;
        // A hybrid model's dense MLPs are its `-` blocks; its other blocks have none.
        let dense_layers = match &self.hybrid {
            Some(h) => h.counts().mlp,
            None => u64::from(self.layers) - self.moe_layers(),
        };
        let dense = dense_layers as f64 * self.ffn as f64;
        let (f_e, f_s) = (e.ffn as f64, e.shared_ffn as f64);
        (dense + moe * (f64::from(e.routed) * f_e + f_s))
            / (dense + moe * (f64::from(e.per_token) * f_e + f_s))
    }

    /// Layers whose MLP is a mixture of experts, `L_moe` (0 for a dense model).
    pub fn moe_layers(&self) -> u64 {
        self.experts
            .as_ref()
            .map_or(0, |e| u64::from(e.moe_layers(self.layers)))
    }

    /// Parameters of one MoE layer outside its routed experts that tensor parallelism splits:
    /// attention's matrices and split biases and the shared experts' matrices; 0 for a dense
    /// model.
    pub fn moe_layer_split_params(&self) -> u64 {
        self.counted().moe_split
    }

    /// Parameters of one MoE layer outside its routed experts every TP rank holds whole: its
    /// norms and row-parallel biases, the router (replicated over TP, as Megatron-core's
    /// `TopKRouter` is) and the shared experts' gate; 0 for a dense model.
    pub fn moe_layer_whole_params(&self) -> u64 {
        self.counted().moe_whole
    }

    /// Parameters of one routed expert, `3·h·f_e` (and `2·f_e + h` of biases); 0 for a dense
    /// model.
    pub fn expert_params(&self) -> u64 {
        self.counted().expert
    }

    /// The matrices one token multiplies in an MoE layer: attention's, the router's `E·h`, the
    /// shared experts' (and their gate's `h`) and `k` routed experts' `3·h·f_e` each; 0 for a
    /// dense model.
    pub fn moe_layer_matrix_params(&self) -> u64 {
        self.counted().moe_active_matrices
    }

    /// Parameters that multiply each token, `N_matrix = L·(matrices of a layer) + V·h`: the
    /// layers' matrices and the output head, leaving out the input embedding (a lookup, as
    /// PaLM's MFU counts) and the vectors (norms, biases; elementwise). An MoE layer counts what
    /// one token multiplies ([`Shape::moe_layer_matrix_params`]): its `k` routed experts, not
    /// all `E`, and the router.
    pub fn matrix_params(&self) -> u64 {
        self.counted().matrices
    }

    /// Parameters of the multi-token-prediction modules ([`Shape::mtp`]), `D·(P_last + 2·h² +
    /// 3h)`: each a layer of the kind of the model's last, its projection and three norms,
    /// the embedding and head shared with the model (Megatron-core's modules). DeepSeek-V3's
    /// one: 11,507,286,272 + 102,760,448 + 21,504 = 11,610,068,224; its checkpoint stores each
    /// module with its own copies of the embedding and head (`2·V·h` more, 13,463,426,304 in
    /// all: the paper's "671B + 14B"). 0 without.
    pub fn mtp_params(&self) -> u64 {
        self.counted().mtp
    }

    /// The matrices the multi-token-prediction modules multiply a token with,
    /// `D·(M_last + 2·h² + V·h)`: the layer's (an MoE layer's `k` routed experts,
    /// [`Shape::moe_layer_matrix_params`]), the projection and the shared head once more. 0
    /// without.
    pub fn mtp_matrix_params(&self) -> u64 {
        self.counted().mtp_matrices
    }

    /// Whether the multi-token-prediction layers are mixtures of experts (the model's last
    /// layer is one).
    pub fn mtp_is_moe(&self) -> bool {
        self.mtp > 0
            && self
                .experts
                .as_ref()
                .is_some_and(|e| e.layers.contains(self.layers - 1))
    }

    /// The MLP's input projections, 2 for SwiGLU's gate and up, 1 for the up projection of a
    /// hybrid model's non-gated MLPs and experts (Nemotron-H's squared ReLU,
    /// [`Hybrid::gated`]): what an MLP's time and activations scale by.
    pub fn mlp_inputs(&self) -> u64 {
        let gated = match &self.hybrid {
            Some(h) => h.gated,
            None => self.style.mlp.gated(),
        };
        if gated {
            2
        } else {
            1
        }
    }

    /// Parameters of one norm, `h` (RMSNorm) or `2h` (LayerNorm).
    pub fn norm_params(&self) -> u64 {
        self.hidden * self.style.norm.vectors()
    }

    /// Parameters of the learned position table, on the first stage and whole on every TP
    /// rank (0 with RoPE).
    pub fn position_params(&self) -> u64 {
        self.style.position_params(self.hidden).unwrap_or(u64::MAX)
    }

    /// One block of a hybrid pattern's parameters ([`crate::model::hybrid`]), as
    /// [`Shape::hybrid_sums`] counts them, by where they sit on a TP group: `split` over
    /// TP, `whole` on every rank, and of the split ones the `matrices` a low-precision step
    /// keeps copies of. The routed experts are left out ([`Shape::expert_params`]).
    /// - `M`: `in_proj` and `out_proj`, the convolution, `dt_bias`, `A_log`, `D` and the gated
    ///   norm split by heads and groups (Megatron-core's `MambaMixer` shards them all); the
    ///   block's norm whole.
    /// - `*`: the projections and their split biases and sinks; the norm, query-key norms and
    ///   output bias whole.
    /// - `-`: `m·h·f` and the up projection's biases; the norm and the down bias whole.
    /// - `E`: the shared experts' `m·h·f_s` split; the router (replicated, as Megatron-core's
    ///   `TopKRouter`), its vectors, the shared experts' gate and the norm whole.
    ///
    /// All zero for a shape without a pattern.
    pub fn block_params(&self, block: Block) -> BlockParams {
        let Some(hybrid) = &self.hybrid else {
            return BlockParams::default();
        };
        let h = self.hidden;
        let m = self.mlp_inputs() + 1;
        let b = self.biases;
        match block {
            Block::Mamba => {
                let mamba = &hybrid.mamba;
                let matrices = mamba.matrix_params(h);
                BlockParams {
                    split: mamba.block_params(h) - h,
                    whole: h,
                    matrices,
                }
            }
            Block::Attention => {
                let q = u64::from(self.heads) * self.head_dim;
                let kv = u64::from(self.kv_heads) * self.head_dim;
                let matrices = 2 * h * q + 2 * h * kv;
                let biases = if b.qkv { q + 2 * kv } else { 0 };
                let sinks = if self.attention.sinks {
                    u64::from(self.heads)
                } else {
                    0
                };
                let qk_norm = if self.attention.qk_norm {
                    2 * self.head_dim
                } else {
                    0
                };
                BlockParams {
                    split: matrices + biases + sinks,
                    whole: h + qk_norm + if b.output { h } else { 0 },
                    matrices,
                }
            }
            Block::Mlp => {
                let matrices = m * h * self.ffn;
                let (split_bias, whole_bias) = if b.mlp {
                    ((m - 1) * self.ffn, h)
                } else {
                    (0, 0)
                };
                BlockParams {
                    split: matrices + split_bias,
                    whole: h + whole_bias,
                    matrices,
                }
            }
            Block::Moe => {
                let Some(e) = &self.experts else {
                    return BlockParams::default();
                };
                let plain = |a: u64, b: u64| Some(a * b);
                let sum = |a: u64, b: u64| Some(a + b);
                let common = e
                    .common_params_with(h, m, &plain, &sum)
                    .expect("plain arithmetic always gives a count");
                let shared = m * h * e.shared_ffn;
                BlockParams {
                    split: shared,
                    whole: common - shared + h,
                    matrices: shared,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_s_mean_keys_are_the_count_of_the_keys_each_position_sees() {
        // A query at position p (1 to s) sees min(p, w) keys; the causal count's convention
        // (s/2 for full attention, the diagonal counted half) takes w/(2s) off their mean, so
        // twice it is `2w − w²/s`, the windowed layers' term of `attention_sequence`.
        for (s, w) in [(4_096u64, 128u64), (8_192, 4_096), (1_000, 7), (64, 64)] {
            let seen: u64 = (1..=s).map(|p| p.min(w)).sum();
            let mean = seen as f64 / s as f64 - w as f64 / (2.0 * s as f64);
            let mut shape = crate::model::preset("8b").unwrap();
            shape.architecture.sliding_window = Some(w);
            let closed = shape.attention_sequence(s);
            assert!((2.0 * mean - closed).abs() < 1e-9, "s {s}, w {w}: {closed}");
        }
    }
    use crate::model::{preset, presets};

    #[test]
    fn parameter_counts_match_the_published_checkpoints() {
        let counts: Vec<u64> = presets().iter().map(Shape::params).collect();
        assert_eq!(counts, [8_030_261_248, 70_553_706_496, 405_853_388_800]);
    }

    #[test]
    fn the_70b_layer_is_counted_term_by_term() {
        // h = 8192, kv·d = 8·128 = 1024, f = 28672:
        // 2h² = 134,217,728; 2·h·1024 = 16,777,216; 3·h·f = 704,643,072; 2h = 16,384.
        let s = preset("70b").unwrap();
        assert_eq!(
            s.params_per_layer(),
            134_217_728 + 16_777_216 + 704_643_072 + 16_384
        );
    }

    #[test]
    fn a_llama_shape_is_written_without_the_fields_it_leaves_at_their_defaults() {
        let json = serde_json::to_string(&preset("L32-h4096-f14336").unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"name":"L32-h4096-f14336","layers":32,"hidden":4096,"ffn":14336,"heads":32,"kv_heads":8,"vocab":128256}"#
        );
        let back: Shape = serde_json::from_str(&json).unwrap();
        assert_eq!(back, preset("L32-h4096-f14336").unwrap());
        // The presets are Llama 3.1's checkpoints, RoPE scaling and all: the default.
        assert_eq!(preset("8b").unwrap().architecture, Architecture::llama31());
    }

    #[test]
    fn a_shape_with_its_own_head_dimension_ties_and_biases_round_trips() {
        // Mistral NeMo's attention: 32 heads of 128 with h = 5,120, so a·d = 4,096 ≠ h.
        let spec = ShapeSpec {
            name: "nemo-like".into(),
            layers: 2,
            hidden: 5_120,
            ffn: 14_336,
            heads: 32,
            kv_heads: 8,
            vocab: 1_000,
            head_dim: Some(128),
            tied_embeddings: true,
            biases: Biases {
                qkv: true,
                output: true,
                mlp: true,
            },
            architecture: Architecture::default(),
            experts: None,
            attention: Attention::default(),
            mtp: 0,
            hybrid: None,
            style: Default::default(),
        };
        let shape = spec.clone().build().unwrap();
        // By hand, per layer: q and o 2·5120·4096 = 41,943,040; k and v 2·5120·1024 =
        // 10,485,760; MLP 3·5120·14336 = 220,200,960; norms 10,240 (272,640,000); biases
        // q,k,v 4096 + 2048, o 5120, MLP 2·14336 + 5120 (45,056): 272,685,056.
        assert_eq!(shape.params_per_layer(), 272_685_056);
        // Two layers, one tied 1000×5120 table, the final norm.
        assert_eq!(shape.params(), 2 * 272_685_056 + 5_120_000 + 5_120);
        assert_eq!(
            shape.layer_split_params() + shape.layer_whole_params(),
            272_685_056
        );
        let json = serde_json::to_string(&shape).unwrap();
        assert!(json.contains(r#""head_dim":128"#), "{json}");
        assert_eq!(serde_json::from_str::<Shape>(&json).unwrap(), shape);
        // Without the explicit head dimension 5,120 / 32 = 160 would be taken.
        let implicit = ShapeSpec {
            head_dim: None,
            ..spec
        };
        assert_eq!(implicit.build().unwrap().head_dim(), 160);
    }

    #[test]
    fn a_shape_whose_heads_do_not_divide_the_hidden_size_is_refused() {
        let e = Shape::new("odd", 2, 100, 300, 3, 1, 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("odd.heads = 3"), "{e}");
        assert!(Shape::new("z", 0, 128, 300, 2, 1, 10).is_err());
        assert!(Shape::new("kv", 2, 128, 300, 4, 3, 10).is_err());
    }

    /// Mixtral 8x7B's shape, written out (its `config.json`: h 4,096, f 14,336, 32 layers, 32
    /// heads, 8 KV heads, vocabulary 32,000, 8 experts, 2 a token).
    fn mixtral() -> ShapeSpec {
        ShapeSpec {
            name: "mixtral".into(),
            layers: 32,
            hidden: 4_096,
            ffn: 14_336,
            heads: 32,
            kv_heads: 8,
            vocab: 32_000,
            head_dim: None,
            tied_embeddings: false,
            biases: Biases::default(),
            architecture: Architecture::default(),
            experts: Some(Experts {
                routed: 8,
                per_token: 2,
                ffn: 14_336,
                shared_ffn: 0,
                shared_gate: false,
                biases: false,
                router_bias: false,
                score_bias: false,
                groups: None,
                layers: crate::model::LayerSet::ALL,
            }),
            attention: Attention::default(),
            mtp: 0,
            hybrid: None,
            style: Default::default(),
        }
    }

    #[test]
    fn a_mixture_of_experts_counts_every_expert_and_the_ones_a_token_uses() {
        let shape = mixtral().build().unwrap();
        // By hand, per layer: attention 2·4096² + 2·4096·1024 = 41,943,040; router 8·4096 =
        // 32,768; norms 8,192; one expert 3·4096·14336 = 176,160,768.
        let common = 41_943_040 + 32_768 + 8_192;
        assert_eq!(shape.moe_layer_params(), common + 8 * 176_160_768);
        assert_eq!(shape.moe_layer_active_params(), common + 2 * 176_160_768);
        // Both embedding tables 2·32000·4096 = 262,144,000 and the final norm 4,096.
        let outside = 262_144_000 + 4_096;
        assert_eq!(shape.params(), 32 * (common + 8 * 176_160_768) + outside);
        assert_eq!(shape.params(), 46_702_792_704);
        assert_eq!(shape.active_params(), 12_879_925_248);
        // A dense model's active parameters are all of them.
        let dense = preset("70b").unwrap();
        assert_eq!(dense.active_params(), dense.params());
        assert_eq!(dense.moe_layer_params(), 0);
    }

    #[test]
    fn dense_layers_among_the_experts_take_the_dense_width() {
        // Every second layer a mixture (Llama 4 Maverick's rule) with a shared expert of the
        // experts' width and a dense MLP twice as wide on the others.
        let mut spec = mixtral();
        spec.ffn = 28_672;
        let experts = spec.experts.as_mut().unwrap();
        experts.layers = crate::model::LayerSet::Every { first: 1, step: 2 };
        experts.shared_ffn = 14_336;
        let shape = spec.build().unwrap();
        let attention = 41_943_040 + 8_192;
        let dense = attention + 3 * 4_096 * 28_672;
        let moe = attention + 32_768 + 176_160_768 + 8 * 176_160_768;
        assert_eq!(shape.params_per_layer(), dense);
        assert_eq!(shape.moe_layer_params(), moe);
        assert_eq!(shape.params(), 16 * dense + 16 * moe + 262_144_000 + 4_096);
        assert_eq!(
            shape.active_params(),
            16 * dense + 16 * (moe - 6 * 176_160_768) + 262_144_000 + 4_096
        );
    }

    #[test]
    fn latent_attention_is_counted_projection_by_projection() {
        // DeepSeek-V3's attention (h 7,168, 128 heads; r_q 1,536, r_kv 512, d_nope 128,
        // d_rope 64, d_v 128), by hand: q_a 7168·1536 = 11,010,048; q_b 1536·128·192 =
        // 37,748,736; kv_a 7168·576 = 4,128,768; kv_b 512·128·256 = 16,777,216; o 128·128·7168
        // = 117,440,512 (187,105,280); norms 1,536 + 512 + 2·7,168.
        let shape = crate::model::testing::latent(1);
        let mlp = 3 * 7_168 * 18_432;
        assert_eq!(shape.layer_matrix_params(), 187_105_280 + mlp);
        assert_eq!(
            shape.params_per_layer(),
            187_105_280 + mlp + 1_536 + 512 + 14_336
        );
        // Planned, its attention widths per head d_qk = 128 + 64 and d_v = 128.
        let w = shape.attention_widths();
        assert_eq!(
            (w.query, w.key, w.value, w.output),
            (24_576.0, 24_576.0, 16_384.0, 16_384.0)
        );
        let l = w.latent.unwrap();
        assert_eq!(
            (l.down(), l.kv_up, l.query_rope),
            (2_112.0, 32_768.0, 8_192.0)
        );
        // The core's FLOPs a token, s·(q + o): 2·s·20,480 at its (q + o)/2.
        assert_eq!(shape.attention_core_width(), 20_480.0);
    }

    #[test]
    fn a_gpt_style_block_counts_layer_norms_a_gelu_mlp_and_learned_positions() {
        // GPT-3 175B as Megatron-LM builds it (Brown et al. 2020 Table 2.1: 96 layers of
        // 12,288, 96 heads, 2,048 positions): per layer Q, K, V and output 4h² with biases 4h, a
        // GeLU MLP of 4h (8h², biases 5h) and two LayerNorms (4h); the tied embedding of
        // 51,200 rows, the 2,048-row position table and the final LayerNorm (2h).
        let spec: ShapeSpec = serde_json::from_str(
            r#"{"name":"gpt3-175b","layers":96,"hidden":12288,"ffn":49152,"heads":96,"kv_heads":96,
                "vocab":51200,"tied_embeddings":true,"biases":{"qkv":true,"output":true,"mlp":true},
                "style":{"norm":"layer_norm","mlp":"gelu","positions":{"learned":{"rows":2048}}}}"#,
        )
        .unwrap();
        assert_eq!(spec.style, Style::gpt(2048));
        let shape = spec.clone().build().unwrap();
        let h: u64 = 12288;
        assert_eq!(shape.layer_matrix_params(), 12 * h * h);
        assert_eq!(
            shape.layer_split_params() + shape.layer_whole_params(),
            12 * h * h + 13 * h
        );
        assert_eq!(shape.params(), 174_615_846_912);
        assert_eq!(
            shape.params(),
            96 * (12 * h * h + 13 * h) + 51_200 * h + 2048 * h + 2 * h
        );
        // The matrices a token multiplies: the layers' and the (tied) head, not the tables.
        assert_eq!(shape.matrix_params(), 96 * 12 * h * h + 51_200 * h);
        assert_eq!((shape.mlp_inputs(), shape.norm_params()), (1, 2 * h));
        assert_eq!(shape.position_params(), 2048 * h);
        // Written back whole; not the same model as Llama's blocks of the same dimensions.
        let back: ShapeSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
        assert_eq!(back, spec);
        let llama = ShapeSpec {
            style: Style::default(),
            ..spec
        }
        .build()
        .unwrap();
        assert!(!llama.same_dimensions(&shape));
        // Llama's block of the same widths: SwiGLU's 3·h·4h with biases 2f + h, RMSNorms of h,
        // RoPE.
        assert_eq!(llama.params(), 96 * (16 * h * h + 15 * h) + 51_200 * h + h);
    }

    #[test]
    fn a_mixture_of_experts_is_written_whole_and_read_back() {
        let spec = mixtral();
        let json = serde_json::to_string(&spec).unwrap();
        assert!(
            json.contains(
                r#""experts":{"routed":8,"per_token":2,"ffn":14336,"layers":{"first":0,"step":1}}"#
            ),
            "{json}"
        );
        let back: ShapeSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        // A plan or shard names the shapes trainplan plans, a mixture among them.
        let shape: Shape = serde_json::from_str(&json).unwrap();
        assert_eq!(shape, spec.build().unwrap());
        // More experts a token than there are is refused by name.
        let mut bad = mixtral();
        bad.experts.as_mut().unwrap().per_token = 9;
        let e = bad.build().unwrap_err().to_string();
        assert!(e.contains("mixtral.experts.per_token = 9"), "{e}");
    }
}
