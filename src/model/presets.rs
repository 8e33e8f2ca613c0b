//! Shapes by name: the Llama 3 presets, and the dimension names (`L80-h8192-f28672`) that name
//! any Llama-like shape, a family's among them, and read back as it.

use crate::error::{Error, Result};
use crate::model::{Architecture, Attention, Biases, Experts, Shape, ShapeSpec};

/// The shapes trainplan knows by name: Llama 3 / 3.1 8B, 70B and 405B, from the published
/// `config.json` files of the checkpoints (SPEC.md §2), with their RoPE and ε
/// ([`Architecture::llama31`]).
pub fn presets() -> Vec<Shape> {
    let llama = |name: &str, layers, hidden, ffn, heads| {
        Shape::new(name, layers, hidden, ffn, heads, 8, 128_256)
            .expect("the Llama 3 shapes are valid")
    };
    vec![
        llama("llama3-8b", 32, 4_096, 14_336, 32),
        llama("llama3-70b", 80, 8_192, 28_672, 64),
        llama("llama3-405b", 126, 16_384, 53_248, 128),
    ]
}

/// The preset called `name`. Accepts the full name (`llama3-70b`) or the size alone (`70b`),
/// in any case.
pub fn preset(name: &str) -> Result<Shape> {
    let wanted = name.trim().to_ascii_lowercase();
    if let Some(shape) = presets()
        .into_iter()
        .find(|s| s.name == wanted || s.name.strip_prefix("llama3-") == Some(wanted.as_str()))
    {
        return Ok(shape);
    }
    if let Some(shape) = family_shape(name.trim())? {
        return Ok(shape);
    }
    let known: Vec<String> = presets()
        .iter()
        .map(|s| {
            s.name
                .strip_prefix("llama3-")
                .unwrap_or(&s.name)
                .to_string()
        })
        .collect();
    Err(Error::UnknownModel {
        name: name.to_string(),
        known: format!(
            "{}, or a family shape such as L80-h8192-f28672",
            known.join(", ")
        ),
    })
}

/// Llama 3's head dimension: what a dimension name leaves out, and the default of ad-hoc
/// shapes and families.
pub const LLAMA3_HEAD_DIM: u64 = 128;
/// Llama 3's KV heads, likewise.
pub const LLAMA3_KV_HEADS: u32 = 8;
/// Llama 3's vocabulary, likewise.
pub const LLAMA3_VOCAB: u64 = 128_256;

impl ShapeSpec {
    /// The shape, named by its dimensions ([`Self::dimension_name`]) and checked.
    pub fn build_named(mut self) -> Result<Shape> {
        self.name = self.dimension_name();
        self.build()
    }

    /// A Llama-like shape named by its dimensions, `L<layers>-h<hidden>-f<ffn>`, with a suffix
    /// for each dimension that is not Llama 3's: `-a<heads>` when the heads are not `h / 128`,
    /// `-d<head_dim>` when that is not `h / heads`, `-kv<kv_heads>` when not 8, `-v<vocab>` when
    /// not 128,256, `-tied` for tied embeddings, and for a family's mixture of experts (every
    /// layer, no shared expert) `-e<routed>k<per token>w<expert width>`. [`preset`] reads every
    /// such name back.
    pub fn dimension_name(&self) -> String {
        let mut name = format!("L{}-h{}-f{}", self.layers, self.hidden, self.ffn);
        if u64::from(self.heads) * LLAMA3_HEAD_DIM != self.hidden {
            name += &format!("-a{}", self.heads);
        }
        if let Some(d) = self.head_dim {
            if u64::from(self.heads) * d != self.hidden {
                name += &format!("-d{d}");
            }
        }
        if self.kv_heads != LLAMA3_KV_HEADS {
            name += &format!("-kv{}", self.kv_heads);
        }
        if self.vocab != LLAMA3_VOCAB {
            name += &format!("-v{}", self.vocab);
        }
        if self.tied_embeddings {
            name += "-tied";
        }
        if let Some(e) = &self.experts {
            name += &format!("-e{}k{}w{}", e.routed, e.per_token, e.ffn);
        }
        // A GPT-style block: its norm, activation and position table (names no preset reads).
        if self.style.norm == crate::model::Norm::LayerNorm {
            name += "-ln";
        }
        name += match self.style.mlp {
            crate::model::Mlp::Swiglu => "",
            crate::model::Mlp::Gelu => "-gelu",
            crate::model::Mlp::Relu => "-relu",
            crate::model::Mlp::SquaredRelu => "-relu2",
        };
        if let crate::model::Positions::Learned { rows } = self.style.positions {
            name += &format!("-pos{rows}");
        }
        name
    }
}

