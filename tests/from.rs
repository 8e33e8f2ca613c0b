//! `check --from` and `search --from`: a launcher's file read back as the design it came
//! from. The round trip — `export`, then `check --from` on what it wrote — grades exactly what
//! the flags graded, byte for byte in JSON: for Megatron-LM and torchtitan from the file
//! alone, for DeepSpeed with the model and the layout flags alongside (its JSON has neither).

mod common;

use std::path::PathBuf;

use common::trainplan;
use proptest::prelude::*;
use trainplan::cli::{run, Outcome};

/// The main output of `trainplan ARGS` run in this process, or its one-line error.
fn cli(args: &[String]) -> Result<String, String> {
    let mut out = Vec::new();
    let mut all = vec!["trainplan".to_string()];
    all.extend(args.iter().cloned());
    match run(all, &mut out) {
        Ok(Outcome::Answer(_)) => Ok(String::from_utf8(out).unwrap()),
        Ok(Outcome::Help(_)) => Err("help".into()),
        Err(e) => Err(e),
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// A scratch file that is removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, text: &str) -> Scratch {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "trainplan-from-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        Scratch(path)
    }
    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// A design as flags, with the step stated, and its tokens whole steps of the global batch.
#[derive(Debug, Clone)]
struct Design {
    model: Vec<String>,
    tp: u64,
    pp: u64,
    cp: u64,
    dp: u64,
    zero: u8,
    micro: u64,
    accumulation: u64,
    seq: u64,
    steps: u64,
    recompute: &'static str,
    sp: bool,
    schedule: &'static str,
    precision: &'static str,
    stack: &'static str,
    /// Hybrid-sharding replicas, EP and ETP.
    replicate: u64,
    ep: u64,
    etp: Option<u64>,
    /// More of the detailed model's flags (a mixture of experts' settings).
    extra: Vec<String>,
    /// Graded by the plate: no step, no stack.
    plate: bool,
}

impl Design {
    fn flags(&self) -> Vec<String> {
        let g = self.micro * self.dp * self.accumulation;
        let mut f = self.model.clone();
        f.extend(strings(&[
            "--gpus",
            &(self.tp * self.pp * self.cp * self.dp).to_string(),
            "--tokens",
            &(self.steps * g * self.seq).to_string(),
            "--seq-len",
            &self.seq.to_string(),
            "--tp",
            &self.tp.to_string(),
            "--pp",
            &self.pp.to_string(),
            "--cp",
            &self.cp.to_string(),
            "--zero",
            &self.zero.to_string(),
        ]));
        for (flag, value, default) in [
            ("--replicate", self.replicate, 1),
            ("--ep", self.ep, 1),
            ("--etp", self.etp.unwrap_or(0), 0),
        ] {
            if value != default {
                f.extend(strings(&[flag, &value.to_string()]));
            }
        }
        if self.plate {
            return f;
        }
        f.extend(self.extra.iter().cloned());
        f.extend(strings(&[
            "--memory",
            "detailed",
            "--stack",
            self.stack,
            "--micro-batch",
            &self.micro.to_string(),
            "--global-batch-tokens",
            &(g * self.seq).to_string(),
            "--recompute",
            self.recompute,
            "--sequence-parallel",
            if self.sp { "on" } else { "off" },
            "--schedule",
            self.schedule,
            "--precision",
            self.precision,
        ]));
        f
    }
}

fn model() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(strings(&["--model", "8b"])),
        Just(strings(&["--model", "70b"])),
        (2u64..12, 1u64..6, 2u64..5).prop_map(|(layers, k, ratio)| {
            let heads = 4 * k;
            let hidden = heads * 128;
            strings(&[
                "--layers",
                &(layers * 4).to_string(),
                "--hidden",
                &hidden.to_string(),
                "--ffn",
                &(hidden * ratio).to_string(),
                "--heads",
                &heads.to_string(),
                "--kv-heads",
                "4",
            ])
        }),
    ]
}

prop_compose! {
    fn design(
        stacks: &'static [&'static str],
        recomputes: &'static [&'static str],
        cps: &'static [u64],
        precisions: &'static [&'static str],
    )(
        model in model(),
        tp in prop::sample::select(vec![1u64, 2, 4]),
        pp in prop::sample::select(vec![1u64, 2, 4]),
        cp in prop::sample::select(cps.to_vec()),
        dp in 1u64..9,
        zero in 0u8..4,
        micro in 1u64..3,
        accumulation in 1u64..5,
        seq in prop::sample::select(vec![4096u64, 8192]),
        steps in 1u64..5000,
        recompute in prop::sample::select(recomputes.to_vec()),
        sp in any::<bool>(),
        interleaved in any::<bool>(),
        precision in prop::sample::select(precisions.to_vec()),
        stack in prop::sample::select(stacks.to_vec()),
    ) -> Design {
        let schedule = if interleaved && pp > 1 { "interleaved:2" } else { "1f1b" };
        Design {
            model, tp, pp, cp, dp, zero, micro, accumulation: accumulation * pp, seq, steps,
            recompute, sp: sp && tp > 1, schedule, precision, stack,
            replicate: 1, ep: 1, etp: None, extra: Vec::new(), plate: false,
        }
    }
}

