//! The detailed model's inputs — a [`Step`] and the settings that are not part of it
//! ([`Options`]: the stack, gradient and loss precision, kernels, stage split, reserve, the
//! experts' settings) — and every rule a step keeps under a layout: the stack's CP, TP overlap,
//! precision and schedule, a mixture of experts' requirements, the pipeline's micro-batches and
//! interleaving. The memory and time models both start from [`Detailed::pipeline`] (or, in a
//! search, [`Detailed::kinds`]), so a step either model refuses, the other refuses by the same
//! words.

use crate::cost::step::experts::Dispatcher;
use crate::cost::step::experts::BALANCED;
use crate::cost::step::experts::MAX_IMBALANCE;
use crate::cost::step::graphs::CudaGraphs;
use crate::cost::step::optimizer_offload::Fraction;
use crate::cost::step::pipeline::kinds_of;
use crate::cost::step::pipeline::shape_stages;
use crate::cost::step::pipeline::stage_kinds;
use crate::cost::step::pipeline::StageKinds;
use crate::cost::step::precision::Precision;
use crate::cost::step::recipe::{
    optimizer_bytes, Bf16Layers, Fp8Recipe, MasterWeights, Optimizer, OptimizerStates,
};
use crate::cost::step::stack::GradientPrecision;
use crate::cost::step::stack::Kernels;
use crate::cost::step::stack::LossPrecision;
use crate::cost::step::stack::Stack;
use crate::cost::step::stack::StageSplit;
use crate::cost::step::MoeRecompute;
use crate::cost::step::Recompute;
use crate::cost::step::Step;
use crate::error::Error;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::Shape;
use serde::{Deserialize, Serialize};
/// The settings of the detailed model that are not part of the step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// The software stack: the defaults of the settings below and of the time model's, and
    /// the kernels the time model costs (plan files written before stacks read as the default).
    #[serde(default)]
    pub stack: Stack,
    /// Gradient buffer precision.
    pub gradients: GradientPrecision,
    /// Loss precision.
    pub loss: LossPrecision,
    /// Kernels, which decide the activations kept.
    pub kernels: Kernels,
    /// How layers are spread over stages.
    pub stages: StageSplit,
    /// Fixed reserve per GPU, GB, for the CUDA context and cuBLAS/cuDNN workspaces (about
    /// 0.5–1 GB on an H100) and NCCL's buffers for the TP, PP and DP communicators (about
    /// 0.5–1 GB). Default 2 GB.
    pub reserve_gb: f64,
    /// Fraction of everything else lost to the caching allocator's fragmentation. Default 0.05,
    /// the low end of the 5–10 % gap between reserved and allocated memory commonly reported
    /// for PyTorch training.
    pub fragmentation: f64,
    /// The load imbalance of a mixture of experts' routing, the busiest rank's routes over the
    /// mean ([`crate::cost::step::experts`]): 1 (balanced, [`BALANCED`]) to [`MAX_IMBALANCE`]. It sizes
    /// the busiest rank's routed activations here and its grouped GEMMs and all-to-alls in the
    /// time model. Plan files written before experts read as balanced.
    #[serde(default = "balanced", skip_serializing_if = "is_balanced")]
    pub moe_imbalance: f64,
    /// A mixture of experts' all-to-alls overlapped with another micro-batch's compute
    /// (Megatron-core's `--overlap-moe-expert-parallel-comm`, off by default there and here):
    /// the time model hides them behind the MoE layer's compute, as far as it lasts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ep_overlap: bool,
    /// What a mixture of experts's MoE layers recompute beyond the step's recomputation
    /// (Megatron-core's `--recompute-modules moe_act` or `moe`; default nothing).
    #[serde(default, skip_serializing_if = "MoeRecompute::is_none")]
    pub moe_recompute: MoeRecompute,
    /// An MoE layer's pre-MLP norm output recomputed from its input in the backward instead of
    /// kept (Megatron-core's `--recompute-modules layernorm`, which Transformer Engine's fused
    /// norms leave nothing else to do; default off). Its time, one norm's read and write of
    /// `4h` bytes a token, is left out: under 1 % of a layer's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub norm_recompute: bool,
    /// Latent attention's up-projections and RoPE recomputed in the backward instead of their
    /// outputs kept (Megatron-core's `--recompute-modules mla_up_proj`,
    /// `MLASelfAttention.recompute_up_proj`): the queries, keys and values are freed once the
    /// attention core has run and are projected again from the latents the checkpoint kept
    /// ([`crate::cost::memory::activations`]); default off. Latent attention only, and with
    /// none or selective recomputation (the modules' granularity).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub latent_recompute: bool,
    /// How the experts' dispatch and combine cross nodes: Megatron-core's `alltoall` (the
    /// default) or DeepEP's, which sends a token once to each node its experts are on.
    #[serde(default, skip_serializing_if = "Dispatcher::is_default")]
    pub ep_dispatcher: Dispatcher,
    /// The FP8 scaling recipe asked for (Megatron-LM's `--fp8-recipe`); `None`: the
    /// precision's own, delayed scaling for FP8 and MXFP8's for MXFP8
    /// ([`Fp8Recipe::of`]). Plan files written before recipes read as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_recipe: Option<Fp8Recipe>,
    /// The layers' matrices kept only in FP8, and gathered in FP8 (Megatron-core's
    /// `--fp8-param-gather`; [`crate::cost::step::recipe`]); default off: a BF16 copy beside
    /// the FP8 one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_params: bool,
    /// The precision of Adam's moments (Megatron-core's `--exp-avg-dtype`,
    /// `--exp-avg-sq-dtype`); default FP32.
    #[serde(default, skip_serializing_if = "OptimizerStates::is_default")]
    pub optimizer_states: OptimizerStates,
    /// The optimizer's master weights (Megatron-core's `--main-params-dtype`,
    /// `store_param_remainders`); default FP32.
    #[serde(default, skip_serializing_if = "MasterWeights::is_default")]
    pub master_weights: MasterWeights,
    /// Layers at the start and end kept in BF16 under FP8 (Megatron-core's
    /// `--first-last-layers-bf16`); default none.
    #[serde(default, skip_serializing_if = "Bf16Layers::is_none")]
    pub bf16_layers: Bf16Layers,
    /// Layers whose saved activations go to host memory after their forward and come back
    /// before their backward (Megatron-core's `--cpu-offloading-num-layers`,
    /// [`crate::cost::step::offload`]); default 0. At most 65,535, more layers than any
    /// model has: two bytes keep these settings small enough to copy by value everywhere.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offload_activations: u16,
    /// The fraction of this GPU's optimizer parameters whose master weights and moments live
    /// in host memory and step on the CPU (Megatron-core's `--optimizer-cpu-offload
    /// --optimizer-offload-fraction F`, [`crate::cost::step::optimizer_offload`]); default 0.
    #[serde(default, skip_serializing_if = "Fraction::is_zero")]
    pub offload_optimizer: Fraction,
    /// The optimizer (`--optimizer`): AdamW, or Muon on the hidden matrices
    /// ([`crate::cost::step::muon`]); default AdamW.
    #[serde(default, skip_serializing_if = "Optimizer::is_default")]
    pub optimizer: Optimizer,
    /// What the step captures in CUDA graphs (`--cuda-graphs`, Megatron-core's
    /// `--cuda-graph-scope`; [`crate::cost::step::graphs`]): the time model's host floor of a
    /// mixture of experts counts the launches of what is not captured; default none.
    #[serde(default, skip_serializing_if = "CudaGraphs::is_none")]
    pub cuda_graphs: CudaGraphs,
    /// Whether the GPU multiplies FP8 with its operands in any layout, where Transformer
    /// Engine keeps no transposed copy of a per-tensor-scaled FP8 tensor: its quantizer makes
    /// the column-wise copy only where `non_tn_fp8_gemm_supported()` is false (compute
    /// capability below 10; TE `pytorch/csrc/quantizer.cpp`), Hopper's FP8 GEMMs taking the
    /// TN layout alone ([`crate::cost::step::recipe::Fp8Recipe::weight_copy_bytes`]). Not a
    /// setting: the GPU's ([`Options::on_gpu`]), and not written to plan files, which take it
    /// from their brief's GPU again; default false (Hopper's, the conservative count). The
    /// activations' and gradients' casts on such a GPU write the one copy too, a byte an
    /// element less ([`crate::cost::step::recipe::Fp8Recipe::cast_bytes`]).
    #[serde(skip)]
    pub fp8_any_layout: bool,
}

