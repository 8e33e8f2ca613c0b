//! torchtitan: the TOML job configuration of a plan.
//!
//! Sections and keys as `torchtitan/config/job_config.py` defines them in torchtitan 0.2.2,
//! the last release configured by TOML (0.3.0 moved to Python configs, where the same names
//! remain as `--section.key` overrides, with `activation_checkpoint` a subcommand).
//! torchtitan shards data parallelism with FSDP2 (ZeRO 3); a ZeRO 1 or 2 plan becomes FSDP that
//! keeps the gathered weights after forward (`fsdp_reshard_after_forward = "never"`: weights
//! whole through the step, gradients and optimizer state sharded, ZeRO 2), which needs no more
//! memory than ZeRO 1; ZeRO 0 is plain replication (`data_parallel_replicate_degree`).

use std::fmt::Write;

use super::exporter::Launcher;
use super::launch::Launch;
use crate::cost::activations::Recompute;
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
        "# Launch on {} GPUs: torchrun --nproc_per_node 8 ... -m torchtitan.train --job.config_file this.toml",
        l.gpus()
    );
    let flavor = flavor(l);
    let a = &s.architecture;
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
    let zero = l.zero().get();
    // torchtitan's plain replication (DDP) does not compose with TP or PP.
    let ddp = zero == 0 && layout.tp == 1 && layout.pp == 1;
    if (1..=2).contains(&zero) || (zero == 0 && !ddp) {
        let _ = writeln!(
            out,
            "# ZeRO {zero}: FSDP2 without resharding after forward (ZeRO 2), no more memory than ZeRO {zero}{}.",
            if zero == 0 { " (torchtitan's DDP does not compose with TP or PP)" } else { "" }
        );
    }
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
    // ZeRO 3 reshards after forward: "always", since torchtitan's "default" keeps the
    // weights gathered when a pipeline is on.
    let (replicate, shard, reshard) = match zero {
        0 if ddp => (layout.dp, 1, "default"),
        0..=2 => (1, layout.dp, "never"),
        _ => (1, layout.dp, "always"),
    };
    let schedule = match step.schedule {
        Schedule::OneFOneB => "1F1B",
        Schedule::Interleaved(_) => "Interleaved1F1B",
    };
    let _ = writeln!(
        out,
        "\n[parallelism]\ndata_parallel_replicate_degree = {replicate}\ndata_parallel_shard_degree = {shard}\nfsdp_reshard_after_forward = \"{reshard}\"\ntensor_parallel_degree = {}\npipeline_parallel_degree = {}\npipeline_parallel_schedule = \"{schedule}\"\npipeline_parallel_microbatch_size = {}\ncontext_parallel_degree = 1",
        layout.tp,
        layout.pp,
        step.micro_batch
    );
    if let Schedule::Interleaved(v) = step.schedule {
        // torchtitan counts the embedding and the output head as a layer each when it splits
        // the model into PP·V stages.
        let stages = layout.pp * u64::from(v);
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
    Ok(out)
}

impl Launcher for Torchtitan {
    const NAME: &'static str = "torchtitan";
    fn render(&self, launch: &Launch) -> Result<String> {
        render(launch)
    }
}
