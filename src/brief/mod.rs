//! **The brief part**: the question a plan answers — the cluster, the limits and the loss law
//! ([`Brief`]), the GPU presets ([`gpu`]) and the patches that layer files and flags over the
//! default ([`BriefPatch`]). The brief composes the cost part's parameter types; it never
//! reads a file (that is `input`'s). Uses `cost`, `model` and the ground floor.
//!
//! The brief: the cluster, the limits and the loss law a plan is graded against (SPEC.md §1).
//!
//! The brief is data, not code: every number can be changed. A brief is built in layers —
//! the default, then a JSON file (`--brief FILE.json`), then flags — with [`BriefPatch`], and
//! validated once by [`Brief::validate`]; everything downstream assumes a valid brief.

pub mod gpu;
mod patch;

pub use patch::{BriefPatch, GpuName, LossLawPatch, ReliabilityPatch, SpendPatch, TopologyPatch};

pub(crate) use patch::whole;

use serde::{Deserialize, Serialize};

use crate::cost::links::placement::RankPlacement;
use crate::cost::links::topology::Topology;
use crate::cost::run::reliability::Reliability;
use crate::cost::run::spend::Spend;
use crate::cost::step::{BatchTarget, DEFAULT_BATCH_TOLERANCE, DEFAULT_GLOBAL_BATCH_TOKENS};
use crate::cost::Machine;
use crate::error::{Error, Result};
use crate::format::{exact, general, thousands};
use crate::laws::batch::SizedFor;
use crate::laws::{BatchLaw, CriticalBatch, Effective, LawInputs, LawSize, LossLaw};
use crate::model::family::FamilySpec;
use crate::model::layout::{Cluster, Layout};
use crate::model::Shape;
use crate::units::{FLOPS_PER_TFLOPS, SECONDS_PER_DAY};

/// The largest values a brief accepts: far beyond any real cluster, small enough that every
/// count and product the planner forms stays exact in `u64` and finite in `f64`.
pub mod limits {
    /// GPUs in the cluster: a hundred million.
    pub const GPUS: u64 = 100_000_000;
    /// GPUs per node (an NVL72 rack is 72).
    pub const GPUS_PER_NODE: u64 = 1_024;
    /// GPUs of one scale-up domain (NVL576 is 576).
    pub const SCALE_UP_GPUS: u64 = 65_536;
    /// Sequence length, tokens.
    pub const SEQ_LEN: u64 = 100_000_000;
    /// Peak per GPU, TFLOP/s: an exaFLOP/s.
    pub const PEAK_TFLOPS: f64 = 1e6;
    /// Memory per GPU, GB: a petabyte.
    pub const GPU_MEMORY_GB: f64 = 1e6;
    /// Days: a century.
    pub const DAYS: f64 = 36_500.0;
    /// Loss target, nats per token.
    pub const LOSS: f64 = 1e3;
    /// Tokens a global batch may aim at: 2^48, far past any run's batch.
    pub const BATCH_TOKENS: u64 = 1 << 48;
    /// Tokens or parameters the compute-optimal model may have: 10^18.
    pub const TOKENS: f64 = 1e18;
    /// [`TOKENS`] as a whole number, for limits on counts (compared exactly: 10^18 + 1 as an
    /// `f64` rounds to 10^18).
    pub const WHOLE_TOKENS: u64 = 1_000_000_000_000_000_000;
}