prop_compose! {
    /// The FP8 recipe, FP8 weights, gradient and optimizer-state flags: each often left out
    /// (the default), the combinations a design refuses included (then there is no plan).
    fn precision_extras()(
        recipe in prop::sample::select(vec!["", "", "delayed", "tensorwise", "blockwise", "mxfp8"]),
        fp8_params in prop::sample::select(vec!["", "", "on", "off"]),
        gradients in prop::sample::select(vec!["", "", "bf16", "fp32"]),
        states in prop::sample::select(vec!["", "", "bf16", "fp32"]),
        master in prop::sample::select(vec!["", "", "", "fp32", "fp16", "remainders"]),
        bf16_layers in prop::sample::select(vec!["", "", "", "1,1", "0,2"]),
    ) -> Vec<String> {
        let mut extra = Vec::new();
        for (flag, value) in [
            ("--fp8-recipe", recipe),
            ("--fp8-params", fp8_params),
            ("--gradients", gradients),
            ("--optimizer-states", states),
            ("--master-weights", master),
            ("--fp8-bf16-layers", bf16_layers),
        ] {
            if !value.is_empty() {
                extra.extend(strings(&[flag, value]));
            }
        }
        extra
    }
}

/// Mixtral 8×7B's config, a mixture of experts.
const MIXTRAL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/hf/mixtral-8x7b-v0.1/config.json"
);

prop_compose! {
    /// A plan of any kind check grades: plate or detailed, on any stack, with CP, replicas,
    /// and for a mixture of experts EP, ETP and the experts' settings.
    fn any_plan()(
        d in design(
            &["megatron-te", "megatron-te", "llama3", "megatron-deepspeed", "eager", "torchtitan",
              "torchtitan-compile", "maxtext"],
            &["none", "selective", "full", "selective-op", "selective-layer"],
            &[1, 2],
            &["bf16", "fp8"],
        ),
        plate in prop::bool::weighted(0.2),
        replicate in prop::sample::select(vec![1u64, 1, 2]),
        mixtral in prop::bool::weighted(0.25),
        ep in prop::sample::select(vec![1u64, 2, 4, 8]),
        etp in prop::sample::select(vec![None, Some(1u64)]),
        deepep in any::<bool>(),
        overlap in any::<bool>(),
        moe_recompute in prop::sample::select(vec!["none", "act", "layer"]),
        norm_recompute in any::<bool>(),
        titan in prop::bool::weighted(0.3),
        stages in prop::sample::select(vec!["", "", "", "even", "llama3", "balanced"]),
        gradients in prop::bool::weighted(0.1),
        precision in prop::option::weighted(0.3, precision_extras()),
    ) -> Design {
        let mut d = Design { plate, replicate, ..d };
        if let Some(extra) = precision {
            d.extra.extend(extra);
        }
        if !stages.is_empty() {
            d.extra.extend(strings(&["--stages", stages]));
        }
        if gradients {
            d.extra.extend(strings(&["--gradients", "bf16"]));
        }
        // Mostly designs check grades: replicas that divide DP, steps the stacks run, and
        // often one that torchtitan's file can say.
        d.dp *= replicate;
        if d.stack == "megatron-deepspeed" {
            (d.cp, d.schedule) = (1, "1f1b");
        }
        if d.stack == "eager" || d.stack == "megatron-deepspeed" {
            d.cp = 1;
        }
        if titan {
            d.stack = if d.steps % 2 == 0 { "torchtitan" } else { "torchtitan-compile" };
            d.zero = 2 + d.zero % 2;
            d.sp = d.tp > 1;
            if d.recompute == "selective" {
                d.recompute = "selective-op";
            }
        }
        if mixtral {
            d.model = strings(&["--model-config", MIXTRAL]);
            (d.ep, d.etp) = (ep, etp);
            d.dp *= 8;
            d.precision = "bf16";
            if !matches!(d.recompute, "none" | "selective") {
                d.recompute = "none";
            }
            d.extra.extend(strings(&[
                "--ep-dispatcher", if deepep { "deepep" } else { "alltoall" },
                "--ep-overlap", if overlap { "on" } else { "off" },
                "--moe-recompute", moe_recompute,
                "--norm-recompute", if norm_recompute { "on" } else { "off" },
            ]));
        }
        d
    }
}

/// The `--model-config` a plan file of `design`'s model needs beside it (none for a preset or
/// a dimension name).
fn config_of(design: &Design) -> Vec<String> {
    match design.model.first().map(String::as_str) {
        Some("--model-config") => design.model.clone(),
        _ => Vec::new(),
    }
}

/// The flags DeepSpeed's side note says `check --from` needs beside the JSON written for the
/// plan file at `plan`.
fn deepspeed_alongside(plan: &Scratch, design: &Design) -> Vec<String> {
    let out = trainplan()
        .args(["export", "--format", "deepspeed", "--plan", &plan.path()])
        .args(["--seq-len", &design.seq.to_string()])
        .args(config_of(design))
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    let note = "note: check --from grades this file as planned given the training script's part: ";
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix(note))
        .unwrap_or_else(|| panic!("no note naming the script's part: {err}"));
    line.split_whitespace().map(String::from).collect()
}

/// The export of `design` in `format`, if the launcher can say it.
fn export(format: &str, design: &Design) -> Option<String> {
    let mut args = strings(&["export", "--format", format, "--quiet"]);
    args.extend(design.flags());
    cli(&args).ok()
}

/// `check --json`'s text without the `"from"` object `--from` adds last (`file`, `format`,
/// `unused`), checked to be there.
fn without_from(json: Result<String, String>) -> Result<String, String> {
    let text = json?;
    let at = text
        .find(",\n  \"from\": {\n    \"file\": ")
        .ok_or_else(|| format!("no from object: {text}"))?;
    assert!(text.ends_with("]\n  }\n}\n"), "{text}");
    Ok(format!("{}\n}}\n", &text[..at]))
}

