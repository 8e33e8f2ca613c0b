//! ARCHITECTURE.md, read as a test: the library's parts use only the parts below them, and no
//! module leans on another that leans back on it.
//!
//! Every file under `src/` is read as text: comments, string literals and `#[cfg(test)]` items
//! are dropped (test code may import what it tests from anywhere), and every path that names a
//! module of the crate — `crate::…` in a `use` or in an expression, `super::…`, `self::…`, or a
//! submodule the file declares — is an edge from the file's module to the module it names (the
//! longest module prefix of the path). A `mod.rs` that declares or re-exports its children
//! (`mod x;`, `pub use x::Y;`) does not use them: a facade is not a dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The parts from the ground up, as ARCHITECTURE.md lists them: each may use the parts before
/// it and itself, never one after it.
const PARTS: [&[&str]; 11] = [
    &["error", "format", "hash", "numeric", "units"],
    &["model"],
    &["laws"],
    &["cost"],
    &["brief"],
    &["plan"],
    &["search"],
    &["report"],
    &["input"],
    &["serve"],
    &["cli"],
];

/// The parts of `cost` from the ground up, as ARCHITECTURE.md lists them: the step a plan runs
/// (its settings, stack, pipeline and routes), what it costs on a chip, what it sends over
/// links, what it holds, how its schedule composes its time, and what a whole run costs. Each
/// may use the ones before it and itself, never one after it. `cost` itself (its `mod.rs`)
/// holds `Machine`, whose figures come from two leaves, `links::topology` and
/// `run::reliability`, which use nothing of `cost`.
const COST_PARTS: [&str; 6] = ["step", "chip", "links", "memory", "step_time", "run"];

/// The rank among [`COST_PARTS`] of a module of `cost` (`cost::memory::plate` is `memory`'s).
fn cost_rank(module: &str) -> Option<usize> {
    let mut path = module.split("::");
    if path.next() != Some("cost") {
        return None;
    }
    let part = path.next()?;
    Some(
        COST_PARTS
            .iter()
            .position(|p| *p == part)
            .unwrap_or_else(|| panic!("{module} is in no part of cost")),
    )
}

/// The rank of the part a module (`cost::memory::plate`) belongs to.
fn rank(module: &str) -> Option<usize> {
    let top = module.split("::").next().unwrap_or(module);
    PARTS.iter().position(|part| part.contains(&top))
}

/// `text` with comments, string and character literals blanked out (newlines kept), so that
/// braces and paths inside them are not read as code.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&b, i) {
            // A raw string r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                if b[j] == '\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if b.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}'), not a lifetime ('a).
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&k| b[k] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(k) => {
                    out.push_str("' '");
                    i = k + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// `code` without its `#[cfg(test)]` items: from the attribute to the end of the item's
/// braces, or its `;`.
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (k, ch) in item.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The module path of a file under `src/` (`cost/memory/mod.rs` is `cost::memory`).
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifiers and `::`, `{`, `}`, `,`, `;` and `*` of `code`, in order.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
            continue;
        }
        if "{},;*.".contains(c) {
            out.push(c.to_string());
        } else if !c.is_whitespace() {
            out.push("#".into());
        }
        i += 1;
    }
    out
}

