//! Hybrid Mamba-2 models (NVIDIA's Nemotron-H and Nemotron 3): their Hugging Face configs read,
//! their parameters counted exactly against the published count, their model FLOPs against
//! Megatron-LM's counter, planned by the plate model and costed block by block by the
//! detailed one; the launchers refuse them by name.

mod common;

use std::path::PathBuf;

use common::{json, refuses};
use trainplan::cost::chip::flops::model_flops_per_token;
use trainplan::input::hf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf")
        .join(name)
        .join("config.json")
}

#[test]
fn nemotron_3_nano_counts_its_published_parameters() {
    // llama.cpp's `n_params` for NVIDIA-Nemotron-3-Nano-30B-A3B: 31,577,940,288, every
    // expert and the routers' score corrections (23 MoE blocks × 128) among them. By block:
    // 23 Mamba-2 of 38,744,896, 6 attention of 23,399,040 (32·128 = 4,096 wide queries and
    // output, 2·128 keys and values, one norm), 23 MoE of 1,297,468,160, and the untied
    // embedding and head 2·131,072·2,688 with the final norm.
    let nano = hf::read(&fixture("nemotron-3-nano-30b-a3b")).unwrap();
    let blocks = 23 * 38_744_896u64 + 6 * 23_399_040 + 23 * 1_297_468_160;
    assert_eq!(nano.params(), blocks + 2 * 131_072 * 2_688 + 2_688);
    assert_eq!(nano.params(), 31_577_940_288);
    // A token goes through 6 of the 128 experts: 3.58 B of "3.5B active" (NVIDIA's
    // Megatron-Bridge documentation), both embedding tables counted as for the other MoEs.
    let routed_left_out = 23 * 122 * 2 * 2_688 * 1_856u64;
    assert_eq!(nano.active_params(), nano.params() - routed_left_out);
    assert_eq!(nano.active_params(), 3_580_076_352);
    let hybrid = nano.hybrid.as_ref().unwrap();
    assert_eq!(hybrid.mamba.inner(), 4_096);
    assert_eq!(nano.experts.as_ref().unwrap().shared_ffn, 3_712);
    assert_eq!(nano.head_dim(), 128);
    assert_eq!(nano.kv_heads, 2);
}

#[test]
fn a_hybrid_s_blocks_hold_its_parameters_split_or_whole() {
    // What the detailed model puts on a TP group, block by block, adds up to the count:
    // the blocks' split and whole parameters, every routed expert, the two embedding tables
    // and the final norm.
    use trainplan::model::hybrid::Block;
    for name in ["nemotron-3-nano-30b-a3b", "nemotron-h-8b-base-8k"] {
        let shape = hf::read(&fixture(name)).unwrap();
        let hybrid = shape.hybrid.as_ref().unwrap();
        let blocks: u64 = hybrid
            .blocks()
            .map(|b| {
                let p = shape.block_params(b);
                let routed = if b == Block::Moe {
                    u64::from(shape.experts.as_ref().unwrap().routed) * shape.expert_params()
                } else {
                    0
                };
                p.split + p.whole + routed
            })
            .sum();
        assert_eq!(
            blocks + 2 * shape.embedding_params() + shape.hidden,
            shape.params(),
            "{name}"
        );
    }
}

