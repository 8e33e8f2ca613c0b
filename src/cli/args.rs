//! The command line: clap's definitions, and their translation into the library's inputs.
//! Nothing outside this module sees clap.
//!
//! Each flag's doc comment is its `--help` text, where `[default: …]` is clap's convention, not
//! a link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::brief::gpu::Gpu;
use crate::brief::{
    self, Brief, BriefPatch, GpuName, LossLawPatch, ReliabilityPatch, SpendPatch, TopologyPatch,
};
use crate::cost::chip::stack_chip;
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::{Detailed, Options};
use crate::cost::step::experts::Dispatcher;
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Kernels;
use crate::cost::step::stack::Stack;
use crate::cost::step::stack::{GradientPrecision, LossPrecision, StageSplit};
use crate::cost::step::MoeRecompute;
use crate::cost::step::Recompute;
use crate::cost::step::{Schedule, Step};
use crate::cost::step_time::options::TimeOptions;
use crate::error::{Error, Result};
use crate::input::{self, hf};
use crate::laws::LossLawPreset;
use crate::model::family::{ExpertRanges, Family, Span};
use crate::model::layout::{Degrees, ExpertSpace, ZeroStage};
use crate::model::{
    self, Architecture, Attention, Biases, Shape, ShapeSpec, LLAMA3_HEAD_DIM, LLAMA3_KV_HEADS,
    LLAMA3_NORM_EPS, LLAMA3_ROPE_THETA, LLAMA3_VOCAB,
};
use crate::report::export::Format;
use crate::search::rank::{Distinct, Rank};
use crate::search::{
    MemorySpace, ParallelSpace, SearchOptions, TokenGrid, DEFAULT_MICRO_BATCHES, DEFAULT_RECOMPUTE,
};
use itertools::iproduct;

const EXAMPLES: &str = "\
Examples:
  trainplan search                                  answer the default brief (SPEC.md)
  trainplan search --models 70b,405b --rank days    two shapes, fastest plans first
  trainplan search --pareto front.json              also write the Pareto front
  trainplan search --json --gpus 1024 --max-days 60 another cluster, as JSON
  trainplan check --model 70b --tokens 15e12 --tp 1 --pp 1 --zero 0
  trainplan check --model 70b --tokens 4.96e12 --tp 8 --pp 1 --zero 3 --json
  trainplan search --model-config config.json --gpu h200 --plot loss.svg
  trainplan check --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1 --plot memory.svg
  trainplan check --model 70b --tokens 4.96e12 --tp 8 --zero 3 --sensitivity
  trainplan export --format megatron --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1
  trainplan brief --print --gpu b200 > brief.toml    start a brief file
  trainplan completions bash                        shell completions

Exit status: 0 yes (passes), 1 no (fails), 2 bad input (one line on stderr).";

/// Plan a large language-model training run: model size, tokens and parallel layout that fit
/// in memory, finish in time and reach a loss target.
#[derive(Debug, Parser)]
#[command(name = "trainplan", version, after_help = EXAMPLES, allow_negative_numbers = true)]
pub struct Cli {
    /// Print results only: no progress bar, no notes on stderr (errors still are).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value = "8080")]
    pub port: u16,
    /// Address to listen on. Only loopback by default: another address exposes the page and
    /// its API to the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
}

/// `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Grade one design: memory per GPU, days and loss, each PASS or FAIL, and what would fix it.
    /// Exit status 0 when every check passes, 1 when one fails, 2 for bad input.
    #[command(allow_negative_numbers = true)]
    Check(Box<CheckArgs>),
    /// Search every (shape, tokens, TP, PP, ZeRO): verdict per shape, ranked plans, Pareto
    /// front. Exit status 0 when some plan passes, 1 when none does, 2 for bad input.
    #[command(allow_negative_numbers = true)]
    Search(Box<SearchArgs>),
    /// Combine the partial results of `search --shard I/N` into the report one run gives.
    Merge(MergeArgs),
    /// Write a launcher configuration (Megatron-LM, DeepSpeed, torchtitan) for one plan: from
    /// a plan JSON (--plan) or from the same flags as check. Exit status 0 when the plan
    /// passes, 1 when it fails (the configuration is still written), 2 for bad input.
    #[command(allow_negative_numbers = true)]
    Export(Box<ExportArgs>),
    /// Fit the detailed model's calibrated parameters to measured runs (the format of
    /// data/published/runs.json), print each run's error before and after, and write the fit
    /// for --calibration. Exit status 0, or 2 for bad input.
    Calibrate(CalibrateArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    Completions(CompletionsArgs),
    /// Serve the workshop: a page where a design is graded as its controls move, driven by
    /// this engine, on http://127.0.0.1:8080/ (prints the address; Ctrl-C stops).
    Serve(ServeArgs),
    /// Show the effective brief (the default, a file, a GPU preset and flags, in that order);
    /// with --print write it whole as TOML or JSON to start a brief file from. Exit status 0,
    /// or 2 when it is not valid.
    #[command(allow_negative_numbers = true)]
    Brief(Box<BriefCommandArgs>),
}

/// `calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The measured runs, JSON {"runs": [...]} as in data/published/runs.json.
    #[arg(value_name = "RUNS.json")]
    pub runs: PathBuf,
    /// Fit only the runs graded under this stack [default: every run].
    #[arg(long, value_name = "NAME", value_parser = stack_parser())]
    pub stack: Option<Stack>,
    /// Write the fit here (atomically), for --calibration FILE.
    #[arg(long, short, value_name = "FILE.json")]
    pub output: Option<PathBuf>,
}

/// `brief`.
#[derive(Debug, Args)]
pub struct BriefCommandArgs {
    /// Write the whole brief, every field, instead of its summary.
    #[arg(long)]
    pub print: bool,
    /// Format of --print.
    #[arg(long, value_enum, default_value = "toml", requires = "print")]
    pub format: BriefFormat,
    #[command(flatten)]
    pub brief: BriefArgs,
}

/// Format of `brief --print`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BriefFormat {
    /// TOML, for `--brief FILE.toml`.
    Toml,
    /// JSON, for `--brief FILE.json`.
    Json,
}

