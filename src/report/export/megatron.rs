//! Megatron-LM: the `pretrain_gpt.py` arguments of a plan, as a bash array to paste into a
//! launch script.
//!
//! Option names as `megatron/training/arguments.py` defines them in Megatron-LM's main branch
//! at commit 000c4ac (after Megatron-Core 0.14); Megatron-FSDP's as Megatron-LM's
//! `megatron/core/distributed/fsdp` README gives them ("Megatron-FSDP Quick Start").

use std::fmt::Write;

use super::exporter::Launcher;
use super::launch::{uneven_ends, Launch};
use crate::cost::activations::Recompute;
use crate::cost::step::Schedule;
use crate::error::{Error, Result};

/// Megatron-LM command-line arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Megatron;

/// The arguments, one option (with its value) an entry.
pub fn arguments(l: &Launch) -> Result<Vec<String>> {
    let (s, step, layout) = (&l.shape, &l.step, &l.layout);
    let layers = u64::from(s.layers);
    let ends = uneven_ends(layers, layout.pp)?;
    if let Schedule::Interleaved(v) = step.schedule {
        // Megatron-LM splits every stage's layers into V chunks: each stage's count (the
        // middle ones', and the first's and last's when uneven) must divide by V.
        let counts = match ends {
            Some((first, last)) => vec![
                first,
                last,
                (layers - first - last) / (layout.pp - 2).max(1),
            ],
            None => vec![layers / layout.pp],
        };
        if counts.iter().any(|c| c % u64::from(v) != 0) {
            let counts: Vec<String> = counts.iter().map(u64::to_string).collect();
            return Err(Error::invalid(
                "--format",
                "megatron",
                format!(
                    "a plan Megatron-LM's interleaved schedule can split: {v} chunks of each stage's layers ({}), which {layers} layers over PP {} do not give",
                    counts.join(", "),
                    layout.pp
                ),
            ));
        }
    }
    let mut args: Vec<String> = Vec::new();
    let mut push = |option: &str, value: Option<String>| {
        args.push(match value {
            Some(v) => format!("{option} {v}"),
            None => option.to_string(),
        });
    };
    // Parallelism.
    push("--tensor-model-parallel-size", Some(layout.tp.to_string()));
    push(
        "--pipeline-model-parallel-size",
        Some(layout.pp.to_string()),
    );
    if let Some((first, last)) = ends {
        push(
            "--decoder-first-pipeline-num-layers",
            Some(first.to_string()),
        );
        push("--decoder-last-pipeline-num-layers", Some(last.to_string()));
    }
    if let Schedule::Interleaved(v) = step.schedule {
        push(
            "--num-virtual-stages-per-pipeline-rank",
            Some(v.to_string()),
        );
    }
    if step.sequence_parallel && layout.tp > 1 {
        push("--sequence-parallel", None);
    }
    // ZeRO: the distributed optimizer shards the optimizer state (stage 1); Megatron-FSDP's
    // sharding strategies optim_grads and optim_grads_params are stages 2 and 3.
    match l.zero().get() {
        0 => {}
        1 => push("--use-distributed-optimizer", None),
        stage => {
            push("--use-megatron-fsdp", None);
            let strategy = if stage == 2 {
                "optim_grads"
            } else {
                "optim_grads_params"
            };
            push("--data-parallel-sharding-strategy", Some(strategy.into()));
            push("--use-distributed-optimizer", None);
            push("--no-gradient-accumulation-fusion", None);
            push("--ckpt-format", Some("fsdp_dtensor".into()));
        }
    }
    // The model.
    push("--num-layers", Some(s.layers.to_string()));
    push("--hidden-size", Some(s.hidden.to_string()));
    push("--ffn-hidden-size", Some(s.ffn.to_string()));
    push("--num-attention-heads", Some(s.heads.to_string()));
    if s.kv_heads < s.heads {
        push("--group-query-attention", None);
        push("--num-query-groups", Some(s.kv_heads.to_string()));
    }
    if s.hidden % u64::from(s.heads) != 0 || s.hidden / u64::from(s.heads) != s.head_dim() {
        push("--kv-channels", Some(s.head_dim().to_string()));
    }
    push("--swiglu", None);
    push("--normalization", Some("RMSNorm".into()));
    push("--position-embedding-type", Some("rope".into()));
    if !s.tied_embeddings {
        push("--untie-embeddings-and-output-weights", None);
    }
    let b = s.biases;
    match (b.qkv, b.output, b.mlp) {
        (false, false, false) => push("--disable-bias-linear", None),
        (true, false, false) => {
            push("--disable-bias-linear", None);
            push("--add-qkv-bias", None);
        }
        (true, true, true) => {}
        _ => {
            return Err(Error::invalid(
                "--format",
                "megatron",
                format!(
                    "a model whose biases Megatron-LM can express (none, q/k/v only, or all); {} has attention biases without MLP biases or the reverse",
                    s.name
                ),
            ))
        }
    }
    // The step.
    push("--seq-length", Some(step.seq_len.to_string()));
    push("--max-position-embeddings", Some(step.seq_len.to_string()));
    push("--micro-batch-size", Some(step.micro_batch.to_string()));
    push("--global-batch-size", Some(l.global_batch.to_string()));
    push("--train-iters", Some(l.iterations().to_string()));
    match step.recompute {
        Recompute::None => {}
        Recompute::Selective => push("--recompute-granularity", Some("selective".into())),
        Recompute::Full => {
            push("--recompute-granularity", Some("full".into()));
            push("--recompute-method", Some("uniform".into()));
            push("--recompute-num-layers", Some("1".into()));
        }
        // Half the layers of each stage fully recomputed: Megatron-LM's block method over the
        // first half of a stage's layers.
        Recompute::SelectiveLayer => {
            let per_stage = u64::from(s.layers) / l.layout.pp;
            if per_stage < 2 || step.schedule.chunks() > 1 {
                return Err(Error::invalid(
                    "--format",
                    "megatron",
                    "selective-layer with at least two layers a stage and 1f1b: Megatron-LM's block method counts layers per chunk",
                ));
            }
            push("--recompute-granularity", Some("full".into()));
            push("--recompute-method", Some("block".into()));
            push("--recompute-num-layers", Some((per_stage / 2).to_string()));
        }
        Recompute::SelectiveOp | Recompute::SaveQkv => {
            return Err(Error::invalid(
                "--format",
                "megatron",
                "a recomputation Megatron-LM has (none, selective, full or selective-layer); torchtitan's selective-op and MaxText's save-qkv policies have no Megatron-LM flag",
            ))
        }
    }
    push("--bf16", None);
    Ok(args)
}

