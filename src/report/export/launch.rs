//! A plan turned into what a launcher needs: the shape, the layout, and a training step with a
//! whole number of micro-batches — shared by the Megatron-LM, DeepSpeed and torchtitan exporters.
//!
//! The data-parallel degree a launcher derives is `DP = GPUs / (TP·CP·PP)`: context-parallel
//! ranks share one micro-batch (each holds a slice of every sequence), so the global batch is
//! `G = b · DP · m` for `m` micro-batches a replica, whatever CP is, and hybrid sharding only
//! regroups the DP ranks (`replicate × DP/replicate`), leaving `G` as it is.

use crate::cost::links::placement::RankPlacement;
use crate::cost::step::detailed::Options;

use crate::cost::step::pipeline::shape_stages;
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::cost::step::{BatchTarget, Step};
use crate::error::{Error, Result};
use crate::format::count;
use crate::model::layout::{Layout, ZeroStage};
use crate::model::Shape;
use crate::plan::check::CheckReport;

/// How the ranks of a context-parallel group exchange the keys and values of their sequence
/// slices, as the plan's stack does: Megatron-core's ring of point-to-point sends overlapped
/// with attention (`cp_comm_type = "p2p"`, its default), or one all-gather of K/V before
/// attention (Llama Team 2024, §3.3.2; torchtitan's `context_parallel_rotate_method =
/// "allgather"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpExchange {
    /// A ring of point-to-point exchanges, one K/V slice a step.
    Ring,
    /// K/V all-gathered over the CP group before attention.
    AllGather,
}

/// One plan, ready for a launcher.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The model.
    pub shape: Shape,
    /// Tokens the plan trains on.
    pub tokens: u64,
    /// TP, CP, PP, DP, the ZeRO stage and the hybrid-sharding replicas.
    pub layout: Layout,
    /// The training step: the plan's, or for a plate plan one sequence a micro-batch, full
    /// recomputation (what the plate assumes), sequence parallelism with TP, 1F1B.
    pub step: Step,
    /// Sequences per optimizer step over all replicas, `G`: a whole multiple of `b·DP`.
    pub global_batch: u64,
    /// The detailed settings the plan was graded under (for a plate plan, the default
    /// stack's): the stack whose overlaps and kernels the time model assumed.
    pub options: Options,
    /// Layers on each pipeline stage, as the plan was graded ([`shape_stages`] under the
    /// settings' split), so the launcher builds the same stages.
    pub stages: Vec<u64>,
    /// Whether the plan was graded under the detailed model (it names its step and settings,
    /// which the launcher must then write or refuse); a plate plan names neither, so the step
    /// and stack are chosen for it.
    pub detailed: bool,
    /// What the exporter should tell the user: choices made for them, nothing else.
    pub notes: Vec<String>,
    /// GPUs of a host, the processes a launcher starts on each (torchrun's
    /// `--nproc_per_node`): the brief's (4 on an NVL72 rack's hosts), 8 where no brief says.
    pub gpus_per_host: u64,
    /// The peak learning rate of the brief's batch law ([`crate::plan::batch::LawBatch`]),
    /// which a launcher that takes one writes (Megatron-LM's `--lr`); `None` under a fixed
    /// batch target, and then the launcher's own default stands.
    pub learning_rate: Option<f64>,
    /// The AdamW settings the law's learning rate was fitted with, where its source states
    /// them ([`crate::laws::BatchLaw::adamw`]), written beside the learning rate.
    pub adamw: Option<crate::laws::batch::AdamW>,
}

/// What a launcher must keep of the placement the plan was graded on, NVLink domains larger
/// than a host: the ranks in Megatron-core's order (torchrun's and Slurm's, host by host) on
/// each domain's hosts together, which Slurm's `--segment` asks of a job (Megatron-Bridge's
/// GB200 launcher, `scripts/performance/utils/executors.py`, segments of at most 18 hosts that
/// divide the job's), and which groups the plan let cross the NICs.
pub fn placement_note(p: &RankPlacement) -> String {
    let hosts = p.scale_up_used / p.gpus_per_host.max(1);
    let segment = if p.hosts % hosts.max(1) == 0 {
        format!("Slurm's --segment {hosts}")
    } else {
        format!(
            "Slurm's --segment cannot say it: {hosts} does not divide the {} hosts",
            p.hosts
        )
    };
    let names = |link: &str| p.listed(link, |g| format!("{} {}", g.label(), g.size));
    format!(
        "the plan places ranks in Megatron-core's order (tp-cp-ep-dp-pp) on NVLink domains of {} GPUs used, {hosts} hosts of {} each: keep each domain's hosts in one rack ({segment}); over NVLink: {}; over the NICs: {}",
        p.scale_up_used,
        p.gpus_per_host,
        names("nvlink"),
        names("nic")
    )
}

