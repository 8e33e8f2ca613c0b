//! What engineers already have, in; what they paste next, out: Hugging Face configs, GPU
//! presets, TOML briefs, launcher configurations, tables and plots — through the real binary.

mod common;

use common::{refuses, trainplan};
use serde_json::Value;

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/hf/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn stdout(args: &[&str]) -> String {
    let out = trainplan().args(args).output().unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn check_grades_a_model_from_its_config() {
    let config = fixture("llama-3.2-3b");
    let plan: Value = serde_json::from_str(&stdout(&[
        "check",
        "--model-config",
        &config,
        "--tokens",
        "1e12",
        "--json",
    ]))
    .unwrap();
    assert_eq!(plan["model"], "llama-3.2-3b");
    assert_eq!(plan["params"], 3_212_749_824u64);
}

#[test]
fn a_config_s_shape_grades_as_the_preset_it_equals() {
    let by_config = stdout(&[
        "check",
        "--model-config",
        &fixture("llama-3.1-70b"),
        "--tokens",
        "4.96e12",
        "--tp",
        "8",
        "--pp",
        "8",
        "--zero",
        "1",
        "--json",
    ]);
    let by_name = stdout(&[
        "check", "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "8", "--zero", "1",
        "--json",
    ]);
    let strip = |s: &str| s.replace("\"llama-3.1-70b\"", "\"llama3-70b\"");
    assert_eq!(strip(&by_config), by_name);
}

#[test]
fn search_takes_several_configs_together() {
    let report: Value = serde_json::from_str(&stdout(&[
        "search",
        "--model-config",
        &fixture("qwen2.5-7b"),
        "--model-config",
        &fixture("llama-3.1-70b"),
        "--json",
    ]))
    .unwrap();
    let models: Vec<&str> = report["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["qwen2.5-7b", "llama-3.1-70b"]);
    assert_eq!(report["plans"][0]["model"], "llama-3.1-70b");
}

#[test]
fn an_ad_hoc_shape_is_named_so_check_reads_the_name_back() {
    let adhoc: Value = serde_json::from_str(&stdout(&[
        "check",
        "--layers",
        "40",
        "--hidden",
        "5120",
        "--ffn",
        "14336",
        "--heads",
        "32",
        "--head-dim",
        "128",
        "--vocab",
        "131072",
        "--tokens",
        "1e12",
        "--json",
    ]))
    .unwrap();
    let name = adhoc["model"].as_str().unwrap();
    assert_eq!(name, "L40-h5120-f14336-a32-d128-v131072");
    // Mistral NeMo's dimensions: its published count.
    assert_eq!(adhoc["params"], 12_247_782_400u64);
    let by_name: Value = serde_json::from_str(&stdout(&[
        "check", "--model", name, "--tokens", "1e12", "--json",
    ]))
    .unwrap();
    assert_eq!(by_name, adhoc);
    let search: Value = serde_json::from_str(&stdout(&[
        "search",
        "--layers",
        "40",
        "--hidden",
        "5120",
        "--ffn",
        "14336",
        "--heads",
        "32",
        "--head-dim",
        "128",
        "--vocab",
        "131072",
        "--json",
    ]))
    .unwrap();
    assert_eq!(search["shapes"][0]["model"], name);
}

#[test]
fn deepseek_v3_s_latent_attention_is_planned_on_its_own_layout() {
    // DeepSeek-V3's config on its report's 2,048 H800s (PP 16, EP 64, no TP), graded by the
    // detailed models: its counts, and a step whose time and memory are the latent layers'.
    let config = fixture("deepseek-v3");
    let layout = [
        "--model-config",
        &config,
        "--gpu",
        "h800",
        "--gpus",
        "2048",
        "--tp",
        "1",
        "--pp",
        "16",
        "--ep",
        "64",
        "--tokens",
        "1e12",
        "--memory",
        "detailed",
        "--time",
        "detailed",
    ];
    let mut args = vec!["check"];
    args.extend(layout);
    args.extend([
        "--seq-len",
        "4096",
        "--global-batch-tokens",
        "62914560",
        "--recompute",
        "full",
        "--json",
    ]);
    let check: Value = serde_json::from_str(&stdout(&args)).unwrap();
    assert_eq!(check["params"], 671_026_419_200u64);
    assert_eq!(check["active_params"], 37_552_297_472u64);
    // Its multi-token-prediction depth, counted apart and run on the last stage.
    assert_eq!(check["mtp_params"], 11_610_068_224u64);
    let mfu = check["mfu"].as_f64().unwrap();
    assert!(mfu > 0.05 && mfu < 0.6, "{mfu}");
    assert!(check["breakdown"]["ep_comm"].as_f64().unwrap() > 0.0);
    // The eager stack's curve was measured on grouped-query layers: refused by name.
    let mut eager = vec!["check"];
    eager.extend(layout);
    eager.extend(["--stack", "eager"]);
    refuses(
        &eager,
        "--stack = eager: a stack that builds multi-head latent attention",
    );
}

#[test]
fn kimi_k2_is_planned_by_search_with_expert_parallelism() {
    // Kimi K2's config (DeepSeek-V3's architecture, 384 experts) on 2,048 H800s: the detailed
    // search finds passing plans, each with its experts split over EP.
    let search: Value = serde_json::from_str(&stdout(&[
        "search",
        "--model-config",
        &fixture("kimi-k2-instruct"),
        "--gpu",
        "h800",
        "--gpus",
        "2048",
        "--max-days",
        "400",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--ep",
        "16,32",
        "--top",
        "3",
        "--json",
    ]))
    .unwrap();
    let plans = search["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 3);
    for p in plans {
        assert_eq!(p["params"], 1_026_408_232_448u64);
        assert!(p["layout"]["ep"] == 16 || p["layout"]["ep"] == 32, "{p}");
    }
}

/// A copy of the config at `config` without its sliding window, written into `dir`.
fn without_window(config: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    let mut full: Value = serde_json::from_str(&text).unwrap();
    full["sliding_window"] = Value::Null;
    let path = dir.join("config.json");
    std::fs::write(&path, full.to_string()).unwrap();
    path
}

#[test]
fn gpt_oss_s_alternating_windows_are_planned_and_cost_less_attention() {
    // gpt-oss-20b: a 128-token window on every second layer, the others full, graded by the
    // detailed models; the same config without its window computes longer (its windowed
    // layers' attention: `src/cost/chip/flops.rs` has the counts).
    let config = fixture("gpt-oss-20b");
    let dir = tempfile::tempdir().unwrap();
    let unwindowed = without_window(&config, dir.path());
    let check = |config: &str| {
        serde_json::from_str::<Value>(&stdout(&[
            "check",
            "--model-config",
            config,
            "--gpus",
            "64",
            "--ep",
            "8",
            "--tokens",
            "1e12",
            "--seq-len",
            "4096",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--json",
        ]))
        .unwrap()
    };
    let (windowed, full) = (check(&config), check(unwindowed.to_str().unwrap()));
    assert_eq!(windowed["params"], 20_914_757_184u64);
    let compute = |v: &Value| v["breakdown"]["compute"].as_f64().unwrap();
    assert!(compute(&windowed) < compute(&full));
    // A search at 8K tokens weighs CP 2 too and keeps none of it on megatron-te's ring.
    let search = serde_json::from_str::<Value>(&stdout(&[
        "search",
        "--model-config",
        &config,
        "--gpus",
        "64",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--loss-target",
        "2.5",
        "--json",
    ]))
    .unwrap();
    let plans = search["plans"].as_array().unwrap();
    assert!(!plans.is_empty());
    assert!(plans
        .iter()
        .all(|p| p["layout"]["cp"].as_u64().unwrap_or(1) == 1));
    // Under context parallelism the megatron-te stack's ring has no window: refused by name.
    refuses(
        &[
            "check",
            "--model-config",
            &config,
            "--gpus",
            "64",
            "--cp",
            "2",
            "--tokens",
            "1e12",
            "--seq-len",
            "8192",
            "--memory",
            "detailed",
        ],
        "--cp = 2: 1 for gpt-oss-20b's sliding window on the megatron-te stack",
    );
}

#[test]
fn mistral_s_window_shortens_fused_attention_and_not_the_eager_stack_s() {
    // Mistral 7B's 4,096-token window on every layer at s = 8,192: the fused kernels attend
    // to 3,072 keys a query of the causal count's 4,096; the eager stack masks every score.
    let config = fixture("mistral-7b-v0.1");
    let dir = tempfile::tempdir().unwrap();
    let unwindowed = without_window(&config, dir.path());
    let compute = |config: &str, stack: &str| {
        let v: Value = serde_json::from_str(&stdout(&[
            "check",
            "--model-config",
            config,
            "--gpus",
            "64",
            "--tokens",
            "1e12",
            "--seq-len",
            "8192",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--stack",
            stack,
            "--json",
        ]))
        .unwrap();
        v["breakdown"]["compute"].as_f64().unwrap()
    };
    let full = unwindowed.to_str().unwrap();
    assert!(compute(&config, "megatron-te") < compute(full, "megatron-te"));
    assert_eq!(compute(&config, "eager"), compute(full, "eager"));
}

#[test]
fn models_that_cannot_be_planned_are_refused_by_name() {
    refuses(
        &["search", "--model-config", &fixture("gemma-2b")],
        "architecture GemmaForCausalLM is not supported",
    );
    refuses(
        &[
            "check",
            "--model-config",
            "/no/such/config.json",
            "--tokens",
            "1e12",
        ],
        "cannot read '/no/such/config.json'",
    );
    refuses(
        &["check", "--tokens", "1e12"],
        "one of --model, --model-config",
    );
    refuses(
        &[
            "check", "--layers", "4", "--hidden", "100", "--ffn", "300", "--tokens", "1e12",
        ],
        "--hidden = 100",
    );
    refuses(
        &[
            "search", "--layers", "4..8", "--hidden", "1024", "--ffn", "300",
        ],
        "--layers = 4..8",
    );
}

#[test]
fn the_printed_brief_reads_back_as_itself_in_toml_and_json() {
    let dir = tempfile::tempdir().unwrap();
    for (format, file) in [("toml", "brief.toml"), ("json", "brief.json")] {
        let printed = stdout(&[
            "brief", "--print", "--format", format, "--gpu", "h200", "--gpus", "512",
        ]);
        let path = dir.path().join(file);
        std::fs::write(&path, &printed).unwrap();
        let again = stdout(&[
            "brief",
            "--print",
            "--format",
            format,
            "--brief",
            path.to_str().unwrap(),
        ]);
        assert_eq!(again, printed, "{format}");
    }
    // The JSON print is the `brief` object every JSON output carries.
    let printed: Value =
        serde_json::from_str(&stdout(&["brief", "--print", "--format", "json"])).unwrap();
    let report: Value = serde_json::from_str(&stdout(&["search", "--json"])).unwrap();
    assert_eq!(printed, report["brief"]);
}

#[test]
fn a_gpu_preset_sets_the_card_and_flags_still_override_it() {
    let brief = |args: &[&str]| -> Value {
        let mut all = vec!["brief", "--print", "--format", "json"];
        all.extend_from_slice(args);
        serde_json::from_str(&stdout(&all)).unwrap()
    };
    let h200 = brief(&["--gpu", "h200"]);
    assert_eq!(h200["peak_tflops"], 989.0);
    assert_eq!(h200["gpu_memory_gb"], 141.0);
    assert_eq!(h200["memory_cap_gb"], 141.0 * 0.9);
    assert_eq!(h200["topology"]["hbm_gbps"], 4800.0);
    assert_eq!(h200["gpus"], 2048, "the cluster's size is not the card's");
    let overridden = brief(&["--gpu", "b200", "--memory-cap-gb", "150"]);
    assert_eq!(overridden["peak_tflops"], 2250.0);
    assert_eq!(overridden["memory_cap_gb"], 150.0);
    // H100 SXM is the default brief's card; the preset adds its 700 W board power, which the
    // default brief (SPEC.md §1) does not name.
    let mut h100 = brief(&["--gpu", "h100"]);
    assert_eq!(h100["spend"]["gpu_power_w"], 700.0);
    h100.as_object_mut().unwrap().remove("spend");
    assert_eq!(h100, brief(&[]));
}

#[test]
fn a_toml_brief_and_its_gpu_come_before_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("cluster.toml");
    std::fs::write(
        &toml,
        "gpu = \"mi300x\"\ngpus = 1024\npeak_tflops = 1000\n\n[loss_law]\ne = 1.8\n",
    )
    .unwrap();
    let json = dir.path().join("cluster.json");
    std::fs::write(
        &json,
        r#"{"gpu": "mi300x", "gpus": 1024, "peak_tflops": 1000, "loss_law": {"e": 1.8}}"#,
    )
    .unwrap();
    let from = |path: &std::path::Path, extra: &[&str]| -> Value {
        let mut args = vec![
            "brief",
            "--print",
            "--format",
            "json",
            "--brief",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        serde_json::from_str(&stdout(&args)).unwrap()
    };
    let brief = from(&toml, &[]);
    assert_eq!(brief, from(&json, &[]));
    // The file's own numbers lie over its GPU; the flags over both.
    assert_eq!(brief["peak_tflops"], 1000.0);
    assert_eq!(brief["gpu_memory_gb"], 192.0);
    assert_eq!(brief["loss_law"]["e"], 1.8);
    assert_eq!(brief["loss_law"]["a"], 482.0);
    let flagged = from(&toml, &["--gpu", "a100-40gb", "--gpus", "64"]);
    assert_eq!(flagged["peak_tflops"], 312.0);
    assert_eq!(flagged["gpus"], 64);
    // A search reads the same brief.
    let report: Value = serde_json::from_str(&stdout(&[
        "search",
        "--json",
        "--brief",
        toml.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(report["brief"], brief);
}

/// The arguments of a Megatron-LM export, option → value ("" for a switch).
fn megatron_args(text: &str) -> std::collections::BTreeMap<String, String> {
    let body = text
        .split("MEGATRON_ARGS=(\n")
        .nth(1)
        .expect("a MEGATRON_ARGS array");
    body.lines()
        .take_while(|l| *l != ")")
        .map(|l| {
            let mut parts = l.trim().splitn(2, ' ');
            let option = parts.next().unwrap().to_string();
            (option, parts.next().unwrap_or("").to_string())
        })
        .collect()
}

const SEVENTY: [&str; 10] = [
    "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "8", "--zero", "1",
];

#[test]
fn megatron_arguments_carry_the_plan_and_the_shape() {
    let mut args = vec!["export", "--format", "megatron"];
    args.extend(SEVENTY);
    let text = stdout(&args);
    let a = megatron_args(&text);
    for (option, value) in [
        ("--tensor-model-parallel-size", "8"),
        ("--pipeline-model-parallel-size", "8"),
        ("--use-distributed-optimizer", ""),
        ("--sequence-parallel", ""),
        ("--num-layers", "80"),
        ("--hidden-size", "8192"),
        ("--ffn-hidden-size", "28672"),
        ("--num-attention-heads", "64"),
        ("--num-query-groups", "8"),
        ("--untie-embeddings-and-output-weights", ""),
        ("--disable-bias-linear", ""),
        ("--seq-length", "8192"),
        // 16 Mi tokens: 2,048 sequences, 64 micro-batches of 1 on each of 32 replicas.
        ("--global-batch-size", "2048"),
        ("--micro-batch-size", "1"),
        // ⌈4.96e12 / 16,777,216⌉.
        ("--train-iters", "295640"),
        ("--recompute-granularity", "full"),
    ] {
        assert_eq!(
            a.get(option).map(String::as_str),
            Some(value),
            "{option}\n{text}"
        );
    }
    assert!(
        !a.contains_key("--kv-channels"),
        "Llama's head dimension is implied"
    );
    // `check --format megatron` writes the same.
    let mut check = vec!["check", "--format", "megatron"];
    check.extend(SEVENTY);
    assert_eq!(stdout(&check), text);
}

#[test]
fn megatron_arguments_follow_the_model_s_quirks() {
    // Qwen2: q/k/v biases; tied embeddings in 0.5B; 405B: 126 layers do not split over 16.
    let qwen = megatron_args(&stdout(&[
        "export",
        "--format",
        "megatron",
        "--model-config",
        &fixture("qwen2.5-0.5b"),
        "--tokens",
        "1e12",
    ]));
    assert!(qwen.contains_key("--add-qkv-bias") && qwen.contains_key("--disable-bias-linear"));
    assert!(!qwen.contains_key("--untie-embeddings-and-output-weights"));
    let nemo = megatron_args(&stdout(&[
        "export",
        "--format",
        "megatron",
        "--model-config",
        &fixture("mistral-nemo-base-2407"),
        "--tokens",
        "1e12",
        "--tp",
        "8",
    ]));
    assert_eq!(nemo["--kv-channels"], "128");
    let big = megatron_args(&stdout(&[
        "export", "--format", "megatron", "--model", "405b", "--tokens", "8.5e11", "--tp", "8",
        "--pp", "16", "--zero", "1",
    ]));
    // 126 layers over 16 stages as check grades them under megatron-te (even, the rest on
    // the last stages): 2 stages of 7, 14 of 8.
    assert_eq!(
        big["--pipeline-model-parallel-layout"],
        "\"Et*7|t*7|(t*8|)*13,t*8L\""
    );
    // ZeRO 3 is Megatron-FSDP's full sharding.
    let fsdp = megatron_args(&stdout(&[
        "export", "--format", "megatron", "--model", "70b", "--tokens", "4.96e12", "--tp", "8",
        "--zero", "3",
    ]));
    assert_eq!(
        fsdp["--data-parallel-sharding-strategy"],
        "optim_grads_params"
    );
}

#[test]
fn a_deepspeed_config_passes_deepspeed_s_own_batch_check() {
    let out = trainplan()
        .args([
            "export",
            "--format",
            "deepspeed",
            "--model",
            "70b",
            "--tokens",
            "4.96e12",
            "--tp",
            "8",
            "--zero",
            "3",
        ])
        .output()
        .unwrap();
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    // train_batch_size = micro × accumulation × DP (DP = 2048 / 8 = 256).
    let (batch, micro, steps) = (
        config["train_batch_size"].as_u64().unwrap(),
        config["train_micro_batch_size_per_gpu"].as_u64().unwrap(),
        config["gradient_accumulation_steps"].as_u64().unwrap(),
    );
    assert_eq!(batch, micro * steps * 256);
    assert_eq!(config["zero_optimization"]["stage"], 3);
    assert_eq!(config["bf16"]["enabled"], true);
    // What the JSON cannot say goes to stderr.
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("set TP 8 and PP 1"), "{stderr}");
    // DeepSpeed's pipeline engine takes ZeRO 0 or 1 only.
    refuses(
        &[
            "export",
            "--format",
            "deepspeed",
            "--model",
            "70b",
            "--tokens",
            "4.96e12",
            "--tp",
            "8",
            "--pp",
            "8",
            "--zero",
            "3",
        ],
        "PP 8 takes ZeRO 0 or 1, not 3",
    );
}

#[test]
fn a_torchtitan_config_is_toml_whose_degrees_make_the_cluster() {
    let text = stdout(&[
        "check",
        "--format",
        "torchtitan",
        "--model",
        "405b",
        "--tokens",
        "8.5e11",
        "--tp",
        "8",
        "--pp",
        "16",
        "--zero",
        "1",
    ]);
    let config: toml::Value = toml::from_str(&text).unwrap();
    let p = &config["parallelism"];
    let degree = |k: &str| p[k].as_integer().unwrap();
    assert_eq!(
        degree("data_parallel_replicate_degree")
            * degree("data_parallel_shard_degree")
            * degree("tensor_parallel_degree")
            * degree("pipeline_parallel_degree"),
        2048
    );
    assert_eq!(config["model"]["flavor"].as_str(), Some("405B"));
    assert_eq!(
        config["activation_checkpoint"]["mode"].as_str(),
        Some("full")
    );
    assert_eq!(config["training"]["seq_len"].as_integer(), Some(8192));
    // A model that is not one of torchtitan's flavors is said to need one.
    let qwen = stdout(&[
        "check",
        "--format",
        "torchtitan",
        "--model-config",
        &fixture("qwen2.5-7b"),
        "--tokens",
        "1e12",
    ]);
    assert!(
        qwen.contains("is not one of torchtitan's llama3 flavors"),
        "{qwen}"
    );
}

#[test]
fn export_takes_a_plan_from_check_or_search_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut check = vec!["check", "--json"];
    check.extend(SEVENTY);
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, stdout(&check)).unwrap();
    let mut direct = vec!["export", "--format", "megatron"];
    direct.extend(SEVENTY);
    let from_file = stdout(&[
        "export",
        "--format",
        "megatron",
        "--plan",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(from_file, stdout(&direct));

    let search = dir.path().join("search.json");
    std::fs::write(&search, stdout(&["search", "--json"])).unwrap();
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&search).unwrap()).unwrap();
    let second = &report["plans"][1];
    let toml_text = stdout(&[
        "export",
        "--format",
        "torchtitan",
        "--plan",
        search.to_str().unwrap(),
        "--index",
        "2",
    ]);
    let config: toml::Value = toml::from_str(&toml_text).unwrap();
    assert_eq!(
        config["parallelism"]["pipeline_parallel_degree"].as_integer(),
        second["layout"]["pp"].as_i64()
    );
    refuses(
        &[
            "export",
            "--format",
            "megatron",
            "--plan",
            search.to_str().unwrap(),
            "--index",
            "99",
        ],
        "--index = 99: 1 to 10",
    );
    refuses(
        &[
            "export",
            "--format",
            "megatron",
            "--plan",
            plan.to_str().unwrap(),
            "--model-config",
            &fixture("qwen2.5-7b"),
        ],
        "the plan's model, llama3-70b",
    );
    refuses(
        &[
            "export",
            "--format",
            "megatron",
            "--plan",
            plan.to_str().unwrap(),
            "--tokens",
            "1e12",
        ],
        "either a plan file or the design flags",
    );
}

#[test]
fn csv_and_markdown_tables_hold_the_ranked_plans() {
    let report: Value = serde_json::from_str(&stdout(&["search", "--json", "--top", "4"])).unwrap();
    let csv = stdout(&["search", "--format", "csv", "--top", "4"]);
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[0].starts_with("rank,model,params,tokens,tp,pp,dp,zero,memory_gb,days,loss,pass"));
    for (line, plan) in lines[1..].iter().zip(report["plans"].as_array().unwrap()) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[1], plan["model"]);
        assert_eq!(
            cells[3].parse::<u64>().unwrap(),
            plan["tokens"].as_u64().unwrap()
        );
        // Every digit: the CSV's loss reads back as the JSON's.
        assert_eq!(
            cells[10].parse::<f64>().unwrap(),
            plan["loss"].as_f64().unwrap()
        );
    }
    let md = stdout(&["search", "--format", "markdown", "--top", "4"]);
    assert_eq!(md.lines().count(), 6);
    assert!(md.lines().nth(1).unwrap().starts_with("| ---: | --- |"));
    // The front too.
    let front = stdout(&["search", "--pareto", "-", "--pareto-format", "csv"]);
    assert!(front.starts_with("rank,model"), "{front}");
}

