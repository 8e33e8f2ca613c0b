//! Each preset's kernel figures, with their sources: the measured GEMM anchors, the attention
//! tables and the chips built from them ([`CHIPS`]), and the types that hold them; the rules
//! that derive what is not published, and what the figures give a step, are in
//! [`crate::cost::chip`].

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

/// Where a chip's GEMM ceiling in one precision comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ceiling {
    /// Measured: the best published product, whose own shape's losses the ceiling is net of.
    Measured(Anchor),
    /// Not published: *derived* by the sibling rule — the ceiling (a fraction of peak) of the
    /// nearest sibling of the same architecture where it is published, at this chip's own
    /// peak. Tested where both siblings are published
    /// (`tests::the_sibling_rule_reproduces_published_siblings`).
    Sibling(&'static Chip),
    /// Not published, and no sibling has it: *derived* by the narrowing rule — this chip's
    /// ceiling one precision wider (BF16 for FP8, FP8 for FP4) times the mean ratio of the two
    /// ceilings over the chips where both are measured ([`crate::cost::chip::narrowing`]). Tested leaving each
    /// measured chip out (`tests::the_narrowing_rule_reproduces_each_measured_fp8_ceiling`).
    Narrowed,
}

impl Ceiling {
    /// Whether the figure was derived rather than measured.
    pub fn derived(&self) -> bool {
        !matches!(self, Ceiling::Measured(_))
    }
}

/// Who makes the chip: what decides which stacks' low-precision recipes run on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// NVIDIA (CUDA).
    Nvidia,
    /// AMD (ROCm).
    Amd,
}

/// One GPU's kernel figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chip {
    /// The preset it belongs to.
    pub name: &'static str,
    /// Who makes it.
    pub vendor: Vendor,
    /// Dense BF16 peak it was measured against, TFLOP/s.
    pub peak_tflops: f64,
    /// HBM bandwidth, GB/s.
    pub hbm_gbps: f64,
    /// Its preset's ring all-reduce bus bandwidth in a node, GB/s: only a tie-break in
    /// [`Chip::on`] (the H800 is the H100's die with NVLink cut, told apart by its links).
    pub intra_node_gbps: f64,
    /// Streaming multiprocessors (compute units on AMD).
    pub sms: u32,
    /// Shared memory per SM (LDS per CU), KB, and the part of it a GEMM's epilogue keeps for
    /// itself.
    pub smem_kb: (f64, f64),
    /// Whether a tile's pipeline fill and epilogue hide behind the next tile's main loop, so a
    /// tile loses none of its time to them ([`Chip::shape_fraction_deep`]): Blackwell's
    /// persistent CUTLASS/cuBLAS kernels, whose accumulators sit in tensor memory, double
    /// buffered, so one tile's epilogue drains while the next one's loads and MMAs run. The
    /// measurements say so: under Hopper's fill rule the B300's BF16 anchor (K = 1,024) and the
    /// GB200's FP8 one (K = 1,536) would need 109 % and 108 % of the peak in the main loop;
    /// without it the six Blackwell anchors give ceilings of 72–79 %, and the B200's and
    /// B300's agree within 1.5 % (`tests::the_sibling_rule_reproduces_published_siblings`).
    pub overlaps_fill: bool,
    /// The BF16 GEMM ceiling's source: the best measured BF16 GEMM fixes the main loop's
    /// ceiling.
    pub anchor: Ceiling,
    /// FlashAttention-2 forward + backward TFLOP/s at [`ATTENTION_SEQ`].
    pub flash2: [f64; 6],
    /// cuDNN fused attention (on AMD, aiter's) forward + backward TFLOP/s at
    /// [`ATTENTION_SEQ`].
    pub cudnn: [f64; 6],
    /// The dense FP8 peak it was measured against, TFLOP/s, and the FP8 (E4M3) GEMM
    /// ceiling's source; `None` for a chip without FP8 tensor cores.
    pub fp8: Option<(f64, Ceiling)>,
    /// Whether it scales FP8 by blocks of 32 (MXFP8).
    pub mxfp8: bool,
    /// The dense FP4 peak, TFLOP/s, and the FP4 GEMM ceiling's source; `None` without FP4.
    pub fp4: Option<(f64, Ceiling)>,
    /// Whether it runs NVFP4 and MXFP4.
    pub fp4_formats: (bool, bool),
    /// The figures beyond the GEMM ceilings that were derived, and by which rule; the GEMM
    /// ceilings say so themselves ([`Ceiling`]). Printed with every detailed report on the
    /// chip ([`Chip::derived_figures`]).
    pub derived: &'static [&'static str],
}

