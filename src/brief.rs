//! The brief: the cluster, the limits and the loss law a plan is graded against (SPEC.md §1).
//!
//! The brief is data, not code: every number can be changed. A brief is built in layers —
//! the default, then a JSON file (`--brief FILE.json`), then flags — with [`BriefPatch`], and
//! validated once by [`Brief::validate`]; everything downstream assumes a valid brief.

use std::path::Path;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{parse_json, parse_toml, read_text, Error, Result};
use crate::family::FamilySpec;
use crate::format::{exact, general, thousands};
use crate::gpu::GpuName;
use crate::reliability::{Reliability, ReliabilityPatch};
use crate::scaling::LossLaw;
use crate::topology::{Topology, TopologyPatch};
use crate::units::{FLOPS_PER_TFLOPS, SECONDS_PER_DAY};

/// The largest values a brief accepts: far beyond any real cluster, small enough that every
/// count and product the planner forms stays exact in `u64` and finite in `f64`.
pub mod limits {
    /// GPUs in the cluster: a hundred million.
    pub const GPUS: u64 = 100_000_000;
    /// GPUs per node (an NVL72 rack is 72).
    pub const GPUS_PER_NODE: u64 = 1_024;
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
    /// Tokens or parameters the compute-optimal model may have: 10^18.
    pub const TOKENS: f64 = 1e18;
}

/// The problem a plan answers. Field names are the JSON names (`brief` object of every output,
/// and the `--brief` file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    /// GPUs in the cluster.
    pub gpus: u64,
    /// Dense BF16 peak per GPU, TFLOP/s (H100 SXM: 989).
    pub peak_tflops: f64,
    /// Memory of one card, GB (10^9 bytes).
    pub gpu_memory_gb: f64,
    /// The most a plan may use per GPU, GB; at most the card's memory.
    pub memory_cap_gb: f64,
    /// GPUs per node; tensor parallelism stays inside a node.
    pub gpus_per_node: u64,
    /// Assumed model FLOPs utilisation, a fraction in (0, 1].
    pub mfu: f64,
    /// Longest the run may take, days.
    pub max_days: f64,
    /// Highest acceptable predicted loss.
    pub loss_target: f64,
    /// Training sequence length s, tokens.
    pub seq_len: u64,
    /// Constants of the scaling law.
    pub loss_law: LossLaw,
    /// Links and memory bandwidth, for the detailed time model.
    pub topology: Topology,
    /// Failures, checkpoints and restarts, for the detailed time model.
    pub reliability: Reliability,
    /// A family of shapes to search beside the presets (`search --layers …` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<FamilySpec>,
}

impl Default for Brief {
    /// The default brief of SPEC.md §1: 2,048 H100s (989 TFLOP/s, 80 GB, 8 per node) at 40 % MFU
    /// for at most 30 days, 72 GB per GPU, loss ≤ 1.955 under the Besiroglu et al. refit, s = 8,192.
    fn default() -> Self {
        Brief {
            gpus: 2048,
            peak_tflops: 989.0,
            gpu_memory_gb: 80.0,
            memory_cap_gb: 72.0,
            gpus_per_node: 8,
            mfu: 0.40,
            max_days: 30.0,
            loss_target: 1.955,
            seq_len: 8192,
            loss_law: LossLaw::default(),
            topology: Topology::default(),
            reliability: Reliability::default(),
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
        count("seq_len", self.seq_len, limits::SEQ_LEN)?;
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
        self.topology.validate()?;
        self.reliability.validate()?;
        self.validate_budget()
    }

    /// Checks what the fields give together: a budget whose compute-optimal model has at
    /// least one parameter and one token, and no more than a token count can hold.
    fn validate_budget(&self) -> Result<()> {
        let c = self.budget_flops();
        let n = self.loss_law.compute_optimal_params(c);
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
                     has between 1 and {:.1e} of each; check peak_tflops, mfu, gpus, max_days and the loss law",
                    limits::TOKENS
                ),
            ))
        }
    }

    /// Sustained training throughput of the whole cluster, FLOP/s: `GPUs × peak × MFU`.
    pub fn cluster_flops_per_second(&self) -> f64 {
        self.gpus as f64 * self.peak_tflops * FLOPS_PER_TFLOPS * self.mfu
    }

    /// The compute budget, FLOPs (SPEC.md §3): `C = GPUs × peak × MFU × days × 86,400`.
    pub fn budget_flops(&self) -> f64 {
        self.cluster_flops_per_second() * self.max_days * SECONDS_PER_DAY
    }

    /// Reads a brief file and applies it on top of `self`: TOML when the name ends in
    /// `.toml`, JSON otherwise, with the field names of [`Brief`] (any subset) and optionally
    /// `gpu`, a [`crate::gpu`] preset laid down before the file's other fields. Unknown fields
    /// are refused, so a typo is not silently ignored.
    pub fn with_file(self, path: &Path) -> Result<Brief> {
        let toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        let patch = BriefPatch::parse(&read_text(path)?, path, toml)?;
        Ok(patch.apply(self))
    }

    /// The brief as TOML, the form `trainplan brief --print` writes and `--brief FILE.toml`
    /// reads back.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::invalid("brief", "TOML", e.to_string()))
    }
}

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
    /// See [`Brief::gpu_memory_gb`].
    #[serde(default, deserialize_with = "number")]
    pub gpu_memory_gb: Option<f64>,
    /// See [`Brief::memory_cap_gb`].
    #[serde(default, deserialize_with = "number")]
    pub memory_cap_gb: Option<f64>,
    /// See [`Brief::gpus_per_node`].
    #[serde(default, deserialize_with = "whole")]
    pub gpus_per_node: Option<u64>,
    /// See [`Brief::mfu`].
    #[serde(default, deserialize_with = "number")]
    pub mfu: Option<f64>,
    /// See [`Brief::max_days`].
    #[serde(default, deserialize_with = "number")]
    pub max_days: Option<f64>,
    /// See [`Brief::loss_target`].
    #[serde(default, deserialize_with = "number")]
    pub loss_target: Option<f64>,
    /// See [`Brief::seq_len`].
    #[serde(default, deserialize_with = "whole")]
    pub seq_len: Option<u64>,
    /// See [`Brief::loss_law`].
    #[serde(default)]
    pub loss_law: LossLawPatch,
    /// See [`Brief::topology`].
    #[serde(default)]
    pub topology: TopologyPatch,
    /// See [`Brief::reliability`].
    #[serde(default)]
    pub reliability: ReliabilityPatch,
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
}

