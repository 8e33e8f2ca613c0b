//! Megatron-LM's `pretrain_gpt.py` arguments read back: the bash array `export --format
//! megatron` writes, a launch script, or a file of `--option value` tokens.
//!
//! The text is split as a shell splits words: `#` comments, `\` line continuations, single and
//! double quotes, `--option=value`. Words before a `*.py` word are the launcher's (torchrun's
//! `--nproc_per_node` and `--nnodes` give the GPUs); a shell array's `NAME=(` and `)` and
//! other words that are no option are passed over. Each option is one of: mapped to the design
//! (the model's dimensions, the layout, the step, the precision), a kernel or overlap option
//! that says the stack, an option that does not change the plan (data, tokenizer, optimizer
//! schedule, logging, checkpoints: listed as unused), or refused by name — one that changes
//! what is trained or how in a way the design cannot say, or one no table here knows.
//!
//! Two things Megatron-LM's arguments do not carry are read from the comments `export` writes
//! when present: the GPUs (`# Launch on N GPUs`) and the vocabulary (`vocabulary N)`); a file
//! without them needs `--gpus` (or torchrun's counts) and `--vocab-size` or `--model-config`.

use crate::cost::step::precision::Precision;
use crate::cost::step::Recompute;
use crate::cost::step::Schedule;
use crate::error::{Error, Result};
use crate::model::layout::ZeroStage;
use crate::model::Biases;

use super::design::{times, whole, Dims, FileModel, FromFile, Source};

/// Options that say which kernels and overlaps run: the stack's (`cost::step::stack::Settings`).
/// (`--tp-comm-overlap` is the step's: [`crate::cost::step::Step::tp_comm_overlap`].)
pub const STACK_OPTIONS: [&str; 8] = [
    "--attention-backend",
    "--cross-entropy-loss-fusion",
    "--no-rope-fusion",
    "--no-bias-swiglu-fusion",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--no-overlap-p2p-communication",
    "--cp-comm-type",
];

/// The launchers' options (torchrun's, the deepspeed launcher's): their counts give the GPUs,
/// the rest say where the ranks meet.
const LAUNCHER_OPTIONS: [&str; 16] = [
    "--nproc_per_node",
    "--nproc-per-node",
    "--nnodes",
    "--num_gpus",
    "--num_nodes",
    "--node_rank",
    "--node-rank",
    "--master_addr",
    "--master-addr",
    "--master_port",
    "--master-port",
    "--rdzv_backend",
    "--rdzv-backend",
    "--rdzv_endpoint",
    "--rdzv-endpoint",
    "--rdzv_id",
];

/// The words with a shell's plain variables put in (`NAME=value` before, `$NAME` or `${NAME}`
/// a whole word after) and arrays' brackets taken off (`ARGS=(--x`, `1)`).
fn expand(words: Vec<String>) -> Vec<String> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut out = Vec::with_capacity(words.len());
    for w in words {
        if let Some((name, value)) = w.split_once('=') {
            let plain = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if plain {
                match value.strip_prefix('(') {
                    Some(rest) if !rest.is_empty() => out.push(rest.to_string()),
                    Some(_) => {}
                    None => {
                        let value = variable(value, &vars).unwrap_or_else(|| value.to_string());
                        vars.push((name.to_string(), value));
                    }
                }
                continue;
            }
        }
        let w = match w.strip_suffix(')') {
            Some(rest) if !w.contains('(') => rest.to_string(),
            _ => w,
        };
        if w.is_empty() {
            continue;
        }
        match variable(&w, &vars) {
            Some(value) => out.push(value),
            None => out.push(w),
        }
    }
    out
}

