//! The architecture beyond a shape's dimensions: which linear layers carry biases, and what a
//! launcher needs to build the same model (RoPE and its scaling, the norm's ε, the attention
//! window), Llama 3.1's by default.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Which linear layers carry a bias vector. Llama 3 and Mistral have none; Qwen2 has them on the
/// query, key and value projections; a Llama config's `attention_bias` puts them on all four
/// attention projections and `mlp_bias` on the three MLP ones (transformers' `modeling_llama`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Biases {
    /// Biases on the query, key and value projections: `heads·d + 2·kv·d` a layer.
    #[serde(default)]
    pub qkv: bool,
    /// A bias on the attention output projection: `h` a layer.
    #[serde(default)]
    pub output: bool,
    /// Biases on the gate, up and down projections: `2f + h` a layer.
    #[serde(default)]
    pub mlp: bool,
}

impl Biases {
    pub(crate) fn is_none(&self) -> bool {
        *self == Biases::default()
    }
}

/// The normalisation before each block and at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// RMSNorm (Zhang & Sennrich 2019): a scale vector, `h` parameters (Llama).
    #[default]
    RmsNorm,
    /// LayerNorm (Ba et al. 2016): a scale and a shift vector, `2h` parameters (GPT-2/3,
    /// BLOOM, OPT; Megatron-LM's default `--normalization`).
    LayerNorm,
}

impl Norm {
    /// Vectors of `h` one norm holds: 1 for RMSNorm's scale, 2 for LayerNorm's scale and shift.
    pub fn vectors(self) -> u64 {
        match self {
            Norm::RmsNorm => 1,
            Norm::LayerNorm => 2,
        }
    }
}

/// The MLP's activation, which decides whether it is gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// SwiGLU (Shazeer 2020): gate and up projections `h → f`, down `f → h`, `3·h·f`.
    #[default]
    Swiglu,
    /// GeLU between an up projection `h → f` and a down projection `f → h`, `2·h·f` (GPT-2/3,
    /// BLOOM; Megatron-LM's default activation).
    Gelu,
    /// ReLU, not gated, `2·h·f` (OPT).
    Relu,
    /// Squared ReLU, not gated, `2·h·f` (Primer, So et al. 2021; Nemotron).
    SquaredRelu,
}

impl Mlp {
    /// Whether a gate projection multiplies the up projection's output.
    pub fn gated(self) -> bool {
        self == Mlp::Swiglu
    }

    /// The MLP's matrices of `h·f`: 3 gated, 2 not.
    pub fn matrices(self) -> u64 {
        if self.gated() {
            3
        } else {
            2
        }
    }
}

/// How positions enter the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Positions {
    /// Rotary embeddings on queries and keys (Su et al. 2021): no parameters.
    #[default]
    Rope,
    /// A learned table of `rows` positions by `h` added to the token embeddings (GPT-2/3, OPT;
    /// Megatron-LM's default `learned_absolute`, `--max-position-embeddings` rows): `rows·h`
    /// parameters on the first stage, whole on every TP rank.
    Learned { rows: u64 },
}

/// A decoder's style: the parts of its blocks beside their dimensions: the norm, the MLP's activation and the
/// positions. Llama's by default (RMSNorm, SwiGLU, RoPE); GPT-style blocks (LayerNorm, GeLU,
/// learned positions) as GPT-3, BLOOM and OPT scripts set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Style {
    #[serde(default)]
    pub norm: Norm,
    #[serde(default)]
    pub mlp: Mlp,
    #[serde(default)]
    pub positions: Positions,
}

impl Style {
    pub(crate) fn is_default(&self) -> bool {
        *self == Style::default()
    }

    /// GPT-3's block (Brown et al. 2020, as Megatron-LM builds it): LayerNorm, GeLU and a
    /// learned table of `rows` positions.
    pub fn gpt(rows: u64) -> Style {
        Style {
            norm: Norm::LayerNorm,
            mlp: Mlp::Gelu,
            positions: Positions::Learned { rows },
        }
    }

    /// Parameters of the position table, `rows·h` (0 for RoPE).
    pub fn position_params(&self, hidden: u64) -> Option<u64> {
        match self.positions {
            Positions::Rope => Some(0),
            Positions::Learned { rows } => rows.checked_mul(hidden),
        }
    }
}

/// Llama 3.1's RoPE frequency scaling (`rope_scaling` of a Hugging Face config): wavelengths
/// past `original_max_position_embeddings / low_freq_factor` are stretched by `factor`, those
/// below `… / high_freq_factor` kept, and those between blended (transformers'
/// `_compute_llama3_parameters`). Other kinds are kept by name for the launchers to refuse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RopeScaling {
    /// The kind (`rope_type`): `llama3`, or another a launcher may not express.
    pub rope_type: String,
    /// How far long wavelengths are stretched (Llama 3.1: 8, Llama 3.2: 32).
    pub factor: f64,
    /// Llama 3's low-frequency factor (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_freq_factor: Option<f64>,
    /// Llama 3's high-frequency factor (4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_freq_factor: Option<f64>,
    /// The context the frequencies were trained for (Llama 3: 8,192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_max_position_embeddings: Option<u64>,
}

