//! The design a launcher's file states ([`FromFile`]), shared by the readers.

use crate::cost::step::experts::Dispatcher;
use crate::cost::step::precision::Precision;
use crate::cost::step::recipe::{Bf16Layers, Fp8Recipe, MasterWeights, OptimizerStates};
use crate::cost::step::stack::{GradientPrecision, LossPrecision};
use crate::cost::step::stack::{Stack, StageSplit};
use crate::cost::step::Schedule;
use crate::cost::step::{MoeRecompute, Recompute};
use crate::error::{Error, Result};
use crate::model::layout::ZeroStage;
use crate::model::Biases;

/// The launcher a file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Megatron-LM's `pretrain_gpt.py` arguments.
    Megatron,
    /// A torchtitan job TOML.
    Torchtitan,
    /// A DeepSpeed `ds_config.json`.
    DeepSpeed,
}

impl Source {
    /// The name `export --format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Source::Megatron => "megatron",
            Source::Torchtitan => "torchtitan",
            Source::DeepSpeed => "deepspeed",
        }
    }
}

/// A model's dimensions as a launcher's arguments give them (Megatron-LM's).
#[derive(Debug, Clone, PartialEq)]
pub struct Dims {
    /// Decoder layers.
    pub layers: u64,
    /// Hidden size.
    pub hidden: u64,
    /// FFN hidden size.
    pub ffn: u64,
    /// Attention heads.
    pub heads: u64,
    /// Key/value heads (query groups).
    pub kv_heads: u64,
    /// The head dimension when stated (`--kv-channels`).
    pub head_dim: Option<u64>,
    /// The vocabulary when stated (`--vocab-size`, or the export's own comment).
    pub vocab: Option<u64>,
    /// Input and output embeddings tied.
    pub tied_embeddings: bool,
    /// Linear-layer biases.
    pub biases: Biases,
    /// RoPE base.
    pub rope_theta: f64,
    /// Llama 3.1's RoPE scaling on (`--use-rope-scaling`).
    pub rope_scaling: bool,
    /// RMSNorm ε.
    pub norm_eps: f64,
    /// Sliding attention window, tokens.
    pub sliding_window: Option<u64>,
    /// The layers under the window when not all (`--window-attn-skip-freq`).
    pub window_layers: Option<crate::model::LayerSet>,
    /// An RMSNorm on each head's query and key (`--qk-layernorm`; with latent attention, the
    /// latents' norms).
    pub qk_norm: bool,
    /// Multi-head latent attention (`--multi-latent-attention` and its ranks and widths).
    pub latent: Option<crate::model::Latent>,
    /// Multi-token-prediction depths (`--mtp-num-layers`), 0 for none.
    pub mtp: u32,
    /// A mixture of experts, when the arguments build one.
    pub experts: Option<FileExperts>,
    /// A hybrid Mamba-2 model's pattern and mixer (`--hybrid-override-pattern`, the
    /// `--mamba-*` options), when the arguments build one.
    pub hybrid: Option<crate::model::Hybrid>,
    /// The norm, the MLP's activation and the positions (`--normalization`, `--swiglu`,
    /// `--position-embedding-type`): Llama's, or GPT's (Megatron-LM's defaults).
    pub style: crate::model::Style,
}

/// A mixture of experts as Megatron-LM's arguments give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileExperts {
    /// Routed experts (`--num-experts`).
    pub routed: u64,
    /// Experts a token is routed to (`--moe-router-topk`).
    pub per_token: u64,
    /// Each expert's FFN width (`--moe-ffn-hidden-size`).
    pub ffn: u64,
    /// The shared experts' width, 0 for none (`--moe-shared-expert-intermediate-size`).
    pub shared_ffn: u64,
    /// Which layers are MoE, one flag a layer (`--moe-layer-freq`); every one when `None`.
    pub layers: Option<Vec<bool>>,
    /// Group-limited routing (`--moe-router-num-groups`, `--moe-router-group-topk`).
    pub groups: Option<crate::model::Groups>,
    /// A bias on the routing scores (`--moe-router-enable-expert-bias`).
    pub score_bias: bool,
}

/// What a file says of the model.
#[derive(Debug, Clone, PartialEq)]
pub enum FileModel {
    /// Nothing: the model comes from `--model-config` or the model flags.
    Unstated,
    /// A preset's name (torchtitan's flavors are Llama 3.1's).
    Preset(String),
    /// Dimensions.
    Dims(Box<Dims>),
}

