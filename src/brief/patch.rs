//! Patches: some fields of a brief, to lay over another — what a brief file, a request body or
//! the flags set. A brief is built in layers (the default, then a GPU preset, then a file, then
//! flags), each a [`BriefPatch`]; [`crate::brief::Brief::validate`] checks the result once.
//!
//! The patches are what a brief file deserialises into: unknown fields are refused, and `null`
//! is refused rather than read as "not set" ([`number`]).

use serde::{Deserialize, Deserializer};

use crate::brief::gpu::{Gpu, CAP_FRACTION};
use crate::brief::Brief;
use crate::cost::links::topology::Topology;
use crate::cost::run::reliability::Reliability;
use crate::cost::run::spend::Spend;
use crate::error::{Error, Result};
use crate::laws::{BatchLaw, ExpertScaling, LossLaw, Repetition};
use crate::model::family::FamilySpec;

/// Some fields of a brief, to lay over another: what a brief file or the flags set.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BriefPatch {
    /// A GPU preset, applied before every other field of the patch.
    #[serde(default)]
    pub gpu: Option<GpuName>,
    /// See [`Brief::gpus`].
    #[serde(default, deserialize_with = "whole")]
    pub gpus: Option<u64>,
    /// See [`Brief::peak_tflops`].
    #[serde(default, deserialize_with = "number")]
    pub peak_tflops: Option<f64>,
    /// See [`Brief::fp8_tflops`].
    #[serde(default, deserialize_with = "number")]
    pub fp8_tflops: Option<f64>,
    /// See [`Brief::mxfp8`].
    #[serde(default)]
    pub mxfp8: Option<bool>,
    /// See [`Brief::fp4_tflops`].
    #[serde(default, deserialize_with = "number")]
    pub fp4_tflops: Option<f64>,
    /// See [`Brief::nvfp4`].
    #[serde(default)]
    pub nvfp4: Option<bool>,
    /// See [`Brief::mxfp4`].
    #[serde(default)]
    pub mxfp4: Option<bool>,
    /// See [`Brief::gpu_memory_gb`].
    #[serde(default, deserialize_with = "number")]
    pub gpu_memory_gb: Option<f64>,
    /// See [`Brief::memory_cap_gb`].
    #[serde(default, deserialize_with = "number")]
    pub memory_cap_gb: Option<f64>,
    /// See [`Brief::gpus_per_node`].
    #[serde(default, deserialize_with = "whole")]
    pub gpus_per_node: Option<u64>,
    /// See [`Brief::scale_up_gpus`].
    #[serde(default, deserialize_with = "whole")]
    pub scale_up_gpus: Option<u64>,
    /// See [`Brief::scale_up_used`].
    #[serde(default, deserialize_with = "whole")]
    pub scale_up_used: Option<u64>,
    /// See [`Brief::mfu`].
    #[serde(default, deserialize_with = "number")]
    pub mfu: Option<f64>,
    /// See [`Brief::max_days`].
    #[serde(default, deserialize_with = "number")]
    pub max_days: Option<f64>,
    /// See [`Brief::loss_target`].
    #[serde(default, deserialize_with = "number")]
    pub loss_target: Option<f64>,
    /// See [`Brief::max_cost`].
    #[serde(default, deserialize_with = "number")]
    pub max_cost: Option<f64>,
    /// See [`Brief::seq_len`].
    #[serde(default, deserialize_with = "whole")]
    pub seq_len: Option<u64>,
    /// See [`Brief::batch_target_tokens`].
    #[serde(default, deserialize_with = "whole")]
    pub batch_target_tokens: Option<u64>,
    /// See [`Brief::batch_tolerance`].
    #[serde(default, deserialize_with = "number")]
    pub batch_tolerance: Option<f64>,
    /// See [`Brief::batch_law`].
    #[serde(default)]
    pub batch_law: Option<BatchLaw>,
    /// See [`Brief::batch_law_scale`].
    #[serde(default, deserialize_with = "number")]
    pub batch_law_scale: Option<f64>,
    /// See [`Brief::critical_batch`].
    #[serde(default)]
    pub critical_batch: Option<crate::laws::CriticalBatch>,
    /// See [`Brief::critical_batch_scale`].
    #[serde(default, deserialize_with = "number")]
    pub critical_batch_scale: Option<f64>,
    /// See [`Brief::inference_tokens`].
    #[serde(default, deserialize_with = "whole")]
    pub inference_tokens: Option<u64>,
    /// See [`Brief::unique_tokens`].
    #[serde(default, deserialize_with = "whole")]
    pub unique_tokens: Option<u64>,
    /// See [`Brief::loss_law`].
    #[serde(default)]
    pub loss_law: LossLawPatch,
    /// See [`Brief::topology`].
    #[serde(default)]
    pub topology: TopologyPatch,
    /// See [`Brief::reliability`].
    #[serde(default)]
    pub reliability: ReliabilityPatch,
    /// See [`Brief::spend`].
    #[serde(default)]
    pub spend: SpendPatch,
    /// See [`Brief::family`].
    #[serde(default)]
    pub family: Option<FamilySpec>,
}

