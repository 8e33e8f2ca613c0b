//! Software-stack presets: what a training framework does that the detailed model must know —
//! its kernels, how it overlaps communication, what it keeps for backward, how it splits the
//! pipeline — as one name (`--stack megatron-te`). Every field is a default; the flags that set
//! it one by one still override it.
//!
//! | stack | kernels | attention | loss | TP / PP / DP overlap | stages | interleaving | CP | below BF16 |
//! |---|---|---|---|---|---|---|---|---|
//! | `megatron-te` | fused | cuDNN | fused FP32 | 1 / 1 / 1 | even | yes | ring | FP8, MXFP8, NVFP4 (MXFP4 on AMD) |
//! | `llama3` | fused, SwiGLU product recomputed | FlashAttention-2 | fused FP32 | 0 / 1 / 1 | one fewer layer first and last where L + 2 divides, else even | yes | all-gather | — |
//! | `torchtitan` | eager time, fused memory | FlashAttention-2 | eager FP32 | 0 / 0 / 1 | even | yes | all-gather | FP8, MXFP8 |
//! | `torchtitan-compile` | fused | FlashAttention-2 | fused FP32 | 0 / 0 / 1 | even | yes | all-gather | FP8, MXFP8 |
//! | `maxtext` | fused | cuDNN | fused FP32 | 1 / 1 / 1 | even | yes | all-gather | FP8 |
//! | `megatron-deepspeed` | fused | unfused | fused FP32 | 0 / 0 / 0 | embedding and head counted as layers where L + 2 divides, else even | no | — | — |
//! | `eager` | eager (the calibration's measured curve in h/TP) | — | — | 0 / 0 / 1 | even | yes | — | — |
//!
//! Context parallelism and FP8, stack by stack: Megatron-core runs Transformer Engine's
//! ring attention (`cp_comm_type` "p2p", its default) and TE's FP8 recipes (`--fp8-format
//! hybrid`, delayed or current scaling; MXFP8 on Blackwell, `--fp8-recipe mxfp8`); Llama 3
//! all-gathered K and V (§3.3.2) and trained in BF16; torchtitan's `context_parallel_degree`
//! uses PyTorch's context parallelism with the `allgather` rotate method (its default) and
//! torchao's float8 and MX converters (`quantize.linear.float8`, `quantize.linear.mx`);
//! MaxText all-gathers K and V for context parallelism and runs XLA's FP8 dot products
//! (`quantization=fp8`); Megatron-DeepSpeed (2021–22) has neither (DeepSpeed's Ulysses is a
//! different sequence split); the eager stack's curve was measured in BF16 without CP.
//!
//! Sources, stack by stack:
//! - **megatron-te** (Megatron-core / NeMo with Transformer Engine): NeMo-Framework-Launcher
//!   `conf/training/gpt3/175b.yaml` sets `ub_tp_comm_overlap: True` (TP collectives split into
//!   chunks and overlapped with the GEMMs), `overlap_p2p_comm: True`, and the distributed fused
//!   Adam with `overlap_grad_sync` and `overlap_param_sync`; NeMo 2's recipes set
//!   `overlap_grad_reduce`, `overlap_param_gather` and `grad_reduce_in_fp32` (FP32 gradient
//!   buffers). Transformer Engine fuses RMSNorm into the following linear, RoPE and SwiGLU, and
//!   runs cuDNN's fused attention on Hopper.
//! - **llama3** (Llama Team 2024, The Llama 3 Herd of Models, §3.3.2): FSDP that does not
//!   reshard after forward (ZeRO 2 here), an interleaved schedule whose first chunk holds only
//!   the embedding and last only the output and loss, "one Transformer layer" fewer on the first
//!   and last stages, asynchronous point-to-point communication, and 405B at 8K tokens "without
//!   activation checkpointing" on 80 GB cards — which fits only if the MLP keeps 4f, not 6f, so
//!   the stack recomputes the SwiGLU product in backward (an assumption this model states). TP
//!   overlap is not stated and not assumed.
//! - **torchtitan** (pytorch/torchtitan, FSDP2): eager element-wise kernels (FP32 RMSNorm, RoPE
//!   through complex numbers: `train_configs/llama2_13b.toml` has `norm_type = "rmsnorm"` and
//!   `compile = false`), `scaled_dot_product_attention` (FlashAttention-2), the loss as
//!   `cross_entropy(pred.float(), …)`, FSDP2's prefetch of the next layer's gather, reduce in
//!   FP32 (`mixed_precision_reduce = "float32"`); async TP is off by default. Its memory is
//!   counted with the fused list: the eager list (the calibration's own script, 54h a token for
//!   70B) would put torchtitan's Llama 2 13B without recomputation at 99 GB, and it ran on 80 GB
//!   A100s (`pytorch/torchtitan/docs/performance.md`) — so the published runs bound torchtitan's saved tensors from
//!   above, and this model takes the fused list as their estimate.
//! - **torchtitan-compile**: the same with `torch.compile` per layer, which fuses the
//!   element-wise work and the loss.
//! - **maxtext** (AI-Hypercomputer/maxtext under XLA; NVIDIA/dgxc-benchmarking `maxtext/`):
//!   `attention=cudnn_flash_te`, XLA's fusion of element-wise work, asynchronous collectives
//!   scheduled behind compute by XLA's latency-hiding scheduler.
//! - **megatron-deepspeed** (the 2021–22 stack of MT-NLG 530B and BLOOM 176B): Megatron-LM's
//!   fused softmax, bias-GeLU and LayerNorm kernels but attention with the scores materialised;
//!   no communication overlap (DeepSpeed's pipeline engine reduces gradients after the
//!   pipeline flush); `--pp-partition-method 'type:transformer|embedding'` (bigscience
//!   `tr11-176B-ml.slurm`) balances stages counting the embedding and the head as a layer
//!   each; DeepSpeed's pipeline has no interleaved schedule.
//! - **eager**: the model before stacks existed: the calibration's efficiency curve measured
//!   with eager PyTorch on an H200 (`data/calibration/`), no TP or PP overlap.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Precision of the gradient buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GradientPrecision {
    /// BF16, 2 bytes per parameter (the plate's assumption).
    Bf16,
    /// FP32, 4 bytes per parameter (Megatron-LM and DeepSpeed).
    Fp32,
}

