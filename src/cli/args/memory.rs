//! The memory model's flags (`--memory` and the detailed model's stack, precisions, kernels,
//! reserves and experts' settings), shared by `check` and `search`.
#![allow(rustdoc::broken_intra_doc_links)]

use clap::{Args, ValueEnum};

use super::parse::{stack_parser, OnOff};
use crate::cost::step::detailed::Options;
use crate::cost::step::experts::Dispatcher;
use crate::cost::step::graphs::CudaGraphs;
use crate::cost::step::optimizer_offload::Fraction;
use crate::cost::step::recipe::{Bf16Layers, Fp8Recipe, MasterWeights, Optimizer, OptimizerStates};
use crate::cost::step::stack::{GradientPrecision, Kernels, LossPrecision, Stack, StageSplit};
use crate::cost::step::MoeRecompute;
use crate::error::{Error, Result};

/// `--memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MemoryArg {
    /// SPEC.md's plate model (16 bytes per parameter, full recomputation, one sequence).
    Plate,
    /// A real training step, stage by stage, with the knobs below.
    Detailed,
}

/// The settings of the detailed memory model (SPEC.md §4), shared by `check` and `search`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Memory model")]
pub struct DetailedArgs {
    /// Memory model: the plate (default, reproduces SPEC.md) or a detailed training step.
    #[arg(long, value_enum, default_value = "plate")]
    pub memory: MemoryArg,
    /// Software stack: its kernels, overlaps, gradient and loss precision and stage split are
    /// the defaults of the flags below and of the time model's [detailed; default:
    /// megatron-te].
    #[arg(long, value_name = "NAME", value_parser = stack_parser())]
    pub stack: Option<Stack>,
    /// Gradient buffers [detailed; default: the stack's, fp32 for every stack].
    #[arg(long, value_enum)]
    pub gradients: Option<GradientArg>,
    /// Precision of the cross-entropy loss [detailed; default: fp32].
    #[arg(long, value_enum)]
    pub loss_precision: Option<LossArg>,
    /// Kernels, which decide what activations are kept (and, when not the stack's, the time
    /// model's element-wise work) [detailed; default: the stack's].
    #[arg(long, value_enum)]
    pub kernels: Option<KernelsArg>,
    /// Layers per pipeline stage [detailed; default: the stack's; llama3 puts one fewer on the
    /// first and last stage, balanced does where L + 2 divides by PP].
    #[arg(long, value_enum)]
    pub stages: Option<StagesArg>,
    /// Fixed reserve per GPU for CUDA context and NCCL buffers, GB [detailed; default: 2].
    #[arg(long, value_name = "GB")]
    pub reserve_gb: Option<f64>,
    /// Fraction lost to allocator fragmentation [detailed; default: 0.05].
    #[arg(long, value_name = "FRACTION")]
    pub fragmentation: Option<f64>,
    /// A mixture of experts' load imbalance, the busiest rank's routes over the mean [detailed;
    /// default: 1, balanced routing; a capacity factor bounds it].
    #[arg(long, value_name = "FACTOR")]
    pub moe_imbalance: Option<f64>,
    /// Overlap a mixture of experts' all-to-alls with another micro-batch's compute
    /// (Megatron-core's --overlap-moe-expert-parallel-comm) [detailed; default: off].
    #[arg(long, value_enum)]
    pub ep_overlap: Option<OnOff>,
    /// What a mixture of experts's MoE layers recompute beyond --recompute: act, SwiGLU's
    /// output (Megatron-core's --recompute-modules moe_act), or layer, the whole MoE layer
    /// (moe) [detailed; default: none].
    #[arg(long, value_enum)]
    pub moe_recompute: Option<MoeRecomputeArg>,
    /// Recompute an MoE layer's pre-MLP norm output instead of keeping it (Megatron-core's
    /// --recompute-modules layernorm; Transformer Engine fuses the other norms into their
    /// GEMMs) [detailed; default: off].
    #[arg(long, value_enum)]
    pub norm_recompute: Option<OnOff>,
    /// Recompute latent attention's up-projections in the backward instead of keeping the
    /// queries, keys and values (Megatron-core's --recompute-modules mla_up_proj)
    /// [detailed, megatron-te and deepseek; default: off].
    #[arg(long, value_enum)]
    pub latent_recompute: Option<OnOff>,
    /// How a mixture of experts's tokens cross nodes: alltoall, one message a route
    /// (Megatron-core's default), or deepep, one a token and node, forwarded over NVLink
    /// (--moe-token-dispatcher-type flex --moe-enable-deepep) [detailed; default: alltoall].
    #[arg(long, value_enum)]
    pub ep_dispatcher: Option<DispatcherArg>,
    /// FP8 scaling recipe (Megatron-LM's --fp8-recipe): delayed (per-tensor, from an amax
    /// history), tensorwise (per-tensor current scaling), blockwise (DeepSeek-V3's 1×128 and
    /// 128×128 blocks) under --precision fp8; mxfp8 is --precision mxfp8's own [detailed;
    /// default: delayed for fp8].
    #[arg(long, value_name = "RECIPE", value_parser = recipe_parser)]
    pub fp8_recipe: Option<Fp8Recipe>,
    /// Keep the layers' weights only in FP8 and gather them in FP8, no BF16 copy
    /// (Megatron-core's --fp8-param-gather); the FP32 master stays; `--fp8-params` alone is on
    /// [detailed; default: off].
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "on")]
    pub fp8_params: Option<OnOff>,
    /// Adam's moments: fp32, or bf16 (Megatron-core's precision-aware optimizer,
    /// --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16) [detailed; default: fp32].
    #[arg(long, value_enum)]
    pub optimizer_states: Option<StatesArg>,
    /// The optimizer: adamw, or muon on the hidden matrices (their master and one moment,
    /// Newton–Schulz on each update; AdamW on the rest; Megatron-core's muon, dist_muon under
    /// ZeRO 1) [detailed; default: adamw].
    #[arg(long, value_enum)]
    pub optimizer: Option<OptimizerArg>,
    /// What the step captures in CUDA graphs: none, full_iteration, or Megatron-core's
    /// partial scopes separated by commas (attn, mlp, moe_router, moe_preprocess, mamba;
    /// --cuda-graph-impl transformer_engine). A mixture of experts' MoE layers wait on the
    /// host's launches of their routed experts, which only full_iteration captures; partial
    /// scopes are written to launchers and change no time [detailed; default: none].
    #[arg(long, value_name = "SCOPES", value_parser = graphs_parser)]
    pub cuda_graphs: Option<CudaGraphs>,
    /// The optimizer's master weights: fp32, fp16 (--main-params-dtype fp16), or remainders,
    /// the 16 bits of the FP32 master a BF16 weight lacks (store_param_remainders)
    /// [detailed; default: fp32].
    #[arg(long, value_enum)]
    pub master_weights: Option<MasterArg>,
    /// Layers at the start and at the end kept in BF16 under FP8, START,END (Megatron-core's
    /// --first-last-layers-bf16 --num-layers-at-start-in-bf16 START
    /// --num-layers-at-end-in-bf16 END) [detailed; default: 0,0].
    #[arg(long, value_name = "START,END", value_parser = bf16_layers_parser)]
    pub fp8_bf16_layers: Option<Bf16Layers>,
    /// Layers whose saved activations go to host memory after their forward and come back
    /// before their backward, over the host link (--host-link-gbps); Megatron-core's
    /// --cpu-offloading-num-layers N: fewer than the model's layers, PP 1, no recomputation
    /// [detailed; default: 0].
    #[arg(long, value_name = "N")]
    pub offload_activations: Option<u16>,
    /// The fraction, 0 to 1, of the optimizer's parameters whose FP32 master and Adam moments
    /// live in host memory and step on the CPU, their gradients and weights crossing the host
    /// link (--host-link-gbps) and the CPU bound by --host-memory-gbps; Megatron-core's
    /// --optimizer-cpu-offload --optimizer-offload-fraction F: megatron-te, ZeRO 1, FP32
    /// master and moments; `--offload-optimizer` alone is 1 [detailed; default: 0].
    #[arg(long, value_name = "F", num_args = 0..=1, default_missing_value = "1")]
    pub offload_optimizer: Option<f64>,
}

