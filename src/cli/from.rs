//! `--from FILE`: a launcher's configuration laid over the flags, so `check --from` grades
//! exactly what the same flags would (the file fills the flags; the grading is `check`'s own).
//!
//! The rule for flags given alongside: a flag the file also sets must say the same (else the
//! flag and both values are named, and nothing runs); a flag the file does not set is used
//! as usual (the brief's flags; for DeepSpeed the model, `--tp`, `--pp`, `--seq-len`,
//! `--tokens`). `--model-config` may always come along: the file's dimensions must be its.

use std::fmt::Display;
use std::path::Path;

use serde::Serialize;

use super::args::{
    DesignArgs, DispatcherArg, GradientArg, LossArg, MasterArg, MemoryArg, MoeRecomputeArg, OnOff,
    OptimizerArg, RecomputeArg, SearchArgs, StagesArg, StatesArg,
};
use crate::cost::step::detailed::Options;
use crate::cost::step::experts::Dispatcher;
use crate::cost::step::recipe::{MasterWeights, OptimizerStates};
use crate::cost::step::stack::{GradientPrecision, LossPrecision};
use crate::cost::step::stack::{Stack, StageSplit};
use crate::cost::step::{MoeRecompute, Recompute};
use crate::cost::step::{Schedule, Step};
use crate::error::{Error, Result};
use crate::input::from::megatron::STACK_OPTIONS;
use crate::input::from::{Dims, FileModel, FromFile, Source};
use crate::input::hf;
use crate::model::layout::Layout;
use crate::model::{self, Shape};
use crate::report::export::megatron;
use crate::report::export::Launch;

/// The flag `flag` set to the file's value, or checked against it.
fn set<T: PartialEq + Display + Clone>(
    flag: &str,
    slot: &mut Option<T>,
    file: Option<T>,
) -> Result<()> {
    set_by(flag, slot, file, T::to_string)
}

/// [`set`], with values shown by `show`.
fn set_by<T: PartialEq + Clone>(
    flag: &str,
    slot: &mut Option<T>,
    file: Option<T>,
    show: impl Fn(&T) -> String,
) -> Result<()> {
    let Some(value) = file else {
        return Ok(());
    };
    match slot {
        Some(given) if *given != value => Err(Error::invalid(
            flag,
            show(given),
            format!(
                "{}, what the --from file says (a flag the file sets must agree with it)",
                show(&value)
            ),
        )),
        _ => {
            *slot = Some(value);
            Ok(())
        }
    }
}

