//! Per-GPU memory under the plate model (SPEC.md §3): mixed-precision training with Adam,
//! ZeRO sharding over the data-parallel group, and full activation recomputation.
//!
//! With `Ψ = N / (TP·PP)` the parameters one GPU holds (context parallelism replicates them;
//! ZeRO shards over the layout's shard group, `DP/replicate × CP`, which is DP without CP or
//! hybrid sharding):
//!
//! | component | bytes | sharded over DP from ZeRO stage |
//! |---|---|---|
//! | weights, BF16 | 2Ψ | 3 |
//! | gradients, BF16 | 2Ψ | 2 |
//! | optimizer: FP32 master weights, Adam m and v | 12Ψ | 1 |
//! | activations | 2·s·h·⌈L/PP⌉ / TP | — |
//!
//! These are the 16 bytes per parameter of Rajbhandari et al., "ZeRO", SC 2020 §3.1 (with
//! K = 12), which give `16Ψ`, `4Ψ + 12Ψ/DP`, `2Ψ + 14Ψ/DP`, `16Ψ/DP` for stages 0–3. Under full
//! recomputation a layer keeps only its BF16 input, `2·s·h` bytes for one sequence of `s`
//! tokens (Korthikanti et al., arXiv:2205.05198, §4.3); with TP the input is split along the
//! sequence (sequence parallelism). The calibration on an H200 (`data/calibration/`) measured
//! 16.08 bytes per parameter and exactly `2·s·h` bytes per layer.

use super::breakdown::Memory;
use crate::model::layout::Layout;
use crate::model::Shape;

/// Bytes per parameter of BF16 weights.
pub const WEIGHT_BYTES: f64 = 2.0;
/// Bytes per parameter of BF16 gradients.
pub const GRADIENT_BYTES: f64 = 2.0;
/// Bytes per parameter of the optimizer: FP32 master weights (4), Adam m (4) and v (4).
pub const OPTIMIZER_BYTES: f64 = 12.0;
/// Bytes kept per activation value (BF16).
pub const ACTIVATION_BYTES: f64 = 2.0;

/// Parameters one GPU holds before ZeRO: `Ψ = N / (TP·PP)`.
pub fn params_per_gpu(params: u64, layout: &Layout) -> f64 {
    params as f64 / (layout.tp * layout.pp) as f64
}

/// `bytes` divided over the data-parallel group when `sharded`, else whole.
pub(crate) fn shard(bytes: f64, sharded: bool, dp: u64) -> f64 {
    if sharded {
        bytes / dp as f64
    } else {
        bytes
    }
}

/// Stored activations under full recomputation for one sequence of `seq_len` tokens:
/// `2·s·h·⌈L/PP⌉ / (TP·CP)` bytes — each layer of the busiest stage keeps its BF16 input,
/// split over TP by sequence parallelism and over CP by context parallelism.
pub fn activation_bytes(shape: &Shape, layout: &Layout, seq_len: u64) -> f64 {
    let layers = layout.layers_on_busiest_stage(shape) as f64;
    ACTIVATION_BYTES * seq_len as f64 * shape.hidden as f64 * layers
        / (layout.tp * layout.cp) as f64
}

/// Routed-expert parameters one GPU holds before ZeRO in the plate model, `Ψ_e = L_moe · E ·
/// P_expert / (EP·ETP·PP)`: the experts spread over EP, split over ETP, their layers over PP
/// (Megatron-core's expert grid, [`crate::model::layout`]); 0 for a dense model.
pub fn expert_params_per_gpu(shape: &Shape, layout: &Layout) -> f64 {
    let Some(e) = &shape.experts else {
        return 0.0;
    };
    let routed = shape.moe_layers() as f64 * f64::from(e.routed) * shape.expert_params() as f64;
    routed / (layout.ep * layout.etp * layout.pp) as f64
}

