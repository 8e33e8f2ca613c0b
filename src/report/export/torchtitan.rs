//! torchtitan: the TOML job configuration of a plan.
//!
//! Sections and keys as `torchtitan/config/job_config.py` defines them in torchtitan 0.2.2,
//! the last release configured by TOML (0.3.0 moved to Python configs, where the same names
//! remain as `--section.key` overrides, with `activation_checkpoint` a subcommand).
//! torchtitan shards data parallelism with FSDP2 (ZeRO 3); a ZeRO 1 or 2 plan becomes FSDP that
//! keeps the gathered weights after forward (`fsdp_reshard_after_forward = "never"`: weights
//! whole through the step, gradients and optimizer state sharded, ZeRO 2), which needs no more
//! memory than ZeRO 1; ZeRO 0 is plain replication (`data_parallel_replicate_degree`).
//!
//! The degrees make the world as torchtitan's `ParallelDims` checks it,
//! `data_parallel_replicate_degree × data_parallel_shard_degree × CP × TP × PP`, both DP
//! degrees written out: the layout's DP is `replicate × DP/replicate`, and FSDP shards over
//! `dp_shard × cp`, the layout's shard group (torchtitan's mesh `pp, dp_replicate, dp_shard,
//! cp, tp`, slowest first, is Megatron-core's rank order). torchtitan's batch degree is
//! `dp_replicate × dp_shard`, CP ranks sharing a batch, so `global_batch_size` is the plan's.
//! Context parallelism all-gathers K/V (`context_parallel_rotate_method = "allgather"`, its
//! default, written out) over sequences split head-tail into 2·CP chunks. FP8 is torchao's
//! float8 training of the linear layers with tensorwise scaling (`quantize.linear.float8`),
//! MXFP8 torchao's MX recipe (`quantize.linear.mx`, `mxfp8_cublas`); the output layer stays
//! BF16 in both, as the precision model counts.

use std::fmt::Write;

use super::exporter::Launcher;
use super::launch::{CpExchange, Launch};
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::cost::step::Recompute;
use crate::cost::step::Schedule;
use crate::error::{Error, Result};

/// A torchtitan job configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Torchtitan;

/// torchtitan's own Llama 3 flavors, `torchtitan/models/llama3/__init__.py`.
const FLAVORS: [(&str, &str); 3] = [
    ("llama3-8b", "8B"),
    ("llama3-70b", "70B"),
    ("llama3-405b", "405B"),
];

/// The flavor of a shape with Llama 3's published dimensions, if it is one.
fn flavor(l: &Launch) -> Option<&'static str> {
    crate::model::presets()
        .iter()
        .zip(FLAVORS)
        .find(|(preset, _)| preset.same_dimensions(&l.shape))
        .map(|(_, (_, flavor))| flavor)
}

