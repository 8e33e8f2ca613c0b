//! A DeepSpeed `ds_config.json` read back (the keys `export --format deepspeed` writes).
//!
//! The JSON states the micro-batch, the accumulation, the global batch (so DP =
//! `train_batch_size / (micro · accumulation)`), the ZeRO stage, BF16 and whether activations
//! are checkpointed. It has no model, no TP or PP degree, no sequence length and no
//! training length: those come from the flags given with it (`--model-config`, `--tp`,
//! `--pp`, `--seq-len`, `--tokens`), and a checkpointed model is graded with full
//! recomputation unless `--recompute` names another mode.

use std::path::Path;

use serde_json::{Map, Value};

use crate::cost::step::precision::Precision;
use crate::cost::step::Recompute;
use crate::error::{Error, Result};
use crate::model::layout::ZeroStage;

use super::design::{times, FromFile, Source};
use crate::input::parse_json;

/// Top-level keys that do not change the plan.
const UNUSED: [&str; 16] = [
    "gradient_clipping",
    "steps_per_print",
    "wall_clock_breakdown",
    "optimizer",
    "scheduler",
    "prescale_gradients",
    "gradient_predivide_factor",
    "tensorboard",
    "wandb",
    "csv_monitor",
    "comms_logger",
    "flops_profiler",
    "dump_state",
    "memory_breakdown",
    "checkpoint",
    "data_efficiency",
];

/// `zero_optimization` keys that tune buckets and prefetching, not what is kept.
const ZERO_TUNING: [&str; 11] = [
    "overlap_comm",
    "contiguous_gradients",
    "reduce_bucket_size",
    "allgather_bucket_size",
    "reduce_scatter",
    "allgather_partitions",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "stage3_gather_16bit_weights_on_model_save",
];

fn whole(key: &str, v: Option<&Value>) -> Result<Option<u64>> {
    match v {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n)),
            _ => Err(Error::invalid(key, n, "a whole number ≥ 1")),
        },
        Some(v) => Err(Error::invalid(key, v, "a whole number ≥ 1")),
    }
}

/// `section.key` as a boolean, `false` when left out; anything but `true` or `false` is
/// refused by name (`"yes"` is no boolean to DeepSpeed's pydantic config either).
fn flag(section: &Map<String, Value>, name: &str, key: &str) -> Result<bool> {
    match section.get(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(Error::invalid(
            format!("{name}.{key}"),
            v.to_string(),
            "true or false",
        )),
    }
}

/// Refuses a key of `section` not in `known`, naming it.
fn only(section: &Map<String, Value>, name: &str, known: &[&str]) -> Result<()> {
    match section.iter().find(|(k, _)| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some((k, v)) => Err(Error::invalid(
            format!("{name}.{}", k.escape_debug()),
            v.to_string(),
            "a key trainplan maps to the design or knows to leave the plan alone (take it out, or state it with trainplan's flags if it changes the design)",
        )),
    }
}

/// Whether the precision section `key` is on: its `enabled`, a boolean (false when the section
/// or the key is left out).
fn enabled(config: &Map<String, Value>, key: &str) -> Result<bool> {
    match config.get(key) {
        None => Ok(false),
        Some(Value::Object(o)) => flag(o, key, "enabled"),
        Some(v) => Err(Error::invalid(key, v, "an object")),
    }
}

