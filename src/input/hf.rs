//! Hugging Face `config.json` files: the shape of a Llama-family decoder, dense or a mixture of
//! experts, read from the fields transformers writes, so any such checkpoint can be counted and
//! (when dense) planned by pointing at its config.
//!
//! Accepted architectures, and what each one's modelling code builds (transformers 4.57,
//! `models/<family>/modeling_*.py`):
//!
//! - `LlamaForCausalLM`: biases on the q, k, v and o projections when `attention_bias`, on the
//!   gate, up and down projections when `mlp_bias`; `head_dim` when given, else `h / heads`.
//! - `MistralForCausalLM`: no biases; `head_dim` when given (Mistral NeMo: 128 with h = 5,120).
//! - `Qwen2ForCausalLM`: biases on q, k and v always (hard-coded; the config has no key), none on
//!   o or the MLP.
//! - `MixtralForCausalLM`: every layer a mixture of `num_local_experts` SwiGLU experts of width
//!   `intermediate_size`, `num_experts_per_tok` a token, behind a router without bias.
//! - `Qwen2MoeForCausalLM`: q, k and v biases unless `qkv_bias` is false; experts of `moe_intermediate_size`, a
//!   shared expert of `shared_expert_intermediate_size` and its gate (`h → 1`); a layer is a
//!   mixture when `(i + 1) % decoder_sparse_step == 0` and it is not in `mlp_only_layers`,
//!   else a dense MLP of `intermediate_size`.
//! - `Qwen3ForCausalLM`: dense; biases on q, k, v and o when `attention_bias`, none on the MLP,
//!   and an RMSNorm of `head_dim` on each head's query and key (`q_norm`, `k_norm`).
//! - `Qwen3MoeForCausalLM`: the same layer rule as Qwen2-MoE, no shared expert, biases on q, k, v and o when
//!   `attention_bias`, and an RMSNorm of `head_dim` on each head's query and key.
//! - `DeepseekV3ForCausalLM`: multi-head latent attention (`q_lora_rank`, `kv_lora_rank`,
//!   `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`); dense layers of
//!   `intermediate_size` below `first_k_dense_replace`, then every `moe_layer_freq`-th a mixture
//!   of `n_routed_experts` of `moe_intermediate_size` with `n_shared_experts` shared ones and the
//!   router's score correction (`e_score_correction_bias`: a buffer in transformers, a
//!   parameter in DeepSeek's own `inference/model.py`, stored in the checkpoint and counted in
//!   its published 671,026,419,200, so counted here).
//!   The `moe_layer_freq` rule is DeepSeek's own code's (transformers leaves it out; it is 1 in
//!   every released config). The multi-token-prediction depths (`num_nextn_predict_layers`,
//!   none when absent, as transformers builds none) are [`Shape::mtp`], counted apart.
//! - `GptOssForCausalLM`: every layer a mixture of `num_local_experts` of `intermediate_size`
//!   with biases on the experts and the router; biases on q, k, v and o (`attention_bias`); a
//!   learned sink per head; the `sliding_window` on the layers `layer_types` marks
//!   `sliding_attention` (by default every second from the first).
//! - `Llama4ForConditionalGeneration` (its `text_config`; the vision encoder is not counted) and
//!   `Llama4ForCausalLM`: mixtures of `num_local_experts` of `intermediate_size` with a shared
//!   expert of the same width on `moe_layers` (by default every `interleave_moe_layer_step`-th,
//!   from layer `step − 1`), dense MLPs of `intermediate_size_mlp` elsewhere; no biases (the
//!   config class forces `attention_bias` false); its query-key norm has no weights. Its chunked local attention (`attention_chunk_size`) and RoPE-free
//!   layers change no count.
//! - `NemotronHForCausalLM` (Nemotron-H, Nemotron 3): a hybrid of blocks
//!   ([`crate::model::hybrid`]) from `hybrid_override_pattern`, its Mamba-2 mixer from
//!   `mamba_num_heads`, `mamba_head_dim`, `n_groups`, `ssm_state_size` and `conv_kernel`;
//!   squared-ReLU MLPs of `intermediate_size`; on the `E` blocks `n_routed_experts` of
//!   `moe_intermediate_size`, `num_experts_per_tok` a token, one shared MLP of
//!   `moe_shared_expert_intermediate_size` and the router's score correction; the attention
//!   head's width from `head_dim` or `attention_head_dim`.
//!
//! Beyond the counts, what a launcher must build the same model with: `rope_theta`,
//! `rope_scaling`, `rms_norm_eps` and the sliding window (with the config classes' defaults
//! when absent).
//!
//! All of them: `num_key_value_heads` defaults to `num_attention_heads`, `tie_word_embeddings`
//! to false (their config classes' defaults). The expert fields are required where the
//! architecture has experts, and refused on a dense architecture; any other architecture is
//! refused by name rather than approximated. [`read`] gives every accepted shape, each of
//! which trainplan plans.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::input::strict::Nulls;
use crate::input::{parse_json_with, read_text, HF_CONFIG};
use crate::model::{
    Architecture as ModelArchitecture, Attention, Biases, Experts, Latent, LayerSet, RopeScaling,
    Shape, ShapeSpec,
};