#[test]
fn a_pipeline_stage_holds_the_blocks_of_its_layers() {
    // Nemotron 3 Nano's 52 blocks over PP 4, 13 a stage (worked out from its pattern):
    // MEMEM*EMEMEM* (6 M, 2 *, 5 E), EMEMEM*EMEMEM (6, 1, 6), *EMEMEM*EMEME (5, 2, 6),
    // MEM*EMEMEMEME (6, 1, 6). The two middle stages are one run: it stands for both as the
    // one with more MoE blocks, then more Mamba-2 ones, the second stage, 13 blocks.
    use trainplan::cost::step::pipeline::blocks_of_run;
    use trainplan::model::hybrid::BlockCounts;
    let nano = hf::read(&fixture("nemotron-3-nano-30b-a3b")).unwrap();
    let stages = [13, 13, 13, 13];
    let c = |mamba, attention, moe| BlockCounts {
        mamba,
        attention,
        mlp: 0,
        moe,
    };
    assert_eq!(blocks_of_run(&nano, &stages, 0), c(6, 2, 5));
    assert_eq!(blocks_of_run(&nano, &stages, 1), c(6, 1, 6));
    assert_eq!(blocks_of_run(&nano, &stages, 3), c(6, 1, 6));
    // One stage: the whole pattern.
    assert_eq!(blocks_of_run(&nano, &[52], 0), c(23, 6, 23));
}