impl GradientPrecision {
    /// Bytes per parameter.
    pub fn bytes(self) -> f64 {
        match self {
            GradientPrecision::Bf16 => 2.0,
            GradientPrecision::Fp32 => 4.0,
        }
    }
}

/// Precision the cross-entropy loss is computed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossPrecision {
    /// FP32 (Megatron-LM's default).
    Fp32,
    /// BF16.
    Bf16,
    /// The BF16 logits, whose gradient the loss's forward writes over them: Transformer
    /// Engine's `parallel_cross_entropy` (`pytorch/cross_entropy.py`, a Triton kernel that
    /// stores each block's softmax-minus-one-hot in the input and saves that buffer for a
    /// backward that only scales it), Megatron-core's `--cross-entropy-loss-fusion
    /// --cross-entropy-fusion-impl te`, which Megatron-Bridge's recipes and performance
    /// scripts set. No FP32 copy and no gradient buffer of the logits.
    #[serde(rename = "in-place")]
    InPlace,
}

impl LossPrecision {
    /// Bytes per logit kept from forward to backward.
    pub fn kept_bytes(self) -> f64 {
        match self {
            LossPrecision::Fp32 => 4.0,
            LossPrecision::Bf16 | LossPrecision::InPlace => 2.0,
        }
    }

    /// Bytes per logit at the loss's forward peak beyond what is kept.
    pub fn peak_extra_bytes(self) -> f64 {
        match self {
            // BF16 logits 2 + FP32 copy 4 + FP32 softmax 4 = 10 at the peak, 4 kept.
            LossPrecision::Fp32 => 6.0,
            // BF16 logits 2 + BF16 softmax 2 = 4 at the peak, 2 kept.
            LossPrecision::Bf16 => 2.0,
            // The logits alone, overwritten by their gradient (its few FP32 statistics a
            // token aside).
            LossPrecision::InPlace => 0.0,
        }
    }
}