/// The job configuration as TOML.
pub fn render(l: &Launch) -> Result<String> {
    let (s, step, layout) = (&l.shape, &l.step, &l.layout);
    let mut out = l.header();
    let _ = writeln!(
        out,
        "# torchtitan job config (keys from torchtitan/config/job_config.py, torchtitan 0.2.2)."
    );
    let _ = writeln!(
        out,
        "# Launch on {} GPUs: torchrun --nproc_per_node {} ... -m torchtitan.train --job.config_file this.toml",
        l.gpus(),
        l.gpus_per_host
    );
    let flavor = flavor(l);
    let a = &s.architecture;
    if l.precision().is_fp4() {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!(
                "a precision torchtitan trains in (bf16, fp8, mxfp8): it has no {} recipe",
                l.precision()
            ),
        ));
    }
    // torchtitan's MoE models (deepseek_v3, llama4, qwen3) set their experts in Python model
    // args, not in the job TOML this writes for its llama3 model.
    if s.experts.is_some() {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!(
                "a dense model: {} is a mixture of experts, and torchtitan's llama3 model has no experts (its MoE models set them in their Python model args, which a job config cannot); --format megatron writes one",
                s.name
            ),
        ));
    }
    // Its llama3 model's attention is grouped-query; latent attention is its deepseek_v3
    // model's, set in Python model args.
    if s.attention.latent.is_some() {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!(
                "grouped-query attention: {} has multi-head latent attention, which torchtitan's llama3 model does not build (its deepseek_v3 model sets it in Python model args, which a job config cannot); --format megatron writes one",
                s.name
            ),
        ));
    }
    // Its llama3 model is RMSNorm, SwiGLU and RoPE.
    if !s.style.is_default() {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!(
                "a Llama block (RMSNorm, SwiGLU, RoPE), the one torchtitan's llama3 model builds: {} has {:?}; --format megatron writes it",
                s.name, s.style
            ),
        ));
    }
    if s.mtp > 0 {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!(
                "a model without multi-token prediction: {} trains {} MTP depth(s), which torchtitan's models do not build; --format megatron writes them (--mtp-num-layers)",
                s.name, s.mtp
            ),
        ));
    }
    // torchtitan's llama3 model has no attention window; its flavors fix Llama 3.1's RoPE
    // and ε (the TOML cannot set them), so a plan with others is refused, not mistrained.
    if let Some(w) = a.sliding_window {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!("a model torchtitan's llama3 builds: {} has a {w}-token sliding window, which it has none of", s.name),
        ));
    }
    if flavor.is_some() && *a != crate::model::Architecture::llama31() {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!(
                "the RoPE and ε of torchtitan's llama3 flavors (rope_theta 500000, norm_eps 1e-5, Llama 3.1's rope scaling), which its TOML cannot change; {} has rope_theta {}, norm_eps {}{}",
                s.name,
                a.rope_theta,
                a.norm_eps,
                if a.rope_scaling.is_some() { ", another scaling" } else { ", no scaling" }
            ),
        ));
    }
    if flavor.is_none() {
        let _ = writeln!(
            out,
            "# {} is not one of torchtitan's llama3 flavors: register one with n_layers = {}, dim = {}, n_heads = {}, n_kv_heads = {}, vocab_size = {}, an FFN of {}, rope_theta = {}, norm_eps = {} and {} (torchtitan/models/llama3/__init__.py).",
            s.name,
            s.layers,
            s.hidden,
            s.heads,
            s.kv_heads,
            s.vocab,
            s.ffn,
            a.rope_theta,
            a.norm_eps,
            match &a.rope_scaling {
                None => "no rope scaling (torchtitan applies Llama 3.1's to every llama3 model: take it out)".to_string(),
                Some(r) => format!("{} rope scaling, factor {}", r.rope_type, r.factor),
            }
        );
    }
    if s.biases != crate::model::Biases::default() || s.tied_embeddings {
        let _ = writeln!(
            out,
            "# {} has biases or tied embeddings, which torchtitan's llama3 model does not: it needs a model of its own.",
            s.name
        );
    }
    // torchtitan's sequence rule (`ParallelDims.seq_len_divisor`): sequence parallelism splits
    // the sequence over TP, context parallelism into 2·CP chunks.
    let divisor = layout.tp.saturating_mul(2).saturating_mul(layout.cp);
    if step.seq_len % divisor != 0 {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            format!(
                "a sequence torchtitan can split: seq_len {} must divide by TP {} × 2 × CP {} = {divisor}",
                step.seq_len, layout.tp, layout.cp
            ),
        ));
    }
    let zero = l.zero().get();
    // torchtitan's plain replication (DDP) does not compose with TP, CP or PP (CP turns FSDP on).
    let ddp = zero == 0 && layout.tp == 1 && layout.pp == 1 && layout.cp == 1;
    if (1..=2).contains(&zero) || (zero == 0 && !ddp) {
        let _ = writeln!(
            out,
            "# ZeRO {zero}: FSDP2 without resharding after forward (ZeRO 2), no more memory than ZeRO {zero}{}.",
            match (zero, layout.cp > 1) {
                (0, false) => " (torchtitan's DDP does not compose with TP or PP)",
                (0, true) => " (torchtitan's DDP does not compose with TP, CP or PP)",
                _ => "",
            }
        );
    }
    if layout.replicate > 1 {
        let _ = writeln!(
            out,
            "# HSDP: {} replicas, each sharded over dp_shard {} × CP {} = {} ranks, all-reducing gradients across replicas.",
            layout.replicate,
            layout.dp / layout.replicate,
            layout.cp,
            layout.shard_group()
        );
    }
    if layout.cp > 1 {
        let _ = writeln!(
            out,
            "# CP {}: each sequence in 2 × {} chunks (head-tail load balancing), K/V all-gathered over the CP group{}.",
            layout.cp,
            layout.cp,
            match l.cp_exchange() {
                CpExchange::AllGather => String::new(),
                CpExchange::Ring => format!(
                    "; the plan's {} stack passes them around a ring instead",
                    l.options.stack
                ),
            }
        );
    }
    // A detailed plan graded under another stack: the file runs torchtitan's kernels and
    // overlaps, which is how check --from reads it back.
    let stack = l.options.stack;
    if l.detailed && !matches!(stack, Stack::Torchtitan | Stack::TorchtitanCompile) {
        let _ = writeln!(
            out,
            "# Stack: the plan was graded under the {stack} stack; torchtitan runs its own kernels and overlaps, so check --from grades this file under the torchtitan stack (--stack torchtitan grades the plan as torchtitan runs it)."
        );
    }
    // The plan was timed with TP's all-gathers and reduce-scatters hidden behind the GEMMs
    // (Megatron-core's --tp-comm-overlap, Transformer Engine's userbuffers), which no
    // torchtitan stack here has. torchtitan's async TP (`enable_async_tensor_parallel`,
    // torchtitan/distributed/tensor_parallel.py: torch.compile's micro-pipelined collective
    // matmuls, refused without `compile.enable` and "model" in `compile.components`) is the
    // nearest; it is named, not set, since compiling changes the kernels the plan was timed
    // with.
    if step.tp_comm_overlap && layout.tp > 1 {
        let _ = writeln!(
            out,
            "# TP overlap: the plan's {} stack hides TP communication behind the GEMMs (Megatron-core's --tp-comm-overlap); torchtitan's nearest is async TP (parallelism.enable_async_tensor_parallel = true, with compile.enable = true and \"model\" in compile.components), not set here. Without it TP's collectives are exposed: --stack torchtitan or torchtitan-compile grades the plan as torchtitan runs it.",
            l.options.stack
        );
    }
    let converter = match l.precision() {
        Precision::Bf16 => None,
        Precision::Fp8 => {
            let _ = writeln!(
                out,
                "# FP8: torchao float8 linears with tensorwise (dynamic per-tensor) scaling, the output layer in BF16; torchao's kernels are meant to run under torch.compile."
            );
            Some("quantize.linear.float8")
        }
        Precision::Mxfp8 => {
            let _ = writeln!(
                out,
                "# MXFP8: torchao MX linears (mxfp8_cublas, a scale per 32 elements), Blackwell GPUs only, the output layer in BF16."
            );
            Some("quantize.linear.mx")
        }
        // Refused above.
        Precision::Nvfp4 | Precision::Mxfp4 => None,
    };
    let _ = writeln!(
        out,
        "\n[job]\ndump_folder = \"./outputs\"\ndescription = {}",
        toml::Value::String(s.name.clone())
    );
    let _ = writeln!(
        out,
        "\n[model]\nname = \"llama3\"\nflavor = \"{}\"",
        flavor.unwrap_or("CHANGE-ME")
    );
    if let Some(converter) = converter {
        let _ = writeln!(out, "converters = [\"{converter}\"]");
    }
    // Each DP rank's batch: one micro-batch a pass without a pipeline (torchtitan accumulates
    // G / (b·DP) of them); with one, the whole step's micro-batches, which the schedule splits
    // into micro-batches of b.
    let local_batch = if layout.pp > 1 {
        step.micro_batch * l.accumulation()
    } else {
        step.micro_batch
    };
    let _ = writeln!(
        out,
        "\n[training]\nlocal_batch_size = {local_batch}\nglobal_batch_size = {}\nseq_len = {}\nsteps = {}\nmixed_precision_param = \"bfloat16\"\nmixed_precision_reduce = \"float32\"",
        l.global_batch,
        step.seq_len,
        l.iterations()
    );
    // The batch law's peak learning rate (torchtitan's default is 8e-4), with the AdamW
    // settings it was fitted with where its source states them (torchtitan's defaults, β 0.9,
    // 0.95 and weight decay 0.1, are DeepSeek LLM's, written out all the same).
    if let Some(lr) = l.learning_rate {
        let _ = writeln!(out, "\n[optimizer]\nname = \"AdamW\"\nlr = {lr:.3e}");
        if let Some(a) = l.adamw {
            let _ = writeln!(
                out,
                "beta1 = {:?}\nbeta2 = {:?}\nweight_decay = {:?}",
                a.beta1, a.beta2, a.weight_decay
            );
        }
    }
    // ZeRO 3 reshards after forward: "always", since torchtitan's "default" keeps the
    // weights gathered when a pipeline is on.
    // Hybrid sharding: the layout's replicas, each FSDP over DP/replicate (× CP) ranks.
    let replicas = layout.replicate.max(1);
    let (replicate, shard, reshard) = match zero {
        0 if ddp => (layout.dp, 1, "default"),
        0..=2 => (replicas, layout.dp / replicas, "never"),
        _ => (replicas, layout.dp / replicas, "always"),
    };
    let schedule = match step.schedule {
        Schedule::OneFOneB => "1F1B",
        Schedule::Interleaved(_) => "Interleaved1F1B",
        Schedule::ZeroBubbleV => "ZBVZeroBubble",
        Schedule::DualPipeV => "DualPipeV",
    };
    let _ = writeln!(
        out,
        "\n[parallelism]\ndata_parallel_replicate_degree = {replicate}\ndata_parallel_shard_degree = {shard}\nfsdp_reshard_after_forward = \"{reshard}\"\ntensor_parallel_degree = {}\npipeline_parallel_degree = {}\npipeline_parallel_schedule = \"{schedule}\"\npipeline_parallel_microbatch_size = {}\ncontext_parallel_degree = {}",
        layout.tp,
        layout.pp,
        step.micro_batch,
        layout.cp
    );
    if layout.cp > 1 {
        let _ = writeln!(out, "context_parallel_rotate_method = \"allgather\"");
    }
    if step.schedule != Schedule::OneFOneB {
        // torchtitan counts the embedding and the output head as a layer each when it splits
        // the model into PP·V stages (two a GPU for the V schedules).
        let v = step.schedule.chunks();
        let stages = layout.pp * v;
        let units = u64::from(s.layers) + 2;
        if units % stages != 0 {
            return Err(Error::invalid(
                "--format",
                "torchtitan",
                format!(
                    "a plan torchtitan can split into {stages} stages of equal layers: {} layers, the embedding and the head ({units}) do not divide by PP {} × V {v}",
                    s.layers, layout.pp
                ),
            ));
        }
        let _ = writeln!(
            out,
            "pipeline_parallel_layers_per_stage = {}",
            units / stages
        );
    }
    if step.recompute == Recompute::SaveQkv {
        return Err(Error::invalid(
            "--format",
            "torchtitan",
            "a recomputation torchtitan has (none, selective-op, selective-layer, selective or full); MaxText's save-qkv policy has none",
        ));
    }
    if l.detailed {
        runs_as_graded(l)?;
    }
    if l.options.stack == Stack::TorchtitanCompile {
        // torch.compile over the model and the loss (torchtitan's default components): the
        // fused element-wise kernels and loss the torchtitan-compile stack is graded with.
        let _ = writeln!(
            out,
            "\n[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]"
        );
    }
    let (mode, option) = match step.recompute {
        Recompute::None => ("none", None),
        Recompute::Selective | Recompute::SelectiveOp => ("selective", Some("op")),
        Recompute::SelectiveLayer => ("selective", Some("2")),
        Recompute::Full | Recompute::SaveQkv => ("full", None),
    };
    let _ = writeln!(out, "\n[activation_checkpoint]\nmode = \"{mode}\"");
    if let Some(option) = option {
        let _ = writeln!(out, "selective_ac_option = \"{option}\"");
    }
    // The converters' settings: the output layer left in BF16 (the MX default; float8's is to
    // convert every linear).
    match l.precision() {
        Precision::Bf16 => {}
        Precision::Fp8 => {
            let _ = writeln!(
                out,
                "\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\nfilter_fqns = [\"output\"]"
            );
            // FP8 weights: FSDP2 gathers the float8 linears' weights in float8.
            if l.options.fp8_params {
                let _ = writeln!(out, "enable_fsdp_float8_all_gather = true");
            }
        }
        Precision::Mxfp8 => {
            let _ = writeln!(
                out,
                "\n[quantize.linear.mx]\nrecipe_name = \"mxfp8_cublas\"\nfilter_fqns = [\"output\"]"
            );
        }
        Precision::Nvfp4 | Precision::Mxfp4 => {}
    }
    Ok(out)
}