/// Some constants of a loss law, to lay over another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossLawPatch {
    /// E.
    #[serde(default, deserialize_with = "number")]
    pub e: Option<f64>,
    /// A.
    #[serde(default, deserialize_with = "number")]
    pub a: Option<f64>,
    /// B.
    #[serde(default, deserialize_with = "number")]
    pub b: Option<f64>,
    /// α.
    #[serde(default, deserialize_with = "number")]
    pub alpha: Option<f64>,
    /// β.
    #[serde(default, deserialize_with = "number")]
    pub beta: Option<f64>,
    /// What repeated tokens and excess parameters are worth, both constants together.
    #[serde(default)]
    pub repetition: Option<Repetition>,
    /// What experts are worth, all six constants together.
    #[serde(default)]
    pub experts: Option<ExpertScaling>,
}

/// A number that is present: `null` is refused rather than read as "not set".
pub(crate) fn number<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<f64>, D::Error> {
    f64::deserialize(d).map(Some)
}

/// A whole number, written as an integer (`2048`) or as a float with no fraction (`2.048e3`).
/// Asked for as a number (`deserialize_f64`: a self-describing format gives what it holds), so
/// the strict reader names what else it finds (a string, a TOML datetime) as such.
pub(crate) fn whole<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    d.deserialize_f64(Whole).map(Some)
}

/// [`whole`]'s visitor.
struct Whole;

impl serde::de::Visitor<'_> for Whole {
    type Value = u64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a whole number ≥ 0")
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> std::result::Result<u64, E> {
        Ok(n)
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> std::result::Result<u64, E> {
        u64::try_from(n)
            .map_err(|_| E::custom(format!("invalid value: {n}, expected a whole number ≥ 0")))
    }

    fn visit_f64<E: serde::de::Error>(self, f: f64) -> std::result::Result<u64, E> {
        if f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_992.0 {
            Ok(f as u64)
        } else {
            Err(E::custom(format!(
                "invalid value: {}, expected a whole number ≥ 0",
                crate::format::exact(f)
            )))
        }
    }
}

impl LossLawPatch {
    /// `law` with every constant this patch sets replaced.
    pub fn apply(self, law: LossLaw) -> LossLaw {
        LossLaw {
            e: number_or(self.e, law.e),
            a: number_or(self.a, law.a),
            b: number_or(self.b, law.b),
            alpha: number_or(self.alpha, law.alpha),
            beta: number_or(self.beta, law.beta),
            repetition: self.repetition.or(law.repetition),
            experts: self.experts.or(law.experts),
        }
    }
}

