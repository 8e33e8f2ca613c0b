//! Hybrid models: a pattern of blocks, each one norm and one mixer or MLP, that mixes Mamba-2
//! state-space layers with attention, dense MLPs and mixtures of experts (NVIDIA's Nemotron-H
//! and Nemotron 3; Megatron-core's `--hybrid-layer-pattern`, Hugging Face's
//! `hybrid_override_pattern`). Each character of the pattern is one layer of the model:
//! `M` a Mamba-2 mixer, `*` self-attention, `-` an MLP, `E` a mixture of experts (the symbols
//! of Megatron-core's `hybrid_layer_allocation.Symbols` and of transformers'
//! `configuration_nemotron_h.py`). A block holds one mixer or one MLP, never both.
//!
//! The shape's own fields describe the blocks other than Mamba's: its heads and head
//! dimension the attention blocks, its FFN width the MLP blocks, its [`crate::model::Experts`]
//! (on exactly the `E` blocks) the mixtures. [`Hybrid`] adds the Mamba-2 mixer's dimensions
//! and whether the MLPs are gated.
//!
//! Counted exactly (parameters, active parameters, the matrices a token multiplies), planned
//! by the plate model and costed block by block by the detailed one
//! (`Context::hybrid_blocks`), and written for Megatron-LM's `pretrain_mamba.py`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The layer spec Megatron-core builds a hybrid's blocks from, which Megatron-LM's
/// `pretrain_mamba.py` requires (`--spec`, its module and name).
pub const MEGATRON_SPEC: &str = "megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec";

/// One block of a hybrid pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Block {
    /// A Mamba-2 mixer (`M`).
    Mamba,
    /// Self-attention (`*`).
    Attention,
    /// A dense MLP (`-`).
    Mlp,
    /// A mixture of experts (`E`).
    Moe,
}

impl Block {
    /// The block a pattern character stands for.
    pub fn of(symbol: char) -> Option<Block> {
        match symbol {
            'M' => Some(Block::Mamba),
            '*' => Some(Block::Attention),
            '-' => Some(Block::Mlp),
            'E' => Some(Block::Moe),
            _ => None,
        }
    }
}

/// The indices of a pattern's `E` blocks (a config's, before it is checked).
pub fn moe_blocks(pattern: &str) -> impl Iterator<Item = u32> + '_ {
    (0..)
        .zip(pattern.chars())
        .filter(|&(_, c)| c == 'E')
        .map(|(i, _)| i)
}

/// A Mamba-2 mixer (Dao and Gu 2024, "Transformers are SSMs", §7; transformers'
/// `NemotronHMamba2Mixer`, Megatron-core's `MambaMixer`): `heads` SSD heads of `head_dim`
/// channels (the inner width `d_in = heads·head_dim`), `groups` groups of B and C of `state`
/// channels, and a depthwise causal convolution of `conv_kernel` taps over `x`, `B` and `C`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mamba {
    /// SSD heads H (`mamba_num_heads`; Nemotron 3 Nano 64, Nemotron-H 8B 128).
    pub heads: u32,
    /// Channels a head P (`mamba_head_dim`, 64).
    pub head_dim: u64,
    /// Groups of B and C, G (`n_groups`, 8).
    pub groups: u32,
    /// The state's channels N (`ssm_state_size`, 128).
    pub state: u64,
    /// The convolution's taps K (`conv_kernel`, 4).
    pub conv_kernel: u64,
}

impl Mamba {
    /// The inner width `d_in = H·P`. Both transformers and Megatron-core take it from the
    /// heads when `mamba_num_heads` is set (Nemotron 3 Nano: 64·64 = 4,096, not
    /// `expand·h` = 5,376).
    pub fn inner(&self) -> u64 {
        u64::from(self.heads) * self.head_dim
    }

    /// The convolution's channels, `d_in + 2·G·N` (x, B and C).
    pub fn conv_channels(&self) -> u64 {
        self.inner() + 2 * u64::from(self.groups) * self.state
    }

    /// The input projection's output, `2·d_in + 2·G·N + H` (z, x, B, C and dt).
    pub fn projected(&self) -> u64 {
        self.inner() + self.conv_channels() + u64::from(self.heads)
    }

    /// The matrices of one mixer, `h·(2·d_in + 2·G·N + H) + d_in·h`: `in_proj` and
    /// `out_proj` (no biases: Megatron-core asserts none, and Nemotron-H's `use_bias` is
    /// false).
    pub fn matrix_params(&self, hidden: u64) -> u64 {
        self.matrix_params_with(hidden, &|a, b| Some(a * b), &|a, b| Some(a + b))
            .expect("plain arithmetic always gives a count")
    }