/// One of the detailed model's settings as `check`'s flag names it and its value there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The flag, `--gradients`.
    pub flag: &'static str,
    /// Its value as the flag takes it, `bf16`.
    pub value: String,
    /// The stack's default, which a launcher that does not write the setting runs.
    pub default: String,
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.flag, self.value)
    }
}

/// A setting's value as its serde name (`bf16`, `llama3`, `deepep`), which `check`'s flags take.
pub(super) fn serde_name(value: impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => format!("{other:?}"),
    }
}

/// The settings of `options` that are not its stack's defaults ([`Options::for_stack`]), as
/// `check`'s flags: what a launcher reading back to the stack's defaults would lose. In two
/// kinds: the run's (`run`: gradients, loss, kernels, stages, a mixture of experts' overlap,
/// recomputation and dispatcher, the FP8 recipe and weights, the optimizer state, the CUDA graphs), which a launcher writes or refuses, and the memory model's
/// assumptions (`assumed`: the reserve, fragmentation and routing imbalance), which no launcher
/// sets and which `check --from` takes as flags alongside.
pub fn beyond_stack(options: &Options) -> (Vec<Setting>, Vec<Setting>) {
    let d = Options::for_stack(options.stack);
    let on = |b: bool| if b { "on" } else { "off" }.to_string();
    let mut run = Vec::new();
    let mut push = |flag, value: String, default: String| {
        if value != default {
            run.push(Setting {
                flag,
                value,
                default,
            });
        }
    };
    push(
        "--gradients",
        serde_name(options.gradients),
        serde_name(d.gradients),
    );
    push(
        "--loss-precision",
        serde_name(options.loss),
        serde_name(d.loss),
    );
    push(
        "--kernels",
        serde_name(options.kernels),
        serde_name(d.kernels),
    );
    push("--stages", serde_name(options.stages), serde_name(d.stages));
    push("--ep-overlap", on(options.ep_overlap), on(d.ep_overlap));
    push(
        "--moe-recompute",
        serde_name(options.moe_recompute),
        serde_name(d.moe_recompute),
    );
    push(
        "--norm-recompute",
        on(options.norm_recompute),
        on(d.norm_recompute),
    );
    push(
        "--latent-recompute",
        on(options.latent_recompute),
        on(d.latent_recompute),
    );
    push(
        "--ep-dispatcher",
        serde_name(options.ep_dispatcher),
        serde_name(d.ep_dispatcher),
    );
    push(
        "--fp8-recipe",
        options
            .fp8_recipe
            .map_or("default".to_string(), |r| r.to_string()),
        d.fp8_recipe
            .map_or("default".to_string(), |r| r.to_string()),
    );
    push("--fp8-params", on(options.fp8_params), on(d.fp8_params));
    push(
        "--fp8-bf16-layers",
        options.bf16_layers.to_string(),
        d.bf16_layers.to_string(),
    );
    push(
        "--optimizer-states",
        options.optimizer_states.name().to_string(),
        d.optimizer_states.name().to_string(),
    );
    push(
        "--master-weights",
        options.master_weights.name().to_string(),
        d.master_weights.name().to_string(),
    );
    push(
        "--optimizer",
        options.optimizer.name().to_string(),
        d.optimizer.name().to_string(),
    );
    push(
        "--cuda-graphs",
        options.cuda_graphs.to_string(),
        d.cuda_graphs.to_string(),
    );
    push(
        "--offload-activations",
        options.offload_activations.to_string(),
        d.offload_activations.to_string(),
    );
    push(
        "--offload-optimizer",
        options.offload_optimizer.to_string(),
        d.offload_optimizer.to_string(),
    );
    let mut assumed = Vec::new();
    for (flag, value, default) in [
        ("--reserve-gb", options.reserve_gb, d.reserve_gb),
        ("--fragmentation", options.fragmentation, d.fragmentation),
        ("--moe-imbalance", options.moe_imbalance, d.moe_imbalance),
    ] {
        if value != default {
            assumed.push(Setting {
                flag,
                value: crate::format::exact(value),
                default: crate::format::exact(default),
            });
        }
    }
    (run, assumed)
}

