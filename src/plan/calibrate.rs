//! Measured runs against the detailed model: a run's prediction, the error in one FLOP count,
//! and the fit of the calibrated parameters ([`crate::cost::chip::calibration`]) to a set of runs.
//!
//! A run is one row of the published-runs format (`data/published/runs.json`): the model's
//! dimensions, the layout, the step, the GPU and the measured throughput. Errors are in MFU
//! points **in one FLOP count**: trainplan's own MFU scaled by the measured over the predicted
//! tokens per second per GPU, so the sources' different MFU definitions never enter the error;
//! where a source gives only its MFU, that MFU is taken as the measurement.
//!
//! A *family* is one recipe at several scales, the run's id without its last `-` part
//! (`nemo-gpt3-175b-bf16-128` → `nemo-gpt3-175b-bf16`). Its rows are not independent, so a fit is
//! tested with the whole family left out ([`leave_one_family_out`]).

use serde::{Deserialize, Serialize};

use crate::brief::gpu::{card_bytes, Gpu};
use crate::brief::{Brief, BriefPatch};
use crate::cost::chip::calibration::{Calibration, SUSTAINED};
use crate::cost::step::detailed::{Detailed, Options};
use crate::cost::step::experts::Dispatcher;
use crate::cost::step::graphs::CudaGraphs;
use crate::cost::step::optimizer_offload::Fraction;
use crate::cost::step::precision::Precision;
use crate::cost::step::recipe::{Bf16Layers, Fp8Recipe, MasterWeights, OptimizerStates};
use crate::cost::step::stack::Stack;
use crate::cost::step::stack::{GradientPrecision, LossPrecision, StageSplit};
use crate::cost::step::MoeRecompute;
use crate::cost::step::Recompute;
use crate::cost::step::{Schedule, Step};
use crate::cost::step_time::options::TimeOptions;
use crate::cost::step_time::step_time;
use crate::error::{Error, Result};
use crate::format::{fixed, general};
use crate::model::layout::{Degrees, Layout, ZeroStage};
use crate::model::{Architecture, Attention, Biases, Experts, Shape, ShapeSpec};
use crate::numeric::golden_section;
use crate::units::BYTES_PER_GB;

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// A model's dimensions as a run gives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunShape {
    /// Layers.
    pub layers: u32,
    /// Hidden size.
    pub hidden: u64,
    /// FFN width as SwiGLU (a GELU MLP of width 4h written as SwiGLU of 8h/3: the same FLOPs).
    pub ffn_swiglu_equivalent: u64,
    /// Attention heads.
    pub heads: u32,
    /// KV heads.
    pub kv_heads: u32,
    /// Vocabulary.
    pub vocab: u64,
    /// Head dimension, where it is not `hidden / heads` (Qwen3-MoE's 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u64>,
    /// RMSNorm on each head's query and key (Qwen3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub qk_norm: bool,
    /// A sliding attention window, tokens (gpt-oss: 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u64>,
    /// The layers the window applies to, when not all (gpt-oss: every second from the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_layers: Option<crate::model::LayerSet>,
    /// A learned attention sink a head (gpt-oss).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sinks: bool,
    /// The linear layers' biases (gpt-oss: on q, k, v and o).
    #[serde(default, skip_serializing_if = "Biases::is_none")]
    pub biases: Biases,
    /// Multi-head latent attention (DeepSeek-V3's ranks and head widths), if the model has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latent: Option<crate::model::Latent>,
    /// Multi-token-prediction depths the run trains (DeepSeek-V3's recipes: 1).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub mtp: u32,
    /// The mixture of experts, for an MoE run (its `ffn_swiglu_equivalent` is then the dense
    /// layers' width).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<Experts>,
    /// A hybrid model's pattern of blocks and its Mamba-2 mixer ([`crate::model::Hybrid`];
    /// its `ffn_swiglu_equivalent` is then the MLP blocks' true width, gated or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hybrid: Option<crate::model::Hybrid>,
}

/// What a run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Tokens per second per GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s_per_gpu: Option<f64>,
    /// The source's own MFU, percent (used when tokens per second are not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfu_pct: Option<f64>,
    /// Peak memory per GPU, GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_gb: Option<f64>,
}

