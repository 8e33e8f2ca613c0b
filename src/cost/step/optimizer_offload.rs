//! Host-memory offload of the optimizer (`--offload-optimizer F`): Megatron-core's
//! `--optimizer-cpu-offload --optimizer-offload-fraction F`, its `HybridDeviceOptimizer`.
//!
//! What Megatron-core does (Megatron-LM @d98e8a64: `megatron/core/optimizer/cpu_offloading/
//! hybrid_optimizer.py`, `megatron/core/optimizer/__init__.py`,
//! `megatron/core/optimizer/optimizer_config.py`, `megatron/training/arguments.py`,
//! and its user guide's page on optimizer CPU offload):
//!
//! - Flags: `--optimizer-cpu-offload` turns it on; `--optimizer-offload-fraction F` (default
//!   1.0 in `arguments.py`) is the share of this rank's optimizer parameters moved to the CPU,
//!   counted in elements, whole tensors in order until `F` of them are reached
//!   (`_get_sub_optimizer_param_groups`: `offload_threshold = gpu_params_total_numel *
//!   offload_fraction`); `--overlap-cpu-optimizer-d2h-h2d` puts the copies on their own
//!   streams and gives every offloaded tensor its own CPU optimizer, so copies and CPU steps of
//!   different tensors pipeline (the guide recommends it); `--use-torch-optimizer-for-cpu-offload`
//!   changes nothing for Adam (`__init__.py` sets `gpu_optimizer_cls = Adam`,
//!   `cpu_optimizer_cls = CPUAdam` for Adam after it).
//! - Requirements: `arguments.py` asserts `--use-precision-aware-optimizer` ("the hybrid
//!   device optimizer reuses the code path of this flag"), which `__init__.py` allows only with
//!   the distributed optimizer ("--use-precision-aware-optimizer only supported with
//!   distributed optimizer"); with `--fp8-param-gather` only `--fp8-recipe delayed`; Megatron-
//!   FSDP v2 refuses it; Adam runs in AdamW mode (`decoupled_weight_decay`). Here: the
//!   megatron-te stack at ZeRO 1 (the distributed optimizer; ZeRO 2 and 3 export as
//!   Megatron-FSDP, whose path with it is not modelled), FP8 weights only under delayed scaling.
//! - What moves: `HybridDeviceOptimizer(..., param_update_in_fp32=True)` keeps an FP32 master
//!   of every parameter and runs Adam with FP32 moments on it (the precision-aware
//!   optimizer's `exp_avg_dtype` and `main_params_dtype` are not passed to it), so the
//!   offloaded fraction's FP32 master and Adam's m and v (12 bytes) live in pinned host
//!   memory, beside a pinned FP32 copy of its gradients (`cpu_copy_map_grad`, the master's
//!   dtype: 4 bytes): 16 bytes a parameter on the host. Here master weights and moments other
//!   than FP32 are refused with it.
//! - Each step: the gradients (FP32, the main-grad buffer's dtype) go device to host
//!   (`copy_(grad, non_blocking=True)`, 4 bytes a parameter), `torch.optim.AdamW(fused=True)`
//!   steps on the CPU, and the updated weights come back host to device into the BF16 model
//!   parameter (`gpu_param.data.copy_(param.data)`; PyTorch converts to the destination's
//!   dtype before a non-blocking copy crosses: 2 bytes a parameter).
//! - Overlap: the gradient copies run on the D2H stream while the GPU's own share steps; each
//!   tensor's CPU step waits for its own copy, and its weights go back on the H2D stream while
//!   the next tensor steps. Nothing overlaps the forward or backward: the step happens between
//!   the last backward and the next forward.
//!
//! Model: with `n` parameters in this GPU's optimizer shard, the GPU steps `(1 − F)·n` as
//! before; the host's part is `F·n` parameters' copies over the host link `B` each way, and a
//! CPU step as memory-bound as the GPU's ([`crate::cost::step_time::OPTIMIZER_BYTES_MOVED`]
//! bytes a parameter) at the host memory's bandwidth per GPU `H` times
//! [`HOST_OPTIMIZER_EFFICIENCY`]. With the overlap, pipelined over many tensors, the optimizer
//! step lasts `max(gpu, 4·F·n/B, 2·F·n/B, 28·F·n/(0.6·H))` (one tensor's fill and drain left
//! out): the host's part adds what passes the GPU's own step. The exporter writes the overlap,
//! so the plan is made with it. The copies' own reads and writes of host memory, and the
//! link shared with offloaded activations (which never cross it during the step), are left out.