/// `--fp8-bf16-layers`'s value.
fn bf16_layers_parser(text: &str) -> std::result::Result<Bf16Layers, String> {
    Bf16Layers::parse(text).map_err(|e| e.to_string())
}

/// `--fp8-recipe`'s value, with the one-line error the recipe's own parser writes.
fn recipe_parser(text: &str) -> std::result::Result<Fp8Recipe, String> {
    text.parse::<Fp8Recipe>().map_err(|e| e.to_string())
}

fn graphs_parser(text: &str) -> std::result::Result<CudaGraphs, String> {
    text.parse::<CudaGraphs>().map_err(|e| e.to_string())
}

/// The optimizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptimizerArg {
    /// AdamW throughout.
    Adamw,
    /// Muon on the hidden matrices, AdamW on the rest.
    Muon,
}

/// Adam's moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatesArg {
    /// 4 bytes each.
    Fp32,
    /// 2 bytes each.
    Bf16,
}

/// Master weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MasterArg {
    /// 4 bytes a parameter.
    Fp32,
    /// 2 bytes a parameter.
    Fp16,
    /// 2 bytes a parameter beside the BF16 weight.
    Remainders,
}

impl DetailedArgs {
    /// The first flag given that sets how a mixture of experts runs, with its value (`None`
    /// when none is): a dense model has nothing for it to set.
    pub fn expert_flag(&self) -> Option<(&'static str, String)> {
        let name = |v: &dyn std::fmt::Debug| format!("{v:?}").to_ascii_lowercase();
        self.moe_imbalance
            .map(|x| ("--moe-imbalance", crate::format::exact(x)))
            .or(self.ep_overlap.map(|v| ("--ep-overlap", name(&v))))
            .or(self.moe_recompute.map(|v| ("--moe-recompute", name(&v))))
            .or(self.ep_dispatcher.map(|v| ("--ep-dispatcher", name(&v))))
            .or(self.norm_recompute.map(|v| ("--norm-recompute", name(&v))))
    }
}