pub(crate) const FLASH2_A100: [f64; 6] = [99.0, 133.0, 155.0, 173.0, 182.0, 189.0];
pub(crate) const FLASH2_H100: [f64; 6] = [163.0, 221.0, 265.0, 294.0, 308.0, 328.0];
pub(crate) const CUDNN_H100: [f64; 6] = [308.0, 409.0, 470.0, 504.0, 521.0, 522.0];

/// Forward + backward throughput of an attention kernel from its forward and backward
/// rates, TFLOP/s: `3.5 / (1/fwd + 2.5/bwd)` (the backward runs 2.5 forwards' FLOPs).
pub const fn combined(forward: f64, backward: f64) -> f64 {
    3.5 / (1.0 / forward + 2.5 / backward)
}

/// A table from its four measured points at 1,024 … 8,192 tokens, the ends *derived* by the
/// H100 cuDNN table's own ratios: 512 tokens at its 1,024's × 308/409, 16,384 at its 8,192's ×
/// 522/521 (tested on the FlashAttention-2 tables, which have both ends:
/// `tests::the_end_rule_reproduces_the_flash2_tables_ends`).
pub const fn with_ends(mid: [f64; 4]) -> [f64; 6] {
    [
        mid[0] * (CUDNN_H100[0] / CUDNN_H100[1]),
        mid[0],
        mid[1],
        mid[2],
        mid[3],
        mid[3] * (CUDNN_H100[5] / CUDNN_H100[4]),
    ]
}

/// `table` scaled by `to / from`: the same fractions of a different peak (the sibling rule).
pub(crate) const fn scaled(table: [f64; 6], to: f64, from: f64) -> [f64; 6] {
    let r = to / from;
    [
        table[0] * r,
        table[1] * r,
        table[2] * r,
        table[3] * r,
        table[4] * r,
        table[5] * r,
    ]
}

/// The backward's share of the forward rate for FlashAttention-4 on SM100, causal, head
/// dimension 128, sequence 8,192: 1,208.6 of 1,418.1 TFLOP/s (2-CTA backward), the one length
/// where both are published (Dao-AILab/flash-attention PR #2280). The other lengths' backward
/// is *derived* as their forward times this share (on the H100's cuDNN figures the rule
/// reproduces each combined figure within 2 %:
/// `tests::the_backward_share_rule_reproduces_the_h100_cudnn_table`).
pub const SM100_BACKWARD_SHARE: f64 = 1_208.6 / 1_418.1;

/// FlashAttention-4 / cuDNN on SM100 at the GB200's 2,500 TFLOP/s peak, causal, head dimension
/// 128: forward 829, 1,172 and 1,431 TFLOP/s at 1,024, 2,048 and 4,096 tokens
/// (Dao-AILab/flash-attention PR #2605, whose MFU column counts against 2,500 TFLOP/s, the
/// GB200's peak; the GPU is not named), forward 1,418.1 and backward 1,208.6 at 8,192 (PR
/// #2280, an SM100 GPU, not named); the backward elsewhere by [`SM100_BACKWARD_SHARE`], the
/// ends by [`with_ends`]. Combined: 555.5, 737.7, 1,042.9, 1,273.3, 1,261.9, 1,264.3.
pub(crate) const ATTENTION_GB200: [f64; 6] = with_ends([
    combined(829.0, 829.0 * SM100_BACKWARD_SHARE),
    combined(1_172.0, 1_172.0 * SM100_BACKWARD_SHARE),
    combined(1_431.0, 1_431.0 * SM100_BACKWARD_SHARE),
    combined(1_418.1, 1_208.6),
]);

/// AMD's aiter assembly kernels (ROCm/aiter `op_tests/cpp/mha/README.md` @0403bcd, BF16,
/// causal, head dimension 128, batch 4, 64 query and 8 KV heads), forward and backward with
/// FP32 dQ accumulation (`a32`, as FlashAttention accumulates dQ) at 1,024 … 8,192 tokens, on
/// the MI300X: 326.51 / 266.9, 425.735 / 326.805, 513.79 / 391.235, 540.515 / 434.645; ends
/// by [`with_ends`] (aiter's 16,384-token forward at batch 1, 541.55, is 1.002 × its 8,192's,
/// the rule's 522/521). Combined: 212.1, 281.6, 350.0, 419.8, 460.4, 461.3.
pub(crate) const ATTENTION_MI300X: [f64; 6] = with_ends([
    combined(326.51, 266.9),
    combined(425.735, 326.805),
    combined(513.79, 391.235),
    combined(540.515, 434.645),
]);

