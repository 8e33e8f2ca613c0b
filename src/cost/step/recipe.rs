//! How a step's low-precision weights, optimizer and gradients are kept: the FP8 scaling
//! recipe ([`Fp8Recipe`], Megatron-LM's `--fp8-recipe`), FP8 weights without a BF16 copy
//! (Megatron-core's `--fp8-param-gather`) and the optimizer's state precision
//! ([`OptimizerStates`], [`MasterWeights`]: Megatron-core's precision-aware optimizer). What
//! each moves and keeps, per element or parameter, with its source:
//!
//! | recipe | scales (Transformer Engine) | operand bytes | cast bytes (unfused / fused into the norm) | weight copy (row + column) | GEMM ceiling |
//! |---|---|---|---|---|---|
//! | `delayed` (the default, today's FP8) | one FP32 per tensor, from an amax history | 1 | 4 / 2: read BF16 once, write FP8 and its transpose | 2 | the chip's FP8 ceiling |
//! | `tensorwise` (current scaling) | one FP32 per tensor, from this tensor's amax | 1 | 6 / 4: the tensor read twice ("Quantization is a memory-bound operation that requires reading the tensor twice") | 2 | the same |
//! | `blockwise` (DeepSeek-V3) | FP32 per 1×128 (activations, gradients), per 128×128 (weights) | 1 + 4/128 | 2 + 2·(1 + 4/128) / 2·(1 + 4/128): row- and column-wise quantized separately ("Both versions must be quantized separately") | 2·(1 + 4/128²) | × [`BLOCKWISE_HOPPER_GEMM`] where the GPU does not scale blocks in hardware (Hopper: "block-scaled GEMMs are software-emulated"); on Blackwell "emulated with MXFP8", at MXFP8's |
//! | `mxfp8` (`--precision mxfp8`) | E8M0 per 32 | 1 + 1/32 | 4 / 2 (today's) | 2·(1 + 1/32) | the chip's FP8 ceiling × [`BLOCK_SCALED_GEMM`] (as blockwise on Blackwell) |
//!
//! Sources: NVIDIA Transformer Engine `docs/features/low_precision_training/*` (fp8 delayed,
//! current and blockwise scaling, MXFP8), quoted in research-40 §5a; the Hopper factor from
//! TE's `speedups.rst` on an H200 NVL (per-layer GEMMs of a 5B model: FP8 delayed 1.69×, FP8
//! blockwise 1.41× over BF16).
//!
//! Left out, each small: delayed scaling's amax history (`amax_history_len × 5` FP32 values a
//! GEMM, 80 KiB a layer of four GEMMs at Megatron's default length 1,024, under 7 MB for 80
//! layers) and its once-a-step amax all-reduce; current scaling's amax all-reduce over the
//! sequence-parallel group for gathered tensors (one FP32 value).
//!
//! **FP8 weights** (`--fp8-params`, Megatron-LM's `--fp8-param-gather`: "Keep the compute param
//! in fp8 (do not use any other intermediate dtype) and perform the param all-gather in fp8"):
//! the layers' matrices are kept only as the recipe's FP8 copy (row- and column-wise,
//! [`Fp8Recipe::weight_copy_bytes`]), not also in BF16; the FP32 master copy stays. Sharded
//! (ZeRO 3, Megatron-FSDP) a GPU keeps its shard as [`Fp8Recipe::stored_weight_bytes`]: 1 byte
//! (per-tensor), `1 + 4/128²` (blockwise), both orientations `2·(1 + 1/32)` for MXFP8
//! ("both row-wise (FWD) and column-wise (BWD) data are managed for non-transposable 1-D
//! quantization recipes like MXFP8", Megatron-FSDP's guide). The weights' all-gather moves
//! [`Fp8Recipe::gathered_weight_bytes`]: 1 byte a parameter for per-tensor and blockwise
//! (the DeepSeek-V3 GB200 guide: FP8-only weights enable "FP8 AllGather of the updated
//! parameters for per-tensor and blockwise FP8 recipes when using Distributed Optimizer"),
//! while MXFP8 gathers BF16 into the reused gradient buffer under the distributed optimizer
//! (`reuse_grad_buf_for_mxfp8_param_ag`), 2 bytes, and both orientations under Megatron-FSDP.
//!
//! **Optimizer state** (Megatron-core `--use-precision-aware-optimizer`; bytes a parameter,
//! Megatron-LM's distributed-optimizer guide, `user-guide/features/dist_optimizer.md` in its
//! docs, whose row "bf16 parameters, fp32 gradients" reads 18 bytes, `6 + 12/d` distributed):
//! master weights 4 (FP32), 2 (FP16, `--main-params-dtype fp16`) or 2
//! (`store_param_remainders`: "store the 16-bit FP32 parameter remainders … excluding the 16
//! bits shared with the BF16 parameters"); Adam's m and v 4 each in FP32, 2 each in BF16
//! (`--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`). With BF16 weights and FP32 gradients
//! under the distributed optimizer: `6 + 12/d` (today's), `6 + 8/d` with BF16 moments,
//! `6 + 6/d` with remainders too.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::error::{Error, Result};