/// What a launcher needs, beyond the counts, to build the same model: the position encoding,
/// the norm's ε and the attention window. No parameter count depends on them, and the step
/// time model costs attention as full causal attention over the sequence (a window shorter
/// than the sequence would do less), but a launcher that drops them trains another model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Architecture {
    /// RoPE base θ (Llama 3: 500,000, Dubey et al. 2024 Table 3; Megatron-LM's default and
    /// transformers' `LlamaConfig` default: 10,000).
    pub rope_theta: f64,
    /// RoPE frequency scaling, when the model has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<RopeScaling>,
    /// RMSNorm ε (Llama 3: 1e-5).
    pub norm_eps: f64,
    /// Sliding-window attention: each token sees this many, itself included (Mistral 7B:
    /// 4,096); `None` for full causal attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u64>,
    /// The layers the window applies to when not all (gpt-oss: every second from the first,
    /// the others attending in full); `None` for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_layers: Option<crate::model::LayerSet>,
}

/// Llama 3's RoPE base.
pub const LLAMA3_ROPE_THETA: f64 = 500_000.0;
/// Llama 3's RMSNorm ε.
pub const LLAMA3_NORM_EPS: f64 = 1e-5;

impl Default for Architecture {
    /// Llama 3.1's, as its `config.json` files give it and torchtitan's llama3 flavors build
    /// it, for the presets, dimension names, families and ad-hoc shapes alike: θ = 500,000,
    /// ε = 1e-5, the llama3 RoPE scaling (factor 8, low 1, high 4, original context 8,192),
    /// full causal attention.
    fn default() -> Self {
        Architecture {
            rope_theta: LLAMA3_ROPE_THETA,
            rope_scaling: Some(RopeScaling {
                rope_type: "llama3".into(),
                factor: 8.0,
                low_freq_factor: Some(1.0),
                high_freq_factor: Some(4.0),
                original_max_position_embeddings: Some(8192),
            }),
            norm_eps: LLAMA3_NORM_EPS,
            sliding_window: None,
            window_layers: None,
        }
    }
}

/// Every value is checked finite by [`Architecture::validate`], so equality is reflexive.
impl Eq for Architecture {}

impl Architecture {
    /// Llama 3.1's ([`Architecture::default`]).
    pub fn llama31() -> Architecture {
        Architecture::default()
    }

    /// In words: `rope_theta 500000, norm_eps 1e-5, llama3 rope scaling (factor 8), full
    /// causal attention`.
    pub fn describe(&self) -> String {
        format!(
            "rope_theta {}, norm_eps {}, {}, {}",
            self.rope_theta,
            crate::format::exact(self.norm_eps),
            match &self.rope_scaling {
                None => "no rope scaling".to_string(),
                Some(r) => format!("{} rope scaling (factor {})", r.rope_type, r.factor),
            },
            match (self.sliding_window, &self.window_layers) {
                (None, _) => "full causal attention".to_string(),
                (Some(w), None) => format!("a {w}-token sliding window"),
                (Some(w), Some(_)) => format!("a {w}-token sliding window on some layers"),
            }
        )
    }

    /// Whether this is Llama 3's ([`Architecture::default`]), which files leave out.
    pub fn is_default(&self) -> bool {
        *self == Architecture::default()
    }

    /// Checks every field; the error names it (`<model>.rope_theta`, …).
    pub fn validate(&self, name: &str) -> Result<()> {
        let positive = |field: &str, v: f64, max: f64| {
            if v.is_finite() && v > 0.0 && v < max {
                Ok(())
            } else {
                Err(Error::invalid(
                    format!("{name}.{field}"),
                    crate::format::exact(v),
                    format!("a number > 0 and below {}", crate::format::exact(max)),
                ))
            }
        };
        positive("rope_theta", self.rope_theta, 1e18)?;
        positive("norm_eps", self.norm_eps, 1.0)?;
        if let Some(r) = &self.rope_scaling {
            positive("rope_scaling.factor", r.factor, 1e6)?;
            for (field, v) in [
                ("rope_scaling.low_freq_factor", r.low_freq_factor),
                ("rope_scaling.high_freq_factor", r.high_freq_factor),
            ] {
                if let Some(v) = v {
                    positive(field, v, 1e6)?;
                }
            }
            if r.original_max_position_embeddings == Some(0) {
                return Err(Error::invalid(
                    format!("{name}.rope_scaling.original_max_position_embeddings"),
                    0,
                    "a whole number ≥ 1",
                ));
            }
        }
        if self.window_layers.is_some() && self.sliding_window.is_none() {
            return Err(Error::invalid(
                format!("{name}.window_layers"),
                "given",
                "windowed layers only with a sliding_window",
            ));
        }
        if self.sliding_window == Some(0) {
            return Err(Error::invalid(
                format!("{name}.sliding_window"),
                0,
                "a whole number ≥ 1, or none for full attention",
            ));
        }
        Ok(())
    }
}
