//! The precision a step trains in: BF16 mixed precision, or FP8 or FP4 matrix products with
//! BF16 everywhere else, as Transformer Engine runs them (NVIDIA Transformer Engine, "Using FP8
//! with Transformer Engine" and its NVFP4 recipe; Micikevicius et al. 2022, "FP8 Formats for
//! Deep Learning"; NVIDIA 2025, "Pretraining Large Language Models with NVFP4",
//! arXiv:2509.25149).
//!
//! Under FP8 the four projections of every layer run on the FP8 tensor cores, forward and both
//! backward products (E4M3 forward, E5M2 gradients: the `hybrid` format); attention, the
//! element-wise work, the output head and the loss stay BF16 (Megatron-core's output layer is
//! not a Transformer Engine module; FP8 attention is off by default). What changes:
//!
//! | what | BF16 | FP8 | MXFP8 | NVFP4 | MXFP4 |
//! |---|---|---|---|---|---|
//! | projection GEMMs | BF16 peak | FP8 peak × the chip's FP8 ceiling | the same, Blackwell and MI355X only | FP4 peak × the chip's FP4 ceiling, Blackwell only | the same, Blackwell and MI355X |
//! | GEMM operands moved (roofline) | 2 bytes | 1 byte | 1 + 1/32 byte (a scale per 32) | 1/2 + 1/16 (an E4M3 scale per 16) | 1/2 + 1/32 (an E8M0 scale per 32) |
//! | casts | — | each GEMM input and output gradient written as FP8 and its transpose (2 bytes an element; per-tensor on Blackwell, the one copy, 1), and read in BF16 (2 more) where no kernel before it fuses the cast (the attention output, SwiGLU's output, every output gradient): [`CAST_BYTES`] | the same | the same passes, FP4 writes counted as FP8's (an overcount of under 1 byte an element) | the same |
//! | Hadamard transform | — | — | — | the 16-point random Hadamard transform on the weight-gradient GEMM's operands ([`Precision::hadamard`]): 2·16 FLOPs an element at the BF16 GEMM rate | the same (AMD's recipe's 16-point rotation) |
//! | weights' low-precision copies | — | the layers' matrices cast once a step (Transformer Engine caches them across micro-batches): read 2, write 2 bytes a parameter, and kept, 2 bytes a parameter ([`Precision::weight_copy_bytes`]) | 2 + 2/32 | 1 + 2/16 | 1 + 2/32 |
//! | activations kept | BF16 | the inputs a GEMM alone keeps for its weight gradient in FP8: the QKV and gate/up inputs (the norms' outputs) and SwiGLU's output, 1 byte an element; the attention output, which attention's backward needs in BF16, is kept in both | the same | counted as FP8's (1 byte; an overcount) | the same |
//! | master weights, gradients, optimizer | unchanged | unchanged | unchanged | unchanged | unchanged |
//!
//! Which GEMMs stay BF16: attention's, the output head (Megatron-core's output layer is not a
//! Transformer Engine module) and the loss, under every low precision. The NVFP4 recipes also
//! keep some whole layers in BF16 (Megatron-Bridge: the last 4 of GPT-OSS, the last 14 of
//! Nemotron-3-Super; the paper "~16 %"); this model runs every layer's projections in the
//! step's precision. In NVFP4 all three GEMMs of a projection run in FP4 (TE: "Fprop, Wgrad
//! and Dgrad"), with stochastic rounding on the gradients (free in the cast).
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
    /// hardware (Blackwell, MI355X).
    Mxfp8,
    /// FP4 (E2M1) with an E4M3 scale per 16 elements and an FP32 scale per tensor (NVIDIA's
    /// NVFP4; Transformer Engine's `NVFP4BlockScaling`), on Blackwell.
    Nvfp4,
    /// FP4 (E2M1) with an E8M0 scale per 32 elements (OCP microscaling), on Blackwell and the
    /// MI355X.
    Mxfp4,
}