#[test]
fn completions_are_written_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&["completions", shell]);
        assert!(
            script.contains("trainplan") && script.contains("model-config"),
            "{shell}"
        );
    }
}

#[test]
fn quiet_keeps_stderr_for_errors_only() {
    let args = [
        "-q",
        "export",
        "--format",
        "deepspeed",
        "--model",
        "70b",
        "--tokens",
        "4.96e12",
        "--tp",
        "8",
        "--zero",
        "3",
    ];
    let out = trainplan().args(args).output().unwrap();
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn no_color_turns_off_the_colour_clap_would_force() {
    let help = |no_color: bool| {
        let mut cmd = trainplan();
        cmd.env_remove("NO_COLOR")
            .env("CLICOLOR_FORCE", "1")
            .arg("--help");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        String::from_utf8(cmd.output().unwrap().stdout).unwrap()
    };
    assert!(
        help(false).contains('\u{1b}'),
        "CLICOLOR_FORCE colours the help"
    );
    assert!(!help(true).contains('\u{1b}'), "NO_COLOR wins");
}

#[test]
fn help_shows_examples_and_exit_statuses() {
    let help = stdout(&["--help"]);
    assert!(help.contains("trainplan export --format megatron"));
    assert!(help.contains("Exit status: 0 yes (passes), 1 no (fails), 2 bad input"));
}

#[test]
fn a_plan_file_is_checked_as_check_checks_a_design() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let plan = |tp: u64, pp: u64, dp: u64| {
        format!(
            r#"{{"model": "llama3-70b", "params": 70553706496, "tokens": 1000000000000, "layout": {{"tp": {tp}, "pp": {pp}, "dp": {dp}, "zero": 1}}}}"#
        )
    };
    for (name, text, needle) in [
        ("tp3.json", plan(3, 1, 2), "tp = 3 must divide"),
        ("pp81.json", plan(1, 81, 1), "pp = 81"),
        ("huge.json", plan(8, 1, 1 << 51), "at most 100000000 GPUs"),
        (
            "wrapped.json",
            plan(8, 8, u64::MAX),
            "plan.layout = TP 8 × PP 8 × DP 18446744073709551615",
        ),
        (
            "params.json",
            plan(8, 1, 8).replace("70553706496", "8030261248"),
            "the plan's model, llama3-70b (8030261248 parameters)",
        ),
    ] {
        let path = write(name, &text);
        refuses(&["export", "--format", "megatron", "--plan", &path], needle);
    }
    // Design flags beside a plan file would be ignored: they are refused.
    let good = write("good.json", &plan(8, 1, 8));
    refuses(
        &[
            "export", "--format", "megatron", "--plan", &good, "--tp", "4",
        ],
        "--tp = given with --plan",
    );
    // A search document's own brief gives the sequence length.
    let search = write(
        "s4096.json",
        &stdout(&["search", "--json", "--seq-len", "4096", "--models", "70b"]),
    );
    let args = megatron_args(&stdout(&[
        "export", "--format", "megatron", "--plan", &search,
    ]));
    assert_eq!(args["--seq-length"], "4096");
}