/// The value of `word` when it is a whole variable reference the script set: `$NAME`,
/// `${NAME}`, or `${NAME:-default}` / `${NAME-default}` (the default when the script did not set
/// it, as bash gives it); `None` for any other word, or a name the script did not set.
fn variable(word: &str, vars: &[(String, String)]) -> Option<String> {
    let (name, default) = match word.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        Some(inner) => match inner.split_once(":-").or_else(|| inner.split_once('-')) {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        },
        None => (word.strip_prefix('$')?, None),
    };
    vars.iter()
        .rev()
        .find(|(v, _)| v == name)
        .map(|(_, value)| value.clone())
        .or_else(|| default.map(str::to_string))
}

/// Prefixes of options that do not change the plan: data, tokenizer, optimizer and its
/// schedule, logging, checkpoints, evaluation, seeds, initialisation, dropout, timeouts.
const UNUSED_PREFIXES: [&str; 48] = [
    "--attention-softmax-in-fp32",
    "--calculate-per-token-loss",
    "--empty-unused-memory-level",
    "--profile",
    "--data-",
    "--split",
    "--mock-data",
    "--tokenizer-",
    "--vocab-file",
    "--merge-file",
    "--save",
    "--load",
    "--no-save",
    "--no-load",
    "--ckpt-",
    "--dist-ckpt",
    "--async-save",
    "--finetune",
    "--pretrained-checkpoint",
    "--log-",
    "--log",
    "--tensorboard",
    "--wandb-",
    "--timing-log",
    "--eval-",
    "--exit-",
    "--lr",
    "--min-lr",
    "--weight-decay",
    "--start-weight-decay",
    "--end-weight-decay",
    "--adam-",
    "--sgd-",
    "--optimizer",
    "--clip-grad",
    "--seed",
    "--init-method-",
    "--attention-dropout",
    "--hidden-dropout",
    "--distributed-backend",
    "--distributed-timeout-minutes",
    "--num-workers",
    "--use-mcore-models",
    "--use-flash-attn",
    "--manual-gc",
    "--fp8-amax-",
    "--fp8-margin",
    "--no-gradient-accumulation-fusion",
];

/// Options the exporter writes whose value is a fact of every design here (Llama-style
/// blocks on Transformer Engine): the value must be this one.
const FIXED: [(&str, &str); 3] = [
    ("--normalization", "RMSNorm"),
    ("--position-embedding-type", "rope"),
    ("--transformer-impl", "transformer_engine"),
];

/// Options that take no value.
const SWITCHES: [&str; 25] = [
    "--attention-softmax-in-fp32",
    "--calculate-per-token-loss",
    "--fp8-param-gather",
    "--sequence-parallel",
    "--use-distributed-optimizer",
    "--use-megatron-fsdp",
    "--group-query-attention",
    "--swiglu",
    "--use-rope-scaling",
    "--untie-embeddings-and-output-weights",
    "--disable-bias-linear",
    "--add-qkv-bias",
    "--bf16",
    "--fp16",
    "--recompute-activations",
    "--cross-entropy-loss-fusion",
    "--no-rope-fusion",
    "--no-bias-swiglu-fusion",
    "--overlap-grad-reduce",
    "--overlap-param-gather",
    "--tp-comm-overlap",
    "--no-overlap-p2p-communication",
    "--no-gradient-accumulation-fusion",
    "--use-mcore-models",
    "--mock-data",
];

/// The words of shell text, as bash splits them (comments, continuations, quotes); the
/// comments' text comes back apart.
pub fn words(text: &str) -> Result<(Vec<String>, Vec<String>)> {
    let mut words = Vec::new();
    let mut comments = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(n) => {
                    word.push(n);
                    in_word = true;
                }
                None => {}
            },
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => word.push(n),
                        None => return Err(unclosed('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => word.push(n),
                            Some('\n') => {}
                            Some(n) => {
                                word.push('\\');
                                word.push(n);
                            }
                            None => return Err(unclosed('"')),
                        },
                        Some(n) => word.push(n),
                        None => return Err(unclosed('"')),
                    }
                }
            }
            '#' if !in_word => {
                let mut comment = String::new();
                while let Some(&n) = chars.peek() {
                    if n == '\n' {
                        break;
                    }
                    comment.push(n);
                    chars.next();
                }
                comments.push(comment);
            }
            c if c.is_whitespace() || c == ';' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if let Some(bad) = words.iter().find(|w| w.chars().any(char::is_control)) {
        return Err(Error::invalid(
            "megatron arguments",
            bad.escape_debug(),
            "words without line breaks or control characters",
        ));
    }
    Ok((words, comments))
}