/// The same table on the MI355X: 638.705 / 470.95, 899.845 / 621.295, 1,174.92 / 722.205,
/// 1,319.225 / 774.25. Combined: 383.4, 509.2, 681.6, 811.5, 877.9, 879.5.
pub(crate) const ATTENTION_MI355X: [f64; 6] = with_ends([
    combined(638.705, 470.95),
    combined(899.845, 621.295),
    combined(1_174.92, 722.205),
    combined(1_319.225, 774.25),
]);

/// The A100's best GEMM: MAMF 271.2 TFLOP/s at 1024 × 10240 × 5120.
pub(crate) const A100_ANCHOR: Anchor = Anchor {
    m: 1024.0,
    n: 10240.0,
    k: 5120.0,
    tflops: 271.2,
};

/// An 8192³ product measured at `tflops`.
pub(crate) const fn cubed(tflops: f64) -> Anchor {
    Anchor {
        m: 8192.0,
        n: 8192.0,
        k: 8192.0,
        tflops,
    }
}

/// An `m × n × k` product measured at `tflops`.
pub(crate) const fn measured(m: f64, n: f64, k: f64, tflops: f64) -> Ceiling {
    Ceiling::Measured(Anchor { m, n, k, tflops })
}

pub(crate) const A100_80GB: Chip = Chip {
    name: "a100-80gb",
    vendor: Vendor::Nvidia,
    peak_tflops: 312.0,
    hbm_gbps: 2_039.0,
    intra_node_gbps: 230.0,
    sms: 108,
    smem_kb: (164.0, 0.0),
    overlaps_fill: false,
    anchor: Ceiling::Measured(A100_ANCHOR),
    flash2: FLASH2_A100,
    cudnn: FLASH2_A100,
    fp8: None,
    mxfp8: false,
    fp4: None,
    fp4_formats: (false, false),
    derived: &[],
};

pub(crate) const H100_SXM: Chip = Chip {
    name: "h100-sxm",
    vendor: Vendor::Nvidia,
    peak_tflops: 989.0,
    hbm_gbps: 3_350.0,
    intra_node_gbps: 370.0,
    sms: 132,
    smem_kb: (228.0, 16.0),
    overlaps_fill: false,
    // MAMF 794.5 TFLOP/s; the table does not give the shape, taken as 8192³.
    anchor: Ceiling::Measured(cubed(794.5)),
    flash2: FLASH2_H100,
    cudnn: CUDNN_H100,
    // MAMF's FP8 (float8_e4m3fn) table: 1,402.6 of 1,979 TFLOP/s, the shape taken as 8192³.
    fp8: Some((1_979.0, Ceiling::Measured(cubed(1_402.6)))),
    mxfp8: false,
    fp4: None,
    fp4_formats: (false, false),
    derived: &[],
};

pub(crate) const H200: Chip = Chip {
    name: "h200",
    hbm_gbps: 4_800.0,
    intra_node_gbps: 368.0,
    anchor: Ceiling::Measured(cubed(783.168)),
    // MAMF's FP8 table: 1,453.4 of 1,979 TFLOP/s.
    fp8: Some((1_979.0, Ceiling::Measured(cubed(1_453.4)))),
    ..H100_SXM
};

/// The H800: the H100 SXM's die (132 SMs, its peaks and HBM) with NVLink cut; no kernel
/// figure of its own is published beyond DeepGEMM's block-scaled FP8 (a different recipe), so
/// every figure is the H100's by the sibling rule.
pub(crate) const H800: Chip = Chip {
    name: "h800",
    intra_node_gbps: 164.0,
    anchor: Ceiling::Sibling(&H100_SXM),
    fp8: Some((1_979.0, Ceiling::Sibling(&H100_SXM))),
    derived: &[
        "SMs and shared memory: the H100 SXM's (the same die)",
        "attention: the H100 SXM's tables (the same die; sibling rule)",
    ],
    ..H100_SXM
};

