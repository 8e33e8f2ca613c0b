//! Mixtures of experts planned on the expert grid: `check` grades a layout with expert
//! parallelism, the experts' state is divided as Megatron-core divides it, the days and MFU count
//! the parameters a token goes through, and an MoE of one expert costs what the dense model of
//! that width costs. Every figure below is worked out by hand from the published configs.

mod common;

use common::{json, refuses, trainplan};
use trainplan::cost::chip::flops::model_flops_per_token;
use trainplan::cost::step::detailed::{Detailed, Options};
use trainplan::cost::step::precision::Precision;
use trainplan::cost::step::stack::GradientPrecision;
use trainplan::cost::step::MoeRecompute;
use trainplan::cost::step::Recompute;
use trainplan::cost::step::{Schedule, Step};
use trainplan::cost::step_time::options::TimeOptions;
use trainplan::cost::step_time::step_time;
use trainplan::input::hf;
use trainplan::model::layout::{Degrees, Layout, ZeroStage};
use trainplan::model::{Experts, Shape};
use trainplan::Brief;

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/hf/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn mixtral() -> Shape {
    hf::read(std::path::Path::new(&fixture("mixtral-8x7b-v0.1"))).unwrap()
}

fn brief(gpus: u64) -> Brief {
    Brief {
        gpus,
        ..Brief::default()
    }
}

fn layout(brief: &Brief, shape: &Shape, tp: u64, pp: u64, ep: u64, etp: Option<u64>) -> Layout {
    let degrees = Degrees {
        ep,
        etp,
        ..Degrees::tp_pp(tp, pp)
    };
    Layout::with(brief, shape, degrees, ZeroStage::new(1).unwrap()).unwrap()
}

fn step(tp: u64, recompute: Recompute) -> Step {
    Step {
        micro_batch: 1,
        seq_len: 4096,
        recompute,
        sequence_parallel: tp > 1,
        schedule: Schedule::OneFOneB,
        tp_comm_overlap: false,
        precision: Precision::Bf16,
        global_batch_tokens: 4096 * 256,
    }
}

/// A detailed plan's activations per GPU (GB) and step (seconds).
fn activations_and_step(p: &serde_json::Value) -> (f64, f64) {
    (
        p["memory_gb"]["activations"].as_f64().unwrap(),
        p["step_seconds"].as_f64().unwrap(),
    )
}

fn bare(step: Step) -> Detailed {
    Detailed {
        step,
        options: Options {
            reserve_gb: 0.0,
            fragmentation: 0.0,
            gradients: GradientPrecision::Bf16,
            ..Options::default()
        },
    }
}

