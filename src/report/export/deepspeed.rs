//! DeepSpeed: the `ds_config.json` of a plan.
//!
//! Keys as DeepSpeed's configuration reference (deepspeed.ai/docs/config-json, source
//! `deepspeedai/DeepSpeed/docs/_pages/config-json.md`) names them, checked against the DeepSpeed 0.19.8 code
//! (`runtime/constants.py`, `runtime/zero/config.py`,
//! `runtime/activation_checkpointing/config.py`). Every key is written out, because the
//! documentation's and the code's defaults differ (gradient clipping, overlap_comm, the ZeRO-3
//! prefetch bucket). The JSON has no tensor- or pipeline-parallel degree: those are the
//! training script's (Megatron-DeepSpeed's `--tensor-model-parallel-size`, a `PipelineModule`'s
//! `num_stages`), and `train_batch_size` is checked against the data-parallel ranks.
//!
//! What DeepSpeed's configuration cannot say is refused by name: context parallelism (its
//! `sequence_parallel_size` is DeepSpeed-Ulysses, an all-to-all that splits attention by heads,
//! not the ring or all-gather of K/V the plan's CP is), FP8 (its precision sections are `bf16`
//! and `fp16`; FP8 training needs Transformer Engine's layers and `fp8_autocast` in the
//! training script), and hybrid sharding (MiCS's `mics_shard_size`, DeepSpeed's ZeRO 3 shard
//! groups, was removed and 0.19.8's config rejects it; hpZ's `zero_hpz_partition_size` only
//! keeps a secondary copy of the weights inside a node, with the state still sharded over every
//! rank; ZeRO 1 and 2 shard over the whole data-parallel group).

use serde_json::{json, Value};

use super::exporter::Launcher;
use super::launch::{beyond_stack, Launch, Setting};
use crate::cost::step::precision::Precision;
use crate::cost::step::Recompute;
use crate::error::{Error, Result};

/// A DeepSpeed configuration file.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeepSpeed;

