//! DeepSpeed: the `ds_config.json` of a plan.
//!
//! Keys as DeepSpeed's configuration reference (deepspeed.ai/docs/config-json, source
//! `docs/_pages/config-json.md`) names them, checked against the DeepSpeed 0.19.8 code
//! (`runtime/constants.py`, `runtime/zero/config.py`,
//! `runtime/activation_checkpointing/config.py`). Every key is written out, because the
//! documentation's and the code's defaults differ (gradient clipping, overlap_comm, the ZeRO-3
//! prefetch bucket). The JSON has no tensor- or pipeline-parallel degree: those are the
//! training script's (Megatron-DeepSpeed's `--tensor-model-parallel-size`, a `PipelineModule`'s
//! `num_stages`), and `train_batch_size` is checked against the data-parallel ranks.

use serde_json::{json, Value};

use super::exporter::Launcher;
use super::launch::Launch;
use crate::cost::activations::Recompute;
use crate::error::{Error, Result};

/// A DeepSpeed configuration file.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeepSpeed;

/// The configuration as a JSON value.
pub fn config(l: &Launch) -> Result<Value> {
    let stage = l.zero().get();
    // DeepSpeed's PipelineEngine asserts ZeRO stage < 2 (runtime/pipe/engine.py).
    if l.layout.pp > 1 && stage >= 2 {
        return Err(Error::invalid(
            "--format",
            "deepspeed",
            format!(
                "a plan DeepSpeed's pipeline engine can run: PP {} takes ZeRO 0 or 1, not {stage}",
                l.layout.pp
            ),
        ));
    }
    let mut zero = json!({
        "stage": stage,
        "overlap_comm": stage >= 1,
        "contiguous_gradients": true,
        "reduce_bucket_size": 500_000_000u64,
        "allgather_bucket_size": 500_000_000u64,
    });
    if stage == 3 {
        let z = zero.as_object_mut().expect("an object");
        z.insert("stage3_prefetch_bucket_size".into(), json!(50_000_000u64));
        z.insert(
            "stage3_param_persistence_threshold".into(),
            json!(100_000u64),
        );
        z.insert("stage3_max_live_parameters".into(), json!(1_000_000_000u64));
        z.insert("stage3_max_reuse_distance".into(), json!(1_000_000_000u64));
        z.insert(
            "stage3_gather_16bit_weights_on_model_save".into(),
            json!(true),
        );
    }
    let mut config = json!({
        "train_batch_size": l.global_batch,
        "train_micro_batch_size_per_gpu": l.step.micro_batch,
        "gradient_accumulation_steps": l.accumulation(),
        "gradient_clipping": 1.0,
        "steps_per_print": 10,
        "wall_clock_breakdown": false,
        "bf16": { "enabled": true },
        "zero_optimization": zero,
    });
    if l.step.recompute != Recompute::None {
        // Configures deepspeed.checkpointing; the model's layers must call it.
        config.as_object_mut().expect("an object").insert(
            "activation_checkpointing".into(),
            json!({
                "partition_activations": l.layout.tp > 1,
                "contiguous_memory_optimization": false,
                "cpu_checkpointing": false,
                "synchronize_checkpoint_boundary": false,
                "profile": false,
            }),
        );
    }
    Ok(config)
}

/// The configuration, pretty-printed.
pub fn render(l: &Launch) -> Result<String> {
    let text = serde_json::to_string_pretty(&config(l)?)
        .map_err(|e| Error::invalid("--format", "deepspeed", e.to_string()))?;
    Ok(text + "\n")
}

/// JSON holds no comments: the plan, its notes and the parallel degrees DeepSpeed's config has
/// no place for go beside it.
impl Launcher for DeepSpeed {
    const NAME: &'static str = "deepspeed";
    const MEDIA_TYPE: &'static str = "application/json";
    fn render(&self, launch: &Launch) -> Result<String> {
        render(launch)
    }
    fn side_notes(&self, launch: &Launch) -> Vec<String> {
        let mut lines = vec![format!("trainplan: {}", launch.summary())];
        lines.extend(launch.notes.iter().map(|note| format!("note: {note}")));
        lines.push(format!(
            "note: DeepSpeed's JSON has no parallel degrees: set TP {} and PP {} in the training script (Megatron-DeepSpeed flags or a PipelineModule)",
            launch.layout.tp, launch.layout.pp
        ));
        // Nor has it the model: the training script builds it, and must build this one.
        let (s, a) = (&launch.shape, &launch.shape.architecture);
        lines.push(format!(
            "note: DeepSpeed's JSON has no model either: build {} with {}, stages of {} layers",
            s.name,
            a.describe(),
            launch
                .stages
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        lines
    }
}