#[test]
fn check_grades_mixtral_with_expert_parallelism_and_says_both_counts() {
    let plan = json(&[
        "check",
        "--model-config",
        &fixture("mixtral-8x7b-v0.1"),
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
        "--time",
        "detailed",
        "--json",
    ]);
    assert_eq!(plan["params"], 46_702_792_704u64);
    assert_eq!(plan["active_params"], 12_879_925_248u64);
    assert_eq!(plan["layout"]["ep"], 8);
    assert_eq!(plan["layout"]["etp"], 2);
    assert!(plan["breakdown"]["ep_comm"].as_f64().unwrap() > 0.0);
    // The FLOPs are 6·N_active·D.
    assert_eq!(
        plan["flops"].as_f64().unwrap(),
        6.0 * 12_879_925_248.0 * 1e12
    );
    let text = trainplan()
        .args([
            "check",
            "--model-config",
            &fixture("mixtral-8x7b-v0.1"),
            "--tokens",
            "1e12",
            "--gpus",
            "256",
            "--tp",
            "2",
            "--ep",
            "8",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.starts_with(
            "mixtral-8x7b-v0.1 (46,702,792,704 parameters, 12,879,925,248 active) on 1 T tokens"
        ),
        "{text}"
    );
    assert!(
        text.contains("TP 2 × PP 1 × DP 128 × EP 8, ZeRO 0"),
        "{text}"
    );
}

#[test]
fn a_dense_plan_reads_and_writes_no_expert_fields() {
    let plan = json(&["check", "--model", "8b", "--tokens", "1e12", "--json"]);
    assert!(plan.get("active_params").is_none());
    assert!(plan["layout"].get("ep").is_none() && plan["layout"].get("etp").is_none());
}

#[test]
fn the_experts_state_divides_over_ep_and_etp_and_shards_over_the_expert_data_parallel_group() {
    // Mixtral 8x7B on 64 GPUs, TP 2 (ETP 2, the default), EP 8, ZeRO 1: DP 32 and EDP =
    // 2·32/(2·8) = 4. Attention 2·4096·4096 + 2·4096·1024 = 41,943,040 split over TP; norms
    // 2·4096 and the router 8·4096 whole: 32 × 21,012,480, and the two tables 131,072,000 over
    // TP and the final norm 4,096: Ψ = 803,475,456. Experts 32·8·3·4096·14336 / (EP·ETP = 16)
    // = 2,818,572,288.
    let s = mixtral();
    let b = brief(64);
    let l = layout(&b, &s, 2, 1, 8, None);
    assert_eq!((l.dp, l.expert_dp(), l.etp), (32, 4, 2));
    let m = bare(step(2, Recompute::Full)).memory(&s, &l).unwrap();
    let (psi, experts) = (803_475_456.0, 2_818_572_288.0);
    assert_eq!(m.weights, 2.0 * (psi + experts));
    assert_eq!(m.gradients, 2.0 * (psi + experts));
    assert_eq!(m.optimizer, 12.0 * psi / 32.0 + 12.0 * experts / 4.0);
    // Twice the EP, half the experts on a GPU and half the copies to shard them over: the
    // weights' expert part halves, the optimizer's stays.
    let l16 = layout(&b, &s, 2, 1, 4, Some(1));
    let m16 = bare(step(2, Recompute::Full)).memory(&s, &l16).unwrap();
    assert_eq!(m16.weights, 2.0 * (psi + 2_818_572_288.0 * 4.0));
    assert_eq!(l16.expert_dp(), 16);
}

#[test]
fn model_flops_count_the_k_experts_a_token_goes_through() {
    // 6·N_matrix + 6·L·s·h with N_matrix = 32·(41,943,040 + 8·4096 router + 2·3·4096·14336)
    // + 32000·4096 = 12,748,587,008 (not the 46.7 B of every expert).
    let s = mixtral();
    let per_token = model_flops_per_token(&s, 4096);
    assert_eq!(per_token, 79_712_747_520.0);
}

/// Mixtral's dimensions as a dense model of `ffn`, and as a mixture of `experts` experts of
/// that width, `k` a token.
fn dense_and_moe(experts: u32, k: u32) -> (Shape, Shape) {
    let dense = Shape::new("dense", 32, 4096, 14336, 32, 8, 32000).unwrap();
    let mut moe = dense.clone();
    moe.name = "moe".into();
    moe.experts = Some(Experts::plain(experts, k, 14336));
    (dense, moe)
}

#[test]
fn one_expert_a_token_costs_about_what_the_dense_model_of_its_width_costs() {
    // One expert, routed to by every token, on EP 1: the same matrices as the dense layer,
    // plus a router of h, the dispatch's permutation and the router's probabilities. Its step
    // and memory are the dense model's within a few per cent, and never less. Memory differs
    // most under TP: the expert TP (ETP = TP) gathers every route, and the grouped GEMM keeps
    // its gathered input and the expert's output whole, where a dense layer's sequence
    // parallelism keeps its input split (4h a token at TP 2, 8 % here); and every rank of
    // the expert TP permutes every route into expert order and back (7 % of the step at TP
    // 4, where the dense layer's element-wise work is split four ways).
    let (dense, moe) = dense_and_moe(1, 1);
    let b = brief(64);
    for (tp, recompute) in [
        (1, Recompute::None),
        (2, Recompute::Selective),
        (4, Recompute::Full),
    ] {
        let d = bare(step(tp, recompute));
        let (ld, lm) = (
            layout(&b, &dense, tp, 1, 1, None),
            layout(&b, &moe, tp, 1, 1, None),
        );
        let (md, mm) = (d.memory(&dense, &ld).unwrap(), d.memory(&moe, &lm).unwrap());
        let ratio = mm.total() / md.total();
        assert!((1.0..1.1).contains(&ratio), "memory tp {tp}: {ratio}");
        let machine = b.machine();
        let opts = TimeOptions::default();
        let td = step_time(&machine, &dense, &ld, &d, &opts).unwrap();
        let tm = step_time(&machine, &moe, &lm, &d, &opts).unwrap();
        let ratio = tm.step_seconds / td.step_seconds;
        assert!((1.0..1.1).contains(&ratio), "time tp {tp}: {ratio}");
        // No all-to-all on EP 1; under TP the expert TP's gathers take the place of the MLP's
        // TP collectives.
        if tp == 1 {
            assert_eq!(tm.breakdown.ep_comm, 0.0);
        }
    }
}

#[test]
fn expert_parallelism_across_nodes_costs_all_to_alls_on_the_network() {
    // Mixtral on 64 GPUs, TP 1: EP 8 fits a node (NVLink); EP 8 with ETP... spread 8 apart
    // is not expressible, so compare EP 8 in a node with the same experts over 4 nodes by
    // taking 4 of 8 experts... simplest: 32 experts of a quarter the width, EP 8 and EP 32.
    let (_, mut moe) = dense_and_moe(32, 2);
    moe.experts.as_mut().unwrap().ffn = 3584;
    let b = brief(64);
    let d = bare(step(1, Recompute::Full));
    let machine = b.machine();
    let opts = TimeOptions::default();
    let inside = step_time(&machine, &moe, &layout(&b, &moe, 1, 1, 8, None), &d, &opts).unwrap();
    let across = step_time(&machine, &moe, &layout(&b, &moe, 1, 1, 32, None), &d, &opts).unwrap();
    // Each rank sends its 4096·2 routes of 2·4096 bytes each way: 7/8 of them over NVLink in a
    // node, 24/32 over its NIC across four; the network is slower.
    assert!(across.breakdown.ep_comm > 4.0 * inside.breakdown.ep_comm);
    // The experts' compute is the same work spread over more ranks with fewer experts each.
    let ratio = across.breakdown.compute / inside.breakdown.compute;
    assert!((0.9..1.1).contains(&ratio), "{ratio}");
}

#[test]
fn the_expansion_is_total_over_active_expert_width() {
    // Mixtral: 8 experts at top-2, every layer: 8·f / 2·f = 4.
    assert_eq!(mixtral().expansion(), 4.0);
    // Qwen3-30B-A3B: 128 experts at top-8, no shared expert: 16.
    let qwen = hf::read(std::path::Path::new(&fixture("qwen3-30b-a3b"))).unwrap();
    assert_eq!(qwen.expansion(), 16.0);
    // Llama 4 Maverick: MoE on every second of 48 layers, 128 experts of 8,192 at top-1 beside
    // a shared expert of 8,192; the dense layers' MLPs 16,384 wide:
    // (16,384 + 128·8,192 + 8,192) / (16,384 + 8,192 + 8,192) = 1,073,152 / 32,768 = 32.75.
    let maverick = hf::read(std::path::Path::new(&fixture(
        "llama-4-maverick-17b-128e-instruct",
    )))
    .unwrap();
    assert_eq!(maverick.expansion(), 32.75);
    // A dense model: 1.
    assert_eq!(trainplan::model::preset("70b").unwrap().expansion(), 1.0);
}

#[test]
fn search_ranks_dense_and_moe_shapes_together_under_the_joint_law() {
    let args = [
        "search",
        "--model-config",
        &fixture("mixtral-8x7b-v0.1"),
        "--models",
        "8b,70b",
        "--gpus",
        "256",
        "--max-days",
        "30",
        "--loss-law",
        "ludziejewski",
        "--loss-target",
        "2.0",
        "--distinct",
        "shape",
    ];
    let with_json: Vec<&str> = args.iter().copied().chain(["--json"]).collect();
    let r = json(&with_json);
    let shapes = r["shapes"].as_array().unwrap();
    let mixtral = shapes
        .iter()
        .find(|v| v["model"] == "mixtral-8x7b-v0.1")
        .unwrap();
    assert_eq!(mixtral["params"], 46_702_792_704u64);
    assert_eq!(mixtral["active_params"], 12_879_925_248u64);
    assert_eq!(mixtral["expansion"], 4.0);
    // A dense shape has neither.
    let dense = shapes.iter().find(|v| v["model"] == "llama3-70b").unwrap();
    assert!(dense.get("active_params").is_none() && dense.get("expansion").is_none());
    // The brief names its law's expert terms.
    assert_eq!(r["brief"]["loss_law"]["experts"]["e_max"], 290.4521);
    // Both kinds pass and are ranked in one list, each by its own loss under the one law.
    let brief = Brief {
        loss_law: trainplan::laws::LossLawPreset::Ludziejewski.law(),
        ..Brief::default()
    };
    let plans = r["plans"].as_array().unwrap();
    for model in ["mixtral-8x7b-v0.1", "llama3-70b"] {
        let p = plans.iter().find(|p| p["model"] == model).unwrap();
        let tokens = p["tokens"].as_u64().unwrap() as f64;
        let size = trainplan::laws::LawSize {
            params: p
                .get("active_params")
                .map_or(p["params"].as_f64().unwrap(), |a| a.as_f64().unwrap()),
            expansion: if model == "llama3-70b" { 1.0 } else { 4.0 },
        };
        let loss = p["loss"].as_f64().unwrap();
        assert!((brief.loss(size, tokens) - loss).abs() < 1e-12, "{model}");
    }
    // The text says the two are graded by one law; under the dense default it says how the
    // MoE is graded instead.
    let stdout =
        |args: &[&str]| String::from_utf8(trainplan().args(args).output().unwrap().stdout).unwrap();
    let text = stdout(&args);
    assert!(
        text.contains(
            "dense and MoE shapes graded together by one law in active parameters and experts"
        ),
        "{text}"
    );
    let dense_law: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| *a != "ludziejewski" && *a != "--loss-law")
        .collect();
    let text = stdout(&dense_law);
    assert!(
        text.contains(
            "each MoE as a dense model of its active parameters, an upper bound on its loss"
        ),
        "{text}"
    );
}