/// The B200 (HGX): 148 SMs and 228 KB of shared memory per SM (XLA's device capture
/// `core_count: 148`, `shared_memory_per_core: 233472`; NVIDIA's Blackwell tuning guide, "228
/// KB" per SM for compute capability 10.0), the epilogue's share taken as Hopper's; MAMF BF16
/// 1,745.0 TFLOP/s at 1792 × 16128 × 3072 and FP8 3,432.5 at 15360 × 4096 × 3072
/// (stas00/ml-engineering @744d01e); FP4: cuBLAS's MXFP4 8192³, 5,239 TFLOP/s, the library
/// Transformer Engine and PyTorch call (deepseek-ai/DeepGEMM PR #348, "Dense GEMM perf (B200,
/// CUDA 12.9, vs cublasTest 13.3 direct binary)", whose own kernel runs the product at 5,702).
pub(crate) const B200: Chip = Chip {
    name: "b200",
    vendor: Vendor::Nvidia,
    peak_tflops: 2_250.0,
    hbm_gbps: 8_000.0,
    intra_node_gbps: 682.0,
    sms: 148,
    smem_kb: (228.0, 16.0),
    overlaps_fill: true,
    anchor: measured(1792.0, 16128.0, 3072.0, 1_745.0),
    flash2: scaled(ATTENTION_GB200, 2_250.0, 2_500.0),
    cudnn: scaled(ATTENTION_GB200, 2_250.0, 2_500.0),
    fp8: Some((4_500.0, measured(15360.0, 4096.0, 3072.0, 3_432.5))),
    mxfp8: true,
    fp4: Some((9_000.0, Ceiling::Measured(cubed(5_239.0)))),
    fp4_formats: (true, true),
    derived: &[
        "attention: the GB200's SM100 tables at the same fraction of peak (sibling rule)",
        "FlashAttention-2 stacks' attention: the cuDNN / FlashAttention-4 table (no FA2 figures at head dimension 128 on SM100)",
        "shared memory's epilogue share: Hopper's",
    ],
};

/// The B300 (HGX, Blackwell Ultra): 148 SMs (XLA's capture; third parties say 160), MAMF BF16
/// 1,769.0 at 12288 × 18432 × 1024 and FP8 3,353.3 at 3072 × 6144 × 7168; FP4 not published.
pub(crate) const B300: Chip = Chip {
    name: "b300",
    anchor: measured(12288.0, 18432.0, 1024.0, 1_769.0),
    fp8: Some((4_500.0, measured(3072.0, 6144.0, 7168.0, 3_353.3))),
    fp4: Some((12_600.0, Ceiling::Sibling(&B200))),
    derived: &[
        "attention: the GB200's SM100 tables at the same fraction of peak (sibling rule)",
        "FlashAttention-2 stacks' attention: the cuDNN / FlashAttention-4 table (no FA2 figures at head dimension 128 on SM100)",
        "shared memory: the B200's (XLA's capture gives the same 228 KB)",
    ],
    ..B200
};

/// The GB200 (NVL72): 152 SMs (XLA's device capture, `model_str: "sm_10.0a … 152 cores"`),
/// MAMF BF16 1,822.0 at 4096 × 9728 × 2048 and FP8 3,615.6 at 19456 × 5120 × 1536; the SM100
/// attention tables are counted against its 2,500 TFLOP/s ([`ATTENTION_GB200`]).
pub(crate) const GB200: Chip = Chip {
    name: "gb200",
    peak_tflops: 2_500.0,
    sms: 152,
    anchor: measured(4096.0, 9728.0, 2048.0, 1_822.0),
    flash2: ATTENTION_GB200,
    cudnn: ATTENTION_GB200,
    fp8: Some((5_000.0, measured(19456.0, 5120.0, 1536.0, 3_615.6))),
    fp4: Some((10_000.0, Ceiling::Sibling(&B200))),
    derived: &[
        "attention at 512 and 16,384 tokens and the backward but at 8,192 (end and backward-share rules)",
        "FlashAttention-2 stacks' attention: the cuDNN / FlashAttention-4 table (no FA2 figures at head dimension 128 on SM100)",
        "shared memory: the B200's",
    ],
    ..B200
};

/// The GB300 (NVL72, Blackwell Ultra): 152 SMs (XLA's capture); no GEMM or attention figure
/// published, so the GB200's by the sibling rule (the same package and peaks).
pub(crate) const GB300: Chip = Chip {
    name: "gb300",
    anchor: Ceiling::Sibling(&GB200),
    fp8: Some((5_000.0, Ceiling::Sibling(&GB200))),
    fp4: Some((15_000.0, Ceiling::Sibling(&B200))),
    derived: &[
        "attention: the GB200's tables (sibling rule)",
        "FlashAttention-2 stacks' attention: the cuDNN / FlashAttention-4 table (no FA2 figures at head dimension 128 on SM100)",
        "shared memory: the B200's",
    ],
    ..GB200
};

