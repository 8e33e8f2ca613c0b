//! What a step costs on a chip: a GPU's kernel figures (this file), the time of each operation
//! on them ([`operations`]), the eager stack's efficiency curve ([`efficiency`]), the one
//! calibrated parameter ([`calibration`]) and the FLOPs a token costs ([`flops`]). Uses
//! [`crate::cost::step`].
//!
//! The figures here are what one GPU's kernels reach: what the per-operation compute model
//! ([`operations`]) needs beyond the brief's peak and HBM bandwidth.
//!
//! A chip is found from the brief's own figures ([`Chip::of`]): the preset whose dense BF16
//! peak and HBM bandwidth are within 25 % of the brief's. Its kernel figures are fractions of
//! peak, so a brief that lowers the peak (a power-capped card, say) scales them with it. A GPU
//! with no published kernel figures (AMD's, Blackwell's attention) has no chip, and a stack that
//! needs one is refused by name rather than guessed.
//!
//! Sources:
//! - **GEMM ceiling**: the largest fraction of dense peak a BF16 matrix product reaches, from
//!   S. Bekman's Maximum Achievable Matmul FLOPS table (stas00/ml-engineering,
//!   `compute/accelerator/README.md`): A100 SXM 271.2 of 312 TFLOP/s (86.9 %), H100 SXM 794.5 of
//!   989 (80.3 %); for the H200 the calibration's own 8192³ product, 783.2 TFLOP/s, divided by
//!   its wave efficiency (4,096 tiles of 128 × 128 on 132 SMs, the least quantized: 4096/4224),
//!   80.8 %.
//! - **SMs**: 108 (A100), 132 (H100 SXM, H200), from NVIDIA's architecture white papers; the
//!   tiles are 128 × 256, 256 × 128 and 128 × 128, CUTLASS's and cuBLAS's usual BF16 tiles on
//!   both.
//! - **Attention**: forward + backward throughput of FlashAttention-class kernels, head
//!   dimension 128, causal, at sequence lengths 512 … 16,384, read from the published figures
//!   (Dao-AILab/flash-attention `assets/`): FlashAttention-2 on A100 80 GB 99, 133, 155, 173, 182,
//!   189 TFLOP/s; FlashAttention-2 on H100 SXM5 163, 221, 265, 294, 308, 328; cuDNN's fused
//!   attention on H100 (Shah et al. 2024, FlashAttention-3, Fig. 5 forward causal 315, 410, 484,
//!   518, 529, 539 and the backward figure 305, 408, 465, 499, 518, 516), combined as
//!   `3.5 / (1/fwd + 2.5/bwd)`: 308, 409, 470, 504, 521, 522. FlashAttention counts a causal
//!   forward as half of `4·s²·d` per head and the backward as 2.5 forwards; so does this model.
//!   On Ampere, Transformer Engine's and cuDNN's fused attention run FlashAttention-2, so the
//!   A100 has one table for both.
//! - **FP8 GEMM ceiling**: the same MAMF table's FP8 (`float8_e4m3fn`) rows, H100 SXM 1,402.6 of
//!   1,979 TFLOP/s (70.9 %), H200 1,453.4 of 1,979 (73.4 %) (stas00/ml-engineering @744d01e,
//!   `compute/accelerator/README.md`); the A100 has no FP8 tensor cores.

pub mod calibration;
pub mod efficiency;
pub mod flops;
pub mod operations;
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Attention;
use crate::cost::step::stack::Stack;
use crate::cost::Machine;
use crate::error::Error;
use crate::error::Result;

/// Sequence lengths of the attention tables.
pub const ATTENTION_SEQ: [f64; 6] = [512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16_384.0];

/// A measured GEMM: `m × n × k` at `tflops`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Anchor {
    /// Rows of the output.
    pub m: f64,
    /// Columns of the output.
    pub n: f64,
    /// The inner dimension.
    pub k: f64,
    /// TFLOP/s measured.
    pub tflops: f64,
}