/// The low-precision formats a GPU's tensor cores run: what [`Precision::supported_on`]
/// checks.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Formats {
    /// Dense FP8 peak, TFLOP/s; 0 without FP8.
    pub fp8_tflops: f64,
    /// Whether it runs MXFP8.
    pub mxfp8: bool,
    /// Dense FP4 peak, TFLOP/s; 0 without FP4.
    pub fp4_tflops: f64,
    /// Whether it runs NVFP4.
    pub nvfp4: bool,
    /// Whether it runs MXFP4.
    pub mxfp4: bool,
}

/// Bytes a cast moves per element: the BF16 read (2) and the FP8 value and its transpose
/// written (1 + 1), where no kernel before it fuses the cast; fused, only the writes (2).
pub const CAST_BYTES: f64 = 4.0;
/// Bytes a cast fused into the kernel that produces its input moves per element: the FP8
/// value and its transpose (Transformer Engine's `LayerNormLinear` writes both).
pub const FUSED_CAST_BYTES: f64 = 2.0;

impl Precision {
    /// Every precision, in the order `--help` lists them.
    pub const ALL: [Precision; 5] = [
        Precision::Bf16,
        Precision::Fp8,
        Precision::Mxfp8,
        Precision::Nvfp4,
        Precision::Mxfp4,
    ];

