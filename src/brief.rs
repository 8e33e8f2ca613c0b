//! The brief: the cluster, the limits and the loss law a plan is graded against (SPEC.md §1).
//!
//! The brief is data, not code: every number can be changed. A brief is built in layers —
//! the default, then a JSON file (`--brief FILE.json`), then flags — with [`BriefPatch`], and
//! validated once by [`Brief::validate`]; everything downstream assumes a valid brief.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::scaling::LossLaw;
use crate::units::{FLOPS_PER_TFLOPS, SECONDS_PER_DAY};

/// The problem a plan answers. Field names are the JSON names (`brief` object of every output,
/// and the `--brief` file).
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        }
    }
}

impl Brief {
    /// Checks every field; the error names the field (`brief.<name>`) and its value.
    pub fn validate(&self) -> Result<()> {
        let count = |field: &str, v: u64| {
            if v == 0 {
                Err(Error::invalid(
                    format!("brief.{field}"),
                    v,
                    "a whole number ≥ 1",
                ))
            } else {
                Ok(())
            }
        };
        count("gpus", self.gpus)?;
        count("gpus_per_node", self.gpus_per_node)?;
        count("seq_len", self.seq_len)?;
        let positive = |field: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::invalid(
                    format!("brief.{field}"),
                    v,
                    "a finite number > 0",
                ))
            }
        };
        positive("peak_tflops", self.peak_tflops)?;
        positive("gpu_memory_gb", self.gpu_memory_gb)?;
        positive("memory_cap_gb", self.memory_cap_gb)?;
        positive("max_days", self.max_days)?;
        positive("loss_target", self.loss_target)?;
        if !(self.mfu.is_finite() && self.mfu > 0.0 && self.mfu <= 1.0) {
            return Err(Error::invalid(
                "brief.mfu",
                self.mfu,
                "a fraction in (0, 1], for example 0.4 for 40 %",
            ));
        }
        if self.memory_cap_gb > self.gpu_memory_gb {
            return Err(Error::invalid(
                "brief.memory_cap_gb",
                self.memory_cap_gb,
                format!(
                    "at most the card's {} GB (gpu_memory_gb)",
                    self.gpu_memory_gb
                ),
            ));
        }
        self.loss_law.validate("brief.loss_law.")
    }

    /// Sustained training throughput of the whole cluster, FLOP/s: `GPUs × peak × MFU`.
    pub fn cluster_flops_per_second(&self) -> f64 {
        self.gpus as f64 * self.peak_tflops * FLOPS_PER_TFLOPS * self.mfu
    }

    /// The compute budget, FLOPs (SPEC.md §3): `C = GPUs × peak × MFU × days × 86,400`.
    pub fn budget_flops(&self) -> f64 {
        self.cluster_flops_per_second() * self.max_days * SECONDS_PER_DAY
    }

    /// Reads a brief file (JSON, the field names of [`Brief`]; any subset) and applies it on
    /// top of `self`. Unknown fields are refused, so a typo is not silently ignored.
    pub fn with_file(self, path: &Path) -> Result<Brief> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        let patch: BriefPatch = serde_json::from_str(&text).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: format!("not a brief: {e}"),
        })?;
        Ok(patch.apply(self))
    }
}

/// Some fields of a brief, to lay over another: what a brief file or the flags set.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BriefPatch {
    /// See [`Brief::gpus`].
    pub gpus: Option<u64>,
    /// See [`Brief::peak_tflops`].
    pub peak_tflops: Option<f64>,
    /// See [`Brief::gpu_memory_gb`].
    pub gpu_memory_gb: Option<f64>,
    /// See [`Brief::memory_cap_gb`].
    pub memory_cap_gb: Option<f64>,
    /// See [`Brief::gpus_per_node`].
    pub gpus_per_node: Option<u64>,
    /// See [`Brief::mfu`].
    pub mfu: Option<f64>,
    /// See [`Brief::max_days`].
    pub max_days: Option<f64>,
    /// See [`Brief::loss_target`].
    pub loss_target: Option<f64>,
    /// See [`Brief::seq_len`].
    pub seq_len: Option<u64>,
    /// See [`Brief::loss_law`].
    #[serde(default)]
    pub loss_law: LossLawPatch,
}

/// Some constants of a loss law, to lay over another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossLawPatch {
    /// E.
    pub e: Option<f64>,
    /// A.
    pub a: Option<f64>,
    /// B.
    pub b: Option<f64>,
    /// α.
    pub alpha: Option<f64>,
    /// β.
    pub beta: Option<f64>,
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
    /// `brief` with every field this patch sets replaced.
    pub fn apply(self, brief: Brief) -> Brief {
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
