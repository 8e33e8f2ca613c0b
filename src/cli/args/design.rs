//! One design, as `check` and `export` take it: the model (a preset, a Hugging Face config or
//! its dimensions), the tokens, the parallel layout, and the step and models it runs under.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::{Path, PathBuf};

use clap::Args;

use super::brief::BriefArgs;
use super::memory::{DetailedArgs, MemoryArg};
use super::parse::{parse_whole, parse_zero, OnOff};
use super::step::{CheckStepArgs, RecomputeArg};
use super::time::{TimeArg, TimeArgs};
use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::{Recompute, Schedule, Step};
use crate::error::{Error, Result};
use crate::input::hf;
use crate::model::layout::{Degrees, ZeroStage};
use crate::model::{
    self, Architecture, Attention, Biases, Shape, ShapeSpec, LLAMA3_HEAD_DIM, LLAMA3_KV_HEADS,
    LLAMA3_NORM_EPS, LLAMA3_ROPE_THETA, LLAMA3_VOCAB,
};

/// One design: the model, the tokens, the layout and the models of memory and time.
#[derive(Debug, Args)]
pub struct DesignArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Training tokens, a whole number (15e12 is fine).
    #[arg(long, value_name = "D", value_parser = parse_whole)]
    pub tokens: Option<u64>,
    /// Tensor-parallel degree: divides the GPUs per node and the heads [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub tp: Option<u64>,
    /// Pipeline-parallel degree: 1 to the number of layers [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub pp: Option<u64>,
    /// Context-parallel degree: ranks each sequence is split over, 2·CP chunks dividing the
    /// sequence [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub cp: Option<u64>,
    /// ZeRO stage: 0, 1, 2 or 3 [default: 0].
    #[arg(long, value_name = "STAGE", value_parser = parse_zero)]
    pub zero: Option<ZeroStage>,
    /// Hybrid sharding: copies of the ZeRO-sharded state, each sharded over DP/N × CP ranks
    /// and all-reduced across copies (HSDP); divides DP, needs --zero 1 to 3 [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub replicate: Option<u64>,
    /// Expert-parallel degree, a mixture of experts only: ranks its routed experts are spread
    /// over; divides the routed experts, and ETP × EP divides TP × CP × DP [default: 1].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub ep: Option<u64>,
    /// Expert tensor-parallel degree, a mixture of experts only: ranks each expert's matrices
    /// are split over, inside a node [default: the TP, as in Megatron-core].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub etp: Option<u64>,
    #[command(flatten)]
    pub step: CheckStepArgs,
    #[command(flatten)]
    pub detailed: DetailedArgs,
    #[command(flatten)]
    pub time: TimeArgs,
    #[command(flatten)]
    pub brief: BriefArgs,
}

/// The model of one design: a name, a Hugging Face config, or its dimensions.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model (one of --model, --model-config, or --layers --hidden --ffn)")]
pub struct ModelArgs {
    /// A preset (8b, 70b, 405b: Llama 3) or a dimension name such as L80-h8192-f28672.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// A Hugging Face config.json (Llama, Mistral, Qwen2 dense decoders).
    #[arg(long, value_name = "config.json", conflicts_with = "model")]
    pub model_config: Option<PathBuf>,
    /// Layers of an ad-hoc shape.
    #[arg(long, value_name = "L", value_parser = parse_whole, conflicts_with_all = ["model", "model_config"], requires_all = ["hidden", "ffn"])]
    pub layers: Option<u64>,
    /// Hidden size of an ad-hoc shape.
    #[arg(long, value_name = "H", value_parser = parse_whole, requires = "layers")]
    pub hidden: Option<u64>,
    /// SwiGLU FFN width of an ad-hoc shape.
    #[arg(long, value_name = "F", value_parser = parse_whole, requires = "layers")]
    pub ffn: Option<u64>,
    /// The model a `--from` file builds where the flags above cannot state it (experts,
    /// latent attention, a hybrid pattern): set by the reader, never by a flag.
    #[arg(skip)]
    pub file: Option<Shape>,
    #[command(flatten)]
    pub attention: AttentionArgs,
}