fn unclosed(quote: char) -> Error {
    Error::invalid(
        "megatron arguments",
        format!("a {quote} quote"),
        "closed quotes",
    )
}

/// The number after `prefix` in a comment, if any.
fn number_after(comments: &[String], prefix: &str) -> Option<u64> {
    comments.iter().find_map(|c| {
        let at = c.find(prefix)? + prefix.len();
        let digits: String = c[at..]
            .chars()
            .take_while(|ch| ch.is_ascii_digit() || *ch == ',')
            .filter(|ch| ch.is_ascii_digit())
            .collect();
        digits.parse().ok()
    })
}

/// The (stage, chunk) entries of a `--pipeline-model-parallel-layout` string (`Et|(t|)*3,tL`).
pub fn layout_entries(text: &str) -> Result<u64> {
    let bad = || {
        Error::invalid(
            "--pipeline-model-parallel-layout",
            text,
            "Megatron-LM's layout: entries of E, t, t*n and L joined by |, runs as (entry|)*n,",
        )
    };
    let mut count: u64 = 0;
    let mut rest = text.trim().trim_matches('"');
    while !rest.is_empty() {
        if let Some(run) = rest.strip_prefix('(') {
            let close = run.find(")*").ok_or_else(bad)?;
            let after = &run[close + 2..];
            let end = after.find(',').unwrap_or(after.len());
            let n: u64 = after[..end].parse().map_err(|_| bad())?;
            count = count.checked_add(n).ok_or_else(bad)?;
            rest = after.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find('|').unwrap_or(rest.len());
            let entry = &rest[..end];
            if !entry
                .chars()
                .all(|c| matches!(c, 'E' | 't' | 'L' | '*') || c.is_ascii_digit())
            {
                return Err(bad());
            }
            count += 1;
            rest = rest.get(end + 1..).unwrap_or("");
        }
    }
    if count == 0 {
        return Err(bad());
    }
    Ok(count)
}

/// A float for `option`.
fn float(option: &str, text: &str) -> Result<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| Error::invalid(option, text, "a number > 0"))
}