/// One measured run. Fields the model does not use (sources, assumptions) are kept in the file
/// for people and ignored here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The run's name; its family is the name without its last `-` part.
    pub id: String,
    /// The GPU preset, first word (`h100-sxm (96 GB …)` is the H100 SXM).
    pub gpu: String,
    /// GPUs.
    pub gpus: u64,
    /// TP degree.
    pub tp: u64,
    /// PP degree.
    pub pp: u64,
    /// CP degree (default 1).
    #[serde(default = "one")]
    pub cp: u64,
    /// Hybrid-sharding replicas (default 1: one shard group).
    #[serde(default = "one")]
    pub replicate: u64,
    /// Expert-parallel degree (default 1).
    #[serde(default = "one")]
    pub ep: u64,
    /// Expert tensor-parallel degree (default: the TP, as Megatron-core's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etp: Option<u64>,
    /// The experts' all-to-alls overlapped with another micro-batch's compute, as the recipe
    /// sets it (`--overlap-moe-expert-parallel-comm`; default off).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ep_overlap: bool,
    /// The experts' token dispatcher as the recipe names it (`alltoall`, `flex/deepep`); DeepEP
    /// when it names it, else Megatron-core's `alltoall`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dispatcher: String,
    /// What the run captured in CUDA graphs (Megatron-core's `--cuda-graph-scope`, as
    /// `--cuda-graphs` reads it); default none.
    #[serde(default, skip_serializing_if = "CudaGraphs::is_none")]
    pub cuda_graphs: CudaGraphs,
    /// The precision of the matrix products (default BF16).
    #[serde(default)]
    pub precision: Precision,
    /// Model chunks per GPU (interleaving), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vp: Option<u32>,
    /// ZeRO stage.
    pub zero: u8,
    /// Sequence parallelism (default: on when TP > 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_parallel: Option<bool>,
    /// TP communication overlapped with the GEMMs (Megatron-core's `--tp-comm-overlap`);
    /// default: where the stack overlaps it and sequence parallelism is on, as the published
    /// recipes turn it on (NeMo's `ub_tp_comm_overlap: True`). Megatron-Bridge's NVFP4
    /// recipes turn it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp_comm_overlap: Option<bool>,
    /// Sequences per micro-batch.
    pub micro_batch: u64,
    /// Sequences per step.
    pub global_batch: u64,
    /// Tokens per sequence.
    pub seq_len: u64,
    /// Recomputation as the source states it (`none`, `selective`, `full`, or torchtitan's
    /// `selective (op)` and `selective (layer …)`).
    pub recompute: String,
    /// The framework, which names the stack when `stack` is absent.
    #[serde(default)]
    pub framework: String,
    /// The stack, if given (else from `framework`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<Stack>,
    /// Gradient buffers (`bf16`, `fp32`), if not the stack's (NeMo's `grad_sync_dtype`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradients: Option<GradientPrecision>,
    /// The loss's logits (`fp32`, `bf16`, `in-place`: Transformer Engine's cross-entropy,
    /// Megatron-core's `cross_entropy_fusion_impl` `te`), if not the stack's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossPrecision>,
    /// The FP8 scaling recipe, if not the precision's default (`tensorwise`, `blockwise`;
    /// Megatron-LM's `--fp8-recipe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_recipe: Option<Fp8Recipe>,
    /// The weights kept and gathered in FP8 (Megatron-core's `--fp8-param-gather`, NeMo's
    /// `fp8_params`; default off).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_params: bool,
    /// Adam's moments (`bf16` under Megatron-core's precision-aware optimizer), if not FP32.
    #[serde(default, skip_serializing_if = "OptimizerStates::is_default")]
    pub optimizer_states: OptimizerStates,
    /// The optimizer's master weights (`fp16`, `remainders`), if not FP32.
    #[serde(default, skip_serializing_if = "MasterWeights::is_default")]
    pub master_weights: MasterWeights,
    /// Layers at the start and end kept in BF16 under FP8 (`{"start": 1, "end": 1}`,
    /// Megatron-core's `--first-last-layers-bf16`), if any.
    #[serde(default, skip_serializing_if = "Bf16Layers::is_none")]
    pub bf16_layers: Bf16Layers,
    /// Layers whose activations go to host memory (Megatron-core's
    /// `--cpu-offloading-num-layers`, the GB200 and GB300 recipes' `cpu_offloading_num_layers`),
    /// if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload_activations: Option<u16>,
    /// The fraction of the optimizer offloaded to host memory (Megatron-core's
    /// `--optimizer-cpu-offload --optimizer-offload-fraction F`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload_optimizer: Option<f64>,
    /// Stage split (`llama3`), if not the stack's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<String>,
    /// The card's memory, GB, if not the preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_gb: Option<f64>,
    /// Bus bandwidth per GPU between nodes, GB/s, if not the preset's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inter_node_gbps: Option<f64>,
    /// The GPUs of each NVLink domain the run used, if fewer than the domain's (NVIDIA's GB200
    /// tables run 64 of a rack's 72: [`Brief::scale_up_used`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up_used: Option<u64>,
    /// The model.
    pub shape: RunShape,
    /// What was measured.
    pub published: Measured,
}