/// The arguments as a bash array with the plan and what the user must add in comments.
pub fn render(l: &Launch) -> Result<String> {
    let args = arguments(l)?;
    let mut out = l.header();
    let _ = writeln!(
        out,
        "# Megatron-LM pretrain_gpt.py arguments (names from megatron/training/arguments.py, main @ 000c4ac)."
    );
    let _ = writeln!(
        out,
        "# Add your data (--data-path), tokenizer (--tokenizer-type, --tokenizer-model; vocabulary {}), optimizer and schedule.",
        l.shape.vocab
    );
    if l.zero().get() >= 2 {
        let _ = writeln!(
            out,
            "# Megatron-FSDP (ZeRO {}): unset CUDA_DEVICE_MAX_CONNECTIONS",
            l.zero()
        );
    } else if l.layout.tp > 1 {
        let _ = writeln!(
            out,
            "# TP > 1 before Blackwell: export CUDA_DEVICE_MAX_CONNECTIONS=1"
        );
    }
    let _ = writeln!(
        out,
        "# Launch on {} GPUs ({} ranks of TP × PP × DP), e.g. torchrun ... pretrain_gpt.py \"${{MEGATRON_ARGS[@]}}\"",
        l.gpus(),
        l.gpus()
    );
    out.push_str("MEGATRON_ARGS=(\n");
    for a in args {
        let _ = writeln!(out, "    {a}");
    }
    out.push_str(")\n");
    Ok(out)
}

impl Launcher for Megatron {
    const NAME: &'static str = "megatron";
    fn render(&self, launch: &Launch) -> Result<String> {
        render(launch)
    }
}