impl BriefPatch {
    /// `brief` with the GPU preset, then every field this patch sets, replaced.
    pub fn apply(self, brief: Brief) -> Brief {
        let brief = match self.gpu {
            Some(GpuName(gpu)) => BriefPatch::gpu(&gpu).apply(brief),
            None => brief,
        };
        let gpus_per_node = self.gpus_per_node.unwrap_or(brief.gpus_per_node);
        // A domain of one node is no domain of its own: the brief says nothing of it (and
        // prints nothing), as before there were domains.
        let scale_up_gpus = self
            .scale_up_gpus
            .or(brief.scale_up_gpus)
            .filter(|&d| d != gpus_per_node);
        Brief {
            gpus: self.gpus.unwrap_or(brief.gpus),
            peak_tflops: number_or(self.peak_tflops, brief.peak_tflops),
            fp8_tflops: number_or(self.fp8_tflops, brief.fp8_tflops),
            mxfp8: self.mxfp8.unwrap_or(brief.mxfp8),
            fp4_tflops: number_or(self.fp4_tflops, brief.fp4_tflops),
            nvfp4: self.nvfp4.unwrap_or(brief.nvfp4),
            mxfp4: self.mxfp4.unwrap_or(brief.mxfp4),
            gpu_memory_gb: number_or(self.gpu_memory_gb, brief.gpu_memory_gb),
            memory_cap_gb: number_or(self.memory_cap_gb, brief.memory_cap_gb),
            gpus_per_node,
            scale_up_gpus,
            scale_up_used: self.scale_up_used.or(brief.scale_up_used),
            mfu: number_or(self.mfu, brief.mfu),
            max_days: number_or(self.max_days, brief.max_days),
            loss_target: number_or(self.loss_target, brief.loss_target),
            max_cost: self.max_cost.map(|x| x + 0.0).or(brief.max_cost),
            seq_len: self.seq_len.unwrap_or(brief.seq_len),
            batch_target_tokens: self
                .batch_target_tokens
                .unwrap_or(brief.batch_target_tokens),
            batch_tolerance: number_or(self.batch_tolerance, brief.batch_tolerance),
            batch_law: self.batch_law.unwrap_or(brief.batch_law),
            batch_law_scale: self.batch_law_scale.unwrap_or(brief.batch_law_scale),
            critical_batch: self.critical_batch.unwrap_or(brief.critical_batch),
            critical_batch_scale: self
                .critical_batch_scale
                .unwrap_or(brief.critical_batch_scale),
            inference_tokens: self.inference_tokens.or(brief.inference_tokens),
            unique_tokens: self.unique_tokens.or(brief.unique_tokens),
            loss_law: self.loss_law.apply(brief.loss_law),
            topology: self.topology.apply(brief.topology),
            reliability: self.reliability.apply(brief.reliability),
            spend: self.spend.apply(brief.spend),
            family: self.family.or(brief.family),
        }
    }
}

impl BriefPatch {
    /// The brief fields `gpu` sets: peak, memory, the 90 % cap, GPUs per node and the links.
    pub fn gpu(gpu: &Gpu) -> BriefPatch {
        BriefPatch {
            peak_tflops: Some(gpu.peak_tflops),
            fp8_tflops: Some(gpu.fp8_tflops),
            mxfp8: Some(gpu.mxfp8),
            fp4_tflops: Some(gpu.fp4_tflops),
            nvfp4: Some(gpu.nvfp4),
            mxfp4: Some(gpu.mxfp4),
            gpu_memory_gb: Some(gpu.memory_gb),
            memory_cap_gb: Some(gpu.memory_gb * CAP_FRACTION),
            gpus_per_node: Some(gpu.gpus_per_node),
            scale_up_gpus: Some(gpu.scale_up_gpus),
            topology: TopologyPatch {
                intra_node_gbps: Some(gpu.intra_node_gbps),
                inter_node_gbps: Some(gpu.inter_node_gbps),
                hbm_gbps: Some(gpu.hbm_gbps),
                host_link_gbps: Some(gpu.host_link_gbps),
                host_memory_gbps: Some(gpu.host_memory_gbps),
                ..TopologyPatch::default()
            },
            spend: SpendPatch {
                gpu_power_w: Some(gpu.tdp_w),
                ..SpendPatch::default()
            },
            ..BriefPatch::default()
        }
    }
}

/// Some figures of a topology, to lay over another (a brief file's `topology` object).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyPatch {
    /// See [`Topology::intra_node_gbps`].
    #[serde(default, deserialize_with = "number")]
    pub intra_node_gbps: Option<f64>,
    /// See [`Topology::intra_node_latency_us`].
    #[serde(default, deserialize_with = "number")]
    pub intra_node_latency_us: Option<f64>,
    /// See [`Topology::inter_node_gbps`].
    #[serde(default, deserialize_with = "number")]
    pub inter_node_gbps: Option<f64>,
    /// See [`Topology::inter_node_latency_us`].
    #[serde(default, deserialize_with = "number")]
    pub inter_node_latency_us: Option<f64>,
    /// See [`Topology::hbm_gbps`].
    #[serde(default, deserialize_with = "number")]
    pub hbm_gbps: Option<f64>,
    /// See [`Topology::host_link_gbps`].
    #[serde(default, deserialize_with = "number")]
    pub host_link_gbps: Option<f64>,
    /// See [`Topology::host_memory_gbps`].
    #[serde(default, deserialize_with = "number")]
    pub host_memory_gbps: Option<f64>,
}