/// The most MoE layers a config may list one by one (a rule, such as every second layer, has no
/// bound): more than any decoder has, few enough to hold.
const MAX_LISTED_LAYERS: u32 = 1 << 20;

/// The architectures [`read`] accepts, as `architectures` names them.
pub const SUPPORTED: [&str; 12] = [
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "MixtralForCausalLM",
    "Qwen2MoeForCausalLM",
    "Qwen3MoeForCausalLM",
    "DeepseekV3ForCausalLM",
    "GptOssForCausalLM",
    "Llama4ForConditionalGeneration",
    "Llama4ForCausalLM",
    "NemotronHForCausalLM",
];

/// Fields that mark a mixture of experts, in the families that use them (Mixtral, gpt-oss and
/// Llama 4: `num_local_experts`; Qwen MoE and OLMoE: `num_experts`; DeepSeek:
/// `n_routed_experts`), refused on a dense architecture.
const EXPERT_FIELDS: [&str; 5] = [
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "moe_intermediate_size",
    "num_experts_per_tok",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Architecture {
    Llama,
    Mistral,
    Qwen2,
    Qwen3,
    Mixtral,
    Qwen2Moe,
    Qwen3Moe,
    DeepseekV3,
    GptOss,
    Llama4,
    NemotronH,
}

impl Architecture {
    /// Whether its layers may be mixtures of experts.
    fn sparse(self) -> bool {
        !matches!(
            self,
            Architecture::Llama | Architecture::Mistral | Architecture::Qwen2 | Architecture::Qwen3
        )
    }

    /// The config class's `rope_theta` and `rms_norm_eps` (transformers 4.57's
    /// `configuration_*.py`).
    fn defaults(self) -> (f64, f64) {
        match self {
            Architecture::Llama
            | Architecture::Mistral
            | Architecture::Qwen2
            | Architecture::Qwen3
            | Architecture::Qwen2Moe
            | Architecture::Qwen3Moe
            | Architecture::DeepseekV3 => (10_000.0, 1e-6),
            Architecture::Mixtral => (1e6, 1e-5),
            Architecture::GptOss => (150_000.0, 1e-5),
            Architecture::Llama4 => (500_000.0, 1e-5),
            // Nemotron-H has no RoPE (Megatron-Bridge: `position_embedding_type = "none"`);
            // its norms' ε is `layer_norm_epsilon`, 1e-5.
            Architecture::NemotronH => (10_000.0, 1e-5),
        }
    }
}

/// Reads the shape a `config.json` describes (see [`parse`]): dense, mixtures of experts,
/// latent attention and windows on some layers, every one planned.
pub fn read(path: &Path) -> Result<Shape> {
    parse(&read_text(path, HF_CONFIG)?, path)
}

/// The shape the config text describes; `path` names it in errors and gives the shape its
/// name when the config has no `_name_or_path`.
pub fn parse(text: &str, path: &Path) -> Result<Shape> {
    // transformers writes `null` for a field it leaves unset (`"rope_scaling": null`).
    let value: Value = parse_json_with(text, path, HF_CONFIG.what, Nulls::Absent)?;
    let Value::Object(config) = value else {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            message: "not a Hugging Face config.json: expected a JSON object".into(),
        });
    };
    let top = Fields {
        config: &config,
        path,
        prefix: "",
    };
    let architecture = top.architecture()?;
    // Llama 4's multimodal config keeps the language model's fields in `text_config`.
    let text_config;
    let fields = match (architecture, config.get("text_config")) {
        (Architecture::Llama4, Some(Value::Object(t))) => {
            text_config = t;
            Fields {
                config: text_config,
                path,
                prefix: "text_config.",
            }
        }
        (Architecture::Llama4, Some(v)) => {
            return Err(top.invalid("text_config", v, "the language model's fields, an object"))
        }
        _ => top,
    };
    if !architecture.sparse() {
        fields.refuse_experts(architecture)?;
    }
    let heads = fields.count32("num_attention_heads")?;
    // gpt-oss's config class sets `attention_bias` true.
    let attention_bias = fields.flag_or("attention_bias", architecture == Architecture::GptOss)?;
    let biases = match architecture {
        Architecture::Llama => Biases {
            qkv: attention_bias,
            output: attention_bias,
            mlp: fields.flag("mlp_bias")?,
        },
        Architecture::Mistral | Architecture::Mixtral => Biases::default(),
        Architecture::Qwen2 => Biases {
            qkv: true,
            ..Biases::default()
        },
        // Qwen2-MoE's `qkv_bias` defaults to true.
        Architecture::Qwen2Moe => Biases {
            qkv: fields.flag_or("qkv_bias", true)?,
            ..Biases::default()
        },
        Architecture::Qwen3 | Architecture::Qwen3Moe | Architecture::GptOss => Biases {
            qkv: attention_bias,
            output: attention_bias,
            mlp: false,
        },
        Architecture::NemotronH => Biases {
            qkv: attention_bias,
            output: attention_bias,
            mlp: fields.flag("mlp_bias")?,
        },
        // Llama 4's config class sets `attention_bias` false whatever the file says.
        Architecture::Llama4 => Biases::default(),
        Architecture::DeepseekV3 => {
            if attention_bias {
                return Err(fields.unsupported(
                    "attention_bias = true with latent attention: DeepSeek-V3's projections have no biases, and trainplan does not count them".into(),
                ));
            }
            Biases::default()
        }
    };
    let layers = fields.count32("num_hidden_layers")?;
    let latent = match architecture {
        Architecture::DeepseekV3 => Some(Latent {
            // The config class's 1,536 when absent; `null` for a full query projection
            // (DeepSeek-V2-Lite).
            q_rank: match fields.config.get("q_lora_rank") {
                None => Some(1_536),
                Some(_) => fields.optional("q_lora_rank")?,
            },
            kv_rank: fields.count("kv_lora_rank")?,
            nope_dim: fields.count("qk_nope_head_dim")?,
            rope_dim: fields.count("qk_rope_head_dim")?,
            v_dim: fields.count("v_head_dim")?,
        }),
        _ => None,
    };
    let ffn_key = match architecture {
        Architecture::Llama4 => "intermediate_size_mlp",
        _ => "intermediate_size",
    };
    let spec = ShapeSpec {
        name: name(&config, path),
        layers,
        hidden: fields.count("hidden_size")?,
        ffn: fields.count(ffn_key)?,
        heads,
        // Latent attention gives every head its own keys and values (transformers'
        // `DeepseekV3Attention` reads no `num_key_value_heads`).
        kv_heads: match fields.optional("num_key_value_heads")? {
            _ if latent.is_some() => heads,
            Some(kv) => fields.narrow("num_key_value_heads", kv)?,
            None => heads,
        },
        vocab: fields.count("vocab_size")?,
        // Latent attention's query and key heads are `d_nope + d_rope` wide.
        head_dim: match &latent {
            Some(l) => Some(l.nope_dim.checked_add(l.rope_dim).ok_or_else(|| {
                fields.invalid(
                    "qk_rope_head_dim",
                    l.rope_dim,
                    "a width whose sum with qk_nope_head_dim fits 64 bits",
                )
            })?),
            // gpt-oss's and Llama 4's config classes default to 64 and 128, the others to
            // `h / heads`.
            None => match (fields.optional("head_dim")?, architecture) {
                (None, Architecture::GptOss) => Some(64),
                (None, Architecture::Llama4) => Some(128),
                // Nemotron-H 8B's config names it `attention_head_dim` (Megatron-Bridge reads
                // either).
                (None, Architecture::NemotronH) => fields.optional("attention_head_dim")?,
                (d, _) => d,
            },
        },
        tied_embeddings: fields.flag("tie_word_embeddings")?,
        biases,
        architecture: fields.model_architecture(architecture, layers)?,
        experts: fields.experts(architecture, layers)?,
        attention: Attention {
            latent,
            qk_norm: matches!(architecture, Architecture::Qwen3 | Architecture::Qwen3Moe),
            sinks: architecture == Architecture::GptOss,
        },
        // DeepSeek-V3's multi-token-prediction depths (its own config class's field; absent,
        // none, as transformers builds none).
        mtp: match architecture {
            Architecture::DeepseekV3 => fields
                .whole("num_nextn_predict_layers")?
                .map_or(Ok(0), |n| fields.narrow("num_nextn_predict_layers", n))?,
            _ => 0,
        },
        hybrid: match architecture {
            Architecture::NemotronH => Some(fields.hybrid()?),
            _ => None,
        },
        style: Default::default(),
    };
    // The shape's checks name its own fields; say the config's keys instead.
    let prefix = fields.prefix;
    spec.build().map_err(|e| {
        e.renamed(|field| {
            let key = match field {
                "layers" => "num_hidden_layers",
                "hidden" => "hidden_size",
                "ffn" => ffn_key,
                "heads" => "num_attention_heads",
                "kv_heads" => "num_key_value_heads",
                "vocab" => "vocab_size",
                // A hybrid's pattern and Mamba-2 mixer (the mixer's heads and head width are
                // read as counts, so their errors come before the shape's checks).
                "pattern" => "hybrid_override_pattern",
                "groups" => "n_groups",
                "state" => "ssm_state_size",
                other => other,
            };
            format!("{}: {prefix}{key}", path.display())
        })
    })
}