    /// The name `--precision` takes.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
            Precision::Mxfp8 => "mxfp8",
            Precision::Nvfp4 => "nvfp4",
            Precision::Mxfp4 => "mxfp4",
        }
    }

    /// Whether the projections run in FP8 (either scaling).
    pub fn is_fp8(self) -> bool {
        matches!(self, Precision::Fp8 | Precision::Mxfp8)
    }

    /// Whether the projections run in FP4 (either format).
    pub fn is_fp4(self) -> bool {
        matches!(self, Precision::Nvfp4 | Precision::Mxfp4)
    }

    /// Whether the projections run below BF16 (FP8 or FP4): what casts, keeps copies and
    /// runs on a low-precision peak.
    pub fn is_narrow(self) -> bool {
        self != Precision::Bf16
    }

    /// Bytes per element of a GEMM operand as the GEMM reads it: 2 (BF16), 1 (FP8),
    /// `1 + 1/32` (MXFP8: one E8M0 scale per 32 elements), `1/2 + 1/16` (NVFP4: one E4M3
    /// scale per 16; the FP32 scale per tensor is nothing an element), `1/2 + 1/32` (MXFP4:
    /// one E8M0 scale per 32).
    pub fn operand_bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0,
            Precision::Mxfp8 => 1.0 + 1.0 / 32.0,
            Precision::Nvfp4 => 0.5 + 1.0 / 16.0,
            Precision::Mxfp4 => 0.5 + 1.0 / 32.0,
        }
    }

    /// The dense peak the projections run at, TFLOP/s, of a GPU whose peaks are `fp8_tflops`
    /// and `fp4_tflops`: the FP8 one for FP8 and MXFP8, the FP4 one for NVFP4 and MXFP4 (both
    /// formats run at the FP4 rate: DGX B200's 72 PFLOP/s "FP4"), `bf16_tflops` in BF16.
    pub fn peak_tflops(self, bf16_tflops: f64, fp8_tflops: f64, fp4_tflops: f64) -> f64 {
        if self.is_fp4() {
            fp4_tflops
        } else if self.is_fp8() {
            fp8_tflops
        } else {
            bf16_tflops
        }
    }

    /// FLOPs of the random Hadamard transform NVFP4 applies before the columnwise cast of each
    /// weight-gradient GEMM's two operands (TE: "applied to columnwise quantization of inputs
    /// and gradients, which are operands for the wgrad GEMM ... d = 16"), per element of those
    /// operands: a 16-point product, `2·16`. AMD's MXFP4 recipe (Primus, MLPerf Training v6.0)
    /// applies "a deterministic 16-point Hadamard rotation" too; which operands it rotates is
    /// not published, so TE's are taken. 0 in FP8 and BF16.
    pub fn hadamard(self) -> f64 {
        if self.is_fp4() {
            2.0 * 16.0
        } else {
            0.0
        }
    }

    /// Bytes a GPU keeps per layer-matrix parameter beside its BF16 weight: the FP8 copy and
    /// its transpose (2; MXFP8 adds their block scales, 2/32), the FP4 copy and its columnwise
    /// copy (`2 × (1/2 + scales)`); 0 in BF16.
    pub fn weight_copy_bytes(self) -> f64 {
        if self.is_narrow() {
            2.0 * self.operand_bytes()
        } else {
            0.0
        }
    }

    /// Whether a GPU with tensor cores for `formats` multiplies in this precision; the error
    /// names what it needs. Checked for every plan below BF16, under the plate's time as under
    /// the detailed.
    pub fn supported_on(self, formats: Formats) -> Result<()> {
        let fp8 = formats.fp8_tflops > 0.0;
        let fp4 = formats.fp4_tflops > 0.0;
        let runs = match self {
            Precision::Bf16 => true,
            Precision::Fp8 => fp8,
            Precision::Mxfp8 => fp8 && formats.mxfp8,
            Precision::Nvfp4 => fp4 && formats.nvfp4,
            Precision::Mxfp4 => fp4 && formats.mxfp4,
        };
        if runs {
            return Ok(());
        }
        let needs = match self {
            Precision::Mxfp8 => "a GPU that scales FP8 by blocks (mxfp8 = true: Blackwell, MI355X)",
            Precision::Nvfp4 => {
                "a GPU with NVFP4 tensor cores (fp4_tflops > 0 and nvfp4 = true: Blackwell)"
            }
            Precision::Mxfp4 => {
                "a GPU with MXFP4 tensor cores (fp4_tflops > 0 and mxfp4 = true: Blackwell, MI355X)"
            }
            _ => "a GPU with FP8 tensor cores (fp8_tflops > 0)",
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
            .ok_or_else(|| {
                Error::invalid("--precision", text, "one of bf16, fp8, mxfp8, nvfp4, mxfp4")
            })
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
        assert_eq!(
            e,
            "invalid --precision = fp4: one of bf16, fp8, mxfp8, nvfp4, mxfp4"
        );
    }

    #[test]
    fn fp4_operands_are_half_a_byte_and_their_scales() {
        // NVFP4: an E4M3 byte per 16 elements; MXFP4: an E8M0 byte per 32 (TE's formats).
        assert_eq!(Precision::Nvfp4.operand_bytes(), 0.5625);
        assert_eq!(Precision::Mxfp4.operand_bytes(), 0.53125);
        assert_eq!(Precision::Nvfp4.weight_copy_bytes(), 1.125);
        assert_eq!(Precision::Nvfp4.peak_tflops(2250.0, 4500.0, 9000.0), 9000.0);
        assert_eq!(Precision::Mxfp8.peak_tflops(2250.0, 4500.0, 9000.0), 4500.0);
        assert_eq!(Precision::Nvfp4.hadamard(), 32.0);
        assert_eq!(Precision::Mxfp4.hadamard(), 32.0);
        assert_eq!(Precision::Mxfp8.hadamard(), 0.0);
        assert!(Precision::Nvfp4.is_narrow() && !Precision::Nvfp4.is_fp8());
    }

    #[test]
    fn each_format_is_refused_by_name_where_the_tensor_cores_lack_it() {
        let hopper = Formats {
            fp8_tflops: 1979.0,
            ..Formats::default()
        };
        let mi355x = Formats {
            fp8_tflops: 5000.0,
            mxfp8: true,
            fp4_tflops: 10_100.0,
            nvfp4: false,
            mxfp4: true,
        };
        assert!(Precision::Fp8.supported_on(hopper).is_ok());
        for p in [Precision::Mxfp8, Precision::Nvfp4, Precision::Mxfp4] {
            let e = p.supported_on(hopper).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("invalid --precision = {p}: bf16, or a GPU")),
                "{e}"
            );
        }
        assert!(Precision::Mxfp4.supported_on(mi355x).is_ok());
        let e = Precision::Nvfp4
            .supported_on(mi355x)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nvfp4 = true: Blackwell"), "{e}");
        assert!(Precision::Fp8.supported_on(Formats::default()).is_err());
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