/// How layers are spread over the pipeline stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StageSplit {
    /// As evenly as possible, the remainder on the last stages.
    Even,
    /// One layer fewer on the first and the last stage (Llama 3 405B: 126 layers as 7 + 14 × 8 + 7).
    Llama3,
    /// The embedding and the head counted as a layer each where the `L + 2` units divide
    /// evenly over the stages, then one fewer layer on the first and the last stage:
    /// DeepSpeed's `--pp-partition-method 'type:transformer|embedding'` (BLOOM: 72 units on 12
    /// stages, 5 + 10 × 6 + 5); where they do not, the layers alone spread evenly, as
    /// `type:transformer` does.
    Balanced,
    /// The loss counted as a layer and each multi-token-prediction depth as two (its layer and
    /// its head), the embedding as none, where those `L + 1 + 2D` units divide evenly over the
    /// stages, so the last stage holds `1 + 2D` fewer layers: Megatron-core's
    /// `--account-for-loss-in-pipeline-split`, and Megatron-Bridge's DeepSeek-V3 layouts
    /// (`Et*4|(t*4|)*14,tmL` on PP 16); where they do not, the layers alone spread evenly.
    Loss,
}

/// How a stack exchanges keys and values between context-parallel ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpComm {
    /// Megatron-core's ring (Transformer Engine's `cp_comm_type = "p2p"`, its default): `CP − 1`
    /// steps, each passing this rank's K and V chunk to the next while attention runs on the
    /// chunk in hand; backward passes K, V and their gradients.
    Ring,
    /// Llama 3's all-gather of K and V before attention and the reduce-scatter of their
    /// gradients after its backward, exposed (Llama Team 2024, §3.3.2: "the all-gather
    /// communication latency is exposed", small beside attention at long sequences with
    /// grouped-query attention); PyTorch's context parallelism in torchtitan
    /// (`context_parallel_rotate_method = "allgather"`) and MaxText's likewise.
    AllGather,
}

/// A software stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stack {
    /// Megatron-core / NeMo with Transformer Engine.
    MegatronTe,
    /// Meta's 4D-parallel stack as the Llama 3 paper describes it.
    Llama3,
    /// torchtitan, FSDP2, eager.
    Torchtitan,
    /// torchtitan with `torch.compile`.
    TorchtitanCompile,
    /// MaxText under XLA.
    Maxtext,
    /// Megatron-DeepSpeed, 2021–22.
    MegatronDeepspeed,
    /// Eager PyTorch at the calibration's measured curve.
    Eager,
    /// DeepSeek's own stack (HAI-LLM) as the DeepSeek-V3 report describes it (DeepSeek-AI
    /// 2024, §3.2–3.3): DualPipe, whose paired forward and backward chunks hide the
    /// all-to-alls and pipeline sends ("both all-to-all and PP communication can be fully
    /// hidden during execution", §3.2.1; planned as its one-copy V form, DualPipeV), fused
    /// kernels, FP8 with fine-grained scaling, no TP overlap (the run used no TP) nor context
    /// parallelism. No public launcher runs it: a plan on it grades what the report states.
    #[serde(rename = "deepseek")]
    DeepSeek,
}