#[test]
fn search_tries_every_expert_degree_that_fits_and_reports_it() {
    // 64 GPUs, detailed: the plans name their EP; with --ep 8 --etp 1 every Mixtral plan
    // runs EP 8 with whole experts.
    let r = json(&[
        "search",
        "--model-config",
        &fixture("mixtral-8x7b-v0.1"),
        "--gpus",
        "64",
        "--memory",
        "detailed",
        "--time",
        "detailed",
        "--ep",
        "8",
        "--etp",
        "1",
        "--loss-target",
        "2.3",
        "--json",
    ]);
    let plans = r["plans"].as_array().unwrap();
    assert!(!plans.is_empty());
    for p in plans {
        assert_eq!(p["layout"]["ep"], 8);
        assert_eq!(p["layout"]["etp"], 1);
    }
}

#[test]
fn a_search_over_expert_degrees_grades_each_as_a_search_of_that_degree_alone() {
    // The layouts of EP 1, 2 and ETP 1, 2 are disjoint, so a search over all four grades and
    // passes exactly what the four searches of one (EP, ETP) each do. (The detailed search
    // once kept a slot's stage memory and unsharded time from layout to layout of the same
    // TP, CP, PP and DP whatever their expert degrees, and passed 880,541 Mixtral plans of
    // the 6,563,685 over EP 1, 2, 4 and 8.)
    let mixtral = fixture("mixtral-8x7b-v0.1");
    let counts = |ep: &str, etp: &str| {
        let r = json(&[
            "search",
            "--model-config",
            &mixtral,
            "--gpus",
            "64",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--loss-target",
            "2.3",
            "--ep",
            ep,
            "--etp",
            etp,
            "--json",
        ]);
        (
            r["evaluated"].as_u64().unwrap(),
            r["passing"].as_u64().unwrap(),
        )
    };
    let mut apart = (0, 0);
    for (ep, etp) in [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")] {
        let (evaluated, passing) = counts(ep, etp);
        assert!(passing > 0, "EP {ep}, ETP {etp}");
        apart = (apart.0 + evaluated, apart.1 + passing);
    }
    assert_eq!(counts("1,2", "1,2"), apart);
}

