//! `search --shard I/N` and `merge`: the merged report of every shard equals, byte for byte,
//! the report of one run over all the shapes.

use assert_cmd::Command;

fn trainplan(dir: &std::path::Path) -> Command {
    let mut c = Command::cargo_bin("trainplan").unwrap();
    c.current_dir(dir);
    c
}

/// A run's stdout and its Pareto file.
type Output = (Vec<u8>, Vec<u8>);

/// Runs `search ARGS` as `shards` shards and merges them; returns (merged, single) outputs of
/// `OUTPUT` (report arguments such as `--json`), front files included.
fn sharded_and_single(args: &[&str], shards: u64, output: &[&str]) -> (Output, Output) {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 1..=shards {
        let shard = format!("{i}/{shards}");
        let out = trainplan(dir.path())
            .arg("search")
            .args(args)
            .args(["--shard", &shard])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = format!("part{i}.json");
        std::fs::write(dir.path().join(&file), out.stdout).unwrap();
        files.push(file);
    }
    files.reverse(); // the order of the files does not matter
    let merged = trainplan(dir.path())
        .arg("merge")
        .args(&files)
        .args(output)
        .args(["--pareto", "m.json"])
        .output()
        .unwrap();
    assert!(
        merged.status.code().unwrap() < 2,
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let single = trainplan(dir.path())
        .arg("search")
        .args(args)
        .args(output)
        .args(["--pareto", "s.json"])
        .output()
        .unwrap();
    let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
    (
        (merged.stdout, read("m.json")),
        (single.stdout, read("s.json")),
    )
}

#[test]
fn three_shards_of_the_default_brief_merge_into_the_single_run() {
    let (merged, single) = sharded_and_single(&[], 3, &[]);
    assert_eq!(merged, single);
    let (merged, single) = sharded_and_single(&["--all"], 2, &["--json"]);
    assert_eq!(merged, single);
}

#[test]
fn shards_of_a_family_ranked_by_days_merge_into_the_single_run() {
    let family = [
        "--layers",
        "40..120:16",
        "--hidden",
        "6144..16384:2048",
        "--ffn-ratio",
        "3..4:0.5",
        "--rank",
        "days",
        "--top",
        "7",
    ];
    let (merged, single) = sharded_and_single(&family, 4, &["--json"]);
    assert_eq!(merged, single);
}

#[test]
fn shards_under_the_detailed_models_merge_into_the_single_run() {
    let detailed = [
        "--models", "70b,405b", "--memory", "detailed", "--time", "detailed", "--rank", "memory",
        "--top", "5",
    ];
    let (merged, single) = sharded_and_single(&detailed, 2, &[]);
    assert_eq!(merged, single);
    // With the exact front, whose run ends the merge grades again under the shards' time model.
    let exact = [
        "--models", "70b,405b", "--memory", "detailed", "--time", "detailed", "--exact", "--top",
        "3",
    ];
    let (merged, single) = sharded_and_single(&exact, 2, &[]);
    assert_eq!(merged, single);
}

/// Two shards of `search` with `extra`, `file` of them edited (`from` → `to`, once; `file`
/// holding `holds` first), then merged: the merge's stderr, after checking it exits 2.
fn merge_edited(extra: &[&str], file: &str, holds: &str, from: &str, to: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    for i in 1..=2 {
        let out = trainplan(dir.path())
            .arg("search")
            .args(extra)
            .args(["--shard", &format!("{i}/2")])
            .output()
            .unwrap();
        std::fs::write(dir.path().join(format!("p{i}.json")), out.stdout).unwrap();
    }
    let path = dir.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(holds));
    let edited = text.replacen(from, to, 1);
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    let out = trainplan(dir.path())
        .args(["merge", "p1.json", "p2.json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}

#[test]
fn a_partial_file_with_a_broken_exact_front_is_refused() {
    // A shape whose heads do not divide its hidden size.
    let err = merge_edited(
        &["--exact"],
        "p2.json",
        "\"exact_front\"",
        "\"heads\": 64",
        "\"heads\": 63",
    );
    assert!(err.contains("heads") && err.lines().count() == 1, "{err}");
}

#[test]
fn a_partial_file_of_another_version_is_refused_by_name() {
    let err = merge_edited(
        &[],
        "p1.json",
        "\"kind\"",
        "\"schema_version\": 4",
        "\"schema_version\": 1",
    );
    assert!(
        err.contains("p1.json: schema_version = 1") && err.contains("run the shard again"),
        "{err}"
    );
}

#[test]
fn a_missing_shard_or_a_different_search_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (file, args) in [
        ("a.json", vec!["--shard", "1/2"]),
        ("b.json", vec!["--shard", "2/2", "--gpus", "1024"]),
        ("c.json", vec!["--shard", "2/2"]),
    ] {
        let out = trainplan(dir.path())
            .arg("search")
            .args(&args)
            .output()
            .unwrap();
        std::fs::write(dir.path().join(file), out.stdout).unwrap();
    }
    let merge = |files: &[&str]| {
        trainplan(dir.path())
            .arg("merge")
            .args(files)
            .output()
            .unwrap()
    };
    for (files, needle) in [
        (vec!["a.json"], "each of the 2 shards once"),
        (vec!["a.json", "b.json"], "partial files of one search"),
        (
            vec!["a.json", "a.json", "c.json"],
            "each of the 2 shards once",
        ),
        (vec!["missing.json"], "cannot read 'missing.json'"),
    ] {
        let out = merge(&files);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{files:?}: {err}");
        assert!(
            err.contains(needle) && err.lines().count() == 1,
            "{files:?}: {err}"
        );
    }
    assert!(merge(&["a.json", "c.json"]).status.code().unwrap() < 2);
}

#[test]
fn shards_of_an_exact_ranking_merge_into_the_single_run() {
    let family = [
        "--layers",
        "40..120:20",
        "--hidden",
        "8192..16384:4096",
        "--ffn-ratio",
        "3.5",
        "--exact",
        "--top",
        "4",
    ];
    let (merged, single) = sharded_and_single(&family, 3, &["--json"]);
    assert_eq!(merged, single);
    // The exact front is in the Pareto file, and the shards' runs met in the merge: the front
    // passes between shapes that different shards searched.
    let front: serde_json::Value = serde_json::from_slice(&single.1).unwrap();
    let runs = front["exact_front"]["runs"].as_array().unwrap();
    let models: std::collections::BTreeSet<&str> = runs
        .iter()
        .map(|r| r["first"]["model"].as_str().unwrap())
        .collect();
    assert!(models.len() > 1, "{models:?}");
}

#[test]
fn a_partial_file_that_keeps_no_plans_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = trainplan(dir.path())
        .args(["search", "--models", "8b", "--shard", "1/1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let none = text.replacen("\"top\": 10", "\"top\": 0", 1);
    assert_ne!(none, text);
    std::fs::write(dir.path().join("p.json"), none).unwrap();
    let out = trainplan(dir.path())
        .args(["merge", "p.json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "error: invalid top = 0: a whole number ≥ 1, or null for every plan\n"
    );
}

#[test]
fn shards_of_an_exact_search_whose_windows_miss_the_grid_merge_into_the_single_run() {
    // 405B passes from 817.7 B to 862.4 B tokens, between two counts of a grid in steps of
    // 10^12: no count of the grid passes, yet the exact search has plans, which a merge once
    // refused as more plans than passed.
    let exact = ["--models", "405b", "--exact", "--tokens-step", "1e12"];
    let (merged, single) = sharded_and_single(&exact, 2, &["--json"]);
    assert_eq!(merged, single);
}

#[test]
fn shards_whose_plans_differ_only_in_cp_or_experts_merge_into_the_single_run() {
    // Plans of one shape, tokens, TP, PP, ZeRO and step that differ in their CP degree (or
    // their EP, ETP or replicas) are different plans: a merge once took them for one.
    let cp = [
        "--models",
        "70b",
        "--memory",
        "detailed",
        "--cp",
        "1,2,4",
        "--seq-len",
        "32768",
        "--gpus",
        "4096",
        "--distinct",
        "plan",
        "--top",
        "20",
        "--rank",
        "days",
    ];
    let (merged, single) = sharded_and_single(&cp, 1, &[]);
    assert_eq!(merged, single);
    let mixtral = format!(
        "{}/tests/fixtures/hf/mixtral-8x7b-v0.1/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let experts = [
        "--model-config",
        &mixtral,
        "--gpus",
        "256",
        "--loss-law",
        "ludziejewski",
        "--loss-target",
        "2.0",
        "--distinct",
        "plan",
        "--top",
        "50",
        "--rank",
        "memory",
    ];
    let (merged, single) = sharded_and_single(&experts, 2, &["--json"]);
    assert_eq!(merged, single);
}

/// Shard 1 of 2 of `search ARGS`, edited by `edit` as JSON, merged with shard 2: the merge's
/// one line of stderr, after checking it exits 2 with nothing on stdout.
fn refused(args: &[&str], edit: impl Fn(&mut serde_json::Value)) -> String {
    let dir = tempfile::tempdir().unwrap();
    for i in 1..=2 {
        let out = trainplan(dir.path())
            .arg("search")
            .args(args)
            .args(["--shard", &format!("{i}/2")])
            .output()
            .unwrap();
        assert!(out.status.success());
        std::fs::write(dir.path().join(format!("p{i}.json")), out.stdout).unwrap();
    }
    let path = dir.path().join("p1.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let before = value.clone();
    edit(&mut value);
    assert_ne!(value, before, "the edit changed nothing");
    std::fs::write(&path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let out = trainplan(dir.path())
        .args(["merge", "p1.json", "p2.json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// The default search's first plan (405B on 860 B tokens, TP 2, ZeRO 3) and front, in shard 1.
const DEFAULT: &[&str] = &[];

fn first_plan(v: &mut serde_json::Value) -> &mut serde_json::Value {
    &mut v["plans"][0]["plan"]
}

#[test]
fn a_loss_below_the_law_s_floor_or_off_the_law_is_refused_by_file_and_value() {
    let err = refused(DEFAULT, |v| first_plan(v)["loss"] = 1.5.into());
    assert_eq!(
        err,
        "error: invalid p1.json: plans[0].plan.loss = 1.5: at least 1.863988, the floor of the partial's loss law for llama3-405b: no number of tokens trains below it (1.953335 on 860,000,000,000 tokens)\n"
    );
    // Above the floor but not what the law gives for the tokens.
    let err = refused(DEFAULT, |v| v["front"][2]["plan"]["loss"] = 1.9.into());
    assert!(
        err.contains("p1.json: front[2].plan.loss = 1.9: 1.954108, the partial's loss law for llama3-405b on 840,000,000,000 tokens"),
        "{err}"
    );
    // A verdict's floor is the law's too.
    let err = refused(DEFAULT, |v| {
        v["shapes"][1]["verdict"]["loss_floor"] = 1.5.into()
    });
    assert!(
        err.contains("p1.json: shapes[1].verdict.loss_floor = 1.5: 1.863988"),
        "{err}"
    );
}

#[test]
fn a_layout_the_machine_does_not_allow_is_refused_by_file_and_value() {
    let err = refused(DEFAULT, |v| first_plan(v)["layout"]["tp"] = 3.into());
    assert_eq!(
        err,
        "error: invalid p1.json: plans[0].plan.layout = TP 3 × PP 1 × DP 1,024, ZeRO 3: a layout the brief's machine (2,048 GPUs, 8 a node) allows for llama3-405b: tp = 3 must divide the 8 GPUs per node (TP stays inside a node)\n"
    );
    // DP is what the others leave of the GPUs.
    let err = refused(DEFAULT, |v| first_plan(v)["layout"]["dp"] = 512.into());
    assert!(
        err.contains("DP is what TP × CP × PP leave of the brief's 2,048 GPUs"),
        "{err}"
    );
    // A shape's own rules, where its name gives it: 405B has 126 layers.
    let err = refused(DEFAULT, |v| {
        first_plan(v)["layout"]["pp"] = 256.into();
        first_plan(v)["layout"]["dp"] = 4.into();
    });
    assert!(
        err.contains("pp = 256 must be between 1 and the 126 layers"),
        "{err}"
    );
    // A model from a config file, whose shape the partial does not carry: the machine's rules.
    let mixtral = format!(
        "{}/tests/fixtures/hf/mixtral-8x7b-v0.1/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let args = [
        "--model-config",
        &mixtral,
        "--gpus",
        "256",
        "--loss-law",
        "ludziejewski",
        "--loss-target",
        "2.0",
    ];
    let err = refused(&args, |v| v["front"][0]["plan"]["layout"]["tp"] = 3.into());
    assert!(
        err.contains("p1.json: front[0].plan.layout = TP 3 ")
            && err.contains("tp = 3 must divide the 8 GPUs per node"),
        "{err}"
    );
}

#[test]
fn a_plan_that_does_not_pass_or_whose_numbers_are_not_its_own_is_refused() {
    let err = refused(DEFAULT, |v| {
        first_plan(v)["memory_gb"]["total"] = 10.0.into()
    });
    assert!(
        err.contains("plans[0].plan.memory_gb.total = 10: 20.082 GB, what the plate's memory model gives llama3-405b"),
        "{err}"
    );
    let err = refused(DEFAULT, |v| first_plan(v)["days"] = 3.0.into());
    assert!(
        err.contains("plans[0].plan.days = 3: 29.917059, 6·N·D"),
        "{err}"
    );
    let err = refused(DEFAULT, |v| first_plan(v)["pass"] = false.into());
    assert!(err.contains("a partial keeps passing plans only"), "{err}");
    let err = refused(DEFAULT, |v| {
        first_plan(v)["tokens"] = 860_000_000_001u64.into()
    });
    assert!(
        err.contains("plans[0].plan.tokens = 860,000,000,001: a count of the grid"),
        "{err}"
    );
    let err = refused(DEFAULT, |v| v["plans"][0]["shape_index"] = 1.into());
    assert!(
        err.contains("plans[0].shape_index = 1: the place of a shape this shard holds: shard 1/2 holds places 0, 2"),
        "{err}"
    );
}

#[test]
fn a_plan_given_twice_is_refused() {
    let err = refused(DEFAULT, |v| v["plans"][1] = v["plans"][0].clone());
    assert_eq!(
        err,
        "error: invalid p1.json: plans[1] = llama3-405b on 860,000,000,000 tokens, TP 2 × PP 1 × DP 1,024, ZeRO 3: each plan once: it is plans[0] too\n"
    );
    let err = refused(DEFAULT, |v| {
        let first = v["front"][0].clone();
        v["front"].as_array_mut().unwrap().insert(1, first);
    });
    assert!(
        err.contains("front[1] = ") && err.contains("it is front[0] too"),
        "{err}"
    );
}

#[test]
fn a_front_cut_short_or_out_of_order_is_refused() {
    let front = |v: &mut serde_json::Value| v["front"].as_array_mut().unwrap().clone();
    // The end, where the first plan by loss is.
    let err = refused(DEFAULT, |v| {
        let mut f = front(v);
        f.pop();
        v["front"] = f.into();
    });
    assert!(
        err.contains(
            "p1.json: front = 4 points: a front that reaches every plan the partial keeps"
        ),
        "{err}"
    );
    // The beginning, where the shape's first passing count of the grid is.
    let err = refused(DEFAULT, |v| {
        let mut f = front(v);
        f.remove(0);
        v["front"] = f.into();
    });
    assert_eq!(
        err,
        "error: invalid p1.json: front = 4 points: a front that reaches llama3-405b's passing plan on 820,000,000,000 tokens (28.526 days, loss 1.954906); search --shard writes the whole front\n"
    );
    let err = refused(DEFAULT, |v| {
        let mut f = front(v);
        f.reverse();
        v["front"] = f.into();
    });
    assert!(
        err.contains("front[1].plan = ")
            && err.contains("a front sorted by days rising and loss falling"),
        "{err}"
    );
    // An exact front as long as it says: all its runs, or exactly the first 10,000.
    let exact = ["--models", "70b,405b", "--exact"];
    let err = refused(&exact, |v| v["exact_front"]["complete"] = false.into());
    assert!(
        err.contains(
            "exact_front.runs = 1 runs: the first 10000 of the shard's front: complete is false"
        ),
        "{err}"
    );
    let err = refused(&exact, |v| v["exact_front"]["runs"] = serde_json::json!([]));
    assert!(
        err.contains("exact_front.runs = 0 runs: runs from the fastest passing plan of any shape"),
        "{err}"
    );
}

#[test]
fn counts_that_do_not_add_up_are_refused() {
    let err = refused(DEFAULT, |v| {
        let plans = v["plans"].as_array().unwrap()[..3].to_vec();
        v["plans"] = plans.into();
    });
    assert_eq!(
        err,
        "error: invalid p1.json: plans = 3: 10, the best 10 of the 66 passing choices the partial counts (choices)\n"
    );
    let err = refused(DEFAULT, |v| {
        v["evaluated"] = (v["evaluated"].as_u64().unwrap() + 1).into()
    });
    assert!(
        err.contains("evaluated = 1040001: a multiple of the grid's 5,000 token counts"),
        "{err}"
    );
    // One verdict for each of the shard's shapes, each once.
    let err = refused(DEFAULT, |v| {
        let twice = v["shapes"][1].clone();
        v["shapes"].as_array_mut().unwrap().push(twice);
    });
    assert!(
        err.contains(
            "shapes[2].index = 2: no verdict: shard 1/2 holds places 0, 2 of the search's 3 shapes"
        ),
        "{err}"
    );
    let err = refused(DEFAULT, |v| {
        v["shapes"].as_array_mut().unwrap().pop();
    });
    assert!(
        err.contains("shapes = 1 verdicts: 2: shard 1/2 holds"),
        "{err}"
    );
}

#[test]
fn a_key_search_does_not_write_is_refused_by_its_path() {
    let err = refused(DEFAULT, |v| first_plan(v)["colour"] = "red".into());
    assert!(
        err.starts_with(
            "error: cannot parse 'p1.json': not a partial search result: plans[0].plan.colour: unknown field: trainplan writes no such key here at line "
        ),
        "{err}"
    );
    let err = refused(DEFAULT, |v| v["brief"]["gpux"] = 8.into());
    assert!(err.contains("brief.gpux: unknown field"), "{err}");
    // At the top, and with `null`, which reads as absent only for a key trainplan writes.
    let err = refused(DEFAULT, |v| v["note"] = serde_json::Value::Null);
    assert!(
        err.contains("not a partial search result: note: unknown field"),
        "{err}"
    );
}

#[test]
fn a_hand_edited_shard_count_or_shape_count_is_refused_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let out = trainplan(dir.path())
        .args(["search", "--models", "405b", "--shard", "1/1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let merge = |name: &str, edited: String| {
        assert_ne!(edited, text);
        std::fs::write(dir.path().join(name), edited).unwrap();
        let out = trainplan(dir.path())
            .args(["merge", name])
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{err}");
        err
    };
    // The list of every shard was made to compare with: 2^64 − 1 of them did not fit.
    let huge = text.replacen(
        "\"shard\": [\n    1,\n    1\n  ]",
        "\"shard\": [1, 18446744073709551615]",
        1,
    );
    let err = merge("huge.json", huge);
    assert_eq!(
        err,
        "error: invalid merge = shards [1]: each of the 18446744073709551615 shards once\n"
    );
    let shapes = text.replacen(
        "\"shapes_total\": 1,",
        "\"shapes_total\": 1000000000000000,",
        1,
    );
    let err = merge("shapes.json", shapes);
    assert!(
        err.contains("shapes = 1 verdicts: 1000000000000000: shard 1/1 holds places 0, 1, 2, … of the search's 1000000000000000 shapes"),
        "{err}"
    );
}