/// The GEMM ceiling of blockwise-scaled FP8 relative to per-tensor FP8 on a GPU that does not
/// scale blocks in hardware (Hopper): Transformer Engine's `speedups.rst`, per-layer GEMMs of a
/// 5B model on an H200 NVL, "FP8-block 1.41×" against "FP8-delayed 1.69×" over BF16:
/// `1.41 / 1.69` ≈ 0.834.
pub const BLOCKWISE_HOPPER_GEMM: f64 = 1.41 / 1.69;

/// The GEMM rate of block-scaled FP8 (MXFP8, and blockwise, which Blackwell runs as MXFP8)
/// relative to per-tensor FP8 on a GPU that scales blocks in hardware: Transformer Engine's
/// `speedups.rst` (NVIDIA/TransformerEngine@8f2e635, its low-precision training features'
/// docs), per-layer GEMMs of a 5B model on a B300, "MXFP8 delivers ~1.42x" against
/// "FP8 DelayedScaling reaches 1.64x" over BF16 (an earlier text of the page: 1.44× and
/// 1.61×, 0.894): `1.42 / 1.64` ≈ 0.866. The benchmark quantizes under both recipes in one
/// pass that reads the BF16 tensor once and writes both orientations, so the gap is the
/// block-scaled GEMM's own (the scale factors loaded beside each tile); the MAMF FP8 ceilings
/// are per-tensor `torch._scaled_mm` products. Measured on NVIDIA's Blackwell; the MI355X, the
/// other chip that scales blocks in hardware, takes it too (not measured there).
pub const BLOCK_SCALED_GEMM: f64 = 1.42 / 1.64;

/// Elements a blockwise scale covers along a row (DeepSeek-V3's 1×128 activation tiles).
const BLOCK: f64 = 128.0;

/// An FP8 scaling recipe, as Megatron-LM's `--fp8-recipe` names it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Fp8Recipe {
    /// Per-tensor scales from an amax history (Transformer Engine's `DelayedScaling`,
    /// Megatron-LM's default): today's FP8.
    #[default]
    Delayed,
    /// Per-tensor scales from the tensor's own amax (`Float8CurrentScaling`; torchao's float8
    /// `tensorwise`).
    Tensorwise,
    /// Scales per 1×128 tile of activations and gradients and per 128×128 block of weights
    /// (`Float8BlockScaling`, DeepSeek-V3's recipe).
    Blockwise,
    /// A scale per 32 elements (OCP microscaling): `--precision mxfp8`.
    Mxfp8,
}

impl Fp8Recipe {
    /// Every recipe, in the order `--help` lists them.
    pub const ALL: [Fp8Recipe; 4] = [
        Fp8Recipe::Delayed,
        Fp8Recipe::Tensorwise,
        Fp8Recipe::Blockwise,
        Fp8Recipe::Mxfp8,
    ];

