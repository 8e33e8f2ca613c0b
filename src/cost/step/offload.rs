//! Host-memory offload of activations (`--offload-activations N`): Megatron-core's
//! `--cpu-offloading-num-layers N`, which runs Transformer Engine's
//! `get_cpu_offload_context(enabled, num_layers=N, model_layers=L, activations=True,
//! weights=False)`.
//!
//! What Megatron-core and Transformer Engine do (Megatron-LM @d98e8a64,
//! `megatron/core/transformer/transformer_config.py` and `megatron/training/arguments.py`;
//! Transformer Engine @d0067d0d, its CPU-offloading guide, docs/features/other_optimizations/cpu_offloading):
//!
//! - `N` counts transformer layers of the whole model: `--cpu-offloading-num-layers N > 0`
//!   turns `cpu_offloading` on (`arguments.py`, since Megatron-LM 310671436c, Oct 2025), and
//!   `0 ≤ N < L` ("CPU offloading can be done only for layers less than L").
//! - It refuses pipeline parallelism ("Currently there is no support for Pipeline parallelism
//!   with CPU offloading") and any activation recomputation ("CPU offloading does not work when
//!   activation recomputation is enabled"), so the model's one stage holds all `L` layers and
//!   one micro-batch's activations at a time.
//! - The first `N` layers' saved tensors are copied to pinned host memory as their forward
//!   saves them and copied back before their backward; "at most `L − N` sets of activations are
//!   on GPU at any time; both compute and reload may be stalled to enforce this limit". The
//!   sets in flight over the link are within those `L − N`: no buffer beyond them.
//!   With `N = L − 1` one set is left, "compute and transfers cannot overlap".
//!
//! Time: each offloaded layer moves its saved bytes `A` to the host after its forward and back
//! before its backward, one direction each, at the host link's bandwidth `B`: `x = A/B` a layer
//! and direction. The copies run on their own stream, one after another, behind the compute of
//! the layers between the first offloaded layer's forward and the last layer's (which waits for
//! the last copy to free a slot): `L − 2` layers' forward, and likewise `L − 2` layers' backward
//! for the reloads. Exposed per micro-batch and direction: `max(0, N·x − (L − 2)·t)`, `t` one
//! layer's forward or backward; with one set left on the GPU (`L − N = 1`) nothing hides and
//! every copy is exposed (`N·x`). The copies also read and write HBM, which this leaves out
//! (Transformer Engine: "unlikely to affect compute-bound operations like GEMMs").

use crate::cost::step::stack::Stack;
use crate::cost::step::Recompute;
use crate::error::{Error, Result};

/// Layers whose activations stay on the GPU when `offloaded` of a stage's `layers` are
/// offloaded: Transformer Engine keeps at most `L − N` sets on the GPU, the transfers in
/// flight among them.
pub fn kept_layers(layers: u64, offloaded: u64) -> u64 {
    layers.saturating_sub(offloaded)
}

/// Seconds a micro-batch waits for its offload copies in one direction: `max(0, N·x − (L −
/// 2)·t)` with `x` one layer's copy and `t` one layer's compute in that direction; `N·x` when one
/// set is left on the GPU (`L − N ≤ 1`), which hides nothing.
pub fn exposed_one_way(layers: u64, offloaded: u64, copy: f64, compute: f64) -> f64 {
    if offloaded == 0 {
        return 0.0;
    }
    let transfer = offloaded as f64 * copy;
    let window = if kept_layers(layers, offloaded) >= 2 {
        layers.saturating_sub(2) as f64 * compute
    } else {
        0.0
    };
    (transfer - window).max(0.0)
}

/// Seconds a micro-batch waits for its offload copies: the offloads behind the forward and the
/// reloads behind the backward ([`exposed_one_way`]), with `bytes` one layer's saved
/// activations, `link` the host link's bytes a second each way, and `forward` and `backward`
/// one layer's seconds.
pub fn exposed(
    layers: u64,
    offloaded: u64,
    bytes: f64,
    link: f64,
    (forward, backward): (f64, f64),
) -> f64 {
    let copy = bytes / link;
    exposed_one_way(layers, offloaded, copy, forward)
        + exposed_one_way(layers, offloaded, copy, backward)
}