#[test]
fn megatron_lm_s_file_for_a_hybrid_is_nvidia_s_own_and_reads_back_into_the_plan() {
    // Nemotron-H 8B on 64 GPUs without recomputation: the pattern and mixer options NVIDIA's
    // own Megatron-LM scripts for Nemotron-H write, and the Mamba stack's spec
    // `pretrain_mamba.py` requires; read back with its config, the same plan.
    let h8 = fixture("nemotron-h-8b-base-8k");
    let h8 = h8.to_str().unwrap();
    let plan = [
        "--model-config",
        h8,
        "--tokens",
        "1e12",
        "--gpus",
        "64",
        "--tp",
        "2",
        "--recompute",
        "none",
        "--memory",
        "detailed",
        "--time",
        "detailed",
    ];
    let out = common::trainplan()
        .args(["export", "--format", "megatron", "--quiet"])
        .args(plan)
        .output()
        .unwrap();
    // Written as asked, though the plan fails its checks (exit status 1).
    let file = String::from_utf8(out.stdout).unwrap();
    assert!(
        file.contains("MEGATRON_ARGS=("),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for option in [
        "pretrain_mamba.py",
        "--is-hybrid-model",
        "--spec megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec",
        "--hybrid-override-pattern \"M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-\"",
        "--mamba-num-heads 128",
        "--mamba-head-dim 64",
        "--mamba-num-groups 8",
        "--mamba-state-dim 128",
        "--squared-relu",
        "--position-embedding-type none",
        "--ffn-hidden-size 21504",
    ] {
        assert!(file.contains(option), "{option}: {file}");
    }
    assert!(!file.contains("--swiglu") && !file.contains("--recompute"));
    let dir = std::env::temp_dir().join(format!("trainplan-hybrid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("h8.sh");
    std::fs::write(&script, &file).unwrap();
    let read = json(&[
        "check",
        "--from",
        script.to_str().unwrap(),
        "--model-config",
        h8,
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--json",
    ]);
    let mut args = vec!["check"];
    args.extend(plan);
    args.push("--json");
    let planned = json(&args);
    for key in ["layout", "step", "memory_gb", "step_seconds", "mfu"] {
        assert_eq!(read[key], planned[key], "{key}");
    }
    // Without its config the file's options build the same model, graded alike.
    let alone = json(&[
        "check",
        "--from",
        script.to_str().unwrap(),
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--json",
    ]);
    for key in [
        "layout",
        "step",
        "memory_gb",
        "step_seconds",
        "mfu",
        "params",
    ] {
        assert_eq!(alone[key], read[key], "{key}");
    }
    // A pattern the layers do not match is refused by its option.
    std::fs::write(&script, file.replace("M-M-M-M-M-\"", "M-M-M-M-\"")).unwrap();
    refuses(
        &[
            "check",
            "--from",
            script.to_str().unwrap(),
            "--model-config",
            h8,
        ],
        "--hybrid-override-pattern",
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // What the pinned Megatron-LM's MambaStack does not build is refused by name: a
    // checkpointed block, MoE blocks (Nemotron 3's E), a split other than even.
    let refused = |extra: &[&str], model: &str, why: &str| {
        let mut args = vec!["export", "--format", "megatron", "--model-config", model];
        args.extend(["--tokens", "1e12"]);
        args.extend(extra);
        refuses(&args, why);
    };
    refused(
        &[
            "--gpus",
            "64",
            "--recompute",
            "full",
            "--memory",
            "detailed",
        ],
        h8,
        "it checkpoints no block",
    );
    let nano = fixture("nemotron-3-nano-30b-a3b");
    let nano = nano.to_str().unwrap();
    refused(
        &[
            "--gpus",
            "64",
            "--ep",
            "8",
            "--recompute",
            "none",
            "--memory",
            "detailed",
        ],
        nano,
        "has 23 MoE blocks (E), which Megatron-LM builds from 9a1c0d0",
    );
    refused(
        &[
            "--gpus",
            "48",
            "--pp",
            "3",
            "--recompute",
            "none",
            "--memory",
            "detailed",
        ],
        h8,
        "a pipeline Megatron-core's MambaModel builds",
    );
}

#[test]
fn nemotron_h_8b_counts_its_blocks() {
    // 24 Mamba-2 blocks of 109,640,064, 4 attention of 41,947,136 (h = 4,096, 32 heads of
    // 128, 8 KV heads) and 24 squared-ReLU MLPs of 2·4,096·21,504 + 4,096 = 176,164,864, with
    // 2·131,072·4,096 + 4,096: 8,100,852,736 ("8B", its model card).
    let h8 = hf::read(&fixture("nemotron-h-8b-base-8k")).unwrap();
    assert_eq!(
        h8.params(),
        24 * 109_640_064 + 4 * 41_947_136 + 24 * 176_164_864 + 2 * 131_072 * 4_096 + 4_096
    );
    assert_eq!(h8.params(), 8_100_852_736);
    assert_eq!(h8.active_params(), h8.params());
    assert!(h8.experts.is_none());
}

#[test]
fn model_flops_count_attention_on_its_blocks_and_the_scan_as_megatron_does() {
    // Megatron-LM's `hybrid_flops` for Nemotron-H 8B at s = 8,192 (its d_in = 2h is the
    // mixer's true 128·64 = 8,192 here): per token, 3 × (24 Mamba-2 · (2h·(2d_in + 2GN + H) +
    // 7·d_in·N + 2·d_in·h) + 4 attention · (4h·(h + h·8/32) + 2·s·h) + 24 MLP · 4·(f/h)·h² +
    // 2·h·V), here with h = 4,096, d_in = 8,192, G·N = 8·128, H = 128, f = 21,504.
    let h8 = hf::read(&fixture("nemotron-h-8b-base-8k")).unwrap();
    let (h, d_in, gn, heads, f, v, s) = (
        4_096.0, 8_192.0, 1_024.0, 128.0, 21_504.0, 131_072.0, 8_192.0,
    );
    let mamba = 2.0 * h * (2.0 * d_in + 2.0 * gn + heads) + 7.0 * d_in * 128.0 + 2.0 * d_in * h;
    let attention = 4.0 * h * (h + h * 8.0 / 32.0) + 2.0 * s * h;
    let mlp = 4.0 * (f / h) * h * h;
    let megatron = 3.0 * (24.0 * mamba + 4.0 * attention + 24.0 * mlp + 2.0 * h * v);
    let ours = model_flops_per_token(&h8, 8_192);
    assert!(
        (ours - megatron).abs() < 1e-9 * megatron,
        "{ours} {megatron}"
    );
    // 46.71 GFLOP a token.
    assert!((ours / 1e9 - 46.71).abs() < 0.01, "{ours}");
}

#[test]
fn a_hybrid_is_planned_by_the_plate_and_refused_by_name_where_it_is_not_costed() {
    let nano = fixture("nemotron-3-nano-30b-a3b");
    let nano = nano.to_str().unwrap();
    let plan = json(&[
        "check",
        "--model-config",
        nano,
        "--tokens",
        "1e12",
        "--gpus",
        "64",
        "--tp",
        "2",
        "--json",
    ]);
    assert_eq!(plan["params"], 31_577_940_288u64);
    // TP divides the Mamba-2 heads and groups (Megatron-core splits both): 8 groups, and
    // Nano's 2 KV heads, bound it to 2.
    refuses(
        &[
            "check",
            "--model-config",
            nano,
            "--tokens",
            "1e12",
            "--tp",
            "4",
        ],
        "tp = 4 does not divide the 32 attention heads and 2 KV heads",
    );
    let h8 = fixture("nemotron-h-8b-base-8k");
    let h8 = h8.to_str().unwrap();
    // The detailed model costs its blocks on Megatron-core's stack, and refuses by name
    // what it does not cost them under.
    let graded = json(&[
        "check",
        "--model-config",
        h8,
        "--tokens",
        "1e12",
        "--gpus",
        "64",
        "--tp",
        "2",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--json",
    ]);
    let mfu = graded["mfu"].as_f64().unwrap_or_else(|| panic!("{graded}"));
    assert!((0.2..0.7).contains(&mfu), "{mfu}");
    // Under full recomputation (check's default step) the hardware runs every block's
    // forward again, the head's not: HFU/MFU = (4/3·(M − 6·V·h) + 6·V·h)/M with M Megatron-LM's
    // 46.71 GFLOP a token (`model_flops_count_attention_on_its_blocks_and_the_scan_as_megatron_does`).
    assert_eq!(graded["step"]["recompute"], "full");
    let m = model_flops_per_token(&hf::read(&fixture("nemotron-h-8b-base-8k")).unwrap(), 8_192);
    let head = 6.0 * 131_072.0 * 4_096.0;
    let ratio = (4.0 / 3.0 * (m - head) + head) / m;
    let hfu = graded["hfu"].as_f64().unwrap();
    assert!((hfu / mfu - ratio).abs() < 1e-9, "{} {ratio}", hfu / mfu);
    for (flag, value, why) in [
        ("--cp", "2", "1 for nemotron-h-8b-base-8k's hybrid pattern (24 Mamba-2, 4 attention, 24 MLP and 0 MoE blocks)"),
        ("--stack", "torchtitan", "megatron-te for nemotron-h-8b-base-8k's hybrid pattern"),
        ("--schedule", "interleaved:2", "1f1b for nemotron-h-8b-base-8k's hybrid pattern"),
    ] {
        refuses(
            &[
                "check",
                "--model-config",
                h8,
                "--tokens",
                "1e12",
                "--gpus",
                "64",
                "--pp",
                "2",
                "--memory",
                "detailed",
                "--time",
                "detailed",
                flag,
                value,
            ],
            why,
        );
    }
    // Megatron-LM builds it (its MambaModel); torchtitan has no Mamba-2 layers.
    refuses(
        &[
            "export",
            "--format",
            "torchtitan",
            "--model-config",
            h8,
            "--tokens",
            "1e12",
        ],
        "is a hybrid of Mamba-2 and attention blocks",
    );
    // A config whose pattern does not match its layers names the config's key.
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("nemotron-3-nano-30b-a3b")).unwrap())
            .unwrap();
    config["hybrid_override_pattern"] = "MEM*".into();
    let e = hf::parse(
        &config.to_string(),
        std::path::Path::new("nano/config.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(
            "hybrid_override_pattern = MEM*: one character for each of the 52 layers, not 4"
        ),
        "{e}"
    );
    // A search ranks the hybrid with the presets under the plate.
    let out = common::trainplan()
        .args([
            "search",
            "--model-config",
            h8,
            "--models",
            "8b",
            "--gpus",
            "256",
        ])
        .args(["--loss-target", "2.2", "--top", "3"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Nemotron-H-8B") || text.contains("nemotron-h-8b"),
        "{text}"
    );
}