/// The name a config gives its model: the last part of `_name_or_path`
/// (`meta-llama/Llama-3.1-8B` → `Llama-3.1-8B`), else the folder of a file called
/// `config.json`, else the file's stem; with every character but letters, digits and `._+-`
/// replaced by `-`, since the name goes into launcher scripts, TOML and tables.
fn name(config: &Map<String, Value>, path: &Path) -> String {
    safe(&raw_name(config, path))
}

/// `text` with every character but ASCII letters, digits and `._+-` replaced by `-`.
fn safe(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._+-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "config".into()
    } else {
        cleaned
    }
}

fn raw_name(config: &Map<String, Value>, path: &Path) -> String {
    let from_config = config
        .get("_name_or_path")
        .and_then(Value::as_str)
        .and_then(|p| p.trim_end_matches('/').rsplit('/').next())
        .filter(|n| !n.is_empty());
    if let Some(n) = from_config {
        return n.to_string();
    }
    let folder = (path.file_name().and_then(|f| f.to_str()) == Some("config.json"))
        .then(|| path.parent()?.file_name()?.to_str())
        .flatten();
    folder
        .or_else(|| path.file_stem()?.to_str())
        .unwrap_or("config")
        .to_string()
}

/// A config's fields, read with errors that name the file, the field and its value.
#[derive(Clone, Copy)]
struct Fields<'a> {
    config: &'a Map<String, Value>,
    path: &'a Path,
    /// Where the fields sit in the file (`text_config.` for Llama 4's language model).
    prefix: &'static str,
}