impl TopologyPatch {
    /// `t` with every figure this patch sets replaced.
    pub fn apply(self, t: Topology) -> Topology {
        Topology {
            intra_node_gbps: number_or(self.intra_node_gbps, t.intra_node_gbps),
            intra_node_latency_us: number_or(self.intra_node_latency_us, t.intra_node_latency_us),
            inter_node_gbps: number_or(self.inter_node_gbps, t.inter_node_gbps),
            inter_node_latency_us: number_or(self.inter_node_latency_us, t.inter_node_latency_us),
            hbm_gbps: number_or(self.hbm_gbps, t.hbm_gbps),
            host_link_gbps: number_or(self.host_link_gbps, t.host_link_gbps),
            host_memory_gbps: number_or(self.host_memory_gbps, t.host_memory_gbps),
        }
    }
}

/// Some figures of [`Reliability`], to lay over another (a brief file's `reliability` object).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReliabilityPatch {
    /// See [`Reliability::failures_per_gpu_hour`].
    #[serde(default, deserialize_with = "number")]
    pub failures_per_gpu_hour: Option<f64>,
    /// See [`Reliability::storage_gbps_per_gpu`].
    #[serde(default, deserialize_with = "number")]
    pub storage_gbps_per_gpu: Option<f64>,
    /// See [`Reliability::restart_minutes`].
    #[serde(default, deserialize_with = "number")]
    pub restart_minutes: Option<f64>,
    /// See [`Reliability::checkpoint_bytes_per_param`].
    #[serde(default, deserialize_with = "number")]
    pub checkpoint_bytes_per_param: Option<f64>,
}

impl ReliabilityPatch {
    /// `r` with every figure this patch sets replaced.
    pub fn apply(self, r: Reliability) -> Reliability {
        Reliability {
            failures_per_gpu_hour: number_or(self.failures_per_gpu_hour, r.failures_per_gpu_hour),
            storage_gbps_per_gpu: number_or(self.storage_gbps_per_gpu, r.storage_gbps_per_gpu),
            restart_minutes: number_or(self.restart_minutes, r.restart_minutes),
            checkpoint_bytes_per_param: number_or(
                self.checkpoint_bytes_per_param,
                r.checkpoint_bytes_per_param,
            ),
        }
    }
}

/// Some money and energy figures, to lay over another (a brief file's `spend` object).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpendPatch {
    /// See [`Spend::price_per_gpu_hour`].
    #[serde(default, deserialize_with = "number")]
    pub price_per_gpu_hour: Option<f64>,
    /// See [`Spend::gpu_power_w`].
    #[serde(default, deserialize_with = "number")]
    pub gpu_power_w: Option<f64>,
    /// See [`Spend::pue`].
    #[serde(default, deserialize_with = "number")]
    pub pue: Option<f64>,
    /// See [`Spend::carbon_g_per_kwh`].
    #[serde(default, deserialize_with = "number")]
    pub carbon_g_per_kwh: Option<f64>,
}

impl SpendPatch {
    /// `s` with every figure this patch sets replaced.
    pub fn apply(self, s: Spend) -> Spend {
        let set = |new: Option<f64>, old: Option<f64>| new.map(|x| x + 0.0).or(old);
        Spend {
            price_per_gpu_hour: set(self.price_per_gpu_hour, s.price_per_gpu_hour),
            gpu_power_w: set(self.gpu_power_w, s.gpu_power_w),
            pue: set(self.pue, s.pue),
            carbon_g_per_kwh: set(self.carbon_g_per_kwh, s.carbon_g_per_kwh),
        }
    }
}

/// A GPU named in a brief file, checked as it is read.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub struct GpuName(pub Gpu);

impl TryFrom<String> for GpuName {
    type Error = Error;
    fn try_from(name: String) -> Result<Self> {
        Gpu::named(&name).map(GpuName)
    }
}

/// The number a patch sets, else `old`; a negative zero set is made positive (`x + 0.0`), so
/// that `e = -0.0` is the brief's `e = 0` and never prints as "-0".
fn number_or(new: Option<f64>, old: f64) -> f64 {
    new.map_or(old, |x| x + 0.0)
}
