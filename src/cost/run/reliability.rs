//! Failures, checkpoints and restarts: how much longer than its compute a run really takes.
//!
//! - Job mean time between failures `M = 1 / (λ · GPUs)` for a failure rate `λ` per GPU-hour.
//!   The default λ is the Llama 3 405B run's: 419 unexpected interruptions in 54 days on 16,384
//!   H100s (Llama Team 2024, §3.3.4), `419 / (54 · 24 · 16,384) = 1.97 × 10⁻⁵` per GPU-hour.
//!   A failure stops the job whatever it takes out (a GPU, its host, a link), so the rate is
//!   counted per GPU and neither the host nor the NVLink domain enters: an NVL72 rack's 72 GPUs
//!   fail as 72 GPUs of hosts of 4, not as one unit ([`crate::cost::links::placement`]).
//! - Checkpoint write time `δ = checkpoint bytes / storage bandwidth`. The checkpoint holds the
//!   BF16 weights and the FP32 master weights and Adam moments, 14 bytes per parameter; the
//!   storage bandwidth defaults to Llama 3's 2 TB/s sustained for 16,384 GPUs, 0.122 GB/s per GPU.
//! - Young's optimal checkpoint interval `τ = √(2·δ·M)` (Young, CACM 1974; Daly, FGCS 2006 refines
//!   it for `δ` not small against `M`).
//! - Each failure loses on average `τ/2` of work since the last checkpoint plus the restart time
//!   `R`. Over a run of wall time `W` with compute time `T`:
//!   `W = T·(1 + δ/τ) + (W/M)·(τ/2 + R)`, so `W = T·(1 + δ/τ) / (1 − (τ/2 + R)/M)`; goodput is
//!   `T/W`, and the expected failures `W/M`. When `τ/2 + R ≥ M` the run never finishes.

use serde::{Deserialize, Serialize};

use crate::error::{check_numbers, Error, Result};
use crate::format::general;

/// How often GPUs fail, how fast checkpoints are written and how long a restart takes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reliability {
    /// Unexpected interruptions per GPU-hour.
    pub failures_per_gpu_hour: f64,
    /// Checkpoint write bandwidth per GPU of the cluster, GB/s.
    pub storage_gbps_per_gpu: f64,
    /// Minutes from a failure to training again (detect, reschedule, reload).
    pub restart_minutes: f64,
    /// Bytes a checkpoint holds per parameter.
    pub checkpoint_bytes_per_param: f64,
}

impl Default for Reliability {
    /// Llama 3's failure rate and storage; a 10-minute restart (an assumption: Llama 3 reports
    /// the interruptions, not the time each cost); 14-byte checkpoints.
    fn default() -> Self {
        Reliability {
            failures_per_gpu_hour: 419.0 / (54.0 * 24.0 * 16_384.0),
            storage_gbps_per_gpu: 2_000.0 / 16_384.0,
            restart_minutes: 10.0,
            checkpoint_bytes_per_param: 14.0,
        }
    }
}

/// What failures cost a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Outage {
    /// Seconds to write one checkpoint, δ.
    pub checkpoint_seconds: f64,
    /// Young's checkpoint interval τ, minutes (`null` when nothing fails).
    pub checkpoint_interval_minutes: Option<f64>,
    /// Job mean time between failures M, hours (`null` when nothing fails).
    pub mtbf_hours: Option<f64>,
    /// Fraction of wall-clock time spent on training that is kept, T/W, in (0, 1].
    pub goodput: f64,
    /// Failures expected over the run, W/M.
    pub expected_failures: f64,
}

impl Reliability {
    /// Checks each figure: finite, the rate and the bytes ≥ 0, the bandwidth > 0.
    pub fn validate(&self) -> Result<()> {
        let fields = [
            ("failures_per_gpu_hour", self.failures_per_gpu_hour, true),
            ("storage_gbps_per_gpu", self.storage_gbps_per_gpu, false),
            ("restart_minutes", self.restart_minutes, true),
            (
                "checkpoint_bytes_per_param",
                self.checkpoint_bytes_per_param,
                true,
            ),
        ];
        check_numbers("brief.reliability.", &fields, 1e9)
    }