#[test]
fn every_plan_of_a_search_with_experts_is_graded_alike_by_all_and_top() {
    // `--all` keeps a layout's detailed grade for its every token count; it once kept it by
    // TP, PP and ZeRO alone, so every EP and ETP of those took the first's (1,956 of Mixtral's
    // 2,454 plans here graded with another layout's memory).
    let mixtral = fixture("mixtral-8x7b-v0.1");
    let search = |extra: &[&str]| {
        let mut args = vec![
            "search",
            "--model-config",
            &mixtral,
            "--gpus",
            "64",
            "--loss-target",
            "2.1",
            "--tokens-step",
            "1e11",
            "--distinct",
            "plan",
            "--json",
        ];
        args.extend(extra);
        json(&args)["plans"].as_array().unwrap().clone()
    };
    let (all, top) = (search(&["--all"]), search(&["--top", "3000"]));
    assert_eq!(all.len(), top.len());
    let key = |p: &serde_json::Value| (p["layout"].to_string(), p["tokens"].to_string());
    let graded: std::collections::HashMap<_, _> = all
        .iter()
        .map(|p| (key(p), p["runnable"].clone()))
        .collect();
    let eps: std::collections::BTreeSet<String> =
        top.iter().map(|p| p["layout"]["ep"].to_string()).collect();
    assert!(eps.len() > 1, "{eps:?}");
    for p in &top {
        assert_eq!(graded[&key(p)], p["runnable"], "{}", key(p).0);
    }
}