fn one() -> u64 {
    1
}

/// A runs file: `{"runs": [...]}` (other top-level keys are kept for people).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runs {
    /// The runs.
    pub runs: Vec<Run>,
}

/// What the model says of one run, and the error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// The run's id.
    pub id: String,
    /// Its family.
    pub family: String,
    /// The stack it was graded under.
    pub stack: Stack,
    /// Predicted tokens per second per GPU.
    pub tokens_per_s_per_gpu: f64,
    /// Predicted MFU, trainplan's FLOP count.
    pub mfu: f64,
    /// Measured MFU in the same FLOP count.
    pub measured_mfu: f64,
    /// Predicted minus measured, MFU points.
    pub error_points: f64,
    /// Predicted memory of the fullest GPU, GB.
    pub memory_gb: f64,
    /// The card's memory as marketed, GB.
    pub card_gb: f64,
}

impl Prediction {
    /// What a process can allocate on the card, GB of 10^9 bytes ([`card_bytes`]): the memory
    /// the prediction must fit in.
    pub fn usable_gb(&self) -> f64 {
        card_bytes(self.card_gb) / BYTES_PER_GB
    }
}

impl Run {
    /// The family: the id without its last `-` part.
    pub fn family(&self) -> &str {
        self.id.rsplit_once('-').map_or(&self.id, |(f, _)| f)
    }

    /// The stack: `stack` if given, else from the framework's name.
    pub fn stack(&self) -> Result<Stack> {
        if let Some(s) = self.stack {
            return Ok(s);
        }
        let f = self.framework.to_ascii_lowercase();
        let stack = if f.starts_with("nemo") || f.contains("megatron-core") {
            Stack::MegatronTe
        } else if f.starts_with("meta") {
            Stack::Llama3
        } else if f.contains("torchtitan") {
            if f.contains("compile") {
                Stack::TorchtitanCompile
            } else {
                Stack::Torchtitan
            }
        } else if f.contains("maxtext") {
            Stack::Maxtext
        } else if f.contains("deepspeed") {
            Stack::MegatronDeepspeed
        } else if f.starts_with("deepseek") || f.contains("hai-llm") {
            Stack::DeepSeek
        } else {
            return Err(Error::invalid(
                format!("runs[{}].framework", self.id),
                &self.framework,
                "a framework trainplan has a stack for, or a \"stack\" field",
            ));
        };
        Ok(stack)
    }

    /// Megatron-core's `--recompute-modules` when the source lists them,
    /// `selective (layernorm, moe_act)`: the names in parentheses, if every one is a module
    /// Megatron-core recomputes (`transformer_config.py`).
    pub fn recompute_modules(&self) -> Option<Vec<String>> {
        const MODULES: [&str; 7] = [
            "core_attn",
            "layernorm",
            "moe_act",
            "moe",
            "mlp",
            "shared_experts",
            "mla_up_proj",
        ];
        let text = self.recompute.to_ascii_lowercase();
        let inner = text.strip_prefix("selective")?.trim();
        let inner = inner.strip_prefix('(')?.strip_suffix(')')?;
        let modules: Vec<String> = inner.split(',').map(|m| m.trim().to_string()).collect();
        modules
            .iter()
            .all(|m| MODULES.contains(&m.as_str()))
            .then_some(modules)
    }

    /// What the MoE layers recompute beyond the step's recomputation, from Megatron-core's
    /// modules: the whole layer (`moe`), SwiGLU's output (`moe_act`), or nothing (`layernorm`
    /// is [`Options::norm_recompute`]).
    pub fn moe_recompute(&self) -> MoeRecompute {
        match self.recompute_modules() {
            Some(m) if m.iter().any(|m| m == "moe") => MoeRecompute::Layer,
            Some(m) if m.iter().any(|m| m == "moe_act") => MoeRecompute::Act,
            _ => MoeRecompute::None,
        }
    }

    /// The experts' dispatcher: DeepEP where the recipe names it.
    pub fn ep_dispatcher(&self) -> Dispatcher {
        if self.dispatcher.to_ascii_lowercase().contains("deepep") {
            Dispatcher::DeepEp
        } else {
            Dispatcher::AllToAll
        }
    }

