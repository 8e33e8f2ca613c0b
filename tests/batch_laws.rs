//! Batch-size laws (`--batch-law`) from the command line: the batch each shape aims at and
//! why, the answer's batch against the law's, where the batch binds a plan, and that the
//! default (a fixed 16 Mi target) leaves every answer as it was.

mod common;

use common::{json, trainplan};

/// The brief: 131,072 H100s for at most 60 days, under the detailed models.
fn wide(law: &str) -> Vec<&str> {
    vec![
        "search",
        "--gpus",
        "131072",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--max-days",
        "60",
        "--batch-law",
        law,
    ]
}

#[test]
fn deepseek_sets_each_shapes_batch_and_the_answer_uses_the_gpus_better_than_a_fixed_16_mi() {
    let mut args = wide("deepseek");
    args.push("--json");
    let doc = json(&args);
    let shapes = doc["shapes"].as_array().unwrap();
    let of = |model: &str| {
        shapes
            .iter()
            .find(|s| s["model"] == model)
            .map(|s| s["batch_law"].clone())
            .unwrap()
    };
    // 405B reaches 1.955 on 817.7 B tokens: C = M·D = 2.14e24, B = 0.2920·C^0.3271 = 26.5 M
    // tokens (the law's worked number for the shape, src/plan/batch.rs).
    let b = of("llama3-405b");
    assert_eq!(b["law"], "deepseek");
    let optimal = b["optimal_batch_tokens"].as_f64().unwrap();
    assert!((optimal / 2.652e7 - 1.0).abs() < 2e-3, "{optimal}");
    assert!(b["extrapolation"].as_str().unwrap().contains("above 2e19"));
    // Every listed plan's batch is within the tolerance of its shape's law.
    for plan in doc["plans"].as_array().unwrap() {
        let target = of(plan["model"].as_str().unwrap())["target_tokens"]
            .as_f64()
            .unwrap();
        let g = plan["step"]["global_batch_tokens"].as_f64().unwrap();
        assert!((g / target - 1.0).abs() <= 0.25, "{g} against {target}");
    }
    // The law's larger batch gives the pipeline more micro-batches than 16 Mi did: a higher
    // MFU for the first plan.
    let mut fixed = wide("fixed");
    fixed.push("--json");
    let fixed = json(&fixed);
    let mfu = |d: &serde_json::Value| d["plans"][0]["mfu"].as_f64().unwrap();
    assert!(mfu(&doc) > mfu(&fixed), "{} vs {}", mfu(&doc), mfu(&fixed));
    // Under the fixed target no shape carries a law.
    assert!(fixed["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s.get("batch_law").is_none()));
}

#[test]
fn the_report_says_what_batch_it_used_and_where_the_batch_binds() {
    let out = trainplan().args(wide("step")).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("batch law step: each shape's layouts aim at its optimum for the run that reaches loss 1.955, within 25 %"),
        "{text}"
    );
    // Step Law at 405B's 817.7 B tokens: 0.58·D^0.571 = 3.68 M tokens, 448 sequences.
    assert!(
        text.contains("llama3-405b: 3.677 M tokens a step (448 sequences)"),
        "{text}"
    );
    assert!(
        text.contains("step extrapolates for llama3-70b, llama3-405b"),
        "{text}"
    );
    // 131,072 GPUs at the law's small batch leave each replica one micro-batch: the
    // pipeline, not the GPUs, binds the answer, and the report says so.
    assert!(text.contains("the answer's batch: 4.194 M tokens (+14.1 % from the law's 3.677 M), 1 micro-batch of 1 × 8,192 on each of 512 replicas"), "{text}");
    assert!(
        text.contains("the batch binds the pipeline: 1 micro-batch a replica over 16 stages"),
        "{text}"
    );
}

#[test]
fn a_cluster_wider_than_the_laws_batch_is_batch_bound() {
    // Llama 3 8B on 1,048,576 GPUs for a loss it reaches: Step Law's batch for its 515.8 B
    // tokens is 2.83 M tokens, at most 431 replicas of a sequence, so each would need 2,433
    // GPUs, more than any layout of its 32 layers has: no plan passes (exit 1), and the
    // report says why.
    let out = trainplan()
        .args([
            "search",
            "--models",
            "llama3-8b",
            "--gpus",
            "1048576",
            "--loss-target",
            "2.1",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--batch-law",
            "step",
        ])
        .assert()
        .failure();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("llama3-8b is batch-bound: the law's batch keeps at most 431 replicas of one sequence busy, so 1,048,576 GPUs need TP × CP × PP of at least 2,433 a replica"),
        "{text}"
    );
}