/// The dimensions of an ad-hoc shape beyond layers, hidden size and FFN width, with Llama 3's
/// defaults.
#[derive(Debug, Args)]
pub struct AttentionArgs {
    /// Attention heads of an ad-hoc shape [default: hidden / 128].
    #[arg(long, value_name = "N", value_parser = parse_whole, requires = "layers")]
    pub heads: Option<u64>,
    /// KV heads of an ad-hoc shape [default: 8].
    #[arg(long, value_name = "N", value_parser = parse_whole, requires = "layers")]
    pub kv_heads: Option<u64>,
    /// Head dimension of an ad-hoc shape [default: hidden / heads].
    #[arg(long, value_name = "D", value_parser = parse_whole, requires = "layers")]
    pub head_dim: Option<u64>,
    /// Vocabulary of an ad-hoc shape [default: 128256]; with --from, of a file that leaves
    /// it to its tokenizer.
    #[arg(long, value_name = "V", value_parser = parse_whole)]
    pub vocab: Option<u64>,
    /// The ad-hoc shape's output head shares the input embedding.
    #[arg(long, requires = "layers")]
    pub tied_embeddings: bool,
    /// RoPE base θ of an ad-hoc shape, which the launchers pass on [default: 500000, Llama 3's].
    #[arg(long, value_name = "THETA", requires = "layers")]
    pub rope_theta: Option<f64>,
    /// The ad-hoc shape's RoPE runs unscaled (Llama 3 and Llama 2 do; a Megatron-LM script
    /// without --use-rope-scaling) [default: Llama 3.1's scaling].
    #[arg(long, requires = "layers")]
    pub no_rope_scaling: bool,
    /// RMSNorm ε of an ad-hoc shape [default: 1e-5, Llama 3's].
    #[arg(long, value_name = "EPS", requires = "layers")]
    pub norm_eps: Option<f64>,
    /// Sliding-window attention of an ad-hoc shape: tokens each token sees, itself included
    /// [default: none, full causal attention].
    #[arg(long, value_name = "TOKENS", value_parser = parse_whole, requires = "layers")]
    pub sliding_window: Option<u64>,
}

impl AttentionArgs {
    /// The shape of `layers × hidden × ffn` with these dimensions, named by them.
    pub(crate) fn shape(&self, layers: u64, hidden: u64, ffn: u64) -> Result<Shape> {
        let narrow = |flag: &str, n: u64| {
            u32::try_from(n)
                .map_err(|_| Error::invalid(flag, n, "a whole number of at most 4294967295"))
        };
        let heads = match self.heads {
            Some(a) => a,
            None => match self.head_dim {
                Some(d) if d > 0 && hidden % d == 0 => hidden / d,
                _ if hidden % LLAMA3_HEAD_DIM == 0 => hidden / LLAMA3_HEAD_DIM,
                _ => {
                    return Err(Error::invalid(
                        "--hidden",
                        hidden,
                        "a multiple of 128, or give --heads",
                    ))
                }
            },
        };
        ShapeSpec {
            name: String::new(),
            layers: narrow("--layers", layers)?,
            hidden,
            ffn,
            heads: narrow("--heads", heads)?,
            // Llama 3's 8 KV heads where they divide the heads, else one per head.
            kv_heads: narrow(
                "--kv-heads",
                self.kv_heads.unwrap_or({
                    let llama = u64::from(LLAMA3_KV_HEADS);
                    if heads % llama == 0 {
                        llama
                    } else {
                        heads
                    }
                }),
            )?,
            vocab: self.vocab.unwrap_or(LLAMA3_VOCAB),
            head_dim: self.head_dim,
            tied_embeddings: self.tied_embeddings,
            biases: Biases::default(),
            architecture: Architecture {
                rope_theta: self.rope_theta.unwrap_or(LLAMA3_ROPE_THETA),
                // Llama 3.1's scaling, as every shape not read from a config has, unless
                // --no-rope-scaling.
                rope_scaling: match self.no_rope_scaling {
                    true => None,
                    false => Architecture::default().rope_scaling,
                },
                norm_eps: self.norm_eps.unwrap_or(LLAMA3_NORM_EPS),
                sliding_window: self.sliding_window,
                window_layers: None,
            },
            experts: None,
            attention: Attention::default(),
            mtp: 0,
            hybrid: None,
            style: Default::default(),
        }
        .build_named()
        .map_err(|e| e.renamed(|field| format!("--{}", field.replace('_', "-"))))
    }
}

impl ModelArgs {
    /// The shape asked for.
    pub fn shape(&self) -> Result<Shape> {
        if let Some(shape) = &self.file {
            return Ok(shape.clone());
        }
        // --vocab states an ad-hoc shape's (or, laid over by --from, a file's) vocabulary.
        if let (Some(v), None) = (self.attention.vocab, self.layers) {
            return Err(Error::invalid(
                "--vocab",
                v,
                "given with --layers (a model stated by flags) or --from (a file that leaves its vocabulary to the tokenizer)",
            ));
        }
        match (&self.model, &self.model_config, self.layers) {
            (Some(name), None, None) => model::preset(name),
            (None, Some(path), None) => hf::read(path),
            (None, None, Some(layers)) => {
                let (Some(hidden), Some(ffn)) = (self.hidden, self.ffn) else {
                    return Err(Error::invalid(
                        "--layers",
                        layers,
                        "--layers with --hidden and --ffn",
                    ));
                };
                self.attention.shape(layers, hidden, ffn)
            }
            _ => Err(Error::invalid(
                "model",
                "none",
                "one of --model, --model-config, or --layers --hidden --ffn",
            )),
        }
    }
}

impl DesignArgs {
    /// The shape asked for.
    pub fn shape(&self) -> Result<Shape> {
        self.model.shape()
    }

    /// The files the design is read from: the brief, the model's config, the efficiency table.
    pub fn inputs(&self) -> Vec<&Path> {
        [
            self.brief.brief.as_deref(),
            self.model.model_config.as_deref(),
        ]
        .into_iter()
        .flatten()
        .chain(self.time.inputs())
        .collect()
    }