/// A flag's value as clap spells it.
fn kebab<T: std::fmt::Debug>(value: &T) -> String {
    let mut out = String::new();
    for (i, c) in format!("{value:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn recompute_arg(r: Recompute) -> RecomputeArg {
    match r {
        Recompute::None => RecomputeArg::None,
        Recompute::Selective => RecomputeArg::Selective,
        Recompute::Full => RecomputeArg::Full,
        Recompute::SelectiveOp => RecomputeArg::SelectiveOp,
        Recompute::SelectiveLayer => RecomputeArg::SelectiveLayer,
        Recompute::SaveQkv => RecomputeArg::SaveQkv,
    }
}

/// The first way `shape` differs from the file's dimensions, if any.
fn differs(shape: &Shape, d: &Dims) -> Option<String> {
    let a = &shape.architecture;
    let checks: [(&str, String, String); 13] = [
        (
            "--num-layers",
            shape.layers.to_string(),
            d.layers.to_string(),
        ),
        (
            "--hidden-size",
            shape.hidden.to_string(),
            d.hidden.to_string(),
        ),
        (
            "--ffn-hidden-size",
            shape.ffn.to_string(),
            d.ffn.to_string(),
        ),
        (
            "--num-attention-heads",
            shape.heads.to_string(),
            d.heads.to_string(),
        ),
        (
            "--num-query-groups",
            shape.kv_heads.to_string(),
            d.kv_heads.to_string(),
        ),
        (
            "--kv-channels",
            shape.head_dim().to_string(),
            d.head_dim
                .unwrap_or(shape.hidden / u64::from(shape.heads).max(1))
                .to_string(),
        ),
        (
            "vocabulary",
            shape.vocab.to_string(),
            d.vocab.unwrap_or(shape.vocab).to_string(),
        ),
        (
            "--untie-embeddings-and-output-weights",
            (!shape.tied_embeddings).to_string(),
            (!d.tied_embeddings).to_string(),
        ),
        (
            "biases",
            format!("{:?}", shape.biases),
            format!("{:?}", d.biases),
        ),
        (
            "--rotary-base",
            a.rope_theta.to_string(),
            d.rope_theta.to_string(),
        ),
        (
            "--norm-epsilon",
            a.norm_eps.to_string(),
            d.norm_eps.to_string(),
        ),
        (
            "--window-size",
            format!("{:?}", a.sliding_window),
            format!("{:?}", d.sliding_window),
        ),
        (
            "--window-attn-skip-freq",
            windowed(&a.window_layers, shape.layers),
            windowed(&d.window_layers, shape.layers),
        ),
    ];
    for (what, model, file) in checks {
        if model != file {
            return Some(format!("{what}: the model has {model}, the file {file}"));
        }
    }
    if shape.attention.latent != d.latent {
        let say = |l: &Option<crate::model::Latent>| match l {
            None => "none".to_string(),
            Some(l) => format!(
                "q rank {}, kv rank {}, heads {} + {}, values {}",
                l.q_rank.map_or("none".to_string(), |r| r.to_string()),
                l.kv_rank,
                l.nope_dim,
                l.rope_dim,
                l.v_dim
            ),
        };
        return Some(format!(
            "--multi-latent-attention: the model has {}, the file {}",
            say(&shape.attention.latent),
            say(&d.latent)
        ));
    }
    if shape.mtp != d.mtp {
        return Some(format!(
            "--mtp-num-layers: the model has {}, the file {}",
            shape.mtp, d.mtp
        ));
    }
    // With latent attention `--qk-layernorm` builds the latents' norms, which every latent
    // shape has (DeepSeek-V2 and V3).
    let qk_norm = shape.attention.qk_norm || shape.attention.latent.is_some();
    if qk_norm != d.qk_norm {
        return Some(format!(
            "--qk-layernorm: the model has {}, the file {}",
            qk_norm, d.qk_norm
        ));
    }
    if let Some(why) = experts_differ(shape, d) {
        return Some(why);
    }
    if shape.hybrid != d.hybrid {
        let say = |h: &Option<crate::model::Hybrid>| match h {
            None => "none".to_string(),
            Some(h) => format!(
                "{} with Mamba-2 heads {} of {}, {} groups, state {}, {}",
                h.pattern,
                h.mamba.heads,
                h.mamba.head_dim,
                h.mamba.groups,
                h.mamba.state,
                if h.gated { "SwiGLU" } else { "squared ReLU" }
            ),
        };
        return Some(format!(
            "--hybrid-override-pattern: the model has {}, the file {}",
            say(&shape.hybrid),
            say(&d.hybrid)
        ));
    }
    // A hybrid's MLP gating is its pattern's (compared above); SwiGLU in its style leaves the
    // activation to that flag, so only two activations both named can differ.
    let same_style = match &shape.hybrid {
        Some(_) => {
            let unnamed = |m: crate::model::Mlp| m == crate::model::Mlp::Swiglu;
            shape.style.norm == d.style.norm
                && shape.style.positions == d.style.positions
                && (shape.style.mlp == d.style.mlp
                    || unnamed(shape.style.mlp)
                    || unnamed(d.style.mlp))
        }
        None => shape.style == d.style,
    };
    if !same_style {
        return Some(format!(
            "the block (--normalization, --swiglu, --position-embedding-type): the model has {:?}, the file {:?}",
            shape.style, d.style
        ));
    }
    let llama31 = a.rope_scaling == crate::model::Architecture::llama31().rope_scaling;
    if llama31 != d.rope_scaling {
        return Some(format!(
            "--use-rope-scaling: the model has {}, the file {}",
            if llama31 {
                "Llama 3.1's"
            } else {
                "another or none"
            },
            if d.rope_scaling { "on" } else { "off" }
        ));
    }
    None
}

/// The first way `shape`'s mixture of experts differs from the file's, if any.
fn experts_differ(shape: &Shape, d: &Dims) -> Option<String> {
    let (model, file) = match (&shape.experts, &d.experts) {
        (None, None) => return None,
        (Some(_), None) => {
            return Some("--num-experts: the model has experts, the file none".into())
        }
        (None, Some(_)) => {
            return Some("--num-experts: the file has experts, the model none".into())
        }
        (Some(m), Some(f)) => (m, f),
    };
    let every: Vec<bool> = (0..shape.layers)
        .map(|i| model.layers.contains(i))
        .collect();
    let checks = [
        ("--num-experts", u64::from(model.routed), file.routed),
        (
            "--moe-router-topk",
            u64::from(model.per_token),
            file.per_token,
        ),
        ("--moe-ffn-hidden-size", model.ffn, file.ffn),
        (
            "--moe-shared-expert-intermediate-size",
            model.shared_ffn,
            file.shared_ffn,
        ),
    ];
    if let Some((what, m, f)) = checks.iter().find(|(_, m, f)| m != f) {
        return Some(format!("{what}: the model has {m}, the file {f}"));
    }
    if model.groups != file.groups {
        let says = |g: Option<crate::model::Groups>| {
            g.map_or("none".to_string(), |g| {
                format!("{} of {}", g.per_token, g.count)
            })
        };
        return Some(format!(
            "--moe-router-num-groups, --moe-router-group-topk: the model routes in groups {}, the file {}",
            says(model.groups),
            says(file.groups)
        ));
    }
    if model.score_bias != file.score_bias {
        return Some(format!(
            "--moe-router-enable-expert-bias: the model has {}, the file {}",
            if model.score_bias {
                "a score bias"
            } else {
                "none"
            },
            if file.score_bias { "one" } else { "none" }
        ));
    }
    let layers = file
        .layers
        .clone()
        .unwrap_or_else(|| vec![true; every.len()]);
    (layers != every).then(|| "--moe-layer-freq: the model's MoE layers are others".to_string())
}

/// The model flags set from the file's model, or checked against the model given.
fn model(d: &mut DesignArgs, f: &FromFile) -> Result<()> {
    let m = &mut d.model;
    let given = m.model.is_some() || m.model_config.is_some() || m.layers.is_some();
    match &f.model {
        FileModel::Unstated => {
            if !given {
                return Err(Error::invalid(
                    "--from",
                    f.source.name(),
                    match f.source {
                        Source::DeepSpeed => "the model alongside: DeepSpeed's JSON has none (give --model-config config.json, or --model)",
                        _ => "the model alongside: the file names none (give --model-config config.json, or --model)",
                    },
                ));
            }
            Ok(())
        }
        FileModel::Preset(name) => {
            let preset = model::preset(name)?;
            if given {
                let shape = m.shape()?;
                if !shape.same_dimensions(&preset) || shape.architecture != preset.architecture {
                    return Err(Error::invalid(
                        "--from",
                        format!("{} ({})", shape.name, shape.params()),
                        format!("the file's model, {name}"),
                    ));
                }
                return Ok(());
            }
            m.model = Some(name.clone());
            Ok(())
        }
        FileModel::Dims(dims) => {
            if m.model_config.is_some() || m.model.is_some() {
                let shape = match &m.model_config {
                    Some(path) => hf::read(path)?,
                    None => m.shape()?,
                };
                if let Some(why) = differs(&shape, dims) {
                    return Err(Error::invalid(
                        "--from",
                        shape.name.clone(),
                        format!("the model the file describes ({why})"),
                    ));
                }
                return Ok(());
            }
            if m.layers.is_some() {
                return Err(Error::invalid(
                    "--layers",
                    "given with --from",
                    "the model from the file (or --model-config, which it must match)",
                ));
            }
            // The file's vocabulary, or --vocab where the file leaves it to the tokenizer.
            let vocab = match (dims.vocab, m.attention.vocab) {
                (Some(file), Some(flag)) if file != flag => {
                    return Err(Error::invalid(
                        "--vocab",
                        flag,
                        format!("{file}, what the --from file says (a flag the file sets must agree with it)"),
                    ))
                }
                (Some(v), _) | (None, Some(v)) => v,
                (None, None) => {
                    return Err(Error::invalid(
                        "--vocab-size",
                        "missing",
                        "the model's vocabulary: add --vocab-size to the file's arguments, give it with --vocab, or give the model's config.json with --model-config",
                    ))
                }
            };
            let unstated = if dims.hybrid.is_some() {
                Some("--hybrid-override-pattern")
            } else if dims.experts.is_some() {
                Some("experts")
            } else if dims.latent.is_some() {
                Some("--multi-latent-attention")
            } else if dims.mtp > 0 {
                Some("--mtp-num-layers")
            } else if dims.window_layers.is_some() {
                Some("--window-attn-skip-freq")
            } else if dims.qk_norm {
                Some("--qk-layernorm")
            } else if dims.biases != crate::model::Biases::default() {
                Some("biases")
            } else if dims.style != crate::model::Style::default() {
                Some("a GPT-style block")
            } else {
                None
            };
            if unstated.is_some() {
                // The flags cannot say it: the model the file builds, whole.
                m.file = Some(dims.shape(vocab)?);
                return Ok(());
            }
            m.layers = Some(dims.layers);
            m.hidden = Some(dims.hidden);
            m.ffn = Some(dims.ffn);
            let a = &mut m.attention;
            a.heads = Some(dims.heads);
            a.kv_heads = Some(dims.kv_heads);
            a.head_dim = dims.head_dim;
            a.vocab = Some(vocab);
            a.tied_embeddings = dims.tied_embeddings;
            a.rope_theta = Some(dims.rope_theta);
            a.norm_eps = Some(dims.norm_eps);
            a.sliding_window = dims.sliding_window;
            // Without --use-rope-scaling Megatron-LM runs RoPE unscaled.
            a.no_rope_scaling = !dims.rope_scaling;
            // A preset's dimensions are the preset, named as --model names it.
            let shape = m.shape()?;
            if let Some(p) = model::presets()
                .into_iter()
                .find(|p| p.same_dimensions(&shape) && p.architecture == shape.architecture)
            {
                m.layers = None;
                m.hidden = None;
                m.ffn = None;
                let a = &mut m.attention;
                (a.heads, a.kv_heads, a.head_dim, a.vocab) = (None, None, None, None);
                (a.rope_theta, a.norm_eps, a.sliding_window) = (None, None, None);
                (a.tied_embeddings, a.no_rope_scaling) = (false, false);
                m.model = Some(p.name);
            }
            Ok(())
        }
    }
}

/// The stacks a Megatron-LM file may be run with, most likely first: where its options fit
/// several, the first is taken and the others named.
const PREFERENCE: [Stack; 8] = [
    Stack::MegatronTe,
    Stack::Llama3,
    Stack::MegatronDeepspeed,
    Stack::Eager,
    Stack::Torchtitan,
    Stack::TorchtitanCompile,
    Stack::Maxtext,
    Stack::DeepSeek,
];

/// The stack options Megatron-LM's export writes for `stack`, sorted.
fn megatron_stack_options(
    shape: &Shape,
    tokens: u64,
    layout: Layout,
    step: Step,
    stack: Stack,
) -> Result<Vec<String>> {
    let launch = Launch::new(
        shape.clone(),
        tokens,
        layout,
        Some(step),
        step.seq_len,
        &Default::default(),
        Some(Options::for_stack(stack)),
    )?;
    let mut options: Vec<String> = megatron::arguments(&launch)?
        .into_iter()
        .filter(|a| {
            STACK_OPTIONS
                .iter()
                .any(|o| a == o || a.starts_with(&format!("{o} ")))
        })
        .collect();
    options.sort();
    Ok(options)
}

/// The stage split a Megatron-LM file's pipeline is: the split whose stages its
/// `--pipeline-model-parallel-layout` string writes, or without one Megatron-LM's even split
/// (each stage's layers whole over its chunks): the split the file names first (the export's
/// comment), then the stack's own, even, llama3 and balanced (splits that give the same stages
/// grade alike). Set as `--stages` where it is not
/// the stack's, checked against `--stages` where given.
fn stages(d: &mut DesignArgs, f: &FromFile, shape: &Shape) -> Result<()> {
    let layers = u64::from(shape.layers);
    let pp = d.pp();
    let chunks = f.schedule.map_or(1, Schedule::chunks);
    let text = f.pipeline_layout.as_ref().map(|(_, t)| t.replace('"', ""));
    let builds = |split: StageSplit| {
        crate::cost::step::pipeline::shape_stages(shape, pp, split).is_ok_and(
            |stages| match &text {
                Some(text) => megatron::pipeline_layout(&stages, chunks, shape.mtp) == *text,
                None => stages.iter().all(|&n| n == stages[0] && n % chunks == 0),
            },
        )
    };
    let arg = |split: StageSplit| match split {
        StageSplit::Even => StagesArg::Even,
        StageSplit::Llama3 => StagesArg::Llama3,
        StageSplit::Balanced => StagesArg::Balanced,
        StageSplit::Loss => StagesArg::Loss,
    };
    let default = Options::for_stack(d.detailed.stack()).stages;
    let given = d.detailed.stages.map(|s| match s {
        StagesArg::Even => StageSplit::Even,
        StagesArg::Llama3 => StageSplit::Llama3,
        StagesArg::Balanced => StageSplit::Balanced,
        StagesArg::Loss => StageSplit::Loss,
    });
    let candidates = [
        given.or(f.stages).unwrap_or(default),
        default,
        StageSplit::Even,
        StageSplit::Llama3,
        StageSplit::Balanced,
        StageSplit::Loss,
    ];
    match candidates.into_iter().find(|&s| builds(s)) {
        Some(split) if given.is_some_and(|g| g != split) => Err(Error::invalid(
            "--stages",
            kebab(&given.map(arg).expect("given")),
            format!(
                "{}, the split whose stages the --from file builds",
                kebab(&arg(split))
            ),
        )),
        Some(split) => {
            if split != default {
                d.detailed.stages = Some(arg(split));
            }
            Ok(())
        }
        None => Err(match text {
            Some(text) => Error::invalid(
                "--pipeline-model-parallel-layout",
                text,
                format!("the stages of one of trainplan's splits (even, llama3, balanced) of {layers} layers over PP {pp} in {chunks} chunks a stage"),
            ),
            None => Error::invalid(
                "--pipeline-model-parallel-size",
                pp,
                format!("a PP whose stages Megatron-LM splits {layers} layers evenly over, {chunks} chunks each (Megatron-LM's split without --pipeline-model-parallel-layout), or a layout string"),
            ),
        }),
    }
}

/// The GPUs to lay over `--gpus` (`given`) from the file's count (`counted`): a script's
/// launcher counts (torchrun's, Slurm's) are where it ran last, and `--gpus` beside it says
/// where it is to run, with a note; a count the file derives from its own degrees (DP) stands.
fn launcher_gpus(
    f: &FromFile,
    counted: Option<u64>,
    given: Option<u64>,
    path: &str,
) -> (Option<u64>, Option<String>) {
    match (f.source, f.dp, counted, given) {
        (Source::Megatron, None, Some(counted), Some(given)) if counted != given => (
            Some(given),
            Some(format!(
                "note: --from {path}: --gpus {given} stands for the launcher's count in the file ({counted} GPUs)"
            )),
        ),
        _ => (counted, None),
    }
}

/// Lays the file over the design flags; returns the notes to print.
pub fn apply(d: &mut DesignArgs, mut f: FromFile, path: &str) -> Result<Vec<String>> {
    model(d, &f)?;
    let shape = d.shape()?;
    f.resolve_interleaving(u64::from(shape.layers))?;
    set("--tokens", &mut d.tokens, f.tokens)?;
    set("--tp", &mut d.tp, f.tp)?;
    set("--pp", &mut d.pp, f.pp)?;
    set("--cp", &mut d.cp, f.cp)?;
    set("--zero", &mut d.zero, f.zero)?;
    set("--replicate", &mut d.replicate, f.replicate)?;
    set("--ep", &mut d.ep, f.ep)?;
    set("--etp", &mut d.etp, f.etp)?;
    set("--seq-len", &mut d.brief.seq_len, f.seq_len)?;
    let parallel = d.tp().saturating_mul(d.pp()).saturating_mul(d.cp());
    let gpus = match (f.dp, f.gpus) {
        (Some(dp), Some(g)) if dp.saturating_mul(parallel) != g => {
            return Err(Error::invalid(
                "--from",
                format!("{g} GPUs"),
                format!("TP × PP × CP × DP = {}", dp.saturating_mul(parallel)),
            ))
        }
        (Some(dp), _) => Some(dp.saturating_mul(parallel)),
        (None, g) => g,
    };
    let (gpus, overridden) = launcher_gpus(&f, gpus, d.brief.gpus, path);
    set("--gpus", &mut d.brief.gpus, gpus)?;
    if d.brief.gpus.is_none() && d.brief.brief.is_none() {
        return Err(Error::invalid(
            "--from",
            path,
            "the GPUs: the file does not say how many (give --gpus)",
        ));
    }
    let brief = d.brief.resolve()?;
    let s = &mut d.step;
    set("--micro-batch", &mut s.micro_batch, f.micro_batch)?;
    let tokens_a_step = f.global_batch.map(|g| g.saturating_mul(brief.seq_len));
    set(
        "--global-batch-tokens",
        &mut s.global_batch_tokens,
        tokens_a_step,
    )?;
    match (f.source, f.recompute, s.recompute) {
        // DeepSpeed's checkpointing is the model's: any mode but none.
        (Source::DeepSpeed, Some(Recompute::Full), Some(r)) if r != RecomputeArg::None => {}
        (_, r, _) => set_by("--recompute", &mut s.recompute, r.map(recompute_arg), kebab)?,
    }
    set_by(
        "--sequence-parallel",
        &mut s.sequence_parallel,
        f.sequence_parallel
            .map(|on| if on { OnOff::On } else { OnOff::Off }),
        kebab,
    )?;
    set_by(
        "--tp-comm-overlap",
        &mut s.tp_comm_overlap,
        f.tp_comm_overlap
            .map(|on| if on { OnOff::On } else { OnOff::Off }),
        kebab,
    )?;
    if let Some(schedule) = f.schedule {
        let text = match schedule {
            Schedule::OneFOneB => "1f1b".to_string(),
            Schedule::Interleaved(v) => format!("interleaved:{v}"),
            Schedule::ZeroBubbleV | Schedule::DualPipeV => schedule.to_string(),
        };
        match s.schedule.as_deref().map(Schedule::parse).transpose()? {
            Some(given) if given != schedule => {
                return Err(Error::invalid(
                    "--schedule",
                    s.schedule.clone().unwrap_or_default(),
                    format!("{text}, what the --from file says"),
                ))
            }
            _ => s.schedule = Some(text),
        }
    }
    set("--precision", &mut s.precision, f.precision)?;
    let on = |b: Option<bool>| b.map(|on| if on { OnOff::On } else { OnOff::Off });
    let x = &mut d.detailed;
    set_by("--ep-overlap", &mut x.ep_overlap, on(f.ep_overlap), kebab)?;
    set_by(
        "--norm-recompute",
        &mut x.norm_recompute,
        on(f.norm_recompute),
        kebab,
    )?;
    set_by(
        "--latent-recompute",
        &mut x.latent_recompute,
        on(f.latent_recompute),
        kebab,
    )?;
    set_by(
        "--moe-recompute",
        &mut x.moe_recompute,
        f.moe_recompute.map(|m| match m {
            MoeRecompute::None => MoeRecomputeArg::None,
            MoeRecompute::Act => MoeRecomputeArg::Act,
            MoeRecompute::Layer => MoeRecomputeArg::Layer,
        }),
        kebab,
    )?;
    set_by(
        "--ep-dispatcher",
        &mut x.ep_dispatcher,
        f.ep_dispatcher.map(|e| match e {
            Dispatcher::AllToAll => DispatcherArg::Alltoall,
            Dispatcher::DeepEp => DispatcherArg::Deepep,
        }),
        kebab,
    )?;
    set("--fp8-recipe", &mut x.fp8_recipe, f.fp8_recipe)?;
    set_by("--fp8-params", &mut x.fp8_params, on(f.fp8_params), kebab)?;
    set_by(
        "--gradients",
        &mut x.gradients,
        f.gradients.map(|g| match g {
            GradientPrecision::Bf16 => GradientArg::Bf16,
            GradientPrecision::Fp32 => GradientArg::Fp32,
        }),
        kebab,
    )?;
    set_by(
        "--loss-precision",
        &mut x.loss_precision,
        f.loss.map(|l| match l {
            LossPrecision::Fp32 => LossArg::Fp32,
            LossPrecision::Bf16 => LossArg::Bf16,
            LossPrecision::InPlace => LossArg::InPlace,
        }),
        kebab,
    )?;
    set_by(
        "--optimizer-states",
        &mut x.optimizer_states,
        f.optimizer_states.map(|o| match o {
            OptimizerStates::Fp32 => StatesArg::Fp32,
            OptimizerStates::Bf16 => StatesArg::Bf16,
        }),
        kebab,
    )?;
    set_by(
        "--optimizer",
        &mut x.optimizer,
        f.optimizer.map(|o| match o {
            crate::cost::step::recipe::Optimizer::AdamW => OptimizerArg::Adamw,
            crate::cost::step::recipe::Optimizer::Muon => OptimizerArg::Muon,
        }),
        kebab,
    )?;
    set_by("--cuda-graphs", &mut x.cuda_graphs, f.cuda_graphs, |g| {
        g.to_string()
    })?;
    set_by(
        "--master-weights",
        &mut x.master_weights,
        f.master_weights.map(|m| match m {
            MasterWeights::Fp32 => MasterArg::Fp32,
            MasterWeights::Fp16 => MasterArg::Fp16,
            MasterWeights::Remainders => MasterArg::Remainders,
        }),
        kebab,
    )?;
    set("--fp8-bf16-layers", &mut x.fp8_bf16_layers, f.bf16_layers)?;
    set(
        "--offload-activations",
        &mut x.offload_activations,
        f.offload_activations,
    )?;
    set_by(
        "--offload-optimizer",
        &mut x.offload_optimizer,
        f.offload_optimizer,
        |v| crate::format::exact(*v),
    )?;
    d.detailed.memory = MemoryArg::Detailed;
    let mut notes: Vec<String> = f
        .notes
        .iter()
        .map(|n| format!("note: --from {path}: {n}"))
        .collect();
    notes.extend(overridden);
    if f.source == Source::Megatron {
        let step = d.memory(&brief)?;
        let crate::cost::memory::MemoryModel::Detailed(detailed) = step else {
            unreachable!("the memory model is detailed");
        };
        let layout = Layout::with(&brief, &shape, d.degrees(), d.zero())?;
        let mut wanted = f.stack_options.clone();
        wanted.sort();
        let tokens = d.tokens()?;
        // A stack whose options the file's are, and which overlaps TP communication where
        // the file does.
        let matches = |stack: Stack| -> bool {
            (!detailed.step.tp_comm_overlap || stack.overlaps_tp())
                && megatron_stack_options(&shape, tokens, layout, detailed.step, stack)
                    .is_ok_and(|o| o == wanted)
        };
        let shown = if wanted.is_empty() {
            "none".to_string()
        } else {
            wanted.join(" ")
        };
        // A file run by another engine (Megatron-DeepSpeed's `--deepspeed`) names its stack.
        if let (None, Some(stack)) = (d.detailed.stack, f.stack) {
            notes.push(format!(
                "note: --from {path}: the file runs on the {stack} stack (--deepspeed); graded so (name another with --stack)"
            ));
            d.detailed.stack = Some(stack);
        }
        match d.detailed.stack {
            Some(stack) if !matches(stack) => notes.push(format!(
                "note: --from {path}: the file's kernel and overlap options ({shown}) are not the {stack} stack's; graded as --stack says"
            )),
            Some(_) => {}
            None => {
                let fits: Vec<Stack> = PREFERENCE.into_iter().filter(|&s| matches(s)).collect();
                let stack = match fits.as_slice() {
                    [stack, others @ ..] => {
                        if !others.is_empty() {
                            let others: Vec<String> =
                                others.iter().map(|s| s.to_string()).collect();
                            notes.push(format!(
                                "note: --from {path}: the kernel and overlap options fit the {stack} stack and also {}; graded as {stack} (name another with --stack)",
                                others.join(", ")
                            ));
                        }
                        *stack
                    }
                    [] => {
                        // None is the file's: the nearest, by the options that differ (the
                        // first in preference among equals), named with what differs.
                        let nearest = PREFERENCE
                            .into_iter()
                            .filter(|&s| !detailed.step.tp_comm_overlap || s.overlaps_tp())
                            .filter_map(|s| {
                                let theirs = megatron_stack_options(
                                    &shape,
                                    tokens,
                                    layout,
                                    detailed.step,
                                    s,
                                )
                                .ok()?;
                                let only_file: Vec<String> = wanted
                                    .iter()
                                    .filter(|o| !theirs.contains(o))
                                    .cloned()
                                    .collect();
                                let only_stack: Vec<String> = theirs
                                    .iter()
                                    .filter(|o| !wanted.contains(o))
                                    .cloned()
                                    .collect();
                                Some((only_file.len() + only_stack.len(), s, only_file, only_stack))
                            })
                            .min_by_key(|(d, ..)| *d);
                        let Some((_, stack, only_file, only_stack)) = nearest else {
                            // No stack's options could be written: the design's own fault
                            // (a batch no layout divides, say) is the one to say.
                            megatron_stack_options(
                                &shape,
                                tokens,
                                layout,
                                detailed.step,
                                Stack::MegatronTe,
                            )?;
                            return Err(Error::invalid(
                                "--from",
                                format!("kernel and overlap options {shown}"),
                                "the options of one of trainplan's stacks (or name the stack with --stack)",
                            ));
                        };
                        let list = |v: &[String]| {
                            if v.is_empty() {
                                "none".to_string()
                            } else {
                                v.join(" ")
                            }
                        };
                        notes.push(format!(
                            "note: --from {path}: the file's kernel and overlap options ({shown}) are no stack's; graded as the nearest, {stack}, which differs in: the file's {} and the stack's {} (name another with --stack)",
                            list(&only_file),
                            list(&only_stack)
                        ));
                        stack
                    }
                };
                d.detailed.stack = Some(stack);
            }
        }
        stages(d, &f, &shape)?;
    } else {
        set("--stack", &mut d.detailed.stack, f.stack)?;
    }
    if f.source == Source::DeepSpeed {
        notes.push(format!(
            "note: --from {path}: DeepSpeed's JSON has no TP or PP degree or model: the layout is TP {} × PP {} from the flags (--tp, --pp), the model from --model-config/--model",
            d.tp(),
            d.pp()
        ));
    }
    if !f.unused.is_empty() {
        notes.push(format!(
            "note: --from {path}: read and not used (they do not change the plan): {}",
            f.unused.join(", ")
        ));
    }
    Ok(notes)
}

/// Lays the file over a search: its model the one shape, its GPUs and sequence length the
/// brief's, its stack (where the file names one, or Megatron-LM's options say it) the
/// search's; the layouts and steps are the search's usual ones.
pub fn apply_search(args: &mut SearchArgs, f: FromFile, path: &str) -> Result<Vec<String>> {
    if !args.models.is_empty() || args.family.ffn.is_some() || args.family.layers.is_some() {
        return Err(Error::invalid(
            "--models",
            "given with --from",
            "the model from the file (or --model-config, which it must match)",
        ));
    }
    let mut notes: Vec<String> = f
        .notes
        .iter()
        .map(|n| format!("note: --from {path}: {n}"))
        .collect();
    match &f.model {
        FileModel::Preset(name) => {
            if args.model_config.is_empty() {
                args.models = vec![name.clone()];
            }
        }
        FileModel::Dims(dims) => {
            if let [config] = args.model_config.as_slice() {
                let shape = hf::read(config)?;
                if let Some(why) = differs(&shape, dims) {
                    return Err(Error::invalid(
                        "--from",
                        shape.name,
                        format!("the model the file describes ({why})"),
                    ));
                }
            } else {
                let preset = model::presets()
                    .into_iter()
                    .find(|p| differs(p, dims).is_none() && dims.vocab == Some(p.vocab));
                match preset {
                    Some(p) => args.models = vec![p.name],
                    None => {
                        return Err(Error::invalid(
                            "--from",
                            path,
                            "a preset's model, or the model's config.json with --model-config (search takes no model flags with --from)",
                        ))
                    }
                }
            }
        }
        FileModel::Unstated => {
            if args.model_config.is_empty() {
                return Err(Error::invalid(
                    "--from",
                    path,
                    "the model alongside: give --model-config config.json",
                ));
            }
        }
    }
    set("--seq-len", &mut args.brief.seq_len, f.seq_len)?;
    let parallel =
        f.tp.unwrap_or(1)
            .saturating_mul(f.pp.unwrap_or(1))
            .saturating_mul(f.cp.unwrap_or(1));
    // DeepSpeed's degrees are the flags', which search does not take.
    let gpus = match f.source {
        Source::DeepSpeed => None,
        _ => f.gpus.or(f.dp.map(|dp| dp.saturating_mul(parallel))),
    };
    let (gpus, overridden) = launcher_gpus(&f, gpus, args.brief.gpus, path);
    notes.extend(overridden);
    set("--gpus", &mut args.brief.gpus, gpus)?;
    // The stack is the detailed model's: under the plate it is only named.
    if let Some(stack) = f.stack {
        if args.detailed.memory == MemoryArg::Detailed {
            set("--stack", &mut args.detailed.stack, Some(stack))?;
        } else {
            notes.push(format!(
                "note: --from {path}: the file's stack, {stack}, is the detailed model's: add --memory detailed to search under it"
            ));
        }
    }
    if !f.unused.is_empty() {
        notes.push(format!(
            "note: --from {path}: read and not used (they do not change the plan): {}",
            f.unused.join(", ")
        ));
    }
    notes.push(format!(
        "note: --from {path}: searching around the file's design: its model, on its {} GPUs at its sequence length; the layouts and steps are the search's",
        args.brief.gpus.map_or("brief's".into(), |g| g.to_string())
    ));
    Ok(notes)
}

/// What `--from` read, as `check --json` adds it (`"from"`): the file, its launcher, and the
/// options it read and left alone.
#[derive(Debug, Clone, Serialize)]
pub struct Read {
    /// The file as given.
    pub file: String,
    /// The launcher: megatron, torchtitan or deepspeed.
    pub format: &'static str,
    /// What was read and not used.
    pub unused: Vec<String>,
    /// What was mapped to the design, as written.
    pub mapped: Vec<String>,
    /// What the design cannot say, each with its line: graded without under `--lenient`
    /// (empty otherwise, or the file is refused).
    pub refused: Vec<String>,
}

impl Read {
    /// What `file` at `path` gave.
    pub fn of(file: &FromFile, path: &Path) -> Read {
        Read {
            file: path.display().to_string(),
            format: file.source.name(),
            unused: file.unused.clone(),
            mapped: file.mapped.clone(),
            refused: file.refused.clone(),
        }
    }

    /// The plan JSON `text` (a pretty-printed object) with `"from"` added last, so the rest is
    /// byte for byte what the flags give.
    pub fn add_to(&self, text: &str) -> Result<String> {
        let body = text
            .trim_end()
            .strip_suffix('}')
            .ok_or_else(|| Error::invalid("--from", "JSON", "a plan object to add the file to"))?;
        let from = serde_json::to_string_pretty(self)
            .map_err(|e| Error::invalid("--from", "JSON", e.to_string()))?
            .replace('\n', "\n  ");
        Ok(format!("{},\n  \"from\": {from}\n}}\n", body.trim_end()))
    }
}

/// The layers a window applies to, as a list (every layer when `None`), for comparing two
/// ways of writing the same set.
fn windowed(set: &Option<crate::model::LayerSet>, layers: u32) -> String {
    match set {
        None => "every layer".to_string(),
        Some(set) => format!("layers {:?}", set.indices(layers).collect::<Vec<u32>>()),
    }
}