    /// The cost of failures for `params` parameters on `gpus` GPUs and `compute_seconds` of
    /// training: Young's interval, goodput and expected failures (module docs); an error when
    /// failures come faster than a checkpoint interval and a restart, so the run never ends.
    pub fn outage(&self, params: u64, gpus: u64, compute_seconds: f64) -> Result<Outage> {
        let delta = self.checkpoint_bytes_per_param * params as f64
            / (self.storage_gbps_per_gpu * 1e9 * gpus as f64);
        let rate = self.failures_per_gpu_hour * gpus as f64 / 3600.0; // failures per second
        let restart = self.restart_minutes * 60.0;
        if rate == 0.0 {
            return Ok(Outage {
                checkpoint_seconds: delta,
                checkpoint_interval_minutes: None,
                mtbf_hours: None,
                goodput: 1.0,
                expected_failures: 0.0,
            });
        }
        let mtbf = 1.0 / rate;
        let tau = (2.0 * delta * mtbf).sqrt();
        let lost = (tau / 2.0 + restart) / mtbf;
        if lost >= 1.0 {
            return Err(Error::invalid(
                "brief.reliability",
                format!("a failure every {} h on {gpus} GPUs", general(mtbf / 3600.0)),
                format!(
                    "failures rarer than a checkpoint interval plus a restart ({} h), or the run never ends",
                    general((tau / 2.0 + restart) / 3600.0)
                ),
            ));
        }
        // With free checkpoints (δ = 0) τ is 0 too: no checkpoint overhead, no work lost.
        let overhead = if tau > 0.0 { delta / tau } else { 0.0 };
        let stretch = (1.0 + overhead) / (1.0 - lost);
        let wall = compute_seconds * stretch;
        Ok(Outage {
            checkpoint_seconds: delta,
            checkpoint_interval_minutes: Some(tau / 60.0),
            mtbf_hours: Some(mtbf / 3600.0),
            goodput: 1.0 / stretch,
            expected_failures: wall / mtbf,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_3_s_interruptions_give_about_1_97e_5_failures_per_gpu_hour() {
        let r = Reliability::default();
        assert!((r.failures_per_gpu_hour - 1.9733e-5).abs() < 1e-8);
    }

    #[test]
    fn young_s_interval_worked_by_hand_for_70b_on_2048_gpus() {
        // δ = 14 × 70,553,706,496 / (0.1220703125e9 × 2048) = 3.9510 s.
        // M = 1 / (1.97330e-5 × 2048 / 3600) = 89,080.7 s (24.74 h).
        // τ = √(2 × 3.9510 × 89,080.7) = 839.00 s = 13.98 min.
        let o = Reliability::default()
            .outage(70_553_706_496, 2048, 1e6)
            .unwrap();
        assert!(
            (o.checkpoint_seconds - 3.9510).abs() < 1e-3,
            "{}",
            o.checkpoint_seconds
        );
        assert!((o.mtbf_hours.unwrap() - 24.743).abs() < 1e-2);
        assert!((o.checkpoint_interval_minutes.unwrap() - 13.983).abs() < 1e-2);
        // Goodput = (1 − (τ/2 + R)/M) / (1 + δ/τ) = (1 − 1019.5/89080.7) / (1 + 0.004709) = 0.98391.
        assert!((o.goodput - 0.98391).abs() < 1e-4, "{}", o.goodput);
        assert!((o.expected_failures - 1e6 / o.goodput / 89_080.67).abs() < 1e-3);
    }

    #[test]
    fn no_failures_means_full_goodput() {
        let r = Reliability {
            failures_per_gpu_hour: 0.0,
            ..Reliability::default()
        };
        let o = r.outage(1_000_000_000, 8, 3600.0).unwrap();
        assert_eq!((o.goodput, o.expected_failures), (1.0, 0.0));
        assert_eq!((o.mtbf_hours, o.checkpoint_interval_minutes), (None, None));
    }

    #[test]
    fn a_cluster_that_fails_faster_than_it_restarts_never_finishes() {
        let r = Reliability {
            failures_per_gpu_hour: 1.0,
            ..Reliability::default()
        };
        let e = r
            .outage(1_000_000_000, 1024, 3600.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid brief.reliability = a failure every"),
            "{e}"
        );
    }

    #[test]
    fn free_checkpoints_lose_only_the_restarts() {
        let r = Reliability {
            checkpoint_bytes_per_param: 0.0,
            ..Reliability::default()
        };
        let o = r.outage(1_000_000_000, 2048, 1e6).unwrap();
        let mtbf = 3600.0 / (r.failures_per_gpu_hour * 2048.0);
        assert!((o.goodput - (1.0 - 600.0 / mtbf)).abs() < 1e-12);
    }
}