/// The brief: a file, then flags over it. Every number of SPEC.md §1 can be changed.
#[derive(Debug, Args)]
#[command(next_help_heading = "Brief (defaults: SPEC.md §1)")]
pub struct BriefArgs {
    /// A brief as TOML (FILE.toml) or JSON, with the field names of the `brief` object in the
    /// JSON output, any subset of them, and optionally `gpu`; `trainplan brief --print` writes
    /// one to start from. Flags override it.
    #[arg(long, value_name = "FILE")]
    pub brief: Option<PathBuf>,
    /// A GPU preset laid over the brief: peak, memory (cap 90 %), GPUs per node and links;
    /// flags still override each [a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200, b200,
    /// mi300x].
    #[arg(long, value_name = "GPU", value_parser = parse_gpu)]
    pub gpu: Option<Gpu>,
    /// GPUs in the cluster [default: 2048].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub gpus: Option<u64>,
    /// Dense BF16 peak per GPU, TFLOP/s [default: 989].
    #[arg(long, value_name = "TFLOPS")]
    pub peak_tflops: Option<f64>,
    /// Dense FP8 peak per GPU, TFLOP/s, 0 for none; MFU stays against the BF16 peak
    /// [default: 1979].
    #[arg(long, value_name = "TFLOPS")]
    pub fp8_tflops: Option<f64>,
    /// Memory of one card, GB [default: 80].
    #[arg(long, value_name = "GB")]
    pub gpu_memory_gb: Option<f64>,
    /// Most memory a plan may use per GPU, GB [default: 72].
    #[arg(long, value_name = "GB")]
    pub memory_cap_gb: Option<f64>,
    /// GPUs per node; TP stays inside a node [default: 8].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub gpus_per_node: Option<u64>,
    /// Assumed model FLOPs utilisation, a fraction [default: 0.4].
    #[arg(long, value_name = "FRACTION")]
    pub mfu: Option<f64>,
    /// Longest the run may take, days [default: 30].
    #[arg(long, visible_alias = "days", value_name = "DAYS")]
    pub max_days: Option<f64>,
    /// Highest acceptable predicted loss [default: 1.955].
    #[arg(long, value_name = "LOSS")]
    pub loss_target: Option<f64>,
    /// Training sequence length, tokens [default: 8192].
    #[arg(long, value_name = "TOKENS", value_parser = parse_whole)]
    pub seq_len: Option<u64>,
    /// Tokens per optimizer step to aim at when no --global-batch-tokens fixes it: each layout
    /// takes the whole rounds of b·s·DP-token micro-batches nearest it [default: 16777216].
    #[arg(long, value_name = "TOKENS", value_parser = parse_whole)]
    pub batch_target: Option<u64>,
    /// How far from --batch-target a layout's batch may be, a fraction [default: 0.25].
    #[arg(long, value_name = "FRACTION")]
    pub batch_tolerance: Option<f64>,
    /// Scaling-law constants to start from [default: besiroglu].
    #[arg(long, value_enum, value_name = "PRESET")]
    pub loss_law: Option<LawArg>,
    /// Distinct tokens the data holds: a run of more repeats them and is graded by its
    /// effective tokens (needs a law that values repeats: --loss-law muennighoff)
    /// [default: unlimited].
    #[arg(long, value_name = "TOKENS", value_parser = parse_whole)]
    pub unique_tokens: Option<u64>,
    /// Loss law constant E.
    #[arg(long, value_name = "E")]
    pub loss_e: Option<f64>,
    /// Loss law constant A.
    #[arg(long, value_name = "A")]
    pub loss_a: Option<f64>,
    /// Loss law constant B.
    #[arg(long, value_name = "B")]
    pub loss_b: Option<f64>,
    /// Loss law exponent α.
    #[arg(long, value_name = "ALPHA")]
    pub loss_alpha: Option<f64>,
    /// Loss law exponent β.
    #[arg(long, value_name = "BETA")]
    pub loss_beta: Option<f64>,
    /// All-reduce bus bandwidth inside a node, GB/s [default: 370, H100 NVLink].
    #[arg(long, value_name = "GB/s")]
    pub intra_node_gbps: Option<f64>,
    /// Bus bandwidth between nodes per GPU, GB/s [default: 46, one 400 Gb/s NIC per GPU].
    #[arg(long, value_name = "GB/s")]
    pub inter_node_gbps: Option<f64>,
    /// GPU memory bandwidth, GB/s [default: 3350, H100 SXM].
    #[arg(long, value_name = "GB/s")]
    pub hbm_gbps: Option<f64>,
    /// Unexpected interruptions per GPU-hour [default: Llama 3's, 419 in 54 days on 16,384].
    #[arg(long, value_name = "RATE")]
    pub failures_per_gpu_hour: Option<f64>,
    /// Minutes from a failure to training again [default: 10].
    #[arg(long, value_name = "MINUTES")]
    pub restart_minutes: Option<f64>,
    /// Checkpoint write bandwidth per GPU, GB/s [default: 0.122, Llama 3's 2 TB/s for 16,384].
    #[arg(long, value_name = "GB/s")]
    pub storage_gbps_per_gpu: Option<f64>,
    #[command(flatten)]
    pub spend: SpendArgs,
}

/// What a run costs: the brief's price, power, PUE, carbon intensity and cost limit.
#[derive(Debug, Args)]
#[command(next_help_heading = "Cost and energy (all optional)")]
pub struct SpendArgs {
    /// Price of one GPU-hour, in your currency: every plan then reports its cost [no default].
    #[arg(long, value_name = "PRICE")]
    pub price_per_gpu_hour: Option<f64>,
    /// The most the run may cost: a fourth check, and a bound on the tokens (needs
    /// --price-per-gpu-hour) [no default].
    #[arg(long, value_name = "COST")]
    pub max_cost: Option<f64>,
    /// One GPU's power under load, W: every plan then reports its energy [default: the --gpu
    /// preset's board power; none for the default brief].
    #[arg(long, value_name = "W")]
    pub gpu_power_w: Option<f64>,
    /// The datacenter's power usage effectiveness, ≥ 1 [default: 1, the GPUs' own energy].
    #[arg(long, value_name = "PUE")]
    pub pue: Option<f64>,
    /// The grid's carbon intensity, g CO2e per kWh: every plan then reports its emissions
    /// [no default].
    #[arg(long, value_name = "G/KWH")]
    pub carbon_g_per_kwh: Option<f64>,
}

/// Published scaling-law constants.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LawArg {
    /// Besiroglu et al. 2024, rounded: E 1.82, A 482, B 2085, α 0.348, β 0.366.
    Besiroglu,
    /// Besiroglu et al. 2024, unrounded: E 1.8172, A 482.01, B 2085.43, α 0.3478, β 0.3658.
    BesirogluUnrounded,
    /// Hoffmann et al. 2022, Approach 3: E 1.69, A 406.4, B 410.7, α 0.34, β 0.28.
    Hoffmann,
    /// Muennighoff et al. 2023, data-constrained: E 1.869, A 520.8, B 1487.7, α β 0.3527;
    /// repeated tokens decay with R_D* 15.39, excess parameters with R_N* 5.31.
    Muennighoff,
    /// Ludziejewski et al. 2025, the joint law for mixtures of experts (dense models at one
    /// expert): E 1.3637, A 35.91, B 35.98, α 0.1889, β 0.1775, δ −0.2285, γ 0.0098, ω 0.5529,
    /// ζ −0.0259, E_start 2.0732, E_max 290.45 (losses in FineWeb-Edu nats, GPT-2 tokenizer).
    Ludziejewski,
}

impl LawArg {
    fn preset(self) -> LossLawPreset {
        match self {
            LawArg::Besiroglu => LossLawPreset::Besiroglu,
            LawArg::BesirogluUnrounded => LossLawPreset::BesirogluUnrounded,
            LawArg::Hoffmann => LossLawPreset::Hoffmann,
            LawArg::Muennighoff => LossLawPreset::Muennighoff,
            LawArg::Ludziejewski => LossLawPreset::Ludziejewski,
        }
    }
}