/// Every module path a file of module `me` uses, given the crate's modules.
fn uses(me: &str, is_mod_rs: bool, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let parent = match me.rsplit_once("::") {
        Some((p, _)) => p.to_string(),
        None => String::new(),
    };
    let children: BTreeSet<String> = modules
        .iter()
        .filter_map(|m| {
            let rest = if me.is_empty() {
                Some(m.as_str())
            } else {
                m.strip_prefix(me).and_then(|r| r.strip_prefix("::"))
            };
            rest.filter(|r| !r.is_empty() && !r.contains("::"))
                .map(str::to_string)
        })
        .collect();
    let toks = tokens(code);
    let mut found = BTreeSet::new();
    // Resolves an absolute path's segments to the longest module prefix.
    let resolve = |segments: &[String], found: &mut BTreeSet<String>| {
        for k in (1..=segments.len()).rev() {
            let candidate = segments[..k].join("::");
            if modules.contains(&candidate) {
                if candidate != me {
                    found.insert(candidate);
                }
                return;
            }
        }
    };
    let prefix = if me.is_empty() {
        String::new()
    } else {
        format!("{me}::")
    };
    let mut reexported: BTreeMap<String, String> = BTreeMap::new();
    let mut facade: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        // A facade's `pub use child::…;` (or `pub(crate) use`) or `mod child;` is structure,
        // not use.
        let after_pub = match toks.get(i + 1).map(String::as_str) {
            Some("#") => i + 4, // pub(crate), pub(super)
            _ => i + 1,
        };
        if is_mod_rs
            && (toks[i] == "mod"
                || (toks[i] == "pub"
                    && toks.get(after_pub).map(String::as_str) == Some("use")
                    && toks
                        .get(after_pub + 1)
                        .is_some_and(|t| children.contains(t))))
        {
            let start = i;
            while i < toks.len() && toks[i] != ";" && (toks[i] != "{" || toks[start] == "pub") {
                i += 1;
            }
            if toks[start] == "pub" {
                // Names the facade re-exports: used in its own code, they are uses of the child.
                let child = format!("{}{}", prefix, toks[after_pub + 1]);
                let tree = &toks[after_pub + 1..i];
                for (k, t) in tree.iter().enumerate() {
                    let next = tree.get(k + 1).map(String::as_str);
                    let leaf = t
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
                        && next != Some("::")
                        && next != Some("as")
                        && t != "self";
                    if leaf {
                        reexported.insert(t.clone(), child.clone());
                    }
                }
                facade.push((start, i));
            }
            continue;
        }
        let prev_is_path = i > 0 && (toks[i - 1] == "::" || toks[i - 1] == ".");
        let followed = toks.get(i + 1).map(String::as_str) == Some("::");
        let base: Option<Vec<String>> = if prev_is_path || !followed {
            None
        } else if toks[i] == "crate" {
            Some(Vec::new())
        } else if toks[i] == "super" {
            Some(
                parent
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            )
        } else if toks[i] == "self" || children.contains(&toks[i]) {
            let mut b: Vec<String> = me
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if toks[i] != "self" {
                b.push(toks[i].clone());
            }
            Some(b)
        } else {
            None
        };
        let Some(base) = base else {
            i += 1;
            continue;
        };
        // Read the path, and a `{…}` use-tree after it, collecting every leaf path.
        // After `crate::`, `super::` or `self::`, or after a child's name.
        let mut j = if children.contains(&toks[i]) {
            i + 1
        } else {
            i + 2
        };
        let mut path = base;
        let mut stack: Vec<Vec<String>> = Vec::new();
        loop {
            match toks.get(j).map(String::as_str) {
                Some("::") => j += 1,
                Some("{") => {
                    stack.push(path.clone());
                    j += 1;
                }
                Some(",") if !stack.is_empty() => {
                    resolve(&path, &mut found);
                    path = stack.last().unwrap().clone();
                    j += 1;
                }
                Some("}") if !stack.is_empty() => {
                    resolve(&path, &mut found);
                    path = stack.pop().unwrap();
                    j += 1;
                    if stack.is_empty() {
                        break;
                    }
                }
                Some(t)
                    if t.chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_') =>
                {
                    if t == "super" {
                        path.pop();
                    } else if t != "self" {
                        path.push(t.to_string());
                    }
                    j += 1;
                    if toks.get(j).map(String::as_str) != Some("::") && stack.is_empty() {
                        break;
                    }
                }
                _ => {
                    if stack.is_empty() {
                        break;
                    }
                    j += 1;
                }
            }
        }
        resolve(&path, &mut found);
        i = j.max(i + 1);
    }
    for (k, t) in toks.iter().enumerate() {
        let in_facade = facade.iter().any(|&(a, b)| (a..=b).contains(&k));
        let qualified = k > 0 && (toks[k - 1] == "::" || toks[k - 1] == ".");
        if let (Some(child), false, false) = (reexported.get(t), in_facade, qualified) {
            found.insert(child.clone());
        }
    }
    found
}

/// The crate's module graph: each module and the modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // The binary (main.rs) uses the library by its name, not `crate::`.
    let library: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|f| (module_of(f.strip_prefix(&src).unwrap()), f))
        .filter(|(m, _)| m != "main")
        .collect();
    let modules: BTreeSet<String> = library.iter().map(|(m, _)| m.clone()).collect();
    library
        .iter()
        .map(|(m, f)| {
            let code = without_tests(&code_only(&std::fs::read_to_string(f).unwrap()));
            let is_mod_rs = f
                .file_name()
                .is_some_and(|n| n == "mod.rs" || n == "lib.rs");
            (m.clone(), uses(m, is_mod_rs, &code, &modules))
        })
        .collect()
}