/// One GPU's kernel figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chip {
    /// The preset it belongs to.
    pub name: &'static str,
    /// Dense BF16 peak it was measured against, TFLOP/s.
    pub peak_tflops: f64,
    /// HBM bandwidth, GB/s.
    pub hbm_gbps: f64,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Shared memory per SM, KB, and the part of it a GEMM's epilogue keeps for itself.
    pub smem_kb: (f64, f64),
    /// The best measured BF16 GEMM, which fixes the main loop's ceiling.
    pub anchor: Anchor,
    /// FlashAttention-2 forward + backward TFLOP/s at [`ATTENTION_SEQ`].
    pub flash2: [f64; 6],
    /// cuDNN fused attention forward + backward TFLOP/s at [`ATTENTION_SEQ`].
    pub cudnn: [f64; 6],
    /// The dense FP8 peak it was measured against, TFLOP/s, and the best measured FP8
    /// (E4M3) GEMM; `None` for a chip without FP8 tensor cores.
    pub fp8: Option<(f64, Anchor)>,
}

/// The GEMM tiles cuBLAS and CUTLASS choose among for BF16 on Ampere and Hopper, rows ×
/// columns of the output; the library's heuristics pick, per shape, the one that loses least,
/// and so does this model.
pub const TILES: [(f64, f64); 3] = [(128.0, 256.0), (256.0, 128.0), (128.0, 128.0)];

/// The depth of one K block of a tile, elements.
pub const BK: f64 = 64.0;
/// The depth of one K block of an FP8 tile: 128 one-byte elements, the bytes of [`BK`] BF16
/// ones (CUTLASS's Hopper FP8 kernels use `K = 128` tiles).
pub const FP8_BK: f64 = 128.0;

/// Fraction of HBM bandwidth that element-wise kernels and the optimizer reach: the
/// calibration's fused AdamW, 2.9 of the H200's 4.8 TB/s (data/calibration/MEASUREMENTS.md).
pub const HBM_EFFICIENCY: f64 = 0.6;

const FLASH2_A100: [f64; 6] = [99.0, 133.0, 155.0, 173.0, 182.0, 189.0];
const FLASH2_H100: [f64; 6] = [163.0, 221.0, 265.0, 294.0, 308.0, 328.0];
const CUDNN_H100: [f64; 6] = [308.0, 409.0, 470.0, 504.0, 521.0, 522.0];

/// The A100's best GEMM: MAMF 271.2 TFLOP/s at 1024 × 10240 × 5120.
const A100_ANCHOR: Anchor = Anchor {
    m: 1024.0,
    n: 10240.0,
    k: 5120.0,
    tflops: 271.2,
};

/// An 8192³ product measured at `tflops`.
const fn cubed(tflops: f64) -> Anchor {
    Anchor {
        m: 8192.0,
        n: 8192.0,
        k: 8192.0,
        tflops,
    }
}

const A100_80GB: Chip = Chip {
    name: "a100-80gb",
    peak_tflops: 312.0,
    hbm_gbps: 2_039.0,
    sms: 108,
    smem_kb: (164.0, 0.0),
    anchor: A100_ANCHOR,
    flash2: FLASH2_A100,
    cudnn: FLASH2_A100,
    fp8: None,
};

const H100_SXM: Chip = Chip {
    name: "h100-sxm",
    peak_tflops: 989.0,
    hbm_gbps: 3_350.0,
    sms: 132,
    smem_kb: (228.0, 16.0),
    // MAMF 794.5 TFLOP/s; the table does not give the shape, taken as 8192³.
    anchor: cubed(794.5),
    flash2: FLASH2_H100,
    cudnn: CUDNN_H100,
    // MAMF's FP8 (float8_e4m3fn) table: 1,402.6 of 1,979 TFLOP/s, the shape taken as 8192³.
    fp8: Some((1_979.0, cubed(1_402.6))),
};