impl BriefArgs {
    /// The brief: the default, then the file, then the law preset, then each flag; validated.
    pub fn resolve(&self) -> Result<Brief> {
        let mut brief = Brief::default();
        if let Some(path) = &self.brief {
            brief = input::brief_file(brief, path)?;
        }
        if let Some(law) = self.loss_law {
            brief.loss_law = law.preset().law();
        }
        let flags = BriefPatch {
            gpu: self.gpu.map(GpuName),
            gpus: self.gpus,
            peak_tflops: self.peak_tflops,
            fp8_tflops: self.fp8_tflops,
            mxfp8: None,
            gpu_memory_gb: self.gpu_memory_gb,
            memory_cap_gb: self.memory_cap_gb,
            gpus_per_node: self.gpus_per_node,
            mfu: self.mfu,
            max_days: self.max_days,
            loss_target: self.loss_target,
            seq_len: self.seq_len,
            batch_target_tokens: self.batch_target,
            batch_tolerance: self.batch_tolerance,
            unique_tokens: self.unique_tokens,
            loss_law: LossLawPatch {
                e: self.loss_e,
                a: self.loss_a,
                b: self.loss_b,
                alpha: self.loss_alpha,
                beta: self.loss_beta,
                repetition: None,
                experts: None,
            },
            topology: TopologyPatch {
                intra_node_gbps: self.intra_node_gbps,
                inter_node_gbps: self.inter_node_gbps,
                hbm_gbps: self.hbm_gbps,
                ..TopologyPatch::default()
            },
            reliability: ReliabilityPatch {
                failures_per_gpu_hour: self.failures_per_gpu_hour,
                restart_minutes: self.restart_minutes,
                storage_gbps_per_gpu: self.storage_gbps_per_gpu,
                ..ReliabilityPatch::default()
            },
            max_cost: self.spend.max_cost,
            spend: SpendPatch {
                price_per_gpu_hour: self.spend.price_per_gpu_hour,
                gpu_power_w: self.spend.gpu_power_w,
                pue: self.spend.pue,
                carbon_g_per_kwh: self.spend.carbon_g_per_kwh,
            },
            family: None,
        };
        let brief = flags.apply(brief);
        brief.validate()?;
        Ok(brief)
    }
}

/// `check`: one design, graded.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print the plan object as JSON instead of the report (same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Output format: the report, the plan as JSON, a one-row CSV or Markdown table, or a
    /// launcher configuration for the plan.
    #[arg(long, value_enum, default_value = "text")]
    pub format: CheckFormat,
    /// Also draw the plan's memory per GPU by component against the cap, as SVG (written
    /// atomically); with --sensitivity, a tornado chart of days instead.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Also grade the design with each uncertain input at the low and the high end of its
    /// range, the others as given: the plate's MFU (0.75× to 1.25×), or the detailed model's
    /// calibration (0.9× to 1.1×), TP, PP and DP overlaps (0 to 1), failure rate (0.5× to 2×)
    /// and restart minutes (5 to 30); a table of days, MFU and verdict at each end (text and
    /// JSON).
    #[arg(long)]
    pub sensitivity: bool,
    /// Grade a launcher's configuration: a Megatron-LM argument list (the shell array `export`
    /// writes, a script or a file of arguments), a torchtitan job TOML, or a DeepSpeed JSON
    /// with the model (--model-config) and the layout (--tp, --pp), which its JSON lacks.
    /// Flags the file also sets must agree with it; what it cannot map is named, not guessed
    /// (docs/configs.md).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    #[command(flatten)]
    pub design: DesignArgs,
}

impl CheckArgs {
    /// Refuses --sensitivity with a format that has no place for its table.
    pub fn check_sensitivity(&self) -> Result<()> {
        let table = self.json || matches!(self.format, CheckFormat::Text | CheckFormat::Json);
        if self.sensitivity && !table {
            return Err(sensitivity_format(self.format.to_possible_value()));
        }
        Ok(())
    }
}

/// The error of `--sensitivity` with a format (`value`) that cannot carry its table.
fn sensitivity_format(value: Option<clap::builder::PossibleValue>) -> Error {
    let name = value.map_or_else(String::new, |v| v.get_name().to_string());
    Error::invalid(
        "--sensitivity",
        format!("with --format {name}"),
        "the text report or --json, which carry its table",
    )
}

/// `check --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// The report, for people.
    Text,
    /// The plan object (the JSON contract).
    Json,
    /// One CSV row under a header.
    Csv,
    /// A one-row Markdown table.
    Markdown,
    /// Megatron-LM pretrain_gpt.py arguments.
    Megatron,
    /// A DeepSpeed ds_config.json.
    Deepspeed,
    /// A torchtitan job TOML.
    Torchtitan,
}

impl CheckFormat {
    /// The library's format.
    pub fn format(self) -> Format {
        match self {
            CheckFormat::Text => Format::Text,
            CheckFormat::Json => Format::Json,
            CheckFormat::Csv => Format::Csv,
            CheckFormat::Markdown => Format::Markdown,
            CheckFormat::Megatron => Format::Megatron,
            CheckFormat::Deepspeed => Format::DeepSpeed,
            CheckFormat::Torchtitan => Format::Torchtitan,
        }
    }
}

/// `export`: a launcher configuration for one plan.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The launcher.
    #[arg(long, value_enum)]
    pub format: LauncherFormat,
    /// A plan as JSON: `check --json` output, or a search's JSON or Pareto file (with --index).
    /// Without it, the design flags below give the plan, as for `check`.
    #[arg(long, value_name = "FILE.json")]
    pub plan: Option<PathBuf>,
    /// Which plan of a search's `plans` (or a Pareto file's `front`), from 1.
    #[arg(long, value_name = "N", default_value = "1", value_parser = parse_whole, requires = "plan")]
    pub index: u64,
    #[command(flatten)]
    pub design: DesignArgs,
}

/// `export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LauncherFormat {
    /// Megatron-LM pretrain_gpt.py arguments, as a bash array.
    Megatron,
    /// A DeepSpeed ds_config.json.
    Deepspeed,
    /// A torchtitan job TOML.
    Torchtitan,
}

impl LauncherFormat {
    /// The library's format.
    pub fn format(self) -> Format {
        match self {
            LauncherFormat::Megatron => Format::Megatron,
            LauncherFormat::Deepspeed => Format::DeepSpeed,
            LauncherFormat::Torchtitan => Format::Torchtitan,
        }
    }
}

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
    /// Vocabulary of an ad-hoc shape [default: 128256].
    #[arg(long, value_name = "V", value_parser = parse_whole, requires = "layers")]
    pub vocab: Option<u64>,
    /// The ad-hoc shape's output head shares the input embedding.
    #[arg(long, requires = "layers")]
    pub tied_embeddings: bool,
    /// RoPE base θ of an ad-hoc shape, which the launchers pass on [default: 500000, Llama 3's].
    #[arg(long, value_name = "THETA", requires = "layers")]
    pub rope_theta: Option<f64>,
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
    fn shape(&self, layers: u64, hidden: u64, ffn: u64) -> Result<Shape> {
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
                // Llama 3.1's scaling, as every shape not read from a config has.
                rope_scaling: Architecture::default().rope_scaling,
                norm_eps: self.norm_eps.unwrap_or(LLAMA3_NORM_EPS),
                sliding_window: self.sliding_window,
                window_layers: None,
            },
            experts: None,
            attention: Attention::default(),
        }
        .build_named()
        .map_err(|e| e.renamed(|field| format!("--{}", field.replace('_', "-"))))
    }
}