impl Launch {
    /// The launch of `shape` on `tokens` with `layout`, and `step` if the plan has one, else
    /// the default step ([`Step::default_for`]) at sequence length `seq_len`.
    ///
    /// Global batch: the step's `B` tokens are `G = B / s` sequences, which must split into
    /// `b`-sequence micro-batches over `DP` replicas (`G mod b·DP = 0`). A plate plan names no
    /// batch, so it gets the whole rounds of `b·s·DP` nearest the brief's target, the rule
    /// of the detailed search ([`BatchTarget::nearest`]), said in a note (and when it is
    /// outside the tolerance, that too).
    pub fn new(
        shape: Shape,
        tokens: u64,
        layout: Layout,
        step: Option<Step>,
        seq_len: u64,
        target: &BatchTarget,
        options: Option<Options>,
    ) -> Result<Launch> {
        if tokens == 0
            || layout.tp == 0
            || layout.cp == 0
            || layout.pp == 0
            || layout.dp == 0
            || layout.replicate == 0
        {
            return Err(Error::invalid(
                "plan",
                format!(
                    "{tokens} tokens, TP {} × CP {} × PP {} × DP {}, {} replicas",
                    layout.tp, layout.cp, layout.pp, layout.dp, layout.replicate
                ),
                "tokens and degrees ≥ 1",
            ));
        }
        if layout.dp % layout.replicate != 0 {
            return Err(Error::invalid(
                "plan.layout.replicate",
                layout.replicate,
                format!(
                    "a divisor of DP = {} (the data-parallel group as replicate × shard)",
                    layout.dp
                ),
            ));
        }
        let mut notes = Vec::new();
        let (step, exact) = match step {
            Some(step) => (step, true),
            None => (
                Step::default_with_batch(
                    &layout,
                    seq_len,
                    target.tokens,
                    options.map_or_else(Stack::default, |o| o.stack),
                ),
                false,
            ),
        };
        // Every launcher splits a sequence into 2·CP chunks (Megatron-LM asserts it; torchtitan's
        // head-tail load balancer needs it), as the step's own rule says.
        if layout.cp > 1 && step.seq_len % (2 * layout.cp) != 0 {
            return Err(Error::invalid(
                "--cp",
                layout.cp,
                format!(
                    "a degree whose 2 × cp chunks divide the {}-token sequence",
                    step.seq_len
                ),
            ));
        }
        let unit = step
            .micro_batch
            .checked_mul(layout.dp)
            .filter(|&u| u > 0 && step.seq_len > 0)
            .ok_or_else(|| {
                Error::invalid(
                    "plan.step.micro_batch",
                    step.micro_batch,
                    "≥ 1, and b·DP below 2^64",
                )
            })?;
        let global_batch = if exact {
            let g = step.global_batch_tokens / step.seq_len;
            if step.global_batch_tokens % step.seq_len != 0 || g == 0 || g % unit != 0 {
                return Err(Error::invalid(
                    "plan.step.global_batch_tokens",
                    step.global_batch_tokens,
                    format!(
                        "whole micro-batches of {} × {} tokens over DP {}",
                        step.micro_batch, step.seq_len, layout.dp
                    ),
                ));
            }
            g
        } else {
            let tokens = target
                .nearest(step.micro_batch, step.seq_len, layout.dp)
                .ok_or_else(|| {
                    Error::invalid(
                        "plan.step",
                        unit,
                        "a global batch of fewer than 2^64 tokens",
                    )
                })?;
            let g = tokens / step.seq_len;
            notes.push(format!(
                "the plan names no batch: {g} sequences of {} tokens a step ({} tokens), the multiple of micro-batch × DP = {unit} nearest the {}-token target{}",
                step.seq_len,
                count(tokens as f64),
                target.tokens,
                if target.accepts(tokens) {
                    String::new()
                } else {
                    format!(
                        ", which is outside the {}% tolerance the detailed search allows",
                        crate::format::general(target.tolerance * 100.0)
                    )
                }
            ));
            g
        };
        let global_batch_tokens = global_batch.checked_mul(step.seq_len).ok_or_else(|| {
            Error::invalid(
                "plan.step",
                global_batch,
                "a global batch of fewer than 2^64 tokens",
            )
        })?;
        let step = Step {
            global_batch_tokens,
            ..step
        };
        let detailed = options.is_some();
        let options = options.unwrap_or_default();
        let (_, assumed) = beyond_stack(&options);
        if !assumed.is_empty() {
            let flags: Vec<String> = assumed.iter().map(Setting::to_string).collect();
            notes.push(format!(
                "the plan was graded with {}, the memory model's assumptions, which no launcher sets: give them to check --from beside this file",
                flags.join(", ")
            ));
        }
        let stages = shape_stages(&shape, layout.pp, options.stages)?;
        Ok(Launch {
            shape,
            tokens,
            layout,
            step,
            global_batch,
            options,
            stages,
            detailed,
            notes,
            gpus_per_host: 8,
            learning_rate: None,
            adamw: None,
        })
    }