/// A design as a launcher's file states it; `None` where the file does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct FromFile {
    /// The launcher.
    pub source: Source,
    /// The model.
    pub model: FileModel,
    /// Tokens trained: iterations × global batch × sequence length.
    pub tokens: Option<u64>,
    /// Tensor-parallel degree.
    pub tp: Option<u64>,
    /// Pipeline-parallel degree.
    pub pp: Option<u64>,
    /// Context-parallel degree.
    pub cp: Option<u64>,
    /// Data-parallel degree, where the file gives it.
    pub dp: Option<u64>,
    /// ZeRO stage.
    pub zero: Option<ZeroStage>,
    /// Hybrid-sharding replicas.
    pub replicate: Option<u64>,
    /// GPUs, where the file gives them.
    pub gpus: Option<u64>,
    /// Sequences a micro-batch.
    pub micro_batch: Option<u64>,
    /// Sequences a step over all replicas.
    pub global_batch: Option<u64>,
    /// Tokens a sequence.
    pub seq_len: Option<u64>,
    /// Recomputation.
    pub recompute: Option<Recompute>,
    /// Sequence parallelism.
    pub sequence_parallel: Option<bool>,
    /// Pipeline schedule.
    pub schedule: Option<Schedule>,
    /// TP communication overlapped with the GEMMs (Megatron-LM's `--tp-comm-overlap`).
    pub tp_comm_overlap: Option<bool>,
    /// torchtitan's interleaving as layers a stage (the embedding and head counting one each):
    /// the chunks follow once the model's layers are known ([`FromFile::resolve_interleaving`]).
    pub layers_per_stage: Option<u64>,
    /// Megatron-LM's `--pipeline-model-parallel-layout`: chunks a stage, and the string.
    pub pipeline_layout: Option<(u64, String)>,
    /// The stage split the file names (Megatron-LM's export says the plan's in a comment,
    /// `(--stages llama3)`, where it is not the stack's): of the splits that build the file's
    /// stages, the one to grade.
    pub stages: Option<StageSplit>,
    /// Precision of the matrix products.
    pub precision: Option<Precision>,
    /// The stack, where the file names it (torchtitan's).
    pub stack: Option<Stack>,
    /// Megatron-LM's kernel and overlap options, which say the stack.
    pub stack_options: Vec<String>,
    /// Expert-parallel degree.
    pub ep: Option<u64>,
    /// Expert tensor-parallel degree, where the file gives it (else the TP).
    pub etp: Option<u64>,
    /// A mixture of experts' all-to-alls overlapped with compute.
    pub ep_overlap: Option<bool>,
    /// What MoE layers recompute beyond the step's recomputation.
    pub moe_recompute: Option<MoeRecompute>,
    /// An MoE layer's pre-MLP norm recomputed.
    pub norm_recompute: Option<bool>,
    /// Latent attention's up-projections recomputed (Megatron-core's `mla_up_proj`).
    pub latent_recompute: Option<bool>,
    /// The experts' dispatcher.
    pub ep_dispatcher: Option<Dispatcher>,
    /// The FP8 recipe, where the file names one other than its precision's default.
    pub fp8_recipe: Option<Fp8Recipe>,
    /// The weights kept and gathered in FP8 (`--fp8-param-gather`).
    pub fp8_params: Option<bool>,
    /// The gradient buffers' precision, where the file says it.
    pub gradients: Option<GradientPrecision>,
    /// The loss's logits, where the file names Transformer Engine's cross-entropy
    /// (`--cross-entropy-fusion-impl te`: in place).
    pub loss: Option<LossPrecision>,
    /// Adam's moments' precision.
    pub optimizer_states: Option<OptimizerStates>,
    /// The optimizer, where the file names one other than Adam (Megatron-LM's `--optimizer
    /// muon`, `dist_muon`).
    pub optimizer: Option<crate::cost::step::recipe::Optimizer>,
    /// What the step captures in CUDA graphs (Megatron-LM's `--cuda-graph-impl` and
    /// `--cuda-graph-scope`).
    pub cuda_graphs: Option<crate::cost::step::graphs::CudaGraphs>,
    /// The optimizer's master weights.
    pub master_weights: Option<MasterWeights>,
    /// Layers at the start and end kept in BF16 under FP8.
    pub bf16_layers: Option<Bf16Layers>,
    /// Layers whose activations go to host memory (Megatron-LM's
    /// `--cpu-offloading-num-layers`).
    pub offload_activations: Option<u16>,
    /// The fraction of the optimizer offloaded to host memory (Megatron-LM's
    /// `--optimizer-cpu-offload --optimizer-offload-fraction F`).
    pub offload_optimizer: Option<f64>,
    /// What was read and left alone: options that do not change the plan.
    pub unused: Vec<String>,
    /// What was read into the design, as written (`--num-layers 32`).
    pub mapped: Vec<String>,
    /// The launcher's options other than its counts (where ranks meet, its container).
    pub launcher: Vec<String>,
    /// What the design cannot say or the reader could not read, one line each (with its line
    /// in the file): the caller refuses the file, or grades without them (`--lenient`).
    pub refused: Vec<String>,
    /// What the reader read as bash does but the user should know (a variable the file does
    /// not set, read as empty), one line each.
    pub notes: Vec<String>,
}