impl ModelArgs {
    /// The shape asked for.
    pub fn shape(&self) -> Result<Shape> {
        match (&self.model, &self.model_config, self.layers) {
            (Some(name), None, None) => model::preset(name),
            (None, Some(path), None) => hf::read_planned(path),
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
        let micro_batch = s.micro_batch.unwrap_or(1);
        // Without --global-batch-tokens, the rounds of b·s·DP nearest the brief's target (a
        // layout the GPUs do not divide is refused later, by the layout's own rule).
        let global_batch_tokens = match s.global_batch_tokens {
            Some(tokens) => tokens,
            None => {
                let model_parallel = self
                    .tp()
                    .saturating_mul(self.cp())
                    .saturating_mul(self.pp())
                    .max(1);
                match brief.gpus / model_parallel {
                    0 => brief.batch_target_tokens,
                    dp => brief
                        .batch_target()
                        .resolve(micro_batch, brief.seq_len, dp)?,
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
        Ok(MemoryModel::Detailed(Detailed { step, options }))
    }
}

/// `--time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimeArg {
    /// Days by 6ND at the brief's assumed MFU (SPEC.md's plate).
    Plate,
    /// Days from a step's compute, communication, bubble and optimizer, with failures.
    Detailed,
}

/// The time model's settings, shared by `check` and `search`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Time model")]
pub struct TimeArgs {
    /// Time model: the plate (default) or a detailed step that derives the MFU. The detailed
    /// model needs --memory detailed, which defines the step.
    #[arg(long, value_enum, default_value = "plate")]
    pub time: TimeArg,
    /// Calibrated parameters from `trainplan calibrate` (and, for --stack eager, an efficiency
    /// table {"points": [{"width": h/TP, "efficiency": f}, …]}, the form --efficiency read)
    /// [default: the fit to data/published].
    #[arg(long, value_name = "FILE.json")]
    pub calibration: Option<PathBuf>,
    /// The eager stack's efficiency table alone (superseded by --calibration, which reads the
    /// same file) [default: fitted to data/calibration].
    #[arg(long, value_name = "FILE.json", conflicts_with = "calibration")]
    pub efficiency: Option<PathBuf>,
    /// Fraction of TP communication hidden behind the layer's GEMMs, as far as they last
    /// [default: the stack's].
    #[arg(long, value_name = "FRACTION")]
    pub tp_overlap: Option<f64>,
    /// Fraction of pipeline sends hidden behind compute [default: the stack's].
    #[arg(long, value_name = "FRACTION")]
    pub pp_overlap: Option<f64>,
    /// Fraction of the last backward that DP communication overlaps [default: the stack's].
    #[arg(long, value_name = "FRACTION")]
    pub dp_overlap: Option<f64>,
}

impl TimeArgs {
    /// The files the time model reads.
    pub fn inputs(&self) -> impl Iterator<Item = &Path> {
        self.calibration
            .as_deref()
            .into_iter()
            .chain(self.efficiency.as_deref())
    }

    /// The time model for `stack`.
    pub fn model(&self, stack: Stack) -> Result<TimeModel> {
        let given = self.efficiency.is_some()
            || self.calibration.is_some()
            || self.tp_overlap.is_some()
            || self.pp_overlap.is_some()
            || self.dp_overlap.is_some();
        if self.time == TimeArg::Plate {
            if given {
                return Err(Error::invalid(
                    "--time",
                    "plate",
                    "--time detailed, which the calibration, efficiency and overlap flags need",
                ));
            }
            return Ok(TimeModel::Plate);
        }
        let mut d = TimeOptions::for_stack(stack);
        if let Some(path) = &self.calibration {
            let file = input::calibration(path)?;
            // The fit's parameters and, for the eager stack, its curve.
            if let Some(c) = file.calibration {
                d.calibration = c;
            }
            if let Some(curve) = file.efficiency {
                d.efficiency = curve;
            }
        }
        let options = TimeOptions {
            calibration: d.calibration,
            efficiency: match &self.efficiency {
                Some(path) => input::efficiency_curve(path)?,
                None => d.efficiency,
            },
            tp_overlap: self.tp_overlap.unwrap_or(d.tp_overlap),
            pp_overlap: self.pp_overlap.unwrap_or(d.pp_overlap),
            dp_overlap: self.dp_overlap.unwrap_or(d.dp_overlap),
        };
        options.validate()?;
        Ok(TimeModel::Detailed(options))
    }
}

/// A family of Llama-like shapes to search beside the presets, or one ad-hoc shape.
#[derive(Debug, Args)]
#[command(
    next_help_heading = "Shape family (--layers, --hidden and --ffn-ratio as ranges together) or one ad-hoc shape (--layers, --hidden and --ffn as numbers)"
)]
pub struct FamilyArgs {
    /// Layer counts, start..end:step (for example 40..160:4), or one count with --ffn.
    #[arg(long, value_name = "RANGE")]
    pub layers: Option<String>,
    /// Hidden sizes, multiples of the head dimension (for example 6144..20480:512), or one
    /// size with --ffn.
    #[arg(long, value_name = "RANGE")]
    pub hidden: Option<String>,
    /// FFN width over hidden size (for example 3.0..4.0:0.25).
    #[arg(long, value_name = "RANGE", conflicts_with = "ffn")]
    pub ffn_ratio: Option<String>,
    /// The FFN width of one ad-hoc shape (with --layers and --hidden as single numbers).
    #[arg(long, value_name = "F", value_parser = parse_whole)]
    pub ffn: Option<u64>,
    /// Attention heads of the ad-hoc shape [default: hidden / head dimension].
    #[arg(long, value_name = "N", value_parser = parse_whole, requires = "ffn")]
    pub heads: Option<u64>,
    /// Head dimension [default: 128, Llama 3's].
    #[arg(long, value_name = "D", value_parser = parse_whole)]
    pub head_dim: Option<u64>,
    /// KV heads [default: 8, Llama 3's; an ad-hoc shape whose heads 8 does not divide gets one
    /// per head].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub kv_heads: Option<u64>,
    /// Vocabulary (Llama 3: 128,256).
    #[arg(long, value_name = "V", default_value = "128256", value_parser = parse_whole)]
    pub vocab: u64,
    /// The FFN width is rounded to a multiple of this.
    #[arg(long, value_name = "N", default_value = "256", value_parser = parse_whole)]
    pub ffn_multiple: u64,
    /// The ad-hoc shape's output head shares the input embedding.
    #[arg(long, requires = "ffn")]
    pub tied_embeddings: bool,
    /// Each family shape also as mixtures of experts of these expansions E, the experts'
    /// capacity over one dense MLP's (1 is the dense shape), for example 1..16 (Krajewski et
    /// al. 2024's terms) [default: dense only].
    #[arg(long, value_name = "RANGE", requires = "ffn_ratio")]
    pub experts: Option<String>,
    /// Dense-width experts a token goes to, k ≤ E [default: 1].
    #[arg(long, value_name = "RANGE", requires = "experts")]
    pub top_k: Option<String>,
    /// Granularities G: each expert cut into G of width f/G, E·G routed and k·G a token
    /// [default: 1].
    #[arg(long, value_name = "RANGE", requires = "experts")]
    pub granularity: Option<String>,
}

impl FamilyArgs {
    /// The ad-hoc shape, if --ffn gives one.
    pub fn adhoc(&self) -> Result<Option<Shape>> {
        let Some(ffn) = self.ffn else {
            return Ok(None);
        };
        let single = |flag: &str, text: &Option<String>| -> Result<u64> {
            let text = text.as_deref().ok_or_else(|| {
                Error::invalid(flag, "missing", "--layers and --hidden with --ffn")
            })?;
            parse_whole(text).map_err(|why| Error::invalid(flag, text, why))
        };
        let attention = AttentionArgs {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            vocab: Some(self.vocab),
            tied_embeddings: self.tied_embeddings,
            rope_theta: None,
            norm_eps: None,
            sliding_window: None,
        };
        attention
            .shape(
                single("--layers", &self.layers)?,
                single("--hidden", &self.hidden)?,
                ffn,
            )
            .map(Some)
    }