#[test]
fn multi_token_prediction_runs_on_the_last_stage_and_counts_as_megatron_counts_it() {
    use trainplan::cost::step::pipeline::{mtp_on_stage, stage_expert_params, stage_params_with};
    let v3 = hf::read(std::path::Path::new(&fixture("deepseek-v3"))).unwrap();
    let without = Shape {
        mtp: 0,
        ..v3.clone()
    };
    // Model FLOPs a token (Megatron-core's counter): the depth's MoE layer as a token goes
    // through it (attention's five matrices 187,105,280, the router's 1,835,008, the shared
    // expert's and 8 routed experts' 9 · 44,040,192), its projection 2·7,168² and the head's
    // 129,280·7,168 once more, six FLOPs each, and its attention, 6·s·128·(192 + 128)/2.
    let matrices = 187_105_280 + 1_835_008 + 9 * 44_040_192 + 102_760_448 + 926_679_040u64;
    let extra = model_flops_per_token(&v3, 4_096) - model_flops_per_token(&without, 4_096);
    assert_eq!(extra, 6.0 * matrices as f64 + 6.0 * 4_096.0 * 20_480.0);
    // Its report's layout, TP 1 × PP 16 × EP 64: the last of 16 stages runs the depth after
    // its own layers; a GPU of it holds the depth's layer but for 252 of its 256 experts
    // (232,997,120 + 4 · 44,040,192), its projection and norms (102,760,448 + 21,504) and a
    // copy of the embedding the depth reads (926,679,040): 1,438,618,880 parameters more.
    let brief = Brief {
        gpus: 2_048,
        ..Brief::default()
    };
    let layout = layout(&brief, &v3, 1, 16, 64, Some(1));
    assert_eq!(mtp_on_stage(&v3, 15, 16), (1, 1));
    assert_eq!(mtp_on_stage(&v3, 14, 16), (0, 0));
    let held = |shape: &Shape, layers: u64| {
        stage_params_with(shape, 1, layers, layers, false, true)
            + stage_expert_params(shape, &layout, layers)
    };
    assert_eq!(held(&v3, 5) - held(&without, 4), 1_438_618_880.0);
    // Before the last stage nothing changes.
    assert_eq!(
        stage_params_with(&v3, 1, 4, 4, false, false),
        stage_params_with(&without, 1, 4, 4, false, false)
    );
}