/// The problem a plan answers. Field names are the JSON names (`brief` object of every output,
/// and the `--brief` file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    /// GPUs in the cluster.
    pub gpus: u64,
    /// Dense BF16 peak per GPU, TFLOP/s (H100 SXM: 989).
    pub peak_tflops: f64,
    /// Dense FP8 peak per GPU, TFLOP/s (H100 SXM: 1,979); 0 for a GPU without FP8 tensor
    /// cores. MFU is always measured against `peak_tflops`, the BF16 peak.
    #[serde(default = "default_fp8_tflops")]
    pub fp8_tflops: f64,
    /// Whether the GPU runs MXFP8 (block-scaled FP8, Blackwell's tensor cores).
    #[serde(default)]
    pub mxfp8: bool,
    /// Dense FP4 (E2M1) peak per GPU, TFLOP/s; 0 (the default, and then not written) for a
    /// GPU without FP4 tensor cores.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fp4_tflops: f64,
    /// Whether the GPU runs NVFP4 (a scale per 16 elements: Blackwell); written only when set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nvfp4: bool,
    /// Whether the GPU runs MXFP4 (a scale per 32 elements: Blackwell, MI355X); written only
    /// when set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mxfp4: bool,
    /// Memory of one card, GB (10^9 bytes).
    pub gpu_memory_gb: f64,
    /// The most a plan may use per GPU, GB; at most the card's memory.
    pub memory_cap_gb: f64,
    /// GPUs per node (a host): the failure domain, and what a launcher starts a process per
    /// GPU on.
    pub gpus_per_node: u64,
    /// GPUs of one scale-up (NVLink) domain, a multiple of the node's; `None`: the node is
    /// the domain (every 8-GPU board). An NVL72 rack is one domain of 72 GPUs on 18 hosts of
    /// 4. TP, CP and EP groups ride NVLink where all their ranks sit in one domain
    /// ([`Cluster::scale_up`] says how ranks fill the domains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up_gpus: Option<u64>,
    /// GPUs of each scale-up domain the job uses, a multiple of the node's and at most the
    /// domain's; `None`: all of them. NVIDIA's GB200 tables run 64 of a rack's 72, so that
    /// groups of powers of two never straddle two racks (Megatron-Bridge's performance guide,
    /// "Parallel mapping strategies with NVL72").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up_used: Option<u64>,
    /// Assumed model FLOPs utilisation, a fraction in (0, 1].
    pub mfu: f64,
    /// Longest the run may take, days.
    pub max_days: f64,
    /// Highest acceptable predicted loss.
    pub loss_target: f64,
    /// The most the run may cost, in the currency of `spend.price_per_gpu_hour` (which it
    /// needs): a fourth check, only when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// Training sequence length s, tokens.
    pub seq_len: u64,
    /// Tokens per optimizer step a plan aims at when no global batch is fixed (default 16 Mi,
    /// Llama 3's): each layout trains on the whole rounds of `b·s·DP`-token micro-batches
    /// nearest it ([`BatchTarget`]).
    #[serde(default = "default_batch_target")]
    pub batch_target_tokens: u64,
    /// How far from `batch_target_tokens` a layout's batch may be, a fraction (default 0.25).
    #[serde(default = "default_batch_tolerance")]
    pub batch_tolerance: f64,
    /// The law that sets the batch a plan aims at ([`BatchLaw`]): `fixed` (the default, and
    /// then not written) aims at `batch_target_tokens`; `deepseek` or `step` at the law's
    /// optimum for each shape ([`Brief::batch_target_for`]), within `batch_tolerance`.
    #[serde(default, skip_serializing_if = "BatchLaw::is_fixed")]
    pub batch_law: BatchLaw,
    /// A factor on the batch law's optimum that plans aim at (1 as the law gives it, and then
    /// not written): what `--sensitivity` moves within
    /// [`crate::laws::batch::NEAR_OPTIMAL`].
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub batch_law_scale: f64,
    /// Whether a plan's global batch costs tokens past the critical batch ([`CriticalBatch`],
    /// McCandlish et al. 2018's `E = E_min·(1 + B/B_crit)`): `off` (the default, and then not
    /// written) grades the loss law's tokens at any batch; `zhang` grades a plan by the
    /// tokens its batch makes count ([`Brief::loss_at_batch`], [`crate::plan::BatchCost`]).
    #[serde(default, skip_serializing_if = "CriticalBatch::is_off")]
    pub critical_batch: CriticalBatch,
    /// A factor on the critical batch's law (1 as fitted, and then not written): what
    /// `--sensitivity` moves within [`crate::laws::critical::RANGE`].
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub critical_batch_scale: f64,
    /// Tokens the model will serve over its life, `D_inf` (Sardana et al. 2024,
    /// [`crate::laws::lifetime`]): with it a plan counts its inference FLOPs `2·N·D_inf`
    /// beside its training FLOPs, a search reports the model of least lifetime FLOPs at the
    /// loss target, and `--rank lifetime` ranks by both. `None` (the default, and then not
    /// written): no inference counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_tokens: Option<u64>,
    /// Distinct tokens the data holds, `U`: a run of more tokens repeats them, and is graded by
    /// its effective tokens under a law that says what repeats are worth (Muennighoff et al.
    /// 2023; the law needs a [`crate::laws::Repetition`]). `None`: as many as a run
    /// reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_tokens: Option<u64>,
    /// Constants of the scaling law.
    pub loss_law: LossLaw,
    /// Links and memory bandwidth, for the detailed time model.
    pub topology: Topology,
    /// Failures, checkpoints and restarts, for the detailed time model.
    pub reliability: Reliability,
    /// Price, power, PUE and carbon intensity, for what a run costs (every field optional).
    #[serde(default, skip_serializing_if = "Spend::is_unset")]
    pub spend: Spend,
    /// A family of shapes to search beside the presets (`search --layers …` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<FamilySpec>,
}