    /// The name `--fp8-recipe` (and Megatron-LM's) takes.
    pub fn name(self) -> &'static str {
        match self {
            Fp8Recipe::Delayed => "delayed",
            Fp8Recipe::Tensorwise => "tensorwise",
            Fp8Recipe::Blockwise => "blockwise",
            Fp8Recipe::Mxfp8 => "mxfp8",
        }
    }

    /// The recipe a step in `precision` runs, `given` the one asked for (`None`: the
    /// precision's default, delayed for FP8), or `None` in BF16; an error names a recipe
    /// that does not go with the precision.
    pub fn of(precision: Precision, given: Option<Fp8Recipe>) -> Result<Option<Fp8Recipe>> {
        match (precision, given) {
            (Precision::Bf16, None) => Ok(None),
            (Precision::Bf16, Some(r)) => Err(Error::invalid(
                "--fp8-recipe",
                r,
                "none with --precision bf16 (a recipe scales FP8: --precision fp8)",
            )),
            (Precision::Fp8, None) => Ok(Some(Fp8Recipe::Delayed)),
            (Precision::Fp8, Some(Fp8Recipe::Mxfp8)) => Err(Error::invalid(
                "--fp8-recipe",
                Fp8Recipe::Mxfp8,
                "delayed, tensorwise or blockwise with --precision fp8 (MXFP8 is --precision mxfp8)",
            )),
            (Precision::Fp8, Some(r)) => Ok(Some(r)),
            (Precision::Mxfp8, None | Some(Fp8Recipe::Mxfp8)) => Ok(Some(Fp8Recipe::Mxfp8)),
            (Precision::Mxfp8, Some(r)) => Err(Error::invalid(
                "--fp8-recipe",
                r,
                "mxfp8 (or none) with --precision mxfp8, whose scales are the recipe",
            )),
            (Precision::Nvfp4 | Precision::Mxfp4, None) => Ok(None),
            (p @ (Precision::Nvfp4 | Precision::Mxfp4), Some(r)) => Err(Error::invalid(
                "--fp8-recipe",
                r,
                format!("none with --precision {p} (a recipe scales FP8; an FP4 format carries its own scales)"),
            )),
        }
    }

    /// Whether `stack` runs this recipe: Transformer Engine (`megatron-te`) all four;
    /// torchtitan's torchao float8 `tensorwise` and today's per-tensor FP8 and its MX
    /// converter; MaxText's XLA FP8 delayed scaling; DeepSeek's fine-grained (blockwise)
    /// scaling; an error names the stack otherwise.
    pub fn allowed_on(self, stack: Stack) -> Result<()> {
        let ok = match stack {
            Stack::MegatronTe => true,
            Stack::Torchtitan | Stack::TorchtitanCompile => self != Fp8Recipe::Blockwise,
            Stack::Maxtext => self == Fp8Recipe::Delayed,
            Stack::DeepSeek => self == Fp8Recipe::Blockwise,
            _ => false,
        };
        if ok {
            return Ok(());
        }
        let runs = match stack {
            Stack::Torchtitan | Stack::TorchtitanCompile => {
                "delayed or tensorwise on the torchtitan stacks (torchao's float8 scales per tensor; blockwise scaling is Transformer Engine's: --stack megatron-te)"
            }
            Stack::Maxtext => {
                "delayed on the maxtext stack (XLA's FP8 scales from an amax history; the others are Transformer Engine's: --stack megatron-te)"
            }
            Stack::DeepSeek => {
                "blockwise on the deepseek stack (DeepSeek-V3 §3.3.1: activations scaled by 1×128 tiles, weights by 128×128 blocks, which Transformer Engine's blockwise recipe follows)"
            }
            _ => "a recipe of a stack that trains in FP8 (--stack megatron-te)",
        };
        Err(Error::invalid("--fp8-recipe", self, runs))
    }

    /// Bytes per element of a GEMM operand as the GEMM reads it: 1 (per-tensor), `1 + 4/128`
    /// (blockwise: an FP32 scale per 128), `1 + 1/32` (MXFP8: an E8M0 scale per 32).
    pub fn operand_bytes(self) -> f64 {
        match self {
            Fp8Recipe::Delayed | Fp8Recipe::Tensorwise => 1.0,
            Fp8Recipe::Blockwise => 1.0 + 4.0 / BLOCK,
            Fp8Recipe::Mxfp8 => Precision::Mxfp8.operand_bytes(),
        }
    }

    /// Bytes a cast moves per element where no kernel before it fuses it: the BF16 read
    /// (twice under current scaling, for the amax first) and the FP8 value and its transpose
    /// written (blockwise: each quantized with its own scales). On a GPU whose FP8 GEMMs take
    /// any layout (`any_layout`) a per-tensor cast writes the one copy: a byte less.
    pub fn cast_bytes(self, any_layout: bool) -> f64 {
        self.own_cast_bytes() - self.transpose_saved(any_layout)
    }

    /// The byte a per-tensor FP8 tensor's transpose takes, which a GPU whose FP8 GEMMs take
    /// any layout neither keeps nor writes (1; 0 for the block-scaled recipes, whose two
    /// orientations are scaled along their own blocks, and on Hopper): the one rule behind
    /// the casts', the weight copies' and the FP8 weights' bytes here.
    fn transpose_saved(self, any_layout: bool) -> f64 {
        match self {
            Fp8Recipe::Delayed | Fp8Recipe::Tensorwise if any_layout => 1.0,
            _ => 0.0,
        }
    }

    /// [`Fp8Recipe::cast_bytes`] with the transpose written.
    fn own_cast_bytes(self) -> f64 {
        match self {
            Fp8Recipe::Delayed | Fp8Recipe::Mxfp8 => crate::cost::step::precision::CAST_BYTES,
            Fp8Recipe::Tensorwise => 2.0 + crate::cost::step::precision::CAST_BYTES,
            Fp8Recipe::Blockwise => 2.0 + 2.0 * self.operand_bytes(),
        }
    }

    /// Bytes a cast fused into the kernel that writes its input moves per element: the FP8
    /// value and its transpose (one copy where the FP8 GEMMs take any layout, `any_layout`);
    /// under current scaling the output read once more for its amax.
    pub fn fused_cast_bytes(self, any_layout: bool) -> f64 {
        self.own_fused_cast_bytes() - self.transpose_saved(any_layout)
    }

    /// [`Fp8Recipe::fused_cast_bytes`] with the transpose written.
    fn own_fused_cast_bytes(self) -> f64 {
        match self {
            Fp8Recipe::Delayed | Fp8Recipe::Mxfp8 => crate::cost::step::precision::FUSED_CAST_BYTES,
            Fp8Recipe::Tensorwise => 2.0 + crate::cost::step::precision::FUSED_CAST_BYTES,
            Fp8Recipe::Blockwise => 2.0 * self.operand_bytes(),
        }
    }

    /// Bytes a GPU keeps per layer-matrix parameter for the GEMMs: the FP8 weight row- and
    /// column-wise, 2 (per-tensor), `2·(1 + 4/128²)` (blockwise, 128×128 blocks), `2·(1 + 1/32)`
    /// (MXFP8). On a GPU whose FP8 GEMMs take any layout (`any_layout`, Blackwell:
    /// [`crate::cost::step::detailed::Options::fp8_any_layout`]) a per-tensor weight is one
    /// copy, 1 byte, that serves both orientations; the block-scaled recipes keep two there
    /// too, each orientation scaled along its own blocks.
    pub fn weight_copy_bytes(self, any_layout: bool) -> f64 {
        let both = match self {
            Fp8Recipe::Delayed | Fp8Recipe::Tensorwise => Precision::Fp8.weight_copy_bytes(),
            Fp8Recipe::Blockwise => 2.0 * (1.0 + 4.0 / (BLOCK * BLOCK)),
            Fp8Recipe::Mxfp8 => Precision::Mxfp8.weight_copy_bytes(),
        };
        both - self.transpose_saved(any_layout)
    }

    /// Bytes of the BF16 weights read per layer-matrix parameter when the recipe casts them
    /// once a step: 2, and 2 more under current scaling (the amax pass).
    pub fn weight_cast_reads(self) -> f64 {
        match self {
            Fp8Recipe::Tensorwise => 4.0,
            _ => 2.0,
        }
    }

    /// Bytes read per layer-matrix parameter to make the GEMMs' copies of FP8 weights
    /// (`--fp8-params`) once a step: the optimizer writes the row-wise FP8 weight from the
    /// FP32 master it reads anyway, and the column-wise copy is the row-wise one transposed
    /// (read 1 byte, [`Fp8Recipe::stored_weight_bytes`]) but for MXFP8, whose two orientations
    /// are both quantized from the master (0), nor on a GPU whose FP8 GEMMs take any layout
    /// (`any_layout`), where a per-tensor weight has no transpose to make (0).
    pub fn fp8_weight_cast_reads(self, any_layout: bool) -> f64 {
        match self {
            Fp8Recipe::Mxfp8 => 0.0,
            r => r.stored_weight_bytes() - r.transpose_saved(any_layout),
        }
    }

    /// Bytes per layer-matrix parameter of FP8 weights kept sharded (ZeRO 3, Megatron-FSDP):
    /// 1 (per-tensor: the transpose is made after the gather), `1 + 4/128²` (blockwise, whose
    /// 2D blocks transpose with their scales), `2·(1 + 1/32)` (MXFP8: both orientations).
    pub fn stored_weight_bytes(self) -> f64 {
        match self {
            Fp8Recipe::Delayed | Fp8Recipe::Tensorwise => 1.0,
            Fp8Recipe::Blockwise => 1.0 + 4.0 / (BLOCK * BLOCK),
            Fp8Recipe::Mxfp8 => Precision::Mxfp8.weight_copy_bytes(),
        }
    }

    /// Bytes per layer-matrix parameter the weights' all-gather moves with FP8 weights: 1
    /// (per-tensor), `1 + 4/128²` (blockwise); MXFP8 gathers BF16 (2) into the reused gradient
    /// buffer under the distributed optimizer, both orientations when the weights are sharded.
    pub fn gathered_weight_bytes(self, sharded_weights: bool) -> f64 {
        match (self, sharded_weights) {
            (Fp8Recipe::Mxfp8, false) => 2.0,
            (r, _) => r.stored_weight_bytes(),
        }
    }

    /// The FP8 GEMMs' ceiling relative to the chip's per-tensor FP8 ceiling on a GPU that
    /// scales blocks in hardware (`mxfp8`) or not: the block-scaled recipes (MXFP8, blockwise)
    /// at [`BLOCK_SCALED_GEMM`] with, blockwise at [`BLOCKWISE_HOPPER_GEMM`] without; the
    /// per-tensor recipes at 1.
    pub fn gemm_factor(self, mxfp8: bool) -> f64 {
        match (self, mxfp8) {
            (Fp8Recipe::Blockwise | Fp8Recipe::Mxfp8, true) => BLOCK_SCALED_GEMM,
            (Fp8Recipe::Blockwise, false) => BLOCKWISE_HOPPER_GEMM,
            _ => 1.0,
        }
    }
}