    /// The first of the plan's run settings beyond its stack's defaults ([`beyond_stack`])
    /// that `format`'s file does not write (its flag not among `writes`), refused by name: the
    /// file would run the stack's default instead.
    pub fn refuse_unwritten(&self, format: &str, launcher: &str, writes: &[&str]) -> Result<()> {
        let (run, _) = beyond_stack(&self.options);
        match run.iter().find(|s| !writes.contains(&s.flag)) {
            None => Ok(()),
            Some(s) => Err(Error::invalid(
                "--format",
                format,
                format!(
                    "a plan whose settings the file can say: {} was graded with {s}, which no {launcher} setting written here gives (it would run the {} stack's {} {}); check the plan without it",
                    self.shape.name, self.options.stack, s.flag, s.default
                ),
            )),
        }
    }

    /// The launch of a graded design, with a note of where its ranks were placed when the
    /// brief's NVLink domain is larger than its node ([`placement_note`]).
    pub fn from_check(report: &CheckReport) -> Result<Launch> {
        let p = &report.plan;
        let mut launch = Launch::new(
            report.shape.clone(),
            p.tokens,
            p.layout,
            p.step,
            report.brief.seq_len,
            &report.brief.batch_target_for(&report.shape),
            p.memory_model,
        )?;
        if let Some(placement) = &report.placement {
            launch.notes.push(placement_note(placement));
        }
        launch.gpus_per_host = report.brief.gpus_per_node;
        launch.notes.extend(report.notes.iter().cloned());
        launch.set_law(report.batch.as_ref(), &report.brief);
        Ok(launch)
    }

    /// Takes the brief's batch law's learning rate for the plan's run, with a note saying whose
    /// it is, where the plan's batch is the law's (within the brief's tolerance); a batch fixed
    /// away from it keeps the launcher's own learning rate, and the note says why. Nothing
    /// under a fixed batch target.
    pub fn set_law(&mut self, law: Option<&crate::plan::batch::LawBatch>, brief: &crate::Brief) {
        let Some(b) = law else { return };
        let tokens = self.global_batch.saturating_mul(self.step.seq_len);
        let run = b.run_words(brief.loss_target);
        if b.accepts(brief, tokens) {
            self.learning_rate = Some(b.learning_rate);
            self.adamw = b.law.adamw();
            let optimizer = match self.adamw {
                Some(a) => format!(
                    ", with the AdamW settings it was fitted with (betas {}, {}, weight decay {})",
                    a.beta1, a.beta2, a.weight_decay
                ),
                None => ", the other AdamW settings left as the launcher's (the law's source names none)"
                    .to_string(),
            };
            self.notes.push(format!(
                "the global batch and the learning rate ({:.3e}) are the {} batch law's for {run}{optimizer}",
                b.learning_rate, b.law
            ));
        } else {
            self.notes.push(format!(
                "the global batch ({} tokens) is not the {} batch law's for {run} ({} tokens), so no learning rate of the law's is written",
                crate::format::thousands(tokens),
                b.law,
                crate::format::thousands(b.target_tokens)
            ));
        }
    }

    /// GPUs, `TP · CP · PP · DP` (saturating; a layout from [`Layout::new`] is far below).
    pub fn gpus(&self) -> u64 {
        self.layout
            .tp
            .saturating_mul(self.layout.cp)
            .saturating_mul(self.layout.pp)
            .saturating_mul(self.layout.dp)
    }