use crate::cost::step::recipe::{MasterWeights, OptimizerStates};
use crate::cost::step::stack::Stack;
use crate::error::{Error, Result};

/// Bytes a parameter's gradient takes device to host: FP32, Megatron-core's main-grad dtype
/// (`arguments.py` accumulates and reduces gradients in FP32 under `--bf16`) and the pinned
/// host buffer's.
pub const D2H_BYTES: f64 = 4.0;

/// Bytes a parameter's updated weight takes host to device: the BF16 model parameter's.
pub const H2D_BYTES: f64 = 2.0;

/// Bytes an offloaded parameter takes in host memory: FP32 master, m and v (12) and the pinned
/// FP32 gradient copy (4).
pub const HOST_BYTES: f64 = 16.0;

/// Fraction of the host memory's bandwidth the CPU's Adam reaches: the GPU's calibrated
/// [`crate::cost::step_time::OPTIMIZER_HBM_EFFICIENCY`], *assumed* alike for a fused CPU Adam
/// (no CPU measurement was at hand).
pub const HOST_OPTIMIZER_EFFICIENCY: f64 = 0.6;

/// Host memory the offloaded optimizer takes, bytes: [`HOST_BYTES`] for each of `F·n`
/// parameters.
pub fn host_bytes(params: f64, fraction: f64) -> f64 {
    fraction * params * HOST_BYTES
}

/// Seconds of the host's copies of `F·n` parameters over a link of `link` bytes a second each
/// way: gradients to the host ([`D2H_BYTES`]) and weights back ([`H2D_BYTES`]).
pub fn copies(params: f64, fraction: f64, link: f64) -> (f64, f64) {
    let n = fraction * params;
    (n * D2H_BYTES / link, n * H2D_BYTES / link)
}

/// Seconds of the CPU's Adam over `F·n` parameters, `moved` bytes each, at `host` bytes a
/// second of host memory times [`HOST_OPTIMIZER_EFFICIENCY`].
pub fn cpu_step(params: f64, fraction: f64, moved: f64, host: f64) -> f64 {
    fraction * params * moved / (host * HOST_OPTIMIZER_EFFICIENCY)
}

/// Seconds the host's part adds to an optimizer step whose GPU share lasts `gpu`:
/// `max(gpu, d2h, h2d, cpu) − gpu`, the copies and the CPU step pipelined over the tensors
/// (`--overlap-cpu-optimizer-d2h-h2d`); 0 with nothing offloaded.
pub fn added(gpu: f64, params: f64, fraction: f64, moved: f64, (link, host): (f64, f64)) -> f64 {
    if fraction == 0.0 {
        return 0.0;
    }
    let (d2h, h2d) = copies(params, fraction, link);
    let cpu = cpu_step(params, fraction, moved, host);
    gpu.max(d2h).max(h2d).max(cpu) - gpu
}

/// The offloaded fraction as the detailed model's settings keep it: hundredths in one byte,
/// which keeps [`crate::cost::step::detailed::Options`] small enough to copy by value
/// everywhere (two bytes would pad it by eight); written and read as the fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fraction(u8);

impl Fraction {
    /// Nothing offloaded.
    pub const ZERO: Fraction = Fraction(0);
    const STEPS: f64 = 100.0;

    /// `f` for `flag`, or why not: a fraction from 0 to 1 in steps of 0.01.
    pub fn new(flag: &str, f: f64) -> Result<Fraction> {
        let steps = (f * Self::STEPS).round();
        if !(f.is_finite() && (0.0..=1.0).contains(&f)) || (f * Self::STEPS - steps).abs() > 1e-6 {
            return Err(Error::invalid(
                flag,
                crate::format::exact(f),
                "a fraction of the optimizer's parameters from 0 to 1, in steps of 0.01",
            ));
        }
        Ok(Fraction(steps as u8))
    }

    /// The fraction, 0 to 1.
    pub fn get(self) -> f64 {
        f64::from(self.0) / Self::STEPS
    }