/// The chips with published kernel figures: the A100 40 GB is the 80 GB's with slower HBM, the
/// H200 the H100's with faster HBM and its own measured product (the calibration's 8192³).
pub const CHIPS: [Chip; 4] = [
    A100_80GB,
    Chip {
        name: "a100-40gb",
        hbm_gbps: 1_555.0,
        ..A100_80GB
    },
    H100_SXM,
    Chip {
        name: "h200",
        hbm_gbps: 4_800.0,
        anchor: cubed(783.168),
        // MAMF's FP8 table: 1,453.4 of 1,979 TFLOP/s.
        fp8: Some((1_979.0, cubed(1_453.4))),
        ..H100_SXM
    },
];

impl Chip {
    /// The chip whose peak and HBM bandwidth are both within 25 % of these, the nearest if
    /// several are.
    pub fn of(peak_tflops: f64, hbm_gbps: f64) -> Option<&'static Chip> {
        let distance = |c: &Chip| {
            let p = (peak_tflops / c.peak_tflops).ln().abs();
            let m = (hbm_gbps / c.hbm_gbps).ln().abs();
            (p, m)
        };
        let near = 1.25f64.ln();
        CHIPS
            .iter()
            .filter(|c| {
                let (p, m) = distance(c);
                p <= near && m <= near
            })
            .min_by(|a, b| {
                let (pa, ma) = distance(a);
                let (pb, mb) = distance(b);
                (pa + ma).total_cmp(&(pb + mb))
            })
    }

    /// Forward + backward attention throughput of `kernel` at sequence length `s`, as a
    /// fraction of this chip's peak: the table linear in log₂ s, held outside it. `None` for
    /// the unfused kernel, which is costed as GEMMs and traffic.
    pub fn attention_fraction(&self, kernel: Attention, s: f64) -> Option<f64> {
        let table = match kernel {
            Attention::Flash2 => &self.flash2,
            Attention::Cudnn => &self.cudnn,
            Attention::Unfused => return None,
        };
        let x = ATTENTION_SEQ;
        let rate = if s <= x[0] {
            table[0]
        } else if s >= x[5] {
            table[5]
        } else {
            let i = x.partition_point(|&q| q <= s);
            let t = (s.log2() - x[i - 1].log2()) / (x[i].log2() - x[i - 1].log2());
            table[i - 1] + t * (table[i] - table[i - 1])
        };
        Some(rate / self.peak_tflops)
    }

    /// Software-pipeline stages of a `tm × tn` tile: as many `BK`-deep blocks of its A and B
    /// operands (BF16) as fit in shared memory beside the epilogue's share, 2 to 8 (CUTLASS's
    /// `StageCountAutoCarveout`).
    pub fn stages(&self, (tm, tn): (f64, f64)) -> f64 {
        let (smem, epilogue) = self.smem_kb;
        ((smem - epilogue) * 1024.0 / ((tm + tn) * BK * 2.0))
            .floor()
            .clamp(2.0, 8.0)
    }

    /// What the shape loses at its best tile, as a fraction: tile quantization (`m·n` over the
    /// tiles' area) × wave quantization (tiles over whole waves of one tile per SM) × the main
    /// loop's share of a tile's time, `k / (k + (stages + 2)·BK)` (the pipeline's fill before
    /// the first MMA and the epilogue's drain after the last).
    pub fn shape_fraction(&self, m: f64, n: f64, k: f64) -> f64 {
        self.shape_fraction_on(m, n, k, f64::from(self.sms))
    }

    /// [`Chip::shape_fraction`] on `sms` of the SMs (the rest busy with a collective), as a
    /// fraction of the whole chip's rate.
    pub fn shape_fraction_on(&self, m: f64, n: f64, k: f64, sms: f64) -> f64 {
        self.shape_fraction_deep(m, n, k, sms, BK)
    }

    /// [`Chip::shape_fraction_on`] with K blocks `bk` elements deep: [`BK`] for BF16,
    /// [`FP8_BK`] for FP8, whose one-byte blocks twice as deep take the same shared memory, so
    /// a tile's pipeline fills over twice as many K elements.
    pub fn shape_fraction_deep(&self, m: f64, n: f64, k: f64, sms: f64, bk: f64) -> f64 {
        let all = f64::from(self.sms);
        TILES
            .iter()
            .map(|&(tm, tn)| {
                let (rows, cols) = ((m / tm).ceil().max(1.0), (n / tn).ceil().max(1.0));
                let tiles = rows * cols;
                let waves = (tiles / sms).ceil();
                let fill = (self.stages((tm, tn)) + 2.0) * bk;
                m * n / (tiles * tm * tn) * tiles / (waves * all) * k / (k + fill)
            })
            .fold(0.0, f64::max)
    }

    /// The main loop's ceiling, a fraction of peak: the anchor's measured rate over what its
    /// own shape loses.
    pub fn gemm_ceiling(&self) -> f64 {
        let a = self.anchor;
        a.tflops / self.peak_tflops / self.shape_fraction(a.m, a.n, a.k)
    }

    /// The FP8 main loop's ceiling, a fraction of the FP8 peak, as [`Chip::gemm_ceiling`]
    /// from the FP8 anchor (the same tiles and waves, K blocks [`FP8_BK`] deep); `None`
    /// without FP8.
    pub fn fp8_ceiling(&self) -> Option<f64> {
        let sms = f64::from(self.sms);
        self.fp8
            .map(|(peak, a)| a.tflops / peak / self.shape_fraction_deep(a.m, a.n, a.k, sms, FP8_BK))
    }

    /// Fraction of peak an `m × n × k` BF16 GEMM reaches: the ceiling times what its shape
    /// loses ([`Chip::shape_fraction`]).
    pub fn gemm_fraction(&self, m: f64, n: f64, k: f64) -> f64 {
        self.gemm_ceiling() * self.shape_fraction(m, n, k)
    }
}