    /// The family, if its ranges are given.
    pub fn family(&self) -> Result<Option<Family>> {
        if self.ffn.is_some() {
            return Ok(None);
        }
        let kv_heads = self.kv_heads.unwrap_or(u64::from(LLAMA3_KV_HEADS));
        match (&self.layers, &self.hidden, &self.ffn_ratio) {
            (None, None, None) => Ok(None),
            (Some(l), Some(h), Some(r)) => Ok(Some(Family {
                layers: Span::parse("--layers", l)?,
                hidden: Span::parse("--hidden", h)?,
                ffn_ratio: Span::parse("--ffn-ratio", r)?,
                head_dim: self.head_dim.unwrap_or(LLAMA3_HEAD_DIM),
                kv_heads: u32::try_from(kv_heads)
                    .map_err(|_| Error::invalid("--kv-heads", kv_heads, "at most 4294967295"))?,
                vocab: self.vocab,
                ffn_multiple: self.ffn_multiple,
                experts: ExpertRanges::parse(
                    "--",
                    self.experts.as_deref(),
                    self.top_k.as_deref(),
                    self.granularity.as_deref(),
                )?,
            })),
            _ => Err(Error::invalid(
                "shape family",
                "a partial range",
                "--layers, --hidden and --ffn-ratio together (or --ffn for one shape)",
            )),
        }
    }
}

/// `--memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MemoryArg {
    /// SPEC.md's plate model (16 bytes per parameter, full recomputation, one sequence).
    Plate,
    /// A real training step, stage by stage, with the knobs below.
    Detailed,
}

/// Recomputation modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecomputeArg {
    /// Keep every activation.
    None,
    /// Recompute the attention core.
    Selective,
    /// Keep each layer's input only.
    Full,
    /// torchtitan's op-level policy: keep attention's and every other matrix product's output.
    SelectiveOp,
    /// torchtitan's layer-level policy: every other layer fully recomputed.
    SelectiveLayer,
    /// MaxText's save_qkv_proj policy: keep the Q, K, V projections, recompute the rest.
    SaveQkv,
}

impl RecomputeArg {
    fn mode(self) -> Recompute {
        match self {
            RecomputeArg::None => Recompute::None,
            RecomputeArg::Selective => Recompute::Selective,
            RecomputeArg::Full => Recompute::Full,
            RecomputeArg::SelectiveOp => Recompute::SelectiveOp,
            RecomputeArg::SelectiveLayer => Recompute::SelectiveLayer,
            RecomputeArg::SaveQkv => Recompute::SaveQkv,
        }
    }
}