/// The design the arguments in `text` state.
pub fn parse(text: &str) -> Result<FromFile> {
    let (words, comments) = words(text)?;
    let args = expand(words);
    let mut options: Vec<(String, Option<String>)> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        i += 1;
        let Some(name) = w.strip_prefix("--").map(|_| w.as_str()) else {
            continue;
        };
        if let Some((n, v)) = name.split_once('=') {
            options.push((n.to_string(), Some(v.to_string())));
            continue;
        }
        let switch = SWITCHES.contains(&name);
        let value = match args.get(i) {
            Some(next) if !switch && !next.starts_with("--") && !next.ends_with(".py") => {
                i += 1;
                Some(next.clone())
            }
            _ => None,
        };
        options.push((name.to_string(), value));
    }
    if options.is_empty() {
        return Err(Error::invalid(
            "--from",
            "no Megatron-LM options",
            "a Megatron-LM argument list (--num-layers …), a torchtitan job TOML or a DeepSpeed JSON",
        ));
    }
    let mut from = FromFile::new(Source::Megatron);
    // The launcher's counts (torchrun's, or the deepspeed launcher's): the GPUs, when they
    // are numbers.
    let count = |names: &[&str]| {
        options
            .iter()
            .find(|(n, _)| names.contains(&n.as_str()))
            .and_then(|(_, v)| v.as_deref()?.parse::<u64>().ok())
            .filter(|&n| n >= 1)
    };
    let per_node = count(&["--nproc_per_node", "--nproc-per-node", "--num_gpus"]);
    let nodes = count(&["--nnodes", "--num_nodes"]);
    if let Some(per_node) = per_node {
        from.gpus = Some(times("--nnodes", per_node, nodes.unwrap_or(1))?);
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut dims = DimsBuilder::default();
    let mut recompute = RecomputeBuilder::default();
    let mut fp8: (Option<String>, Option<String>) = (None, None);
    let (mut fsdp, mut distributed, mut strategy) = (false, false, None::<String>);
    let mut bf16 = false;
    let (mut iters, mut samples, mut virtual_layers) = (None, None, None);
    let mut divisor = None;
    for (name, value) in &options {
        if seen.contains(&name.as_str()) {
            return Err(Error::invalid(
                name.as_str(),
                "given twice",
                "each option once",
            ));
        }
        seen.push(name);
        let need = || {
            value
                .as_deref()
                .ok_or_else(|| Error::invalid(name.as_str(), "no value", "a value"))
        };
        let n = || whole(name, need()?);
        match name.as_str() {
            "--tensor-model-parallel-size" => from.tp = Some(n()?),
            "--pipeline-model-parallel-size" => from.pp = Some(n()?),
            "--context-parallel-size" => from.cp = Some(n()?),
            "--num-distributed-optimizer-instances" => from.replicate = Some(n()?),
            "--num-virtual-stages-per-pipeline-rank" => {
                let v = n()?;
                from.schedule = Some(match u32::try_from(v) {
                    Ok(1) => Schedule::OneFOneB,
                    Ok(v) => Schedule::Interleaved(v),
                    Err(_) => return Err(Error::invalid(name.as_str(), v, "at most 2^32 − 1")),
                });
            }
            "--num-layers-per-virtual-pipeline-stage" => virtual_layers = Some(n()?),
            "--pipeline-model-parallel-layout" => {
                let text = need()?.to_string();
                from.pipeline_layout = Some((layout_entries(&text)?, text));
            }
            "--sequence-parallel" => from.sequence_parallel = Some(true),
            "--tp-comm-overlap" => from.tp_comm_overlap = Some(true),
            "--use-distributed-optimizer" => distributed = true,
            "--use-megatron-fsdp" => fsdp = true,
            "--data-parallel-sharding-strategy" => strategy = Some(need()?.to_string()),
            "--num-layers" => dims.layers = Some(n()?),
            "--hidden-size" => dims.hidden = Some(n()?),
            "--ffn-hidden-size" => dims.ffn = Some(n()?),
            "--num-attention-heads" => dims.heads = Some(n()?),
            "--num-query-groups" => dims.kv_heads = Some(n()?),
            "--group-query-attention" => dims.gqa = true,
            "--kv-channels" => dims.head_dim = Some(n()?),
            "--vocab-size" => dims.vocab = Some(n()?),
            "--swiglu" => dims.swiglu = true,
            "--norm-epsilon" => dims.norm_eps = Some(float(name, need()?)?),
            // RoPE over the whole head, as every model here has it.
            "--rotary-percent" => {
                if float(name, need()?)? != 1.0 {
                    return Err(Error::invalid(
                        name.as_str(),
                        need()?,
                        "1.0: RoPE over the whole head, the model trainplan plans",
                    ));
                }
            }
            "--rotary-base" => dims.rope_theta = Some(float(name, need()?)?),
            "--use-rope-scaling" => dims.rope_scaling = true,
            "--window-size" => {
                let v = need()?;
                let left = v
                    .split_once(',')
                    .filter(|(_, right)| right.trim() == "0")
                    .and_then(|(left, _)| left.trim().parse::<u64>().ok())
                    .ok_or_else(|| {
                        Error::invalid(
                            name.as_str(),
                            v,
                            "a causal window as LEFT,0 (tokens before each one it sees)",
                        )
                    })?;
                dims.sliding_window = Some(left + 1);
            }
            "--make-vocab-size-divisible-by" => divisor = Some(n()?),
            "--untie-embeddings-and-output-weights" => dims.untied = true,
            "--disable-bias-linear" => dims.no_bias = true,
            "--add-qkv-bias" => dims.qkv_bias = true,
            "--seq-length" => from.seq_len = Some(n()?),
            "--max-position-embeddings" => dims.max_positions = Some(n()?),
            "--micro-batch-size" => from.micro_batch = Some(n()?),
            "--global-batch-size" => from.global_batch = Some(n()?),
            "--train-iters" => iters = Some(n()?),
            "--train-samples" => samples = Some(n()?),
            "--recompute-granularity" => recompute.granularity = Some(need()?.to_string()),
            "--recompute-method" => recompute.method = Some(need()?.to_string()),
            "--recompute-num-layers" => recompute.layers = Some(n()?),
            "--recompute-activations" => recompute.granularity = Some("selective".into()),
            "--bf16" => bf16 = true,
            "--fp8-format" => fp8.0 = Some(need()?.to_string()),
            "--fp8-recipe" => fp8.1 = Some(need()?.to_string()),
            option if LAUNCHER_OPTIONS.contains(&option) => {}
            option if STACK_OPTIONS.contains(&option) => from.stack_options.push(match value {
                Some(v) => format!("{option} {v}"),
                None => option.to_string(),
            }),
            option if FIXED.iter().any(|(o, _)| *o == option) => {
                let want = FIXED.iter().find(|(o, _)| *o == option).map(|(_, v)| *v);
                if value.as_deref() != want {
                    return Err(Error::invalid(
                        option,
                        value.as_deref().unwrap_or("no value"),
                        format!(
                            "{} (the blocks trainplan models: RMSNorm, RoPE, Transformer Engine)",
                            want.unwrap_or_default()
                        ),
                    ));
                }
            }
            option if UNUSED_PREFIXES.iter().any(|p| option.starts_with(p)) => {
                from.unused.push(match value {
                    Some(v) => format!("{option} {v}"),
                    None => option.to_string(),
                });
            }
            option => {
                return Err(Error::invalid(
                    option,
                    value.as_deref().unwrap_or("given"),
                    "an option trainplan maps to the design or knows to leave the plan alone (take it out, or state it with trainplan's flags if it changes the design)",
                ))
            }
        }
    }
    // Precision: BF16 with Transformer Engine's FP8 recipes on top.
    if !bf16 {
        return Err(Error::invalid(
            "--bf16",
            "missing",
            "BF16 training (--bf16), the precision every plan keeps its weights in",
        ));
    }
    from.precision = Some(match (fp8.0.as_deref(), fp8.1.as_deref()) {
        (None, None) => Precision::Bf16,
        (Some("hybrid"), Some("delayed")) => Precision::Fp8,
        (Some("e4m3"), Some("mxfp8")) => Precision::Mxfp8,
        (format, recipe) => return Err(Error::invalid(
            "--fp8-format/--fp8-recipe",
            format!("{}/{}", format.unwrap_or("none"), recipe.unwrap_or("none")),
            "hybrid/delayed (FP8) or e4m3/mxfp8 (MXFP8), the recipes the precision model counts",
        )),
    });
    // ZeRO: the distributed optimizer is stage 1; Megatron-FSDP's strategies 2 and 3.
    from.zero = Some(match (fsdp, strategy.as_deref()) {
        (false, None) => ZeroStage::new(u8::from(distributed))?,
        (true, Some("optim_grads")) => ZeroStage::new(2)?,
        (true, Some("optim_grads_params")) => ZeroStage::new(3)?,
        (_, s) => {
            return Err(Error::invalid(
                "--data-parallel-sharding-strategy",
                s.unwrap_or("missing"),
                "optim_grads (ZeRO 2) or optim_grads_params (ZeRO 3) with --use-megatron-fsdp",
            ))
        }
    });
    from.sequence_parallel = Some(from.sequence_parallel.unwrap_or(false));
    from.tp_comm_overlap = Some(from.tp_comm_overlap.unwrap_or(false));
    from.recompute = Some(recompute.mode()?);
    let model = dims.build(from.tp.unwrap_or(1), divisor, &comments)?;
    let layers = model.layers;
    let pp = from.pp.unwrap_or(1);
    if let Some(n) = virtual_layers {
        let per_stage = layers / pp.max(1);
        if layers % pp.max(1) != 0 || per_stage % n != 0 || per_stage / n < 2 {
            return Err(Error::invalid(
                "--num-layers-per-virtual-pipeline-stage",
                n,
                format!("layers a chunk that split each stage's {per_stage} layers into 2 or more chunks"),
            ));
        }
        from.schedule = Some(Schedule::Interleaved((per_stage / n) as u32));
    }
    if let Some((entries, text)) = &from.pipeline_layout {
        if entries % pp != 0 {
            return Err(Error::invalid(
                "--pipeline-model-parallel-layout",
                text,
                format!("a whole number of chunks on each of the PP {pp} stages"),
            ));
        }
        let chunks = entries / pp;
        from.schedule = Some(match u32::try_from(chunks) {
            Ok(1) => Schedule::OneFOneB,
            Ok(v) => Schedule::Interleaved(v),
            Err(_) => {
                return Err(Error::invalid(
                    "--pipeline-model-parallel-layout",
                    text,
                    "fewer chunks",
                ))
            }
        });
    }
    if from.schedule.is_none() {
        from.schedule = Some(Schedule::OneFOneB);
    }
    if let Some(r) = recompute.layers {
        // The block method over half of each stage's layers is selective-layer.
        if from.recompute == Some(Recompute::SelectiveLayer) {
            let per_stage = layers / pp;
            if layers % pp != 0 || per_stage < 2 || r != per_stage / 2 {
                return Err(Error::invalid(
                    "--recompute-num-layers",
                    r,
                    format!("half of each stage's {per_stage} layers, rounded down, with --recompute-method block (trainplan's selective-layer)"),
                ));
            }
        }
    }
    let seq = from.seq_len;
    if let (Some(max), Some(s)) = (model.max_positions, seq) {
        if max < s {
            return Err(Error::invalid(
                "--max-position-embeddings",
                max,
                format!("at least --seq-length {s}"),
            ));
        }
    }
    from.model = FileModel::Dims(Box::new(model.dims));
    // Tokens: the steps of G sequences, or the samples, of s tokens.
    let s = seq.ok_or_else(|| Error::invalid("--seq-length", "missing", "the sequence length"))?;
    let g = from.global_batch.ok_or_else(|| {
        Error::invalid(
            "--global-batch-size",
            "missing",
            "the global batch, sequences",
        )
    })?;
    from.tokens = Some(match (iters, samples) {
        (Some(i), None) => times("--train-iters", times("--global-batch-size", g, s)?, i)?,
        (None, Some(n)) => times("--train-samples", n, s)?,
        (None, None) => {
            return Err(Error::invalid(
                "--train-iters",
                "missing",
                "the training length (--train-iters or --train-samples)",
            ))
        }
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "--train-samples",
                "given with --train-iters",
                "one of them",
            ))
        }
    });
    if from.gpus.is_none() {
        from.gpus = number_after(&comments, "Launch on ");
    }
    Ok(from)
}

