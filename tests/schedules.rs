//! The V schedules (ZB-V, DualPipeV) as a user meets them: graded by `check`, refused where
//! the stack has none, searched beside 1F1B and interleaving, written for torchtitan and read
//! back, and DeepSeek-V3's own report reproduced with the layout it states.

mod common;

use common::trainplan;
use serde_json::Value;

/// What a command wrote on standard error, once it exited with status 2 (bad input).
fn refusal_of(out: assert_cmd::assert::Assert) -> String {
    String::from_utf8(out.code(2).get_output().stderr.clone()).unwrap()
}

/// `check` of Llama 3 70B on 256 H100s at TP 8 × PP 8 on `stack` under `schedule`, with
/// `more`.
fn check_70b(stack: &str, schedule: &str, more: &[&str]) -> assert_cmd::assert::Assert {
    trainplan()
        .args([
            "check", "--model", "70b", "--gpus", "256", "--gpu", "h100-sxm",
        ])
        .args(["--tp", "8", "--pp", "8", "--zero", "2", "--tokens", "1e12"])
        .args(["--memory", "detailed", "--time", "detailed"])
        .args(["--recompute", "selective-op", "--stack", stack])
        .args(["--schedule", schedule])
        .args(more)
        .assert()
}

fn plan(stack: &str, schedule: &str) -> Value {
    let out = check_70b(stack, schedule, &["--json"])
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("check --json writes a plan")
}

#[test]
fn the_v_schedules_shrink_the_bubble_at_the_activations_their_papers_state() {
    let one = plan("torchtitan", "1f1b");
    let zbv = plan("torchtitan", "zbv");
    let dual = plan("torchtitan", "dualpipev");
    let bubble = |p: &Value| p["breakdown"]["bubble"].as_f64().unwrap();
    let compute = |p: &Value| p["breakdown"]["compute"].as_f64().unwrap();
    // The same work a micro-batch; only the fill and drain (and the doubled sends) differ.
    assert_eq!(compute(&one), compute(&zbv));
    assert!(
        bubble(&zbv) < bubble(&dual),
        "{} {}",
        bubble(&zbv),
        bubble(&dual)
    );
    assert!(
        bubble(&dual) < bubble(&one) / 1.5,
        "{} {}",
        bubble(&dual),
        bubble(&one)
    );
    // ZB-V holds 1F1B's first-stage p micro-batches on every GPU (Qi et al. 2024, §6);
    // DualPipeV p + ½ (the DualPipe README's PP + 1 of half-GPU stages).
    assert_eq!(one["worst_stage"]["in_flight"].as_f64(), Some(8.0));
    assert_eq!(zbv["worst_stage"]["in_flight"].as_f64(), Some(8.0));
    assert_eq!(dual["worst_stage"]["in_flight"].as_f64(), Some(8.5));
    assert_eq!(zbv["step"]["schedule"], "zbv");
}

#[test]
fn a_stack_without_the_v_schedules_refuses_them_by_name() {
    let err = refusal_of(check_70b("megatron-te", "zbv", &[]));
    assert!(
        err.contains("the megatron-te stack has no zbv schedule")
            && err.contains("--stack torchtitan"),
        "{err}"
    );
    let err = refusal_of(check_70b("torchtitan-compile", "dualpipev", &[]));
    assert!(err.contains("refuse compiled stages"));
    // DualPipe itself (two copies of the parameters) is named, with its one-copy form.
    let err = refusal_of(check_70b("torchtitan", "dualpipe", &[]));
    assert!(err.contains("dualpipev is its one-copy V form"));
}

#[test]
fn a_v_schedule_needs_two_micro_batches_a_gpu_at_least() {
    // 16,777,216 tokens of 8,192 over DP 4 at b = 16: 128 micro-batches; at PP 8 DualPipeV
    // needs 16. A batch of 8 × 8,192 × 4 tokens a step gives 8, too few.
    let more = ["--global-batch-tokens", "262144"];
    let err = refusal_of(check_70b("torchtitan", "dualpipev", &more));
    assert!(err.contains("at least 16 micro-batches"), "{err}");
}

/// `check` of Llama 3 405B on 1,024 H100s at TP 8 × PP 8 on torchtitan under `schedule`,
/// with `more` (126 layers, the embedding and the head split into 16 stages of 8).
fn check_405b(schedule: &str, more: &[&str]) -> assert_cmd::assert::Assert {
    trainplan()
        .args([
            "check", "--model", "405b", "--gpus", "1024", "--gpu", "h100-sxm",
        ])
        .args(["--tp", "8", "--pp", "8", "--zero", "2", "--tokens", "1e12"])
        .args([
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--stack",
            "torchtitan",
        ])
        .args(["--recompute", "selective-op", "--schedule", schedule])
        .args(more)
        .assert()
}