/// The configuration as a JSON value.
pub fn config(l: &Launch) -> Result<Value> {
    let stage = l.zero().get();
    let refuse = |what: String| Error::invalid("--format", "deepspeed", what);
    let layout = &l.layout;
    if l.shape.experts.is_some() {
        return Err(refuse(format!(
            "a dense model: {} is a mixture of experts, whose layers DeepSpeed-MoE builds in the training script (deepspeed.moe.layer.MoE), not from the config; --format megatron writes one",
            l.shape.name
        )));
    }
    if l.shape.attention.latent.is_some() {
        return Err(refuse(format!(
            "grouped-query attention: {} has multi-head latent attention, which the training script builds, not DeepSpeed's config; --format megatron writes one",
            l.shape.name
        )));
    }
    if l.shape.mtp > 0 {
        return Err(refuse(format!(
            "a model without multi-token prediction: {} trains {} MTP depth(s), which the training script builds, not DeepSpeed's config; --format megatron writes them (--mtp-num-layers)",
            l.shape.name, l.shape.mtp
        )));
    }
    // DeepSpeed's PipelineEngine runs one schedule, 1F1B (`runtime/pipe/schedule.py`'s
    // TrainSchedule).
    if l.step.schedule != crate::cost::step::Schedule::OneFOneB {
        return Err(refuse(format!(
            "a 1f1b plan: DeepSpeed's PipelineEngine runs 1F1B alone (TrainSchedule), not {}; --format torchtitan writes zbv and dualpipev, --format megatron interleaving",
            l.step.schedule
        )));
    }
    if layout.cp > 1 {
        return Err(refuse(format!(
            "a plan without context parallelism: cp = {} splits each sequence with K/V exchanged between its slices, and DeepSpeed's config has no such scheme (its sequence_parallel_size is DeepSpeed-Ulysses, an all-to-all splitting attention by heads, a different one)",
            layout.cp
        )));
    }
    if l.precision() != Precision::Bf16 {
        return Err(refuse(format!(
            "a BF16 plan: precision = {} has no DeepSpeed config setting (bf16 and fp16 only); FP8 training needs Transformer Engine's layers and fp8_autocast in the training script",
            l.precision()
        )));
    }
    if layout.replicate > 1 {
        let why = if stage == 3 {
            "DeepSpeed 0.19.8 has no ZeRO 3 shard groups: MiCS's mics_shard_size was removed and its config rejects it, and hpZ's zero_hpz_partition_size keeps a secondary copy of the weights, not replicas of the sharded state"
        } else {
            "DeepSpeed's ZeRO 1 and 2 shard over the whole data-parallel group"
        };
        return Err(refuse(format!(
            "one shard group: replicate = {} with ZeRO {stage} asks for hybrid sharding, and {why}",
            layout.replicate
        )));
    }
    // DeepSpeed offloads to the host only what it checkpoints (activation_checkpointing's
    // cpu_checkpointing), inputs of recomputed layers, not a layer's saved activations.
    if l.options.offload_activations > 0 {
        return Err(refuse(format!(
            "a plan without activation offload: --offload-activations {} sends layers' saved activations to host memory (Megatron-core's --cpu-offloading-num-layers), and DeepSpeed's config offloads only activation checkpoints (cpu_checkpointing), which need recomputation; --format megatron writes it",
            l.options.offload_activations
        )));
    }
    // DeepSpeed's ZeRO-Offload (zero_optimization.offload_optimizer) is its own engine: the
    // whole state and DeepSpeedCPUAdam, its own copies and overlap; the plan timed
    // Megatron-core's hybrid optimizer.
    if l.options.offload_optimizer.get() > 0.0 {
        return Err(refuse(format!(
            "a plan without optimizer offload: --offload-optimizer {} is timed as Megatron-core's hybrid optimizer (--optimizer-cpu-offload, its fraction, copies and overlap), not DeepSpeed's ZeRO-Offload; --format megatron writes it",
            l.options.offload_optimizer
        )));
    }
    // The config's optimizer is DeepSpeed's Adam; Muon's state and step are Megatron-core's.
    if l.options.optimizer != crate::cost::step::recipe::Optimizer::AdamW {
        return Err(refuse(format!(
            "a plan with AdamW: --optimizer {} is costed as Megatron-core's; --format megatron writes it",
            l.options.optimizer.name()
        )));
    }
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
    // The batch law's peak learning rate, as DeepSpeed's own AdamW (built from the config
    // only when the training script passes no optimizer to deepspeed.initialize, which a note
    // beside the file says), with the settings the law was fitted with where its source
    // states them.
    if let Some(lr) = l.learning_rate {
        // Four significant figures, as the other launchers write it.
        let lr: f64 = format!("{lr:.3e}").parse().unwrap_or(lr);
        let mut params = json!({ "lr": lr });
        if let Some(a) = l.adamw {
            let p = params.as_object_mut().expect("an object");
            p.insert("betas".into(), json!([a.beta1, a.beta2]));
            p.insert("weight_decay".into(), json!(a.weight_decay));
        }
        config.as_object_mut().expect("an object").insert(
            "optimizer".into(),
            json!({ "type": "AdamW", "params": params }),
        );
    }
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

/// What the training script sets and DeepSpeed's JSON does not, as `check`'s flags: the model,
/// the tokens the iterations train on, the sequence, TP and PP, the step beyond its batch, the
/// stack and the plan's settings beyond it ([`beyond_stack`]) — what `check --from` takes
/// beside the file to grade the plan again.
pub fn script_flags(l: &Launch) -> Vec<String> {
    let s = &l.shape;
    let preset = crate::model::preset(&s.name)
        .is_ok_and(|p| p.same_dimensions(s) && p.architecture == s.architecture);
    let mut flags = vec![if preset {
        format!("--model {}", s.name)
    } else {
        format!("--model-config {}/config.json", s.name)
    }];
    let step = &l.step;
    let on = |b: bool| if b { "on" } else { "off" };
    flags.extend([
        format!("--tokens {}", l.trained_tokens()),
        format!("--seq-len {}", step.seq_len),
        format!("--tp {}", l.layout.tp),
        format!("--pp {}", l.layout.pp),
        format!("--recompute {}", step.recompute.name()),
        format!("--sequence-parallel {}", on(step.sequence_parallel)),
        format!("--schedule {}", step.schedule),
        format!("--tp-comm-overlap {}", on(step.tp_comm_overlap)),
        format!("--stack {}", l.options.stack),
    ]);
    let (run, assumed) = beyond_stack(&l.options);
    flags.extend(run.iter().chain(&assumed).map(Setting::to_string));
    flags
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
        if launch.learning_rate.is_some() {
            lines.push(
                "note: DeepSpeed builds the config's AdamW (the batch law's learning rate) only when the training script passes no optimizer to deepspeed.initialize; a script that builds its own sets the learning rate there".to_string(),
            );
        }
        lines.push(format!(
            "note: DeepSpeed's JSON has no parallel degrees: set TP {} and PP {} in the training script (Megatron-DeepSpeed flags or a PipelineModule)",
            launch.layout.tp, launch.layout.pp
        ));
        // The plan's TP overlap (Megatron-core's --tp-comm-overlap on Transformer Engine's
        // userbuffers) is the training script's too, if it has it at all: said, so that a
        // plan timed with it is not taken for DeepSpeed's pace.
        if launch.step.tp_comm_overlap && launch.layout.tp > 1 {
            lines.push(format!(
                "note: the plan was timed with TP communication hidden behind the GEMMs (the {} stack's --tp-comm-overlap), which only a training script built on Transformer Engine's overlapped layers does; --stack megatron-deepspeed grades it without",
                launch.options.stack
            ));
        }
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
        lines.push(format!(
            "note: check --from grades this file as planned given the training script's part: {}",
            script_flags(launch).join(" ")
        ));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layout::Degrees;

    fn launch(gpus: u64, degrees: Degrees, zero: u8) -> Launch {
        crate::report::export::launch::launch_with("70b", gpus, degrees, zero)
    }

    #[test]
    fn a_plan_timed_with_tp_overlap_says_so_beside_the_json() {
        // The default stack overlaps TP (with SP): a note says the pace assumed it.
        let mut l = launch(512, Degrees::tp_pp(8, 4), 1);
        assert!(l.step.tp_comm_overlap);
        let said = |l: &Launch| {
            DeepSpeed.side_notes(l).iter().any(|n| {
                n.starts_with("note: the plan was timed with TP communication hidden")
                    && n.contains("megatron-te stack's --tp-comm-overlap")
            })
        };
        assert!(said(&l));
        l.step.tp_comm_overlap = false;
        assert!(!said(&l));
    }

    #[test]
    fn the_note_names_what_check_from_needs_beside_the_json() {
        use crate::cost::step::stack::StageSplit;
        let mut l = launch(512, Degrees::tp_pp(8, 4), 1);
        l.options.stages = StageSplit::Llama3;
        l.options.reserve_gb = 3.0;
        let notes = DeepSpeed.side_notes(&l);
        let note = notes
            .iter()
            .find_map(|n| {
                n.strip_prefix(
                    "note: check --from grades this file as planned given the training script's part: ",
                )
            })
            .unwrap();
        assert_eq!(
            note,
            format!(
                "--model llama3-70b --tokens {} --seq-len 8192 --tp 8 --pp 4 --recompute full --sequence-parallel on --schedule 1f1b --tp-comm-overlap on --stack megatron-te --stages llama3 --reserve-gb 3",
                l.trained_tokens()
            )
        );
    }

    /// The one-line refusal of `l`.
    fn refusal(l: &Launch) -> String {
        let e = config(l).unwrap_err().to_string();
        assert!(
            !e.contains('\n') && e.starts_with("invalid --format = deepspeed: "),
            "{e}"
        );
        e
    }

    #[test]
    fn what_deepspeed_s_config_cannot_say_is_refused_by_name() {
        let cp = Degrees {
            ep: 1,
            etp: None,
            tp: 4,
            cp: 2,
            pp: 4,
            replicate: 1,
        };
        let e = refusal(&launch(64, cp, 1));
        assert!(e.contains("cp = 2") && e.contains("Ulysses"), "{e}");
        let mut fp8 = launch(2048, Degrees::tp_pp(8, 8), 1);
        fp8.step.precision = Precision::Fp8;
        let e = refusal(&fp8);
        assert!(
            e.contains("precision = fp8") && e.contains("Transformer Engine"),
            "{e}"
        );
        fp8.step.precision = Precision::Mxfp8;
        assert!(refusal(&fp8).contains("precision = mxfp8"));
        let hsdp = |zero| {
            launch(
                2048,
                Degrees {
                    ep: 1,
                    etp: None,
                    tp: 8,
                    cp: 1,
                    pp: 1,
                    replicate: 4,
                },
                zero,
            )
        };
        let e = refusal(&hsdp(3));
        assert!(
            e.contains("replicate = 4") && e.contains("mics_shard_size"),
            "{e}"
        );
        let e = refusal(&hsdp(1));
        assert!(e.contains("replicate = 4 with ZeRO 1"), "{e}");
        // The same layouts without them export.
        assert!(config(&launch(2048, Degrees::tp_pp(8, 1), 3)).is_ok());
    }
}