    /// Recomputation from the source's words. Megatron-core's module list recomputes core
    /// attention only where it names `core_attn` (selective recomputation as trainplan
    /// models it); otherwise its modules are the MoE layers' ([`Run::moe_recompute`]).
    pub fn recompute_mode(&self) -> Recompute {
        if let Some(modules) = self.recompute_modules() {
            return if modules.iter().any(|m| m == "core_attn") {
                Recompute::Selective
            } else {
                Recompute::None
            };
        }
        let text = self.recompute.to_ascii_lowercase();
        match text.split_whitespace().next().unwrap_or("") {
            "none" => Recompute::None,
            "save_qkv_proj" | "save-qkv" => Recompute::SaveQkv,
            "selective" if text.contains("layer") => Recompute::SelectiveLayer,
            "selective" if text.contains("op") => Recompute::SelectiveOp,
            "selective" => Recompute::Selective,
            // Full, or not stated: the conservative reading.
            _ => Recompute::Full,
        }
    }

    /// Whether the cards ran under a power limit the source states (their peak is not the
    /// preset's; such runs are reported apart).
    pub fn power_capped(&self) -> bool {
        self.gpu.to_ascii_lowercase().contains("power limit")
    }

    /// The brief the run's cluster makes: the GPU preset, the GPUs, the card's memory (all of
    /// it may be used), the network where the run gives it, and `peak_tflops` if given.
    pub fn brief(&self, peak_tflops: Option<f64>) -> Result<Brief> {
        let name = self.gpu.split_whitespace().next().unwrap_or("");
        let gpu = Gpu::named(name)?;
        let mut brief = BriefPatch::gpu(&gpu).apply(Brief::default());
        brief.gpus = self.gpus;
        brief.seq_len = self.seq_len;
        if let Some(card) = self.card_gb {
            brief.gpu_memory_gb = card;
        }
        brief.memory_cap_gb = brief.gpu_memory_gb;
        if let Some(gbps) = self.inter_node_gbps {
            brief.topology.inter_node_gbps = gbps;
        }
        if self.scale_up_used.is_some() {
            brief.scale_up_used = self.scale_up_used;
        }
        if let Some(peak) = peak_tflops {
            brief.peak_tflops = peak;
        }
        brief.validate()?;
        Ok(brief)
    }

    /// The run's design: shape, layout and detailed step.
    pub fn design(&self, brief: &Brief) -> Result<(Shape, Layout, Detailed)> {
        let s = &self.shape;
        let shape = ShapeSpec {
            name: self.id.clone(),
            layers: s.layers,
            hidden: s.hidden,
            ffn: s.ffn_swiglu_equivalent,
            heads: s.heads,
            kv_heads: s.kv_heads,
            vocab: s.vocab,
            head_dim: s.head_dim,
            tied_embeddings: false,
            biases: s.biases,
            architecture: Architecture {
                sliding_window: s.sliding_window,
                window_layers: s.window_layers.clone(),
                ..Architecture::default()
            },
            experts: s.experts.clone(),
            attention: Attention {
                qk_norm: s.qk_norm,
                sinks: s.sinks,
                latent: s.latent,
            },
            mtp: s.mtp,
            hybrid: s.hybrid.clone(),
            style: Default::default(),
        }
        .build()?;
        let zero = ZeroStage::new(self.zero)?;
        let degrees = Degrees {
            ep: self.ep,
            etp: self.etp,
            tp: self.tp,
            cp: self.cp,
            pp: self.pp,
            replicate: self.replicate,
        };
        let layout = Layout::with(brief, &shape, degrees, zero)?;
        let stack = self.stack()?;
        let mut options = Options::for_stack(stack).on_gpu(brief.mxfp8);
        if let Some(g) = self.gradients {
            options.gradients = g;
        }
        if let Some(loss) = self.loss {
            options.loss = loss;
        }
        options.ep_overlap = self.ep_overlap;
        options.moe_recompute = self.moe_recompute();
        options.norm_recompute = self
            .recompute_modules()
            .is_some_and(|m| m.iter().any(|m| m == "layernorm"));
        options.latent_recompute = self
            .recompute_modules()
            .is_some_and(|m| m.iter().any(|m| m == "mla_up_proj"));
        options.ep_dispatcher = self.ep_dispatcher();
        options.cuda_graphs = self.cuda_graphs;
        options.fp8_recipe = self.fp8_recipe;
        options.fp8_params = self.fp8_params;
        options.optimizer_states = self.optimizer_states;
        options.master_weights = self.master_weights;
        options.bf16_layers = self.bf16_layers;
        options.offload_activations = self.offload_activations.unwrap_or(0);
        options.offload_optimizer =
            Fraction::new("--offload-optimizer", self.offload_optimizer.unwrap_or(0.0))?;
        match self.stages.as_deref() {
            None => {}
            Some("llama3") => options.stages = StageSplit::Llama3,
            Some("even") => options.stages = StageSplit::Even,
            Some("balanced") => options.stages = StageSplit::Balanced,
            Some("loss") => options.stages = StageSplit::Loss,
            Some(other) => {
                return Err(Error::invalid(
                    format!("runs[{}].stages", self.id),
                    other,
                    "even, llama3 or balanced",
                ))
            }
        }
        let sequence_parallel = self.tp > 1 && self.sequence_parallel.unwrap_or(true);
        let step = Step {
            micro_batch: self.micro_batch,
            seq_len: self.seq_len,
            recompute: self.recompute_mode(),
            sequence_parallel,
            schedule: match self.vp {
                Some(v) if v >= 2 => Schedule::Interleaved(v),
                _ => Schedule::OneFOneB,
            },
            // Where the stack overlaps TP communication, the published recipes turn it on
            // (NeMo's `ub_tp_comm_overlap: True`) unless the run says otherwise.
            tp_comm_overlap: Step::stack_overlap(stack, sequence_parallel)
                && self.tp_comm_overlap.unwrap_or(true),
            precision: self.precision,
            global_batch_tokens: self.global_batch.checked_mul(self.seq_len).ok_or_else(|| {
                Error::invalid(
                    format!("runs[{}].global_batch", self.id),
                    self.global_batch,
                    "sequences × seq_len within 2^64 tokens",
                )
            })?,
        };
        Ok((shape, layout, Detailed { step, options }))
    }