/// What MoE layers recompute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MoeRecomputeArg {
    /// Nothing beyond --recompute.
    None,
    /// SwiGLU's output (moe_act).
    Act,
    /// The whole MoE layer (moe).
    Layer,
}

/// The experts' dispatcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DispatcherArg {
    /// One message a route.
    Alltoall,
    /// One message a token and node (DeepEP).
    Deepep,
}

/// Gradient precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GradientArg {
    /// 2 bytes per parameter.
    Bf16,
    /// 4 bytes per parameter.
    Fp32,
}

/// Loss precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LossArg {
    /// FP32 logits and softmax.
    Fp32,
    /// BF16 throughout.
    Bf16,
    /// BF16 logits whose gradient the forward writes over them (Transformer Engine's fused
    /// cross-entropy: Megatron-core's --cross-entropy-fusion-impl te).
    InPlace,
}

/// Kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KernelsArg {
    /// FlashAttention and fused RMSNorm, RoPE, SwiGLU.
    Fused,
    /// Eager PyTorch, as measured in data/calibration.
    Eager,
    /// Fused, SwiGLU's product recomputed in backward (the llama3 stack).
    Lean,
}

/// Stage split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StagesArg {
    /// Even, the remainder on the last stages.
    Even,
    /// One layer fewer on the first and the last stage.
    Llama3,
    /// The embedding and the head counted as a layer each (DeepSpeed's
    /// type:transformer|embedding).
    Balanced,
    /// The loss counted as a layer and each multi-token-prediction depth as two, the
    /// embedding as none (Megatron-core's --account-for-loss-in-pipeline-split).
    Loss,
}

impl DetailedArgs {
    /// The stack asked for, or the default.
    pub fn stack(&self) -> Stack {
        self.stack.unwrap_or_default()
    }

