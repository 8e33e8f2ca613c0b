//! What a text report says of the brief: its GPUs, limits and loss law, its data and its
//! spend, and which of its GPU's kernel figures were derived.

use crate::brief::Brief;
use crate::cost::links::placement::{GroupPlacement, RankPlacement};
use crate::format::{count, fixed, general, grouped, money, thousands};

/// The brief in two lines, and a third for its price, power and cost limit when it has them.
pub fn brief_lines(b: &Brief) -> String {
    let law = &b.loss_law;
    let formula = match &law.experts {
        None => format!(
            "L = {} + {}/N^{} + {}/D^{}",
            general(law.e),
            general(law.a),
            general(law.alpha),
            general(law.b),
            general(law.beta)
        ),
        Some(x) => format!(
            "L = {} + {}·Ê^{}/N_act^({} {}·ln Ê) + {}·Ê^{}/D^({} {}·ln Ê), Ê of the experts from {} to {} (Ludziejewski et al. 2025's form; dense at one expert)",
            general(law.e),
            general(law.a),
            general(x.delta),
            general(law.alpha),
            minus(x.gamma),
            general(law.b),
            general(x.omega),
            general(law.beta),
            minus(x.zeta),
            general(x.e_start),
            general(x.e_max)
        ),
    };
    let node = match (b.domain_gpus(), b.cluster().scale_up) {
        (d, _) if d == b.gpus_per_node => format!("{} per node", b.gpus_per_node),
        (d, used) if used == d => format!("{} per node, NVLink domains of {d}", b.gpus_per_node),
        (d, used) => format!(
            "{} per node, NVLink domains of {d} with {used} used",
            b.gpus_per_node
        ),
    };
    let mut out = format!(
        "brief     {} GPUs × {} TFLOP/s at {}% MFU ({node}), at most {} days, {} GB cap of {} GB per GPU\n          \
         loss ≤ {} with {formula}, sequence {} tokens\n",
        thousands(b.gpus),
        grouped(b.peak_tflops),
        general(b.mfu * 100.0),
        general(b.max_days),
        grouped(b.memory_cap_gb),
        grouped(b.gpu_memory_gb),
        general(b.loss_target),
        thousands(b.seq_len),
    );
    if let Some(line) = laws_line(b) {
        out.push_str(&line);
    }
    if let Some(line) = data_line(b) {
        out.push_str(&line);
    }
    if let Some(line) = spend_line(b) {
        out.push_str(&line);
    }
    out
}

/// Where a plan's ranks sit, in two lines headed `placement` (`of` says whose, for a search):
/// the hosts and domains, the rank order, and which groups ride NVLink and which the NICs.
pub fn placement_lines(p: &RankPlacement, of: &str) -> String {
    let domains = if p.domains == 1 { "domain" } else { "domains" };
    let used = if p.scale_up_used == p.scale_up_gpus {
        String::new()
    } else {
        format!(" with {} used in each", p.scale_up_used)
    };
    let last = if p.last_domain_gpus == p.scale_up_used || p.domains == 1 {
        String::new()
    } else {
        format!(
            " ({} full, {} GPUs in the last)",
            p.domains - 1,
            p.last_domain_gpus
        )
    };
    let each = |g: &GroupPlacement| match g.fewest_per_domain {
        Some(fewest) => format!("{} {} ({fewest} of a group in a domain)", g.label(), g.size),
        None => format!("{} {}", g.label(), g.size),
    };
    format!(
        "placement {of}{} GPUs on {} hosts of {} (a failure takes a host) in {} NVLink {domains} of {}{used}{last}, \
         ranks filling them in Megatron-core's order (TP fastest, then CP, EP, DP, PP)\n          \
         over NVLink: {}; over the NICs: {}\n",
        thousands(p.gpus),
        thousands(p.hosts),
        p.gpus_per_host,
        thousands(p.domains),
        p.scale_up_gpus,
        p.listed("nvlink", each),
        p.listed("nic", each),
    )
}

/// The batch law, the critical batch and the tokens the model will serve, where the brief names
/// them (docs/model.md, "Batch-size laws", "The critical batch" and "Sized for the inference it
/// will serve").
fn laws_line(b: &Brief) -> Option<String> {
    let mut parts = Vec::new();
    if !b.batch_law.is_fixed() {
        parts.push(format!(
            "the {} batch law sets each plan's batch, within {} %",
            b.batch_law,
            general(b.batch_tolerance * 100.0)
        ));
    }
    if !b.critical_batch.is_off() {
        parts.push(format!(
            "a batch past the {} critical batch costs tokens{}",
            b.critical_batch,
            if b.critical_batch_scale == 1.0 {
                String::new()
            } else {
                format!(" (× {})", general(b.critical_batch_scale))
            }
        ));
    }
    if let Some(d) = b.inference_tokens {
        parts.push(format!("serving {} tokens over its life", count(d as f64)));
    }
    (!parts.is_empty()).then(|| format!("          {}\n", parts.join("; ")))
}

/// The data line of a brief whose law values repeats (Muennighoff et al. 2023): the unique
/// tokens and how fast repeated tokens and excess parameters lose their worth.
fn data_line(b: &Brief) -> Option<String> {
    let r = b.loss_law.repetition?;
    let data = match b.unique_tokens {
        Some(u) => format!("{} unique tokens", thousands(u)),
        None => "unlimited unique tokens".to_string(),
    };
    Some(format!(
        "          data: {data}, graded by effective tokens and parameters: repeats decay as e^(−R/{}), excess parameters as e^(−R/{})\n",
        general(r.r_d),
        general(r.r_n)
    ))
}

/// The brief's price, power, PUE, carbon intensity and cost limit, on one line (`None` when
/// it has none of them).
fn spend_line(b: &Brief) -> Option<String> {
    let s = &b.spend;
    let mut parts = Vec::new();
    if let Some(p) = s.price_per_gpu_hour {
        parts.push(format!("{} a GPU-hour", money(p)));
    }
    if let Some(w) = s.gpu_power_w {
        parts.push(format!(
            "{} W a GPU × PUE {}",
            grouped(w),
            general(s.pue.unwrap_or(1.0))
        ));
    }
    if let Some(c) = s.carbon_g_per_kwh {
        parts.push(format!("{} g CO2e/kWh", grouped(c)));
    }
    if let Some(limit) = b.max_cost {
        let days = b.cost_limit_days().map_or(String::new(), |d| {
            format!(" ({} days on {} GPUs)", fixed(d, 1), thousands(b.gpus))
        });
        parts.push(format!("cost ≤ {}{days}", money(limit)));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "spend     {}
",
            parts.join(", ")
        )
    })
}

/// `x` after a minus sign: `− x`, or `+ |x|` when it is negative.
fn minus(x: f64) -> String {
    if x < 0.0 {
        format!("+ {}", general(-x))
    } else {
        format!("− {}", general(x))
    }
}

/// The kernel figures a detailed step was timed on that were not measured on the brief's GPU
/// ([`crate::plan::kernel_figures`]): a line naming the chip, then one per derived figure.
pub fn figures_lines(k: &crate::plan::KernelFigures) -> String {
    let mut out = format!(
        "figures   the {}'s kernel figures; derived, not measured:\n",
        k.chip
    );
    for d in &k.derived {
        out.push_str("            - ");
        out.push_str(d);
        out.push('\n');
    }
    out
}