impl fmt::Display for Fp8Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fp8Recipe {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        let wanted = text.trim().to_ascii_lowercase();
        Fp8Recipe::ALL
            .into_iter()
            .find(|r| r.name() == wanted)
            .ok_or_else(|| {
                Error::invalid(
                    "--fp8-recipe",
                    text,
                    "one of delayed, tensorwise, blockwise, mxfp8",
                )
            })
    }
}

/// Layers at the start and the end of the model kept in BF16 under FP8 (Megatron-core's
/// `--first-last-layers-bf16 --num-layers-at-start-in-bf16 N --num-layers-at-end-in-bf16 M`;
/// Megatron-Bridge's NVFP4 and MXFP8 recipes keep some): their projections run, cast and keep
/// what BF16 does, and keep no FP8 weights.
///
/// They are counted on the first and the last pipeline stage (both on a single stage), which
/// holds them when they are within its first (last) chunk, as a few layers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Bf16Layers {
    /// Layers at the start.
    pub start: u32,
    /// Layers at the end.
    pub end: u32,
}

impl Bf16Layers {
    /// Whether no layer is kept in BF16 (the default).
    pub fn is_none(&self) -> bool {
        self.start == 0 && self.end == 0
    }

    /// Of the `layers` on stage `index` of `pp`, those kept in BF16.
    pub fn on_stage(&self, index: u64, pp: u64, layers: u64) -> u64 {
        let (start, end) = (u64::from(self.start), u64::from(self.end));
        let n = match (index == 0, index + 1 == pp) {
            (true, true) => start + end,
            (true, false) => start,
            (false, true) => end,
            (false, false) => 0,
        };
        n.min(layers)
    }

