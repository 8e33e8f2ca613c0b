//! The check report: one graded design's header, its memory per GPU, time per step and
//! spend, its checks with their margins, the fixes for those that fail, and its sensitivity.

use std::fmt::Write;

use super::brief::placement_lines;
use super::sensitivity::sensitivity_section;
use super::table::{table, verdict_word};
use crate::brief::Brief;
use crate::cost::step::recipe::{MasterWeights, OptimizerStates};
use crate::cost::step::stack::{GradientPrecision, LossPrecision};
use crate::cost::step::Schedule;
use crate::format::{count, fixed, general, money, percent, thousands};
use crate::plan::check::CheckReport;
use crate::plan::limits::law_size;
use crate::plan::Plan;

/// One graded design as text: what it is, what each GPU holds, where a step's time goes, what
/// the run spends, each check with its margin, the fixes, and the sensitivity when asked for.
pub(super) fn report(r: &CheckReport) -> String {
    let p = &r.plan;
    let mut out = header(p);
    for note in &r.notes {
        let _ = writeln!(out, "note      {note}");
    }
    if let Some(line) = batch_line(r) {
        out.push_str(&line);
    }
    if let Some(placement) = &r.placement {
        out.push_str(&placement_lines(placement, ""));
        out.push('\n');
    }
    out.push_str(&memory_section(p));
    if let Some(time) = time_section(p, &r.brief) {
        out.push_str(&time);
    }
    if let Some(spend) = spent_line(p, &r.brief) {
        out.push_str(&spend);
    }
    if let Some(data) = &p.data {
        let epochs = match r.brief.unique_tokens {
            Some(u) => format!(
                "{} epochs of the {} unique tokens",
                fixed(data.epochs, 2),
                count(u as f64)
            ),
            None => "every token fresh".to_string(),
        };
        let _ = writeln!(
            out,
            "data      {epochs}: graded as {} effective tokens on {} effective parameters",
            count(data.effective_tokens),
            count(data.effective_params)
        );
    }
    if let Some(c) = &p.critical_batch {
        let _ = writeln!(
            out,
            "batch     {} tokens a step against a critical batch of {} ({} law): the loss counts {} of the {} tokens, the run training B/B_crit = {} more than the loss law needs",
            count(c.batch_tokens),
            count(c.critical_tokens),
            c.law,
            count(c.effective_tokens),
            count(p.tokens as f64),
            percent(c.extra)
        );
        if let Some(e) = &c.extrapolation {
            let _ = writeln!(out, "          {e}");
        }
    }
    if let Some(line) =
        crate::laws::loss::extrapolation(&r.brief.loss_law, law_size(&r.shape), p.tokens as f64)
    {
        let _ = writeln!(out, "law       {line}");
    }
    out.push_str("\nchecks\n");
    out.push_str(&table(
        &["check", "value", "limit", "", "margin"],
        &check_rows(r),
        "lrrll",
        "  ",
    ));
    let _ = writeln!(
        out,
        "\n{}: {}",
        verdict_word(p.pass),
        if p.pass {
            "every check passes"
        } else {
            "see the fixes below"
        }
    );
    if !r.fixes.is_empty() {
        out.push_str("\nto fix\n");
        for f in &r.fixes {
            let _ = writeln!(out, "  - {f}");
        }
    }
    if let Some(sensitivity) = &r.sensitivity {
        out.push('\n');
        out.push_str(&sensitivity_section(sensitivity));
    }
    out
}

/// The brief's batch law against the plan's batch: `batch law deepseek: 24.21 M tokens a step
/// (learning rate 2.94e-4) for this plan's 3.4 T tokens; this plan's 24.12 M, −0.4 %`, with
/// where the law extrapolates; `None` under a fixed target.
fn batch_line(r: &CheckReport) -> Option<String> {
    let b = r.batch.as_ref()?;
    let mut out = format!(
        "batch law {}: {} tokens a step (learning rate {}) for {}",
        b.law,
        count(b.optimal_batch_tokens),
        crate::format::sci(b.learning_rate),
        b.run_words(r.brief.loss_target)
    );
    if let Some(step) = &r.plan.step {
        let g = step.global_batch_tokens as f64;
        let _ = write!(
            out,
            "; this plan's {}, {:+.1} %",
            count(g),
            (g / b.optimal_batch_tokens - 1.0) * 100.0
        );
    }
    out.push('\n');
    if let Some(e) = &b.extrapolation {
        let _ = writeln!(out, "          {e}");
    }
    Some(out)
}