impl FromFile {
    /// An empty design from `source`.
    pub fn new(source: Source) -> FromFile {
        FromFile {
            source,
            model: FileModel::Unstated,
            tokens: None,
            tp: None,
            pp: None,
            cp: None,
            dp: None,
            zero: None,
            replicate: None,
            gpus: None,
            micro_batch: None,
            global_batch: None,
            seq_len: None,
            recompute: None,
            sequence_parallel: None,
            schedule: None,
            tp_comm_overlap: None,
            layers_per_stage: None,
            pipeline_layout: None,
            stages: None,
            precision: None,
            stack: None,
            stack_options: Vec::new(),
            ep: None,
            etp: None,
            ep_overlap: None,
            moe_recompute: None,
            norm_recompute: None,
            latent_recompute: None,
            ep_dispatcher: None,
            fp8_recipe: None,
            fp8_params: None,
            gradients: None,
            loss: None,
            optimizer_states: None,
            optimizer: None,
            cuda_graphs: None,
            master_weights: None,
            bf16_layers: None,
            offload_activations: None,
            offload_optimizer: None,
            unused: Vec::new(),
            mapped: Vec::new(),
            launcher: Vec::new(),
            refused: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// torchtitan's interleaving in chunks, once the model has `layers`: `(L + 2) / (PP · n)`
    /// chunks of `n` units, the embedding and the head counting one each.
    pub fn resolve_interleaving(&mut self, layers: u64) -> Result<()> {
        let Some(n) = self.layers_per_stage else {
            return Ok(());
        };
        let pp = self.pp.unwrap_or(1);
        let units = layers.saturating_add(2);
        let stages = pp.saturating_mul(n);
        if n == 0 || stages == 0 || units % stages != 0 || units / stages < 2 {
            return Err(Error::invalid(
                "parallelism.pipeline_parallel_layers_per_stage",
                n,
                format!(
                    "layers a stage that split the {layers} layers, the embedding and the head ({units}) into PP {pp} × V ≥ 2 stages"
                ),
            ));
        }
        if self.schedule.is_some_and(Schedule::is_v) {
            if units / stages != 2 || units % stages != 0 {
                return Err(Error::invalid(
                    "parallelism.pipeline_parallel_layers_per_stage",
                    n,
                    format!(
                        "layers a stage that split the {layers} layers, the embedding and the head ({units}) into two stages a GPU over PP {pp}: the V schedules hold exactly two"
                    ),
                ));
            }
            return Ok(());
        }
        let v = u32::try_from(units / stages).map_err(|_| {
            Error::invalid(
                "parallelism.pipeline_parallel_layers_per_stage",
                n,
                "at most 2^32 chunks",
            )
        })?;
        self.schedule = Some(Schedule::Interleaved(v));
        Ok(())
    }
}

/// A whole number ≥ 1 for `field`, from `text` (with Python's `_` between digits, as
/// argparse's `int` and TOML read `220_000_000`).
pub(crate) fn whole(field: &str, text: &str) -> Result<u64> {
    let t = text.trim();
    let grouped = t.contains('_')
        && !t.starts_with('_')
        && !t.ends_with('_')
        && !t.contains("__")
        && t.chars().all(|c| c.is_ascii_digit() || c == '_');
    let digits = if grouped {
        t.replace('_', "")
    } else {
        t.to_string()
    };
    match digits.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(Error::invalid(field, text, "a whole number ≥ 1")),
    }
}

/// `a × b`, or an error naming `field` when it overflows.
pub(crate) fn times(field: &str, a: u64, b: u64) -> Result<u64> {
    a.checked_mul(b)
        .ok_or_else(|| Error::invalid(field, format!("{a} × {b}"), "a product below 2^64"))
}

/// Every problem of a file at once, then what it mapped to the design and what it read and
/// left alone; `whole` says whether the design stands without the refused options
/// (`--lenient` grades it) or lacks what only they would have given.
pub fn refusal(mut lines: Vec<String>, file: &FromFile, whole: bool) -> Error {
    // Each group on its line: a value's line breaks and other controls written escaped.
    let plain = |item: &String| -> String {
        item.chars()
            .flat_map(|c| {
                if c.is_control() {
                    c.escape_debug().collect::<Vec<char>>()
                } else {
                    vec![c]
                }
            })
            .collect()
    };
    let group = |what: &str, items: &[String]| {
        if items.is_empty() {
            format!("{what}: none")
        } else {
            let items: Vec<String> = items.iter().map(plain).collect();
            format!("{what} ({}): {}", items.len(), items.join(", "))
        }
    };
    lines.push(group("mapped to the design", &file.mapped));
    lines.push(group(
        "read and not used (they do not change the plan)",
        &file.unused,
    ));
    lines.push(if whole {
        "--lenient grades the file without what is refused above, listed in a note".into()
    } else {
        "the design is not whole without them: --lenient cannot grade it".into()
    });
    Error::Problems(lines)
}

impl Dims {
    /// A Llama 3.1 decoder of these dimensions: no biases, untied embeddings, Llama 3.1's RoPE
    /// (θ 500,000, scaled) and ε, full attention, no experts.
    pub fn llama3(layers: u64, hidden: u64, ffn: u64, heads: u64, kv_heads: u64) -> Dims {
        let arch = crate::model::Architecture::default();
        Dims {
            layers,
            hidden,
            ffn,
            heads,
            kv_heads,
            head_dim: None,
            vocab: None,
            tied_embeddings: false,
            biases: Biases::default(),
            rope_theta: arch.rope_theta,
            rope_scaling: true,
            norm_eps: arch.norm_eps,
            sliding_window: None,
            window_layers: None,
            qk_norm: false,
            latent: None,
            mtp: 0,
            experts: None,
            hybrid: None,
            style: crate::model::Style::default(),
        }
    }

