//! The precision a step trains in: BF16 mixed precision, or FP8 matrix products with BF16
//! everywhere else, as Transformer Engine runs them (NVIDIA Transformer Engine, "Using FP8
//! with Transformer Engine"; Micikevicius et al. 2022, "FP8 Formats for Deep Learning").
//!
//! Under FP8 the four projections of every layer run on the FP8 tensor cores, forward and both
//! backward products (E4M3 forward, E5M2 gradients: the `hybrid` format); attention, the
//! element-wise work, the output head and the loss stay BF16 (Megatron-core's output layer is
//! not a Transformer Engine module; FP8 attention is off by default). What changes:
//!
//! | what | BF16 | FP8 | MXFP8 |
//! |---|---|---|---|
//! | projection GEMMs | BF16 peak | FP8 peak × the chip's FP8 ceiling | the same, Blackwell only |
//! | GEMM operands moved (roofline) | 2 bytes | 1 byte | 1 + 1/32 byte (a scale per 32) |
//! | casts | — | each GEMM input and output gradient written as FP8 and its transpose (2 bytes an element), and read in BF16 (2 more) where no kernel before it fuses the cast (the attention output, SwiGLU's output, every output gradient): [`CAST_BYTES`] | the same |
//! | weights' FP8 copies | — | the layers' matrices cast once a step (Transformer Engine caches them across micro-batches): read 2, write 2 bytes a parameter, and kept, 2 bytes a parameter ([`Precision::weight_copy_bytes`]) | 2 + 2/32 |
//! | activations kept | BF16 | the inputs a GEMM alone keeps for its weight gradient in FP8: the QKV and gate/up inputs (the norms' outputs) and SwiGLU's output, 1 byte an element; the attention output, which attention's backward needs in BF16, is kept in both | the same |
//! | master weights, gradients, optimizer | unchanged | unchanged | unchanged |
//!
//! MFU is always measured against the BF16 dense peak, so plans compare across precisions.
//! The amax-history and scale updates of delayed scaling are a few microseconds a step and left
//! out.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The precision of a step's matrix products.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// BF16 mixed precision (FP32 master weights and optimizer).
    #[default]
    Bf16,
    /// FP8 projections with per-tensor scaling (Transformer Engine's delayed or current
    /// scaling, torchao's float8 tensorwise), BF16 master copies kept.
    Fp8,
    /// FP8 with a scale per 32 elements (OCP microscaling), on GPUs that scale blocks in
    /// hardware (Blackwell).
    Mxfp8,
}

/// Bytes a cast moves per element: the BF16 read (2) and the FP8 value and its transpose
/// written (1 + 1), where no kernel before it fuses the cast; fused, only the writes (2).
pub const CAST_BYTES: f64 = 4.0;
/// Bytes a cast fused into the kernel that produces its input moves per element: the FP8
/// value and its transpose (Transformer Engine's `LayerNormLinear` writes both).
pub const FUSED_CAST_BYTES: f64 = 2.0;

impl Precision {
    /// Every precision, in the order `--help` lists them.
    pub const ALL: [Precision; 3] = [Precision::Bf16, Precision::Fp8, Precision::Mxfp8];

    /// The name `--precision` takes.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
            Precision::Mxfp8 => "mxfp8",
        }
    }

    /// Whether the projections run in FP8 (either scaling).
    pub fn is_fp8(self) -> bool {
        self != Precision::Bf16
    }

    /// Bytes per element of a GEMM operand as the GEMM reads it: 2 (BF16), 1 (FP8),
    /// `1 + 1/32` (MXFP8: one E8M0 scale per 32 elements).
    pub fn operand_bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0,
            Precision::Mxfp8 => 1.0 + 1.0 / 32.0,
        }
    }

    /// Bytes a GPU keeps per layer-matrix parameter beside its BF16 weight: the FP8 copy and
    /// its transpose (2; MXFP8 adds their block scales, 2/32); 0 in BF16.
    pub fn weight_copy_bytes(self) -> f64 {
        if self.is_fp8() {
            2.0 * self.operand_bytes()
        } else {
            0.0
        }
    }

    /// Whether a GPU of `fp8_tflops` dense FP8 TFLOP/s (0: no FP8 tensor cores), scaling
    /// blocks in hardware when `mxfp8`, multiplies in this precision; the error names what
    /// it needs. Checked for every plan in FP8, under the plate's time as under the detailed.
    pub fn supported_on(self, fp8_tflops: f64, mxfp8: bool) -> Result<()> {
        if self == Precision::Bf16 || (fp8_tflops > 0.0 && (self == Precision::Fp8 || mxfp8)) {
            return Ok(());
        }
        let needs = if self == Precision::Mxfp8 {
            "a GPU that scales FP8 by blocks (mxfp8 = true: Blackwell)"
        } else {
            "a GPU with FP8 tensor cores (fp8_tflops > 0)"
        };
        Err(Error::invalid(
            "--precision",
            self,
            format!("bf16, or {needs}"),
        ))
    }

    /// Bytes per element of an activation kept only for a GEMM's weight gradient: 2 in BF16,
    /// the FP8 operand otherwise.
    pub fn kept_input_bytes(self) -> f64 {
        self.operand_bytes()
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        let wanted = text.trim().to_ascii_lowercase();
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| Error::invalid("--precision", text, "one of bf16, fp8, mxfp8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_precision_reads_back_its_name() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>().unwrap(), p);
            assert_eq!(
                serde_json::to_string(&p).unwrap(),
                format!("\"{}\"", p.name())
            );
        }
        let e = "fp4".parse::<Precision>().unwrap_err().to_string();
        assert_eq!(e, "invalid --precision = fp4: one of bf16, fp8, mxfp8");
    }

    #[test]
    fn fp8_keeps_a_copy_and_a_transpose_of_each_matrix() {
        assert_eq!(Precision::Bf16.weight_copy_bytes(), 0.0);
        assert_eq!(Precision::Fp8.weight_copy_bytes(), 2.0);
        assert_eq!(Precision::Mxfp8.weight_copy_bytes(), 2.0 + 2.0 / 32.0);
        assert_eq!(Precision::Fp8.kept_input_bytes(), 1.0);
        assert_eq!(Precision::Bf16.kept_input_bytes(), 2.0);
    }
}