/// `--stack`: the names of [`Stack::ALL`], listed in `--help` and in clap's error.
fn stack_parser() -> impl clap::builder::TypedValueParser<Value = Stack> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Stack::ALL.map(Stack::name)).map(|name| {
        name.parse::<Stack>()
            .expect("a possible value is a stack's name")
    })
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
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
    /// How a mixture of experts's tokens cross nodes: alltoall, one message a route
    /// (Megatron-core's default), or deepep, one a token and node, forwarded over NVLink
    /// (--moe-token-dispatcher-type flex --moe-enable-deepep) [detailed; default: alltoall].
    #[arg(long, value_enum)]
    pub ep_dispatcher: Option<DispatcherArg>,
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
            || self.ep_dispatcher.is_some();
        if self.memory == MemoryArg::Plate {
            if given {
                return Err(Error::invalid(
                    "--memory",
                    "plate",
                    "--memory detailed, which the training-step and memory-model flags need",
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
            ep_dispatcher: match self.ep_dispatcher {
                Some(DispatcherArg::Alltoall) => Dispatcher::AllToAll,
                Some(DispatcherArg::Deepep) => Dispatcher::DeepEp,
                None => d.ep_dispatcher,
            },
        };
        options.validate()?;
        Ok(Some(options))
    }
}

/// The training step of one design (`check --memory detailed`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Training step (--memory detailed)")]
pub struct CheckStepArgs {
    /// Sequences per micro-batch [default: 1]. The sequence length is the brief's --seq-len.
    #[arg(long, value_name = "B", value_parser = parse_whole)]
    pub micro_batch: Option<u64>,
    /// Activation recomputation [default: full].
    #[arg(long, value_enum)]
    pub recompute: Option<RecomputeArg>,
    /// Sequence parallelism with TP [default: on when tp > 1].
    #[arg(long, value_enum)]
    pub sequence_parallel: Option<OnOff>,
    /// Pipeline schedule: 1f1b or interleaved:V [default: 1f1b].
    #[arg(long, value_name = "SCHEDULE")]
    pub schedule: Option<String>,
    /// TP communication overlapped with the GEMMs (Megatron-core's --tp-comm-overlap; needs
    /// sequence parallelism and a stack that has it) [default: on where the stack has it and
    /// sequence parallelism is on].
    #[arg(long, value_enum)]
    pub tp_comm_overlap: Option<OnOff>,
    /// Tokens per optimizer step across all replicas [default: the whole rounds of b·s·DP
    /// nearest --batch-target, within --batch-tolerance].
    #[arg(long, value_name = "TOKENS", value_parser = parse_whole)]
    pub global_batch_tokens: Option<u64>,
    /// Precision of the matrix products: bf16, fp8, or mxfp8 (Blackwell) [default: bf16].
    #[arg(long, value_name = "PRECISION", value_parser = parse_precision)]
    pub precision: Option<Precision>,
}

/// The training steps a search tries (`search --memory detailed`): every combination.
#[derive(Debug, Args)]
#[command(next_help_heading = "Training steps (--memory detailed)")]
pub struct SearchStepArgs {
    /// Micro-batch sizes [default: 1, 2, 4 and, layout by layout, every size that divides
    /// its local batch at the --batch-target].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub micro_batches: Vec<u64>,
    /// Sequence lengths [default: the brief's --seq-len].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub seq_lens: Vec<u64>,
    /// Recomputation modes [default: none,selective,full].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub recompute: Vec<RecomputeArg>,
    /// Sequence parallelism settings [default: on,off; on needs tp > 1].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub sequence_parallel: Vec<OnOff>,
    /// Pipeline schedules: 1f1b, interleaved:V, or interleaved:all for every depth from 2 to
    /// the most every stage of a layout allows (a chunk a layer, and one more for the
    /// embedding or the head on the first and last stage) where the micro-batches are a
    /// multiple of PP
    /// [default: 1f1b,interleaved:all, where the stack interleaves].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub schedules: Vec<String>,
    /// TP-communication overlap settings (on needs sequence parallelism and a stack that has
    /// it; with off listed too, on goes only with sequence parallelism) [default: on,off where
    /// the stack has it, else off].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub tp_comm_overlap: Vec<OnOff>,
    /// Global batches, tokens, fixed for every layout (one a layout's micro-batches do not
    /// divide is left out, and counted in its verdict) [default: for each layout, the whole
    /// rounds of b·s·DP nearest --batch-target, within --batch-tolerance].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub global_batch_tokens: Vec<u64>,
    /// Precisions of the matrix products, each where the stack and the GPU have it
    /// [default: bf16].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_precision)]
    pub precisions: Vec<Precision>,
    /// Context-parallel degrees [default: 1 and each power of two leaving every rank at least
    /// 4,096 tokens of the sequence].
    #[arg(long = "cp", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub cps: Vec<u64>,
    /// Hybrid-sharding replica counts (each divides DP; above 1 with ZeRO 1 to 3) [default: 1].
    #[arg(long = "replicate", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub replicates: Vec<u64>,
    /// Expert-parallel degrees for the mixtures of experts (each divides the routed experts;
    /// dense models take 1) [default: every divisor of the routed experts].
    #[arg(long = "ep", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub eps: Vec<u64>,
    /// Expert tensor-parallel degrees for the mixtures of experts (each divides a node and the
    /// experts' width; dense models take their TP) [default: 1 and the layout's TP].
    #[arg(long = "etp", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub etps: Vec<u64>,
}

/// Whether a `--schedules` entry asks for every interleaving depth.
fn is_interleaved_all(text: &str) -> bool {
    text.trim().eq_ignore_ascii_case("interleaved:all")
}

impl SearchStepArgs {
    /// Whether every interleaving depth a layout allows is searched: by default (for a stack
    /// that interleaves), or when `--schedules` lists `interleaved:all`.
    fn interleave_all(&self) -> bool {
        self.schedules.is_empty() || self.schedules.iter().any(|s| is_interleaved_all(s))
    }

    fn given(&self) -> bool {
        !(self.micro_batches.is_empty()
            && self.seq_lens.is_empty()
            && self.recompute.is_empty()
            && self.sequence_parallel.is_empty()
            && self.schedules.is_empty()
            && self.tp_comm_overlap.is_empty()
            && self.global_batch_tokens.is_empty()
            && self.precisions.is_empty()
            && self.cps.is_empty()
            && self.replicates.is_empty()
            && self.eps.is_empty()
            && self.etps.is_empty())
    }

    /// The CP degrees and replica counts listed, each checked to be a whole number ≥ 1.
    fn parallel(&self) -> Result<ParallelSpace> {
        for (flag, list) in [
            ("--cp", &self.cps),
            ("--replicate", &self.replicates),
            ("--ep", &self.eps),
            ("--etp", &self.etps),
        ] {
            if let Some(&bad) = list.iter().find(|&&x| x == 0 || x > brief::limits::GPUS) {
                return Err(Error::invalid(
                    flag,
                    bad,
                    format!("whole numbers from 1 to {}", brief::limits::GPUS),
                ));
            }
        }
        let sorted = |list: &Vec<u64>| {
            let mut list = list.clone();
            list.sort_unstable();
            list.dedup();
            list
        };
        Ok(ParallelSpace {
            cps: sorted(&self.cps),
            replicates: sorted(&self.replicates),
            experts: ExpertSpace {
                eps: sorted(&self.eps),
                etps: sorted(&self.etps),
            },
        })
    }

    /// Every combination of the lists, defaults filled in, sorted and without repeats (TP
    /// overlap on without sequence parallelism left out where off is listed too); `stack`
    /// decides whether TP communication can overlap.
    fn steps(&self, brief: &Brief, stack: Stack) -> Result<Vec<Step>> {
        fn or<T: Clone>(given: &[T], default: &[T]) -> Vec<T> {
            if given.is_empty() {
                default.to_vec()
            } else {
                given.to_vec()
            }
        }
        let schedules = if self.schedules.is_empty() {
            vec![Schedule::OneFOneB]
        } else {
            let listed: Vec<&String> = self
                .schedules
                .iter()
                .filter(|s| !is_interleaved_all(s))
                .collect();
            if listed.is_empty() {
                vec![Schedule::OneFOneB]
            } else {
                listed
                    .into_iter()
                    .map(|s| Schedule::parse(s))
                    .collect::<Result<_>>()?
            }
        };
        for (flag, list, max) in [
            (
                "--micro-batches",
                &self.micro_batches,
                brief::limits::SEQ_LEN,
            ),
            ("--seq-lens", &self.seq_lens, brief::limits::SEQ_LEN),
            ("--global-batch-tokens", &self.global_batch_tokens, u64::MAX),
        ] {
            if let Some(&bad) = list.iter().find(|&&x| x == 0 || x > max) {
                return Err(Error::invalid(
                    flag,
                    bad,
                    format!("whole numbers from 1 to {max}"),
                ));
            }
        }
        let recompute: Vec<Recompute> = self.recompute.iter().map(|r| r.mode()).collect();
        let overlaps = if self.tp_comm_overlap.is_empty() {
            if stack.overlaps_tp() {
                vec![false, true]
            } else {
                vec![false]
            }
        } else {
            if self.tp_comm_overlap.contains(&OnOff::On) {
                stack.tp_overlap_allowed()?;
            }
            self.tp_comm_overlap
                .iter()
                .map(|&o| o == OnOff::On)
                .collect()
        };
        let plain = overlaps.contains(&false);
        let mut steps: Vec<Step> = iproduct!(
            or(&self.micro_batches, &DEFAULT_MICRO_BATCHES),
            or(&self.seq_lens, &[brief.seq_len]),
            or(&recompute, &DEFAULT_RECOMPUTE),
            or(&self.sequence_parallel, &[OnOff::On, OnOff::Off]),
            schedules,
            overlaps,
            or(&self.precisions, &[Precision::Bf16]),
            or(&self.global_batch_tokens, &[brief.batch_target_tokens])
        )
        .map(
            |(micro_batch, seq_len, rc, sp, schedule, overlap, precision, global_batch_tokens)| {
                Step {
                    micro_batch,
                    seq_len,
                    recompute: rc,
                    sequence_parallel: sp == OnOff::On,
                    schedule,
                    tp_comm_overlap: overlap,
                    precision,
                    global_batch_tokens,
                }
            },
        )
        .filter(|s| !(plain && s.tp_comm_overlap && !s.sequence_parallel))
        .collect();
        steps.sort();
        steps.dedup();
        Ok(steps)
    }
}

/// `--distinct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DistinctArg {
    /// Every plan: each token count of each configuration a row.
    Plan,
    /// One row per (shape, layout, training step), at its best token count.
    Layout,
    /// One row per shape, at its best plan.
    Shape,
}