/// `check` of Llama 3 70B at TP 8 × PP 4 on `gpus` under DeepSeek's batch law.
fn check_70b(gpus: &str) -> Vec<&str> {
    vec![
        "check",
        "--model",
        "70b",
        "--tokens",
        "3.4e12",
        "--gpus",
        gpus,
        "--tp",
        "8",
        "--pp",
        "4",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--batch-law",
        "deepseek",
        "--max-days",
        "365",
    ]
}

#[test]
fn check_states_the_laws_batch_beside_the_plans_and_a_refusal_names_the_law() {
    let mut args = check_70b("1024");
    args.push("--json");
    let doc = json(&args);
    let b = &doc["batch_law"];
    let target = b["target_tokens"].as_f64().unwrap();
    let g = doc["step"]["global_batch_tokens"].as_f64().unwrap();
    assert!((g / target - 1.0).abs() <= 0.25);
    // 65,536 GPUs at TP 8 × PP 4 make rounds of 2,048 sequences (16.8 M tokens), 30 % below
    // the law's 24.2 M for 70B: refused, naming the law.
    let out = trainplan().args(check_70b("65536")).assert().failure();
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("of the deepseek batch law"), "{err}");
    assert!(err.contains("(--batch-law, --batch-tolerance)"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn the_megatron_export_writes_the_laws_batch_and_learning_rate() {
    let mut args = check_70b("1024");
    args[0] = "export";
    args.extend(["--format", "megatron", "-q"]);
    let out = trainplan().args(&args).assert().success();
    let script = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let mut check = check_70b("1024");
    check.push("--json");
    let doc = json(&check);
    let lr = doc["batch_law"]["learning_rate"].as_f64().unwrap();
    let sequences = doc["step"]["global_batch_tokens"].as_u64().unwrap() / 8192;
    assert!(script.contains(&format!("--lr {lr:.3e}")), "{script}");
    assert!(
        script.contains(&format!("--global-batch-size {sequences}")),
        "{script}"
    );
    // Without a law no learning rate is written.
    let fixed: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "--batch-law" && *a != "deepseek")
        .collect();
    let out = trainplan().args(&fixed).assert().success();
    assert!(!String::from_utf8(out.get_output().stdout.clone())
        .unwrap()
        .contains("--lr "));
}

#[test]
fn the_torchtitan_and_deepspeed_exports_write_the_laws_learning_rate_and_its_adamw() {
    // torchtitan's [optimizer] and DeepSpeed's optimizer section carry the law's learning
    // rate with DeepSeek LLM's AdamW (β 0.9, 0.95, weight decay 0.1, §2.3); Megatron-LM's
    // flags the same, where its defaults (β2 0.999, weight decay 0.01) differ.
    let mut check = check_70b("1024");
    check.extend(["--zero", "2", "--json"]);
    let lr = json(&check)["batch_law"]["learning_rate"].as_f64().unwrap();
    let export = |format: &str, extra: &[&str]| {
        let mut args = check_70b("1024");
        args[0] = "export";
        args.extend(["--zero", "2", "--format", format, "-q"]);
        args.extend(extra);
        let out = trainplan().args(&args).assert().success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let toml = export(
        "torchtitan",
        &["--stack", "torchtitan", "--recompute", "full"],
    );
    assert!(
        toml.contains(&format!(
            "[optimizer]\nname = \"AdamW\"\nlr = {lr:.3e}\nbeta1 = 0.9\nbeta2 = 0.95\nweight_decay = 0.1\n"
        )),
        "{toml}"
    );
    let mut zero1 = check_70b("1024");
    zero1[0] = "export";
    zero1.extend(["--zero", "1", "--format", "deepspeed", "-q"]);
    let out = trainplan().args(&zero1).assert().success();
    let ds: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let params = &ds["optimizer"]["params"];
    assert_eq!(ds["optimizer"]["type"], "AdamW");
    let written = params["lr"].as_f64().unwrap();
    assert!((written / lr - 1.0).abs() < 5e-4, "{written} {lr}");
    assert_eq!(params["betas"], serde_json::json!([0.9, 0.95]));
    assert_eq!(params["weight_decay"], 0.1);
    let mut mega = check_70b("1024");
    mega[0] = "export";
    mega.extend(["--format", "megatron", "-q"]);
    let out = trainplan().args(&mega).assert().success();
    let script = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for flag in [
        "--adam-beta1 0.9",
        "--adam-beta2 0.95",
        "--weight-decay 0.1",
    ] {
        assert!(script.contains(flag), "{flag}: {script}");
    }
    // Step Law's sources name no AdamW settings: the learning rate alone.
    let step: Vec<&str> = mega
        .iter()
        .map(|a| if *a == "deepseek" { "step" } else { a })
        .collect();
    let out = trainplan().args(&step).assert().success();
    let script = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(script.contains("--lr "), "{script}");
    assert!(!script.contains("--adam-beta2"), "{script}");
    // No law, no optimizer section.
    let fixed: Vec<&str> = check_70b("1024")
        .into_iter()
        .filter(|a| *a != "--batch-law" && *a != "deepseek")
        .collect();
    let mut args = fixed.clone();
    args[0] = "export";
    args.extend(["--zero", "1", "--format", "deepspeed", "-q"]);
    let out = trainplan().args(&args).assert().success();
    let ds: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(ds.get("optimizer").is_none());
}

/// Llama 3 405B on 15 T tokens on 16,384 GPUs at TP 8 × PP 16, ZeRO 1, counting the critical
/// batch, at a global batch of `batch` tokens.
fn critical(batch: &str) -> Vec<&str> {
    vec![
        "check",
        "--model",
        "405b",
        "--tokens",
        "15e12",
        "--gpus",
        "16384",
        "--tp",
        "8",
        "--pp",
        "16",
        "--zero",
        "1",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--max-days",
        "120",
        "--critical-batch",
        "zhang",
        "--global-batch-tokens",
        batch,
        "--json",
    ]
}

#[test]
fn past_the_critical_batch_a_plan_is_graded_by_the_tokens_its_batch_makes_count() {
    // McCandlish et al.: D = x·(1 + B/B_crit(x)), B_crit = 2.4978·x^0.6174 (Zhang et al.'s
    // runs refit, src/laws/critical.rs). At 16 Mi tokens a step the 15 T tokens count as x
    // with x + (B/2.4978)·x^0.3826 = 15e12: by hand x ≈ 14.29 T, B_crit(x) ≈ 2.7e8.
    let small = json(&critical("16777216"));
    let c = &small["critical_batch"];
    let x = c["effective_tokens"].as_f64().unwrap();
    let crit = c["critical_tokens"].as_f64().unwrap();
    assert!((x * (1.0 + 16777216.0 / crit) / 15e12 - 1.0).abs() < 1e-9);
    assert!((x / 14.29e12 - 1.0).abs() < 0.01, "{x}");
    assert!((crit / 2.4978 / x.powf(0.6174) - 1.0).abs() < 1e-9);
    assert_eq!(c["law"], "zhang");
    assert!(c["extrapolation"].as_str().unwrap().contains("above"));
    // A batch 8 times larger wastes more tokens: a higher loss on the same 15 T.
    let big = json(&critical("134217728"));
    let big_x = big["critical_batch"]["effective_tokens"].as_f64().unwrap();
    assert!(big_x < x);
    assert!(big["loss"].as_f64().unwrap() > small["loss"].as_f64().unwrap());
    // Off (the default), the same plan is graded on every token.
    let off: Vec<&str> = critical("16777216")
        .into_iter()
        .filter(|a| *a != "--critical-batch" && *a != "zhang")
        .collect();
    let plain = json(&off);
    assert!(plain.get("critical_batch").is_none());
    assert!(plain["loss"].as_f64().unwrap() < small["loss"].as_f64().unwrap());
    // A sharded search refuses it by name, in one line (merge checks partials against one
    // loss per shape and token count).
    let out = trainplan()
        .args(["search", "--critical-batch", "zhang", "--shard", "1/2"])
        .assert()
        .failure();
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("--critical-batch = zhang"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_search_counts_the_critical_batch_layout_by_layout() {
    // The default brief aims every layout at 16 Mi tokens a step. 405B reaches 1.955 on
    // 817.7 B tokens at no waste, where B_crit = 2.4978 · 8.177e11^0.6174 ≈ 56 M tokens: at 16
    // Mi a step it needs about 30 % more, 1.06 T, and 30 days train only 862 B. 70B answers.
    let plain = json(&["search", "--json"]);
    let doc = json(&["search", "--critical-batch", "zhang", "--json"]);
    let verdict = |d: &serde_json::Value, model: &str| {
        d["shapes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["model"] == model)
            .unwrap()
            .clone()
    };
    assert!(verdict(&plain, "llama3-405b")["token_window"].is_array());
    let v405 = verdict(&doc, "llama3-405b");
    assert!(v405["token_window"].is_null());
    let fewest = v405["min_tokens_for_loss"].as_f64().unwrap();
    assert!((fewest / 1.06e12 - 1.0).abs() < 0.01, "{fewest}");
    assert!(v405["reason"]
        .as_str()
        .unwrap()
        .contains("past the critical batch"));
    let first = &doc["plans"][0];
    assert_eq!(first["model"], "llama3-70b");
    // Each plan is graded as check grades it: its loss counts the tokens its batch makes count.
    let c = &first["critical_batch"];
    let (x, b, crit) = (
        c["effective_tokens"].as_f64().unwrap(),
        c["batch_tokens"].as_f64().unwrap(),
        c["critical_tokens"].as_f64().unwrap(),
    );
    let d = first["tokens"].as_f64().unwrap();
    assert!((x * (1.0 + b / crit) / d - 1.0).abs() < 1e-9);
    // The text says so beside the answer.
    let out = trainplan()
        .args(["search", "--critical-batch", "zhang"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("past the critical batch (zhang): 16.78 M tokens a step"),
        "{text}"
    );
}

#[test]
fn the_sensitivity_moves_the_critical_batch_and_shows_its_loss() {
    let mut args = critical("134217728");
    args.retain(|a| *a != "--json");
    args.extend(["--sensitivity", "--json"]);
    let doc = json(&args);
    let rows = doc["sensitivity"]["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["input"] == "critical_batch_scale")
        .unwrap();
    assert!((row["low"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(row["high"], 2.0);
    // A smaller critical batch wastes more tokens.
    let (low, high) = (
        row["at_low"]["loss"].as_f64().unwrap(),
        row["at_high"]["loss"].as_f64().unwrap(),
    );
    assert!(low > doc["loss"].as_f64().unwrap() && doc["loss"].as_f64().unwrap() > high);
}

#[test]
fn the_search_sensitivity_moves_the_laws_batch_across_its_near_optimal_band() {
    // DeepSeek LLM's near-optimal band, 2/3 to 1.5 times the law's batch: the search run again
    // at each end aims at that batch, and its first plan takes it.
    let mut args = wide("deepseek");
    args.extend(["--sensitivity", "--json"]);
    let doc = json(&args);
    let changes = doc["sensitivity"]["changes"].as_array().unwrap();
    let at = |value: f64| {
        changes
            .iter()
            .find(|c| {
                c["input"] == "batch_law_scale"
                    && (c["value"].as_f64().unwrap() - value).abs() < 1e-9
            })
            .unwrap()["first"]["step"]["global_batch_tokens"]
            .as_f64()
            .unwrap()
    };
    // 405B's law batch is 26.52 M tokens; each end's plan is within a quarter of its scaled
    // target.
    let law = 26.52e6;
    for scale in [2.0 / 3.0, 1.5] {
        let batch = at(scale);
        assert!(
            (batch / (law * scale) - 1.0).abs() <= 0.25,
            "{scale}: {batch}"
        );
    }
    assert!(at(1.5) > at(2.0 / 3.0));
}