/// The MI300X: 304 CUs and 64 KiB of LDS each (ROCm `gpu-arch-specs.rst`), no epilogue share
/// assumed; MAMF BF16 668.4 TFLOP/s at 10240 × 15360 × 8192 (its FP8 row is blank); attention
/// [`ATTENTION_MI300X`].
pub(crate) const MI300X: Chip = Chip {
    name: "mi300x",
    vendor: Vendor::Amd,
    peak_tflops: 1_307.4,
    hbm_gbps: 5_300.0,
    intra_node_gbps: 313.0,
    sms: 304,
    smem_kb: (64.0, 0.0),
    overlaps_fill: false,
    anchor: measured(10240.0, 15360.0, 8192.0, 668.4),
    flash2: ATTENTION_MI300X,
    cudnn: ATTENTION_MI300X,
    fp8: Some((2_614.9, Ceiling::Narrowed)),
    mxfp8: false,
    fp4: None,
    fp4_formats: (false, false),
    derived: &[
        "attention at 512 and 16,384 tokens (end rule)",
        "FlashAttention-2 stacks' attention: aiter's table (PyTorch's flash backend on ROCm is AMD's kernel)",
        "GEMM tiles: NVIDIA's (hipBLASLt's tiles not modelled)",
    ],
};

/// The MI325X: the MI300X's CDNA3 die (304 CUs, 64 KiB LDS) with HBM3e; MAMF BF16 784.9 at
/// 13312 × 10240 × 8192 (PyTorch TunableOp, 1,000 W); attention not published.
pub(crate) const MI325X: Chip = Chip {
    name: "mi325x",
    hbm_gbps: 6_000.0,
    anchor: measured(13312.0, 10240.0, 8192.0, 784.9),
    flash2: ATTENTION_MI300X,
    cudnn: ATTENTION_MI300X,
    derived: &[
        "attention: the MI300X's tables (sibling rule, the same die and peak)",
        "GEMM tiles: NVIDIA's (hipBLASLt's tiles not modelled)",
    ],
    ..MI300X
};

/// The MI355X: 256 CUs with 160 KiB of LDS each (ROCm 7.13 `gpu-specs`); MAMF BF16 1,565.0 at
/// 12288 × 8192 × 8192 — counted against AMD's 2,500 TFLOP/s, not the 2,300 MAMF's table
/// divides by (the MI350X's figure), so 62.6 % at that shape; attention [`ATTENTION_MI355X`].
pub(crate) const MI355X: Chip = Chip {
    name: "mi355x",
    peak_tflops: 2_500.0,
    hbm_gbps: 8_000.0,
    intra_node_gbps: 374.0,
    sms: 256,
    smem_kb: (160.0, 0.0),
    anchor: measured(12288.0, 8192.0, 8192.0, 1_565.0),
    flash2: ATTENTION_MI355X,
    cudnn: ATTENTION_MI355X,
    fp8: Some((5_000.0, Ceiling::Narrowed)),
    mxfp8: true,
    fp4: Some((10_100.0, Ceiling::Narrowed)),
    fp4_formats: (false, true),
    derived: &[
        "attention at 512 and 16,384 tokens (end rule)",
        "FlashAttention-2 stacks' attention: aiter's table (PyTorch's flash backend on ROCm is AMD's kernel)",
        "GEMM tiles: NVIDIA's (hipBLASLt's tiles not modelled)",
        "block-scaled (MXFP8, blockwise) GEMMs at the B300's 0.866 of per-tensor FP8 (Transformer Engine's table; not measured on CDNA4)",
    ],
    ..MI300X
};

/// The chips with kernel figures, one for every GPU preset: the A100 40 GB is the 80 GB's with
/// slower HBM, the H200 the H100's with faster HBM and its own measured product (the
/// calibration's 8192³).
pub const CHIPS: [Chip; 13] = [
    A100_80GB,
    Chip {
        name: "a100-40gb",
        hbm_gbps: 1_555.0,
        ..A100_80GB
    },
    H100_SXM,
    Chip {
        name: "h100-pcie",
        peak_tflops: 756.0,
        hbm_gbps: 2_000.0,
        intra_node_gbps: 40.0,
        sms: 114,
        anchor: Ceiling::Sibling(&H100_SXM),
        fp8: Some((1_513.0, Ceiling::Sibling(&H100_SXM))),
        derived: &[
            "SMs: 114 (NVIDIA H100 white paper); shared memory the SXM's",
            "attention: the H100 SXM's tables at the same fraction of peak (sibling rule)",
        ],
        flash2: scaled(FLASH2_H100, 756.0, 989.0),
        cudnn: scaled(CUDNN_H100, 756.0, 989.0),
        ..H100_SXM
    },
    H200,
    H800,
    B200,
    B300,
    GB200,
    GB300,
    MI300X,
    MI325X,
    MI355X,
];