/// What a stack sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The kernels whose saved tensors decide the activations kept (memory).
    pub kernels: Kernels,
    /// The element-wise kernels the time model costs.
    pub elementwise: Kernels,
    /// The attention kernel.
    pub attention: Attention,
    /// How the loss is computed.
    pub loss_kernel: LossKernel,
    /// Precision of the logits kept for the loss's backward.
    pub loss: LossPrecision,
    /// Gradient buffers.
    pub gradients: GradientPrecision,
    /// Layers per stage.
    pub stages: StageSplit,
    /// TP collectives hidden behind the layer's GEMMs, as far as they last.
    pub tp_overlap: f64,
    /// Whether the TP overlap runs on Transformer Engine's userbuffers, which hold memory of
    /// their own ([`crate::cost::memory::buffers::userbuffers`]); XLA's collective matmuls
    /// (MaxText) work in the activations' own buffers.
    pub userbuffers: bool,
    /// Pipeline sends hidden behind the next chunk's compute, as far as it lasts.
    pub pp_overlap: f64,
    /// DP collectives hidden behind backward (and ZeRO 3's gathers behind forward).
    pub dp_overlap: f64,
    /// Whether the stack runs interleaved schedules.
    pub interleaving: bool,
    /// The V schedules the stack runs ([`crate::cost::step::Schedule::is_v`]).
    pub v_schedules: VSchedules,
    /// Whether compute follows the per-operation model (else the eager curve).
    pub per_operation: bool,
    /// Context parallelism, if the stack has it, and how it exchanges K and V.
    pub cp: Option<CpComm>,
    /// Whether the stack trains with FP8 projections (per-tensor scaling).
    pub fp8: bool,
    /// Whether it trains with MXFP8 (block scaling, where the GPU has it).
    pub mxfp8: bool,
    /// Whether it trains with FP4 projections, in its vendor's 4-bit format: Megatron-core
    /// alone — NVFP4 on NVIDIA with Transformer Engine's `NVFP4BlockScaling` (Megatron-LM
    /// `--fp4-format e2m1 --fp4-recipe nvfp4`, its one FP4 recipe), MXFP4 on the MI355X with
    /// AMD's Primus (its Megatron-LM backend; AMD's MLPerf Training v6.0 submission, "a
    /// production-ready MXFP4 (FP4) training recipe for the LLM benchmarks"). Which format runs
    /// on which vendor's software is [`crate::cost::chip::recipe_runs`]'s.
    pub fp4: bool,
    /// Whether the router's probabilities multiply each route inside the experts'
    /// activation, so no route's expert output is kept for their gradient
    /// ([`crate::cost::memory::activations::Setting::probs_in_activation`]): Megatron-core's
    /// `TEGroupedMLP` (`weighted_bias_swiglu_impl`, `activation_func_with_probs`). torchtitan
    /// scales the routed input or output (`score_before_experts`) and MaxText weighs the
    /// experts' outputs in its combine (`"BSEM,BSE -> BSM"`), each keeping a `2h` tensor a
    /// route for the probabilities' gradient; the other stacks are counted the same way.
    pub probs_in_activation: bool,
}

impl Settings {
    /// Whether the stack has a recipe for `precision` (BF16 always).
    pub fn trains(&self, precision: crate::cost::step::precision::Precision) -> bool {
        use crate::cost::step::precision::Precision;
        match precision {
            Precision::Bf16 => true,
            Precision::Fp8 => self.fp8,
            Precision::Mxfp8 => self.mxfp8,
            Precision::Nvfp4 | Precision::Mxfp4 => self.fp4,
        }
    }
}

impl Stack {
    /// Every stack, in the order `--help` lists them.
    pub const ALL: [Stack; 8] = [
        Stack::MegatronTe,
        Stack::Llama3,
        Stack::Torchtitan,
        Stack::TorchtitanCompile,
        Stack::Maxtext,
        Stack::MegatronDeepspeed,
        Stack::Eager,
        Stack::DeepSeek,
    ];

