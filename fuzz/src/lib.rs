//! The fuzzed code paths, called by the libFuzzer entry points in `fuzz_targets/`. Each
//! function takes the raw input; input that is not UTF-8 is skipped, as the CLI reads every
//! file as UTF-8 and errors before parsing. Every parser must return `Err` for bad input: a
//! panic anywhere below is a finding.

use std::path::Path;

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{json, Value};
use trainplan::input::plan_file::PlanFile;
use trainplan::report::export::Format;
use trainplan::Brief;

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

fn brief(data: &[u8], toml: bool, path: &str) {
    let Some(text) = text(data) else { return };
    let Ok(patch) = trainplan::input::brief_patch(text, Path::new(path), toml) else {
        return;
    };
    let brief = patch.apply(Brief::default());
    if brief.validate().is_err() {
        return;
    }
    // Accepted implies re-serialised to the same brief: what `brief --print` writes, in either
    // format, reads back as the brief it was written from.
    let json = serde_json::to_string(&brief).expect("a valid brief serialises to JSON");
    let again = trainplan::input::brief_patch(&json, Path::new("again.json"), false)
        .expect("a brief's own JSON reads back");
    assert_eq!(again.apply(Brief::default()), brief, "{json}");
    let toml = brief.to_toml().expect("a valid brief serialises to TOML");
    let again = trainplan::input::brief_patch(&toml, Path::new("again.toml"), true)
        .expect("a brief's own TOML reads back");
    assert_eq!(again.apply(Brief::default()), brief, "{toml}");
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
    if let Ok(shape) = trainplan::input::hf::parse(text, Path::new("fuzz/config.json")) {
        let _ = shape.params();
        let _ = shape.active_params();
        let _ = shape.moe_layer_params();
        let _ = shape.mtp_params();
        let _ = shape.attention_sequence(4_096);
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
    plan_text(text, index);
}

/// What `trainplan export --plan FILE --index I` does with the file's text, minus printing:
/// the plan's model (a preset or dimension name), the document's own brief (else the
/// default), the plan graded again with its whole layout and step ([`PlanFile::launch`]), and
/// every launcher's file and notes.
fn plan_text(text: &str, index: u64) {
    let Ok(plan) = PlanFile::parse(text, Path::new("plan.json"), index) else {
        return;
    };
    let Ok(shape) = plan.shape(None) else {
        return;
    };
    let brief = plan.brief.clone().unwrap_or_default();
    let Ok((launch, _)) = plan.launch(shape, brief) else {
        return;
    };
    for format in [Format::Megatron, Format::DeepSpeed, Format::Torchtitan] {
        let exporter = format.exporter();
        let _ = exporter.launch(&launch);
        let _ = exporter.side_notes(&launch);
    }
}

/// Target 5: a shard's partial search result, as `trainplan merge` reads it: parsed, checked
/// against the physics (`Partial::check`), and merged on its own (which a partial of shard
/// 1/1 is).
pub fn partial_json(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(partial) = trainplan::input::parse_partial(text, Path::new("partial.json")) else {
        return;
    };
    if partial.check().is_err() {
        return;
    }
    let _ = trainplan::search::shard::merge(vec![partial]);
}

/// Target 8: a runs file, as `trainplan calibrate RUNS.json` reads it: parsed, and its first
/// runs graded (`Run::predict`, which checks what each measured and whether it fits its
/// card); with two runs or fewer, the fit over them too.
pub fn runs_json(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(file) = trainplan::input::parse_runs(text, Path::new("runs.json")) else {
        return;
    };
    let runs: Vec<_> = file.runs.iter().take(3).collect();
    let calibration = trainplan::cost::chip::calibration::Calibration::default();
    for r in &runs {
        let _ = r.family();
        let _ = r.predict(calibration, None);
    }
    if runs.len() <= 2 {
        let _ = trainplan::plan::calibrate::fit(&runs);
    }
}

/// Target 9: a calibration file, as `--calibration FILE` reads it (what `trainplan calibrate
/// -o` writes, or an efficiency table).
pub fn calibration_json(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let _ = trainplan::input::parse_calibration(text, Path::new("calibration.json"));
}

/// A number as a fuzzer should try it: small, a power of two, near a power of two, or any.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Num {
    Small(u8),
    Pow2(u8),
    Pow2Minus1(u8),
    Any(u64),
}

