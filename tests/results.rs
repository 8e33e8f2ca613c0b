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

/// The repository's own files and folders a path in prose may start from.
const OWN: [&str; 14] = [
    "src",
    "tests",
    "benches",
    "data",
    "docs",
    "results",
    "python",
    "fuzz",
    "assets",
    ".ci",
    "README.md",
    "ARCHITECTURE.md",
    "SPEC.md",
    "Cargo.toml",
];

/// Every file under `dir` (recursively), relative to `root`, as `/`-separated strings.
fn files_under(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(root, &path, out);
        } else {
            out.push(
                path.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/"),
            );
        }
    }
}

/// The text in backticks of `line`.
fn quoted(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Whether `name` is defined in `code` as an item or a method (`fn name`, `struct name`, …).
fn defines(code: &str, name: &str) -> bool {
    [
        "fn", "struct", "enum", "const", "type", "trait", "mod", "static",
    ]
    .iter()
    .any(|kind| {
        code.match_indices(&format!("{kind} {name}")).any(|(i, _)| {
            let after = code[i + kind.len() + 1 + name.len()..].chars().next();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    }) || code.contains(&format!("pub {name}:"))
        || code.contains(&format!("    {name},"))
        || code.contains(&format!("    {name}("))
        || code.contains(&format!("    {name} {{"))
}

#[test]
fn every_path_the_architecture_the_docs_and_the_module_docs_name_exists() {
    // A path in backticks that starts from one of the repository's own entries
    // (`src/cost/memory/plate.rs`, `data/published/runs.json`) or from a part of the library
    // (`cost/step/mod.rs`), a bare file name of Rust source (`rank.rs`), and a module path of
    // the crate (`cost::run::plate::days`, `crate::laws::LossLaw`) must name what exists.
    // Paths into other projects (`megatron/training/arguments.py`) are not checked.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = Vec::new();
    for dir in [
        "src", "tests", "benches", "fuzz", "data", "docs", "results", "python", "assets",
    ] {
        files_under(root, &root.join(dir), &mut files);
    }
    let parts: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|n| n != "lib" && n != "main")
        .collect();
    let mut sources = vec![root.join("ARCHITECTURE.md"), root.join("README.md")];
    for file in &files {
        let starts = |d: &str| file.starts_with(d);
        let prose = (starts("docs/") || starts("results/")) && file.ends_with(".md");
        if prose || (starts("src/") && file.ends_with(".rs")) {
            sources.push(root.join(file));
        }
    }
    let all_code: String = files
        .iter()
        .filter(|f| f.starts_with("src/") && f.ends_with(".rs"))
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .collect();
    let exists = |path: &str| root.join(path).exists() || src.join(path).exists();
    let mut missing = Vec::new();
    for doc in &sources {
        let text = std::fs::read_to_string(doc).unwrap();
        let rust = doc.extension().is_some_and(|e| e == "rs");
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if rust && !(trimmed.starts_with("//!") || trimmed.starts_with("///")) {
                continue;
            }
            let here = || format!("{}:{}", doc.strip_prefix(root).unwrap().display(), n + 1);
            for token in quoted(line) {
                let token = token.trim_end_matches(['.', ',', ':', ';']);
                if token.is_empty() || token.contains(char::is_whitespace) {
                    continue;
                }
                let pathlike = token
                    .chars()
                    .all(|c| c.is_alphanumeric() || "_./-".contains(c));
                let first = token.split('/').next().unwrap();
                if pathlike && token.contains('/') {
                    let own = OWN.contains(&first) || parts.iter().any(|p| p == first);
                    if own && !token.contains('*') && !exists(token) {
                        missing.push(format!("{}: {token}", here()));
                    }
                    continue;
                }
                if pathlike && token.ends_with(".rs") {
                    let name = format!("/{token}");
                    if !files.iter().any(|f| f.ends_with(&name) || *f == token) {
                        missing.push(format!("{}: {token}", here()));
                    }
                    continue;
                }
                // A module path of the crate: its longest module prefix is a file, and the
                // item after it is defined there (a method after the item, anywhere).
                let path = token
                    .trim_start_matches("crate::")
                    .trim_start_matches("trainplan::");
                let segments: Vec<&str> = path.split("::").collect();
                if segments.len() < 2
                    || !parts.iter().any(|p| p == segments[0])
                    || !segments.iter().all(|s| {
                        !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_')
                    })
                {
                    continue;
                }
                let mut module = src.join(segments[0]);
                let mut k = 1;
                while k < segments.len() && module.join(segments[k]).is_dir() {
                    module = module.join(segments[k]);
                    k += 1;
                }
                let file =
                    if k < segments.len() && module.join(format!("{}.rs", segments[k])).exists() {
                        k += 1;
                        module.join(format!("{}.rs", segments[k - 1]))
                    } else if module.is_dir() {
                        module.join("mod.rs")
                    } else {
                        module.with_extension("rs")
                    };
                if !file.exists() {
                    missing.push(format!("{}: {token}", here()));
                    continue;
                }
                let code = std::fs::read_to_string(&file).unwrap();
                if let Some(item) = segments.get(k) {
                    // An item of the module, or one it re-exports (`pub use …::item`, or a
                    // child's items by `pub use child::*`).
                    let globbed = code
                        .lines()
                        .filter_map(|l| l.strip_prefix("pub use ")?.strip_suffix("::*;"));
                    let dir = file.parent().unwrap();
                    let in_child = globbed.into_iter().any(|child| {
                        let child = dir.join(format!("{child}.rs"));
                        std::fs::read_to_string(child).is_ok_and(|c| defines(&c, item))
                    });
                    let reexported = in_child || (code.contains("pub use") && code.contains(item));
                    if !defines(&code, item) && !reexported {
                        missing.push(format!(
                            "{}: {token} ({item} not in {})",
                            here(),
                            file.strip_prefix(root).unwrap().display()
                        ));
                    } else if let Some(member) = segments.get(k + 1) {
                        if !defines(&all_code, member) {
                            missing.push(format!("{}: {token} (no {member})", here()));
                        }
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named that do not exist:\n{}",
        missing.join("\n")
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

/// The files the commands of README.md and docs/ read (`--model-config`, `--calibration`,
/// `--runs`, `--efficiency`, `--plan` where no earlier command of the page writes it) exist,
/// from the repository's root, as typed: a newcomer copies the command, not a path the tests
/// use instead. Names in capitals (`FILE.json`) are placeholders; a shell variable set in the
/// same block (`config=…`) is read through.
/// The README and the pages of docs/, in order.
fn pages(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

#[test]
fn every_file_a_documented_command_reads_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = pages(root);
    let mut missing = Vec::new();
    let mut read = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let mut in_block = false;
        let mut vars: std::collections::BTreeMap<String, String> = Default::default();
        let mut written: Vec<String> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                vars.clear();
                continue;
            }
            if !in_block {
                continue;
            }
            let command = line.trim_start().trim_start_matches("$ ");
            if let Some((name, value)) = command.split_once('=') {
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    vars.insert(name.to_string(), value.trim().to_string());
                    continue;
                }
            }
            if !command.starts_with("trainplan") && !command.starts_with("--") {
                continue;
            }
            let words: Vec<&str> = command.split_whitespace().collect();
            for pair in words.windows(2) {
                if let [flag, target] = pair {
                    if *flag == ">" {
                        written.push(target.to_string());
                    }
                }
            }
            for pair in words.windows(2) {
                let [flag, value] = pair else { continue };
                if !matches!(
                    *flag,
                    "--model-config" | "--calibration" | "--runs" | "--efficiency" | "--plan"
                ) {
                    continue;
                }
                let value = value.trim_end_matches(['\\', ';', ')']);
                let value = match value.strip_prefix('$') {
                    Some(var) => match vars.get(var) {
                        Some(v) => v.clone(),
                        None => continue,
                    },
                    None => value.to_string(),
                };
                let placeholder = value
                    .chars()
                    .filter(|c| c.is_alphabetic())
                    .all(|c| c.is_uppercase());
                if placeholder || written.contains(&value) {
                    continue;
                }
                read += 1;
                if !root.join(&value).exists() {
                    missing.push(format!(
                        "{}:{}: {flag} {value}",
                        page.strip_prefix(root).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        read >= 10,
        "only {read} files read by the documented commands"
    );
    assert!(
        missing.is_empty(),
        "files the documented commands read that do not exist:\n{}",
        missing.join("\n")
    );
}

/// The commands of the README's and docs/' console blocks not run here, by a part of them, each
/// with why (their outputs are snapshots' all the same: `SHOWN`).
const NOT_RUN: [(&str, &str); 6] = [
    ("trainplan serve", "a server: its first lines only"),
    (
        "trainplan search ... --json",
        "the elided flags are the section's",
    ),
    ("--plan plans.json", "reads what the elided search writes"),
    (
        "trainplan merge part-1.json",
        "a partial file edited by hand",
    ),
    (
        "python -c",
        "the Python package, which CI builds and tests apart",
    ),
    (
        "cargo run --release -- search",
        "results/default-summary.txt, compared above",
    ),
];

#[test]
fn every_console_block_of_the_readme_and_the_docs_shows_what_its_command_prints() {
    // Each ```console block's `$ command` (continuations joined), run from the crate's root as
    // a shell would, must print the lines the block shows after it ([`excerpt_missing`]).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = assert_cmd::cargo::cargo_bin("trainplan");
    let pages = pages(root);
    let (mut ran, mut wrong) = (0, Vec::new());
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for block in text.split("```console\n").skip(1) {
            let block = block.split("```").next().unwrap();
            // Each `$ command` of the block, its continuations joined, and the lines under it.
            let mut runs: Vec<(String, Vec<&str>)> = Vec::new();
            let mut lines = block.lines();
            while let Some(line) = lines.next() {
                match (line.strip_prefix("$ "), runs.last_mut()) {
                    (Some(first), _) => {
                        let mut command = first.to_string();
                        while command.ends_with('\\') {
                            command.pop();
                            command.push_str(lines.next().unwrap().trim_start());
                        }
                        runs.push((command, Vec::new()));
                    }
                    (None, Some((_, shown))) => shown.push(line),
                    (None, None) => {}
                }
            }
            for (command, shown) in runs {
                if command.contains('…') || NOT_RUN.iter().any(|(part, _)| command.contains(part))
                {
                    continue;
                }
                let command = command.replacen("trainplan", &bin.display().to_string(), 1);
                let out = std::process::Command::new("sh")
                    .args(["-c", &command])
                    .current_dir(root)
                    .output()
                    .unwrap();
                let refused = shown.first().is_some_and(|l| l.starts_with("error:"));
                let code = out.status.code();
                if code != Some(if refused { 2 } else { 0 }) && (refused || code != Some(1)) {
                    wrong.push(format!("{}: `{command}` exits {code:?}", page.display()));
                }
                // What a failing command says is on stderr, and shown where stdout is empty.
                let printed = match out.stdout.is_empty() {
                    true => String::from_utf8(out.stderr).unwrap(),
                    false => String::from_utf8(out.stdout).unwrap(),
                };
                let printed: Vec<&str> = printed.lines().collect();
                if let Some(missing) = excerpt_missing(&shown, &printed) {
                    wrong.push(format!(
                        "{}: `{command}` does not print, in order:\n{}",
                        page.display(),
                        missing.join("\n")
                    ));
                }
                ran += 1;
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(ran >= 20, "only {ran} blocks ran");
}

/// The first run of `shown`'s lines, between its `…` lines, that `printed` does not hold at or
/// after the previous run (the first run at the start, unless `shown` opens with `…`); `None`
/// when every run is there in order. A block shows all of what its command prints, or its first
/// lines, or runs of it with `…` where lines are left out.
fn excerpt_missing<'a>(shown: &[&'a str], printed: &[&str]) -> Option<Vec<&'a str>> {
    let mut from = 0;
    // Without a `…` first, the block's first line is the output's.
    let anywhere = shown.first().is_some_and(|l| l.trim() == "…");
    for (n, run) in shown
        .split(|l| l.trim() == "…")
        .filter(|r| !r.is_empty())
        .enumerate()
    {
        let last = if n == 0 && !anywhere {
            0
        } else {
            printed.len().saturating_sub(run.len())
        };
        let found = (from..=last).find(|&i| printed.get(i..i + run.len()) == Some(run));
        let Some(at) = found else {
            return Some(run.to_vec());
        };
        from = at + run.len();
    }
    None
}