/// A family's mixture of experts as its name gives it, `e<routed>k<per token>w<width>`.
fn named_experts(part: &str) -> Option<Experts> {
    let rest = part.strip_prefix('e')?;
    let (routed, rest) = rest.split_once('k')?;
    let (per_token, width) = rest.split_once('w')?;
    Some(Experts::plain(
        routed.parse().ok()?,
        per_token.parse().ok()?,
        width.parse().ok()?,
    ))
}

/// A shape named by its dimensions as [`ShapeSpec::dimension_name`] names it (a family's
/// shapes are, `L80-h8192-f28672`); `None` if the name is not of that form.
fn family_shape(name: &str) -> Result<Option<Shape>> {
    let mut parts = name.split('-');
    let mut number =
        |prefix: &str| -> Option<u64> { parts.next()?.strip_prefix(prefix)?.parse::<u64>().ok() };
    let (Some(layers), Some(hidden), Some(ffn)) = (number("L"), number("h"), number("f")) else {
        return Ok(None);
    };
    let (mut heads, mut head_dim, mut kv_heads, mut vocab, mut tied) =
        (None, None, u64::from(LLAMA3_KV_HEADS), LLAMA3_VOCAB, false);
    let mut experts = None;
    for part in parts {
        let value = |prefix: &str| {
            part.strip_prefix(prefix)
                .and_then(|v| v.parse::<u64>().ok())
        };
        if part == "tied" {
            tied = true;
        } else if let Some(e) = named_experts(part) {
            experts = Some(e);
        } else if let Some(kv) = value("kv") {
            kv_heads = kv;
        } else if let Some(a) = value("a") {
            heads = Some(a);
        } else if let Some(d) = value("d") {
            head_dim = Some(d);
        } else if let Some(v) = value("v") {
            vocab = v;
        } else {
            return Ok(None);
        }
    }
    let heads = match heads {
        Some(a) => a,
        None if hidden % LLAMA3_HEAD_DIM == 0 && hidden > 0 => hidden / LLAMA3_HEAD_DIM,
        None => return Err(Error::invalid(
            "model",
            name,
            "a shape whose hidden size is a multiple of 128, or whose heads are named (-a<heads>)",
        )),
    };
    let narrow = |what: &str, n: u64| {
        u32::try_from(n)
            .map_err(|_| Error::invalid("model", name, format!("{what} of at most 2^32 − 1")))
    };
    ShapeSpec {
        name: name.to_string(),
        layers: narrow("layers", layers)?,
        hidden,
        ffn,
        heads: narrow("heads", heads)?,
        kv_heads: narrow("KV heads", kv_heads)?,
        vocab,
        head_dim,
        tied_embeddings: tied,
        biases: Biases::default(),
        architecture: Architecture::default(),
        experts,
        attention: Attention::default(),
        mtp: 0,
        hybrid: None,
        style: Default::default(),
    }
    .build()
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_found_by_size_or_full_name() {
        assert_eq!(preset("70B").unwrap().name, "llama3-70b");
        assert_eq!(preset("llama3-405b").unwrap().layers, 126);
        let e = preset("13b").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown model '13b': expected one of 8b, 70b, 405b, or a family shape such as L80-h8192-f28672"
        );
        // A family's name grades the same shape: L80-h8192-f28672 is Llama 3 70B.
        let family = preset("L80-h8192-f28672").unwrap();
        assert!(family.same_dimensions(&preset("70b").unwrap()));
        assert!(preset("L80-h8000-f28672").is_err());
    }

    #[test]
    fn a_dimension_name_reads_back_as_its_shape() {
        let nemo = ShapeSpec {
            name: String::new(),
            layers: 40,
            hidden: 5_120,
            ffn: 14_336,
            heads: 32,
            kv_heads: 8,
            vocab: 131_072,
            head_dim: Some(128),
            tied_embeddings: false,
            biases: Biases::default(),
            architecture: Architecture::default(),
            experts: None,
            attention: Attention::default(),
            mtp: 0,
            hybrid: None,
            style: Default::default(),
        };
        let name = nemo.dimension_name();
        assert_eq!(name, "L40-h5120-f14336-a32-d128-v131072");
        let back = preset(&name).unwrap();
        assert!(back.same_dimensions(&ShapeSpec { name, ..nemo }.build().unwrap()));
        // Llama 3.2 1B: 32 heads of 64, tied.
        let one = preset("L16-h2048-f8192-a32-tied").unwrap();
        assert_eq!(one.params(), 1_235_814_400);
        assert_eq!(preset("L32-h4096-f14336").unwrap().name, "L32-h4096-f14336");
        assert!(preset("L32-h4096-f14336-x3").is_err());
    }
}