    /// The TP degree asked for (1 when not).
    pub fn tp(&self) -> u64 {
        self.tp.unwrap_or(1)
    }

    /// The PP degree asked for (1 when not).
    pub fn pp(&self) -> u64 {
        self.pp.unwrap_or(1)
    }

    /// The ZeRO stage asked for (0 when not).
    pub fn zero(&self) -> ZeroStage {
        self.zero.unwrap_or_default()
    }

    /// The CP degree asked for (1 when not).
    pub fn cp(&self) -> u64 {
        self.cp.unwrap_or(1)
    }

    /// The parallel degrees asked for (1 for each not given).
    pub fn degrees(&self) -> Degrees {
        Degrees {
            ep: self.ep.unwrap_or(1),
            etp: self.etp,
            tp: self.tp(),
            cp: self.cp(),
            pp: self.pp(),
            replicate: self.replicate.unwrap_or(1),
        }
    }

    /// The first flag given that describes a design rather than the brief or the model's
    /// config (which `export --plan` takes from the plan file instead), if any.
    pub fn design_flag(&self) -> Option<&'static str> {
        let s = &self.step;
        let m = &self.model;
        [
            ("--tokens", self.tokens.is_some()),
            ("--model", m.model.is_some()),
            ("--layers", m.layers.is_some()),
            ("--vocab", m.attention.vocab.is_some()),
            ("--tp", self.tp.is_some()),
            ("--pp", self.pp.is_some()),
            ("--cp", self.cp.is_some()),
            ("--zero", self.zero.is_some()),
            ("--replicate", self.replicate.is_some()),
            ("--ep", self.ep.is_some()),
            ("--etp", self.etp.is_some()),
            ("--precision", s.precision.is_some()),
            ("--micro-batch", s.micro_batch.is_some()),
            ("--recompute", s.recompute.is_some()),
            ("--sequence-parallel", s.sequence_parallel.is_some()),
            ("--schedule", s.schedule.is_some()),
            ("--tp-comm-overlap", s.tp_comm_overlap.is_some()),
            ("--global-batch-tokens", s.global_batch_tokens.is_some()),
            ("--memory", self.detailed.memory != MemoryArg::Plate),
            ("--time", self.time.time != TimeArg::Plate),
        ]
        .into_iter()
        .find(|&(_, given)| given)
        .map(|(flag, _)| flag)
    }

    /// The tokens asked for: a whole number ≥ 1.
    pub fn tokens(&self) -> Result<u64> {
        match self.tokens {
            None => Err(Error::invalid("--tokens", "missing", "a whole number ≥ 1")),
            Some(0) => Err(Error::invalid("--tokens", 0, "a whole number ≥ 1")),
            Some(d) => Ok(d),
        }
    }

    /// The memory model, with the step under `--memory detailed`.
    pub fn memory(&self, brief: &Brief) -> Result<MemoryModel> {
        let s = &self.step;
        let given = s.micro_batch.is_some()
            || s.recompute.is_some()
            || s.sequence_parallel.is_some()
            || s.schedule.is_some()
            || s.tp_comm_overlap.is_some()
            || s.global_batch_tokens.is_some()
            || s.precision.is_some();
        let Some(options) = self.detailed.options(given)? else {
            return Ok(MemoryModel::Plate);
        };
        let options = options.on_gpu(brief.mxfp8);
        let micro_batch = s.micro_batch.unwrap_or(1);
        // Without --global-batch-tokens, the rounds of b·s·DP nearest the brief's target or its
        // batch law's for the plan's tokens (a
        // layout the GPUs do not divide is refused later, by the layout's own rule).
        let global_batch_tokens = match s.global_batch_tokens {
            Some(tokens) => tokens,
            None => {
                let model_parallel = self
                    .tp()
                    .saturating_mul(self.cp())
                    .saturating_mul(self.pp())
                    .max(1);
                // The brief's target, or its batch law's for the shape.
                let target = if brief.batch_law.is_fixed() {
                    brief.batch_target()
                } else {
                    brief.batch_target_at(&self.shape()?, self.tokens()? as f64)
                };
                match brief.gpus / model_parallel {
                    0 => target.tokens,
                    dp => target.resolve(micro_batch, brief.seq_len, dp)?,
                }
            }
        };
        let sequence_parallel = s
            .sequence_parallel
            .map_or(self.tp() > 1, |o| o == OnOff::On);
        let step = Step {
            micro_batch,
            seq_len: brief.seq_len,
            recompute: s.recompute.map_or(Recompute::Full, RecomputeArg::mode),
            sequence_parallel,
            schedule: s
                .schedule
                .as_deref()
                .map_or(Ok(Schedule::OneFOneB), Schedule::parse)?,
            tp_comm_overlap: s
                .tp_comm_overlap
                .map_or(Step::stack_overlap(options.stack, sequence_parallel), |o| {
                    o == OnOff::On
                }),
            precision: s.precision.unwrap_or_default(),
            global_batch_tokens,
        };
        let options = options.for_precision(step.precision)?;
        Ok(MemoryModel::Detailed(Detailed { step, options }))
    }
}