/// The report's first lines: the plan's model, parameters, tokens and layout, and for a
/// detailed plan its stack, its step and the stage that needs the most memory.
fn header(p: &Plan) -> String {
    let l = &p.layout;
    let mut out = String::new();
    let mut params = format!("{} parameters", thousands(p.params));
    if let Some(mtp) = p.mtp_params {
        let _ = write!(params, " + {} of multi-token prediction", thousands(mtp));
    }
    if let Some(active) = p.active_params {
        let _ = write!(params, ", {} active", thousands(active));
    }
    let _ = writeln!(
        out,
        "{} ({params}) on {} tokens ({}), {}\n",
        p.model,
        count(p.tokens as f64),
        thousands(p.tokens),
        l.describe()
    );
    if let Some(options) = &p.memory_model {
        let _ = writeln!(
            out,
            "stack     {} (its kernels, overlaps and defaults; --stack to choose)",
            options.stack
        );
    }
    if let Some(k) = &p.kernel_figures {
        out.push_str(&super::brief::figures_lines(k));
    }
    if let (Some(step), Some(stage)) = (&p.step, &p.worst_stage) {
        let _ = writeln!(
            out,
            "step      {} × {} tokens a micro-batch, {} micro-batches a step ({} tokens), recompute {}, sequence parallel {}, TP overlap {}, {}",
            step.micro_batch,
            thousands(step.seq_len),
            stage.micro_batches,
            thousands(step.global_batch_tokens),
            step.recompute.name(),
            if step.sequence_parallel { "on" } else { "off" },
            if step.tp_comm_overlap { "on" } else { "off" },
            step.schedule
        );
        // The FP8 recipe and weights, where asked for (the default FP8 prints as before).
        if let Some(o) = p
            .memory_model
            .as_ref()
            .filter(|o| o.fp8_recipe.is_some() || o.fp8_params || !o.bf16_layers.is_none())
        {
            let recipe = crate::cost::step::recipe::Fp8Recipe::of(step.precision, o.fp8_recipe)
                .ok()
                .flatten()
                .map_or("none".to_string(), |r| r.to_string());
            let b = o.bf16_layers;
            let bf16 = if b.is_none() {
                String::new()
            } else {
                format!(
                    "; the first {} and last {} layers in BF16 (--fp8-bf16-layers)",
                    b.start, b.end
                )
            };
            let _ = writeln!(
                out,
                "fp8       recipe {recipe}, weights {}{bf16}",
                if o.fp8_params {
                    "kept and gathered in FP8 (--fp8-params)"
                } else {
                    "in BF16 with FP8 copies"
                }
            );
        }
        let _ = writeln!(
            out,
            "stage     the {} stage ({} of {}) needs the most: {} layers, {} micro-batches in flight\n",
            stage.role,
            stage.index + 1,
            stage.of,
            stage.layers,
            general(stage.in_flight)
        );
    }
    out
}

/// The memory table, and how Ψ, the parameters each GPU holds before ZeRO, is counted.
fn memory_section(p: &Plan) -> String {
    let l = &p.layout;
    let mut out = String::from("memory per GPU\n");
    out.push_str(&table(
        &["component", "", "GB"],
        &memory_rows(p),
        "llr",
        "  ",
    ));
    let psi = match (p.worst_stage.is_some(), p.active_params.is_some()) {
        (true, _) => "the stage's parameters per TP rank",
        (false, false) => "N / (TP·PP)",
        (false, true) => "N_rest / (TP·PP) + N_experts / (EP·ETP·PP)",
    };
    let _ = writeln!(
        out,
        "  Ψ = {psi}, held by each GPU before ZeRO shards over DP"
    );
    if p.active_params.is_some() {
        let _ = writeln!(
            out,
            "  the routed experts' share of Ψ is split over EP × ETP = {} × {} ranks, and ZeRO \
             shards it over their {} copies (EDP)",
            l.ep,
            l.etp,
            thousands(l.expert_dp())
        );
    }
    out
}