/// `check --json` of the flags and of the file, which must be the same bytes (or errors),
/// but for the file's `"from"`.
fn same_grade(design: &Design, file: &Scratch, alongside: &[String]) -> Result<(), TestCaseError> {
    let mut flags = strings(&["check", "--json", "--quiet"]);
    flags.extend(design.flags());
    let mut from = strings(&["check", "--json", "--quiet", "--from", &file.path()]);
    from.extend(alongside.iter().cloned());
    let (a, b) = (cli(&flags), without_from(cli(&from)));
    prop_assert!(b.is_ok(), "{design:?}: {b:?}");
    prop_assert_eq!(a, b);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    #[test]
    fn megatron_s_arguments_grade_as_the_design_they_came_from(
        d in design(
            &["megatron-te", "megatron-te", "llama3", "megatron-deepspeed", "eager"],
            &["none", "selective", "full", "selective-layer"],
            &[1, 2],
            &["bf16", "fp8", "fp8"],
        ),
        extra in precision_extras(),
    ) {
        let mut d = d;
        d.extra.extend(extra);
        let Some(text) = export("megatron", &d) else {
            return Ok(());
        };
        let file = Scratch::new("megatron.sh", &text);
        // Megatron-LM's kernel and overlap options say the default stack; another may share
        // them with a third (eager and torchtitan's), so it is named alongside.
        let alongside = match d.stack {
            "megatron-te" => vec![],
            other => strings(&["--stack", other]),
        };
        same_grade(&d, &file, &alongside)?;
    }

    #[test]
    fn torchtitan_s_job_grades_as_the_design_it_came_from(
        d in design(
            &["torchtitan"],
            &["none", "full", "selective-op", "selective-layer"],
            &[1, 2],
            &["bf16", "fp8"],
        ),
        fp8_params in prop::sample::select(vec!["", "on", "off"]),
    ) {
        let mut d = d;
        if !fp8_params.is_empty() {
            d.extra.extend(strings(&["--fp8-params", fp8_params]));
        }
        // torchtitan's FSDP keeps ZeRO 2 or 3 (or plain DDP), and its TP always shards the
        // sequence: what its TOML can say.
        let ddp = d.tp == 1 && d.pp == 1 && d.cp == 1;
        prop_assume!(d.zero >= 2 || (d.zero == 0 && ddp));
        prop_assume!(d.sp == (d.tp > 1));
        prop_assume!(d.model[1] == "8b" || d.model[1] == "70b");
        let Some(text) = export("torchtitan", &d) else {
            return Ok(());
        };
        let file = Scratch::new("job.toml", &text);
        same_grade(&d, &file, &[])?;
    }

    #[test]
    fn deepspeed_s_json_grades_as_its_design_with_the_layout_flags(
        d in design(&["megatron-te"], &["none", "selective", "full"], &[1], &["bf16"]),
    ) {
        prop_assume!(d.pp == 1 || d.zero <= 1);
        let Some(text) = export("deepspeed", &d) else {
            return Ok(());
        };
        let file = Scratch::new("ds_config.json", &text);
        let g = d.micro * d.dp * d.accumulation;
        let mut alongside = d.model.clone();
        alongside.extend(strings(&[
            "--tp", &d.tp.to_string(),
            "--pp", &d.pp.to_string(),
            "--tokens", &(d.steps * g * d.seq).to_string(),
            "--seq-len", &d.seq.to_string(),
            "--recompute", d.recompute,
            "--sequence-parallel", if d.sp { "on" } else { "off" },
            "--schedule", d.schedule,
        ]));
        same_grade(&d, &file, &alongside)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, max_global_rejects: 1_000_000, ..ProptestConfig::default() })]

    /// A plan file is a contract: `export --plan` writes the run the plan is (the same bytes
    /// as `export` of the flags that made it, or the same one-line refusal), and for a plan
    /// graded in detail `check --from` on what it wrote grades the plan again to the same JSON,
    /// for every launcher that writes it.
    #[test]
    fn a_plan_file_round_trips_through_every_launcher_that_writes_it(d in any_plan()) {
        let mut check = strings(&["check", "--json", "--quiet"]);
        check.extend(d.flags());
        // A design check refuses is no plan.
        let Ok(json) = cli(&check) else {
            return Ok(());
        };
        let plan = Scratch::new("plan.json", &json);
        for (format, version) in [
            ("megatron", "0.2.2"),
            ("torchtitan", "0.2.2"),
            ("torchtitan", "0.3"),
            ("deepspeed", "0.2.2"),
        ] {
            let mut from_flags = strings(&[
                "export", "--format", format, "--torchtitan-version", version, "--quiet",
            ]);
            from_flags.extend(d.flags());
            let mut from_plan = strings(&[
                "export", "--format", format, "--torchtitan-version", version, "--quiet",
                "--plan", &plan.path(), "--seq-len", &d.seq.to_string(),
            ]);
            from_plan.extend(config_of(&d));
            let written = cli(&from_plan);
            prop_assert_eq!(&cli(&from_flags), &written, "{} {:?}", format, d);
            let text = match written {
                Ok(text) => text,
                Err(e) => {
                    prop_assert!(one_report(&e), "{}", e);
                    continue;
                }
            };
            // A plate plan names no step; torchtitan's file runs torchtitan's stack, whatever
            // the plan's (it says so in a comment).
            let titan = matches!(d.stack, "torchtitan" | "torchtitan-compile");
            if d.plate || (format == "torchtitan" && !titan) {
                continue;
            }
            // 0.3's job is a command line, read as a script.
            let extension = if version == "0.3" { "sh" } else { format };
            let file = Scratch::new(&format!("launch.{extension}"), &text);
            let alongside = match format {
                "megatron" if d.stack != "megatron-te" => {
                    let mut a = strings(&["--stack", d.stack]);
                    a.extend(config_of(&d));
                    a
                }
                "megatron" => config_of(&d),
                "torchtitan" if d.model[1] == "8b" || d.model[1] == "70b" => Vec::new(),
                "torchtitan" => d.model.clone(),
                _ => deepspeed_alongside(&plan, &d),
            };
            same_grade(&d, &file, &alongside)?;
        }
    }
}