    /// What the run measured, each within what a measurement can be on its card: tokens per
    /// second above 0, an MFU above 0 and at most 100 %, a peak memory above 0 and at most the
    /// card's. Whether the tokens per second are within the card's peak is
    /// [`Run::predict`]'s to check, in its FLOP count.
    pub fn check_measured(&self, brief: &Brief) -> Result<()> {
        let m = &self.published;
        let field = |name: &str| format!("runs[{}].published.{name}", self.id);
        if let Some(tps) = m
            .tokens_per_s_per_gpu
            .filter(|v| !(v.is_finite() && *v > 0.0))
        {
            return Err(Error::invalid(
                field("tokens_per_s_per_gpu"),
                tps,
                "tokens per second per GPU above 0, as the run measured them",
            ));
        }
        if let Some(pct) = m
            .mfu_pct
            .filter(|v| !(v.is_finite() && *v > 0.0 && *v <= 100.0))
        {
            return Err(Error::invalid(
                field("mfu_pct"),
                pct,
                "a percentage above 0 and at most 100: no run computes faster than its card's peak",
            ));
        }
        // What the card holds, GB of 10^9 bytes, which a measured peak cannot pass.
        let card = brief.gpu_memory_gb;
        let holds = card_bytes(card) / BYTES_PER_GB;
        if let Some(gb) = m
            .peak_memory_gb
            .filter(|v| !(v.is_finite() && *v > 0.0 && *v <= holds))
        {
            return Err(Error::invalid(
                field("peak_memory_gb"),
                gb,
                format!(
                    "above 0 and at most what the card's {} GB hold, {} GB of 10^9 bytes (give the card's memory in card_gb if it is not the preset's)",
                    general(card),
                    fixed(holds, 1)
                ),
            ));
        }
        Ok(())
    }

