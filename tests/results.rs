//! `results/` holds what the tool writes for the default brief. These tests regenerate it and
//! compare byte for byte, so the committed files can never drift from the code. To refresh:
//! `cargo run --release -- search --pareto results/default-front.json > results/default-summary.txt`

mod common;

use common::trainplan;

#[test]
fn results_hold_the_default_brief_s_summary_and_front_as_the_tool_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let front = dir.path().join("front.json");
    let out = trainplan()
        .args(["search", "--pareto"])
        .arg(&front)
        .output()
        .unwrap();
    assert!(out.status.success());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let summary = std::fs::read_to_string(root.join("default-summary.txt")).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        summary,
        "results/default-summary.txt is stale"
    );
    let committed = std::fs::read_to_string(root.join("default-front.json")).unwrap();
    assert_eq!(
        std::fs::read_to_string(&front).unwrap(),
        committed,
        "results/default-front.json is stale"
    );
}

/// Where each example's real output is shown: the README shows the default brief, the starting
/// plan and the family sweep; `docs/guide.md` shows every command's output.
const SHOWN: [(&str, &[&str]); 18] = [
    ("tests/snapshots/search-1536.txt", &["README.md"]),
    ("results/default-summary.txt", &["README.md"]),
    ("results/family-summary.txt", &["docs/guide.md"]),
    ("tests/snapshots/check-start.txt", &["docs/guide.md"]),
    (
        "tests/snapshots/check-405b-detailed.txt",
        &["docs/guide.md"],
    ),
    ("tests/snapshots/check-70b-time.txt", &["docs/guide.md"]),
    (
        "tests/snapshots/search-configs-h200.txt",
        &["docs/guide.md"],
    ),
    ("tests/snapshots/brief-h200.toml", &["docs/guide.md"]),
    ("tests/snapshots/search-top5.md", &["docs/guide.md"]),
    ("tests/snapshots/export-megatron.txt", &["docs/guide.md"]),
    ("tests/snapshots/export-deepspeed.json", &["docs/guide.md"]),
    ("tests/snapshots/export-torchtitan.toml", &["docs/guide.md"]),
    ("tests/snapshots/check-sensitivity.txt", &["docs/guide.md"]),
    (
        "tests/snapshots/search-4096-sensitivity.txt",
        &["docs/guide.md"],
    ),
    ("tests/snapshots/search-131k-cp.txt", &["docs/guide.md"]),
    ("tests/snapshots/search-fp8.txt", &["docs/guide.md"]),
    ("tests/snapshots/check-70b-cost.txt", &["docs/guide.md"]),
    ("tests/snapshots/search-cost.txt", &["docs/guide.md"]),
];

/// Asserts that the document `doc` (relative to the crate) holds `output`, the text of `shown`.
fn assert_shows(doc: &str, shown: &str, output: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(doc)).unwrap();
    assert!(
        !output.trim().is_empty(),
        "{shown} is empty, so no document can show it"
    );
    assert!(
        text.contains(output),
        "{doc} does not show the current {shown}"
    );
}

#[test]
fn the_readme_and_the_docs_show_the_real_output_of_their_examples() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (shown, docs) in SHOWN {
        let output = std::fs::read_to_string(root.join(shown)).unwrap();
        for doc in docs {
            assert_shows(doc, shown, &output);
        }
    }
}

#[test]
fn results_hold_the_default_brief_s_exact_search_as_the_tool_writes_it() {
    let out = trainplan().args(["search", "--exact"]).output().unwrap();
    assert!(out.status.success());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let summary = std::fs::read_to_string(root.join("default-exact-summary.txt")).unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out, summary, "results/default-exact-summary.txt is stale");
    // The exact front is one run of 70B from the fewest tokens that reach the target to the
    // most the month allows, the ends of its window.
    assert!(out.contains("exact pareto front over every whole token count: 1 run,"));
}

#[test]
fn results_hold_the_family_sweep_as_the_tool_writes_it() {
    let out = trainplan()
        .arg("search")
        .args(common::FAMILY_SWEEP)
        .args(["--top", "3"])
        .output()
        .unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(root.join("results/family-summary.txt")).unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        committed,
        "results/family-summary.txt is stale"
    );
    assert_shows("docs/guide.md", "results/family-summary.txt", &committed);
}

#[test]
fn the_readme_is_a_front_door_with_the_two_commands_first() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.len() <= 15 * 1024,
        "README.md is {} bytes; reference material belongs in docs/",
        readme.len()
    );
    // The first code block is the quick start: the default brief, then the tests.
    let block = readme
        .split("```")
        .nth(1)
        .expect("a code block in README.md");
    let commands: Vec<&str> = block
        .lines()
        .skip(1)
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["cargo run --release -- search", "cargo test"]);
}

#[test]
fn every_relative_link_of_the_readme_and_the_docs_names_a_file_that_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut guides: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    assert!(
        guides.len() >= 5,
        "docs/ holds the guide, model, JSON, validation and workshop"
    );
    docs.extend(guides);
    let mut broken = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for (_, rest) in text.match_indices("](").map(|(i, _)| text.split_at(i + 2)) {
            let target = rest.split(')').next().unwrap();
            let file = target.split('#').next().unwrap();
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            if !doc.parent().unwrap().join(file).exists() {
                broken.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to missing files:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_readme_s_filtered_export_is_the_real_export_filtered() {
    // The README shows `trainplan export … | grep -E '…'`: its lines are exactly the lines of
    // the committed export (tests/snapshots/export-70b-megatron.txt) that the pattern's words
    // pick out, in order.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let export =
        std::fs::read_to_string(root.join("tests/snapshots/export-70b-megatron.txt")).unwrap();
    let command = "$ trainplan export --format megatron --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1 -q | grep -E '";
    let start = readme
        .find(command)
        .expect("the README shows the filtered export");
    let block = &readme[start..readme[start..].find("```").unwrap() + start];
    let mut lines = block.lines();
    let words: Vec<&str> = lines
        .next()
        .unwrap()
        .rsplit_once("grep -E '")
        .unwrap()
        .1
        .trim_end_matches('\'')
        .split('|')
        .collect();
    let shown: Vec<&str> = lines.collect();
    let want: Vec<&str> = export
        .lines()
        .filter(|l| words.iter().any(|w| l.contains(w)))
        .collect();
    assert_eq!(shown, want);
}

#[test]
fn the_readme_s_sensitivity_excerpt_is_the_real_report_cut_where_it_says() {
    // `… | sed -n '/^sensitivity/,/^  --dp-overlap/p'` of the committed report.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let report =
        std::fs::read_to_string(root.join("tests/snapshots/search-4096-sensitivity.txt")).unwrap();
    let command = "$ trainplan search --gpus 4096 --memory detailed --time detailed --top 3 --sensitivity | sed -n '/^sensitivity/,/^  --dp-overlap/p'\n";
    let start = readme.find(command).expect("the README shows the excerpt") + command.len();
    let shown = &readme[start..start + readme[start..].find("```").unwrap()];
    let lines: Vec<&str> = report.lines().collect();
    let from = lines
        .iter()
        .position(|l| l.starts_with("sensitivity"))
        .unwrap();
    let to = from
        + lines[from..]
            .iter()
            .position(|l| l.starts_with("  --dp-overlap"))
            .unwrap();
    let want = lines[from..=to].join("\n") + "\n";
    assert_eq!(shown, want);
}
