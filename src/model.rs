//! Model shapes: the Llama 3 architecture (untied embeddings, SwiGLU MLP, grouped-query
//! attention, RMSNorm, no biases) and its parameter count, computed from the shape.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The shape of a Llama-family decoder. Counts only; the parameter count is derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ShapeFields")]
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
}

/// A shape as read from a file, before [`Shape::new`] checks it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapeFields {
    name: String,
    layers: u32,
    hidden: u64,
    ffn: u64,
    heads: u32,
    kv_heads: u32,
    vocab: u64,
}

impl TryFrom<ShapeFields> for Shape {
    type Error = Error;
    fn try_from(f: ShapeFields) -> Result<Self> {
        Shape::new(
            &f.name, f.layers, f.hidden, f.ffn, f.heads, f.kv_heads, f.vocab,
        )
    }
}

impl Shape {
    /// A shape, checked: every count positive, the heads dividing the hidden size, the KV heads
    /// dividing the heads.
    pub fn new(
        name: &str,
        layers: u32,
        hidden: u64,
        ffn: u64,
        heads: u32,
        kv_heads: u32,
        vocab: u64,
    ) -> Result<Self> {
        let positive = [
            ("layers", u64::from(layers)),
            ("hidden", hidden),
            ("ffn", ffn),
            ("heads", u64::from(heads)),
            ("kv_heads", u64::from(kv_heads)),
            ("vocab", vocab),
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
        if hidden % u64::from(heads) != 0 {
            return Err(Error::invalid(
                format!("{name}.heads"),
                heads,
                format!("a divisor of the hidden size {hidden}"),
            ));
        }
        if heads % kv_heads != 0 {
            return Err(Error::invalid(
                format!("{name}.kv_heads"),
                kv_heads,
                format!("a divisor of the {heads} attention heads"),
            ));
        }
        let shape = Shape {
            name: name.to_string(),
            layers,
            hidden,
            ffn,
            heads,
            kv_heads,
            vocab,
        };
        if shape.checked_params().is_none() {
            return Err(Error::invalid(
                format!("{name}.params"),
                "more than 2^64",
                "a shape whose parameters can be counted",
            ));
        }
        Ok(shape)
    }

    /// The parameter count with every product checked, `None` past `u64::MAX`.
    fn checked_params(&self) -> Option<u64> {
        let h = self.hidden;
        let kv_width = u64::from(self.kv_heads).checked_mul(self.head_dim())?;
        let per_layer = 2u64
            .checked_mul(h)?
            .checked_mul(h)?
            .checked_add(2u64.checked_mul(h)?.checked_mul(kv_width)?)?
            .checked_add(3u64.checked_mul(h)?.checked_mul(self.ffn)?)?
            .checked_add(2u64.checked_mul(h)?)?;
        u64::from(self.layers)
            .checked_mul(per_layer)?
            .checked_add(2u64.checked_mul(self.vocab)?.checked_mul(h)?)?
            .checked_add(h)
    }

    /// Whether `other` has the same dimensions, whatever its name.
    pub fn same_dimensions(&self, other: &Shape) -> bool {
        (
            self.layers,
            self.hidden,
            self.ffn,
            self.heads,
            self.kv_heads,
            self.vocab,
        ) == (
            other.layers,
            other.hidden,
            other.ffn,
            other.heads,
            other.kv_heads,
            other.vocab,
        )
    }

    /// Head dimension `d = h / heads`.
    pub fn head_dim(&self) -> u64 {
        self.hidden / u64::from(self.heads)
    }

    /// Parameters of one transformer layer (SPEC.md §2):
    /// `2h² + 2·h·(kv·d) + 3·h·f + 2h` — the query and output projections, the key and value
    /// projections of grouped-query attention, SwiGLU's gate, up and down matrices, and the two
    /// RMSNorm weight vectors. Llama has no biases.
    pub fn params_per_layer(&self) -> u64 {
        let h = self.hidden;
        let kv_width = u64::from(self.kv_heads) * self.head_dim();
        2 * h * h + 2 * h * kv_width + 3 * h * self.ffn + 2 * h
    }

    /// Parameters of the whole model N (SPEC.md §2): `L · per_layer + 2·V·h + h` — the layers,
    /// the untied input embedding and output head, and the final RMSNorm.
    pub fn params(&self) -> u64 {
        u64::from(self.layers) * self.params_per_layer()
            + 2 * self.vocab * self.hidden
            + self.hidden
    }
}

/// The shapes trainplan knows by name: Llama 3 / 3.1 8B, 70B and 405B, from the published
/// `config.json` files of the checkpoints (SPEC.md §2).
pub fn presets() -> Vec<Shape> {
    let llama = |name, layers, hidden, ffn, heads| Shape {
        name: String::from(name),
        layers,
        hidden,
        ffn,
        heads,
        kv_heads: 8,
        vocab: 128_256,
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

/// A shape named as a family names it, `L<layers>-h<hidden>-f<ffn>`, with Llama 3's head
/// dimension (128), KV heads (8) and vocabulary (128,256); `None` if the name is not of that
/// form.
fn family_shape(name: &str) -> Result<Option<Shape>> {
    let parts: Vec<&str> = name.split('-').collect();
    let [l, h, f] = parts.as_slice() else {
        return Ok(None);
    };
    let number = |part: &str, prefix: char| part.strip_prefix(prefix)?.parse::<u64>().ok();
    let (Some(layers), Some(hidden), Some(ffn)) = (number(l, 'L'), number(h, 'h'), number(f, 'f'))
    else {
        return Ok(None);
    };
    let (Ok(layers), true) = (u32::try_from(layers), hidden % 128 == 0 && hidden > 0) else {
        return Err(Error::invalid(
            "model",
            name,
            "a family shape whose hidden size is a multiple of 128",
        ));
    };
    let heads = u32::try_from(hidden / 128)
        .map_err(|_| Error::invalid("model", name, "a hidden size of at most 2^32 heads"))?;
    Shape::new(name, layers, hidden, ffn, heads, 8, 128_256).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn presets_are_valid_shapes() {
        for s in presets() {
            let checked = Shape::new(
                &s.name, s.layers, s.hidden, s.ffn, s.heads, s.kv_heads, s.vocab,
            );
            assert_eq!(checked.unwrap(), s);
        }
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
}
