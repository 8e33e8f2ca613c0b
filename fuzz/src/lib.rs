//! The fuzzed code paths, shared by the libFuzzer (cargo-fuzz) and AFL++ entry points in
//! `fuzz_targets/`. Each function takes the raw input; input that is not UTF-8 is skipped,
//! as the CLI reads every file as UTF-8 and errors before parsing. Every parser must return
//! `Err` for bad input: a panic anywhere below is a finding.

use std::path::Path;

use trainplan::brief::BriefPatch;
use trainplan::export::launch::{Launch, PlanFile};
use trainplan::export::Format;
use trainplan::{Brief, Layout};

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

fn brief(data: &[u8], toml: bool, path: &str) {
    let Some(text) = text(data) else { return };
    if let Ok(patch) = BriefPatch::parse(text, Path::new(path), toml) {
        let brief = patch.apply(Brief::default());
        let _ = brief.validate();
    }
}

/// Target 1: a brief file in JSON, applied over the default brief and validated.
pub fn brief_json(data: &[u8]) {
    brief(data, false, "brief.json");
}

/// Target 2: a brief file in TOML, applied over the default brief and validated.
pub fn brief_toml(data: &[u8]) {
    brief(data, true, "brief.toml");
}

/// Target 3: a Hugging Face `config.json`, and the parameter counts of the shape it gives.
pub fn hf_config(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(shape) = trainplan::hf::parse(text, Path::new("fuzz/config.json")) {
        let _ = shape.params();
        let _ = shape.params_per_layer();
        let _ = shape.matrix_params();
        let _ = shape.layer_split_params();
        let _ = shape.embedding_params();
        let _ = shape.attention_width();
    }
}

/// Target 4: a plan, search or Pareto JSON as `trainplan export --plan FILE --index I` reads
/// it (the index is the first byte, 1 to 4), then the preset model, the layout on a brief sized
/// to the plan's GPUs, the launch and the three launcher exporters.
pub fn plan_json(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let index = u64::from(first % 4) + 1;
    let Some(text) = text(rest) else { return };
    let Ok(plan) = PlanFile::parse(text, Path::new("plan.json"), index) else {
        return;
    };
    let fields = &plan.fields;
    let Ok(shape) = trainplan::model::preset(&fields.model) else {
        return;
    };
    let l = fields.layout;
    let Some(gpus) = l
        .tp
        .checked_mul(l.pp)
        .and_then(|g| g.checked_mul(l.dp))
        .filter(|g| (1..=trainplan::brief::limits::GPUS).contains(g))
    else {
        return;
    };
    // As the CLI: the document's own brief when it carries one, sized to the plan's GPUs and
    // validated before the layout is built.
    let mut brief = plan.brief.clone().unwrap_or_default();
    brief.gpus = gpus;
    if brief.validate().is_err() {
        return;
    }
    let Ok(layout) = Layout::new(&brief, &shape, l.tp, l.pp, l.zero) else {
        return;
    };
    let Ok(launch) = Launch::new(shape, fields.tokens, layout, fields.step, 8192) else {
        return;
    };
    for format in [Format::Megatron, Format::DeepSpeed, Format::Torchtitan] {
        let _ = format.exporter().launch(&launch);
    }
}

/// Target 5: a shard's partial search result, as `trainplan merge` reads it.
pub fn partial_json(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let _ = serde_json::from_str::<trainplan::shard::Partial>(text);
}
