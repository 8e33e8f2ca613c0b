//! The brief's flags: a brief file, a GPU preset and each of SPEC.md §1's numbers over them
//! (`--brief`, `--gpu`, `--gpus`, …), and the `brief` command that shows the result.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::parse::{parse_gpu, parse_whole};
use crate::brief::gpu::Gpu;
use crate::brief::{
    Brief, BriefPatch, GpuName, LossLawPatch, ReliabilityPatch, SpendPatch, TopologyPatch,
};
use crate::error::Result;
use crate::input;
use crate::laws::{BatchLaw, LossLawPreset};

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
    /// flags still override each [a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200, h800, b200,
    /// b300, gb200, gb300, mi300x, mi325x, mi355x].
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
    /// GPUs per node (a host); TP stays inside a node unless --scale-up-gpus makes the NVLink
    /// domain larger [default: 8].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub gpus_per_node: Option<u64>,
    /// GPUs of one scale-up (NVLink) domain, a multiple of the node's (an NVL72 rack: 72 on
    /// hosts of 4); TP, CP and EP ride NVLink inside one [default: the node].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub scale_up_gpus: Option<u64>,
    /// GPUs of each scale-up domain the job fills, in rank order, whole hosts (NVIDIA's GB200
    /// tables: 64 of 72) [default: all of them].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub scale_up_used: Option<u64>,
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
    /// The law that sets the batch each shape aims at when no --global-batch-tokens fixes it
    /// (detailed model), with the learning rate it implies [default: fixed].
    #[arg(long, value_enum, value_name = "LAW")]
    pub batch_law: Option<BatchLawArg>,
    /// Whether a plan's global batch costs tokens past the critical batch (McCandlish et al.
    /// 2018: E = E_min·(1 + B/B_crit)), graded into its loss and the tokens a target needs
    /// [default: off].
    #[arg(long, value_enum, value_name = "LAW")]
    pub critical_batch: Option<CriticalBatchArg>,
    /// Tokens the model will serve over its life: counted as 2·N FLOPs each beside training's
    /// 6·N·D, for the lifetime-optimal model at the loss target and --rank lifetime (Sardana
    /// et al. 2024) [default: none].
    #[arg(long, value_name = "TOKENS", value_parser = parse_whole)]
    pub inference_tokens: Option<u64>,
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
    /// One GPU's link to host memory, GB/s each way, which offloaded activations and an
    /// offloaded optimizer's gradients and weights cross
    /// [default: 64, PCIe Gen5 x16; a GPU preset's own, 225 on GB200 and GB300].
    #[arg(long, value_name = "GB/s")]
    pub host_link_gbps: Option<f64>,
    /// Host memory bandwidth per GPU, GB/s, which an offloaded optimizer's CPU step is bound
    /// by [default: 76.8, a DGX H100's DDR5 over 8 GPUs; a GPU preset's own, 256 on GB200 and
    /// GB300].
    #[arg(long, value_name = "GB/s")]
    pub host_memory_gbps: Option<f64>,
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
    /// Gadre et al. 2024, the over-training law refitted to its released RedPajama runs: E
    /// 1.8366, α β 0.2729 (η 0.1364), A 166.2, B 287.2; good for 20 to 640 tokens a parameter
    /// (losses in C4-eval nats, GPT-NeoX tokenizer).
    Gadre,
}

/// Batch-size laws.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BatchLawArg {
    /// The brief's --batch-target (16 Mi tokens by default).
    Fixed,
    /// DeepSeek LLM (arXiv:2401.02954): B = 0.2920·C^0.3271 tokens, η = 0.3118·C^−0.125, C =
    /// M·D in its non-embedding FLOPs a token.
    Deepseek,
    /// StepFun's Step Law (arXiv:2503.04715): B = 0.58·D^0.571 tokens, η = 1.79·N^−0.713·D^0.307.
    Step,
}

impl BatchLawArg {
    fn law(self) -> BatchLaw {
        match self {
            BatchLawArg::Fixed => BatchLaw::Fixed,
            BatchLawArg::Deepseek => BatchLaw::DeepSeek,
            BatchLawArg::Step => BatchLaw::Step,
        }
    }
}

/// Critical-batch laws.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CriticalBatchArg {
    /// No cost for any batch.
    Off,
    /// B_crit = 2.498·D_min^0.6174 tokens, fitted on Zhang et al. 2024's runs (85 M – 1.2 B).
    Zhang,
}

impl CriticalBatchArg {
    fn law(self) -> crate::laws::CriticalBatch {
        match self {
            CriticalBatchArg::Off => crate::laws::CriticalBatch::Off,
            CriticalBatchArg::Zhang => crate::laws::CriticalBatch::Zhang,
        }
    }
}

impl LawArg {
    fn preset(self) -> LossLawPreset {
        match self {
            LawArg::Besiroglu => LossLawPreset::Besiroglu,
            LawArg::BesirogluUnrounded => LossLawPreset::BesirogluUnrounded,
            LawArg::Hoffmann => LossLawPreset::Hoffmann,
            LawArg::Muennighoff => LossLawPreset::Muennighoff,
            LawArg::Ludziejewski => LossLawPreset::Ludziejewski,
            LawArg::Gadre => LossLawPreset::Gadre,
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
            fp4_tflops: None,
            nvfp4: None,
            mxfp4: None,
            gpu_memory_gb: self.gpu_memory_gb,
            memory_cap_gb: self.memory_cap_gb,
            gpus_per_node: self.gpus_per_node,
            scale_up_gpus: self.scale_up_gpus,
            scale_up_used: self.scale_up_used,
            mfu: self.mfu,
            max_days: self.max_days,
            loss_target: self.loss_target,
            seq_len: self.seq_len,
            batch_target_tokens: self.batch_target,
            batch_tolerance: self.batch_tolerance,
            batch_law: self.batch_law.map(BatchLawArg::law),
            critical_batch: self.critical_batch.map(CriticalBatchArg::law),
            critical_batch_scale: None,
            batch_law_scale: None,
            inference_tokens: self.inference_tokens,
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
                host_link_gbps: self.host_link_gbps,
                host_memory_gbps: self.host_memory_gbps,
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

#[cfg(test)]
mod tests {
    use crate::cli::args::{Cli, Command};
    use clap::Parser;

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
}