/// The memory table of a plan: each component with how it is counted.
fn memory_rows(p: &Plan) -> Vec<Vec<String>> {
    let m = &p.memory_gb;
    let row = |name: &str, how: String, gb: f64| vec![name.to_string(), how, fixed(gb, 2)];
    // Ψ: the parameters this GPU holds before ZeRO; "/DP" where the stage shards the piece.
    let zero = p.layout.zero;
    let per = |bytes: u32, sharded: bool| {
        if sharded {
            format!("{bytes}Ψ/DP")
        } else {
            format!("{bytes}Ψ")
        }
    };
    let options = p.memory_model.as_ref();
    let weights = if options.is_some_and(|o| o.fp8_params) {
        // The layers' matrices in FP8 only (--fp8-params), the norms and embeddings BF16.
        format!(
            "FP8 matrices, BF16 rest{}",
            if zero.shards_weights() { ", /DP" } else { "" }
        )
    } else {
        // Below BF16, the layers' low-precision copies Transformer Engine keeps beside them
        // (with sharded weights they are the gathered units', counted as transient).
        let precision = p.step.map(|s| s.precision).unwrap_or_default();
        let copies = if zero.shards_weights() {
            ""
        } else if precision.is_fp4() {
            " + FP4 copies"
        } else if precision.is_fp8() {
            " + FP8 copies"
        } else {
            ""
        };
        format!("BF16, {}{copies}", per(2, zero.shards_weights()))
    };
    let mut rows = vec![row("weights", weights, m.weights)];
    let optimizer = match options {
        // Muon: the master and one moment on the hidden matrices, AdamW's on the rest.
        Some(o) if o.optimizer == crate::cost::step::recipe::Optimizer::Muon => format!(
            "Muon: master + moment on the matrices, {}; Adam's {} on the rest",
            per(o.matrix_optimizer_bytes() as u32, zero.shards_optimizer()),
            per(o.optimizer_bytes() as u32, zero.shards_optimizer())
        ),
        Some(o) if !(o.master_weights.is_default() && o.optimizer_states.is_default()) => {
            let master = match o.master_weights {
                MasterWeights::Fp32 => "FP32 master",
                MasterWeights::Fp16 => "FP16 master",
                MasterWeights::Remainders => "master remainders",
            };
            let states = match o.optimizer_states {
                OptimizerStates::Fp32 => "",
                OptimizerStates::Bf16 => "BF16 ",
            };
            format!(
                "{master} + {states}Adam m, v, {}",
                per(o.optimizer_bytes() as u32, zero.shards_optimizer())
            )
        }
        _ => format!(
            "FP32 master + Adam m, v, {}",
            per(12, zero.shards_optimizer())
        ),
    };
    match (&p.memory_model, &p.step, &p.worst_stage) {
        (Some(options), Some(step), Some(stage)) => {
            let (grad, bytes) = match options.gradients {
                GradientPrecision::Bf16 => ("BF16", 2),
                GradientPrecision::Fp32 => ("FP32", 4),
            };
            let gradients = format!("{grad}, {}", per(bytes, zero.shards_gradients()));
            rows.push(row("gradients", gradients, m.gradients));
            // An offloaded fraction's state is in host memory, not in the GPU's figure.
            let optimizer = if options.offload_optimizer.get() > 0.0 {
                format!(
                    "{optimizer}; {} on the host, {} GB",
                    general(options.offload_optimizer.get()),
                    fixed(stage.optimizer_host_gb, 1)
                )
            } else {
                optimizer
            };
            rows.push(row("optimizer", optimizer, m.optimizer));
            let mb = if stage.in_flight == 1.0 {
                "micro-batch"
            } else {
                "micro-batches"
            };
            // Offloaded layers' activations are in host memory, not in the GPU's figure.
            let offloaded = if stage.offloaded_layers > 0 {
                format!(
                    "; {} on the host, {} GB",
                    stage.offloaded_layers,
                    fixed(stage.host_gb, 1)
                )
            } else {
                String::new()
            };
            rows.push(row(
                "activations",
                format!(
                    "recompute {}, {} layers × {} {mb}{offloaded}",
                    step.recompute.name(),
                    stage.layers - stage.offloaded_layers,
                    general(stage.in_flight)
                ),
                m.activations,
            ));
            let loss = match options.loss {
                LossPrecision::Fp32 => "FP32 log-probabilities, 4·s·b·V/TP",
                LossPrecision::Bf16 => "BF16 log-probabilities, 2·s·b·V/TP",
                LossPrecision::InPlace => "BF16 logits, their gradient in place, 2·s·b·V/TP",
            };
            rows.push(row("logits", loss.into(), m.logits.unwrap_or(0.0)));
            rows.push(row(
                "transient",
                "backward working set or loss peak".into(),
                m.transient.unwrap_or(0.0),
            ));
            // With TP overlap on Transformer Engine, its userbuffers are in the reserve's figure.
            let buffers =
                crate::cost::memory::buffers::holds_userbuffers(options.stack, step, &p.layout);
            rows.push(row(
                "reserve",
                format!(
                    "{} GB + {} % fragmentation{}",
                    general(options.reserve_gb),
                    general(options.fragmentation * 100.0),
                    if buffers { " + TE userbuffers" } else { "" }
                ),
                m.reserve.unwrap_or(0.0),
            ));
        }
        _ => {
            let gradients = format!("BF16, {}", per(2, zero.shards_gradients()));
            rows.push(row("gradients", gradients, m.gradients));
            rows.push(row("optimizer", optimizer, m.optimizer));
            rows.push(row("activations", "2·s·h·⌈L/PP⌉/TP".into(), m.activations));
        }
    }
    rows.push(row("total", String::new(), m.total));
    rows
}