#[derive(Default)]
struct RecomputeBuilder {
    granularity: Option<String>,
    method: Option<String>,
    layers: Option<u64>,
}

impl RecomputeBuilder {
    fn mode(&self) -> Result<Recompute> {
        match (
            self.granularity.as_deref(),
            self.method.as_deref(),
            self.layers,
        ) {
            (None, None, None) => Ok(Recompute::None),
            (Some("selective"), None, None) => Ok(Recompute::Selective),
            (Some("full"), Some("uniform"), Some(1)) => Ok(Recompute::Full),
            (Some("full"), Some("block"), Some(_)) => Ok(Recompute::SelectiveLayer),
            (g, m, n) => Err(Error::invalid(
                "--recompute-granularity",
                format!(
                    "{} with --recompute-method {} and --recompute-num-layers {}",
                    g.unwrap_or("none"),
                    m.unwrap_or("none"),
                    n.map_or("none".into(), |n| n.to_string())
                ),
                "selective; full, uniform, 1 layer (full); or full, block, half a stage's layers (selective-layer)",
            )),
        }
    }
}

#[derive(Default)]
struct DimsBuilder {
    layers: Option<u64>,
    hidden: Option<u64>,
    ffn: Option<u64>,
    heads: Option<u64>,
    kv_heads: Option<u64>,
    gqa: bool,
    head_dim: Option<u64>,
    vocab: Option<u64>,
    swiglu: bool,
    norm_eps: Option<f64>,
    rope_theta: Option<f64>,
    rope_scaling: bool,
    sliding_window: Option<u64>,
    untied: bool,
    no_bias: bool,
    qkv_bias: bool,
    max_positions: Option<u64>,
}