/// A detailed plan is a contract: torchtitan runs FSDP2 (ZeRO 2 or 3, or plain replication
/// without TP, PP or CP), TP with the sequence sharded, its activation-checkpointing modes and
/// its stack's settings; a plan graded otherwise would hold other memory than it was graded
/// with, so it is refused by name ([`crate::input::from::torchtitan`] reads back each of these
/// as written). The stack itself is the software's: torchtitan runs its own kernels and
/// overlaps whatever the plan's, which a comment in the file says.
fn runs_as_graded(l: &Launch) -> Result<()> {
    let (step, layout) = (&l.step, &l.layout);
    let refuse = |what: String| Err(Error::invalid("--format", "torchtitan", what));
    let zero = l.zero().get();
    let ddp = zero == 0 && layout.tp == 1 && layout.pp == 1 && layout.cp == 1;
    if zero == 1 || (zero == 0 && !ddp) {
        let with = if zero == 0 {
            format!(
                " with TP {} × CP {} × PP {}",
                layout.tp, layout.cp, layout.pp
            )
        } else {
            String::new()
        };
        return refuse(format!(
            "a ZeRO stage torchtitan runs: FSDP2 shards the gradients with the optimizer state (ZeRO 2 or 3), and its replication (ZeRO 0) does not compose with TP, CP or PP; this plan has ZeRO {zero}{with}, which would run as ZeRO 2 (check it with --zero 2)"
        ));
    }
    if step.sequence_parallel != (layout.tp > 1) {
        return refuse(format!(
            "sequence parallelism with TP and only with it (torchtitan's TP shards the sequence): this plan has TP {} with sequence parallelism {}",
            layout.tp,
            if step.sequence_parallel { "on" } else { "off" }
        ));
    }
    if step.recompute == Recompute::Selective {
        return refuse(
            "a recomputation torchtitan has: Megatron-core's selective (core attention) has no torchtitan mode; selective-op is torchtitan's own".to_string(),
        );
    }
    if l.options.fp8_params && l.precision() != Precision::Fp8 {
        return refuse(format!("a plan whose FP8 weights torchtitan gathers: torchao's float8 all-gather (enable_fsdp_float8_all_gather) is for float8 linears, and this plan is {} (check it with --fp8-params off)", l.precision()));
    }
    l.refuse_unwritten("torchtitan", "torchtitan", &["--fp8-params"])
}