    /// [`Mamba::matrix_params`] with products `mul` and sums `add` (checked by the shape's
    /// count, [`crate::model::Shape`]).
    pub(crate) fn matrix_params_with(
        &self,
        hidden: u64,
        mul: &impl Fn(u64, u64) -> Option<u64>,
        add: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<u64> {
        add(mul(hidden, self.projected())?, mul(self.inner(), hidden)?)
    }

    /// Parameters of one Mamba block: its matrices, the convolution's weights and biases
    /// `(d_in + 2·G·N)·(K + 1)` (Megatron-core asserts a bias; Nemotron-H's `use_conv_bias`
    /// is true), `dt_bias`, `A_log` and `D` (`H` each), the gated RMSNorm's `d_in` and the
    /// block's norm `h`. Nemotron 3 Nano: 27,697,152 + 11,010,048 + 24,576 + 6,144 + 192 +
    /// 4,096 + 2,688 = 38,744,896.
    pub fn block_params(&self, hidden: u64) -> u64 {
        self.block_params_with(hidden, &|a, b| Some(a * b), &|a, b| Some(a + b))
            .expect("plain arithmetic always gives a count")
    }

    /// [`Mamba::block_params`] with products `mul` and sums `add`. The mixer's own widths are
    /// at most `2^20` each ([`Hybrid::validate`]), so only the products with `h` can overflow.
    pub(crate) fn block_params_with(
        &self,
        hidden: u64,
        mul: &impl Fn(u64, u64) -> Option<u64>,
        add: &impl Fn(u64, u64) -> Option<u64>,
    ) -> Option<u64> {
        let vectors = self.conv_channels() * (self.conv_kernel + 1)
            + 3 * u64::from(self.heads)
            + self.inner();
        add(
            add(self.matrix_params_with(hidden, mul, add)?, vectors)?,
            hidden,
        )
    }

    /// The SSD scan's forward FLOPs a token, `7·d_in·N` (Megatron-LM's `mamba_layer_flops`,
    /// which calls it a rough estimate of the chunked scan; it takes `d_in = 2h`, the true
    /// width for Nemotron-H 8B and 56B, and over-counts Nemotron 3 Nano's, `H·P` here).
    pub fn scan_flops(&self) -> f64 {
        7.0 * self.inner() as f64 * self.state as f64
    }

    fn validate(&self, name: &str) -> Result<()> {
        let field = |f: &str| format!("{name}.hybrid.mamba.{f}");
        for (f, v) in [
            ("heads", u64::from(self.heads)),
            ("head_dim", self.head_dim),
            ("groups", u64::from(self.groups)),
            ("state", self.state),
            ("conv_kernel", self.conv_kernel),
        ] {
            if v == 0 || v > 1 << 20 {
                return Err(Error::invalid(
                    field(f),
                    v,
                    "a whole number from 1 to 1,048,576",
                ));
            }
        }
        if self.heads % self.groups != 0 {
            return Err(Error::invalid(
                field("groups"),
                self.groups,
                format!(
                    "a divisor of the {} heads (Megatron-core's rule: each group serves whole heads)",
                    self.heads
                ),
            ));
        }
        Ok(())
    }
}

/// A hybrid model's pattern of blocks and its Mamba-2 mixer ([`crate::model::Shape::hybrid`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hybrid {
    /// One character a layer: `M` Mamba-2, `*` attention, `-` MLP, `E` mixture of experts.
    pub pattern: String,
    /// The Mamba-2 mixer of the `M` blocks.
    pub mamba: Mamba,
    /// Whether the MLPs (and experts) are SwiGLU's three matrices; Nemotron-H's are not: an
    /// up and a down projection with squared ReLU between (`mlp_hidden_act: relu2`), `2·h·f`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gated: bool,
}

/// How many blocks of each kind a pattern holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockCounts {
    /// Mamba-2 blocks.
    pub mamba: u64,
    /// Attention blocks.
    pub attention: u64,
    /// MLP blocks.
    pub mlp: u64,
    /// Mixture-of-experts blocks.
    pub moe: u64,
}

impl BlockCounts {
    /// One block of `block`'s kind.
    pub fn one(block: Block) -> BlockCounts {
        let mut c = BlockCounts::default();
        c.add(block);
        c
    }