    /// The name `--stack` takes.
    pub fn name(self) -> &'static str {
        match self {
            Stack::MegatronTe => "megatron-te",
            Stack::Llama3 => "llama3",
            Stack::Torchtitan => "torchtitan",
            Stack::TorchtitanCompile => "torchtitan-compile",
            Stack::Maxtext => "maxtext",
            Stack::MegatronDeepspeed => "megatron-deepspeed",
            Stack::Eager => "eager",
            Stack::DeepSeek => "deepseek",
        }
    }

    /// Whether the stack overlaps TP communication with the GEMMs ([`Settings::tp_overlap`]
    /// above 0), so that a step may ask for it (`--tp-comm-overlap on`).
    pub fn overlaps_tp(self) -> bool {
        self.settings().tp_overlap > 0.0
    }

    /// [`Stack::overlaps_tp`], or the error that refuses a step's TP overlap on this stack.
    pub fn tp_overlap_allowed(self) -> Result<()> {
        if self.overlaps_tp() {
            return Ok(());
        }
        Err(Error::invalid(
            "--tp-comm-overlap",
            "on",
            format!("off: the {self} stack has no TP-communication overlap"),
        ))
    }

    /// What the stack sets.
    pub fn settings(self) -> Settings {
        let base = Settings {
            kernels: Kernels::Fused,
            elementwise: Kernels::Fused,
            attention: Attention::Cudnn,
            loss_kernel: LossKernel::Fused,
            loss: LossPrecision::Fp32,
            gradients: GradientPrecision::Fp32,
            stages: StageSplit::Even,
            tp_overlap: 1.0,
            userbuffers: true,
            pp_overlap: 1.0,
            dp_overlap: 1.0,
            interleaving: true,
            v_schedules: VSchedules::None,
            per_operation: true,
            cp: Some(CpComm::Ring),
            fp8: true,
            mxfp8: true,
            fp4: true,
            probs_in_activation: true,
        };
        match self {
            Stack::MegatronTe => base,
            Stack::Maxtext => Settings {
                userbuffers: false,
                cp: Some(CpComm::AllGather),
                mxfp8: false,
                fp4: false,
                probs_in_activation: false,
                ..base
            },
            Stack::Llama3 => Settings {
                kernels: Kernels::Lean,
                elementwise: Kernels::Lean,
                attention: Attention::Flash2,
                stages: StageSplit::Balanced,
                tp_overlap: 0.0,
                cp: Some(CpComm::AllGather),
                fp8: false,
                mxfp8: false,
                fp4: false,
                probs_in_activation: false,
                ..base
            },
            Stack::Torchtitan => Settings {
                elementwise: Kernels::Eager,
                v_schedules: VSchedules::Torch,
                attention: Attention::Flash2,
                loss_kernel: LossKernel::Eager,
                tp_overlap: 0.0,
                pp_overlap: 0.0,
                cp: Some(CpComm::AllGather),
                fp4: false,
                probs_in_activation: false,
                ..base
            },
            Stack::TorchtitanCompile => Settings {
                attention: Attention::Flash2,
                tp_overlap: 0.0,
                pp_overlap: 0.0,
                cp: Some(CpComm::AllGather),
                fp4: false,
                probs_in_activation: false,
                ..base
            },
            Stack::MegatronDeepspeed => Settings {
                attention: Attention::Unfused,
                stages: StageSplit::Balanced,
                tp_overlap: 0.0,
                pp_overlap: 0.0,
                dp_overlap: 0.0,
                interleaving: false,
                cp: None,
                fp8: false,
                mxfp8: false,
                fp4: false,
                probs_in_activation: false,
                ..base
            },
            Stack::DeepSeek => Settings {
                tp_overlap: 0.0,
                userbuffers: false,
                interleaving: false,
                v_schedules: VSchedules::DualPipe,
                cp: None,
                mxfp8: false,
                fp4: false,
                probs_in_activation: false,
                ..base
            },
            Stack::Eager => Settings {
                kernels: Kernels::Eager,
                elementwise: Kernels::Eager,
                attention: Attention::Flash2,
                loss_kernel: LossKernel::Eager,
                tp_overlap: 0.0,
                pp_overlap: 0.0,
                per_operation: false,
                cp: None,
                fp8: false,
                mxfp8: false,
                fp4: false,
                probs_in_activation: false,
                ..base
            },
        }
    }
}