/// The README's flow, `search --json` then `export --plan`: each plan of the search is
/// written with its own CP and replicas (they were dropped: a 2,048-GPU plan became a
/// 1,024-GPU launcher without CP), and check --from grades what was written as the search
/// graded the plan.
#[test]
fn a_search_s_plans_export_as_the_search_graded_them() {
    let doc = cli(&strings(&[
        "search",
        "--models",
        "70b",
        "--gpus",
        "2048",
        "--memory",
        "detailed",
        "--cp",
        "2",
        "--replicate",
        "2",
        "--top",
        "2",
        "--json",
        "--quiet",
    ]))
    .unwrap();
    let plans = Scratch::new("plans.json", &doc);
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    for (i, plan) in doc["plans"].as_array().unwrap().iter().enumerate() {
        let l = &plan["layout"];
        assert_eq!(
            (l["cp"].as_u64(), l["replicate"].as_u64()),
            (Some(2), Some(2))
        );
        let text = cli(&strings(&[
            "export",
            "--format",
            "megatron",
            "--quiet",
            "--plan",
            &plans.path(),
            "--index",
            &(i + 1).to_string(),
        ]))
        .unwrap();
        assert!(text.contains("# Launch on 2048 GPUs"), "{text}");
        let file = Scratch::new("m.sh", &text);
        let json = cli(&strings(&[
            "check",
            "--json",
            "--quiet",
            "--from",
            &file.path(),
        ]))
        .unwrap();
        let graded: serde_json::Value = serde_json::from_str(&json).unwrap();
        for field in ["layout", "step", "memory_model", "memory_gb"] {
            assert_eq!(graded[field], plan[field], "{field}");
        }
    }
}

/// A mixture of experts' plan keeps its expert grid: Mixtral at EP 8 (it was written and graded
/// again at EP 1, 162.6 GB a GPU for 38.3), and Megatron-LM's file reads back to the same grade.
#[test]
fn a_mixtral_plan_exports_and_reads_back_at_its_expert_parallelism() {
    let design = strings(&[
        "--model-config",
        MIXTRAL,
        "--tokens",
        "1e12",
        "--gpus",
        "256",
        "--tp",
        "2",
        "--pp",
        "4",
        "--ep",
        "8",
        "--zero",
        "1",
        "--memory",
        "detailed",
        "--ep-dispatcher",
        "deepep",
    ]);
    let mut check = strings(&["check", "--json", "--quiet"]);
    check.extend(design);
    let json = cli(&check).unwrap();
    let plan = Scratch::new("mixtral.json", &json);
    let text = cli(&strings(&[
        "export",
        "--format",
        "megatron",
        "--quiet",
        "--plan",
        &plan.path(),
        "--model-config",
        MIXTRAL,
    ]))
    .unwrap();
    for want in [
        "--expert-model-parallel-size 8",
        "--moe-token-dispatcher-type flex",
        "--moe-enable-deepep",
    ] {
        assert!(text.lines().any(|l| l.trim() == want), "{want}:\n{text}");
    }
    let file = Scratch::new("mixtral.sh", &text);
    let read = cli(&strings(&[
        "check",
        "--json",
        "--quiet",
        "--from",
        &file.path(),
        "--model-config",
        MIXTRAL,
    ]))
    .unwrap();
    let (planned, read): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&json).unwrap(),
        serde_json::from_str(&read).unwrap(),
    );
    assert_eq!(planned["layout"]["ep"], 8);
    for field in ["layout", "step", "memory_model", "memory_gb"] {
        assert_eq!(read[field], planned[field], "{field}");
    }
}

/// `check --json` of a preset `model` on 64 GB200s at (TP, PP), ZeRO 1, under the detailed
/// memory model, with `extra` flags.
fn gb200_check(model: &str, (tp, pp): (u64, u64), extra: &[&str]) -> Vec<String> {
    let (tp, pp) = (tp.to_string(), pp.to_string());
    let mut args = strings(&[
        "check", "--json", "--quiet", "--model", model, "--tokens", "1e12", "--gpu", "gb200",
        "--gpus", "64", "--tp", &tp, "--pp", &pp, "--zero", "1", "--memory", "detailed",
    ]);
    args.extend(strings(extra));
    args
}