    fn add(&mut self, block: Block) {
        match block {
            Block::Mamba => self.mamba += 1,
            Block::Attention => self.attention += 1,
            Block::Mlp => self.mlp += 1,
            Block::Moe => self.moe += 1,
        }
    }
}

impl Hybrid {
    /// The pattern's blocks, in order (every character checked by [`Hybrid::validate`]).
    pub fn blocks(&self) -> impl Iterator<Item = Block> + '_ {
        self.pattern.chars().filter_map(Block::of)
    }

    /// The blocks of each kind.
    pub fn counts(&self) -> BlockCounts {
        self.counts_in(0, u64::MAX)
    }

    /// The blocks of each kind among the `n` layers from layer `start` (a pipeline stage's).
    pub fn counts_in(&self, start: u64, n: u64) -> BlockCounts {
        let mut c = BlockCounts::default();
        for b in self.blocks().skip(start as usize).take(n as usize) {
            c.add(b);
        }
        c
    }

    /// The indices of the `E` blocks, where the shape's experts must sit.
    pub fn moe_layers(&self) -> Vec<u32> {
        moe_blocks(&self.pattern).collect()
    }

    /// Checks the pattern against the shape's `layers` and the mixer's dimensions; errors name
    /// `<model>.hybrid.<field>`.
    pub fn validate(&self, name: &str, layers: u32) -> Result<()> {
        let field = |f: &str| format!("{name}.hybrid.{f}");
        if let Some(bad) = self.pattern.chars().find(|&c| Block::of(c).is_none()) {
            return Err(Error::invalid(
                field("pattern"),
                &self.pattern,
                format!(
                    "one character a layer: M (Mamba-2), * (attention), - (MLP) or E (mixture of experts); {bad:?} is none"
                ),
            ));
        }
        let n = self.pattern.chars().count() as u64;
        if n != u64::from(layers) {
            return Err(Error::invalid(
                field("pattern"),
                &self.pattern,
                format!("one character for each of the {layers} layers, not {n}"),
            ));
        }
        self.mamba.validate(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nemotron 3 Nano's mixer (its config: 64 heads of 64, 8 groups, state 128, 4 taps).
    fn nano() -> Mamba {
        Mamba {
            heads: 64,
            head_dim: 64,
            groups: 8,
            state: 128,
            conv_kernel: 4,
        }
    }

    #[test]
    fn a_mamba_block_counts_as_transformers_builds_it() {
        // h = 2,688, d_in = 4,096, conv channels 4,096 + 2·8·128 = 6,144, in_proj out
        // 4,096 + 6,144 + 64 = 10,304: in_proj 27,697,152, out_proj 11,010,048, conv
        // 24,576 + 6,144, dt_bias, A_log, D 192, gated norm 4,096, block norm 2,688.
        let m = nano();
        assert_eq!(m.inner(), 4_096);
        assert_eq!(m.projected(), 10_304);
        assert_eq!(m.matrix_params(2_688), 27_697_152 + 11_010_048);
        assert_eq!(m.block_params(2_688), 38_744_896);
        // Nemotron-H 8B's (h = 4,096, 128 heads): 109,640,064.
        let h8 = Mamba { heads: 128, ..m };
        assert_eq!(h8.block_params(4_096), 109_640_064);
    }

    #[test]
    fn a_pattern_is_one_known_character_a_layer() {
        let h = Hybrid {
            pattern: "MEM*E".into(),
            mamba: nano(),
            gated: false,
        };
        assert!(h.validate("x", 5).is_ok());
        assert_eq!(
            h.counts(),
            BlockCounts {
                mamba: 2,
                attention: 1,
                mlp: 0,
                moe: 2
            }
        );
        assert_eq!(h.moe_layers(), [1, 4]);
        let e = h.validate("x", 6).unwrap_err().to_string();
        assert!(
            e.contains("one character for each of the 6 layers, not 5"),
            "{e}"
        );
        let bad = Hybrid {
            pattern: "MGM".into(),
            ..h.clone()
        };
        let e = bad.validate("x", 3).unwrap_err().to_string();
        assert!(e.contains("'G' is none"), "{e}");
        let odd = Hybrid {
            mamba: Mamba {
                groups: 6,
                ..nano()
            },
            ..h
        };
        let e = odd.validate("x", 5).unwrap_err().to_string();
        assert!(e.contains("x.hybrid.mamba.groups = 6"), "{e}");
    }
}