impl Launcher for Torchtitan {
    const NAME: &'static str = "torchtitan";
    fn render(&self, launch: &Launch) -> Result<String> {
        render(launch)
    }
}

/// A torchtitan 0.3 job: the command line of `python -m torchtitan.train`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Torchtitan03;

impl Launcher for Torchtitan03 {
    const NAME: &'static str = "torchtitan-0.3";
    fn render(&self, launch: &Launch) -> Result<String> {
        render_03(launch)
    }
}

/// The job as torchtitan 0.3.0 takes it: a named config of its llama3 registry
/// (`torchtitan/models/llama3/config_registry.py`) and `--section.key` overrides, which
/// [`crate::input::from::torchtitan_cli`] reads back.
///
/// torchtitan 0.3 moved the job from 0.2.2's TOML to Python functions and froze the command
/// line (`data/launchers/torchtitan-0.3.0-options.txt`); the model and its converters are the
/// function's, off the command line. So the TOML this plan would get ([`render`], with every
/// check and comment) is written as overrides of the function that builds the same model in
/// the same precision: `llama3_8b`, `llama3_70b` (BF16) and `llama3_8b_mxfp8`. A plan no
/// named config builds (another model, FP8 with per-tensor scaling — 0.3's float8 recipe is
/// rowwise —, 405B in BF16) is refused by name, as is 0.2.2's per-layer selective
/// recomputation, gone in 0.3. Every layout, batch, compile and checkpointing setting is
/// written out, so nothing is left to the function's own; tyro's spellings: a switch `--a.b`
/// or `--a.no-b`, a list comma-joined, and the activation-checkpoint subcommand word last
/// (tyro reads every option after it as the subcommand's).
pub fn render_03(l: &Launch) -> Result<String> {
    // The TOML's refusals are 0.3's too, said of the format asked for; "its TOML" is 0.3's
    // config function.
    let toml_text = render(l).map_err(|e| match e {
        Error::Invalid {
            field,
            value,
            expected,
        } if field == "--format" && value == "torchtitan" => Error::Invalid {
            field,
            value: "torchtitan-0.3".into(),
            expected: expected
                .replace("its TOML", "its config function")
                .replace("the job TOML", "the config function")
                .replace("a job config", "a config function"),
        },
        other => other,
    })?;
    let refuse = |what: String| Err(Error::invalid("--format", "torchtitan-0.3", what));
    let root: toml::Table = toml_text
        .parse()
        .map_err(|e| Error::invalid("--format", "torchtitan-0.3", format!("{e}")))?;
    let table = |name: &str| root.get(name).and_then(toml::Value::as_table);
    let flavor = table("model")
        .and_then(|m| m.get("flavor"))
        .and_then(toml::Value::as_str)
        .unwrap_or("CHANGE-ME");
    let config = match (flavor, l.precision()) {
        ("8B", Precision::Bf16) => "llama3_8b",
        ("8B", Precision::Mxfp8) => "llama3_8b_mxfp8",
        ("70B", Precision::Bf16) => "llama3_70b",
        ("CHANGE-ME", _) => {
            return refuse(format!(
                "a model torchtitan 0.3 names: {} is not one of its llama3 flavors, and 0.3 sets the model in a Python config function, off its command line (write one in torchtitan_recipes, or --format torchtitan writes 0.2.2's TOML)",
                l.shape.name
            ))
        }
        (flavor, precision) => {
            return refuse(format!(
                "a named config of torchtitan 0.3.0's llama3 registry that builds {flavor} in {precision}: it has llama3_8b and llama3_70b in BF16 and llama3_8b_mxfp8 (its llama3_405b trains float8 with rowwise scaling); the precision is the config function's, off the command line (--format torchtitan writes 0.2.2's TOML)"
            ))
        }
    };
    let ac = table("activation_checkpoint");
    let mode = ac
        .and_then(|t| t.get("mode"))
        .and_then(toml::Value::as_str)
        .unwrap_or("selective");
    let option = ac
        .and_then(|t| t.get("selective_ac_option"))
        .and_then(toml::Value::as_str);
    let subcommand = match (mode, option) {
        ("none", _) => "none",
        ("full", _) => "full",
        ("selective", Some("op")) => "selective",
        _ => {
            return refuse(
                "a recomputation torchtitan 0.3 has: none, full, or selective-op (0.3's selective is per-op; per-layer selective-layer is gone)".into(),
            )
        }
    };
    let mut out = String::new();
    for line in toml_text.lines().take_while(|l| l.starts_with('#')) {
        if line.starts_with("# torchtitan job config") || line.starts_with("# Launch on") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    let gpus = l.gpus();
    let per_node = l.gpus_per_host.clamp(1, gpus.max(1));
    let (per_node, nodes) = if gpus % per_node == 0 {
        (per_node, gpus / per_node)
    } else {
        (gpus, 1)
    };
    let _ = writeln!(
        out,
        "# torchtitan 0.3.0: the named config {config} of torchtitan/models/llama3/config_registry.py with the plan's settings as overrides (its frozen command-line options). Run from a torchtitan checkout, or with the wheel installed."
    );
    // 0.3 nests the optimizer's learning rate in its param groups' kwargs, which its
    // command line does not reach: said, not written.
    if let Some(lr) = l.learning_rate {
        let _ = writeln!(
            out,
            "# Learning rate: the batch law's {lr:.3e} is not written: torchtitan 0.3 sets it in the config function's optimizer param groups, off its command line (--format torchtitan writes 0.2.2's [optimizer] lr)."
        );
    }
    if config == "llama3_8b_mxfp8" {
        let _ = writeln!(
            out,
            "# MXFP8: llama3_8b_mxfp8 converts every Linear, the output layer too, where the plan kept it in BF16 (about 6 % of the 8B's matrix FLOPs)."
        );
    }
    let mut words: Vec<String> = vec![
        format!("torchrun --nproc_per_node {per_node} --nnodes {nodes}"),
        format!("-m torchtitan.train --module llama3 --config {config}"),
    ];
    let value = |v: &toml::Value| -> String {
        match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        }
    };
    for section in ["training", "parallelism"] {
        for (key, v) in table(section).into_iter().flatten() {
            // 0.3 always gathers K/V for context parallelism: the option is gone. A schedule
            // is for a pipeline.
            if key == "context_parallel_rotate_method"
                || (key == "pipeline_parallel_schedule" && l.layout.pp == 1)
            {
                continue;
            }
            words.push(format!("--{section}.{key} {}", value(v)));
        }
    }
    // 0.3 captures CUDA graphs unless told not to, which its pipelines do not support
    // (`configs.py`: "CUDA graphs do not support pipeline parallelism yet").
    if l.layout.pp > 1 {
        words.push("--training.disable_cuda_graphs".into());
    }
    match table("compile") {
        Some(c) if c.get("enable").and_then(toml::Value::as_bool) == Some(true) => {
            words.push("--compile.enable".into());
            if let Some(components) = c.get("components") {
                words.push(format!("--compile.components {}", value(components)));
            }
        }
        _ => words.push("--compile.no-enable".into()),
    }
    words.push(format!("activation-checkpoint:{subcommand}"));
    let _ = writeln!(out, "{}", words.join(" \\\n  "));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layout::Degrees;

    use crate::report::export::launch::launch_with as launch;

    fn parallelism(text: &str) -> toml::Value {
        let config: toml::Value = text.parse().unwrap();
        config["parallelism"].clone()
    }

    fn int(v: &toml::Value, key: &str) -> i64 {
        v[key].as_integer().unwrap()
    }

    #[test]
    fn the_degrees_make_the_world_torchtitan_checks() {
        // TP 4 × CP 2 × PP 4 on 64 GPUs, ZeRO 1: DP 2, all of it FSDP's shard degree.
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 4,
            cp: 2,
            pp: 4,
            replicate: 1,
        };
        let l = launch("70b", 64, degrees, 1);
        let text = render(&l).unwrap();
        let p = parallelism(&text);
        assert_eq!(int(&p, "context_parallel_degree"), 2);
        assert_eq!(
            p["context_parallel_rotate_method"].as_str(),
            Some("allgather")
        );
        assert_eq!(
            (
                int(&p, "data_parallel_replicate_degree"),
                int(&p, "data_parallel_shard_degree")
            ),
            (1, 2)
        );
        let world = [
            "data_parallel_replicate_degree",
            "data_parallel_shard_degree",
        ]
        .iter()
        .chain(&[
            "context_parallel_degree",
            "tensor_parallel_degree",
            "pipeline_parallel_degree",
        ])
        .map(|k| int(&p, k))
        .product::<i64>();
        assert_eq!(world, 64);
        // The batch degree is dp_replicate × dp_shard: with a pipeline each DP rank's batch
        // is its 1,024 micro-batches, 2 × 1,024 = 2,048.
        let config: toml::Value = text.parse().unwrap();
        assert_eq!(
            config["training"]["local_batch_size"].as_integer(),
            Some(1024)
        );
        assert_eq!(
            config["training"]["global_batch_size"].as_integer(),
            Some(2048)
        );
        // The plan's default stack passes K/V around a ring; torchtitan all-gathers them.
        assert!(
            text.contains("megatron-te stack passes them around a ring instead"),
            "{text}"
        );
        // HSDP: 2 replicas × dp_shard 64, FSDP over 64 × CP 2 ranks.
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 8,
            cp: 2,
            pp: 1,
            replicate: 2,
        };
        let text = render(&launch("70b", 2048, degrees, 3)).unwrap();
        let p = parallelism(&text);
        assert_eq!(
            (
                int(&p, "data_parallel_replicate_degree"),
                int(&p, "data_parallel_shard_degree"),
                int(&p, "context_parallel_degree"),
                int(&p, "tensor_parallel_degree"),
            ),
            (2, 64, 2, 8)
        );
        assert_eq!(p["fsdp_reshard_after_forward"].as_str(), Some("always"));
        assert!(
            text.contains("each sharded over dp_shard 64 × CP 2 = 128 ranks"),
            "{text}"
        );
        // CP 1 keeps torchtitan's defaults and writes no rotate method.
        let text = render(&launch("8b", 64, Degrees::tp_pp(1, 1), 0)).unwrap();
        let p = parallelism(&text);
        assert_eq!(int(&p, "context_parallel_degree"), 1);
        assert!(p.get("context_parallel_rotate_method").is_none());
        assert_eq!(int(&p, "data_parallel_replicate_degree"), 64);
    }

    #[test]
    fn fp8_and_mxfp8_are_torchao_converters() {
        let mut l = launch("70b", 2048, Degrees::tp_pp(8, 8), 1);
        let config: toml::Value = render(&l).unwrap().parse().unwrap();
        assert!(config["model"].get("converters").is_none());
        assert!(config.get("quantize").is_none());
        l.step.precision = Precision::Fp8;
        let config: toml::Value = render(&l).unwrap().parse().unwrap();
        assert_eq!(
            config["model"]["converters"].as_array().unwrap(),
            &[toml::Value::from("quantize.linear.float8")]
        );
        let float8 = &config["quantize"]["linear"]["float8"];
        assert_eq!(float8["recipe_name"].as_str(), Some("tensorwise"));
        assert_eq!(
            float8["filter_fqns"].as_array().unwrap(),
            &[toml::Value::from("output")]
        );
        l.step.precision = Precision::Mxfp8;
        let config: toml::Value = render(&l).unwrap().parse().unwrap();
        assert_eq!(
            config["model"]["converters"].as_array().unwrap(),
            &[toml::Value::from("quantize.linear.mx")]
        );
        assert_eq!(
            config["quantize"]["linear"]["mx"]["recipe_name"].as_str(),
            Some("mxfp8_cublas")
        );
    }

    #[test]
    fn a_plan_timed_with_tp_overlap_names_async_tp_and_sets_nothing() {
        // The default stack (megatron-te) overlaps TP with SP on: the TOML says so in a comment
        // and leaves async TP and compilation as torchtitan's defaults (off).
        let mut l = launch("70b", 512, Degrees::tp_pp(8, 4), 1);
        assert!(l.step.tp_comm_overlap, "{:?}", l.step);
        let text = render(&l).unwrap();
        assert!(
            text.contains("# TP overlap: the plan's megatron-te stack hides TP communication")
                && text.contains("parallelism.enable_async_tensor_parallel = true"),
            "{text}"
        );
        let config: toml::Value = text.parse().unwrap();
        assert!(config["parallelism"]
            .get("enable_async_tensor_parallel")
            .is_none());
        assert!(config.get("compile").is_none());
        // Without the overlap, or without TP, nothing is said.
        l.step.tp_comm_overlap = false;
        assert!(!render(&l).unwrap().contains("TP overlap"));
        let l = launch("8b", 64, Degrees::tp_pp(1, 1), 0);
        assert!(!render(&l).unwrap().contains("TP overlap"));
    }

    #[test]
    fn a_detailed_plan_is_written_as_graded_or_refused_by_name() {
        use crate::cost::step::detailed::Options;
        use crate::cost::step::stack::GradientPrecision;
        let titan = |stack, zero, tp| {
            let mut l = launch("8b", 64, Degrees::tp_pp(tp, 1), zero);
            l.detailed = true;
            l.options = Options::for_stack(stack);
            l.step.tp_comm_overlap = false;
            l
        };
        // torchtitan-compile's plan compiles the model and the loss, which reads back as it.
        let text = render(&titan(Stack::TorchtitanCompile, 3, 1)).unwrap();
        assert!(text.contains("\n[compile]\nenable = true\n"), "{text}");
        let read =
            crate::input::from::torchtitan::parse(&text, std::path::Path::new("x.toml")).unwrap();
        assert_eq!(read.stack, Some(Stack::TorchtitanCompile));
        assert!(!render(&titan(Stack::Torchtitan, 3, 1))
            .unwrap()
            .contains("[compile]"));
        // Another stack's plan runs torchtitan's kernels, and the file says so.
        let text = render(&titan(Stack::MegatronTe, 3, 1)).unwrap();
        assert!(
            text.contains("# Stack: the plan was graded under the megatron-te stack"),
            "{text}"
        );
        // What would run as another plan is refused by name, on one line.
        let refusal = |l: &Launch| {
            let e = render(l).unwrap_err().to_string();
            assert!(
                e.starts_with("invalid --format = torchtitan: ") && !e.contains('\n'),
                "{e}"
            );
            e
        };
        assert!(
            refusal(&titan(Stack::Torchtitan, 1, 1)).contains("ZeRO 1, which would run as ZeRO 2")
        );
        let mut no_sp = titan(Stack::Torchtitan, 3, 2);
        no_sp.step.sequence_parallel = false;
        assert!(refusal(&no_sp).contains("TP 2 with sequence parallelism off"));
        let mut selective = titan(Stack::Torchtitan, 3, 1);
        selective.step.recompute = Recompute::Selective;
        assert!(refusal(&selective).contains("selective-op is torchtitan's own"));
        let mut bf16 = titan(Stack::Torchtitan, 3, 1);
        bf16.options.gradients = GradientPrecision::Bf16;
        assert!(refusal(&bf16).contains("--gradients bf16"));
        // A plate plan names none of it: written as before.
        assert!(render(&launch("8b", 64, Degrees::tp_pp(1, 1), 1)).is_ok());
    }

    #[test]
    fn a_sequence_torchtitan_cannot_split_is_refused_by_name() {
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 4,
            cp: 2,
            pp: 4,
            replicate: 1,
        };
        let mut l = launch("70b", 64, degrees, 1);
        // 8,196 splits into 2·CP = 4 chunks but not over TP 4 × 2 × CP 2 = 16.
        l.step.seq_len = 8196;
        let e = render(&l).unwrap_err().to_string();
        assert!(
            e.contains("--format = torchtitan") && e.contains("seq_len 8196") && !e.contains('\n'),
            "{e}"
        );
    }
}