    /// The model these dimensions build, as Megatron-LM builds it, named by its dimensions
    /// ([`crate::model::ShapeSpec::dimension_name`]): for a file whose model the flags of
    /// `check` cannot state (experts, latent attention, a hybrid pattern, biases, query-key
    /// norms, multi-token prediction, a window on some layers).
    pub fn shape(&self, vocab: u64) -> Result<crate::model::Shape> {
        use crate::model::{Architecture, Attention, Experts, LayerSet, ShapeSpec};
        let narrow = |field: &str, n: u64| {
            u32::try_from(n)
                .map_err(|_| Error::invalid(field, n, "a whole number of at most 4294967295"))
        };
        let layers = narrow("--num-layers", self.layers)?;
        let experts = match &self.experts {
            None => None,
            Some(e) => Some(Experts {
                routed: narrow("--num-experts", e.routed)?,
                per_token: narrow("--moe-router-topk", e.per_token)?,
                ffn: e.ffn,
                shared_ffn: e.shared_ffn,
                shared_gate: false,
                biases: false,
                router_bias: false,
                score_bias: e.score_bias,
                groups: e.groups,
                layers: match &e.layers {
                    None => LayerSet::ALL,
                    Some(flags) => LayerSet::from_list(
                        flags
                            .iter()
                            .enumerate()
                            .filter(|(_, &moe)| moe)
                            .map(|(i, _)| i as u32)
                            .collect(),
                        layers,
                    ),
                },
            }),
        };
        let built = ShapeSpec {
            name: String::new(),
            layers,
            hidden: self.hidden,
            ffn: self.ffn,
            heads: narrow("--num-attention-heads", self.heads)?,
            kv_heads: narrow("--num-query-groups", self.kv_heads)?,
            vocab,
            head_dim: self.head_dim,
            tied_embeddings: self.tied_embeddings,
            biases: self.biases,
            architecture: Architecture {
                rope_theta: self.rope_theta,
                rope_scaling: if self.rope_scaling {
                    Architecture::llama31().rope_scaling
                } else {
                    None
                },
                norm_eps: self.norm_eps,
                sliding_window: self.sliding_window,
                window_layers: self.window_layers.clone(),
            },
            experts,
            // With latent attention `--qk-layernorm` builds the latents' norms, which the
            // latent shape has.
            attention: Attention {
                latent: self.latent,
                qk_norm: self.qk_norm && self.latent.is_none(),
                sinks: false,
            },
            mtp: self.mtp,
            hybrid: self.hybrid.clone(),
            style: self.style,
        }
        .build_named()?;
        // A name that reads back as another model (a hybrid's, latent attention's) says it
        // is the file's, so that no plan graded on it is graded again as that other model.
        let shape = built;
        let same = crate::model::preset(&shape.name).is_ok_and(|p| {
            p.same_dimensions(&shape) && p.params() == shape.params() && p.experts == shape.experts
        });
        if same {
            Ok(shape)
        } else {
            Ok(crate::model::Shape {
                name: format!("{}-from-file", shape.name),
                ..shape
            })
        }
    }
}