/// `--rank`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RankArg {
    /// Lowest predicted loss first.
    Loss,
    /// Fewest days first.
    Days,
    /// Least memory per GPU first.
    Memory,
    /// Least cost first (needs --price-per-gpu-hour; orders as days, every layout holding
    /// the brief's GPUs).
    Cost,
}

/// Where and how a search's result is written (`search` and `merge`).
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Print the whole result as JSON instead of the report (same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Output format: the report, the JSON document, or the ranked plans as a CSV or Markdown
    /// table.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ReportFormat,
    /// Also draw predicted loss against days for the shapes, with the loss target, the day
    /// limit and the Pareto front marked, as SVG (written atomically).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Write the Pareto front on (loss, days) to FILE (written atomically), or to stdout with
    /// `-`, in which case the report goes to stderr.
    #[arg(long, value_name = "FILE")]
    pub pareto: Option<PathBuf>,
    /// Format of the Pareto front.
    #[arg(long, value_enum, default_value = "json")]
    pub pareto_format: FrontFormat,
}

/// `merge`: the partial results of a sharded search, combined.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The partial files written by `search --shard I/N`, one for each shard.
    #[arg(required = true, value_name = "PARTIAL.json")]
    pub files: Vec<PathBuf>,
    /// The largest partial file read, MiB: raise it for the shards of a very large sweep (a
    /// shard's file grows by about 2.3 kB a shape)
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_file_mb: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Format of the `--pareto` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FrontFormat {
    /// The JSON contract (`schema_version`, `brief`, `objectives`, `front`).
    Json,
    /// An aligned table.
    Text,
    /// A CSV table of the front's plans.
    Csv,
    /// A Markdown table of the front's plans.
    Markdown,
}

impl FrontFormat {
    /// The library's format.
    pub fn format(self) -> Format {
        match self {
            FrontFormat::Json => Format::Json,
            FrontFormat::Text => Format::Text,
            FrontFormat::Csv => Format::Csv,
            FrontFormat::Markdown => Format::Markdown,
        }
    }
}

/// Format of a search's or merge's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The report, for people.
    Text,
    /// The search document (the JSON contract).
    Json,
    /// The ranked plans as CSV.
    Csv,
    /// The ranked plans as a Markdown table.
    Markdown,
}

impl OutputArgs {
    /// The format of the result.
    pub fn format(&self) -> Format {
        if self.json {
            return Format::Json;
        }
        match self.format {
            ReportFormat::Text => Format::Text,
            ReportFormat::Json => Format::Json,
            ReportFormat::Csv => Format::Csv,
            ReportFormat::Markdown => Format::Markdown,
        }
    }
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Shapes to search, comma separated: presets or dimension names [default: 8b,70b,405b
    /// unless --model-config or --ffn names the models].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub models: Vec<String>,
    /// A Hugging Face config.json to search; repeat it to search several models together.
    #[arg(long, value_name = "config.json")]
    pub model_config: Vec<PathBuf>,
    /// First token count of the grid.
    #[arg(long, value_name = "D", default_value = "1e10", value_parser = parse_whole)]
    pub tokens_min: u64,
    /// Last token count of the grid (inclusive).
    #[arg(long, value_name = "D", default_value = "5e13", value_parser = parse_whole)]
    pub tokens_max: u64,
    /// Step of the token grid.
    #[arg(long, value_name = "D", default_value = "1e10", value_parser = parse_whole)]
    pub tokens_step: u64,
    /// Order of the listed plans.
    #[arg(long, value_enum, default_value = "loss")]
    pub rank: RankArg,
    /// How many plans to list.
    #[arg(long, value_name = "K", default_value = "10", value_parser = parse_whole)]
    pub top: u64,
    /// What a listed row stands for: every plan, one row per (shape, layout, step) at its
    /// best token count, or one per shape. Given by name, it thins the Pareto front the same
    /// way [default: layout; the front keeps every plan].
    #[arg(long, value_enum, value_name = "WHAT")]
    pub distinct: Option<DistinctArg>,
    /// List every passing plan instead of the top K (with --distinct layout or shape, every
    /// distinct choice), made one at a time in ranking order and written as made (the text
    /// table after a first pass sizes its columns), so memory does not grow with them.
    #[arg(long, conflicts_with = "top")]
    pub all: bool,
    /// Rank over every whole token count in each shape's exact window rather than over the
    /// grid, and add the exact Pareto front over them, as runs of consecutive counts (the
    /// counts and the grid's front are still reported).
    #[arg(long, conflicts_with = "all")]
    pub exact: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Also grade the first plan with each uncertain input at the low and the high end of its
    /// range (as `check --sensitivity` does), and run the whole search again at each end to
    /// say where another plan would rank first; with --plot, a tornado chart of the first
    /// plan's days instead of the loss–days chart.
    #[arg(long, conflicts_with_all = ["all", "shard"])]
    pub sensitivity: bool,
    /// Search only shard I of N (1 ≤ I ≤ N) of the shapes, and print its partial result as
    /// JSON for `trainplan merge`; for a batch scheduler's array job.
    #[arg(long, value_name = "I/N", conflicts_with_all = ["pareto", "json", "format", "plot"])]
    pub shard: Option<String>,
    /// Search around a launcher's configuration (as `check --from` reads it): its model the
    /// one shape, its GPUs and sequence length the brief's, its stack where it says one; the
    /// layouts and steps are the search's usual ones (docs/configs.md).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    #[command(flatten)]
    pub family: FamilyArgs,
    #[command(flatten)]
    pub step: SearchStepArgs,
    #[command(flatten)]
    pub detailed: DetailedArgs,
    #[command(flatten)]
    pub time: TimeArgs,
    /// Worker threads; 0 uses every core.
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_whole, help_heading = "Options")]
    pub threads: u64,
    #[command(flatten)]
    pub brief: BriefArgs,
}

impl SearchArgs {
    /// The shapes asked for, in the order given, each once: the presets (all three unless
    /// --models names some), then the family's.
    pub fn shapes(&self, brief: &Brief) -> Result<Vec<Shape>> {
        let mut shapes: Vec<Shape> = Vec::new();
        let adhoc = self.family.adhoc()?;
        if self.models.is_empty() && self.model_config.is_empty() && adhoc.is_none() {
            shapes = model::presets();
        }
        let named = self.models.iter().map(|name| model::preset(name));
        let configs = self.model_config.iter().map(|path| hf::read(path));
        for shape in named.chain(configs).chain(adhoc.map(Ok)) {
            Shape::push_new(&mut shapes, shape?);
        }
        let family = match self.family.family()? {
            Some(family) => Some(family),
            None => brief
                .family
                .as_ref()
                .map(|spec| spec.family())
                .transpose()?,
        };
        if let Some(family) = family {
            // A family shape with a named shape's dimensions is that shape: searched once. The
            // family's own shapes are distinct, so only the few named ones are compared.
            let named = shapes.len();
            for shape in family.shapes()? {
                if !shapes[..named].iter().any(|s| s.same_dimensions(&shape)) {
                    shapes.push(shape);
                }
            }
        }
        Ok(shapes)
    }