    /// `START,END` as `--fp8-bf16-layers` takes it.
    pub fn parse(text: &str) -> Result<Bf16Layers> {
        let bad = || {
            Error::invalid(
                "--fp8-bf16-layers",
                text,
                "START,END: layers at the start and at the end kept in BF16, for example 1,1",
            )
        };
        let (a, b) = text.split_once(',').ok_or_else(bad)?;
        Ok(Bf16Layers {
            start: a.trim().parse().map_err(|_| bad())?,
            end: b.trim().parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for Bf16Layers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.start, self.end)
    }
}

/// The precision of Adam's two moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerStates {
    /// FP32, 4 bytes each (today's).
    #[default]
    Fp32,
    /// BF16, 2 bytes each (`--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`).
    Bf16,
}

impl OptimizerStates {
    /// Bytes per parameter of m and v together: 8 or 4.
    pub fn bytes(self) -> f64 {
        match self {
            OptimizerStates::Fp32 => 8.0,
            OptimizerStates::Bf16 => 4.0,
        }
    }

    /// The name `--optimizer-states` takes.
    pub fn name(self) -> &'static str {
        match self {
            OptimizerStates::Fp32 => "fp32",
            OptimizerStates::Bf16 => "bf16",
        }
    }

    /// Whether this is the default (FP32).
    pub fn is_default(&self) -> bool {
        *self == OptimizerStates::Fp32
    }
}