    /// Whether nothing is offloaded.
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }
}

impl std::fmt::Display for Fraction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::format::exact(self.get()))
    }
}

impl serde::Serialize for Fraction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_f64(self.get())
    }
}

impl<'de> serde::Deserialize<'de> for Fraction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let f = f64::deserialize(d)?;
        Fraction::new("offload_optimizer", f).map_err(serde::de::Error::custom)
    }
}

/// What the offload goes with, beside the fraction itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    pub stack: Stack,
    pub zero: u8,
    pub master: MasterWeights,
    pub states: OptimizerStates,
    /// FP8 weights (`--fp8-params`) under a scaling recipe other than delayed.
    pub fp8_params_not_delayed: bool,
}

/// Whether `fraction` of the optimizer offloaded goes with the setting as Megatron-core runs
/// it (module docs): a fraction from 0 to 1; on megatron-te, at ZeRO 1, with an FP32 master and
/// moments, and FP8 weights only under delayed scaling.
pub fn offload_allowed(fraction: f64, s: Setting) -> Result<()> {
    let flag = "--offload-optimizer";
    let value = crate::format::exact(fraction);
    if !(fraction.is_finite() && (0.0..=1.0).contains(&fraction)) {
        return Err(Error::invalid(
            flag,
            value,
            "a fraction of the optimizer's parameters from 0 to 1",
        ));
    }
    if fraction == 0.0 {
        return Ok(());
    }
    let why = if s.stack != Stack::MegatronTe {
        format!(
            "0 on the {} stack (optimizer offload is Megatron-core's --optimizer-cpu-offload: --stack megatron-te)",
            s.stack
        )
    } else if s.zero != 1 {
        format!(
            "0 at ZeRO {} (Megatron-core's --optimizer-cpu-offload needs --use-precision-aware-optimizer, which needs the distributed optimizer: ZeRO 1; Megatron-FSDP's path is not modelled)",
            s.zero
        )
    } else if !(s.master.is_default() && s.states.is_default()) {
        format!(
            "0 with --master-weights {} --optimizer-states {} (Megatron-core's hybrid optimizer keeps an FP32 master and FP32 moments)",
            s.master.name(),
            s.states.name()
        )
    } else if s.fp8_params_not_delayed {
        "0 with --fp8-params under a recipe other than delayed (Megatron-core: \"When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used in conjunction with `--fp8-recipe delayed`\")".to_string()
    } else {
        return Ok(());
    };
    Err(Error::invalid(flag, value, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting() -> Setting {
        Setting {
            stack: Stack::MegatronTe,
            zero: 1,
            master: MasterWeights::Fp32,
            states: OptimizerStates::Fp32,
            fp8_params_not_delayed: false,
        }
    }

    #[test]
    fn the_host_holds_sixteen_bytes_an_offloaded_parameter() {
        // FP32 master, m, v and the gradient's pinned FP32 copy: 1e9 parameters, half of them
        // offloaded, 0.5 × 1e9 × 16 = 8 GB.
        assert_eq!(host_bytes(1e9, 0.5), 8e9);
        assert_eq!(host_bytes(1e9, 0.0), 0.0);
    }

    #[test]
    fn the_copies_move_fp32_gradients_out_and_bf16_weights_back() {
        // 1e9 parameters all offloaded over PCIe Gen5's 64 GB/s: 4 GB out, 62.5 ms; 2 GB back,
        // 31.25 ms.
        let (d2h, h2d) = copies(1e9, 1.0, 64e9);
        assert_eq!((d2h, h2d), (0.0625, 0.03125));
    }

    #[test]
    fn the_cpu_step_is_memory_bound_at_the_host_s_bandwidth() {
        // 1e9 parameters × 28 bytes = 28 GB at 76.8 GB/s × 0.6 = 46.08 GB/s: 607.6 ms.
        let t = cpu_step(1e9, 1.0, 28.0, 76.8e9);
        assert!((t - 28.0 / 46.08).abs() < 1e-12, "{t}");
    }

    #[test]
    fn the_slowest_of_the_pipelined_parts_sets_the_optimizer_step() {
        // GPU share 10 ms; 1e9 parameters half offloaded: copies 31.25 and 15.6 ms over 64
        // GB/s, the CPU 14 GB at 46.08 GB/s, 303.8 ms: it adds 293.8 ms.
        let a = added(0.010, 1e9, 0.5, 28.0, (64e9, 76.8e9));
        assert!((a - (14.0 / 46.08 - 0.010)).abs() < 1e-12, "{a}");
        // A fast host (Grace, 256 GB/s a GPU: 14/153.6 = 91.1 ms) over a slow link (4 GB/s:
        // 2 GB of gradients, 500 ms): the link sets it.
        let a = added(0.010, 1e9, 0.5, 28.0, (4e9, 256e9));
        assert!((a - 0.490).abs() < 1e-12, "{a}");
        // A GPU share slower than everything the host does: nothing added.
        assert_eq!(added(10.0, 1e9, 0.5, 28.0, (64e9, 76.8e9)), 0.0);
        assert_eq!(added(0.010, 1e9, 0.0, 28.0, (64e9, 76.8e9)), 0.0);
    }

    fn detailed(f: f64) -> crate::cost::step::detailed::Detailed {
        crate::cost::step::detailed::Detailed {
            step: crate::cost::step::Step {
                seq_len: 8192,
                micro_batch: 1,
                recompute: crate::cost::step::Recompute::None,
                schedule: crate::cost::step::Schedule::OneFOneB,
                sequence_parallel: false,
                tp_comm_overlap: false,
                precision: crate::cost::step::precision::Precision::Bf16,
                global_batch_tokens: 16 * 1024 * 1024,
            },
            options: crate::cost::step::detailed::Options {
                offload_optimizer: Fraction::new("--offload-optimizer", f).unwrap(),
                ..Default::default()
            },
        }
    }

    /// Llama 3 8B at TP 1, PP 1, ZeRO 1 on the default brief's GPUs.
    fn layout(brief: &crate::brief::Brief) -> (crate::model::Shape, crate::model::layout::Layout) {
        use crate::model::layout::{Layout, ZeroStage};
        let s = crate::model::preset("8b").unwrap();
        let l = Layout::new(brief, &s, 1, 1, ZeroStage::new(1).unwrap()).unwrap();
        (s, l)
    }

    #[test]
    fn offloading_f_of_the_optimizer_moves_f_of_its_state_to_the_host() {
        let brief = crate::brief::Brief::default();
        let (s, l) = layout(&brief);
        let memory = |f| detailed(f).memory(&s, &l).unwrap();
        let (none, half, all) = (memory(0.0), memory(0.5), memory(1.0));
        // The GPU's state: 12 bytes × n, n the parameters of this GPU's ZeRO 1 shard: Llama 3
        // 8B's 8,030,261,248 over DP 2,048, 3,921,026 (47.05 MB of state).
        let n = none.optimizer / 12.0;
        assert_eq!((l.dp, n), (2048, 3_921_026.0));
        // F = 1: all of it leaves the GPU; the host holds 16 bytes a parameter, 62.7 MB.
        assert_eq!(all.optimizer, 0.0);
        let host =
            |m: &crate::cost::memory::Memory| m.detail.as_ref().unwrap().stage.optimizer_host_gb;
        assert!((host(&all) - 16.0 * n / 1e9).abs() < 1e-9, "{}", host(&all));
        // F = 0.5: half stays (23.5 MB), and the host holds half of F = 1's (31.4 MB).
        assert_eq!(half.optimizer, none.optimizer * 0.5);
        assert!((host(&half) - 8.0 * n / 1e9).abs() < 1e-9);
        assert_eq!(host(&none), 0.0);
        // Nothing else moves.
        let rest = |m: &crate::cost::memory::Memory| (m.weights, m.gradients, m.activations);
        assert_eq!(rest(&half), rest(&none));
        assert_eq!(rest(&all), rest(&none));
    }

    #[test]
    fn the_host_s_part_is_the_slowest_of_copies_and_cpu_past_the_gpu_s_share() {
        use crate::cost::step_time::{options::TimeOptions, step_time};
        let mut brief = crate::brief::Brief::default();
        let (s, l) = layout(&brief);
        let opts = TimeOptions::default();
        let n = detailed(0.0).memory(&s, &l).unwrap().optimizer / 12.0;
        let time = |b: &crate::brief::Brief, f| {
            step_time(&b.machine(), &s, &l, &detailed(f), &opts)
                .unwrap()
                .breakdown
        };
        let none = time(&brief, 0.0);
        assert_eq!(none.optimizer_offload, 0.0);
        // F = 1 on the default host (76.8 GB/s × 0.6): the CPU's 28·n bytes outlast the
        // copies (4·n and 2·n bytes at 64 GB/s) and the GPU's share (nothing but the casts,
        // none in BF16): the optimizer step is 28 × 3,921,026 / 46.08e9 = 2.383 ms (the
        // gradients' copy 15.7 MB / 64 GB/s = 0.245 ms, the weights' 0.123 ms).
        let all = time(&brief, 1.0);
        assert_eq!(all.optimizer, 0.0);
        let cpu = 28.0 * n / 46.08e9;
        assert!(
            (all.optimizer_offload - cpu).abs() < 1e-9 * cpu,
            "{}",
            all.optimizer_offload
        );
        // F = 0.5: the GPU steps half as long; the CPU's half outlasts it.
        let half = time(&brief, 0.5);
        assert!((half.optimizer - none.optimizer / 2.0).abs() < 1e-15);
        assert!((half.optimizer + half.optimizer_offload - cpu / 2.0).abs() < 1e-9 * cpu);
        // A slow link (1 GB/s) and a fast host: the gradients' 4·n bytes set it, 15.7 ms.
        brief.topology.host_link_gbps = 1.0;
        brief.topology.host_memory_gbps = 1e4;
        let slow = time(&brief, 1.0);
        assert!((slow.optimizer_offload - 4.0 * n / 1e9).abs() < 1e-9 * n);
        // Everything else in the step is the same.
        assert_eq!((slow.compute, slow.dp_comm), (none.compute, none.dp_comm));
    }

    #[test]
    fn the_fraction_is_kept_in_hundredths_and_reads_back_as_given() {
        let f = |x| Fraction::new("--offload-optimizer", x);
        assert_eq!(f(0.5).unwrap().get(), 0.5);
        assert_eq!(f(0.3).unwrap().to_string(), "0.3");
        assert_eq!(f(1.0).unwrap().get(), 1.0);
        assert!(f(0.0).unwrap().is_zero());
        assert_eq!(
            f(0.125).unwrap_err().to_string(),
            "invalid --offload-optimizer = 0.125: a fraction of the optimizer's parameters from 0 to 1, in steps of 0.01"
        );
        assert!(f(-0.1).is_err() && f(f64::NAN).is_err() && f(1.5).is_err());
        let json = serde_json::to_string(&f(0.25).unwrap()).unwrap();
        assert_eq!(json, "0.25");
        assert_eq!(f(0.07).unwrap().to_string(), "0.07");
        assert!(serde_json::from_str::<Fraction>("2").is_err());
    }

    #[test]
    fn megatron_s_refusals_name_the_value() {
        let e = |f, s| offload_allowed(f, s).unwrap_err().to_string();
        assert!(offload_allowed(1.0, setting()).is_ok());
        assert!(offload_allowed(
            0.0,
            Setting {
                zero: 0,
                ..setting()
            }
        )
        .is_ok());
        assert_eq!(
            e(1.5, setting()),
            "invalid --offload-optimizer = 1.5: a fraction of the optimizer's parameters from 0 to 1"
        );
        let zero = e(
            0.5,
            Setting {
                zero: 0,
                ..setting()
            },
        );
        assert!(
            zero.starts_with("invalid --offload-optimizer = 0.5: 0 at ZeRO 0"),
            "{zero}"
        );
        let stack = e(
            1.0,
            Setting {
                stack: Stack::Torchtitan,
                ..setting()
            },
        );
        assert!(stack.contains("--stack megatron-te"), "{stack}");
        let states = Setting {
            states: OptimizerStates::Bf16,
            ..setting()
        };
        assert!(e(1.0, states).contains("FP32 moments"));
        let fp8 = Setting {
            fp8_params_not_delayed: true,
            ..setting()
        };
        assert!(e(1.0, fp8).contains("--fp8-recipe delayed"));
    }
}