#[test]
fn a_blackwell_fp8_plan_file_is_graded_again_as_on_blackwell() {
    // A per-tensor FP8 weight is one copy on a GB200 (no transpose). A plan file does not
    // carry that (it is the GPU's): reading the file back with its brief grades the weights as
    // `check` did, not with Hopper's transposes.
    let check = gb200_check(
        "70b",
        (4, 2),
        &["--precision", "fp8", "--recompute", "selective"],
    );
    let json = cli(&check).unwrap();
    let file =
        trainplan::input::plan_file::PlanFile::parse(&json, std::path::Path::new("p"), 1).unwrap();
    // The brief `check` had: the GB200 preset's, on 64 GPUs.
    let gpu = trainplan::brief::gpu::Gpu::named("gb200").unwrap();
    let mut brief = trainplan::brief::BriefPatch::gpu(&gpu).apply(Default::default());
    brief.gpus = 64;
    let (_, plan) = file.launch(file.shape(None).unwrap(), brief).unwrap();
    let planned: serde_json::Value = serde_json::from_str(&json).unwrap();
    let total = planned["memory_gb"]["total"].as_f64().unwrap();
    assert!(
        (plan.memory_gb.total - total).abs() < 1e-9,
        "{} {total}",
        plan.memory_gb.total
    );
    // And that is a copy a parameter less than an H100's plan of the same layout keeps.
    let mut hopper = check.clone();
    let at = hopper.iter().position(|a| a == "gb200").unwrap();
    hopper[at] = "h100-sxm".into();
    let h100: serde_json::Value = serde_json::from_str(&cli(&hopper).unwrap()).unwrap();
    let weights = |v: &serde_json::Value| v["memory_gb"]["weights"].as_f64().unwrap();
    assert!(
        weights(&h100) > weights(&planned) + 1.0,
        "{} {}",
        weights(&h100),
        weights(&planned)
    );
}

#[test]
fn transformer_engine_s_loss_is_written_read_back_and_keeps_half_the_logits() {
    // Llama 3 8B on one GB200 rack's 64 GPUs at TP 1: the last stage's logits are
    // s·b·V = 8,192 × 1 × 128,256 values, 4 bytes each in FP32 and 2 in place, beside the
    // head's two BF16 inputs of s·b·h (4 · 8,192 · 4,096 bytes).
    let design = |loss: &str| {
        gb200_check(
            "8b",
            (1, 1),
            &["--recompute", "none", "--loss-precision", loss],
        )
    };
    let grade = |loss: &str| -> serde_json::Value {
        serde_json::from_str(&cli(&design(loss)).unwrap()).unwrap()
    };
    let (fp32, in_place) = (grade("fp32"), grade("in-place"));
    let logits = |v: &serde_json::Value| v["memory_gb"]["logits"].as_f64().unwrap();
    let (values, inputs) = (8_192.0 * 128_256.0 / 1e9, 4.0 * 8_192.0 * 4_096.0 / 1e9);
    let fp32_extra = logits(&fp32) - 4.0 * values - inputs;
    assert!(fp32_extra.abs() < 1e-9, "{}", logits(&fp32));
    let in_place_extra = logits(&in_place) - 2.0 * values - inputs;
    assert!(in_place_extra.abs() < 1e-9, "{}", logits(&in_place));
    // Exported as Megatron-core's TE cross-entropy, and read back as the same plan.
    let plan = Scratch::new("loss-in-place.json", &cli(&design("in-place")).unwrap());
    let text = cli(&strings(&[
        "export",
        "--format",
        "megatron",
        "--quiet",
        "--plan",
        &plan.path(),
    ]))
    .unwrap();
    for want in [
        "--cross-entropy-loss-fusion",
        "--cross-entropy-fusion-impl te",
    ] {
        assert!(text.lines().any(|l| l.trim() == want), "{want}:\n{text}");
    }
    let file = Scratch::new("loss-in-place.sh", &text);
    let read: serde_json::Value = serde_json::from_str(
        &cli(&strings(&[
            "check",
            "--json",
            "--quiet",
            "--from",
            &file.path(),
        ]))
        .unwrap(),
    )
    .unwrap();
    for field in ["layout", "step", "memory_model", "memory_gb"] {
        assert_eq!(read[field], in_place[field], "{field}");
    }
    // Megatron-core has no BF16 log-probabilities: refused by name.
    let bf16 = Scratch::new("loss-bf16.json", &cli(&design("bf16")).unwrap());
    let e = cli(&strings(&[
        "export",
        "--format",
        "megatron",
        "--quiet",
        "--plan",
        &bf16.path(),
    ]))
    .unwrap_err();
    assert!(e.contains("--loss-precision bf16"), "{e}");
}