/// Whether `offloaded` layers of a model of `layers` go with the step as Megatron-core runs
/// them: fewer than the model's layers, on the megatron-te stack, PP 1, no recomputation.
pub fn offload_allowed(
    offloaded: u64,
    layers: u64,
    name: &str,
    stack: Stack,
    pp: u64,
    recompute: Recompute,
) -> Result<()> {
    if offloaded == 0 {
        return Ok(());
    }
    let flag = "--offload-activations";
    if offloaded >= layers {
        return Err(Error::invalid(
            flag,
            offloaded,
            format!(
                "fewer than the {layers} layers of {name} (Megatron-core offloads at most L − 1)"
            ),
        ));
    }
    if stack != Stack::MegatronTe {
        return Err(Error::invalid(
            flag,
            offloaded,
            format!("0 on the {stack} stack (activation offload is Megatron-core's --cpu-offloading-num-layers: --stack megatron-te)"),
        ));
    }
    if pp > 1 {
        return Err(Error::invalid(
            flag,
            offloaded,
            format!("0 under PP {pp} (Megatron-core: \"no support for Pipeline parallelism with CPU offloading\")"),
        ));
    }
    if recompute != Recompute::None {
        return Err(Error::invalid(
            flag,
            offloaded,
            format!(
                "0 with --recompute {} (Megatron-core: \"CPU offloading does not work when activation recomputation is enabled\")",
                recompute.name()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_keeps_the_sets_of_the_layers_not_offloaded() {
        // Transformer Engine: at most L − N sets on the GPU. 80 layers, 30 offloaded: 50.
        assert_eq!(kept_layers(80, 30), 50);
        assert_eq!(kept_layers(80, 0), 80);
    }

    #[test]
    fn compute_hides_the_copies_until_the_link_is_too_slow() {
        // 80 layers, 30 offloaded, a layer's forward 10 ms: the copies hide behind 78 layers'
        // forward, 780 ms. A copy of 20 ms: 600 ms of copies, none exposed.
        assert_eq!(exposed_one_way(80, 30, 0.020, 0.010), 0.0);
        // A copy of 30 ms (a slow link): 900 ms of copies, 900 − 780 = 120 ms exposed.
        assert!((exposed_one_way(80, 30, 0.030, 0.010) - 0.120).abs() < 1e-12);
        // One set left on the GPU (N = L − 1 = 79): nothing hides, 79 × 1 ms.
        assert!((exposed_one_way(80, 79, 0.001, 0.010) - 0.079).abs() < 1e-12);
        // Nothing offloaded, nothing exposed.
        assert_eq!(exposed_one_way(80, 0, 1.0, 0.0), 0.0);
    }

    #[test]
    fn both_directions_count_each_behind_its_own_compute() {
        // 1 GB a layer on a 64 GB/s link: 15.625 ms a copy. 32 layers, 16 offloaded: 250 ms
        // of copies each way, behind 30 layers' forward (30 × 5 ms = 150 ms: 100 ms exposed)
        // and backward (30 × 10 ms = 300 ms: none).
        let t = exposed(32, 16, 1e9, 64e9, (0.005, 0.010));
        assert!((t - 0.100).abs() < 1e-12, "{t}");
    }

    /// Llama 3 8B (32 layers) on one GPU's stage, TP 1 × PP 1, ZeRO 1, no recomputation, one
    /// sequence of 8,192 a micro-batch, with `offloaded` layers offloaded.
    fn detailed(offloaded: u16) -> crate::cost::step::detailed::Detailed {
        use crate::cost::step::{Schedule, Step};
        crate::cost::step::detailed::Detailed {
            step: Step {
                micro_batch: 1,
                seq_len: 8192,
                recompute: Recompute::None,
                sequence_parallel: false,
                schedule: Schedule::OneFOneB,
                tp_comm_overlap: false,
                precision: crate::cost::step::precision::Precision::Bf16,
                global_batch_tokens: 16 * 1024 * 1024,
            },
            options: crate::cost::step::detailed::Options {
                offload_activations: offloaded,
                ..Default::default()
            },
        }
    }

    fn layout(brief: &crate::brief::Brief) -> (crate::model::Shape, crate::model::layout::Layout) {
        use crate::model::layout::{Layout, ZeroStage};
        let s = crate::model::preset("8b").unwrap();
        let l = Layout::new(brief, &s, 1, 1, ZeroStage::new(1).unwrap()).unwrap();
        (s, l)
    }

    #[test]
    fn offloading_n_of_l_layers_keeps_l_minus_n_on_the_gpu_and_the_rest_in_host_memory() {
        // 8B, 32 layers, 16 offloaded: the GPU keeps 16 of the 32 layers' activations (TE: at
        // most L − N sets), half of them, and the host the other half, one micro-batch in flight
        // at PP 1. Everything else is the same to the bit.
        let brief = crate::brief::Brief::default();
        let (s, l) = layout(&brief);
        let all = detailed(0).memory(&s, &l).unwrap();
        let half = detailed(16).memory(&s, &l).unwrap();
        assert_eq!(half.activations, all.activations / 2.0);
        let stage = half.detail.unwrap().stage;
        assert_eq!((stage.offloaded_layers, stage.in_flight), (16, 1.0));
        assert_eq!(stage.host_gb, all.activations / 2.0 / 1e9);
        assert_eq!(all.detail.unwrap().stage.host_gb, 0.0);
        let rest = |m: &crate::cost::memory::Memory| (m.weights, m.gradients, m.optimizer);
        assert_eq!(rest(&half), rest(&all));
    }

    #[test]
    fn the_step_waits_for_the_copies_only_when_the_link_is_slower_than_the_compute() {
        use crate::cost::step_time::{options::TimeOptions, step_time};
        // 8B as above, 16 layers offloaded. A layer's saved activations: 1,141,899,264 bytes
        // (about 34·s·h, s = 8,192, h = 4,096), 17.8 ms a copy over PCIe Gen5's 64 GB/s and
        // 5.1 ms over a GB200's 225 GB/s share of NVLink-C2C.
        let mut brief = crate::brief::Brief::default();
        let (s, l) = layout(&brief);
        let opts = TimeOptions::default();
        let time = |brief: &crate::brief::Brief, n: u16| {
            step_time(&brief.machine(), &s, &l, &detailed(n), &opts).unwrap()
        };
        let memory = |n| detailed(n).memory(&s, &l).unwrap();
        let a = (memory(0).activations - memory(16).activations) / 16.0;
        assert_eq!(a, 1_141_899_264.0);
        let off = time(&brief, 0);
        // PCIe: 16 copies, 285 ms each way a micro-batch, outlast 30 layers' forward: a wait.
        assert_eq!(brief.topology.host_link_gbps, 64.0);
        assert!(time(&brief, 16).breakdown.offload > 0.0);
        // NVLink-C2C: 82 ms each way hide behind the compute; the step is the one without.
        brief.topology.host_link_gbps = 225.0;
        let on = time(&brief, 16);
        assert_eq!(on.breakdown.offload, 0.0);
        assert_eq!(on.step_seconds, off.step_seconds);
        // Links slow enough that both directions wait: the difference between two of them is
        // m micro-batches × 2 directions × N layers × A bytes × (1/B₁ − 1/B₂), the compute
        // cancelling. A from the memory model: the activations the GPU no longer keeps, a layer.
        let m = memory(0).detail.unwrap().stage.micro_batches as f64;
        brief.topology.host_link_gbps = 0.5;
        let slow = time(&brief, 16).breakdown.offload;
        brief.topology.host_link_gbps = 0.25;
        let slower = time(&brief, 16).breakdown.offload;
        assert!(slow > 0.0);
        let expected = m * 2.0 * 16.0 * a * (1.0 / 0.25e9 - 1.0 / 0.5e9);
        assert!(
            ((slower - slow) / expected - 1.0).abs() < 1e-9,
            "{slow} {slower} {expected}"
        );
        // The wait is a part of the step.
        assert_eq!(
            time(&brief, 16).step_seconds,
            time(&brief, 16).breakdown.total()
        );
    }

    #[test]
    fn megatron_s_refusals_name_the_value() {
        let ok = offload_allowed(30, 80, "70b", Stack::MegatronTe, 1, Recompute::None);
        assert!(ok.is_ok());
        let too_many = offload_allowed(80, 80, "70b", Stack::MegatronTe, 1, Recompute::None);
        let text = too_many.unwrap_err().to_string();
        assert!(
            text.contains("--offload-activations") && text.contains("80"),
            "{text}"
        );
        assert!(offload_allowed(30, 80, "70b", Stack::MegatronTe, 2, Recompute::None).is_err());
        assert!(offload_allowed(30, 80, "70b", Stack::MegatronTe, 1, Recompute::Full).is_err());
        assert!(offload_allowed(30, 80, "70b", Stack::Torchtitan, 1, Recompute::None).is_err());
        assert!(offload_allowed(0, 80, "70b", Stack::Torchtitan, 4, Recompute::Full).is_ok());
    }
}