    /// The detailed model's settings, or `None` for the plate. `step_given` says whether a
    /// flag of the training step was used, which only the detailed model reads.
    pub fn options(&self, step_given: bool) -> Result<Option<Options>> {
        let given = step_given
            || self.stack.is_some()
            || self.gradients.is_some()
            || self.loss_precision.is_some()
            || self.kernels.is_some()
            || self.stages.is_some()
            || self.reserve_gb.is_some()
            || self.fragmentation.is_some()
            || self.moe_imbalance.is_some()
            || self.ep_overlap.is_some()
            || self.moe_recompute.is_some()
            || self.norm_recompute.is_some()
            || self.latent_recompute.is_some()
            || self.ep_dispatcher.is_some()
            || self.fp8_recipe.is_some()
            || self.fp8_params.is_some()
            || self.optimizer_states.is_some()
            || self.optimizer.is_some()
            || self.cuda_graphs.is_some()
            || self.master_weights.is_some()
            || self.fp8_bf16_layers.is_some()
            || self.offload_activations.is_some()
            || self.offload_optimizer.is_some();
        if self.memory == MemoryArg::Plate {
            if let Some(f) = self.offload_optimizer {
                return Err(Error::invalid(
                    "--offload-optimizer",
                    crate::format::exact(f),
                    "none with --memory plate (offload moves the detailed model's optimizer state: --memory detailed)",
                ));
            }
            if let Some(n) = self.offload_activations {
                return Err(Error::invalid(
                    "--offload-activations",
                    n,
                    "none with --memory plate (offload moves the detailed model's activations: --memory detailed)",
                ));
            }
            if given {
                return Err(Error::invalid(
                    "--memory",
                    "plate",
                    "--memory detailed (or --detailed), which the training-step and memory-model flags need",
                ));
            }
            return Ok(None);
        }
        let d = Options::for_stack(self.stack());
        let options = Options {
            stack: d.stack,
            gradients: match self.gradients {
                Some(GradientArg::Bf16) => GradientPrecision::Bf16,
                Some(GradientArg::Fp32) => GradientPrecision::Fp32,
                None => d.gradients,
            },
            loss: match self.loss_precision {
                Some(LossArg::Bf16) => LossPrecision::Bf16,
                Some(LossArg::Fp32) => LossPrecision::Fp32,
                Some(LossArg::InPlace) => LossPrecision::InPlace,
                None => d.loss,
            },
            kernels: match self.kernels {
                Some(KernelsArg::Eager) => Kernels::Eager,
                Some(KernelsArg::Fused) => Kernels::Fused,
                Some(KernelsArg::Lean) => Kernels::Lean,
                None => d.kernels,
            },
            stages: match self.stages {
                Some(StagesArg::Llama3) => StageSplit::Llama3,
                Some(StagesArg::Even) => StageSplit::Even,
                Some(StagesArg::Balanced) => StageSplit::Balanced,
                Some(StagesArg::Loss) => StageSplit::Loss,
                None => d.stages,
            },
            reserve_gb: self.reserve_gb.unwrap_or(d.reserve_gb),
            fragmentation: self.fragmentation.unwrap_or(d.fragmentation),
            moe_imbalance: self.moe_imbalance.unwrap_or(d.moe_imbalance),
            ep_overlap: self.ep_overlap.map_or(d.ep_overlap, |o| o == OnOff::On),
            moe_recompute: match self.moe_recompute {
                Some(MoeRecomputeArg::None) => MoeRecompute::None,
                Some(MoeRecomputeArg::Act) => MoeRecompute::Act,
                Some(MoeRecomputeArg::Layer) => MoeRecompute::Layer,
                None => d.moe_recompute,
            },
            norm_recompute: self
                .norm_recompute
                .map_or(d.norm_recompute, |o| o == OnOff::On),
            latent_recompute: self
                .latent_recompute
                .map_or(d.latent_recompute, |o| o == OnOff::On),
            ep_dispatcher: match self.ep_dispatcher {
                Some(DispatcherArg::Alltoall) => Dispatcher::AllToAll,
                Some(DispatcherArg::Deepep) => Dispatcher::DeepEp,
                None => d.ep_dispatcher,
            },
            fp8_recipe: self.fp8_recipe.or(d.fp8_recipe),
            fp8_params: self.fp8_params.map_or(d.fp8_params, |o| o == OnOff::On),
            optimizer_states: match self.optimizer_states {
                Some(StatesArg::Fp32) => OptimizerStates::Fp32,
                Some(StatesArg::Bf16) => OptimizerStates::Bf16,
                None => d.optimizer_states,
            },
            master_weights: match self.master_weights {
                Some(MasterArg::Fp32) => MasterWeights::Fp32,
                Some(MasterArg::Fp16) => MasterWeights::Fp16,
                Some(MasterArg::Remainders) => MasterWeights::Remainders,
                None => d.master_weights,
            },
            bf16_layers: self.fp8_bf16_layers.unwrap_or(d.bf16_layers),
            offload_activations: self.offload_activations.unwrap_or(d.offload_activations),
            offload_optimizer: match self.offload_optimizer {
                Some(f) => Fraction::new("--offload-optimizer", f)?,
                None => d.offload_optimizer,
            },
            optimizer: match self.optimizer {
                Some(OptimizerArg::Adamw) => Optimizer::AdamW,
                Some(OptimizerArg::Muon) => Optimizer::Muon,
                None => d.optimizer,
            },
            cuda_graphs: self.cuda_graphs.unwrap_or(d.cuda_graphs),
            // The GPU's, set with the brief ([`Options::on_gpu`]).
            fp8_any_layout: d.fp8_any_layout,
        };
        options.validate()?;
        Ok(Some(options))
    }
}