impl Default for Stack {
    /// Megatron-core with Transformer Engine, the stack NVIDIA's published recipes run.
    fn default() -> Self {
        Stack::MegatronTe
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Stack {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        let wanted = text.trim().to_ascii_lowercase();
        Stack::ALL
            .into_iter()
            .find(|s| s.name() == wanted)
            .ok_or_else(|| {
                let names: Vec<&str> = Stack::ALL.iter().map(|s| s.name()).collect();
                Error::invalid("--stack", text, format!("one of {}", names.join(", ")))
            })
    }
}

/// The V schedules ([`crate::cost::step::Schedule::ZeroBubbleV`],
/// [`crate::cost::step::Schedule::DualPipeV`]) a stack runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VSchedules {
    /// None: Megatron-core has 1F1B and interleaving only (`get_forward_backward_func`; its
    /// DualPipe-like overlap is `--overlap-moe-expert-parallel-comm`, `--ep-overlap`),
    /// DeepSpeed 1F1B, MaxText and the eager stack neither; torchtitan under `torch.compile`
    /// neither, PyTorch's split-backward schedules refusing compiled stages
    /// (`_check_torch_compile_compatibility`).
    None,
    /// PyTorch's `ScheduleZBVZeroBubble` and `ScheduleDualPipeV`, which torchtitan runs
    /// (`--parallelism.pipeline_parallel_schedule`). Their DualPipeV orders the passes but
    /// does not overlap a forward chunk with the backward beside it (pytorch/pytorch#159591:
    /// "This schedule doesn't perform the actual 'overlap' during execution"), so its
    /// all-to-alls stay exposed.
    Torch,
    /// DualPipe as DeepSeek runs it (`deepseek-ai/DualPipe`, DeepSeek-V3 §3.2.1), planned as
    /// DualPipeV: each forward chunk runs beside a backward chunk, their all-to-alls hidden
    /// behind the other's compute.
    DualPipe,
}

impl VSchedules {
    /// Whether its DualPipeV hides each chunk's all-to-alls behind the other direction's
    /// compute.
    pub fn overlaps(self) -> bool {
        self == VSchedules::DualPipe
    }
}

/// How the layer is implemented, which decides what it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// FlashAttention, fused RMSNorm, RoPE and SwiGLU (Megatron-Core with Transformer Engine).
    Fused,
    /// Eager PyTorch, as in `data/calibration/measure_layers.py`.
    Eager,
    /// Fused kernels that keep SwiGLU's two inputs only and recompute its product in backward
    /// (one element-wise pass), 4f of the MLP's 6f: the `llama3` stack, which trained 405B at
    /// 8,192 tokens without activation checkpointing on 80 GB cards (Llama Team 2024, §3.3.2).
    Lean,
}

/// The attention kernel a stack runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attention {
    /// FlashAttention-2 (PyTorch's SDPA flash backend).
    Flash2,
    /// cuDNN's fused flash attention (Transformer Engine, XLA on Hopper).
    Cudnn,
    /// The `s × s` scores materialised: two batched GEMMs and a fused softmax (Megatron-LM
    /// before FlashAttention).
    Unfused,
}

/// How the cross-entropy loss is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossKernel {
    /// Vocabulary-parallel FP32 cross-entropy in one fused pass (Megatron-LM).
    Fused,
    /// `cross_entropy(logits.float(), …)` in eager PyTorch.
    Eager,
    /// Chunked: the FP32 logits are never written whole (Liger, XLA's fusion).
    Chunked,
}

impl LossKernel {
    /// Bytes moved per logit, forward and backward.
    pub fn bytes_per_logit(self) -> f64 {
        match self {
            LossKernel::Fused => 24.0,
            LossKernel::Eager => 40.0,
            LossKernel::Chunked => 8.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stack_reads_back_its_name() {
        for s in Stack::ALL {
            assert_eq!(s.name().parse::<Stack>().unwrap(), s);
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.name())
            );
        }
        let e = "nemo".parse::<Stack>().unwrap_err().to_string();
        assert!(
            e.starts_with("invalid --stack = nemo: one of megatron-te, llama3,"),
            "{e}"
        );
    }

    #[test]
    fn the_recipes_overlap_what_their_configs_say() {
        let te = Stack::MegatronTe.settings();
        assert_eq!(
            (te.tp_overlap, te.pp_overlap, te.dp_overlap),
            (1.0, 1.0, 1.0)
        );
        let ds = Stack::MegatronDeepspeed.settings();
        assert_eq!(
            (ds.tp_overlap, ds.pp_overlap, ds.dp_overlap),
            (0.0, 0.0, 0.0)
        );
        assert!(!ds.interleaving);
        assert!(!Stack::Eager.settings().per_operation);
        // Llama 3's split where L + 2 divides over the stages (405B on 16: 7 + 14 × 8 + 7).
        assert_eq!(Stack::Llama3.settings().stages, StageSplit::Balanced);
    }
}