    /// The files the search reads: the brief, the models' configs, the efficiency table, the
    /// --from file.
    pub fn inputs(&self) -> Vec<&Path> {
        let mut inputs: Vec<&Path> = self.model_config.iter().map(PathBuf::as_path).collect();
        inputs.extend(self.from.as_deref());
        inputs.extend(self.brief.brief.as_deref());
        inputs.extend(self.time.inputs());
        inputs
    }

    /// Refuses --sensitivity with a format that has no place for it.
    pub fn check_sensitivity(&self) -> Result<()> {
        let table = matches!(self.output.format(), Format::Text | Format::Json);
        if self.sensitivity && !table {
            return Err(sensitivity_format(self.output.format.to_possible_value()));
        }
        Ok(())
    }

    /// The worker threads asked for (0: every core).
    pub fn threads(&self) -> Result<usize> {
        usize::try_from(self.threads)
            .ok()
            .filter(|&n| n <= MAX_THREADS)
            .ok_or_else(|| {
                Error::invalid(
                    "--threads",
                    self.threads,
                    format!("0 (every core) to {MAX_THREADS}"),
                )
            })
    }

    /// The search options.
    pub fn options(&self, brief: &Brief) -> Result<SearchOptions> {
        let rank = match self.rank {
            RankArg::Loss => Rank::Loss,
            RankArg::Days => Rank::Days,
            RankArg::Memory => Rank::Memory,
            RankArg::Cost => Rank::Cost,
        };
        rank.check_against("--rank", brief)?;
        if self.time.time == TimeArg::Detailed && self.detailed.memory == MemoryArg::Plate {
            return Err(Error::invalid(
                "--time",
                "detailed",
                "--time detailed together with --memory detailed, which defines the training step",
            ));
        }
        if self.time.time == TimeArg::Detailed {
            // A GPU without kernel figures is refused once, by name, not configuration by
            // configuration in silence.
            stack_chip(&brief.machine(), self.detailed.stack())?;
        }
        let memory = match self.detailed.options(self.step.given())? {
            None => MemorySpace::Plate,
            Some(options) => MemorySpace::Detailed {
                steps: self.step.steps(brief, options.stack)?,
                interleave: self.step.interleave_all() && options.stack.settings().interleaving,
                options,
                // A listed batch is fixed; without one, each layout aims at the brief's.
                batch: self
                    .step
                    .global_batch_tokens
                    .is_empty()
                    .then(|| brief.batch_target()),
                parallel: self.step.parallel()?,
                // Without a list, each layout's local batch's divisors too.
                divisors: self.step.micro_batches.is_empty(),
            },
        };
        if let MemorySpace::Detailed { steps, options, .. } = &memory {
            for p in steps.iter().map(|s| s.precision).filter(|p| p.is_fp8()) {
                crate::search::searchable_precision(brief, options.stack, p)?;
            }
        }
        let top = if self.all {
            None
        } else {
            let k = usize::try_from(self.top)
                .ok()
                .filter(|&k| k >= 1)
                .ok_or_else(|| Error::invalid("--top", self.top, "a whole number ≥ 1"))?;
            Some(k)
        };
        let distinct = match self.distinct.unwrap_or(DistinctArg::Layout) {
            DistinctArg::Plan => Distinct::Plan,
            DistinctArg::Layout => Distinct::Layout,
            DistinctArg::Shape => Distinct::Shape,
        };
        Ok(SearchOptions {
            distinct,
            distinct_front: self.distinct.is_some(),
            grid: TokenGrid::new(self.tokens_min, self.tokens_max, self.tokens_step)?,
            rank,
            top,
            memory,
            time: self.time.model(self.detailed.stack())?,
            exact: self.exact,
        })
    }
}

/// The most worker threads `--threads` accepts.
const MAX_THREADS: usize = 1024;

/// A whole number, written plainly (`2048`) or in scientific notation (`15e12`, `4.96e12`).
fn parse_whole(text: &str) -> std::result::Result<u64, String> {
    if let Ok(n) = text.parse::<u64>() {
        return Ok(n);
    }
    // Written out in digits and still no u64: too large for any count, whatever the flag.
    let digits = text.strip_prefix('+').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("at most {} (2^64 − 1)", u64::MAX));
    }
    let x: f64 = text
        .parse()
        .map_err(|_| "expected a whole number such as 2048 or 15e12".to_string())?;
    if !x.is_finite() || x < 0.0 {
        return Err("expected a whole number ≥ 0".into());
    }
    if x.fract() != 0.0 {
        return Err("expected a whole number, not a fraction".into());
    }
    // Above 2^53 a double cannot hold every whole number: such a value must be written out.
    if x >= 9_007_199_254_740_992.0 {
        return Err("above 2^53 write the number out in full digits, not as 1.2e19".into());
    }
    Ok(x as u64)
}

/// A GPU preset.
fn parse_gpu(text: &str) -> std::result::Result<Gpu, String> {
    Gpu::named(text).map_err(|e| match e {
        Error::Invalid { expected, .. } => format!("expected {expected}"),
        other => other.to_string(),
    })
}

/// A ZeRO stage.
fn parse_precision(text: &str) -> std::result::Result<Precision, String> {
    text.parse::<Precision>().map_err(|e| {
        let line = e.to_string();
        line.split_once(": ")
            .map_or(line.clone(), |(_, rule)| rule.to_string())
    })
}

fn parse_zero(text: &str) -> std::result::Result<ZeroStage, String> {
    let n: u8 = text
        .parse()
        .map_err(|_| "expected a ZeRO stage: 0, 1, 2 or 3".to_string())?;
    ZeroStage::new(n).map_err(|_| "expected a ZeRO stage: 0, 1, 2 or 3".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn whole_numbers_take_scientific_notation() {
        assert_eq!(parse_whole("15e12"), Ok(15_000_000_000_000));
        assert_eq!(parse_whole("4.96e12"), Ok(4_960_000_000_000));
        assert_eq!(parse_whole("2048"), Ok(2048));
        assert!(parse_whole("1.5").is_err());
        assert!(parse_whole("-3").is_err());
        assert!(parse_whole("NaN").is_err());
        assert!(parse_whole("1e30").is_err());
        assert!(parse_whole("1.0000000000000001e19").is_err());
        assert_eq!(
            parse_whole("10000000000000000001"),
            Ok(10_000_000_000_000_000_001)
        );
        assert!(parse_whole("eight").is_err());
    }

    #[test]
    fn flags_override_the_defaults_and_the_law_preset() {
        let cli = Cli::try_parse_from([
            "trainplan",
            "search",
            "--gpus",
            "1024",
            "--loss-law",
            "hoffmann",
            "--loss-e",
            "1.7",
        ])
        .unwrap();
        let Command::Search(args) = cli.command else {
            panic!()
        };
        let brief = args.brief.resolve().unwrap();
        assert_eq!(brief.gpus, 1024);
        assert_eq!(brief.loss_law.e, 1.7);
        assert_eq!(brief.loss_law.a, 406.4);
    }

    #[test]
    fn models_are_deduplicated_in_order() {
        let cli =
            Cli::try_parse_from(["trainplan", "search", "--models", "405b,70b,405B"]).unwrap();
        let Command::Search(args) = cli.command else {
            panic!()
        };
        let names: Vec<String> = args
            .shapes(&Brief::default())
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["llama3-405b", "llama3-70b"]);
    }
}