impl Num {
    fn get(self) -> u64 {
        match self {
            Num::Small(n) => u64::from(n),
            Num::Pow2(k) => 1u64 << (k % 64),
            Num::Pow2Minus1(k) => (1u64 << (k % 64)).wrapping_sub(1),
            Num::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Model {
    Preset(u8),
    /// `L<layers>-h<hidden>-f<ffn>` and the optional suffixes `model::preset` reads back.
    Dimensions {
        layers: Num,
        hidden: Num,
        ffn: Num,
        heads: Option<Num>,
        head_dim: Option<Num>,
        kv_heads: Option<Num>,
        vocab: Option<Num>,
        tied: bool,
    },
    Text(String),
}

impl Model {
    fn name(&self) -> String {
        match self {
            Model::Preset(i) => ["8b", "70b", "405b", "llama3-8b", "LLAMA3-70B", " 405B "]
                [usize::from(*i) % 6]
                .to_string(),
            Model::Dimensions {
                layers,
                hidden,
                ffn,
                heads,
                head_dim,
                kv_heads,
                vocab,
                tied,
            } => {
                let mut name = format!("L{}-h{}-f{}", layers.get(), hidden.get(), ffn.get());
                for (tag, n) in [
                    ("a", heads),
                    ("d", head_dim),
                    ("kv", kv_heads),
                    ("v", vocab),
                ] {
                    if let Some(n) = n {
                        name += &format!("-{tag}{}", n.get());
                    }
                }
                if *tied {
                    name += "-tied";
                }
                name
            }
            Model::Text(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
struct StepInput {
    micro_batch: Num,
    seq_len: Num,
    recompute: u8,
    sequence_parallel: bool,
    interleaved: Option<Num>,
    global_batch_tokens: Num,
}

#[derive(Arbitrary, Debug)]
struct BriefInput {
    gpus_per_node: Num,
    seq_len: Num,
}

#[derive(Arbitrary, Debug)]
enum Wrap {
    /// A plan object, as `check --json` writes.
    Plan,
    /// Entry 1 to 4 of a search document's `plans`, after empty objects.
    Plans(u8),
    /// Entry 1 to 4 of a Pareto file's `front`, after empty objects.
    Front(u8),
}

#[derive(Arbitrary, Debug)]
struct PlanInput {
    model: Model,
    params: Option<Num>,
    tokens: Num,
    tp: Num,
    pp: Num,
    dp: Num,
    zero: u8,
    pass: Option<bool>,
    step: Option<StepInput>,
    brief: Option<BriefInput>,
    wrap: Wrap,
}

/// Target 6 (structure-aware companion of [`plan_json`]): the fuzzer's bytes pick the plan's
/// values — model name, tokens, layout, step, brief — which are written as a well-formed plan,
/// search or Pareto JSON and sent down the same path as `plan_json`, so the mutations explore
/// values rather than JSON syntax.
pub fn plan_struct(data: &[u8]) {
    let Ok(input) = PlanInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let mut plan = json!({
        "model": input.model.name(),
        "tokens": input.tokens.get(),
        "layout": {
            "tp": input.tp.get(),
            "pp": input.pp.get(),
            "dp": input.dp.get(),
            "zero": input.zero % 5,
        },
    });
    if let Some(n) = input.params {
        plan["params"] = json!(n.get());
    }
    if let Some(pass) = input.pass {
        plan["pass"] = json!(pass);
    }
    if let Some(s) = &input.step {
        let recompute = ["none", "selective", "full"][usize::from(s.recompute % 3)];
        let schedule = match s.interleaved {
            Some(v) => format!("interleaved:{}", v.get()),
            None => "1f1b".into(),
        };
        plan["step"] = json!({
            "micro_batch": s.micro_batch.get(),
            "seq_len": s.seq_len.get(),
            "recompute": recompute,
            "sequence_parallel": s.sequence_parallel,
            "schedule": schedule,
            "global_batch_tokens": s.global_batch_tokens.get(),
        });
    }
    let brief = input.brief.as_ref().map(|b| {
        let brief = Brief {
            gpus_per_node: b.gpus_per_node.get(),
            seq_len: b.seq_len.get(),
            ..Brief::default()
        };
        serde_json::to_value(brief).unwrap_or(Value::Null)
    });
    let (doc, index) = match input.wrap {
        Wrap::Plan => (plan, 1),
        Wrap::Plans(i) | Wrap::Front(i) => {
            let i = usize::from(i % 4);
            let mut list = vec![json!({}); i];
            list.push(plan);
            let key = if matches!(input.wrap, Wrap::Plans(_)) {
                "plans"
            } else {
                "front"
            };
            let mut map = serde_json::Map::new();
            map.insert(key.into(), Value::Array(list));
            (Value::Object(map), i as u64 + 1)
        }
    };
    let mut doc = doc;
    if let (Some(brief), Some(map)) = (brief, doc.as_object_mut()) {
        map.insert("brief".into(), brief);
    }
    let text = doc.to_string();
    // Accepted implies the same design: a plan the reader takes is the one that was written.
    if let Ok(read) = PlanFile::parse(&text, Path::new("plan.json"), index) {
        let f = &read.fields;
        assert_eq!(f.model, input.model.name());
        assert_eq!(f.tokens, input.tokens.get());
        assert_eq!(f.params, input.params.map(Num::get));
        let l = f.layout;
        let written = (input.tp.get(), input.pp.get(), input.dp.get(), input.zero % 5);
        assert_eq!((l.tp, l.pp, l.dp, l.zero.get()), written);
        assert_eq!(f.step.is_some(), input.step.is_some());
        if let (Some(step), Some(s)) = (&f.step, &input.step) {
            assert_eq!(step.micro_batch, s.micro_batch.get());
            assert_eq!(step.seq_len, s.seq_len.get());
            assert_eq!(step.global_batch_tokens, s.global_batch_tokens.get());
            assert_eq!(step.sequence_parallel, s.sequence_parallel);
        }
        assert_eq!(read.brief.is_some(), input.brief.is_some());
    }
    plan_text(&text, index);
}

/// Target 7: a launcher's configuration as `check --from FILE` reads it — a Megatron-LM
/// argument list (the shell words, the layout string), a torchtitan TOML, a DeepSpeed JSON —
/// under each of the names that pick the format; a bad file is one error, never a panic.
pub fn launcher_from(data: &[u8]) {
    let Some(text) = text(data) else { return };
    for name in ["fuzz/args.sh", "fuzz/job.toml", "fuzz/ds_config.json"] {
        if let Ok(mut from) = trainplan::input::from::parse(text, Path::new(name)) {
            let _ = from.resolve_interleaving(80);
            let _ = from.resolve_interleaving(u64::MAX);
        }
    }
}