    /// The precision of the step's matrix products.
    pub fn precision(&self) -> Precision {
        self.step.precision
    }

    /// How the plan's stack exchanges K/V within a CP group ([`CpExchange`]): Meta's Llama 3
    /// stack and torchtitan all-gather them; Megatron-core with Transformer Engine, and every
    /// other stack here, passes them around a ring, Megatron-core's default.
    pub fn cp_exchange(&self) -> CpExchange {
        match self.options.stack.settings().cp {
            Some(crate::cost::step::stack::CpComm::AllGather) => CpExchange::AllGather,
            Some(crate::cost::step::stack::CpComm::Ring) | None => CpExchange::Ring,
        }
    }

    /// Micro-batches each replica accumulates per step, `G / (b·DP)` (CP ranks share one
    /// micro-batch, so CP does not enter).
    pub fn accumulation(&self) -> u64 {
        self.global_batch / (self.step.micro_batch * self.layout.dp)
    }

    /// Optimizer steps to train on at least the plan's tokens, `⌈D / (G·s)⌉`.
    pub fn iterations(&self) -> u64 {
        self.tokens.div_ceil(self.step.global_batch_tokens)
    }

    /// Tokens the iterations train on, `iterations · G · s` (at most one step past the plan's).
    pub fn trained_tokens(&self) -> u128 {
        u128::from(self.iterations()) * u128::from(self.step.global_batch_tokens)
    }

    /// The ZeRO stage.
    pub fn zero(&self) -> ZeroStage {
        self.layout.zero
    }

    /// The top of a launcher file, as `#` comments: the plan it came from and the notes.
    pub fn header(&self) -> String {
        let mut out = format!("# trainplan: {}\n", self.summary());
        for note in &self.notes {
            out.push_str(&format!("# note: {note}\n"));
        }
        out
    }

    /// One line for the top of a launcher file: the plan it came from. CP, hybrid sharding
    /// and the precision are named when the plan has them.
    pub fn summary(&self) -> String {
        let l = &self.layout;
        let cp = if l.cp > 1 {
            format!(" × CP {}", l.cp)
        } else {
            String::new()
        };
        let replicas = if l.replicate > 1 {
            format!(
                " in {} replicas, each sharded over DP/{} × CP = {} ranks",
                l.replicate,
                l.replicate,
                l.shard_group()
            )
        } else {
            String::new()
        };
        let precision = match self.precision() {
            Precision::Bf16 => String::new(),
            p => format!(", {}", p.name().to_uppercase()),
        };
        format!(
            "{} ({} parameters) on {} tokens: TP {}{cp} × PP {} × DP {} = {} GPUs, ZeRO {}{replicas}{precision}; {} steps of {} sequences × {} tokens (micro-batch {}, {} micro-batches a replica)",
            self.shape.name,
            count(self.shape.params() as f64),
            count(self.tokens as f64),
            l.tp,
            l.pp,
            l.dp,
            self.gpus(),
            l.zero,
            self.iterations(),
            self.global_batch,
            self.step.seq_len,
            self.step.micro_batch,
            self.accumulation()
        )
    }
}