/// Latent attention is graded and exported: DeepSeek-V3's config as it was pretrained (4K
/// tokens, before YaRN extended it) is planned on its report's layout, and Megatron-LM's file
/// for it (its biased, grouped router as Megatron-core's expert bias under sigmoid scores and
/// group-limited routing) is read back into the same plan.
#[test]
fn a_latent_attention_plan_is_graded_exported_and_read_back() {
    let config = std::fs::read_to_string(format!(
        "{}/tests/fixtures/hf/deepseek-v3/config.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&config).unwrap();
    value.as_object_mut().unwrap().remove("rope_scaling");
    let pretrained = Scratch::new("config.json", &value.to_string());
    let json = cli(&strings(&[
        "check",
        "--json",
        "--quiet",
        "--model-config",
        &pretrained.path(),
        "--tokens",
        "1e12",
        "--gpus",
        "2048",
        "--tp",
        "1",
        "--pp",
        "16",
        "--ep",
        "64",
        "--zero",
        "1",
        "--seq-len",
        "4096",
        "--recompute",
        "full",
        "--memory",
        "detailed",
    ]))
    .unwrap();
    let planned: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(planned["layout"]["ep"], 64);
    let plan = Scratch::new("v3.json", &json);
    let file = cli(&strings(&[
        "export",
        "--format",
        "megatron",
        "--quiet",
        "--plan",
        &plan.path(),
        "--model-config",
        &pretrained.path(),
    ]))
    .unwrap();
    assert!(
        file.contains("--moe-router-score-function sigmoid")
            && file.contains("--moe-router-enable-expert-bias"),
        "{file}"
    );
    let script = Scratch::new("v3.sh", &file);
    let read: serde_json::Value = serde_json::from_str(
        &cli(&strings(&[
            "check",
            "--json",
            "--quiet",
            "--from",
            &script.path(),
            "--model-config",
            &pretrained.path(),
            "--memory",
            "detailed",
        ]))
        .unwrap(),
    )
    .unwrap();
    // The file runs whole steps: its tokens, and so its days, round up.
    for key in ["layout", "step", "memory_gb", "step_seconds"] {
        assert_eq!(read[key], planned[key], "{key}");
    }
}

/// The README's example, exported and read back through the binary.
#[test]
fn check_from_an_exported_megatron_file_grades_it() {
    let flags = [
        "--model", "70b", "--tokens", "1e12", "--gpus", "2048", "--tp", "8", "--pp", "8", "--zero",
        "1",
    ];
    let out = trainplan()
        .args(["export", "--format", "megatron", "--quiet"])
        .args(flags)
        .output()
        .unwrap();
    let file = Scratch::new("m.sh", std::str::from_utf8(&out.stdout).unwrap());
    let from = trainplan()
        .args(["check", "--from", &file.path()])
        .output()
        .unwrap();
    let text = String::from_utf8(from.stdout).unwrap();
    assert!(text.contains("TP 8 × PP 8 × DP 32, ZeRO 1"), "{text}");
    assert!(
        text.contains("recompute full, sequence parallel on, TP overlap on, 1f1b"),
        "{text}"
    );
    // The loss check fails at 1 T tokens: exit 1, as check's.
    assert_eq!(from.status.code(), Some(1));
}

#[test]
fn what_cannot_be_mapped_is_named_with_its_line_all_at_once() {
    let base = "A=(\n --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2\n --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1\n --global-batch-size 8 --train-iters 10 --vocab-size 1024 --use-rope-scaling\n";
    for (extra, named) in [
        (
            " --moe-expert-capacity-factor 1.25\n)",
            "--moe-expert-capacity-factor",
        ),
        (" --fp16\n)", "--fp16"),
        (
            " --recompute-granularity full\n)",
            "--recompute-granularity",
        ),
    ] {
        let file = Scratch::new("args.sh", &format!("{base}{extra}"));
        let out = trainplan()
            .args([
                "check",
                "--gpus",
                "8",
                "--stack",
                "megatron-te",
                "--from",
                &file.path(),
            ])
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        let report = err.trim().trim_start_matches("error: ");
        assert!(err.contains(named) && one_report(report), "{err}");
        // One problem is one line, with the line it is on.
        assert!(report.lines().count() == 1, "{err}");
    }
    // Every problem at once, each with its line; --lenient grades without them, said.
    let file = Scratch::new(
        "args.sh",
        &format!("{base} --reset-attention-mask\n --moe-expert-capacity-factor 1.25\n)"),
    );
    let args = [
        "check",
        "--gpus",
        "8",
        "--stack",
        "megatron-te",
        "--from",
        &file.path(),
    ];
    let out = trainplan().args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 5: invalid --reset-attention-mask")
            && err.contains("line 6: invalid --moe-expert-capacity-factor"),
        "{err}"
    );
    // Several come with what was mapped and what was read and not used.
    assert!(
        err.contains("mapped to the design (15): --num-layers 2,")
            && err.contains("read and not used (they do not change the plan): none")
            && err.contains("--lenient grades the file without"),
        "{err}"
    );
    let out = trainplan().args(args).arg("--lenient").output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_ne!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "graded without what the design cannot say (--lenient): line 5: invalid --reset-attention-mask"
        ),
        "{err}"
    );
    // Data and optimizer options are read and listed as unused, on stderr.
    let file = Scratch::new(
        "args.sh",
        &format!("{base} --data-path /data/x --lr 3e-4 --save /ckpt\n)"),
    );
    let out = trainplan()
        .args([
            "check",
            "--gpus",
            "8",
            "--stack",
            "megatron-te",
            "--from",
            &file.path(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("read and not used") && err.contains("--data-path /data/x"),
        "{err}"
    );
    // …and in check's JSON, as from.unused.
    let json = cli(&strings(&[
        "check",
        "--json",
        "--gpus",
        "8",
        "--stack",
        "megatron-te",
        "--from",
        &file.path(),
    ]))
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["from"]["format"], "megatron");
    assert_eq!(
        json["from"]["unused"],
        serde_json::json!(["--data-path /data/x", "--lr 3e-4", "--save /ckpt"])
    );
    // A GPU count the file does not give is asked for, not guessed.
    let out = trainplan()
        .args(["check", "--stack", "megatron-te", "--from", &file.path()])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--gpus"), "{err}");
    // Without --stack, a file whose kernel and overlap options are no stack's is graded under
    // the nearest, named with what differs.
    let out = trainplan()
        .args(["check", "--gpus", "8", "--from", &file.path()])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("the file's kernel and overlap options (none) are no stack's; graded as the nearest, megatron-deepspeed, which differs in: the file's none and the stack's --attention-backend unfused --cross-entropy-loss-fusion"),
        "{err}"
    );
}