#[test]
fn launchers_refuse_splits_their_schedules_cannot_run() {
    // 70B on TP 8 × PP 8, ZeRO 1, detailed memory, an interleaved schedule.
    let interleaved = |format: &'static str, more: &[&'static str]| {
        let mut args = vec![
            "export",
            "--format",
            format,
            "--model",
            "70b",
            "--tokens",
            "1e12",
            "--tp",
            "8",
            "--pp",
            "8",
            "--zero",
            "1",
            "--memory",
            "detailed",
            "--schedule",
        ];
        args.extend(more);
        args
    };
    // Each stage's 10 layers in V = 3 chunks (4, 3, 3; the first stage's 3, 3, 4, its first
    // chunk beside the embedding the short one), as the memory model grades interleaving
    // (chunks of a stage may differ by a layer), in a pipeline layout.
    let text = stdout(&interleaved(
        "megatron",
        &["interleaved:3", "--global-batch-tokens", "25165824"],
    ));
    assert!(
        text.contains(
            "--pipeline-model-parallel-layout \"Et*3|(t*4|)*7,(t*3|)*8,t*4|(t*3|)*6,t*3L\""
        ),
        "{text}"
    );
    // torchtitan counts the embedding and the head as layers: 82 do not make 16 stages.
    refuses(
        &interleaved("torchtitan", &["interleaved:2"]),
        "(82) do not divide by PP 8 × V 2",
    );
}