/// A number that is present: `null` is refused rather than read as "not set".
pub(crate) fn number<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<f64>, D::Error> {
    f64::deserialize(d).map(Some)
}

/// A whole number, written as an integer (`2048`) or as a float with no fraction (`2.048e3`).
pub(crate) fn whole<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    let x = serde_json::Number::deserialize(d)?;
    if let Some(n) = x.as_u64() {
        return Ok(Some(n));
    }
    match x.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_992.0 => {
            Ok(Some(f as u64))
        }
        _ => Err(D::Error::custom(format!(
            "invalid value: {x}, expected a whole number ≥ 0"
        ))),
    }
}

impl LossLawPatch {
    /// `law` with every constant this patch sets replaced.
    pub fn apply(self, law: LossLaw) -> LossLaw {
        LossLaw {
            e: self.e.unwrap_or(law.e),
            a: self.a.unwrap_or(law.a),
            b: self.b.unwrap_or(law.b),
            alpha: self.alpha.unwrap_or(law.alpha),
            beta: self.beta.unwrap_or(law.beta),
        }
    }
}

impl BriefPatch {
    /// A brief file's text, TOML when `toml`, else JSON; `path` names it in errors.
    pub fn parse(text: &str, path: &Path, toml: bool) -> Result<BriefPatch> {
        if toml {
            parse_toml(text, path, "a brief")
        } else {
            parse_json(text, path, "a brief")
        }
    }

    /// `brief` with the GPU preset, then every field this patch sets, replaced.
    pub fn apply(self, brief: Brief) -> Brief {
        let brief = match self.gpu {
            Some(GpuName(gpu)) => gpu.patch().apply(brief),
            None => brief,
        };
        Brief {
            gpus: self.gpus.unwrap_or(brief.gpus),
            peak_tflops: self.peak_tflops.unwrap_or(brief.peak_tflops),
            gpu_memory_gb: self.gpu_memory_gb.unwrap_or(brief.gpu_memory_gb),
            memory_cap_gb: self.memory_cap_gb.unwrap_or(brief.memory_cap_gb),
            gpus_per_node: self.gpus_per_node.unwrap_or(brief.gpus_per_node),
            mfu: self.mfu.unwrap_or(brief.mfu),
            max_days: self.max_days.unwrap_or(brief.max_days),
            loss_target: self.loss_target.unwrap_or(brief.loss_target),
            seq_len: self.seq_len.unwrap_or(brief.seq_len),
            loss_law: self.loss_law.apply(brief.loss_law),
            topology: self.topology.apply(brief.topology),
            reliability: self.reliability.apply(brief.reliability),
            family: self.family.or(brief.family),
        }
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