/// The optimizer: AdamW throughout, or Muon on the hidden matrices and AdamW on the rest
/// ([`crate::cost::step::muon`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// AdamW (Megatron-core's `adam`, decoupled weight decay).
    #[default]
    AdamW,
    /// Muon on the hidden matrices (Megatron-core's `muon`, and `dist_muon` under ZeRO 1).
    Muon,
}

impl Optimizer {
    /// The name `--optimizer` takes.
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::AdamW => "adamw",
            Optimizer::Muon => "muon",
        }
    }

    /// Whether this is the default (AdamW).
    pub fn is_default(&self) -> bool {
        *self == Optimizer::AdamW
    }
}

/// How the optimizer keeps its master copy of the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MasterWeights {
    /// FP32, 4 bytes (today's).
    #[default]
    Fp32,
    /// FP16, 2 bytes (`--main-params-dtype fp16`).
    Fp16,
    /// The 16 low bits of the FP32 master beside the BF16 weight, 2 bytes
    /// (`store_param_remainders`).
    Remainders,
}

impl MasterWeights {
    /// Bytes per parameter: 4, 2 or 2.
    pub fn bytes(self) -> f64 {
        match self {
            MasterWeights::Fp32 => 4.0,
            MasterWeights::Fp16 | MasterWeights::Remainders => 2.0,
        }
    }