#[test]
fn torchtitan_gets_the_sharding_and_batch_it_can_run() {
    let config = |args: &[&str]| -> toml::Value {
        let mut all = vec![
            "check",
            "--format",
            "torchtitan",
            "--model",
            "70b",
            "--tokens",
            "1e12",
        ];
        all.extend_from_slice(args);
        toml::from_str(&stdout(&all)).unwrap()
    };
    // ZeRO 0 with TP: torchtitan's DDP does not compose with TP, so FSDP that keeps weights.
    let zero0 = config(&["--tp", "8", "--zero", "0"]);
    assert_eq!(
        zero0["parallelism"]["data_parallel_shard_degree"].as_integer(),
        Some(256)
    );
    assert_eq!(
        zero0["parallelism"]["fsdp_reshard_after_forward"].as_str(),
        Some("never")
    );
    // ZeRO 3 under a pipeline reshards always ("default" would keep the weights gathered).
    let zero3 = config(&["--tp", "8", "--pp", "4", "--zero", "3"]);
    assert_eq!(
        zero3["parallelism"]["fsdp_reshard_after_forward"].as_str(),
        Some("always")
    );
    // With a pipeline, each DP rank's batch is the step's micro-batches: 2,048 / 64 = 32.
    assert_eq!(zero3["training"]["local_batch_size"].as_integer(), Some(32));
    assert_eq!(
        zero3["parallelism"]["pipeline_parallel_microbatch_size"].as_integer(),
        Some(1)
    );
}

#[test]
fn outputs_never_overwrite_the_files_they_were_computed_from() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::copy(fixture("llama-3.1-8b"), &config).unwrap();
    let config = config.to_str().unwrap();
    let before = std::fs::read_to_string(config).unwrap();
    refuses(
        &[
            "check",
            "--model-config",
            config,
            "--tokens",
            "1e12",
            "--plot",
            config,
        ],
        "a path other than the input files",
    );
    refuses(
        &["search", "--model-config", config, "--pareto", config],
        "a path other than the input files",
    );
    assert_eq!(std::fs::read_to_string(config).unwrap(), before);
}

#[test]
fn quiet_keeps_the_summary_off_stderr_when_the_front_goes_to_stdout() {
    let out = trainplan()
        .args([
            "-q",
            "search",
            "--models",
            "70b",
            "--pareto",
            "-",
            "--pareto-format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("rank,model"));
}