#[test]
fn torchtitan_runs_what_the_v_plans_write_and_reads_them_back() {
    for (schedule, name) in [("zbv", "ZBVZeroBubble"), ("dualpipev", "DualPipeV")] {
        let out = check_405b(schedule, &["--json"])
            .get_output()
            .stdout
            .clone();
        let plan: Value = serde_json::from_slice(&out).unwrap();
        let out = check_405b(schedule, &["--format", "torchtitan"]);
        let toml = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(
            toml.contains(&format!("pipeline_parallel_schedule = \"{name}\"")),
            "{toml}"
        );
        assert!(
            toml.contains("pipeline_parallel_layers_per_stage = 8"),
            "{toml}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(&path, &toml).unwrap();
        let read = trainplan()
            .args(["check", "--from", path.to_str().unwrap(), "--gpus", "1024"])
            .args(["--gpu", "h100-sxm", "--time", "detailed", "--json"])
            .assert()
            .get_output()
            .stdout
            .clone();
        let read: Value = serde_json::from_slice(&read).unwrap();
        assert_eq!(read["step"]["schedule"], plan["step"]["schedule"]);
        assert_eq!(read["step_seconds"], plan["step_seconds"]);
    }
    // Megatron-LM and DeepSpeed have neither: their exports refuse the plan by name.
    let refusal = |format: &str| refusal_of(check_405b("zbv", &["--format", format]));
    assert!(refusal("megatron").contains("zbv is not Megatron-core's"));
    assert!(refusal("deepspeed").contains("runs 1F1B alone"));
}

/// What a search of Llama 3 70B on 1,024 H100s on torchtitan, fastest first, writes, with
/// `more`.
fn search_70b(more: &[&str]) -> Vec<u8> {
    trainplan()
        .args([
            "search", "--models", "70b", "--gpus", "1024", "--gpu", "h100-sxm",
        ])
        .args([
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--stack",
            "torchtitan",
        ])
        .args([
            "--max-days",
            "90",
            "--recompute",
            "none",
            "--micro-batches",
            "1",
        ])
        .args(["--sequence-parallel", "on", "--top", "6", "--rank", "days"])
        .args(more)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone()
}

#[test]
fn search_on_torchtitan_chooses_a_v_schedule_where_it_is_fastest() {
    let report: Value = serde_json::from_slice(&search_70b(&["--json"])).unwrap();
    let plans = report["plans"].as_array().expect("plans");
    // Each layout keeps its fastest schedule: on every pipeline among the fastest, a V
    // schedule, whose bubble is a fraction of 1F1B's and interleaving's.
    let piped: Vec<&Value> = plans.iter().filter(|p| p["layout"]["pp"] != 1).collect();
    assert!(!piped.is_empty());
    for p in piped {
        assert_eq!(p["step"]["schedule"], "zbv", "{p}");
    }
    // The report says why: the schedule, its bubble and its memory.
    let text = String::from_utf8(search_70b(&[])).unwrap();
    assert!(
        text.contains("run zbv: ZB-V: two chunks a GPU in a V"),
        "{text}"
    );
    assert!(text.contains("at 1F1B's activations"), "{text}");
}

/// DeepSeek-V3's report (DeepSeek-AI 2024): "training DeepSeek-V3 on each trillion tokens
/// requires only 180K H800 GPU hours, i.e., 3.7 days on our cluster with 2048 H800 GPUs" (§1),
/// with PP 16, EP 64 over 8 nodes and ZeRO-1 (§3.2), DualPipe (§3.2.1), FP8 with fine-grained
/// scaling (§3.3), 4K sequences and a batch of 15,360 (§4.2), the RMSNorms and MLA's
/// up-projections recomputed (§3.2.3: `--norm-recompute`, `--latent-recompute`).
#[test]
fn deepseek_v3_s_report_is_reproduced_with_the_layout_it_states() {
    let out = trainplan()
        .args([
            "check",
            "--model-config",
            "tests/fixtures/hf/deepseek-v3/config.json",
        ])
        .args([
            "--gpu", "h800", "--gpus", "2048", "--pp", "16", "--ep", "64", "--zero", "1",
        ])
        .args([
            "--tokens",
            "1e12",
            "--seq-len",
            "4096",
            "--global-batch-tokens",
            "62914560",
        ])
        .args([
            "--precision",
            "fp8",
            "--fp8-recipe",
            "blockwise",
            "--recompute",
            "selective",
            "--norm-recompute",
            "on",
            "--latent-recompute",
            "on",
        ])
        .args([
            "--memory", "detailed", "--time", "detailed", "--stages", "loss",
        ])
        .args([
            "--stack",
            "deepseek",
            "--ep-dispatcher",
            "deepep",
            "--schedule",
            "dualpipev",
        ])
        .args(["--json"])
        .assert()
        .get_output()
        .stdout
        .clone();
    let plan: Value = serde_json::from_slice(&out).unwrap();
    // GPU-hours of compute a trillion tokens (the report's figure has no failures in it).
    let hours = plan["compute_days"].as_f64().unwrap() * 24.0 * 2048.0;
    let error = hours / 180_000.0 - 1.0;
    assert!(
        error.abs() < 0.15,
        "{hours} GPU-hours, {:+.1} %",
        error * 100.0
    );
    // Under 1F1B the all-to-alls stand exposed: the report's pace needs DualPipe's pairing.
    let exposed = plan["breakdown"]["ep_comm"].as_f64().unwrap();
    assert!(
        exposed < 0.1 * plan["step_seconds"].as_f64().unwrap(),
        "{exposed}"
    );
}

/// Mixtral 8x7B searched on 256 H100s at EP 8, one token count, with `more`.
fn mixtral_search(stack: &str, more: &[&str]) -> assert_cmd::assert::Assert {
    trainplan()
        .args([
            "search",
            "--model-config",
            "tests/fixtures/hf/mixtral-8x7b-v0.1/config.json",
        ])
        .args(["--gpus", "256", "--gpu", "h100-sxm", "--memory", "detailed"])
        .args([
            "--time",
            "detailed",
            "--stack",
            stack,
            "--loss-target",
            "2.5",
        ])
        .args([
            "--tokens-min",
            "1e12",
            "--tokens-max",
            "1e12",
            "--ep",
            "8",
            "--cp",
            "1",
        ])
        .args([
            "--micro-batches",
            "1",
            "--recompute",
            "full",
            "--rank",
            "days",
        ])
        .args(more)
        .assert()
}

#[test]
fn a_search_paces_dualpipev_by_its_own_hidden_all_to_alls() {
    // DeepSeek's stack hides DualPipeV's all-to-alls behind the paired chunk: ranked by days,
    // every plan keeps its own pace (a DualPipeV plan once took its 1F1B sibling's), and the
    // stack's one V schedule is the only one tried.
    let out = mixtral_search("deepseek", &["--sequence-parallel", "on", "--top", "12"]);
    let out = out.success().get_output().clone();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("dualpipev"), "{text}");
    assert!(!text.contains("zbv"), "{text}");
    let json = mixtral_search(
        "deepseek",
        &["--sequence-parallel", "on", "--top", "12", "--json"],
    );
    let report: Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    let days: Vec<f64> = report["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["days"].as_f64().unwrap())
        .collect();
    assert!(days.windows(2).all(|w| w[0] <= w[1]), "{days:?}");
}

#[test]
fn a_search_of_a_mixture_of_experts_leaves_out_tp_without_sequence_parallelism() {
    // Sequence parallelism off under TP > 1 is refused for an MoE (Megatron-core's rule); the
    // search once weighed such steps as valid and panicked grading them.
    let out = mixtral_search("megatron-te", &["--top", "5"]).success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("on for a mixture of experts under TP > 1"),
        "{text}"
    );
}