#[test]
fn a_flag_the_file_sets_must_agree_with_it() {
    let out = cli(&strings(&[
        "export",
        "--format",
        "torchtitan",
        "--quiet",
        "--model",
        "8b",
        "--tokens",
        "1e12",
        "--gpus",
        "64",
        "--zero",
        "3",
        "--stack",
        "torchtitan",
        "--memory",
        "detailed",
    ]))
    .unwrap();
    let file = Scratch::new("job.toml", &out);
    let e = cli(&strings(&["check", "--from", &file.path(), "--tp", "2"])).unwrap_err();
    assert!(
        e.contains("--tp = 2") && e.contains("what the --from file says"),
        "{e}"
    );
    // The same value is accepted, and the brief's flags are used as usual.
    assert!(cli(&strings(&[
        "check",
        "--from",
        &file.path(),
        "--tp",
        "1",
        "--max-days",
        "90"
    ]))
    .is_ok());
    // DeepSpeed's JSON needs the model alongside.
    let out = cli(&strings(&[
        "export",
        "--format",
        "deepspeed",
        "--quiet",
        "--model",
        "8b",
        "--tokens",
        "1e12",
        "--gpus",
        "64",
        "--zero",
        "2",
    ]))
    .unwrap();
    let file = Scratch::new("ds.json", &out);
    let e = cli(&strings(&["check", "--from", &file.path()])).unwrap_err();
    assert!(e.contains("--model-config"), "{e}");
}

#[test]
fn search_from_searches_the_file_s_model_on_its_gpus() {
    let out = cli(&strings(&[
        "export", "--format", "megatron", "--quiet", "--model", "8b", "--tokens", "1e12", "--gpus",
        "64", "--tp", "2", "--zero", "1",
    ]))
    .unwrap();
    let file = Scratch::new("m.sh", &out);
    let text = cli(&strings(&[
        "search",
        "--from",
        &file.path(),
        "--json",
        "--tokens-max",
        "2e11",
        "--tokens-step",
        "1e11",
    ]))
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["brief"]["gpus"], 64, "{text}");
    let shapes = json["shapes"].as_array().or(json["verdicts"].as_array());
    assert!(
        text.contains("llama3-8b") && !text.contains("llama3-70b"),
        "{shapes:?}"
    );
}

#[test]
fn a_torchtitan_job_that_shards_over_the_rest_takes_the_world_from_gpus() {
    // torchtitan's example jobs leave the shard degree at -1 (every GPU the other degrees
    // leave) and the global batch at -1 (local batch × DP): with --gpus the file is the same
    // design as the one that states them.
    let stated = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\nglobal_batch_size = 64\nseq_len = 8192\nsteps = 1000\n[parallelism]\ndata_parallel_shard_degree = 32\ntensor_parallel_degree = 2\n[activation_checkpoint]\nmode = \"full\"\n";
    let rest = stated
        .replace("global_batch_size = 64", "global_batch_size = -1")
        .replace(
            "data_parallel_shard_degree = 32",
            "data_parallel_shard_degree = -1",
        );
    let (stated, rest) = (
        Scratch::new("stated.toml", stated),
        Scratch::new("rest.toml", &rest),
    );
    let grade = |file: &Scratch, gpus: &[&str]| {
        let mut args = strings(&["check", "--from", &file.path(), "--json"]);
        args.extend(strings(gpus));
        without_from(cli(&args))
    };
    let want = grade(&stated, &[]).unwrap();
    assert_eq!(grade(&rest, &["--gpus", "64"]).unwrap(), want);
    let e = grade(&rest, &[]).unwrap_err();
    assert!(
        e.contains("data_parallel_shard_degree = -1") && e.contains("--gpus"),
        "{e}"
    );
}

/// An error as the CLI prints it: one line, or every problem of a file at once under a
/// heading that counts its lines.
fn one_report(e: &str) -> bool {
    let mut lines = e.lines();
    let Some(head) = lines.next() else {
        return false;
    };
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() {
        return true;
    }
    head == format!("{} lines, every problem at once:", rest.len())
        && rest
            .iter()
            .all(|l| l.starts_with("  ") && !l[2..].starts_with(' '))
}

/// The fuzz target's seeds, and every prefix of them, give a design or one line of error,
/// never a panic (`fuzz/fuzz_targets/launcher_from.rs` runs the same on random input).
#[test]
fn every_prefix_of_the_seed_files_is_read_or_refused_on_one_line() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/launcher_from");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            trainplan::input::from::parse(&text, &path).is_ok(),
            "{path:?}"
        );
        for end in (0..text.len())
            .filter(|&i| text.is_char_boundary(i))
            .step_by(3)
        {
            for name in ["x.sh", "x.toml", "x.json"] {
                if let Err(e) =
                    trainplan::input::from::parse(&text[..end], std::path::Path::new(name))
                {
                    assert!(one_report(&e.to_string()), "{e}");
                }
            }
        }
    }
}

/// A model from a Hugging Face config (Qwen 2.5's q/k/v biases, its RoPE base, no scaling):
/// the Megatron-LM file cannot state it to the flags alone, so it is refused by name, and
/// with the config alongside it grades as the config's flags.
#[test]
fn a_config_s_model_round_trips_with_the_config_alongside() {
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/corpus/hf_config/qwen2.5-7b.json"
    );
    let design = strings(&[
        "--model-config",
        config,
        "--gpus",
        "256",
        "--tp",
        "4",
        "--pp",
        "2",
        "--zero",
        "1",
    ]);
    let mut args = strings(&[
        "export", "--format", "megatron", "--quiet", "--tokens", "1e12",
    ]);
    args.extend(design.clone());
    let text = cli(&args).unwrap();
    let file = Scratch::new("qwen.sh", &text);
    // The file states the whole model (its biases too), which it grades without the config:
    // the same plan as with it.
    let alone = without_from(cli(&strings(&[
        "check",
        "--json",
        "--quiet",
        "--from",
        &file.path(),
    ])));
    let from = without_from(cli(&strings(&[
        "check",
        "--json",
        "--quiet",
        "--from",
        &file.path(),
        "--model-config",
        config,
    ])));
    // 59,605 steps of 2,048 × 8,192 tokens.
    let mut flags = strings(&[
        "check",
        "--json",
        "--quiet",
        "--memory",
        "detailed",
        "--tokens",
        "1000005959680",
    ]);
    flags.extend(design);
    assert_eq!(from, cli(&flags));
    let (alone, from) = (alone.unwrap(), from.unwrap());
    assert!(from.contains("\"tp\": 4"));
    // Alike but for the model's name (the config's, or the dimensions').
    let unnamed = |text: &str| {
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        v["model"].take();
        v["fixes"].take();
        v
    };
    assert_eq!(unnamed(&alone), unnamed(&from));
}