impl Fields<'_> {
    fn invalid(&self, field: &str, value: impl ToString, expected: &str) -> Error {
        Error::invalid(
            format!("{}: {}{field}", self.path.display(), self.prefix),
            value,
            expected,
        )
    }

    fn unsupported(&self, reason: String) -> Error {
        Error::Unsupported {
            path: self.path.to_path_buf(),
            reason,
        }
    }

    /// Refuses the expert fields on a dense architecture (zero, false or null are absent).
    fn refuse_experts(&self, architecture: Architecture) -> Result<()> {
        for field in EXPERT_FIELDS {
            match self.config.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) if n.as_f64() == Some(0.0) => {}
                Some(Value::Bool(false)) => {}
                Some(v) => {
                    return Err(self.unsupported(format!(
                        "a mixture-of-experts field ({field} = {v}) on {architecture:?}, a dense \
                         architecture; mixtures of experts are read from {}",
                        SUPPORTED[3..].join(", ")
                    )))
                }
            }
        }
        Ok(())
    }

    /// The architecture, from `architectures` (its first entry) or else `model_type`.
    fn architecture(&self) -> Result<Architecture> {
        let supported = SUPPORTED.join(", ");
        let named = match self.config.get("architectures") {
            None | Some(Value::Null) => None,
            Some(Value::Array(list)) => match list.as_slice() {
                [] => None,
                [Value::String(name)] => Some(name.as_str()),
                _ => {
                    return Err(self.invalid(
                        "architectures",
                        Value::Array(list.clone()),
                        "one architecture name, such as [\"LlamaForCausalLM\"]",
                    ))
                }
            },
            Some(v) => {
                return Err(self.invalid(
                    "architectures",
                    v,
                    "a list of architecture names such as [\"LlamaForCausalLM\"]",
                ))
            }
        };
        let by_type = self.config.get("model_type").and_then(Value::as_str);
        let architecture = match (named, by_type) {
            (Some("LlamaForCausalLM"), _) | (None, Some("llama")) => Architecture::Llama,
            (Some("MistralForCausalLM"), _) | (None, Some("mistral")) => Architecture::Mistral,
            (Some("Qwen2ForCausalLM"), _) | (None, Some("qwen2")) => Architecture::Qwen2,
            (Some("Qwen3ForCausalLM"), _) | (None, Some("qwen3")) => Architecture::Qwen3,
            (Some("MixtralForCausalLM"), _) | (None, Some("mixtral")) => Architecture::Mixtral,
            (Some("Qwen2MoeForCausalLM"), _) | (None, Some("qwen2_moe")) => Architecture::Qwen2Moe,
            (Some("Qwen3MoeForCausalLM"), _) | (None, Some("qwen3_moe")) => Architecture::Qwen3Moe,
            (Some("DeepseekV3ForCausalLM"), _) | (None, Some("deepseek_v3")) => {
                Architecture::DeepseekV3
            }
            (Some("GptOssForCausalLM"), _) | (None, Some("gpt_oss")) => Architecture::GptOss,
            (Some("NemotronHForCausalLM"), _) | (None, Some("nemotron_h")) => {
                Architecture::NemotronH
            }
            (Some("Llama4ForConditionalGeneration" | "Llama4ForCausalLM"), _)
            | (None, Some("llama4" | "llama4_text")) => Architecture::Llama4,
            (Some(other), _) | (None, Some(other)) => {
                return Err(self.unsupported(format!(
                    "architecture {other} is not supported; trainplan reads {supported}"
                )))
            }
            (None, None) => {
                return Err(self.invalid(
                    "architectures",
                    "missing",
                    "an architecture (architectures or model_type)",
                ))
            }
        };
        Ok(architecture)
    }

    /// A whole number ≥ 1 that may be absent or null.
    fn optional(&self, field: &str) -> Result<Option<u64>> {
        match self.config.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some_and(|x| x >= 1) => Ok(n.as_u64()),
            Some(v) => Err(self.invalid(field, v, "a whole number ≥ 1")),
        }
    }

    /// A whole number ≥ 1 that must be present.
    fn count(&self, field: &str) -> Result<u64> {
        self.optional(field)?
            .ok_or_else(|| self.invalid(field, "missing", "a whole number ≥ 1"))
    }

    /// A whole number from 1 to 2^32 − 1 that must be present.
    fn count32(&self, field: &str) -> Result<u32> {
        let n = self.count(field)?;
        self.narrow(field, n)
    }

    fn narrow(&self, field: &str, n: u64) -> Result<u32> {
        u32::try_from(n).map_err(|_| self.invalid(field, n, "a whole number of at most 4294967295"))
    }

    /// A list of whole numbers (layer indices), empty when absent or null.
    fn layer_list(&self, field: &str) -> Result<Vec<u32>> {
        match self.config.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| self.invalid(field, v, "a list of layer numbers"))
                })
                .collect(),
            Some(v) => Err(self.invalid(field, v, "a list of layer numbers")),
        }
    }

    /// The mixture of experts an MoE architecture's config describes, `None` for a dense one.
    /// Each family's rule for which layers are mixtures is written out as the list of layers,
    /// then as the rule that gives it ([`LayerSet::from_list`]).
    fn experts(&self, architecture: Architecture, layers: u32) -> Result<Option<Experts>> {
        let (routed_key, ffn_key) = match architecture {
            Architecture::Llama
            | Architecture::Mistral
            | Architecture::Qwen2
            | Architecture::Qwen3 => return Ok(None),
            Architecture::Mixtral | Architecture::GptOss => {
                ("num_local_experts", "intermediate_size")
            }
            Architecture::Llama4 => ("num_local_experts", "intermediate_size"),
            Architecture::Qwen2Moe | Architecture::Qwen3Moe => {
                ("num_experts", "moe_intermediate_size")
            }
            Architecture::DeepseekV3 => ("n_routed_experts", "moe_intermediate_size"),
            // Experts where the pattern has `E` blocks; none without.
            Architecture::NemotronH => {
                if !self.pattern()?.contains('E') {
                    return Ok(None);
                }
                ("n_routed_experts", "moe_intermediate_size")
            }
        };
        let routed = self.count32(routed_key)?;
        let per_token = self.count32("num_experts_per_tok")?;
        if per_token > routed {
            return Err(self.invalid(
                "num_experts_per_tok",
                per_token,
                &format!("at most the {routed} experts of {routed_key}"),
            ));
        }
        let ffn = self.count(ffn_key)?;
        // A step of u32::MAX or more leaves at most the first layer; step 0 is refused above.
        let rule = |first: u64, step: u64| LayerSet::Every {
            first: u32::try_from(first).unwrap_or(u32::MAX),
            step: u32::try_from(step).unwrap_or(u32::MAX),
        };
        let (moe, rule_keys) = match architecture {
            Architecture::Qwen2Moe | Architecture::Qwen3Moe => {
                // transformers: sparse when not in `mlp_only_layers` and `(i + 1) % step == 0`.
                let step = self.optional("decoder_sparse_step")?.unwrap_or(1);
                let every = rule(step - 1, step);
                let mut dense = self.layer_list("mlp_only_layers")?;
                dense.sort_unstable();
                let moe = if dense.is_empty() {
                    every
                } else {
                    // The list is as long as the rule's layers: bounded before it is written.
                    if every.count(layers) > MAX_LISTED_LAYERS {
                        return Err(self.invalid(
                            "num_hidden_layers",
                            layers,
                            &format!("at most {MAX_LISTED_LAYERS} MoE layers with mlp_only_layers"),
                        ));
                    }
                    let list = every
                        .indices(layers)
                        .filter(|i| dense.binary_search(i).is_err())
                        .collect();
                    LayerSet::from_list(list, layers)
                };
                (moe, "decoder_sparse_step and mlp_only_layers")
            }
            Architecture::DeepseekV3 => {
                // DeepSeek's code: MoE when `i >= first_k_dense_replace and i % moe_layer_freq
                // == 0`, the multiples of the frequency from the first one past the dense layers.
                // The config class's defaults: 3 dense layers, one shared expert.
                let first = self.whole("first_k_dense_replace")?.unwrap_or(3);
                let every = self.optional("moe_layer_freq")?.unwrap_or(1);
                (
                    rule(first.div_ceil(every).saturating_mul(every), every),
                    "first_k_dense_replace and moe_layer_freq",
                )
            }
            Architecture::Llama4 => match self.config.get("moe_layers") {
                None | Some(Value::Null) => {
                    // transformers: `range(step - 1, L, step)`.
                    let step = self.optional("interleave_moe_layer_step")?.unwrap_or(1);
                    (rule(step - 1, step), "interleave_moe_layer_step")
                }
                Some(_) => {
                    let moe = self.layer_list("moe_layers")?;
                    if let Some(&bad) = moe.iter().find(|&&i| i >= layers) {
                        return Err(self.invalid(
                            "moe_layers",
                            bad,
                            &format!("layer numbers below num_hidden_layers = {layers}"),
                        ));
                    }
                    (LayerSet::from_list(moe, layers), "moe_layers")
                }
            },
            Architecture::NemotronH => {
                let moe = crate::model::hybrid::moe_blocks(self.pattern()?)
                    .take_while(|&i| i < layers)
                    .collect();
                (LayerSet::from_list(moe, layers), "hybrid_override_pattern")
            }
            _ => (LayerSet::ALL, routed_key),
        };
        if moe.count(layers) == 0 {
            return Err(self.invalid(
                rule_keys,
                "no layer with experts",
                &format!("at least one of the {layers} layers a mixture of experts"),
            ));
        }
        let shared_ffn = match architecture {
            Architecture::Qwen2Moe => self.count("shared_expert_intermediate_size")?,
            Architecture::DeepseekV3 => {
                let shared = self.whole("n_shared_experts")?.unwrap_or(1);
                shared.checked_mul(ffn).ok_or_else(|| {
                    self.invalid(
                        "n_shared_experts",
                        shared,
                        "a count whose width fits 64 bits",
                    )
                })?
            }
            Architecture::Llama4 => ffn,
            // One shared MLP of that width whatever `n_shared_experts` says (transformers'
            // `NemotronHMoE`).
            Architecture::NemotronH => self
                .whole("moe_shared_expert_intermediate_size")?
                .unwrap_or(0),
            _ => 0,
        };
        Ok(Some(Experts {
            routed,
            per_token,
            ffn,
            shared_ffn,
            shared_gate: architecture == Architecture::Qwen2Moe,
            biases: architecture == Architecture::GptOss,
            router_bias: architecture == Architecture::GptOss,
            // Nemotron 3's router keeps DeepSeek-V3's score correction
            // (`e_score_correction_bias`, in its checkpoint).
            score_bias: matches!(
                architecture,
                Architecture::DeepseekV3 | Architecture::NemotronH
            ),
            groups: self.groups(architecture)?,
            layers: moe,
        }))
    }

    /// DeepSeek-V3's group-limited routing, `n_group` groups of which a token's experts come
    /// from `topk_group` (its `noaux_tc` router, HF `DeepseekV3MoEGate`); none where every
    /// group is taken (Kimi K2: 1 of 1) or for other families.
    fn groups(&self, architecture: Architecture) -> Result<Option<crate::model::Groups>> {
        if architecture != Architecture::DeepseekV3 {
            return Ok(None);
        }
        let (Some(count), Some(per_token)) = (self.whole("n_group")?, self.whole("topk_group")?)
        else {
            return Ok(None);
        };
        if per_token >= count {
            return Ok(None);
        }
        let count32 = |field: &str, v: u64| {
            u32::try_from(v).map_err(|_| self.invalid(field, v, "a count below 2^32"))
        };
        Ok(Some(crate::model::Groups {
            count: count32("n_group", count)?,
            per_token: count32("topk_group", per_token)?,
        }))
    }

    /// A whole number ≥ 0 that may be absent or null.
    fn whole(&self, field: &str) -> Result<Option<u64>> {
        match self.config.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
            Some(v) => Err(self.invalid(field, v, "a whole number ≥ 0")),
        }
    }

    /// A number that may be absent or null.
    fn number(&self, field: &str) -> Result<Option<f64>> {
        match self.config.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(self.invalid(field, v, "a number")),
        }
    }

    /// RoPE, ε and the window a launcher must build, with each architecture's config-class
    /// defaults for absent fields ([`Architecture::defaults`]; Mistral's `sliding_window`
    /// 4,096 unless null; Qwen2's and Qwen MoE's window only with `use_sliding_window`, and
    /// then on the layers from `max_window_layers` on, which is refused; gpt-oss's on the
    /// layers `layer_types` marks).
    fn model_architecture(&self, kind: Architecture, layers: u32) -> Result<ModelArchitecture> {
        let rope_scaling = match self.config.get("rope_scaling") {
            None | Some(Value::Null) => None,
            Some(Value::Object(r)) => {
                // `rope_type`, or the older `type`; a value that is there must be a name,
                // never read as absent (which would drop the scaling).
                let key = if r.contains_key("rope_type") {
                    "rope_type"
                } else {
                    "type"
                };
                let kind = match r.get(key) {
                    None | Some(Value::Null) => "default",
                    Some(Value::String(name)) => name.as_str(),
                    Some(v) => {
                        return Err(self.invalid(
                            &format!("rope_scaling.{key}"),
                            v,
                            "a name, such as \"llama3\", \"yarn\" or \"default\"",
                        ))
                    }
                };
                // A key that is there must hold a number of the right kind, never read as
                // absent (which would take Llama 3.1's constants).
                let number = |key: &str| -> Result<Option<f64>> {
                    match r.get(key) {
                        None | Some(Value::Null) => Ok(None),
                        Some(Value::Number(n)) => Ok(n.as_f64()),
                        Some(v) => Err(self.invalid(&format!("rope_scaling.{key}"), v, "a number")),
                    }
                };
                match kind {
                    "default" => None,
                    _ => Some(RopeScaling {
                        rope_type: kind.to_string(),
                        factor: number("factor")?.ok_or_else(|| {
                            self.invalid("rope_scaling.factor", "missing", "a number > 0")
                        })?,
                        low_freq_factor: number("low_freq_factor")?,
                        high_freq_factor: number("high_freq_factor")?,
                        original_max_position_embeddings: match r
                            .get("original_max_position_embeddings")
                        {
                            None | Some(Value::Null) => None,
                            Some(Value::Number(n)) if n.as_u64().is_some_and(|x| x >= 1) => {
                                n.as_u64()
                            }
                            Some(v) => {
                                return Err(self.invalid(
                                    "rope_scaling.original_max_position_embeddings",
                                    v,
                                    "a whole number ≥ 1",
                                ))
                            }
                        },
                    }),
                }
            }
            Some(v) => return Err(self.invalid("rope_scaling", v, "an object or null")),
        };
        let mut window_layers = None;
        let sliding_window = match kind {
            Architecture::Llama | Architecture::DeepseekV3 | Architecture::Llama4 => None,
            Architecture::NemotronH => self.optional("sliding_window")?,
            Architecture::Mistral => match self.config.get("sliding_window") {
                Some(Value::Null) => None,
                None => Some(4096),
                Some(_) => self.optional("sliding_window")?,
            },
            Architecture::Mixtral => self.optional("sliding_window")?,
            Architecture::Qwen2
            | Architecture::Qwen3
            | Architecture::Qwen2Moe
            | Architecture::Qwen3Moe => {
                if self.flag("use_sliding_window")? {
                    return Err(self.unsupported(
                        "use_sliding_window = true: Qwen2 windows only the layers from max_window_layers on, which trainplan cannot hand a launcher as one window".into(),
                    ));
                }
                None
            }
            Architecture::GptOss => {
                // transformers' default: sliding on the even layers, full on the odd.
                let sliding = match self.config.get("layer_types") {
                    None | Some(Value::Null) => LayerSet::Every { first: 0, step: 2 },
                    Some(Value::Array(kinds)) if kinds.len() == layers as usize => {
                        let mut sliding = Vec::new();
                        for (i, kind) in (0..layers).zip(kinds) {
                            match kind.as_str() {
                                Some("sliding_attention") => sliding.push(i),
                                Some("full_attention") => {}
                                _ => {
                                    return Err(self.invalid(
                                        "layer_types",
                                        kind,
                                        "sliding_attention or full_attention",
                                    ))
                                }
                            }
                        }
                        LayerSet::from_list(sliding, layers)
                    }
                    Some(v) => {
                        return Err(self.invalid(
                            "layer_types",
                            v,
                            &format!("a list of {layers} attention kinds"),
                        ))
                    }
                };
                // The config class's 128 when absent; `null` for no window.
                let window = match self.config.get("sliding_window") {
                    None => Some(128),
                    Some(_) => self.optional("sliding_window")?,
                };
                let n = sliding.count(layers);
                if window.is_some() && n > 0 && n < layers {
                    window_layers = Some(sliding);
                }
                window.filter(|_| n > 0)
            }
        };
        let (theta, eps) = kind.defaults();
        Ok(ModelArchitecture {
            rope_theta: self.number("rope_theta")?.unwrap_or(theta),
            rope_scaling,
            norm_eps: self.number("rms_norm_eps")?.unwrap_or(eps),
            sliding_window,
            window_layers,
        })
    }

    /// Nemotron-H's `hybrid_override_pattern`, one character a layer.
    fn pattern(&self) -> Result<&str> {
        match self.config.get("hybrid_override_pattern") {
            Some(Value::String(p)) => Ok(p),
            Some(v) => Err(self.invalid(
                "hybrid_override_pattern",
                v,
                "a string of M, *, - and E, one a layer",
            )),
            None => Err(self.invalid(
                "hybrid_override_pattern",
                "missing",
                "a string of M, *, - and E, one a layer",
            )),
        }
    }

    /// Nemotron-H's pattern and Mamba-2 mixer (transformers' `NemotronHConfig` and
    /// `NemotronHMamba2Mixer`): `mamba_num_heads` heads of `mamba_head_dim` (without
    /// `mamba_num_heads`, `expand·h/mamba_head_dim`, Megatron-core's rule), `n_groups`,
    /// `ssm_state_size` and `conv_kernel`. What trainplan does not count is refused by name:
    /// biases on the mixer's projections (`use_bias`), a convolution without one
    /// (`use_conv_bias` false), an MLP activation other than squared ReLU, and Nemotron 3
    /// Super's latent experts (`moe_latent_size`).
    fn hybrid(&self) -> Result<crate::model::Hybrid> {
        if self.flag("use_bias")? {
            return Err(self.unsupported(
                "use_bias = true: biases on the Mamba-2 projections, which Megatron-core refuses and trainplan does not count".into(),
            ));
        }
        if !self.flag_or("use_conv_bias", true)? {
            return Err(self.unsupported(
                "use_conv_bias = false: a Mamba-2 convolution without its bias, which Megatron-core refuses".into(),
            ));
        }
        match self.config.get("mlp_hidden_act") {
            None | Some(Value::Null) => {}
            Some(Value::String(a)) if a == "relu2" => {}
            Some(v) => {
                return Err(self.invalid(
                    "mlp_hidden_act",
                    v,
                    "relu2, Nemotron-H's squared ReLU (the one it trains)",
                ))
            }
        }
        if self.whole("moe_latent_size")?.is_some() {
            return Err(self.unsupported(
                "moe_latent_size: latent experts (Nemotron 3 Super's LatentMoE), which trainplan does not count yet".into(),
            ));
        }
        let head_dim = self.count("mamba_head_dim")?;
        let heads = match self.optional("mamba_num_heads")? {
            Some(h) => self.narrow("mamba_num_heads", h)?,
            None => {
                let expand = self.optional("expand")?.unwrap_or(2);
                let inner = expand
                    .checked_mul(self.count("hidden_size")?)
                    .filter(|w| w % head_dim == 0)
                    .ok_or_else(|| {
                        self.invalid(
                            "mamba_head_dim",
                            head_dim,
                            "a divisor of expand × hidden_size, where mamba_num_heads is absent",
                        )
                    })?;
                self.narrow("mamba_head_dim", inner / head_dim)?
            }
        };
        Ok(crate::model::Hybrid {
            pattern: self.pattern()?.to_string(),
            mamba: crate::model::hybrid::Mamba {
                heads,
                head_dim,
                groups: self.count32("n_groups")?,
                state: self.count("ssm_state_size")?,
                conv_kernel: self.count("conv_kernel")?,
            },
            gated: false,
        })
    }

    /// A boolean that is false when absent or null.
    fn flag(&self, field: &str) -> Result<bool> {
        self.flag_or(field, false)
    }

    /// A boolean that is `default` when absent or null.
    fn flag_or(&self, field: &str, default: bool) -> Result<bool> {
        match self.config.get(field) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.invalid(field, v, "true or false")),
        }
    }
}