fn is_zero(x: &u16) -> bool {
    *x == 0
}

fn balanced() -> f64 {
    BALANCED
}

fn is_balanced(x: &f64) -> bool {
    *x == BALANCED
}

impl Default for Options {
    fn default() -> Self {
        Options {
            stack: Stack::MegatronTe,
            gradients: GradientPrecision::Fp32,
            loss: LossPrecision::Fp32,
            kernels: Kernels::Fused,
            stages: StageSplit::Even,
            reserve_gb: 2.0,
            fragmentation: 0.05,
            moe_imbalance: BALANCED,
            ep_overlap: false,
            moe_recompute: MoeRecompute::None,
            norm_recompute: false,
            latent_recompute: false,
            ep_dispatcher: Dispatcher::AllToAll,
            fp8_recipe: None,
            fp8_params: false,
            optimizer_states: OptimizerStates::Fp32,
            master_weights: MasterWeights::Fp32,
            bf16_layers: Bf16Layers { start: 0, end: 0 },
            offload_activations: 0,
            offload_optimizer: Fraction::ZERO,
            optimizer: Optimizer::AdamW,
            cuda_graphs: CudaGraphs::NONE,
            fp8_any_layout: false,
        }
    }
}

impl Options {
    /// These settings on a GPU that runs MXFP8 (`mxfp8`, the brief's): the chips that scale
    /// blocks in hardware, Blackwell (compute capability 10) and AMD's CDNA 4, are the ones
    /// whose FP8 GEMMs take every operand layout ([`Options::fp8_any_layout`]; CDNA 4 is taken
    /// alike, unmeasured).
    pub fn on_gpu(self, mxfp8: bool) -> Self {
        Options {
            fp8_any_layout: mxfp8,
            ..self
        }
    }