/// The chip the per-operation model runs `stack` on, or why there is none (`Ok(None)` for a
/// stack at the eager curve, which needs none). A search calls it once before it starts, so a
/// GPU without kernel figures is refused by name rather than leaving no configuration.
pub fn stack_chip(machine: &Machine, stack: Stack) -> Result<Option<&'static Chip>> {
    if !stack.settings().per_operation {
        return Ok(None);
    }
    chip_for(machine, stack).map(Some)
}

/// The chip the per-operation model runs `stack` on, or why there is none.
pub fn chip_for(machine: &Machine, stack: Stack) -> Result<&'static Chip> {
    Chip::of(machine.peak_tflops, machine.topology.hbm_gbps).ok_or_else(|| {
        let names: Vec<&str> = CHIPS.iter().map(|c| c.name).collect();
        Error::invalid(
            "--stack",
            stack,
            format!(
                "a GPU with published kernel figures ({}); a GPU of {} TFLOP/s and {} GB/s has none, \
                 so use --stack eager or one of those GPUs",
                names.join(", "),
                machine.peak_tflops,
                machine.topology.hbm_gbps
            ),
        )
    })
}

/// The FP8 ceiling the step's projections run at on `chip`, or why there is none: the GPU
/// must have FP8 tensor cores (`fp8_tflops` > 0; MXFP8 needs `mxfp8`) and published FP8 GEMM
/// figures.
pub fn fp8_for(machine: &Machine, chip: &Chip, precision: Precision) -> Result<f64> {
    precision.supported_on(machine.fp8_tflops, machine.mxfp8)?;
    chip.fp8_ceiling().ok_or_else(|| {
        Error::invalid(
            "--precision",
            precision,
            format!(
                "bf16 on the {}: it has no published FP8 GEMM figures",
                chip.name
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h200_ceiling_reproduces_the_calibration_s_8192_cubed_product() {
        let h200 = Chip::of(989.0, 4800.0).unwrap();
        assert_eq!(h200.name, "h200");
        let tflops = h200.gemm_fraction(8192.0, 8192.0, 8192.0) * 989.0;
        assert!((tflops - 783.168).abs() < 1e-9, "{tflops}");
        // By hand: 128 × 256 tiles, 2,048 of them in 16 waves of 132 (2048/2112); four stages
        // of 48 KB in 212 KB, so the main loop runs 8192/(8192 + 6·64) of the time. (128 × 128
        // quantizes the same, 4096/4224, but its six stages fill for longer.)
        let lost = 2048.0 / 2112.0 * 8192.0 / 8576.0;
        assert!((h200.shape_fraction(8192.0, 8192.0, 8192.0) - lost).abs() < 1e-12);
    }

    #[test]
    fn the_fp8_ceiling_reproduces_mamf_s_fp8_product() {
        let h100 = Chip::of(989.0, 3350.0).unwrap();
        let ceiling = h100.fp8_ceiling().unwrap();
        let lost = h100.shape_fraction_deep(8192.0, 8192.0, 8192.0, 132.0, FP8_BK);
        let tflops = ceiling * lost * 1979.0;
        assert!((tflops - 1402.6).abs() < 1e-9, "{tflops}");
        assert!(Chip::of(312.0, 2039.0).unwrap().fp8_ceiling().is_none());
    }

    #[test]
    fn stages_are_what_shared_memory_holds() {
        let h100 = Chip::of(989.0, 3350.0).unwrap();
        assert_eq!(h100.stages((128.0, 256.0)), 4.0); // 212 KB / 48 KB
        assert_eq!(h100.stages((128.0, 128.0)), 6.0); // 212 KB / 32 KB
        let a100 = Chip::of(312.0, 2039.0).unwrap();
        assert_eq!(a100.stages((128.0, 256.0)), 3.0); // 164 KB / 48 KB
    }

    #[test]
    fn a_wave_and_a_bit_costs_a_second_wave() {
        // 133 tiles on 132 SMs run in two waves: at 128 × 128 (and at 256 × 128, which halves
        // the tiles but pads) 133/264 of a full wave's rate.
        let h100 = Chip::of(989.0, 3350.0).unwrap();
        let k = 1e12; // a main loop so long that the fill does not count
        let f = h100.shape_fraction(128.0 * 133.0, 128.0, k);
        assert!((f - 133.0 / 264.0).abs() < 1e-6, "{f}");
        // A half-filled tile counts in full: 64 rows fill half of every tile.
        let half = h100.shape_fraction(64.0, 128.0 * 132.0, k);
        assert!((half - 0.5).abs() < 1e-6, "{half}");
    }

    #[test]
    fn attention_rises_with_the_sequence_and_is_read_between_points() {
        let a100 = Chip::of(312.0, 2039.0).unwrap();
        let at = |s| a100.attention_fraction(Attention::Flash2, s).unwrap() * 312.0;
        assert!((at(2048.0) - 155.0).abs() < 1e-9);
        assert!((at(2896.309) - 164.0).abs() < 0.01); // halfway in log₂ s
        assert_eq!(at(100.0), 99.0);
        assert_eq!(at(131_072.0), 189.0);
        assert!(a100
            .attention_fraction(Attention::Unfused, 2048.0)
            .is_none());
    }

    #[test]
    fn chips_are_found_by_their_figures_and_unknown_ones_are_not_guessed() {
        assert_eq!(Chip::of(312.0, 2039.0).unwrap().name, "a100-80gb");
        assert_eq!(Chip::of(312.0, 1555.0).unwrap().name, "a100-40gb");
        assert_eq!(Chip::of(835.0, 3350.0).unwrap().name, "h100-sxm");
        assert!(Chip::of(1307.4, 5300.0).is_none()); // MI300X
        assert!(Chip::of(2250.0, 8000.0).is_none()); // B200
    }
}