/// The launch of Llama 3 `model` on `gpus` GPUs (8 a node) with `degrees` and ZeRO `zero`, a
/// plate plan's step at 8,192 tokens: the exporters' tests' one design builder.
#[cfg(test)]
pub(crate) fn launch_with(
    model: &str,
    gpus: u64,
    degrees: crate::model::layout::Degrees,
    zero: u8,
) -> Launch {
    use crate::model::layout::{Cluster, ZeroStage};
    let shape = crate::model::preset(model).unwrap();
    let cluster = Cluster {
        gpus,
        gpus_per_node: 8,
        scale_up: 8,
    };
    let layout = Layout::with(cluster, &shape, degrees, ZeroStage::new(zero).unwrap()).unwrap();
    Launch::new(
        shape,
        1e12 as u64,
        layout,
        None,
        8192,
        &BatchTarget::default(),
        None,
    )
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::step::Recompute;
    use crate::cost::step::Schedule;
    use crate::model::layout::{Cluster, Degrees};
    use crate::model::preset;

    fn layout(tp: u64, pp: u64, dp: u64, zero: u8) -> Layout {
        Layout {
            tp,
            cp: 1,
            pp,
            dp,
            zero: ZeroStage::new(zero).unwrap(),
            replicate: 1,
            ep: 1,
            etp: tp,
        }
    }

    #[test]
    fn a_plan_on_racks_tells_the_launcher_to_keep_each_rack_s_hosts_together() {
        let shape = preset("70b").unwrap();
        let rack = crate::brief::Brief {
            gpus: 512,
            gpus_per_node: 4,
            scale_up_gpus: Some(72),
            scale_up_used: Some(64),
            ..crate::brief::Brief::default()
        };
        let degrees = Degrees {
            cp: 2,
            ..Degrees::tp_pp(8, 4)
        };
        let layout = Layout::with(&rack, &shape, degrees, ZeroStage::new(1).unwrap()).unwrap();
        let design = crate::plan::Design::plate(&shape, 1_000_000_000_000, layout);
        let report = crate::plan::check::check(&rack, &design).unwrap();
        let l = Launch::from_check(&report).unwrap();
        // torchrun starts one process a GPU of a host: 4 on a rack's hosts.
        assert_eq!(l.gpus_per_host, 4);
        assert_eq!(
            l.notes.last().unwrap(),
            "the plan places ranks in Megatron-core's order (tp-cp-ep-dp-pp) on NVLink domains of 64 GPUs used, 16 hosts of 4 each: keep each domain's hosts in one rack (Slurm's --segment 16); over NVLink: TP 8, CP 2; over the NICs: DP 16, PP 4"
        );
        // Racks of 72 used: 18 hosts a rack do not divide 128.
        let full = crate::brief::Brief {
            scale_up_used: None,
            ..rack
        };
        let note = placement_note(&full.placement(&layout).unwrap());
        assert!(
            note.contains("(Slurm's --segment cannot say it: 18 does not divide the 128 hosts)"),
            "{note}"
        );
    }
    #[test]
    fn a_plate_plan_gets_llama_3_s_batch_when_it_divides() {
        // 16 Mi tokens of 8,192 = 2,048 sequences; over DP 32 that is 64 micro-batches of 1.
        let l = Launch::new(
            preset("70b").unwrap(),
            4_960_000_000_000,
            layout(8, 8, 32, 1),
            None,
            8192,
            &BatchTarget::default(),
            None,
        )
        .unwrap();
        assert_eq!((l.global_batch, l.accumulation()), (2048, 64));
        // 4.96e12 / 16,777,216 = 295,639.04 (by hand: 295,639 steps are 4,959,999,361,024
        // tokens, 638,976 short), so 295,640 steps.
        assert_eq!(l.iterations(), 295_640);
        assert!(l.trained_tokens() >= 4_960_000_000_000);
        assert!(l.trained_tokens() - 4_960_000_000_000 < 16_777_216);
        assert_eq!(l.notes.len(), 1);
    }

    #[test]
    fn the_memory_model_s_assumptions_are_said_and_the_run_s_settings_listed() {
        let mut options = Options::default();
        assert_eq!(beyond_stack(&options), (vec![], vec![]));
        options.reserve_gb = 3.0;
        options.gradients = crate::cost::step::stack::GradientPrecision::Bf16;
        let (run, assumed) = beyond_stack(&options);
        assert_eq!(
            run.iter().map(Setting::to_string).collect::<Vec<_>>(),
            ["--gradients bf16"]
        );
        assert_eq!(assumed[0].to_string(), "--reserve-gb 3");
        let l = Launch::new(
            preset("70b").unwrap(),
            1e12 as u64,
            layout(8, 8, 32, 1),
            None,
            8192,
            &BatchTarget::default(),
            Some(options),
        )
        .unwrap();
        assert!(l.detailed);
        assert!(
            l.notes
                .iter()
                .any(|n| n.starts_with("the plan was graded with --reserve-gb 3")),
            "{:?}",
            l.notes
        );
    }

    #[test]
    fn a_plate_batch_rounds_to_whole_micro_batches_over_dp() {
        // DP 96: 2,048 / 96 = 21.3, so 21 × 96 = 2,016 sequences.
        let l = Launch::new(
            preset("8b").unwrap(),
            1_000_000_000_000,
            layout(8, 1, 96, 1),
            None,
            8192,
            &BatchTarget::default(),
            None,
        )
        .unwrap();
        assert_eq!((l.global_batch, l.accumulation()), (2016, 21));
    }

    #[test]
    fn a_detailed_step_must_split_into_whole_micro_batches() {
        let step = Step {
            micro_batch: 2,
            seq_len: 8192,
            recompute: Recompute::Selective,
            sequence_parallel: true,
            schedule: Schedule::Interleaved(2),
            tp_comm_overlap: true,
            precision: Precision::Bf16,
            global_batch_tokens: 3 * 8192 * 64,
        };
        let e = Launch::new(
            preset("70b").unwrap(),
            1e12 as u64,
            layout(8, 4, 64, 1),
            Some(step),
            8192,
            &BatchTarget::default(),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("plan.step.global_batch_tokens = 1572864"), "{e}");
        // A batch of no tokens is no whole number of micro-batches (found by fuzzing: it
        // divided by zero when the steps were counted).
        let none = Step {
            global_batch_tokens: 0,
            ..step
        };
        assert!(Launch::new(
            preset("70b").unwrap(),
            1,
            layout(8, 4, 64, 1),
            Some(none),
            8192,
            &BatchTarget::default(),
            None,
        )
        .is_err());
        let ok = Step {
            global_batch_tokens: 2 * 8192 * 64 * 4,
            ..step
        };
        let l = Launch::new(
            preset("70b").unwrap(),
            1e12 as u64,
            layout(8, 4, 64, 1),
            Some(ok),
            8192,
            &BatchTarget::default(),
            None,
        )
        .unwrap();
        assert_eq!((l.global_batch, l.accumulation()), (512, 4));
        assert!(l.notes.is_empty());
    }

    #[test]
    fn context_parallel_ranks_share_a_micro_batch() {
        // Llama 3.1 70B on 64 GPUs as TP 4 × CP 2 × PP 4: DP = 64 / 32 = 2, so the 2,048
        // sequences of the 16 Mi target are 1,024 micro-batches of one on each replica.
        let shape = preset("70b").unwrap();
        let cluster = Cluster {
            gpus: 64,
            gpus_per_node: 8,
            scale_up: 8,
        };
        let degrees = Degrees {
            ep: 1,
            etp: None,
            tp: 4,
            cp: 2,
            pp: 4,
            replicate: 1,
        };
        let layout = Layout::with(cluster, &shape, degrees, ZeroStage::new(1).unwrap()).unwrap();
        assert_eq!(layout.dp, 2);
        let l = Launch::new(
            shape.clone(),
            1e12 as u64,
            layout,
            None,
            8192,
            &BatchTarget::default(),
            None,
        )
        .unwrap();
        assert_eq!(l.gpus(), 64);
        assert_eq!((l.global_batch, l.accumulation()), (2048, 1024));
        assert!(
            l.summary().contains("TP 4 × CP 2 × PP 4 × DP 2 = 64 GPUs"),
            "{}",
            l.summary()
        );
        assert_eq!(l.cp_exchange(), CpExchange::Ring);
        // A sequence that does not split into 2·CP chunks is refused by name.
        let e = Launch::new(
            shape.clone(),
            1e12 as u64,
            layout,
            None,
            8190,
            &BatchTarget::default(),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--cp = 2") && e.contains("8190-token"), "{e}");
        // Hybrid sharding regroups DP without changing the batch: 2 replicas of 8 × 2 ranks.
        let hsdp = Layout::with(
            Cluster {
                gpus: 256,
                gpus_per_node: 8,
                scale_up: 8,
            },
            &shape,
            Degrees {
                ep: 1,
                etp: None,
                tp: 8,
                cp: 2,
                pp: 1,
                replicate: 2,
            },
            ZeroStage::new(3).unwrap(),
        )
        .unwrap();
        let l = Launch::new(
            shape,
            1e12 as u64,
            hsdp,
            None,
            8192,
            &BatchTarget::default(),
            None,
        )
        .unwrap();
        assert_eq!((l.layout.dp, l.layout.shard_group()), (16, 16));
        assert_eq!((l.global_batch, l.accumulation()), (2048, 128));
        assert!(
            l.summary()
                .contains("ZeRO 3 in 2 replicas, each sharded over DP/2 × CP = 16 ranks"),
            "{}",
            l.summary()
        );
    }
}