    /// The model's prediction for this run under `calibration`, at the preset's peak or at
    /// `peak_tflops`. A run is refused by name when what it measured is not a measurement
    /// ([`Run::check_measured`]), when its tokens per second are beyond its card's peak in
    /// trainplan's FLOP count (an MFU above 100 % of the peak of its precision), or when the
    /// detailed memory model puts its fullest GPU over its card's memory: such a run could
    /// never have run as described, and would pull a fit anywhere.
    pub fn predict(
        &self,
        calibration: Calibration,
        peak_tflops: Option<f64>,
    ) -> Result<Prediction> {
        let brief = self.brief(peak_tflops)?;
        self.check_measured(&brief)?;
        let (shape, layout, detailed) = self.design(&brief)?;
        let memory = detailed.memory(&shape, &layout)?;
        let usable = card_bytes(brief.gpu_memory_gb);
        if memory.total() > usable {
            return Err(Error::invalid(
                format!("runs[{}]", self.id),
                format!(
                    "{} GB predicted on its fullest GPU",
                    fixed(memory.total() / BYTES_PER_GB, 1)
                ),
                format!(
                    "at most what its card's {} GB hold, {} GB of 10^9 bytes: as described ({}, micro-batch {}, recomputation {}), the detailed memory model says it could never fit, so it cannot calibrate the time model; check the run's layout, micro_batch, recompute and zero, give the card's memory in card_gb, or leave the run out",
                    general(brief.gpu_memory_gb),
                    fixed(usable / BYTES_PER_GB, 1),
                    layout.describe(),
                    self.micro_batch,
                    self.recompute
                ),
            ));
        }
        let mut time = TimeOptions::for_stack(detailed.options.stack);
        time.calibration = calibration;
        let t = step_time(&brief.machine(), &shape, &layout, &detailed, &time)?;
        let per_gpu = t.tokens_per_second / self.gpus as f64;
        let measured_mfu = match (self.published.tokens_per_s_per_gpu, self.published.mfu_pct) {
            (Some(tps), _) => t.mfu * tps / per_gpu,
            (None, Some(pct)) => pct / 100.0,
            (None, None) => {
                return Err(Error::invalid(
                    format!("runs[{}].published", self.id),
                    "no throughput",
                    "tokens_per_s_per_gpu or mfu_pct",
                ))
            }
        };
        // trainplan's MFU is against the BF16 peak; an FP8 run may go up to its own peak.
        let peak =
            self.precision
                .peak_tflops(brief.peak_tflops, brief.fp8_tflops, brief.fp4_tflops);
        let most = peak / brief.peak_tflops;
        if let Some(tps) = self.published.tokens_per_s_per_gpu {
            if !(measured_mfu > 0.0 && measured_mfu <= most) {
                return Err(Error::invalid(
                    format!("runs[{}].published.tokens_per_s_per_gpu", self.id),
                    tps,
                    format!(
                        "at most {}, the card's {} TFLOP/s {} peak in trainplan's FLOP count for this model and step ({} % MFU as given): check the units, tokens per second per GPU",
                        fixed(tps * most / measured_mfu, 1),
                        general(peak),
                        self.precision,
                        fixed(100.0 * measured_mfu, 1)
                    ),
                ));
            }
        }
        Ok(Prediction {
            id: self.id.clone(),
            family: self.family().to_string(),
            stack: detailed.options.stack,
            tokens_per_s_per_gpu: per_gpu,
            mfu: t.mfu,
            measured_mfu,
            error_points: 100.0 * (t.mfu - measured_mfu),
            memory_gb: memory.total() / BYTES_PER_GB,
            card_gb: brief.gpu_memory_gb,
        })
    }
}

/// Mean absolute error, points, of `runs` under `calibration`.
pub fn mean_absolute_error(runs: &[&Run], calibration: Calibration) -> Result<f64> {
    let predictions = runs
        .iter()
        .map(|r| r.predict(calibration, None))
        .collect::<Result<Vec<_>>>()?;
    Ok(mae(&predictions.iter().collect::<Vec<_>>()))
}

/// Mean absolute error of `predictions`, MFU points.
pub fn mae(predictions: &[&Prediction]) -> f64 {
    let n = predictions.len().max(1) as f64;
    predictions
        .iter()
        .map(|p| p.error_points.abs())
        .sum::<f64>()
        / n
}

/// The `sustained` that minimises the mean absolute error over `runs` when every stack uses it
/// (golden-section search over its bounds, to 10⁻⁴).
fn fit_pooled(runs: &[&Run]) -> f64 {
    let (lo, hi) = SUSTAINED;
    golden_section(lo, hi, 1e-4, |x| {
        mean_absolute_error(runs, Calibration::pooled(x)).unwrap_or(f64::INFINITY)
    })
}

/// The families of `runs`, in their first order.
fn families<'a>(runs: &[&'a Run]) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in runs {
        if !out.contains(&r.family()) {
            out.push(r.family());
        }
    }
    out
}

/// The calibration that minimises the mean absolute error over the BF16 runs of `runs`: the
/// pooled `sustained` over all of them, and a stack's own where two or more of its families are among them (each
/// by golden-section search over the bounds, to 10⁻⁴). Runs at the eager curve, which no
/// parameter scales, are refused.
pub fn fit(runs: &[&Run]) -> Result<Calibration> {
    for r in runs {
        let stack = r.stack()?;
        if !stack.settings().per_operation {
            return Err(Error::invalid(
                format!("runs[{}].stack", r.id),
                stack,
                "a stack with the per-operation model; the eager stack's curve has no calibrated parameter (give it measured points with --calibration)",
            ));
        }
    }
    // Every run must be gradable before the search starts.
    mean_absolute_error(runs, Calibration::default())?;
    // `sustained` is the share of the BF16 kernel benchmarks a step keeps: fitted to BF16
    // runs only, so that FP8 runs are graded by it, never fitted, and their errors test the
    // FP8 GEMM ceiling measured on its own (a set of FP8 runs alone is fitted as it is).
    let bf16: Vec<&Run> = runs
        .iter()
        .copied()
        .filter(|r| r.precision == Precision::Bf16)
        .collect();
    let runs: &[&Run] = if bf16.is_empty() { runs } else { &bf16 };
    let mut c = Calibration::pooled(fit_pooled(runs));
    for stack in Stack::ALL {
        let of: Vec<&Run> = runs
            .iter()
            .copied()
            .filter(|r| r.stack().is_ok_and(|s| s == stack))
            .collect();
        if !of.is_empty() {
            c.stacks.set(stack, fit_pooled(&of));
        }
    }
    Ok(c)
}