#[test]
fn src_holds_the_parts_and_the_ground_floor_and_nothing_else() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = PARTS[1..]
        .iter()
        .flat_map(|p| p.iter().map(|m| m.to_string()))
        .chain(PARTS[0].iter().map(|m| format!("{m}.rs")))
        .chain(["lib.rs", "main.rs"].map(String::from))
        .collect();
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn no_part_uses_a_part_above_it() {
    let mut upward = Vec::new();
    for (module, used) in graph() {
        if module.is_empty() {
            continue; // lib.rs declares the parts and re-exports their types.
        }
        let mine = rank(&module).unwrap_or_else(|| panic!("{module} is in no part"));
        for other in used {
            let theirs = rank(&other).unwrap_or_else(|| panic!("{other} is in no part"));
            if theirs > mine {
                upward.push(format!("{module} uses {other}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_part_of_cost_uses_one_above_it() {
    let mut upward = Vec::new();
    for (module, used) in graph() {
        if module == "cost" {
            // The face: `Machine`'s figures, from the two leaves.
            for other in &used {
                let leaf = other == "cost::links::topology" || other == "cost::run::reliability";
                if other.starts_with("cost::") && !leaf {
                    upward.push(format!("cost (Machine) uses {other}"));
                }
            }
            continue;
        }
        let Some(mine) = cost_rank(&module) else {
            continue;
        };
        for other in used {
            if let Some(theirs) = cost_rank(&other) {
                if theirs > mine {
                    upward.push(format!("{module} uses {other}"));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports inside cost that run up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn cost_holds_its_parts_and_nothing_else() {
    let cost = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cost");
    let mut names: Vec<String> = std::fs::read_dir(&cost)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = COST_PARTS.iter().map(|p| p.to_string()).collect();
    want.push("mod.rs".into());
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn no_module_leans_on_one_that_leans_back() {
    let graph = graph();
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            if m == to {
                return true;
            }
            if seen.insert(m.clone()) {
                todo.extend(graph.get(&m).into_iter().flatten().cloned());
            }
        }
        false
    };
    // Every edge on a circle: a uses b, and b (through any path) uses a.
    let circular: Vec<String> = graph
        .iter()
        .flat_map(|(a, used)| used.iter().map(move |b| (a, b)))
        .filter(|(a, b)| reaches(b, a))
        .map(|(a, b)| format!("{a} uses {b}, which uses {a}"))
        .collect();
    assert!(circular.is_empty(), "circles:\n{}", circular.join("\n"));
}

#[test]
fn the_reader_sees_what_the_tests_read() {
    // The reader itself, on a small file: comments, strings and test items are not code; a
    // use-tree names each leaf; a child and `super` resolve relative to the file's module.
    let modules: BTreeSet<String> = ["a", "a::b", "a::c", "d", "d::e", "f"]
        .map(String::from)
        .into();
    let code = r#"
        use crate::d::{self, e::Thing};
        // use crate::f;
        fn x() { let s = "crate::f::y"; b::go(); super::f::z(); }
        #[cfg(test)]
        mod tests { use crate::f; fn t() { let _ = "}"; } }
    "#;
    let code = without_tests(&code_only(code));
    let found = uses("a", true, &code, &modules);
    let want: BTreeSet<String> = ["a::b", "d", "d::e", "f"].map(String::from).into();
    assert_eq!(found, want);
    // `super::f` from `a::c` is `f`; a facade's `pub use b::…` and `mod b;` are not uses.
    let found = uses(
        "a::c",
        false,
        &without_tests(&code_only("fn y() { super::super::f::g(); }")),
        &modules,
    );
    assert_eq!(found, ["f".to_string()].into());
    let facade = code_only("mod b;\npub use b::Thing;\npub(crate) use b::{other, More as Less};\n");
    assert!(uses("a", true, &facade, &modules).is_empty());
    // A facade that uses a name it re-exports uses the child that defines it.
    let using = code_only("pub use b::{Thing, More as Less};\nfn f() -> Less { Thing::new() }");
    assert_eq!(
        uses("a", true, &using, &modules),
        ["a::b".to_string()].into()
    );
    let qualified = code_only("pub use b::Thing;\nfn f() { Kind::Thing; }");
    assert!(uses("a", true, &qualified, &modules).is_empty());
}

#[test]
fn clap_stays_in_the_command_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let leaks: Vec<String> = files
        .iter()
        .map(|f| (module_of(f.strip_prefix(&src).unwrap()), f))
        .filter(|(m, _)| m != "cli" && !m.starts_with("cli::"))
        .filter(|(_, f)| {
            let code = without_tests(&code_only(&std::fs::read_to_string(f).unwrap()));
            tokens(&code)
                .iter()
                .any(|t| t == "clap" || t == "clap_complete")
        })
        .map(|(m, _)| m)
        .collect();
    assert!(leaks.is_empty(), "clap used outside src/cli: {leaks:?}");
}