    /// Bytes per parameter of the optimizer's state: master weights and Adam's m and v, 12
    /// by default ([`crate::cost::step::recipe::optimizer_bytes`]).
    pub fn optimizer_bytes(&self) -> f64 {
        optimizer_bytes(self.master_weights, self.optimizer_states)
    }

    /// Bytes per parameter of a hidden matrix's optimizer state: AdamW's
    /// ([`Options::optimizer_bytes`]), or Muon's master and one moment
    /// ([`crate::cost::step::muon::matrix_state_bytes`]).
    pub fn matrix_optimizer_bytes(&self) -> f64 {
        match self.optimizer {
            Optimizer::AdamW => self.optimizer_bytes(),
            Optimizer::Muon => crate::cost::step::muon::matrix_state_bytes(
                self.master_weights,
                self.optimizer_states,
            ),
        }
    }

    /// FP8 weights and BF16 first and last layers are FP8's settings: refused where the step
    /// scales by no FP8 `recipe` (BF16, or a 4-bit format).
    fn fp8_settings_have(&self, precision: Precision, recipe: Option<Fp8Recipe>) -> Result<()> {
        if self.fp8_params && recipe.is_none() {
            return Err(Error::invalid(
                "--fp8-params",
                "on",
                format!(
                    "off with --precision {precision} (FP8 weights need --precision fp8 or mxfp8)"
                ),
            ));
        }
        if !self.bf16_layers.is_none() && recipe.is_none() {
            // In BF16 every layer is BF16 already; the FP4 recipes' own BF16 layers are not a
            // setting here.
            let why = if precision.is_narrow() {
                "BF16 layers are an FP8 recipe's setting: --precision fp8 or mxfp8"
            } else {
                "every layer is BF16"
            };
            return Err(Error::invalid(
                "--fp8-bf16-layers",
                self.bf16_layers,
                format!("0,0 with --precision {precision} ({why})"),
            ));
        }
        Ok(())
    }

    /// These settings for steps in `precision`: the recipe asked for checked against it
    /// ([`Fp8Recipe::of`]: none in BF16, MXFP8's own under MXFP8), and FP8 weights only with
    /// FP8; a recipe that is the precision's default (`delayed` under FP8, `mxfp8` under
    /// MXFP8) reads as none, so a plan says it one way.
    pub fn for_precision(mut self, precision: Precision) -> Result<Options> {
        let recipe = Fp8Recipe::of(precision, self.fp8_recipe)?;
        self.fp8_settings_have(precision, recipe)?;
        if self.fp8_recipe.is_some() && recipe == Fp8Recipe::of(precision, None)? {
            self.fp8_recipe = None;
        }
        Ok(self)
    }

    /// The settings `stack` implies, at the default reserve and fragmentation.
    pub fn for_stack(stack: Stack) -> Self {
        let s = stack.settings();
        Options {
            stack,
            gradients: s.gradients,
            loss: s.loss,
            kernels: s.kernels,
            stages: s.stages,
            ..Options::default()
        }
    }

    /// Checks the reserve (0 to 1,000 GB) and the fragmentation (0 to 1).
    pub fn validate(&self) -> Result<()> {
        if !(self.reserve_gb.is_finite() && (0.0..=1e3).contains(&self.reserve_gb)) {
            return Err(Error::invalid(
                "--reserve-gb",
                crate::format::exact(self.reserve_gb),
                "0 to 1000 GB",
            ));
        }
        if !(self.fragmentation.is_finite() && (0.0..1.0).contains(&self.fragmentation)) {
            return Err(Error::invalid(
                "--fragmentation",
                crate::format::exact(self.fragmentation),
                "a fraction in [0, 1)",
            ));
        }
        if !(self.moe_imbalance.is_finite()
            && (BALANCED..=MAX_IMBALANCE).contains(&self.moe_imbalance))
        {
            return Err(Error::invalid(
                "--moe-imbalance",
                crate::format::exact(self.moe_imbalance),
                format!("the busiest rank's routes over the mean, {BALANCED} to {MAX_IMBALANCE}"),
            ));
        }
        Ok(())
    }
}

/// The detailed model's inputs: the step and the settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detailed {
    /// The training step.
    pub step: Step,
    /// The settings.
    pub options: Options,
}

impl Detailed {
    /// The pipeline of this step under `layout`: the layers of each stage and the
    /// micro-batches a step takes, or why the step does not go with the layout. The memory and
    /// time models both start from it.
    pub fn pipeline(&self, shape: &Shape, layout: &Layout) -> Result<(Vec<u64>, u64)> {
        self.schedule_allowed()?;
        self.hybrid_schedule_allowed(shape)?;
        let (layers, m) = self.unscheduled_pipeline(shape, layout)?;
        self.step.interleaving_allowed(layout, &layers, m)?;
        Ok((layers, m))
    }