#[test]
fn megatron_s_recompute_modules_keep_less_and_cost_what_they_recompute() {
    let mixtral = fixture("mixtral-8x7b-v0.1");
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--model-config",
            &mixtral,
            "--tokens",
            "1e12",
            "--gpus",
            "64",
            "--tp",
            "2",
            "--pp",
            "4",
            "--ep",
            "8",
            "--etp",
            "1",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--recompute",
            "none",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&args)
    };
    let (none, t_none) = activations_and_step(&plan(&[]));
    let (act, t_act) = activations_and_step(&plan(&["--moe-recompute", "act"]));
    let (layer, t_layer) = activations_and_step(&plan(&["--moe-recompute", "layer"]));
    let (norms, t_norms) = activations_and_step(&plan(&["--norm-recompute", "on"]));
    // moe_act drops SwiGLU's output of each route, 2·f_e bytes (BF16). The rank runs
    // R = T·k·ETP/TP = 8,192·2·1/2 = 8,192 routes a micro-batch (balanced), and the first
    // stage holds 8 layers × 4 micro-batches: 8,192 · 2 · 14,336 · 32 / 1e9 = 7.516 GB.
    assert!((none - act - 7.516).abs() < 0.01, "{none} {act}");
    // The whole layer recomputed keeps less still, and costs a forward of the routed part.
    assert!(
        layer < act && t_layer > t_act && t_act > t_none,
        "{layer} {t_layer} {t_act}"
    );
    // The MoE layers' pre-MLP norm output (Transformer Engine fuses the others into their
    // GEMMs): 2h bytes a token over TP 2 (sequence parallel), 8,192 tokens, 32
    // layer-micro-batches: 2·4,096·8,192/2·32 / 1e9 = 1.074 GB; its time left out.
    assert!((none - norms - 1.074).abs() < 0.01, "{none} {norms}");
    assert_eq!(t_norms, t_none);
}

#[test]
fn recomputing_latent_attention_s_up_projections_frees_their_outputs_for_a_forward_of_them() {
    let v3 = fixture("deepseek-v3");
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--model-config",
            &v3,
            "--tokens",
            "1e12",
            "--gpus",
            "256",
            "--pp",
            "4",
            "--ep",
            "64",
            "--seq-len",
            "4096",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--recompute",
            "selective",
            "--json",
        ];
        args.extend_from_slice(extra);
        json(&args)
    };
    let (kept, t_kept) = activations_and_step(&plan(&[]));
    let (up, t_up) = activations_and_step(&plan(&["--latent-recompute", "on"]));
    // Each layer-micro-batch frees Q (128·192), K (128·192) and V (128·128) and the
    // up-projections' inputs (1,536 + 512), BF16, on 4,096 tokens: 4,096 · 2 · (65,536 +
    // 2,048) = 553.648128 MB; a whole number of them.
    let layers = (kept - up) / 0.553_648_128;
    assert!(
        layers > 1.0 && (layers - layers.round()).abs() < 1e-6,
        "{kept} {up}"
    );
    assert!(t_up > t_kept, "{t_up} {t_kept}");
    // A model without latent attention has nothing for it to recompute.
    refuses(
        &[
            "check",
            "--model",
            "8b",
            "--tokens",
            "1e12",
            "--gpus",
            "64",
            "--memory",
            "detailed",
            "--latent-recompute",
            "on",
        ],
        "--latent-recompute = on: off for llama3-8b, which has no latent attention",
    );
}

