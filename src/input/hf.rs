//! Hugging Face `config.json` files: the shape of a dense Llama-family decoder read from the
//! fields transformers writes, so any such checkpoint can be planned by pointing at its config.
//!
//! Accepted architectures, and what each one's modelling code builds (transformers 4.46,
//! `models/{llama,mistral,qwen2}/modeling_*.py`):
//!
//! - `LlamaForCausalLM`: biases on the q, k, v and o projections when `attention_bias`, on the
//!   gate, up and down projections when `mlp_bias`; `head_dim` when given, else `h / heads`.
//! - `MistralForCausalLM`: no biases; `head_dim` when given (Mistral NeMo: 128 with h = 5,120).
//! - `Qwen2ForCausalLM`: biases on q, k and v always (hard-coded; the config has no key), none on
//!   o or the MLP.
//!
//! Beyond the counts, what a launcher must build the same model with: `rope_theta`,
//! `rope_scaling`, `rms_norm_eps` and Mistral's `sliding_window` (with the config classes'
//! defaults when absent).
//!
//! All three: `num_key_value_heads` defaults to `num_attention_heads`, `tie_word_embeddings` to
//! false (their config classes' defaults). A mixture of experts (`num_local_experts`,
//! `num_experts`, `n_routed_experts`, `moe_intermediate_size`, `num_experts_per_tok`) or any
//! other architecture is refused by name rather than approximated.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::input::strict::Nulls;
use crate::input::{parse_json_with, read_text, HF_CONFIG};
use crate::model::{Architecture as ModelArchitecture, Biases, RopeScaling, Shape, ShapeSpec};

/// The architectures [`read`] accepts, as `architectures` names them.
pub const SUPPORTED: [&str; 3] = ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"];

/// Fields that mark a mixture of experts, in the families that use them (Mixtral and
/// Llama 4: `num_local_experts`; Qwen MoE and OLMoE: `num_experts`; DeepSeek: `n_routed_experts`).
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
}

/// Reads the shape a `config.json` describes.
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
    let fields = Fields {
        config: &config,
        path,
    };
    let architecture = fields.architecture()?;
    let heads = fields.count32("num_attention_heads")?;
    let biases = match architecture {
        Architecture::Llama => {
            let attention = fields.flag("attention_bias")?;
            Biases {
                qkv: attention,
                output: attention,
                mlp: fields.flag("mlp_bias")?,
            }
        }
        Architecture::Mistral => Biases::default(),
        Architecture::Qwen2 => Biases {
            qkv: true,
            ..Biases::default()
        },
    };
    let spec = ShapeSpec {
        name: name(&config, path),
        layers: fields.count32("num_hidden_layers")?,
        hidden: fields.count("hidden_size")?,
        ffn: fields.count("intermediate_size")?,
        heads,
        kv_heads: match fields.optional("num_key_value_heads")? {
            Some(kv) => fields.narrow("num_key_value_heads", kv)?,
            None => heads,
        },
        vocab: fields.count("vocab_size")?,
        head_dim: fields.optional("head_dim")?,
        tied_embeddings: fields.flag("tie_word_embeddings")?,
        biases,
        architecture: fields.model_architecture(architecture)?,
    };
    // The shape's checks name its own fields; say the config's keys instead.
    spec.build().map_err(|e| {
        e.renamed(|field| {
            let key = match field {
                "layers" => "num_hidden_layers",
                "hidden" => "hidden_size",
                "ffn" => "intermediate_size",
                "heads" => "num_attention_heads",
                "kv_heads" => "num_key_value_heads",
                "vocab" => "vocab_size",
                other => other,
            };
            format!("{}: {key}", path.display())
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
struct Fields<'a> {
    config: &'a Map<String, Value>,
    path: &'a Path,
}

impl Fields<'_> {
    fn invalid(&self, field: &str, value: impl ToString, expected: &str) -> Error {
        Error::invalid(format!("{}: {field}", self.path.display()), value, expected)
    }

    fn unsupported(&self, reason: String) -> Error {
        Error::Unsupported {
            path: self.path.to_path_buf(),
            reason,
        }
    }

    /// The architecture, from `architectures` (its first entry) or else `model_type`, after
    /// refusing a mixture of experts.
    fn architecture(&self) -> Result<Architecture> {
        let supported = SUPPORTED.join(", ");
        for field in EXPERT_FIELDS {
            match self.config.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) if n.as_f64() == Some(0.0) => {}
                Some(Value::Bool(false)) => {}
                Some(v) => {
                    return Err(self.unsupported(format!(
                        "a mixture-of-experts model ({field} = {v}); trainplan plans dense \
                         decoders: {supported}"
                    )))
                }
            }
        }
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
            (Some(other), _) | (None, Some(other)) => {
                return Err(self.unsupported(format!(
                    "architecture {other} is not supported; trainplan plans dense decoders: \
                     {supported}"
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

    /// A number that may be absent or null.
    fn number(&self, field: &str) -> Result<Option<f64>> {
        match self.config.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(self.invalid(field, v, "a number")),
        }
    }

    /// RoPE, ε and the window a launcher must build, with each architecture's config-class
    /// defaults for absent fields (transformers 4.46: `rope_theta` 10,000 and `rms_norm_eps`
    /// 1e-6 for all three; Mistral's `sliding_window` 4,096 unless null; Qwen2's window only
    /// with `use_sliding_window`, and then on the layers from `max_window_layers` on, which one
    /// window for the whole model cannot say, so it is refused).
    fn model_architecture(&self, kind: Architecture) -> Result<ModelArchitecture> {
        let rope_scaling = match self.config.get("rope_scaling") {
            None | Some(Value::Null) => None,
            Some(Value::Object(r)) => {
                let kind = r
                    .get("rope_type")
                    .or_else(|| r.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("default");
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
        let sliding_window = match kind {
            Architecture::Llama => None,
            Architecture::Mistral => match self.config.get("sliding_window") {
                Some(Value::Null) => None,
                None => Some(4096),
                Some(_) => self.optional("sliding_window")?,
            },
            Architecture::Qwen2 => {
                if self.flag("use_sliding_window")? {
                    return Err(self.unsupported(
                        "use_sliding_window = true: Qwen2 windows only the layers from max_window_layers on, which trainplan cannot hand a launcher as one window".into(),
                    ));
                }
                None
            }
        };
        Ok(ModelArchitecture {
            rope_theta: self.number("rope_theta")?.unwrap_or(10_000.0),
            rope_scaling,
            norm_eps: self.number("rms_norm_eps")?.unwrap_or(1e-6),
            sliding_window,
        })
    }

    /// A boolean that is false when absent or null.
    fn flag(&self, field: &str) -> Result<bool> {
        match self.config.get(field) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.invalid(field, v, "true or false")),
        }
    }
}