/// Words a launcher file is made of, and some it should not be.
const WORDS: &[&str] = &[
    "--num-layers",
    "--hidden-size",
    "--ffn-hidden-size",
    "--num-attention-heads",
    "--group-query-attention",
    "--num-query-groups",
    "--kv-channels",
    "--vocab-size",
    "--swiglu",
    "--bf16",
    "--fp8-format",
    "--fp8-recipe",
    "--seq-length",
    "--micro-batch-size",
    "--global-batch-size",
    "--train-iters",
    "--train-samples",
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
    "--pipeline-model-parallel-layout",
    "--num-virtual-stages-per-pipeline-rank",
    "--num-layers-per-virtual-pipeline-stage",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--window-size",
    "--rotary-base",
    "--norm-epsilon",
    "--disable-bias-linear",
    "--make-vocab-size-divisible-by",
    "torchrun",
    "--nproc_per_node",
    "--nnodes",
    "x.py",
    "0",
    "1",
    "2",
    "7",
    "-1",
    "18446744073709551615",
    "99999999999999999999",
    "1e-05",
    "nan",
    "full",
    "block",
    "uniform",
    "selective",
    "hybrid",
    "delayed",
    "4095,0",
    ",",
    "Et|(t|)*3,tL",
    "(t|)*99999999999,",
    "\"",
    "'",
    "\\",
    "\n",
    "#",
    "=",
    "(",
    ")",
    "[training]",
    "{",
    "}",
    "steps = 1",
    "seq_len = 0",
    "[parallelism]",
    "pipeline_parallel_degree = 4",
    "\"train_batch_size\": 8,",
    // The shell the Megatron-LM reader follows or refuses, and the experts' options.
    "ARGS=(",
    "ARGS+=(",
    "X=$Y",
    "$X",
    "\"$X\"",
    "${X:-2}",
    "${A[@]}",
    "$(",
    "`",
    "<<",
    "&&",
    "||",
    ";",
    "|",
    "if",
    "fi",
    "f()",
    "{",
    "--nnodes=$N",
    "--sequence-parallel",
    "false",
    "--num-experts",
    "--moe-layer-freq",
    "[1,0]",
    "--moe-grouped-gemm",
    "--recompute-modules",
    "moe_act",
    "--expert-model-parallel-size",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any text made of these words gives a design or one line of error, never a panic.
    #[test]
    fn any_file_is_read_or_refused_on_one_line(
        words in prop::collection::vec(prop::sample::select(WORDS.to_vec()), 0..40),
        joins in prop::collection::vec(prop::sample::select(vec![" ", "\n", "", "="]), 40),
    ) {
        let mut text = String::new();
        for (w, j) in words.iter().zip(&joins) {
            text.push_str(w);
            text.push_str(j);
        }
        for name in ["x.sh", "x.toml", "x.json"] {
            match trainplan::input::from::parse(&text, std::path::Path::new(name)) {
                Ok(mut f) => {
                    let _ = f.resolve_interleaving(u64::MAX);
                }
                Err(e) => prop_assert!(one_report(&e.to_string()), "{e}"),
            }
        }
    }
}

#[test]
fn a_script_without_rope_scaling_is_planned_unscaled_and_exported_so() {
    // Megatron-LM runs RoPE unscaled without --use-rope-scaling (NVIDIA's Llama 3 8B examples
    // do): the model the flags state is that one, graded, and its export says no scaling.
    let text = "A=(\n --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2\n --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1\n --global-batch-size 8 --train-iters 10 --vocab-size 1024 --rotary-base 1000000\n --untie-embeddings-and-output-weights\n)\ntorchrun pretrain_gpt.py \"${A[@]}\"\n";
    let file = Scratch::new("unscaled.sh", text);
    let path = file.path();
    let check = |extra: &[&str]| {
        let base = [
            "check",
            "--gpus",
            "8",
            "--stack",
            "megatron-te",
            "--from",
            &path,
        ];
        trainplan().args(base).args(extra).output().unwrap()
    };
    let plan: serde_json::Value = serde_json::from_slice(&check(&["--json"]).stdout).unwrap();
    // An architecture other than Llama 3's is written out, its RoPE scaling only when it has one.
    assert_eq!(plan["architecture"]["rope_theta"], 1_000_000.0);
    assert!(plan["architecture"].get("rope_scaling").is_none(), "{plan}");
    let out = check(&["--format", "megatron", "-q"]);
    let export = String::from_utf8(out.stdout).unwrap();
    // Graded (the tiny model misses the loss: exit 1), not refused.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!export.contains("--use-rope-scaling"), "{export}");
    assert!(export.contains("--rotary-base 1000000"), "{export}");
}