#[test]
fn a_family_ranges_over_experts_top_k_and_granularity_and_names_them_back() {
    // 32 layers of Llama 3 8B's width as E = 1 (dense) and 8, k = 1 and 2, G = 1 and 4: the
    // dense shape once, and for E = 8 each (k, G): E·G experts of 14,336/G, k·G a token.
    let r = json(&[
        "search",
        "--models",
        "70b",
        "--layers",
        "32",
        "--hidden",
        "4096",
        "--ffn-ratio",
        "3.5",
        "--experts",
        "1..8:7",
        "--top-k",
        "1..2",
        "--granularity",
        "1..4:3",
        "--gpus",
        "64",
        "--json",
    ]);
    let names: Vec<&str> = r["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["model"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "llama3-70b",
            "L32-h4096-f14336",
            "L32-h4096-f14336-e8k1w14336",
            "L32-h4096-f14336-e32k4w3584",
            "L32-h4096-f14336-e8k2w14336",
            "L32-h4096-f14336-e32k8w3584",
        ]
    );
    // A name reads back as its shape: Mixtral's experts on Llama 3's vocabulary, Mixtral's
    // 46,702,792,704 parameters and 12,879,925,248 active plus both embeddings' 96,256 more
    // rows: 2·96,256·4,096 = 788,529,152.
    let plan = json(&[
        "check",
        "--model",
        "L32-h4096-f14336-e8k2w14336",
        "--tokens",
        "1e12",
        "--gpus",
        "64",
        "--ep",
        "8",
        "--json",
    ]);
    assert_eq!(plan["params"], 46_702_792_704u64 + 788_529_152);
    assert_eq!(plan["active_params"], 12_879_925_248u64 + 788_529_152);
}

#[test]
fn shards_of_a_search_with_experts_merge_into_the_whole_search() {
    let dir = tempfile::tempdir().unwrap();
    let mixtral = fixture("mixtral-8x7b-v0.1");
    let args = [
        "search",
        "--model-config",
        &mixtral,
        "--models",
        "8b,70b",
        "--gpus",
        "256",
        "--max-days",
        "30",
        "--loss-law",
        "ludziejewski",
        "--loss-target",
        "2.0",
    ];
    let stdout = |extra: &[&str]| {
        let out = trainplan().args(args).args(extra).output().unwrap();
        assert!(out.status.success());
        out.stdout
    };
    let mut files = Vec::new();
    for shard in ["1/2", "2/2"] {
        let path = dir.path().join(shard.replace('/', "-"));
        std::fs::write(&path, stdout(&["--shard", shard])).unwrap();
        files.push(path);
    }
    let merged = trainplan().arg("merge").args(&files).output().unwrap();
    assert_eq!(merged.stdout, stdout(&[]));
}

#[test]
fn the_megatron_launcher_writes_the_expert_grid_dispatcher_overlap_and_recompute_modules() {
    let mixtral = fixture("mixtral-8x7b-v0.1");
    let out = trainplan()
        .args([
            "export",
            "--format",
            "megatron",
            "--model-config",
            &mixtral,
            "--tokens",
            "1e12",
            "--gpus",
            "64",
            "--tp",
            "2",
            "--pp",
            "4",
            "--ep",
            "8",
            "--etp",
            "1",
            "--memory",
            "detailed",
            "--time",
            "detailed",
            "--recompute",
            "none",
            "--schedule",
            "interleaved:2",
            "--moe-recompute",
            "act",
            "--norm-recompute",
            "on",
            "--ep-dispatcher",
            "deepep",
            "--ep-overlap",
            "on",
        ])
        .output()
        .unwrap();
    let script = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--num-experts 8",
        "--moe-router-topk 2",
        "--moe-ffn-hidden-size 14336",
        "--expert-model-parallel-size 8",
        "--expert-tensor-parallel-size 1",
        "--moe-grouped-gemm",
        "--moe-token-dispatcher-type flex",
        "--moe-enable-deepep",
        "--overlap-moe-expert-parallel-comm",
        "--recompute-granularity selective",
        "--recompute-modules layernorm moe_act",
    ] {
        assert!(script.contains(flag), "{flag} missing:\n{script}");
    }
}