/// Each run's prediction with its family left out of the fit: (the fit, prediction). The fit
/// is [`fit`] over the other families, so a family whose stack has others among them is
/// predicted at its stack's value fitted to those, and any other at the pooled value.
pub fn leave_one_family_out(runs: &[&Run]) -> Result<Vec<(Calibration, Prediction)>> {
    let mut out = Vec::new();
    for family in families(runs) {
        let rest: Vec<&Run> = runs
            .iter()
            .copied()
            .filter(|r| r.family() != family)
            .collect();
        let c = if rest.is_empty() {
            Calibration::default()
        } else {
            fit(&rest)?
        };
        for r in runs.iter().filter(|r| r.family() == family) {
            out.push((c, r.predict(c, None)?));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NeMo's GPT-3 175B on 128 H100s (`data/published/runs.json`'s first run), with `edit`
    /// laid over it.
    fn run(edit: serde_json::Value) -> Run {
        let mut run = serde_json::json!({
            "id": "nemo-gpt3-175b-bf16-128", "gpu": "h100-sxm", "gpus": 128,
            "tp": 4, "pp": 8, "vp": 12, "zero": 1, "micro_batch": 1, "global_batch": 256,
            "seq_len": 2048, "recompute": "selective",
            "framework": "NeMo 24.x (Megatron-core, Transformer Engine)", "card_gb": 80,
            "shape": {"layers": 96, "hidden": 12288, "ffn_swiglu_equivalent": 32768,
                      "heads": 96, "kv_heads": 96, "vocab": 51200},
            "published": {"tokens_per_s_per_gpu": 492.9609375, "mfu_pct": 53.54}
        });
        for (key, value) in edit.as_object().unwrap() {
            match (run.get_mut(key), value) {
                (Some(serde_json::Value::Object(old)), serde_json::Value::Object(new)) => {
                    old.extend(new.clone())
                }
                _ => run[key] = value.clone(),
            }
        }
        serde_json::from_value(run).unwrap()
    }

    fn refused(edit: serde_json::Value) -> String {
        run(edit)
            .predict(Calibration::default(), None)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_published_run_is_graded() {
        let p = run(serde_json::json!({}))
            .predict(Calibration::default(), None)
            .unwrap();
        assert!((p.measured_mfu - 0.529).abs() < 1e-3, "{}", p.measured_mfu);
        assert!(p.memory_gb <= p.usable_gb());
    }

    #[test]
    fn a_run_that_offloads_is_graded_with_its_layers_offloaded() {
        // The GB200/GB300 recipes' `cpu_offloading_num_layers`, here 40 of GPT-3's 96 layers
        // at PP 1 without recomputation (Megatron-core's terms): the design carries it, the
        // GPU keeps 56 layers' activations, and PP 8 is refused by name as Megatron-core does.
        let offloads = |pp: u64| {
            run(
                serde_json::json!({"pp": pp, "vp": null, "tp": 8, "recompute": "none",
                                   "offload_activations": 40}),
            )
        };
        let brief = Brief::default();
        let (shape, layout, d) = offloads(1).design(&brief).unwrap();
        assert_eq!(d.options.offload_activations, 40);
        let stage = d.memory(&shape, &layout).unwrap().detail.unwrap().stage;
        assert_eq!((stage.offloaded_layers, stage.layers), (40, 96));
        let e = offloads(8)
            .predict(Calibration::default(), None)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("--offload-activations = 40: 0 under PP 8"),
            "{e}"
        );
        // A run that says nothing offloads nothing.
        assert_eq!(run(serde_json::json!({})).offload_activations, None);
    }

    #[test]
    fn a_run_that_offloads_its_optimizer_is_graded_with_it() {
        // Half the optimizer on the host at ZeRO 1: the design carries it and the GPU's
        // optimizer state halves; at ZeRO 0 it is refused by name, as Megatron-core does
        // (the precision-aware optimizer it needs runs only as the distributed optimizer).
        let offloads = |zero: u8| {
            run(
                serde_json::json!({"pp": 1, "vp": null, "tp": 8, "recompute": "none",
                                   "zero": zero, "offload_optimizer": 0.5}),
            )
        };
        let brief = Brief::default();
        let (shape, layout, d) = offloads(1).design(&brief).unwrap();
        assert_eq!(d.options.offload_optimizer.get(), 0.5);
        let half = d.memory(&shape, &layout).unwrap();
        let mut whole = d;
        whole.options.offload_optimizer = Fraction::ZERO;
        let all = whole.memory(&shape, &layout).unwrap();
        assert_eq!(half.optimizer, all.optimizer * 0.5);
        let e = offloads(0)
            .predict(Calibration::default(), None)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("--offload-optimizer = 0.5: 0 at ZeRO 0"),
            "{e}"
        );
        assert_eq!(run(serde_json::json!({})).offload_optimizer, None);
    }

    #[test]
    fn a_measured_mfu_at_or_below_zero_or_above_100_percent_is_refused_by_name() {
        for pct in [-5.0, 0.0, 120.0] {
            let e = refused(serde_json::json!({"published": {"mfu_pct": pct}}));
            assert_eq!(
                e,
                format!("invalid runs[nemo-gpt3-175b-bf16-128].published.mfu_pct = {pct}: a percentage above 0 and at most 100: no run computes faster than its card's peak")
            );
        }
        for tps in [-492.96, 0.0] {
            let e = refused(serde_json::json!({"published": {"tokens_per_s_per_gpu": tps}}));
            assert!(
                e.starts_with(&format!(
                    "invalid runs[nemo-gpt3-175b-bf16-128].published.tokens_per_s_per_gpu = {tps}: tokens per second per GPU above 0"
                )),
                "{e}"
            );
        }
        let e = refused(serde_json::json!({"published": {"peak_memory_gb": 95}}));
        assert!(
            e.contains("published.peak_memory_gb = 95: above 0 and at most what the card's 80 GB hold, 85.2 GB"),
            "{e}"
        );
    }

    #[test]
    fn tokens_per_second_beyond_the_card_s_peak_are_refused_by_name() {
        // Per node, not per GPU: 8 times what the run measured, 423 % of the BF16 peak.
        let e = refused(serde_json::json!({"published": {"tokens_per_s_per_gpu": 3943.68}}));
        assert_eq!(
            e,
            "invalid runs[nemo-gpt3-175b-bf16-128].published.tokens_per_s_per_gpu = 3943.68: at most 931.3, the card's 989 TFLOP/s bf16 peak in trainplan's FLOP count for this model and step (423.5 % MFU as given): check the units, tokens per second per GPU"
        );
        // An FP8 run goes up to the FP8 peak: 1.5 times the BF16 peak is measurable there.
        let fp8 = run(serde_json::json!({
            "precision": "fp8",
            "card_gb": 96,
            "published": {"tokens_per_s_per_gpu": 1.5 * 931.3}
        }));
        let p = fp8.predict(Calibration::default(), None).unwrap();
        assert!(
            p.measured_mfu > 1.0 && p.measured_mfu < 2.0,
            "{}",
            p.measured_mfu
        );
    }

    #[test]
    fn a_run_that_could_never_fit_its_card_is_refused_with_the_gb() {
        let e = refused(serde_json::json!({"recompute": "none", "micro_batch": 8}));
        assert_eq!(
            e,
            "invalid runs[nemo-gpt3-175b-bf16-128] = 222.8 GB predicted on its fullest GPU: at most what its card's 80 GB hold, 85.2 GB of 10^9 bytes: as described (TP 4 × PP 8 × DP 4, ZeRO 1, micro-batch 8, recomputation none), the detailed memory model says it could never fit, so it cannot calibrate the time model; check the run's layout, micro_batch, recompute and zero, give the card's memory in card_gb, or leave the run out"
        );
        // The same run fits a card with room for it.
        let big = run(serde_json::json!({"recompute": "none", "micro_batch": 8, "card_gb": 256}));
        assert!(big.predict(Calibration::default(), None).is_ok());
        // And a fit refuses it before it starts.
        let never = run(serde_json::json!({"card_gb": 40}));
        let e = fit(&[&never]).unwrap_err().to_string();
        assert!(
            e.contains(
                "= 77.3 GB predicted on its fullest GPU: at most what its card's 40 GB hold"
            ),
            "{e}"
        );
    }
}