/// The design the JSON `text` (the file at `path`) states. It is read as every JSON document
/// trainplan reads ([`crate::input::strict`]): a key given twice is refused, not the last one
/// taken.
pub fn parse(text: &str, path: &Path) -> Result<FromFile> {
    let value: Value = parse_json(text, path, "a DeepSpeed config")?;
    let Value::Object(config) = value else {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            message: "not a DeepSpeed config: expected a JSON object".into(),
        });
    };
    let mut from = FromFile::new(Source::DeepSpeed);
    for (key, value) in &config {
        let k = key.as_str();
        if k == "optimizer" {
            // Adam or AdamW, whose state (master weights and two moments) and step trainplan
            // counts; another's (LAMB, 1-bit Adam, Adagrad) differ, so it is refused, not read
            // as Adam.
            match value.get("type").and_then(Value::as_str) {
                None => {}
                Some(t) if ["adam", "adamw"].contains(&t.to_ascii_lowercase().as_str()) => {}
                Some(t) => {
                    return Err(Error::invalid(
                        "optimizer.type",
                        t.escape_debug(),
                        "Adam or AdamW: the optimizer whose state and step trainplan counts",
                    ))
                }
            }
            from.unused.push(k.to_string());
        } else if UNUSED.contains(&k) {
            from.unused.push(k.to_string());
        } else if ![
            "train_batch_size",
            "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps",
            "bf16",
            "fp16",
            "zero_optimization",
            "activation_checkpointing",
        ]
        .contains(&k)
        {
            return Err(Error::invalid(
                k.escape_debug().to_string(),
                value.to_string().escape_debug(),
                "a DeepSpeed key trainplan maps to the design or knows to leave the plan alone (take it out, or state it with trainplan's flags if it changes the design)",
            ));
        }
    }
    let batch = whole("train_batch_size", config.get("train_batch_size"))?;
    let micro = whole(
        "train_micro_batch_size_per_gpu",
        config.get("train_micro_batch_size_per_gpu"),
    )?;
    let accumulation = whole(
        "gradient_accumulation_steps",
        config.get("gradient_accumulation_steps"),
    )?;
    let (Some(g), Some(b)) = (batch, micro) else {
        return Err(Error::invalid(
            "train_batch_size",
            "missing, or train_micro_batch_size_per_gpu missing",
            "both, which give the data-parallel degree",
        ));
    };
    let m = accumulation.unwrap_or(1);
    let unit = times("gradient_accumulation_steps", b, m)?;
    if g % unit != 0 {
        return Err(Error::invalid(
            "train_batch_size",
            g,
            format!("micro-batch {b} × accumulation {m} × DP, a whole number of ranks"),
        ));
    }
    from.micro_batch = Some(b);
    from.global_batch = Some(g);
    from.dp = Some(g / unit);
    if enabled(&config, "fp16")? {
        return Err(Error::invalid(
            "fp16.enabled",
            true,
            "BF16 (bf16.enabled), the precision the plans compute in",
        ));
    }
    if let Some(Value::Object(bf16)) = config.get("bf16") {
        only(bf16, "bf16", &["enabled"])?;
    }
    if !enabled(&config, "bf16")? {
        return Err(Error::invalid(
            "bf16.enabled",
            false,
            "true: BF16, the precision the plans compute in (FP32 training is not planned)",
        ));
    }
    from.precision = Some(Precision::Bf16);
    let stage = match config.get("zero_optimization") {
        None => 0,
        Some(Value::Object(z)) => {
            for (key, value) in z {
                let k = key.as_str();
                if k == "stage" || ZERO_TUNING.contains(&k) {
                    continue;
                }
                let off = match (k, value) {
                    ("offload_optimizer" | "offload_param", Value::Object(o)) => {
                        o.get("device").and_then(Value::as_str).unwrap_or("none") == "none"
                    }
                    _ => false,
                };
                // DeepSpeed's ZeRO-Offload is not Megatron-core's hybrid optimizer, which
                // `--offload-optimizer` plans: it offloads the whole state to DeepSpeedCPUAdam
                // with its own copies and overlap, so it stays refused.
                if !off {
                    let why = if k == "offload_optimizer" {
                        "a ZeRO key trainplan maps (stage) or knows to leave the plan alone (bucket sizes, overlap, prefetch); DeepSpeed's ZeRO-Offload is not planned (--offload-optimizer is Megatron-core's hybrid optimizer, another engine)"
                    } else {
                        "a ZeRO key trainplan maps (stage) or knows to leave the plan alone (bucket sizes, overlap, prefetch); offloading is not planned"
                    };
                    return Err(Error::invalid(
                        format!("zero_optimization.{}", k.escape_debug()),
                        value.to_string().escape_debug(),
                        why,
                    ));
                }
            }
            match z.get("stage") {
                None => 0,
                Some(v) => match v.as_u64().filter(|s| *s <= 3) {
                    Some(s) => s as u8,
                    None => {
                        return Err(Error::invalid("zero_optimization.stage", v, "0, 1, 2 or 3"))
                    }
                },
            }
        }
        Some(v) => return Err(Error::invalid("zero_optimization", v, "an object")),
    };
    from.zero = Some(ZeroStage::new(stage)?);
    from.replicate = Some(1);
    from.cp = Some(1);
    from.recompute = Some(match config.get("activation_checkpointing") {
        None => Recompute::None,
        Some(Value::Object(a)) => {
            let name = "activation_checkpointing";
            let flags = [
                "partition_activations",
                "cpu_checkpointing",
                "contiguous_memory_optimization",
                "synchronize_checkpoint_boundary",
                "profile",
            ];
            only(a, name, &flags)?;
            for key in flags {
                if flag(a, name, key)? && key == "cpu_checkpointing" {
                    return Err(Error::invalid(
                        "activation_checkpointing.cpu_checkpointing",
                        true,
                        "false: activations offloaded to the CPU are not planned",
                    ));
                }
            }
            Recompute::Full
        }
        Some(v) => return Err(Error::invalid("activation_checkpointing", v, "an object")),
    });
    Ok(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optimizer_other_than_adam_is_refused_not_read_as_adam() {
        let text = r#"{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1,
            "bf16": {"enabled": true}, "optimizer": {"type": "TYPE", "params": {"lr": 1e-4}}}"#;
        for ok in ["Adam", "AdamW", "adamw"] {
            assert!(parse(&text.replace("TYPE", ok), Path::new("ds.json")).is_ok());
        }
        let e = parse(&text.replace("TYPE", "OneBitAdam"), Path::new("ds.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("optimizer.type") && e.contains("OneBitAdam"),
            "{e}"
        );
    }

    #[test]
    fn the_data_parallel_degree_follows_from_the_batch() {
        let text = r#"{"train_batch_size": 2048, "train_micro_batch_size_per_gpu": 2,
            "gradient_accumulation_steps": 16, "bf16": {"enabled": true},
            "zero_optimization": {"stage": 1, "overlap_comm": true}, "steps_per_print": 10}"#;
        let f = parse(text, Path::new("ds.json")).unwrap();
        assert_eq!(
            (f.dp, f.micro_batch, f.zero.unwrap().get()),
            (Some(64), Some(2), 1)
        );
        assert_eq!(f.recompute, Some(Recompute::None));
        let e = parse(&text.replace("\"bf16\"", "\"fp16\""), Path::new("ds.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fp16") && !e.contains('\n'), "{e}");
        let e = parse(
            &text.replace("steps_per_print", "sparse_attention"),
            Path::new("d.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("sparse_attention"), "{e}");
    }

    #[test]
    fn a_key_twice_a_flag_that_is_no_boolean_and_an_unknown_key_are_named() {
        let text = r#"{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "activation_checkpointing": {"cpu_checkpointing": false}}"#;
        assert_eq!(
            parse(text, Path::new("ds.json")).unwrap().recompute,
            Some(Recompute::Full)
        );
        let refused = |text: &str| {
            let e = parse(text, Path::new("ds.json")).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            e
        };
        // The last of two keys is not taken.
        let e = refused(&text.replace(
            r#""train_batch_size": 64,"#,
            r#""train_batch_size": 64, "train_batch_size": 8,"#,
        ));
        assert!(e.contains("train_batch_size: given twice"), "{e}");
        let e = refused(&text.replace(
            "\"cpu_checkpointing\": false",
            "\"cpu_checkpointing\": \"yes\"",
        ));
        assert!(
            e.contains(
                "invalid activation_checkpointing.cpu_checkpointing = \"yes\": true or false"
            ),
            "{e}"
        );
        let e = refused(&text.replace("\"cpu_checkpointing\": false", "\"number_checkpoints\": 4"));
        assert!(
            e.contains("invalid activation_checkpointing.number_checkpoints = 4"),
            "{e}"
        );
        let e = refused(&text.replace("{\"enabled\": true}", "{\"enabled\": 1}"));
        assert!(e.contains("invalid bf16.enabled = 1: true or false"), "{e}");
        let e = refused(&text.replace(
            "{\"enabled\": true}",
            "{\"enabled\": true, \"immediate_grad_update\": true}",
        ));
        assert!(e.contains("invalid bf16.immediate_grad_update"), "{e}");
    }
}