#[test]
fn moe_recomputation_repeats_the_shared_experts_tp_collectives() {
    // Megatron-core's `moe` module checkpoints the shared experts with the routed ones, so
    // under sequence parallelism their all-gather and reduce-scatter run again: each MoE layer
    // of Mixtral given shared experts has five all-reduces' worth of TP collectives instead of
    // four (attention's and the shared experts', forward and backward); without shared experts
    // only attention's two remain either way.
    let b = brief(16);
    let machine = b.machine();
    let opts = TimeOptions::default();
    let tp_comm = |shared: u64, moe: MoeRecompute| {
        let mut shape = mixtral();
        shape.experts.as_mut().unwrap().shared_ffn = shared;
        let mut d = bare(step(2, Recompute::None));
        d.options.moe_recompute = moe;
        let l = layout(&b, &shape, 2, 1, 8, Some(1));
        step_time(&machine, &shape, &l, &d, &opts)
            .unwrap()
            .breakdown
            .tp_comm
    };
    let ratio = tp_comm(14_336, MoeRecompute::Layer) / tp_comm(14_336, MoeRecompute::None);
    assert!((ratio - 1.25).abs() < 1e-12, "{ratio}");
    assert_eq!(
        tp_comm(0, MoeRecompute::Layer),
        tp_comm(0, MoeRecompute::None)
    );
}

#[test]
fn moe_recomputation_counts_the_mlp_forward_again_in_hardware_flops() {
    // Mixtral's MoE layer multiplies each token by its router (4,096 × 8) and two experts
    // (3 × 4,096 × 14,336 each): 352,354,304 parameters, which `moe` recomputation runs again
    // in all 32 layers, 2 FLOPs each: 22,550,675,456 more hardware FLOPs a token. HFU/MFU is
    // hardware over model FLOPs a token, so the two runs' ratios differ by that over the
    // model's FLOPs a token.
    let shape = mixtral();
    let b = brief(16);
    let machine = b.machine();
    let opts = TimeOptions::default();
    let ratio = |moe: MoeRecompute| {
        let mut d = bare(step(2, Recompute::None));
        d.options.moe_recompute = moe;
        let l = layout(&b, &shape, 2, 1, 8, Some(1));
        let t = step_time(&machine, &shape, &l, &d, &opts).unwrap();
        t.hfu / t.mfu
    };
    let model = model_flops_per_token(&shape, 4096);
    let more = (ratio(MoeRecompute::Layer) - ratio(MoeRecompute::None)) * model;
    assert!((more / 22_550_675_456.0 - 1.0).abs() < 1e-9, "{more}");
}

#[test]
fn deepseek_v3_routes_in_groups_and_a_launcher_that_differs_is_named() {
    // DeepSeek-V3's config: 256 experts in n_group 8, a token's 8 from topk_group 4; Kimi K2
    // takes its one group whole, so routes over all.
    let v3 = hf::read(std::path::Path::new(&fixture("deepseek-v3"))).unwrap();
    let groups = v3.experts.as_ref().unwrap().groups.unwrap();
    assert_eq!((groups.count, groups.per_token), (8, 4));
    let k2 = hf::read(std::path::Path::new(&fixture("kimi-k2-instruct"))).unwrap();
    assert_eq!(k2.experts.unwrap().groups, None);
    // A launch script routing Mixtral in groups is not the model's routing: named. The script
    // is Mixtral's own export with the two options added.
    let mixtral = fixture("mixtral-8x7b-v0.1");
    let exported = trainplan()
        .args(["export", "--format", "megatron", "--model-config", &mixtral])
        .args([
            "--tokens", "1e12", "--gpus", "64", "--tp", "2", "--pp", "4", "--ep", "8",
        ])
        .args(["--memory", "detailed", "--time", "detailed"])
        .output()
        .unwrap();
    let script = String::from_utf8(exported.stdout).unwrap().replace(
        "--moe-router-topk 2",
        "--moe-router-topk 2 --moe-router-num-groups 4 --moe-router-group-topk 2",
    );
    assert!(script.contains("--moe-router-num-groups 4"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train.sh");
    std::fs::write(&path, script).unwrap();
    let out = trainplan()
        .args([
            "check",
            "--from",
            path.to_str().unwrap(),
            "--model-config",
            &mixtral,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the model routes in groups none, the file 2 of 4"),
        "{err}"
    );
}