    /// Whether a hybrid model's stages run this step's schedule: one chunk a stage, as
    /// Megatron-core's `MambaStack` builds them (and as the detailed model counts a stage's
    /// blocks, from one run of layers); any schedule for another shape.
    pub fn hybrid_schedule_allowed(&self, shape: &Shape) -> Result<()> {
        match &shape.hybrid {
            Some(h) if self.step.schedule.chunks() > 1 => Err(Error::invalid(
                "--schedule",
                self.step.schedule,
                format!(
                    "1f1b for {}'s hybrid pattern ({}): Megatron-core's MambaStack holds one chunk of blocks a stage",
                    shape.name, h.pattern
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Whether the stack runs this step's schedule: the first rule [`Detailed::pipeline`]
    /// checks.
    pub fn schedule_allowed(&self) -> Result<()> {
        use crate::cost::step::Schedule;
        let stack = self.options.stack;
        let settings = stack.settings();
        let schedule = self.step.schedule;
        if schedule.runs_with(&settings) {
            return Ok(());
        }
        let interleaves = matches!(schedule, Schedule::Interleaved(_));
        // The schedules the stack runs, as the refusal names them.
        let mut runs = vec!["1f1b".to_string()];
        if settings.interleaving {
            runs.push("interleaved:V".into());
        }
        for v in [Schedule::ZeroBubbleV, Schedule::DualPipeV] {
            if v.runs_on(settings.v_schedules) {
                runs.push(v.to_string());
            }
        }
        let elsewhere = if schedule.is_v() && stack == Stack::TorchtitanCompile {
            " (PyTorch's split-backward schedules refuse compiled stages: plan --stack torchtitan)"
        } else if schedule.is_v() && stack != Stack::Torchtitan {
            " (torchtitan runs zbv and dualpipev: --stack torchtitan)"
        } else {
            ""
        };
        Err(Error::invalid(
            "--schedule",
            schedule,
            format!(
                "{}: the {stack} stack has no {} schedule{elsewhere}",
                runs.join(" or "),
                if interleaves {
                    "interleaved".to_string()
                } else {
                    schedule.to_string()
                }
            ),
        ))
    }

    /// [`Detailed::pipeline`] without the schedule's rules: the same for every schedule of a
    /// step.
    pub fn unscheduled_pipeline(&self, shape: &Shape, layout: &Layout) -> Result<(Vec<u64>, u64)> {
        self.stack_allows(layout)?;
        self.attention_allowed(shape, layout)?;
        self.experts_allowed(shape, layout)?;
        self.optimizer_allowed(shape, layout)?;
        self.bf16_layers_allowed(shape)?;
        self.offload_allowed(shape, layout)?;
        self.optimizer_offload_allowed(layout)?;
        let layers = shape_stages(shape, layout.pp, self.options.stages)?;
        let m = self.unscheduled_pipeline_in(layout, &kinds_of(&layers))?;
        Ok((layers, m))
    }

    /// The layout's stage kinds, after the stack's rules (the order
    /// [`Detailed::unscheduled_pipeline`] checks them in).
    pub fn kinds(&self, shape: &Shape, layout: &Layout) -> Result<StageKinds> {
        self.stack_allows(layout)?;
        self.attention_allowed(shape, layout)?;
        self.experts_allowed(shape, layout)?;
        self.optimizer_allowed(shape, layout)?;
        self.bf16_layers_allowed(shape)?;
        self.offload_allowed(shape, layout)?;
        self.optimizer_offload_allowed(layout)?;
        stage_kinds(shape, layout, self.options.stages)
    }

    /// The micro-batches a step takes in the pipeline `kinds` (the layout's stages, as
    /// [`Detailed::kinds`] gives them), or why the step does not go with the layout, whatever its
    /// schedule: [`Detailed::unscheduled_pipeline`] with the stages worked out once.
    pub fn unscheduled_pipeline_in(&self, layout: &Layout, kinds: &StageKinds) -> Result<u64> {
        self.stack_allows(layout)?;
        self.offload_allowed_in(layout, kinds)?;
        self.optimizer_offload_allowed(layout)?;
        self.step.unscheduled().micro_batches_in(layout, kinds)
    }

    /// Whether the step goes with the shape's attention as the model costs it: multi-head
    /// latent attention on a stack that builds it, its activations derived for fused kernels
    /// ([`crate::cost::memory::activations`]) under no, selective, full or selective-layer
    /// recomputation; the eager stack's efficiency curve and the eager kernels' activations
    /// were measured on grouped-query layers, and MaxText's and torchtitan's op-level policies
    /// are written for them. Always for grouped-query attention.
    pub(crate) fn attention_allowed(&self, shape: &Shape, layout: &Layout) -> Result<()> {
        let opts = &self.options;
        // A hybrid model's blocks are costed as Megatron-core builds them (`MambaModel`, on
        // Transformer Engine): on megatron-te, without the settings the blocks are not
        // costed under.
        if let Some(hybrid) = &shape.hybrid {
            let c = hybrid.counts();
            let what = format!(
                "{}'s hybrid pattern ({} Mamba-2, {} attention, {} MLP and {} MoE blocks)",
                shape.name, c.mamba, c.attention, c.mlp, c.moe
            );
            if opts.stack != crate::cost::step::stack::Stack::MegatronTe {
                return Err(Error::invalid(
                    "--stack",
                    opts.stack.name(),
                    format!("megatron-te for {what}: Megatron-core's MambaModel is the stack trainplan costs Mamba-2 blocks on"),
                ));
            }
            if opts.kernels != crate::cost::step::stack::Kernels::Fused {
                return Err(Error::invalid(
                    "--kernels",
                    format!("{:?}", opts.kernels).to_lowercase(),
                    format!("fused for {what}: Transformer Engine's, which the blocks' activations are counted for"),
                ));
            }
            if layout.cp > 1 {
                return Err(Error::invalid(
                    "--cp",
                    layout.cp,
                    format!("1 for {what}: Megatron-core's context parallelism of Mamba-2 (an all-to-all of heads) is not costed yet"),
                ));
            }
            if !matches!(
                self.step.recompute,
                Recompute::None
                    | Recompute::Selective
                    | Recompute::Full
                    | Recompute::SelectiveLayer
            ) {
                return Err(Error::invalid(
                    "--recompute",
                    self.step.recompute.name(),
                    format!("none, selective, full or selective-layer for {what}"),
                ));
            }
            if !opts.bf16_layers.is_none() {
                return Err(Error::invalid(
                    "--fp8-bf16-layers",
                    format!("{}", opts.bf16_layers),
                    format!("none for {what}: layers kept in BF16 are costed as attention and MLP layers"),
                ));
            }
            if opts.offload_activations > 0 {
                return Err(Error::invalid(
                    "--offload-activations",
                    opts.offload_activations,
                    format!("0 for {what}: offloading is costed for a layer's activations"),
                ));
            }
        }
        // A sliding window under context parallelism: Transformer Engine's ring (p2p) has no
        // window (its all-gather and all-to-all have); the stacks that gather K/V run one.
        if layout.cp > 1
            && shape.windowed(self.step.seq_len).is_some()
            && opts.stack.settings().cp != Some(crate::cost::step::stack::CpComm::AllGather)
        {
            return Err(Error::invalid(
                "--cp",
                layout.cp,
                format!(
                    "1 for {}'s sliding window on the {} stack, whose context parallelism \
                     trainplan costs as a ring of K/V (Transformer Engine's p2p), which has no \
                     window (its a2a and all-gather have); a stack whose CP gathers K/V \
                     (torchtitan, maxtext) runs one",
                    shape.name,
                    opts.stack.name()
                ),
            ));
        }
        if shape.attention.latent.is_none() {
            if opts.latent_recompute {
                return Err(Error::invalid(
                    "--latent-recompute",
                    "on",
                    format!(
                        "off for {}, which has no latent attention whose up-projections it \
                         would recompute (Megatron-core's mla_up_proj)",
                        shape.name
                    ),
                ));
            }
            return Ok(());
        }
        // The stacks that build latent attention: Megatron-core's `MLASelfAttention`,
        // torchtitan's and MaxText's DeepSeek-V3 models, DeepSeek's own. Meta's Llama 3 stack
        // and Megatron-DeepSpeed have none; the eager curve was measured on grouped-query
        // layers.
        let builds = matches!(
            opts.stack,
            Stack::MegatronTe
                | Stack::Torchtitan
                | Stack::TorchtitanCompile
                | Stack::Maxtext
                | Stack::DeepSeek
        );
        if !builds {
            return Err(Error::invalid(
                "--stack",
                opts.stack.name(),
                "a stack that builds multi-head latent attention (megatron-te, torchtitan, \
                 torchtitan-compile, maxtext, deepseek)",
            ));
        }
        if opts.kernels == Kernels::Eager {
            return Err(Error::invalid(
                "--kernels",
                "eager",
                "fused or lean for multi-head latent attention: the eager kernels' activations \
                 were measured on grouped-query layers",
            ));
        }
        if matches!(
            self.step.recompute,
            Recompute::SaveQkv | Recompute::SelectiveOp
        ) {
            return Err(Error::invalid(
                "--recompute",
                self.step.recompute.name(),
                "none, selective, full or selective-layer for multi-head latent attention",
            ));
        }
        if opts.latent_recompute {
            // Megatron-core's module recomputes the up-projections alone, as DeepSeek's own
            // stack does (DeepSeek-V3 §3.2.3, "we recompute all RMSNorm operations and MLA
            // up-projections during back-propagation"); torchtitan's and MaxText's checkpoint
            // by layer or by op, not by this module. Recompute modules go with selective
            // granularity.
            if !matches!(opts.stack, Stack::MegatronTe | Stack::DeepSeek) {
                return Err(Error::invalid(
                    "--latent-recompute",
                    "on",
                    format!(
                        "off on the {} stack: recomputing latent attention's up-projections \
                         alone is Megatron-core's mla_up_proj module (megatron-te) and \
                         DeepSeek's (deepseek)",
                        opts.stack.name()
                    ),
                ));
            }
            self.modules_allowed("--latent-recompute")?;
        }
        Ok(())
    }

    /// Megatron-core's recompute modules (`--recompute-modules`) go with selective
    /// granularity: the step recomputes nothing else, or the attention core. `flags` are the
    /// options that asked for modules.
    fn modules_allowed(&self, flags: &str) -> Result<()> {
        let recompute = self.step.recompute;
        if matches!(recompute, Recompute::None | Recompute::Selective) {
            return Ok(());
        }
        Err(Error::invalid(
            "--recompute",
            recompute.name(),
            format!(
                "none or selective with {flags} (Megatron-core's recompute modules go with \
                 selective granularity)"
            ),
        ))
    }

    /// The rules between the step and the shape that [`Detailed::kinds`] checks after the
    /// stack's ([`Detailed::attention_allowed`], the experts' and the BF16 layers'), for the
    /// search, which works the stages out without it.
    pub(crate) fn shape_allowed(&self, shape: &Shape, layout: &Layout) -> Result<()> {
        self.attention_allowed(shape, layout)?;
        self.experts_allowed(shape, layout)?;
        self.optimizer_allowed(shape, layout)?;
        self.bf16_layers_allowed(shape)
    }

    /// Whether the step goes with its optimizer as the model costs it: AdamW always; Muon
    /// as Megatron-core runs it (`muon` under ZeRO 0, `dist_muon`'s layer-wise sharding under
    /// ZeRO 1; on megatron-te, without optimizer offload, whose CPU step is Adam's), on
    /// grouped-query attention and its MLPs or experts, the matrices whose Newton–Schulz
    /// shapes the model counts ([`crate::cost::step::muon`]).
    pub(crate) fn optimizer_allowed(&self, shape: &Shape, layout: &Layout) -> Result<()> {
        let opts = &self.options;
        if opts.optimizer != Optimizer::Muon {
            return Ok(());
        }
        let refuse = |flag: &str, value: String, why: String| Err(Error::invalid(flag, value, why));
        if opts.stack != Stack::MegatronTe {
            return refuse(
                "--stack",
                opts.stack.name().to_string(),
                "megatron-te with --optimizer muon (Megatron-core's Muon)".into(),
            );
        }
        if layout.zero.get() > 1 {
            return refuse(
                "--zero",
                layout.zero.get().to_string(),
                "0 or 1 with --optimizer muon (Megatron-core's muon, and dist_muon's layer-wise distributed optimizer; Megatron-FSDP steps no Muon)".into(),
            );
        }
        if opts.offload_optimizer.get() > 0.0 {
            return refuse(
                "--offload-optimizer",
                crate::format::exact(opts.offload_optimizer.get()),
                "0 with --optimizer muon (Megatron-core's CPU optimizer steps Adam)".into(),
            );
        }
        if !(opts.master_weights.is_default() && opts.optimizer_states.is_default()) {
            return refuse(
                "--optimizer",
                "muon".into(),
                "adamw with --master-weights or --optimizer-states other than fp32: Megatron-core's Muon keeps FP32 masters and moments (its precision-aware optimizer needs the distributed optimizer, which Muon runs without)".into(),
            );
        }
        if layout.replicate > 1 {
            return refuse(
                "--replicate",
                layout.replicate.to_string(),
                "1 with --optimizer muon (distributed-optimizer instances are the distributed optimizer's, which Muon runs without)".into(),
            );
        }
        let what = if shape.attention.latent.is_some() {
            Some("latent attention")
        } else if shape.mtp > 0 {
            Some("multi-token prediction's projections")
        } else if shape.hybrid.is_some() {
            Some("a hybrid's Mamba-2 blocks")
        } else {
            None
        };
        if let Some(what) = what {
            return refuse(
                "--optimizer",
                "muon".into(),
                format!(
                    "adamw for {}: the Newton–Schulz shapes of {what} are not counted yet",
                    shape.name
                ),
            );
        }
        Ok(())
    }

    /// Whether the step goes with a mixture of experts as the model costs it: sequence
    /// parallelism under TP (Megatron-core requires it for MoE), BF16 or FP8 (FP4 experts, and
    /// FP8 ones under ZeRO 3, are not modelled yet), and a recomputation the MoE layer's activations are derived for (none,
    /// selective, full, selective-layer). Always for a dense shape.
    fn experts_allowed(&self, shape: &Shape, layout: &Layout) -> Result<()> {
        if shape.experts.is_none() {
            return Ok(());
        }
        let step = &self.step;
        if layout.tp > 1 && !step.sequence_parallel {
            return Err(Error::invalid(
                "--sequence-parallel",
                "off",
                "on for a mixture of experts under TP > 1 (Megatron-core requires it)",
            ));
        }
        if step.precision.is_fp4() {
            return Err(Error::invalid(
                "--precision",
                step.precision,
                "bf16, fp8 or mxfp8 for a mixture of experts: FP4 experts are not modelled yet",
            ));
        }
        if step.precision.is_narrow() && layout.zero.shards_weights() {
            return Err(Error::invalid(
                "--zero",
                layout.zero.get(),
                format!(
                    "0 to 2 for a mixture of experts in {}: the FP8 copies of the experts ZeRO 3 \
                     gathers are not modelled yet",
                    step.precision
                ),
            ));
        }
        if matches!(step.recompute, Recompute::SaveQkv | Recompute::SelectiveOp) {
            return Err(Error::invalid(
                "--recompute",
                step.recompute.name(),
                "none, selective, full or selective-layer for a mixture of experts",
            ));
        }
        let opts = &self.options;
        if opts.moe_recompute != MoeRecompute::None || opts.norm_recompute {
            self.modules_allowed("--moe-recompute or --norm-recompute")?;
        }
        // Megatron-core's rules for --overlap-moe-expert-parallel-comm (`TransformerConfig`):
        // expert parallelism, no full recomputation, and an interleaved schedule under PP.
        if opts.ep_overlap {
            if layout.ep < 2 {
                return Err(Error::invalid(
                    "--ep-overlap",
                    "on",
                    "off with EP 1: the overlap hides expert-parallel all-to-alls",
                ));
            }
            if matches!(step.recompute, Recompute::Full | Recompute::SelectiveLayer) {
                return Err(Error::invalid(
                    "--ep-overlap",
                    "on",
                    "off under full or selective-layer recomputation (Megatron-core refuses them together)",
                ));
            }
            if layout.pp > 1
                && !matches!(step.schedule, crate::cost::step::Schedule::Interleaved(_))
            {
                return Err(Error::invalid(
                    "--ep-overlap",
                    "on",
                    "off under PP > 1 without interleaving (Megatron-core overlaps across model chunks)",
                ));
            }
        }
        Ok(())
    }

    /// The FP8 recipe the step runs ([`Fp8Recipe::of`] its precision and the recipe asked
    /// for), `None` in BF16 (or for a recipe the precision refuses, which every model refuses
    /// first: [`Detailed::precision_allowed`]).
    pub fn recipe(&self) -> Option<Fp8Recipe> {
        Fp8Recipe::of(self.step.precision, self.options.fp8_recipe).unwrap_or(None)
    }

    /// Whether the step's FP8 recipe, FP8 weights and optimizer state go with its precision
    /// and stack: a recipe asked for must be one the precision scales by and the stack runs;
    /// FP8 weights need FP8 and a stack that gathers them (Megatron-core's
    /// `--fp8-param-gather`, torchtitan's `enable_fsdp_float8_all_gather`), and keep an FP32
    /// or FP16 master (the remainders are the low bits beside a BF16 weight); a lower-precision
    /// optimizer state is Megatron-core's precision-aware optimizer.
    pub fn precision_allowed(&self) -> Result<()> {
        let (stack, opts) = (self.options.stack, &self.options);
        let recipe = Fp8Recipe::of(self.step.precision, opts.fp8_recipe)?;
        // A recipe asked for, or the default where the stack runs one recipe alone (DeepSeek's
        // blockwise scaling: the default, delayed, is not it).
        if let Some(r) = recipe.filter(|_| opts.fp8_recipe.is_some() || stack == Stack::DeepSeek) {
            r.allowed_on(stack)?;
        }
        opts.fp8_settings_have(self.step.precision, recipe)?;
        if opts.fp8_params {
            if !matches!(
                stack,
                Stack::MegatronTe | Stack::Torchtitan | Stack::TorchtitanCompile
            ) {
                return Err(Error::invalid(
                    "--fp8-params",
                    "on",
                    format!("off on the {stack} stack (FP8 weight gathers are Megatron-core's and torchtitan's)"),
                ));
            }
            if opts.master_weights == MasterWeights::Remainders {
                return Err(Error::invalid(
                    "--master-weights",
                    "remainders",
                    "fp32 or fp16 with --fp8-params (the remainders are an FP32 master's low 16 bits beside a BF16 weight)",
                ));
            }
        }
        let bf16 = opts.bf16_layers;
        if !bf16.is_none() && stack != Stack::MegatronTe {
            return Err(Error::invalid(
                "--fp8-bf16-layers",
                bf16,
                format!("0,0 on the {stack} stack (BF16 first and last layers are Megatron-core's --first-last-layers-bf16: --stack megatron-te)"),
            ));
        }
        let lower = [
            (
                "--optimizer-states",
                opts.optimizer_states.name(),
                !opts.optimizer_states.is_default(),
            ),
            (
                "--master-weights",
                opts.master_weights.name(),
                !opts.master_weights.is_default(),
            ),
        ];
        if let Some((flag, value, _)) = lower.iter().find(|(_, _, set)| *set) {
            if stack != Stack::MegatronTe {
                return Err(Error::invalid(
                    *flag,
                    *value,
                    format!("fp32 on the {stack} stack (lower-precision optimizer state is Megatron-core's precision-aware optimizer: --stack megatron-te)"),
                ));
            }
        }
        Ok(())
    }

    /// Whether the BF16 first and last layers (`--fp8-bf16-layers`) are fewer than the
    /// model's: at least one layer runs in FP8.
    fn bf16_layers_allowed(&self, shape: &Shape) -> Result<()> {
        let b = self.options.bf16_layers;
        if u64::from(b.start) + u64::from(b.end) >= u64::from(shape.layers) && !b.is_none() {
            return Err(Error::invalid(
                "--fp8-bf16-layers",
                b,
                format!(
                    "fewer than the {} layers of {} in all (--precision bf16 keeps every one)",
                    shape.layers, shape.name
                ),
            ));
        }
        Ok(())
    }

    /// Whether the offloaded layers (`--offload-activations`) go with the model, the stack,
    /// the layout and the recomputation as Megatron-core allows them
    /// ([`crate::cost::step::offload::offload_allowed`]).
    fn offload_allowed(&self, shape: &Shape, layout: &Layout) -> Result<()> {
        crate::cost::step::offload::offload_allowed(
            u64::from(self.options.offload_activations),
            u64::from(shape.layers),
            &shape.name,
            self.options.stack,
            layout.pp,
            self.step.recompute,
        )
    }

    /// [`Detailed::offload_allowed`] where the shape is not at hand (a search's weighing,
    /// which reaches every step through [`Detailed::unscheduled_pipeline_in`]): the model's
    /// layers are the one stage's at PP 1, the only depth Megatron-core offloads at; under
    /// deeper pipelines the PP rule refuses first.
    fn offload_allowed_in(&self, layout: &Layout, kinds: &StageKinds) -> Result<()> {
        if self.options.offload_activations == 0 {
            return Ok(());
        }
        let layers = match (layout.pp, kinds.kinds()) {
            (1, [only, ..]) => only.layers,
            _ => u64::MAX,
        };
        crate::cost::step::offload::offload_allowed(
            u64::from(self.options.offload_activations),
            layers,
            "the model",
            self.options.stack,
            layout.pp,
            self.step.recompute,
        )
    }

    /// Whether the optimizer's offloaded fraction (`--offload-optimizer`) goes with the stack,
    /// the layout's ZeRO stage and the optimizer's state as Megatron-core allows it
    /// ([`crate::cost::step::optimizer_offload::offload_allowed`]).
    fn optimizer_offload_allowed(&self, layout: &Layout) -> Result<()> {
        let o = &self.options;
        // Nothing to check, and nothing worked out, for a step that keeps its optimizer: the
        // search's weighing asks for every configuration.
        if o.offload_optimizer.is_zero() {
            return Ok(());
        }
        crate::cost::step::optimizer_offload::offload_allowed(
            o.offload_optimizer.get(),
            crate::cost::step::optimizer_offload::Setting {
                stack: o.stack,
                zero: layout.zero.get(),
                master: o.master_weights,
                states: o.optimizer_states,
                fp8_params_not_delayed: o.fp8_params
                    && self.recipe().is_some_and(|r| r != Fp8Recipe::Delayed),
            },
        )
    }

    /// Whether the stack runs the layout's CP and the step's precision.
    fn stack_allows(&self, layout: &Layout) -> Result<()> {
        let stack = self.options.stack;
        let settings = stack.settings();
        if layout.cp > 1 && settings.cp.is_none() {
            return Err(Error::invalid(
                "--cp",
                layout.cp,
                format!("1 (the {stack} stack has no context parallelism)"),
            ));
        }
        if self.step.tp_comm_overlap {
            stack.tp_overlap_allowed()?;
        }
        // CUDA graphs by Megatron-core's scopes, which megatron-te runs; the other stacks'
        // graphs (torch.compile's, XLA's) are not these.
        if !self.options.cuda_graphs.is_none() && stack != Stack::MegatronTe {
            return Err(Error::invalid(
                "--cuda-graphs",
                self.options.cuda_graphs,
                format!(
                    "none on the {stack} stack: the scopes are Megatron-core's \
                     (--cuda-graph-scope), which megatron-te runs"
                ),
            ));
        }
        // Transformer Engine's cross-entropy is Megatron-core's to call (its
        // `cross_entropy_fusion_impl`); the other stacks run their own losses.
        if self.options.loss == LossPrecision::InPlace && stack != Stack::MegatronTe {
            return Err(Error::invalid(
                "--loss-precision",
                "in-place",
                format!(
                    "fp32 or bf16 on the {stack} stack: the loss that overwrites its logits with \
                     their gradient is Transformer Engine's, which megatron-te runs"
                ),
            ));
        }
        let precision = self.step.precision;
        if !settings.trains(precision) {
            return Err(Error::invalid(
                "--precision",
                precision,
                format!("one the {stack} stack trains in (it has no {precision} recipe)"),
            ));
        }
        self.precision_allowed()
    }
}