struct Built {
    dims: Dims,
    layers: u64,
    max_positions: Option<u64>,
}

impl DimsBuilder {
    fn build(self, tp: u64, divisor: Option<u64>, comments: &[String]) -> Result<Built> {
        let need = |option: &str, v: Option<u64>| {
            v.ok_or_else(|| Error::invalid(option, "missing", "the model's dimension"))
        };
        let layers = need("--num-layers", self.layers)?;
        let hidden = need("--hidden-size", self.hidden)?;
        let ffn = need("--ffn-hidden-size", self.ffn)?;
        let heads = need("--num-attention-heads", self.heads)?;
        let kv_heads = match (self.gqa, self.kv_heads) {
            (true, Some(k)) => k,
            (false, None) => heads,
            (true, None) => {
                return Err(Error::invalid(
                    "--num-query-groups",
                    "missing",
                    "the KV heads with --group-query-attention",
                ))
            }
            (false, Some(k)) => {
                return Err(Error::invalid(
                    "--num-query-groups",
                    k,
                    "given with --group-query-attention",
                ))
            }
        };
        if !self.swiglu {
            return Err(Error::invalid(
                "--swiglu",
                "missing",
                "a SwiGLU MLP (--swiglu), the block trainplan models",
            ));
        }
        let biases = match (self.no_bias, self.qkv_bias) {
            (true, false) => Biases::default(),
            (true, true) => Biases {
                qkv: true,
                output: false,
                mlp: false,
            },
            (false, false) => Biases {
                qkv: true,
                output: true,
                mlp: true,
            },
            (false, true) => return Err(Error::invalid(
                "--add-qkv-bias",
                "without --disable-bias-linear",
                "--disable-bias-linear --add-qkv-bias (q/k/v biases only), or neither (all biases)",
            )),
        };
        let vocab = self.vocab.or_else(|| number_after(comments, "vocabulary "));
        if let (Some(v), Some(d)) = (vocab, divisor) {
            if v % d.saturating_mul(tp) != 0 {
                return Err(Error::invalid(
                    "--make-vocab-size-divisible-by",
                    d,
                    format!("a divisor that with TP {tp} divides the vocabulary {v}: Megatron-LM would pad it with rows the plan does not count"),
                ));
            }
        }
        Ok(Built {
            dims: Dims {
                layers,
                hidden,
                ffn,
                heads,
                kv_heads,
                head_dim: self.head_dim,
                vocab,
                tied_embeddings: !self.untied,
                biases,
                // Megatron-LM's defaults: RoPE base 10,000, ε 1e-5.
                rope_theta: self.rope_theta.unwrap_or(10_000.0),
                rope_scaling: self.rope_scaling,
                norm_eps: self.norm_eps.unwrap_or(1e-5),
                sliding_window: self.sliding_window,
            },
            layers,
            max_positions: self.max_positions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_and_their_defaults_are_bash_s() {
        let vars = vec![("TP".to_string(), "4".to_string())];
        assert_eq!(variable("$TP", &vars).as_deref(), Some("4"));
        assert_eq!(variable("${TP}", &vars).as_deref(), Some("4"));
        assert_eq!(variable("${TP:-2}", &vars).as_deref(), Some("4"));
        assert_eq!(variable("${PP:-2}", &vars).as_deref(), Some("2"));
        assert_eq!(variable("${PP-8}", &vars).as_deref(), Some("8"));
        assert_eq!(variable("$PP", &vars), None);
        // A bare reference takes no default: `$TP-x` is no variable of the script's.
        assert_eq!(variable("$TP-x", &vars), None);
        assert_eq!(variable("--tp", &vars), None);
        // A script's own `TP=${TP:-2}` then `$TP`.
        let script = "TP=${TP:-2}\nARGS=(--tensor-model-parallel-size $TP)\n";
        let (w, _) = words(script).unwrap();
        assert_eq!(expand(w), ["--tensor-model-parallel-size", "2"]);
    }

    #[test]
    fn words_split_as_bash_splits_them() {
        let (w, c) = words("A=(\n  --x 1 # one\n  --y \"a b\" \\\n --z='q'\n)\n").unwrap();
        assert_eq!(w, ["A=(", "--x", "1", "--y", "a b", "--z=q", ")"]);
        assert_eq!(c, [" one"]);
        assert!(words("--x \"open")
            .unwrap_err()
            .to_string()
            .contains("quote"));
    }

    #[test]
    fn a_launch_script_s_array_and_torchrun_s_counts_are_read() {
        let script = "#!/bin/bash\nARGS=(\n  --num-layers 2 --hidden-size 256 --ffn-hidden-size 512\n  --num-attention-heads 2 --swiglu --disable-bias-linear --bf16\n  --seq-length 128 --micro-batch-size 1 --train-iters 10\n)\ntorchrun --nproc_per_node=8 --nnodes 2 pretrain_gpt.py \"${ARGS[@]}\" \\\n  --global-batch-size 16\n";
        let f = parse(script).unwrap();
        assert_eq!(f.gpus, Some(16));
        assert_eq!(f.tokens, Some(10 * 16 * 128));
        // The launcher's options in an array of their own, a count in a variable.
        let script = script.replace(
            "torchrun --nproc_per_node=8 --nnodes 2",
            "N=4\nDIST=(--nproc_per_node $N --nnodes 2)\ntorchrun \"${DIST[@]}\"",
        );
        let f = parse(&script).unwrap();
        assert_eq!(f.gpus, Some(8));
        assert_eq!(expand(vec!["A=(--x".into(), "1)".into()]), ["--x", "1"]);
    }

    #[test]
    fn layout_strings_count_their_entries() {
        assert_eq!(layout_entries("Et|(t|)*47,(t*2|)*15,t*2L").unwrap(), 64);
        assert_eq!(layout_entries("\"Et|(t*2|)*2,tL\"").unwrap(), 4);
        assert_eq!(layout_entries("E|(t|)*6,L").unwrap(), 8);
        assert!(layout_entries("(t|)*x,").is_err());
    }

    #[test]
    fn an_unknown_option_is_named_and_a_data_option_is_unused() {
        let base = "--num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --seq-length 128 --micro-batch-size 1 --global-batch-size 8 --train-iters 10";
        let f = parse(&format!("{base} --data-path /x --lr 3e-4")).unwrap();
        assert_eq!(f.unused, ["--data-path /x", "--lr 3e-4"]);
        assert_eq!(f.tokens, Some(10 * 8 * 128));
        let e = parse(&format!("{base} --num-experts 8"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--num-experts") && !e.contains('\n'), "{e}");
        let e = parse(&format!("{base} --fp16")).unwrap_err().to_string();
        assert!(e.contains("--fp16"), "{e}");
        let e = parse(&format!("{base} --normalization LayerNorm"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("LayerNorm"), "{e}");
    }
}