/// Llama 3.1 405B's width on 256 GB200s at TP 4 × PP 16 × VP 8, as NVIDIA's Megatron-Bridge
/// tables run it, with `layers` layers (the model's 126) and `more` flags.
fn llama31_405b_vp8(layers: &str, more: &[&str]) -> assert_cmd::assert::Assert {
    let mut args = vec![
        "check",
        "--tokens",
        "1e12",
        "--gpus",
        "256",
        "--gpu",
        "gb200",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--tp",
        "4",
        "--pp",
        "16",
        "--layers",
        layers,
        "--hidden",
        "16384",
        "--ffn",
        "53248",
        "--heads",
        "128",
        "--kv-heads",
        "8",
        "--vocab",
        "128256",
        "--schedule",
        "interleaved:8",
        "--global-batch-tokens",
        "12582912",
        "--recompute",
        "none",
        "--precision",
        "mxfp8",
    ];
    args.extend(more);
    trainplan().args(&args).assert()
}

#[test]
fn chunks_the_layers_alone_cannot_fill_take_megatron_cores_embedding_and_loss_split() {
    // 126 layers over 16 × 8 = 128 chunks: the even split leaves a stage of 7 layers short of
    // its 8 chunks, which Megatron-core runs only with the embedding and the loss counted as
    // layers (126 + 2 = 128). Without --stages, check grades that split and says so.
    let out = llama31_405b_vp8("126", &["--json"]);
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(doc["memory_model"]["stages"], "llama3");
    let note = doc["notes"][0].as_str().unwrap();
    assert!(
        note.contains("126 layers do not fill 128 chunks")
            && note.contains("--account-for-embedding-in-pipeline-split"),
        "{note}"
    );
    // Asked for by name, the even split is refused as before.
    let e = refusal_of(llama31_405b_vp8("126", &["--stages", "even"]).failure());
    assert!(
        e.contains("at most as many chunks as every stage has layers"),
        "{e}"
    );
    // Where the two extra units do not make the chunks whole, nothing is chosen: 125 layers.
    let e = refusal_of(llama31_405b_vp8("125", &["--json"]).failure());
    assert!(e.contains("at most as many chunks"), "{e}");
}