/// The checks' rows: memory, days and loss, and cost where the brief limits it, each with its
/// value, its limit, its verdict and its margin.
fn check_rows(r: &CheckReport) -> Vec<Vec<String>> {
    let p = &r.plan;
    let m = &p.memory_gb;
    let margin = |x: f64, unit: &str, decimals: usize| {
        if x >= 0.0 {
            format!("{}{unit} to spare", fixed(x, decimals))
        } else {
            format!("{}{unit} over", fixed(-x, decimals))
        }
    };
    let mut check_rows = vec![
        vec![
            "memory".into(),
            format!("{} GB", fixed(m.total, 2)),
            format!("≤ {} GB", r.brief.memory_cap_gb),
            verdict_word(p.checks.memory).into(),
            margin(p.margins.memory_gb, " GB", 2),
        ],
        vec![
            "days".into(),
            fixed(p.days, 3),
            format!("≤ {}", r.brief.max_days),
            verdict_word(p.checks.days).into(),
            margin(p.margins.days, " days", 3),
        ],
        vec![
            "loss".into(),
            fixed(p.loss, 4),
            format!("≤ {}", r.brief.loss_target),
            verdict_word(p.checks.loss).into(),
            margin(p.margins.loss, "", 4),
        ],
    ];
    if let (Some(pass), Some(limit), Some(c), Some(short)) = (
        p.checks.cost,
        r.brief.max_cost,
        p.spend.and_then(|s| s.cost),
        p.margins.cost,
    ) {
        check_rows.push(vec![
            "cost".into(),
            money(c),
            format!("≤ {}", money(limit)),
            verdict_word(pass).into(),
            if short >= 0.0 {
                format!("{} to spare", money(short))
            } else {
                format!("{} over", money(-short))
            },
        ]);
    }
    check_rows
}