fn one() -> f64 {
    1.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn default_fp8_tflops() -> f64 {
    DEFAULT_FP8_TFLOPS
}

/// The default brief's dense FP8 peak: the H100 SXM's 1,979 TFLOP/s (NVIDIA H100 datasheet,
/// 3,958 with sparsity).
pub const DEFAULT_FP8_TFLOPS: f64 = 1_979.0;

fn default_batch_target() -> u64 {
    DEFAULT_GLOBAL_BATCH_TOKENS
}

fn default_batch_tolerance() -> f64 {
    DEFAULT_BATCH_TOLERANCE
}

impl Default for Brief {
    /// The default brief of SPEC.md §1: 2,048 H100s (989 TFLOP/s, 80 GB, 8 per node) at 40 % MFU
    /// for at most 30 days, 72 GB per GPU, loss ≤ 1.955 under the Besiroglu et al. refit, s = 8,192.
    fn default() -> Self {
        Brief {
            gpus: 2048,
            peak_tflops: 989.0,
            fp8_tflops: DEFAULT_FP8_TFLOPS,
            mxfp8: false,
            fp4_tflops: 0.0,
            nvfp4: false,
            mxfp4: false,
            gpu_memory_gb: 80.0,
            memory_cap_gb: 72.0,
            gpus_per_node: 8,
            scale_up_gpus: None,
            scale_up_used: None,
            mfu: 0.40,
            max_days: 30.0,
            loss_target: 1.955,
            max_cost: None,
            seq_len: 8192,
            batch_target_tokens: DEFAULT_GLOBAL_BATCH_TOKENS,
            batch_tolerance: DEFAULT_BATCH_TOLERANCE,
            batch_law: BatchLaw::Fixed,
            batch_law_scale: 1.0,
            critical_batch: CriticalBatch::Off,
            critical_batch_scale: 1.0,
            inference_tokens: None,
            unique_tokens: None,
            loss_law: LossLaw::default(),
            topology: Topology::default(),
            reliability: Reliability::default(),
            spend: Spend::default(),
            family: None,
        }
    }
}

impl Brief {
    /// Checks every field; the error names the field (`brief.<name>`) and its value.
    pub fn validate(&self) -> Result<()> {
        let count = |field: &str, v: u64, max: u64| {
            if (1..=max).contains(&v) {
                Ok(())
            } else {
                Err(Error::invalid(
                    format!("brief.{field}"),
                    v,
                    format!("a whole number from 1 to {}", thousands(max)),
                ))
            }
        };
        count("gpus", self.gpus, limits::GPUS)?;
        count("gpus_per_node", self.gpus_per_node, limits::GPUS_PER_NODE)?;
        self.validate_scale_up()?;
        count("seq_len", self.seq_len, limits::SEQ_LEN)?;
        count(
            "batch_target_tokens",
            self.batch_target_tokens,
            limits::BATCH_TOKENS,
        )?;
        if !(self.batch_tolerance.is_finite() && (0.0..1.0).contains(&self.batch_tolerance)) {
            return Err(Error::invalid(
                "brief.batch_tolerance",
                exact(self.batch_tolerance),
                "a fraction in [0, 1), for example 0.25 for a quarter either side",
            ));
        }
        if !(self.batch_law_scale.is_finite() && self.batch_law_scale > 0.0) {
            return Err(Error::invalid(
                "brief.batch_law_scale",
                exact(self.batch_law_scale),
                "a positive factor on the batch law's optimum (1 as the law gives it)",
            ));
        }
        if !(self.critical_batch_scale.is_finite() && self.critical_batch_scale > 0.0) {
            return Err(Error::invalid(
                "brief.critical_batch_scale",
                exact(self.critical_batch_scale),
                "a positive factor on the critical batch's law (1 as fitted)",
            ));
        }
        let positive = |field: &str, v: f64, max: f64| {
            if v.is_finite() && v > 0.0 && v <= max {
                Ok(())
            } else {
                Err(Error::invalid(
                    format!("brief.{field}"),
                    exact(v),
                    format!("a number > 0 and at most {}", general(max)),
                ))
            }
        };
        positive("peak_tflops", self.peak_tflops, limits::PEAK_TFLOPS)?;
        if !(self.fp8_tflops.is_finite() && (0.0..=limits::PEAK_TFLOPS).contains(&self.fp8_tflops))
        {
            return Err(Error::invalid(
                "brief.fp8_tflops",
                exact(self.fp8_tflops),
                format!(
                    "a number from 0 (no FP8) to {}",
                    general(limits::PEAK_TFLOPS)
                ),
            ));
        }
        if !(self.fp4_tflops.is_finite() && (0.0..=limits::PEAK_TFLOPS).contains(&self.fp4_tflops))
        {
            return Err(Error::invalid(
                "brief.fp4_tflops",
                exact(self.fp4_tflops),
                format!(
                    "a number from 0 (no FP4) to {}",
                    general(limits::PEAK_TFLOPS)
                ),
            ));
        }
        positive("gpu_memory_gb", self.gpu_memory_gb, limits::GPU_MEMORY_GB)?;
        positive("memory_cap_gb", self.memory_cap_gb, limits::GPU_MEMORY_GB)?;
        positive("max_days", self.max_days, limits::DAYS)?;
        positive("loss_target", self.loss_target, limits::LOSS)?;
        if !(self.mfu.is_finite() && self.mfu > 0.0 && self.mfu <= 1.0) {
            return Err(Error::invalid(
                "brief.mfu",
                exact(self.mfu),
                "a fraction in (0, 1], for example 0.4 for 40 %",
            ));
        }
        if self.memory_cap_gb > self.gpu_memory_gb {
            return Err(Error::invalid(
                "brief.memory_cap_gb",
                exact(self.memory_cap_gb),
                format!(
                    "at most the card's {} GB (gpu_memory_gb)",
                    self.gpu_memory_gb
                ),
            ));
        }
        self.loss_law.validate("brief.loss_law.")?;
        if let Some(d) = self.inference_tokens {
            if d == 0 || d > limits::WHOLE_TOKENS {
                return Err(Error::invalid(
                    "brief.inference_tokens",
                    d,
                    format!("a whole number from 1 to {:.0e}", limits::TOKENS),
                ));
            }
        }
        if let Some(u) = self.unique_tokens {
            if u == 0 || u > limits::WHOLE_TOKENS {
                return Err(Error::invalid(
                    "brief.unique_tokens",
                    u,
                    format!("a whole number from 1 to {:.0e}", limits::TOKENS),
                ));
            }
            if self.loss_law.repetition.is_none() {
                return Err(Error::invalid(
                    "brief.unique_tokens",
                    u,
                    "a law that says what repeated tokens are worth: --loss-law muennighoff, or loss_law.repetition = { r_d, r_n } in the brief",
                ));
            }
        }
        self.topology.validate()?;
        self.reliability.validate()?;
        self.validate_spend()?;
        self.validate_budget()
    }

    /// Checks the scale-up domain: whole hosts, at most [`limits::SCALE_UP_GPUS`]; and the GPUs
    /// of it used: whole hosts, at most the domain.
    fn validate_scale_up(&self) -> Result<()> {
        let host = self.gpus_per_node;
        let domain = self.domain_gpus();
        if let Some(d) = self.scale_up_gpus {
            if d < host || d % host != 0 || d > limits::SCALE_UP_GPUS {
                return Err(Error::invalid(
                    "brief.scale_up_gpus",
                    d,
                    format!(
                        "a multiple of the {host} GPUs per node (gpus_per_node), from {host} to {}",
                        thousands(limits::SCALE_UP_GPUS)
                    ),
                ));
            }
        }
        if let Some(u) = self.scale_up_used {
            if u < host || u % host != 0 || u > domain {
                return Err(Error::invalid(
                    "brief.scale_up_used",
                    u,
                    format!(
                        "a multiple of the {host} GPUs per node (gpus_per_node), from {host} to the {domain} GPUs of a scale-up domain (scale_up_gpus)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks the money and energy fields: each in its range, and each with what it needs (a
    /// cost limit a price; a PUE or a carbon intensity a power).
    fn validate_spend(&self) -> Result<()> {
        let s = &self.spend;
        let within = |field: &str, v: Option<f64>, lo: f64, hi: f64, what: &str| match v {
            Some(v) if !(v.is_finite() && v >= lo && v <= hi && (lo > 0.0 || v > 0.0)) => {
                Err(Error::invalid(format!("brief.{field}"), exact(v), what))
            }
            _ => Ok(()),
        };
        within(
            "spend.price_per_gpu_hour",
            s.price_per_gpu_hour,
            0.0,
            1e6,
            "a price > 0 and at most 1e6 a GPU-hour",
        )?;
        within(
            "spend.gpu_power_w",
            s.gpu_power_w,
            0.0,
            1e5,
            "a power > 0 and at most 100,000 W a GPU",
        )?;
        within(
            "spend.pue",
            s.pue,
            1.0,
            10.0,
            "a power usage effectiveness from 1 to 10 (facility energy over IT energy)",
        )?;
        within(
            "spend.carbon_g_per_kwh",
            s.carbon_g_per_kwh,
            0.0,
            1e4,
            "grams of CO2e per kWh, > 0 and at most 10,000",
        )?;
        within(
            "max_cost",
            self.max_cost,
            0.0,
            1e18,
            "a cost > 0 and at most 1e18",
        )?;
        let needs = |field: &str, v: Option<f64>, given: bool, need: &str| match v {
            Some(v) if !given => Err(Error::invalid(
                format!("brief.{field}"),
                exact(v),
                format!("it needs {need}, and none is given"),
            )),
            _ => Ok(()),
        };
        needs(
            "max_cost",
            self.max_cost,
            s.price_per_gpu_hour.is_some(),
            "a price (spend.price_per_gpu_hour, --price-per-gpu-hour)",
        )?;
        let power = s.gpu_power_w.is_some();
        let power_named = "a power (spend.gpu_power_w, --gpu-power-w or a --gpu preset)";
        needs("spend.pue", s.pue, power, power_named)?;
        needs(
            "spend.carbon_g_per_kwh",
            s.carbon_g_per_kwh,
            power,
            power_named,
        )
    }

    /// Days the run may take: the day limit, or less where the cost limit binds first (cost
    /// is linear in days: [`Spend::days_within`]).
    pub fn days_limit(&self) -> f64 {
        self.binding_cost_limit()
            .map_or(self.max_days, |(_, days)| days)
    }

    /// The cost limit and its days, when it binds before the day limit: what the reasons,
    /// fixes, budget line and plot name instead of the days.
    pub fn binding_cost_limit(&self) -> Option<(f64, f64)> {
        self.max_cost
            .zip(self.cost_limit_days())
            .filter(|&(_, days)| days < self.max_days)
    }

    /// The days the cost limit allows on the brief's GPUs, when it has one.
    pub fn cost_limit_days(&self) -> Option<f64> {
        self.max_cost
            .and_then(|c| self.spend.days_within(self.gpus, c))
    }

    /// The unique tokens as a real number, for the law.
    fn unique(&self) -> Option<f64> {
        self.unique_tokens.map(|u| u as f64)
    }

    /// The predicted loss of `n` parameters on `d` tokens under the brief's law and data
    /// ([`LossLaw::loss_with`]: the plain law, or its effective tokens and parameters when the
    /// law values repeats).
    pub fn loss(&self, n: impl Into<LawSize>, d: f64) -> f64 {
        let n = n.into();
        self.loss_law
            .at(n.expansion)
            .loss_with(n.params, d, self.unique())
    }

    /// The loss of `n` parameters trained on `d` tokens at a global batch of `batch` tokens:
    /// [`Brief::loss`] of the tokens the batch makes count under the brief's critical batch
    /// ([`CriticalBatch::effective_tokens`], before any repetition), of `d` when it is off.
    pub fn loss_at_batch(&self, n: impl Into<LawSize>, d: f64, batch: f64) -> f64 {
        self.loss(n, self.batch_effective_tokens(d, batch))
    }

    /// The tokens of a run of `d` at a global batch of `batch` tokens that count toward its
    /// loss, the critical batch scaled by `critical_batch_scale` (1 as fitted).
    pub fn batch_effective_tokens(&self, d: f64, batch: f64) -> f64 {
        self.critical_batch
            .effective_tokens(d, batch, self.critical_batch_scale)
    }

    /// The loss `n` parameters approach with unlimited training on the brief's data
    /// ([`LossLaw::floor_with`]).
    pub fn loss_floor(&self, n: impl Into<LawSize>) -> f64 {
        let n = n.into();
        self.loss_law
            .at(n.expansion)
            .floor_with(n.params, self.unique())
    }

    /// The fewest tokens (continuous) with which `n` parameters reach `target` on the brief's
    /// data ([`LossLaw::tokens_for_loss_with`]).
    pub fn tokens_for_loss(&self, n: impl Into<LawSize>, target: f64) -> Option<f64> {
        let n = n.into();
        self.loss_law
            .at(n.expansion)
            .tokens_for_loss_with(n.params, target, self.unique())
    }

    /// What `n` parameters on `d` tokens are worth and how many epochs the tokens make, when
    /// the brief's law values repeats ([`LossLaw::effective`]).
    pub fn effective(&self, n: impl Into<LawSize>, d: f64) -> Option<Effective> {
        let n = n.into();
        self.loss_law
            .at(n.expansion)
            .effective(n.params, d, self.unique())
    }

    /// Checks what the fields give together: a budget whose compute-optimal model has at
    /// least one parameter and one token, and no more than a token count can hold.
    fn validate_budget(&self) -> Result<()> {
        let c = self.budget_flops();
        // The dense model's split (one expert, under a law with expert terms).
        let n = self.loss_law.at(1.0).compute_optimal_params(c);
        let d = c / 6.0 / n;
        let countable = |x: f64| x.is_finite() && (1.0..=limits::TOKENS).contains(&x);
        if c.is_finite() && countable(n) && countable(d) {
            Ok(())
        } else {
            Err(Error::invalid(
                "brief",
                format!("a budget of {c:.3e} FLOPs"),
                format!(
                    "a budget whose compute-optimal model ({n:.3e} parameters on {d:.3e} tokens) \
                     has between 1 and {:.1e} of each; check peak_tflops, mfu, gpus, max_days, max_cost and the loss law",
                    limits::TOKENS
                ),
            ))
        }
    }

    /// The global batch a plan aims at when none is fixed.
    pub fn batch_target(&self) -> BatchTarget {
        BatchTarget {
            tokens: self.batch_target_tokens,
            tolerance: self.batch_tolerance,
            law: None,
        }
    }

    /// What the brief's batch law reads of `shape` trained on `tokens`: its non-embedding
    /// matrices (the active ones: [`Shape::matrix_params`] less the head's `V·h`), layers,
    /// width and the brief's sequence.
    pub fn law_inputs(&self, shape: &Shape, tokens: f64) -> LawInputs {
        let head = shape.embedding_params().min(shape.matrix_params());
        LawInputs {
            params: (shape.matrix_params() - head) as f64,
            layers: f64::from(shape.layers),
            hidden: shape.hidden as f64,
            seq_len: self.seq_len as f64,
            tokens,
        }
    }

    /// The run a batch law sizes `shape`'s batch for when no plan names its tokens (a
    /// search): the fewest tokens that reach the brief's loss target (where the search's
    /// passing window of the shape begins), or, for a shape that never reaches it, the most its
    /// budget trains at the assumed MFU, `C/(6·N_active)`.
    pub fn batch_law_run(&self, shape: &Shape) -> (f64, SizedFor) {
        let size = LawSize {
            params: shape.active_params() as f64,
            expansion: shape.expansion(),
        };
        match self
            .tokens_for_loss(size, self.loss_target)
            .filter(|d| d.is_finite() && *d >= 1.0)
        {
            Some(d) => (d, SizedFor::LossTarget),
            None => (self.budget_flops() / (6.0 * size.params), SizedFor::Budget),
        }
    }

    /// The batch `shape`'s layouts aim at in a search: the batch law's optimum for the run of
    /// [`Brief::batch_law_run`], or the brief's fixed target ([`Brief::batch_target_at`]).
    pub fn batch_target_for(&self, shape: &Shape) -> BatchTarget {
        self.batch_target_at(shape, self.batch_law_run(shape).0)
    }

    /// The batch a plan of `shape` on `tokens` aims at: the batch law's optimum for that run
    /// (rounded to whole tokens, at least one sequence), or the brief's fixed target, within
    /// the brief's tolerance either way.
    pub fn batch_target_at(&self, shape: &Shape, tokens: f64) -> BatchTarget {
        match self
            .batch_law
            .optimal_batch(&self.law_inputs(shape, tokens))
        {
            None => self.batch_target(),
            Some(b) => self.law_target(b),
        }
    }

    /// The target of the batch law's optimum of `b` tokens: times `batch_law_scale` (1 as the
    /// law gives it), rounded to whole tokens, at least one sequence, within the brief's
    /// tolerance.
    pub fn law_target(&self, b: f64) -> BatchTarget {
        BatchTarget {
            tokens: self.scaled_law_batch(b).round() as u64,
            tolerance: self.batch_tolerance,
            law: Some(self.batch_law.name()),
        }
    }

    /// The batch aimed at for a law's optimum of `b` tokens, unrounded: times
    /// `batch_law_scale`, within one sequence and [`limits::BATCH_TOKENS`].
    pub fn scaled_law_batch(&self, b: f64) -> f64 {
        (b * self.batch_law_scale).clamp(self.seq_len as f64, limits::BATCH_TOKENS as f64)
    }

    /// The lifetime FLOPs of `n` (active) parameters trained on `tokens` and serving the
    /// brief's inference tokens ([`crate::laws::Lifetime`]); `None` without them.
    pub fn lifetime(&self, n: f64, tokens: f64) -> Option<crate::laws::Lifetime> {
        self.inference_tokens
            .map(|d| crate::laws::Lifetime::of(n, tokens, d as f64))
    }

    /// The model of least lifetime FLOPs at the loss target, serving the brief's inference
    /// tokens, under the brief's law as a dense model ([`crate::laws::lifetime_optimal`]);
    /// `None` without inference tokens or where no model reaches the target.
    pub fn lifetime_optimal(&self) -> Option<crate::laws::Lifetime> {
        let d = self.inference_tokens? as f64;
        crate::laws::lifetime_optimal(&self.loss_law, self.loss_target, d)
    }

    /// The compute-optimal model at the loss target (no inference): the lifetime optimum the
    /// brief's would be without its inference tokens.
    pub fn loss_optimal(&self) -> Option<crate::laws::Lifetime> {
        self.inference_tokens?;
        crate::laws::lifetime_optimal(&self.loss_law, self.loss_target, 0.0)
    }

    /// Sustained training throughput of the whole cluster, FLOP/s: `GPUs × peak × MFU`.
    pub fn cluster_flops_per_second(&self) -> f64 {
        self.gpus as f64 * self.peak_tflops * FLOPS_PER_TFLOPS * self.mfu
    }

    /// The compute budget, FLOPs (SPEC.md §3): `C = GPUs × peak × MFU × days × 86,400`, the
    /// days being the day limit or, when it binds first, the cost limit's ([`Brief::days_limit`]).
    pub fn budget_flops(&self) -> f64 {
        self.cluster_flops_per_second() * self.days_limit() * SECONDS_PER_DAY
    }

    /// The cluster's GPUs, GPUs per node and the GPUs of a scale-up domain the ranks fill (the
    /// used ones, [`Brief::scale_up_used`], else the whole domain), as the layouts see them.
    pub fn cluster(&self) -> Cluster {
        Cluster {
            gpus: self.gpus,
            gpus_per_node: self.gpus_per_node,
            scale_up: self.scale_up_used.unwrap_or_else(|| self.domain_gpus()),
        }
    }

    /// Where `layout`'s ranks sit on this brief's hosts and scale-up domains, and which groups
    /// ride NVLink ([`RankPlacement`]): only when a domain is larger than the node (`None`
    /// otherwise, so that no report of an 8-GPU board changes).
    pub fn placement(&self, layout: &Layout) -> Option<RankPlacement> {
        (self.domain_gpus() != self.gpus_per_node)
            .then(|| RankPlacement::of(&self.cluster(), self.domain_gpus(), layout))
    }

    /// GPUs of one scale-up domain: [`Brief::scale_up_gpus`], else the node's.
    pub fn domain_gpus(&self) -> u64 {
        self.scale_up_gpus.unwrap_or(self.gpus_per_node)
    }

    /// The hardware the detailed time model runs a step on.
    pub fn machine(&self) -> Machine {
        Machine {
            cluster: self.cluster(),
            peak_tflops: self.peak_tflops,
            fp8_tflops: self.fp8_tflops,
            mxfp8: self.mxfp8,
            fp4_tflops: self.fp4_tflops,
            nvfp4: self.nvfp4,
            mxfp4: self.mxfp4,
            topology: self.topology,
            reliability: self.reliability,
        }
    }

    /// The brief as TOML, the form `trainplan brief --print` writes and `--brief FILE.toml`
    /// reads back.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::invalid("brief", "TOML", e.to_string()))
    }
}

impl From<&Brief> for Cluster {
    fn from(brief: &Brief) -> Cluster {
        brief.cluster()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_is_about_2_10e24_flops() {
        // 2048 × 989e12 × 0.4 × 30 × 86,400 = 2.1000093696e24 (worked in Python).
        let c = Brief::default().budget_flops();
        assert!((c - 2.100_009_369_6e24).abs() / c < 1e-12, "{c:e}");
    }

    #[test]
    fn the_default_brief_is_valid() {
        Brief::default().validate().unwrap();
    }

    #[test]
    fn each_invalid_field_is_named_with_its_value() {
        let cases: Vec<(Brief, &str)> = vec![
            (
                Brief {
                    gpus: 0,
                    ..Brief::default()
                },
                "brief.gpus = 0",
            ),
            (
                Brief {
                    mfu: -0.4,
                    ..Brief::default()
                },
                "brief.mfu = -0.4",
            ),
            (
                Brief {
                    mfu: 40.0,
                    ..Brief::default()
                },
                "brief.mfu = 40",
            ),
            (
                Brief {
                    peak_tflops: f64::NAN,
                    ..Brief::default()
                },
                "brief.peak_tflops = NaN",
            ),
            (
                Brief {
                    memory_cap_gb: 90.0,
                    ..Brief::default()
                },
                "brief.memory_cap_gb = 90",
            ),
            (
                Brief {
                    max_days: 0.0,
                    ..Brief::default()
                },
                "brief.max_days = 0",
            ),
            (
                Brief {
                    seq_len: 0,
                    ..Brief::default()
                },
                "brief.seq_len = 0",
            ),
        ];
        for (brief, expected) in cases {
            let e = brief.validate().unwrap_err().to_string();
            assert!(e.contains(expected), "{e} should contain {expected}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn a_patch_replaces_only_what_it_sets() {
        let patch: BriefPatch =
            serde_json::from_str(r#"{"gpus": 1024, "loss_law": {"e": 1.69}}"#).unwrap();
        let b = patch.apply(Brief::default());
        assert_eq!(b.gpus, 1024);
        assert_eq!(b.loss_law.e, 1.69);
        assert_eq!(b.loss_law.a, 482.0);
        assert_eq!(b.mfu, 0.4);
    }

    #[test]
    fn whole_numbers_may_be_written_as_floats_and_null_is_refused() {
        let patch: BriefPatch = serde_json::from_str(r#"{"gpus": 2.048e3, "mfu": 0.5}"#).unwrap();
        assert_eq!((patch.gpus, patch.mfu), (Some(2048), Some(0.5)));
        for bad in [
            r#"{"gpus": 1.5}"#,
            r#"{"gpus": -8}"#,
            r#"{"mfu": null}"#,
            r#"{"gpus": null}"#,
        ] {
            assert!(serde_json::from_str::<BriefPatch>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_patch_refuses_unknown_fields() {
        assert!(serde_json::from_str::<BriefPatch>(r#"{"gpu": 8}"#).is_err());
    }

    #[test]
    fn the_serialised_brief_reads_back_as_a_patch() {
        let json = serde_json::to_string(&Brief::default()).unwrap();
        let patch: BriefPatch = serde_json::from_str(&json).unwrap();
        assert_eq!(
            patch.apply(Brief {
                gpus: 1,
                ..Brief::default()
            }),
            Brief::default()
        );
    }
}