/// Per-GPU memory of the plate model for `shape` under `layout` at sequence length `seq_len`.
/// With experts, `Ψ` counts the rest of the model over TP·PP and the routed experts add
/// [`expert_params_per_gpu`], their state sharded by ZeRO over the expert data-parallel group.
pub fn plate(shape: &Shape, layout: &Layout, seq_len: u64) -> Memory {
    let mut memory = match &shape.experts {
        None => states(
            params_per_gpu(shape.params(), layout),
            layout,
            layout.shard_group(),
        ),
        Some(e) => {
            let routed = shape.moe_layers() * u64::from(e.routed) * shape.expert_params();
            let rest = states(
                params_per_gpu(shape.params() - routed, layout),
                layout,
                layout.shard_group(),
            );
            let experts = states(
                expert_params_per_gpu(shape, layout),
                layout,
                layout.expert_shard_group(),
            );
            Memory {
                weights: rest.weights + experts.weights,
                gradients: rest.gradients + experts.gradients,
                optimizer: rest.optimizer + experts.optimizer,
                ..rest
            }
        }
    };
    memory.activations = activation_bytes(shape, layout, seq_len);
    memory
}

/// The weights, gradients and optimizer state of `psi` parameters a GPU holds, sharded by the
/// layout's ZeRO stage over `shards` ranks.
fn states(psi: f64, layout: &Layout, shards: u64) -> Memory {
    let zero = layout.zero;
    Memory {
        weights: shard(WEIGHT_BYTES * psi, zero.shards_weights(), shards),
        gradients: shard(GRADIENT_BYTES * psi, zero.shards_gradients(), shards),
        optimizer: shard(OPTIMIZER_BYTES * psi, zero.shards_optimizer(), shards),
        activations: 0.0,
        detail: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn layout(tp: u64, pp: u64, zero: u8) -> Layout {
        crate::model::layout::layout_70b(tp, pp, zero)
    }

    #[test]
    fn the_starting_plan_needs_about_1140_gb() {
        // 16 × 70,553,706,496 = 1,128,859,303,936 B; activations 2 × 8192 × 8192 × 80
        // = 10,737,418,240 B; total 1,139,596,722,176 B = 1,139.6 GB.
        let m = plate(&preset("70b").unwrap(), &layout(1, 1, 0), 8192);
        assert_eq!(m.total(), 1_139_596_722_176.0);
        assert_eq!(m.activations, 10_737_418_240.0);
    }

    #[test]
    fn zero_stages_match_rajbhandari_et_al() {
        // 16Ψ, 4Ψ + 12Ψ/DP, 2Ψ + 14Ψ/DP, 16Ψ/DP with Ψ = N/(TP·PP).
        let s = preset("70b").unwrap();
        for zero in 0..=3 {
            let l = layout(8, 2, zero);
            let psi = s.params() as f64 / 16.0;
            let dp = l.dp as f64;
            let expected = [
                16.0 * psi,
                4.0 * psi + 12.0 * psi / dp,
                2.0 * psi + 14.0 * psi / dp,
                16.0 * psi / dp,
            ];
            let m = plate(&s, &l, 8192);
            let states = m.weights + m.gradients + m.optimizer;
            let want = expected[zero as usize];
            assert!(
                (states - want).abs() <= 1e-9 * want,
                "stage {zero}: {states} vs {want}"
            );
        }
    }

    #[test]
    fn activations_follow_the_busiest_of_uneven_stages() {
        // 80 layers over PP = 32 stages: ⌈80/32⌉ = 3 layers; 2·8192·8192·3 / 8 bytes.
        let m = plate(&preset("70b").unwrap(), &layout(8, 32, 0), 8192);
        assert_eq!(m.activations, 2.0 * 8192.0 * 8192.0 * 3.0 / 8.0);
    }

    #[test]
    fn the_measured_growth_per_layer_is_two_s_h_bytes() {
        // calibration/README.md: 134,217,728 B per layer at h = 8,192, s = 8,192.
        let s = preset("70b").unwrap();
        let b = Brief {
            gpus: 80,
            ..Brief::default()
        };
        let one_layer_per_stage = Layout::new(&b, &s, 1, 80, ZeroStage::new(0).unwrap()).unwrap();
        let one = plate(&s, &one_layer_per_stage, 8192).activations;
        assert_eq!(one, 134_217_728.0);
    }

    #[test]
    fn gb_are_ten_to_the_nine_bytes() {
        let m = plate(&preset("70b").unwrap(), &layout(1, 1, 0), 8192).in_gb();
        assert!((m.total - 1_139.596_722_176).abs() < 1e-9);
    }
}