/// Where a step's seconds go and what the run needs, under the detailed time model.
fn time_section(p: &Plan, brief: &Brief) -> Option<String> {
    let (b, seconds) = (p.breakdown?, p.step_seconds?);
    let (failures, mfu) = (p.failures?, p.mfu?);
    let offloads = p
        .memory_model
        .as_ref()
        .is_some_and(|o| o.offload_activations > 0);
    let offloads_optimizer = p
        .memory_model
        .as_ref()
        .is_some_and(|o| o.offload_optimizer.get() > 0.0);
    let share = |x: f64| percent(x / seconds);
    let precision = p.step.map(|s| s.precision).unwrap_or_default();
    let muon = p
        .memory_model
        .as_ref()
        .is_some_and(|o| o.optimizer == crate::cost::step::recipe::Optimizer::Muon);
    let optimizer = if muon {
        "Muon's Newton–Schulz and the step, GEMMs and HBM"
    } else if precision.is_fp4() {
        "AdamW step and FP4 weight casts, HBM-bound"
    } else if precision.is_fp8() {
        "AdamW step and FP8 weight casts, HBM-bound"
    } else {
        "AdamW step, HBM-bound"
    };
    let schedule = p.step.map(|s| s.schedule).unwrap_or(Schedule::OneFOneB);
    let bubble = match schedule {
        Schedule::ZeroBubbleV => "fill and drain, weight gradients run in it (ZB-V)",
        Schedule::DualPipeV => "fill and drain from both ends (DualPipeV)",
        Schedule::OneFOneB | Schedule::Interleaved(_) => "pipeline fill and drain",
    };
    let rows: Vec<Vec<String>> = [
        ("compute", "forward, backward, recomputation", b.compute),
        ("tp_comm", "tensor-parallel collectives, NVLink", b.tp_comm),
        ("cp_comm", "context-parallel K and V, exposed", b.cp_comm),
        ("pp_comm", "pipeline sends", b.pp_comm),
        ("dp_comm", "data-parallel collectives, exposed", b.dp_comm),
        (
            "ep_comm",
            "expert all-to-alls and gathers, exposed",
            b.ep_comm,
        ),
        (
            "host",
            "routed experts' launches on the host, past the GPU's",
            b.host,
        ),
        ("bubble", bubble, b.bubble),
        ("optimizer", optimizer, b.optimizer),
        (
            "offload",
            "activations to and from host memory, exposed",
            b.offload,
        ),
        (
            "optimizer_offload",
            "host's optimizer share: copies and CPU AdamW, past the GPU's",
            b.optimizer_offload,
        ),
        ("step", "", seconds),
    ]
    .iter()
    .filter(|(name, ..)| *name != "offload" || b.offload > 0.0 || offloads)
    .filter(|(name, ..)| {
        *name != "optimizer_offload" || b.optimizer_offload > 0.0 || offloads_optimizer
    })
    .filter(|(name, ..)| *name != "cp_comm" || p.layout.cp > 1)
    .filter(|(name, ..)| *name != "ep_comm" || p.active_params.is_some())
    // The host floor is megatron-te's: shown for its mixtures of experts, and wherever it is
    // not zero.
    .filter(|(name, ..)| {
        *name != "host"
            || b.host > 0.0
            || (p.active_params.is_some()
                && p.memory_model
                    .as_ref()
                    .is_some_and(|o| o.stack == crate::cost::step::stack::Stack::MegatronTe))
    })
    .map(|(name, how, s)| vec![name.to_string(), how.to_string(), fixed(*s, 3), share(*s)])
    .collect();
    let mut out = String::from("\ntime per step\n");
    out.push_str(&table(
        &["part", "", "seconds", "share"],
        &rows,
        "llrr",
        "  ",
    ));
    let narrow_peak = precision.peak_tflops(0.0, brief.fp8_tflops, brief.fp4_tflops);
    let fp8_peak = if precision.is_narrow() && narrow_peak > 0.0 {
        format!(
            " against the BF16 peak ({} % of the {} TFLOP/s {} peak)",
            fixed(100.0 * mfu * brief.peak_tflops / narrow_peak, 1),
            crate::format::grouped(narrow_peak),
            if precision.is_fp4() { "FP4" } else { "FP8" }
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {} tokens/s; MFU {} % derived{fp8_peak} (the brief assumes {} %), HFU {} %",
        thousands(p.tokens_per_second.unwrap_or(0.0).round() as u64),
        fixed(100.0 * mfu, 1),
        general(100.0 * brief.mfu),
        fixed(100.0 * p.hfu.unwrap_or(0.0), 1)
    );
    let failing = match (failures.checkpoint_interval_minutes, failures.mtbf_hours) {
        (Some(interval), Some(mtbf)) => format!(
            "a checkpoint every {} min ({} s to write), MTBF {} h, {} failures expected",
            fixed(interval, 1),
            fixed(failures.checkpoint_seconds, 1),
            fixed(mtbf, 1),
            fixed(failures.expected_failures, 0)
        ),
        _ => "no failures expected".to_string(),
    };
    let _ = writeln!(
        out,
        "  {} days of compute; {failing}, goodput {} %: {} days (6ND at the assumed MFU: {})",
        fixed(p.compute_days.unwrap_or(0.0), 2),
        fixed(100.0 * failures.goodput, 1),
        fixed(p.days, 2),
        fixed(p.days_plate.unwrap_or(0.0), 2)
    );
    Some(out)
}

/// A plan's spend in one line: GPU-hours, cost, energy, emissions, as far as the brief allows.
fn spent_line(p: &Plan, b: &Brief) -> Option<String> {
    let s = p.spend.as_ref()?;
    let mut parts = vec![format!(
        "{} GPU-hours ({} GPUs × {} days)",
        fixed(s.gpu_hours, 0),
        thousands(p.layout.gpus()),
        fixed(p.days, 2)
    )];
    if let (Some(c), Some(price)) = (s.cost, b.spend.price_per_gpu_hour) {
        parts.push(format!("cost {} at {} a GPU-hour", money(c), money(price)));
    }
    if let Some(e) = s.energy_mwh {
        parts.push(format!("{} MWh", fixed(e, 1)));
    }
    if let Some(t) = s.emissions_t {
        parts.push(format!("{} t CO2e", fixed(t, 1)));
    }
    Some(format!(
        "
spend
  {}
",
        parts.join("; ")
    ))
}