    /// The name `--master-weights` takes.
    pub fn name(self) -> &'static str {
        match self {
            MasterWeights::Fp32 => "fp32",
            MasterWeights::Fp16 => "fp16",
            MasterWeights::Remainders => "remainders",
        }
    }

    /// Whether this is the default (FP32).
    pub fn is_default(&self) -> bool {
        *self == MasterWeights::Fp32
    }
}

/// Bytes per parameter of the optimizer's state: master weights and Adam's m and v (12 with
/// both FP32, Rajbhandari et al. 2020).
pub fn optimizer_bytes(master: MasterWeights, states: OptimizerStates) -> f64 {
    master.bytes() + states.bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recipe_reads_back_its_name() {
        for r in Fp8Recipe::ALL {
            assert_eq!(r.name().parse::<Fp8Recipe>().unwrap(), r);
            assert_eq!(
                serde_json::to_string(&r).unwrap(),
                format!("\"{}\"", r.name())
            );
        }
        let e = "rowwise".parse::<Fp8Recipe>().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid --fp8-recipe = rowwise: one of delayed, tensorwise, blockwise, mxfp8"
        );
    }

    #[test]
    fn the_default_recipes_are_today_s_precisions_bit_for_bit() {
        let fp8 = Fp8Recipe::of(Precision::Fp8, None).unwrap().unwrap();
        assert_eq!(fp8, Fp8Recipe::Delayed);
        let mx = Fp8Recipe::of(Precision::Mxfp8, None).unwrap().unwrap();
        for (r, p) in [(fp8, Precision::Fp8), (mx, Precision::Mxfp8)] {
            assert_eq!(r.operand_bytes(), p.operand_bytes());
            assert_eq!(r.weight_copy_bytes(false), p.weight_copy_bytes());
            assert_eq!(
                r.cast_bytes(false),
                crate::cost::step::precision::CAST_BYTES
            );
            assert_eq!(
                r.fused_cast_bytes(false),
                crate::cost::step::precision::FUSED_CAST_BYTES
            );
            assert_eq!(r.weight_cast_reads(), 2.0);
            assert_eq!(r.gemm_factor(false), 1.0);
        }
        assert_eq!(Fp8Recipe::of(Precision::Bf16, None).unwrap(), None);
    }

    #[test]
    fn a_recipe_that_does_not_go_with_the_precision_is_refused_by_name() {
        let e = |p, r| Fp8Recipe::of(p, Some(r)).unwrap_err().to_string();
        assert_eq!(
            e(Precision::Bf16, Fp8Recipe::Tensorwise),
            "invalid --fp8-recipe = tensorwise: none with --precision bf16 (a recipe scales FP8: --precision fp8)"
        );
        assert!(e(Precision::Mxfp8, Fp8Recipe::Blockwise).contains("mxfp8 (or none)"));
        assert!(e(Precision::Fp8, Fp8Recipe::Mxfp8).contains("--precision mxfp8"));
        assert!(Fp8Recipe::Blockwise.allowed_on(Stack::Torchtitan).is_err());
        assert!(Fp8Recipe::Tensorwise.allowed_on(Stack::Maxtext).is_err());
        assert!(Fp8Recipe::Tensorwise.allowed_on(Stack::Torchtitan).is_ok());
    }

    #[test]
    fn recipes_move_and_keep_what_transformer_engine_s_formats_say() {
        // Current scaling reads the BF16 tensor twice: 2 + 2 + 2 (write FP8 and transpose).
        assert_eq!(Fp8Recipe::Tensorwise.cast_bytes(false), 6.0);
        assert_eq!(Fp8Recipe::Tensorwise.cast_bytes(true), 5.0);
        assert_eq!(Fp8Recipe::Tensorwise.fused_cast_bytes(false), 4.0);
        assert_eq!(Fp8Recipe::Tensorwise.fused_cast_bytes(true), 3.0);
        // Blockwise: 1 + 4/128 = 1.03125 an element, each orientation quantized on its own.
        assert_eq!(Fp8Recipe::Blockwise.operand_bytes(), 1.03125);
        assert_eq!(Fp8Recipe::Blockwise.cast_bytes(false), 2.0 + 2.0625);
        assert_eq!(Fp8Recipe::Blockwise.cast_bytes(true), 2.0 + 2.0625);
        assert_eq!(Fp8Recipe::Blockwise.fused_cast_bytes(false), 2.0625);
        assert_eq!(Fp8Recipe::Blockwise.weight_copy_bytes(false), 2.00048828125);
        assert!((Fp8Recipe::Blockwise.gemm_factor(false) - 0.834319526627).abs() < 1e-12);
        // Block-scaled GEMMs where the GPU scales blocks (Blackwell): TE's B300 table, MXFP8
        // 1.42× against delayed 1.64× over BF16, 0.8659; blockwise runs as MXFP8 there.
        assert!((Fp8Recipe::Mxfp8.gemm_factor(true) - 0.865853658537).abs() < 1e-12);
        assert_eq!(Fp8Recipe::Blockwise.gemm_factor(true), BLOCK_SCALED_GEMM);
        assert_eq!(Fp8Recipe::Delayed.gemm_factor(true), 1.0);
        assert_eq!(Fp8Recipe::Tensorwise.gemm_factor(true), 1.0);
        // FP8 weights gathered: 1 byte per-tensor, BF16 for MXFP8 under ZeRO 1, both
        // orientations when sharded.
        assert_eq!(Fp8Recipe::Delayed.gathered_weight_bytes(false), 1.0);
        assert_eq!(Fp8Recipe::Mxfp8.gathered_weight_bytes(false), 2.0);
        assert_eq!(Fp8Recipe::Mxfp8.gathered_weight_bytes(true), 2.0625);
    }

    #[test]
    fn bf16_layers_sit_on_the_first_and_last_stage() {
        let b = Bf16Layers::parse("2,1").unwrap();
        assert_eq!(
            (
                b.on_stage(0, 4, 10),
                b.on_stage(1, 4, 10),
                b.on_stage(3, 4, 10)
            ),
            (2, 0, 1)
        );
        assert_eq!(b.on_stage(0, 1, 80), 3);
        assert_eq!(b.on_stage(0, 1, 2), 2);
        assert_eq!(b.to_string(), "2,1");
        assert!(Bf16Layers::parse("2").is_err());
        assert!(Bf16Layers::default().is_none());
    }

    #[test]
    fn the_optimizer_state_is_megatron_s_table() {
        // dist_optimizer.md: bf16 parameters, fp32 gradients = 6 + 12/d; 6 + 8/d with BF16
        // moments; 6 + 6/d with remainders too (research-40 §5d).
        let d = 64.0;
        let per_param = |m, s| 2.0 + 4.0 + optimizer_bytes(m, s) / d;
        assert_eq!(
            per_param(MasterWeights::Fp32, OptimizerStates::Fp32),
            6.0 + 12.0 / d
        );
        assert_eq!(
            per_param(MasterWeights::Fp32, OptimizerStates::Bf16),
            6.0 + 8.0 / d
        );
        assert_eq!(
            per_param(MasterWeights::Remainders, OptimizerStates::Bf16),
            6.0 + 6.0 / d
        );
        // A 70B model's sharded state over DP 8: 70e9 × 12 / 8 = 105 GB, 70 GB, 52.5 GB.
        let n = 70e9;
        assert_eq!(
            n * optimizer_bytes(MasterWeights::Fp32, OptimizerStates::Fp32) / 8.0,
            105e9
        );
        assert_eq!(
            n * optimizer_bytes(MasterWeights::Fp32, OptimizerStates::Bf16) / 8.0,
            70e9
        );
        assert_eq!(
            n * optimizer_bytes(MasterWeights::Remainders, OptimizerStates::Bf16) / 8.0,
            52.5e9
        );
    }
}
