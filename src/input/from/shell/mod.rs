//! A launch script's commands read as bash would run them — without running anything.
//!
//! The script is split as bash's tokenizer splits it (`lex.rs`), put together by bash's grammar
//! (`parse.rs`), and then followed: variables and their defaults (`${X:-d}`, `${X:=d}`,
//! `${X:+w}`, `${#X}`, `${X%pat}` and the like), arrays and `+=`, quoted and unquoted
//! expansion (`"${A[@]}"` one word an item, `${A[@]}` and `$X` split at blanks), arithmetic
//! (`$((…))`, `arith.rs`), `export`, functions, `for` over a list, and `if`/`elif`/`else`,
//! `case`, `&&` and `||` decided where the script's own values decide them: tests of strings
//! and numbers (`[[ "$DTYPE" == fp8 ]]`, `[ -z "$X" ]`, `(( N > 1 ))`). What the reader cannot
//! know is never guessed:
//! - a command substitution (`$(…)`, backquotes) is text whose value is unknown, never run;
//! - a variable the file does not set is read as bash reads an unset one (empty), and said;
//! - a condition it cannot decide (a file test, a command's status, an unknown value) splits
//!   the reading in two, and each reading is kept with the choice it made ([`Reading`]): the
//!   caller compares them, and the user decides with [`Given`] (`--set NAME=VALUE`,
//!   `--branch LINE=then|else|N`);
//! - a branch that ends in `exit` with a failure is not the one that launches;
//! - `while` and `until` loops are not run (said, and a problem where they hold options);
//! - `source` reads no other file (said).
//!
//! Functions keep their `local` variables and stop at `return`; a subshell `( … )` and each
//! command of a pipeline keep their variables to themselves, as bash runs them. Nesting past
//! 64 is refused and a reading stops after 200,000 commands (a recursion, loops within loops),
//! said as a problem: no script exhausts the reader.
//!
//! Commands that cannot launch training (`echo`, `mkdir`, `cd` and their like) hand over no
//! words. `bash -c "…"` and `sh -c "…"` (as `srun … bash -c` writes them) and `eval` read their
//! text as a script. `#SBATCH` lines give Slurm's node and task counts, as `$SLURM_NNODES` and
//! the like. An array that no command or other array expands is read where it is written (the
//! shell array `export --format megatron` writes).

mod arith;
pub mod lex;
mod parse;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

use crate::error::Result;
use lex::{Lexer, Part, Word};
use parse::{Assign, Node, Parser, Value};

/// What the user says about what the script leaves open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given {
    /// Variables (`--set NAME=VALUE`): the value wherever the script reads the name, its own
    /// assignments to it passed over; a number names the script's own argument (`--set 1=…`).
    pub vars: Vec<(String, String)>,
    /// Branches (`--branch LINE=then|else|N`): the `if` (or `case`) on that line takes that
    /// branch (`N` counts its conditions, or a case's patterns, from 1).
    pub branches: Vec<(usize, String)>,
}

impl Given {
    /// `NAME=VALUE` as `--set` takes it.
    pub fn parse_var(text: &str) -> std::result::Result<(String, String), String> {
        match text.split_once('=') {
            Some((name, value))
                if lex::variable(name) || name.parse::<u8>().is_ok_and(|n| n >= 1) =>
            {
                Ok((name.to_string(), value.to_string()))
            }
            _ => Err(format!(
                "{text:?} is not NAME=VALUE (a variable's name, or a number for the script's own argument)"
            )),
        }
    }

    /// `LINE=BRANCH` as `--branch` takes it.
    pub fn parse_branch(text: &str) -> std::result::Result<(usize, String), String> {
        let fail = || {
            format!("{text:?} is not LINE=BRANCH (a line number, and then, else, or the branch's number from 1)")
        };
        let (line, branch) = text.split_once('=').ok_or_else(fail)?;
        let line: usize = line.parse().ok().filter(|&l| l >= 1).ok_or_else(fail)?;
        let ok = matches!(branch, "then" | "else") || branch.parse::<usize>().is_ok_and(|n| n >= 1);
        if !ok {
            return Err(fail());
        }
        Ok((line, branch.to_string()))
    }
}

/// A word a command of the script is handed (or an array holds), with the command it belongs
/// to: an option's value is the next word of the same one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// The word. Where its value is unknown (a command's output), the text as written.
    pub text: String,
    /// Which command or array, counted from 0 in the order they run.
    pub group: usize,
    /// Its value is the script's (not a command's output the reader did not run).
    pub known: bool,
    /// The line the word is written on.
    pub line: usize,
}

/// A condition the script's values did not decide, and the branch a reading took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The line of the `if`, `case` or `&&`.
    pub line: usize,
    /// The condition as written.
    pub condition: String,
    /// The branch, as `--branch` takes it: `then`, `else`, a number (for `&&` and `||`, `then`
    /// where the command after it runs).
    pub taken: String,
}

/// One way the script may run: its commands' words and the choices that lead to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub args: Vec<Arg>,
    pub choices: Vec<Choice>,
}

/// The script as read: its readings (one where every condition is decided), its comments,
/// notes on what was read as bash reads it but may not be what runs, and problems: what the
/// reader could not follow and where options may hide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// At least one.
    pub readings: Vec<Reading>,
    pub comments: Vec<String>,
    pub notes: Vec<String>,
    pub problems: Vec<String>,
}

impl Script {
    /// The first reading's words: every condition's first undecided branch.
    pub fn args(&self) -> &[Arg] {
        &self.readings[0].args
    }
}

/// Readings at most: past this, an undecided condition takes its first branch, said.
const MAX_READINGS: usize = 32;

/// Commands that start no training and whose words are no launcher's options.
const INERT: [&str; 47] = [
    "echo",
    "printf",
    "mkdir",
    "cd",
    "pushd",
    "popd",
    "cp",
    "mv",
    "rm",
    "ln",
    "touch",
    "cat",
    "ls",
    "sleep",
    "wait",
    "trap",
    "ulimit",
    "umask",
    "tee",
    "chmod",
    "chown",
    "date",
    "hostname",
    "nvidia-smi",
    "pip",
    "pip3",
    "git",
    "wget",
    "curl",
    "tar",
    "scontrol",
    "sinfo",
    "squeue",
    "true",
    "false",
    ":",
    "[",
    "test",
    "which",
    "command",
    "type",
    "hash",
    "alias",
    "module",
    "conda",
    "sed",
    "awk",
];

/// A value: text, and whether the reader knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Field {
    text: String,
    known: bool,
    /// The line its text is written on (0 where none: a `--set` value, Slurm's counts).
    line: usize,
}

impl Field {
    fn known(text: impl Into<String>) -> Field {
        Field {
            text: text.into(),
            known: true,
            line: 0,
        }
    }

    fn unknown(text: impl Into<String>) -> Field {
        Field {
            text: text.into(),
            known: false,
            line: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Var {
    Str(Field),
    Arr(Vec<Field>),
}

/// What a parameter expands to.
enum Expanded {
    Unset,
    One(Field),
    /// `${A[@]}`, `$@`: one word an item when quoted.
    Many(Vec<Field>),
    /// `${A[*]}`, `$*`: the items joined by a blank, one word when quoted.
    Joined(Vec<Field>),
}

/// The script's state in one reading.
#[derive(Debug, Clone)]
struct World {
    vars: HashMap<String, Var>,
    functions: HashMap<String, Rc<Node>>,
    positional: Vec<Field>,
    args: Vec<Arg>,
    group: usize,
    choices: Vec<Choice>,
    /// Arrays expanded by a command or another array's assignment.
    referenced: HashSet<String>,
    /// Arrays in the order first assigned.
    arrays: Vec<String>,
    /// The script exited here: whether with success.
    exit: Option<bool>,
    /// A function returned: the rest of its body does not run.
    returning: bool,
    /// Each function call's `local` variables, with the values they hid.
    frames: Vec<Vec<(String, Option<Var>)>>,
    depth: usize,
}

struct Reader<'g> {
    given: &'g Given,
    pinned: HashMap<String, String>,
    /// Unset variables read, each with the first line it is read on.
    unset: BTreeMap<String, usize>,
    notes: Vec<String>,
    problems: Vec<String>,
    /// The readings are at [`MAX_READINGS`]: no more forks.
    full: bool,
    live: usize,
    /// The lines `--branch` named that a condition took.
    used: HashSet<usize>,
    /// Commands run in all readings, up to [`MAX_STEPS`]; past it the reading stops.
    steps: usize,
    /// Expansions inside expansions (`${X:-${Y:-…}}`), bounded.
    nesting: usize,
}

/// Commands the reader runs in all, readings and loops together: a script that runs more
/// (a recursion, loops within loops) is not followed past it.
const MAX_STEPS: usize = 200_000;

/// Expansions nested in expansions, and compound commands nested in compound commands, at
/// most: no input runs the reader's stack out.
const MAX_NESTING: usize = 64;

/// The script `text` read, every condition the script's values decide decided.
pub fn read(text: &str) -> Result<Script> {
    read_with(text, &Given::default())
}

/// [`read`], with the user's word on what the script leaves open.
pub fn read_with(text: &str, given: &Given) -> Result<Script> {
    let lexer = Lexer::new(text).run()?;
    let comments = lexer.comments;
    let skipped = lexer.skipped;
    let nodes = Parser::new(lexer.tokens).script()?;
    let mut reader = Reader {
        given,
        // The script's own arguments are its positional parameters (a function's are its
        // own); a name holds its value everywhere.
        pinned: given
            .vars
            .iter()
            .filter(|(n, _)| lex::variable(n))
            .cloned()
            .collect(),
        unset: BTreeMap::new(),
        notes: Vec::new(),
        problems: Vec::new(),
        full: false,
        live: 1,
        used: HashSet::new(),
        steps: 0,
        nesting: 0,
    };
    let mut world = World {
        vars: HashMap::new(),
        functions: HashMap::new(),
        positional: Vec::new(),
        args: Vec::new(),
        group: 0,
        choices: Vec::new(),
        referenced: HashSet::new(),
        arrays: Vec::new(),
        exit: None,
        returning: false,
        frames: Vec::new(),
        depth: 0,
    };
    // The script's own arguments, as --set gives them.
    let mut numbered: Vec<(u8, &String)> = given
        .vars
        .iter()
        .filter_map(|(n, v)| Some((n.parse::<u8>().ok()?, v)))
        .collect();
    numbered.sort();
    for (n, v) in numbered {
        world
            .positional
            .resize(usize::from(n), Field::known(String::new()));
        world.positional[usize::from(n) - 1] = Field::known(v.clone());
    }
    slurm(&comments, &mut world, &mut reader.notes);
    for line in skipped {
        reader.notes.push(format!(
            "line {line}: a here-document's text is not read (it is a file's or a command's input, not the script's options)"
        ));
    }
    let worlds = reader.list(&nodes, vec![world]);
    // A --branch no condition the script reached took is said.
    for (line, branch) in &given.branches {
        if !reader.used.contains(line) {
            reader.problems.push(format!(
                "line {line}: --branch {line}={branch}: the line of an if, case, && or || the script reaches (none on line {line} was undecided or reached)"
            ));
        }
    }
    // Each problem once.
    let mut seen = HashSet::new();
    reader.problems.retain(|p| seen.insert(p.clone()));
    // A reading that ends in a failing exit is not the one that launches, unless all do.
    let launching: Vec<&World> = worlds.iter().filter(|w| w.exit != Some(false)).collect();
    let chosen: Vec<&World> = if launching.is_empty() {
        worlds.iter().collect()
    } else {
        launching
    };
    let mut readings: Vec<Reading> = Vec::new();
    for w in chosen {
        let mut args = w.args.clone();
        let mut group = w.group;
        // Arrays no command expanded: read where written.
        for name in &w.arrays {
            if w.referenced.contains(name) {
                continue;
            }
            if let Some(Var::Arr(items)) = w.vars.get(name) {
                for item in items {
                    args.push(Arg {
                        text: item.text.clone(),
                        group,
                        known: item.known,
                        line: item.line,
                    });
                }
                group += 1;
            }
        }
        if !readings.iter().any(|r| r.args == args) {
            readings.push(Reading {
                args,
                choices: w.choices.clone(),
            });
        }
    }
    if !reader.unset.is_empty() {
        let names: Vec<String> = reader
            .unset
            .iter()
            .map(|(n, l)| {
                if n.parse::<u8>().is_ok() || n == "@" || n == "*" {
                    format!("${n} (line {l}, the script's own argument)")
                } else {
                    format!("${n} (line {l})")
                }
            })
            .collect();
        reader.notes.push(format!(
            "not set in the file, read as empty as bash reads an unset variable (give a value with --set NAME=VALUE): {}",
            names.join(", ")
        ));
    }
    Ok(Script {
        readings,
        comments,
        notes: reader.notes,
        problems: reader.problems,
    })
}

/// `#SBATCH` lines' node and task counts, as Slurm sets them for the job's script.
fn slurm(comments: &[String], world: &mut World, notes: &mut Vec<String>) {
    let mut words: Vec<String> = Vec::new();
    for c in comments {
        if let Some(rest) = c.trim_start().strip_prefix("SBATCH") {
            words.extend(rest.split_whitespace().map(str::to_string));
        }
    }
    if words.is_empty() {
        return;
    }
    let mut i = 0;
    let set = |name: &str, value: &str, world: &mut World| {
        world
            .vars
            .insert(name.to_string(), Var::Str(Field::known(value)));
    };
    let mut launcher = vec!["sbatch".to_string()];
    while i < words.len() {
        let w = &words[i];
        let (option, value) = match w.split_once('=') {
            Some((o, v)) => (o.to_string(), Some(v.to_string())),
            None if w.starts_with('-') => (w.clone(), words.get(i + 1).cloned()),
            None => (String::new(), None),
        };
        match (option.as_str(), value.as_deref()) {
            ("--nodes" | "-N", Some(v)) if v.parse::<u64>().is_ok() => {
                set("SLURM_NNODES", v, world);
                set("SLURM_JOB_NUM_NODES", v, world);
                launcher.push(format!("--nodes={v}"));
            }
            ("--ntasks-per-node", Some(v)) if v.parse::<u64>().is_ok() => {
                set("SLURM_NTASKS_PER_NODE", v, world);
                launcher.push(format!("--ntasks-per-node={v}"));
            }
            ("--gpus-per-node" | "--gres", Some(v)) => {
                let n = v.rsplit(':').next().unwrap_or(v);
                if n.parse::<u64>().is_ok() {
                    set("SLURM_GPUS_PER_NODE", n, world);
                    set("SLURM_GPUS_ON_NODE", n, world);
                    launcher.push(format!("--gpus-per-node={n}"));
                }
            }
            _ => {}
        }
        i += 1;
    }
    if launcher.len() > 1 {
        notes.push(format!(
            "#SBATCH: {}, also as Slurm's $SLURM_NNODES and the like",
            launcher[1..].join(" ")
        ));
        let group = world.group;
        for text in launcher {
            world.args.push(Arg {
                text,
                group,
                known: true,
                line: 0,
            });
        }
        world.group += 1;
    }
}

/// The condition as written, for a message.
fn describe(nodes: &[Node]) -> String {
    fn words(node: &Node, out: &mut Vec<String>) {
        match node {
            Node::Simple { words: w, .. } => out.extend(w.iter().map(|w| w.raw.clone())),
            Node::Test(w, _) => {
                out.push("[[".into());
                out.extend(w.iter().map(|w| w.raw.clone()));
                out.push("]]".into());
            }
            Node::Arith(e, _) => out.push(format!("(({e}))")),
            Node::Not(n) => {
                out.push("!".into());
                words(n, out);
            }
            Node::AndOr(first, rest) => {
                words(first, out);
                for (and, n) in rest {
                    out.push(if *and { "&&" } else { "||" }.into());
                    words(n, out);
                }
            }
            _ => out.push("…".into()),
        }
    }
    let mut out = Vec::new();
    for n in nodes {
        words(n, &mut out);
    }
    let text = out.join(" ");
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(59).collect::<String>())
    } else {
        text
    }
}

/// Whether a word of `nodes` is written as an option (`--x`).
fn holds_options(nodes: &[Node]) -> bool {
    let opt = |w: &Word| w.raw.trim_start_matches(['"', '\'']).starts_with("--");
    nodes.iter().any(|n| match n {
        Node::Simple { assigns, words, .. } => {
            words.iter().any(opt)
                || assigns.iter().any(|a| match &a.value {
                    Value::Array(items) => items.iter().any(opt),
                    Value::Scalar(parts) => parts
                        .iter()
                        .any(|p| matches!(p, Part::Lit(t, _) if t.trim_start().starts_with("--"))),
                })
        }
        Node::If {
            arms, otherwise, ..
        } => {
            arms.iter()
                .any(|(c, b)| holds_options(c) || holds_options(b))
                || otherwise.as_deref().is_some_and(holds_options)
        }
        Node::Case { arms, .. } => arms.iter().any(|(_, b)| holds_options(b)),
        Node::For { body, .. } | Node::Loop { body, .. } | Node::Group(body, _) => {
            holds_options(body)
        }
        Node::AndOr(first, rest) => {
            holds_options(std::slice::from_ref(first))
                || rest
                    .iter()
                    .any(|(_, n)| holds_options(std::slice::from_ref(n)))
        }
        Node::Not(n) => holds_options(std::slice::from_ref(n)),
        Node::Pipeline(ns) => holds_options(ns),
        _ => false,
    })
}

impl Reader<'_> {
    /// Runs `nodes` in each of `worlds`.
    fn list(&mut self, nodes: &[Node], mut worlds: Vec<World>) -> Vec<World> {
        for node in nodes {
            let mut next = Vec::with_capacity(worlds.len());
            for w in worlds {
                if w.exit.is_some() || w.returning || self.steps > MAX_STEPS {
                    next.push(w);
                } else {
                    self.steps += 1;
                    if self.steps > MAX_STEPS {
                        self.problems.push(format!(
                            "line {}: more than {MAX_STEPS} commands run (a recursion, or loops within loops): at most {MAX_STEPS}, past which the reader stops",
                            line_of(node)
                        ));
                    }
                    next.extend(self.node(node, w));
                }
            }
            worlds = next;
        }
        worlds
    }

    /// `nodes` run in a subshell: its words handed over, its variables, functions and exit
    /// its own.
    fn subshell(&mut self, nodes: &[Node], w: World) -> Vec<World> {
        let (vars, functions, positional, frames) = (
            w.vars.clone(),
            w.functions.clone(),
            w.positional.clone(),
            w.frames.clone(),
        );
        let mut worlds = self.list(nodes, vec![w]);
        for w in &mut worlds {
            w.vars = vars.clone();
            w.functions = functions.clone();
            w.positional = positional.clone();
            w.frames = frames.clone();
            w.exit = None;
            w.returning = false;
        }
        worlds
    }

    /// A fork: whether another reading may be made, said once when not.
    fn may_fork(&mut self, line: usize) -> bool {
        if self.live >= MAX_READINGS {
            if !self.full {
                self.full = true;
                self.problems.push(format!(
                    "line {line}: more than {MAX_READINGS} ways the script may run: at most {MAX_READINGS} (past them each undecided condition takes its first branch: decide them with --branch LINE=then|else|N or --set NAME=VALUE)"
                ));
            }
            return false;
        }
        self.live += 1;
        true
    }

    fn node(&mut self, node: &Node, mut w: World) -> Vec<World> {
        match node {
            Node::Simple {
                assigns,
                words,
                line,
            } => self.simple(assigns, words, *line, w),
            Node::Test(..) | Node::Arith(..) | Node::Not(_) | Node::AndOr(..) => self
                .condition(node, w)
                .into_iter()
                .map(|(w, _)| w)
                .collect(),
            // Each command of a pipeline runs in a subshell, as bash runs it.
            Node::Pipeline(nodes) => {
                let mut worlds = vec![w];
                for n in nodes {
                    worlds = worlds
                        .into_iter()
                        .flat_map(|w| self.subshell(std::slice::from_ref(n), w))
                        .collect();
                }
                worlds
            }
            Node::Group(nodes, false) => self.list(nodes, vec![w]),
            Node::Group(nodes, true) => self.subshell(nodes, w),
            Node::Function(name, body) => {
                w.functions.insert(name.clone(), body.clone());
                vec![w]
            }
            Node::If {
                arms,
                otherwise,
                line,
            } => self.if_(arms, 0, otherwise.as_deref(), *line, w, None),
            Node::Case {
                subject,
                arms,
                line,
            } => self.case(subject, arms, *line, w),
            Node::For {
                name,
                items,
                body,
                line,
            } => {
                let items = match items {
                    Some(words) => {
                        let mut out = Vec::new();
                        for word in words {
                            out.extend(self.expand(&mut w, &word.parts, word.line));
                        }
                        out
                    }
                    None => w.positional.clone(),
                };
                if items.len() > 256 {
                    self.problems.push(format!(
                        "line {line}: a for loop over {} items: at most 256 items, which the reader follows",
                        items.len()
                    ));
                    return vec![w];
                }
                let mut worlds = vec![w];
                for item in items {
                    for w in &mut worlds {
                        if !self.pinned.contains_key(name) {
                            w.vars.insert(name.clone(), Var::Str(item.clone()));
                        }
                    }
                    worlds = self.list(body, worlds);
                }
                worlds
            }
            Node::Loop { kind, body, line } => {
                if holds_options(body) {
                    self.problems.push(format!(
                        "line {line}: a {kind} loop holding options: options outside loops whose turns the reader cannot count (write them out of the loop)"
                    ));
                } else {
                    self.notes.push(format!(
                        "line {line}: a {kind} loop is not run (the reader does not run loops whose turns it cannot count); it holds no option"
                    ));
                }
                vec![w]
            }
        }
    }

    /// `if` from its arm `k`: the first arm whose condition holds runs its branch; an
    /// undecided condition forks the reading. `pending` is the first undecided condition a
    /// reading passed by, recorded with the branch it ends in (the one `--branch` names).
    fn if_(
        &mut self,
        arms: &[(Vec<Node>, Vec<Node>)],
        k: usize,
        otherwise: Option<&[Node]>,
        line: usize,
        mut w: World,
        pending: Option<String>,
    ) -> Vec<World> {
        let label = |k: usize| {
            if k == 0 {
                "then".to_string()
            } else {
                (k + 1).to_string()
            }
        };
        let Some((cond, body)) = arms.get(k) else {
            if let Some(condition) = pending {
                w.choices.push(Choice {
                    line,
                    condition,
                    taken: "else".into(),
                });
            }
            return match otherwise {
                Some(body) => self.list(body, vec![w]),
                None => vec![w],
            };
        };
        if k == 0 {
            if let Some(branch) = self.branch(line) {
                let chosen = match branch.as_str() {
                    "then" => Some(0),
                    "else" => None,
                    n => n.parse::<usize>().ok().map(|n| n - 1),
                };
                self.notes.push(format!(
                    "line {line}: the if takes its {branch} branch, as --branch {line}={branch} says"
                ));
                if chosen.is_some_and(|c| c >= arms.len()) {
                    self.problems.push(format!(
                        "line {line}: --branch {line}={branch}: then, else, or 1 to {}, the branches of the if on line {line}",
                        arms.len()
                    ));
                }
                return match chosen {
                    Some(c) if c < arms.len() => self.list(&arms[c].1, vec![w]),
                    _ => match otherwise {
                        Some(body) => self.list(body, vec![w]),
                        None => vec![w],
                    },
                };
            }
        }
        let mut out = Vec::new();
        for (mut w, status) in self.conditions(cond, w) {
            match status {
                Some(true) => {
                    if let Some(condition) = pending.clone() {
                        w.choices.push(Choice {
                            line,
                            condition,
                            taken: label(k),
                        });
                    }
                    out.extend(self.list(body, vec![w]));
                }
                Some(false) => {
                    out.extend(self.if_(arms, k + 1, otherwise, line, w, pending.clone()))
                }
                None if self.may_fork(line) => {
                    let condition = pending.clone().unwrap_or_else(|| describe(cond));
                    let other = w.clone();
                    w.choices.push(Choice {
                        line,
                        condition: condition.clone(),
                        taken: label(k),
                    });
                    out.extend(self.list(body, vec![w]));
                    out.extend(self.if_(arms, k + 1, otherwise, line, other, Some(condition)));
                }
                None => out.extend(self.list(body, vec![w])),
            }
        }
        out
    }

    /// The branch `--branch` gives the condition on `line`, noted as used.
    fn branch(&mut self, line: usize) -> Option<String> {
        let (_, branch) = self.given.branches.iter().find(|(l, _)| *l == line)?;
        self.used.insert(line);
        Some(branch.clone())
    }

    fn case(
        &mut self,
        subject: &Word,
        arms: &[(Vec<Word>, Vec<Node>)],
        line: usize,
        mut w: World,
    ) -> Vec<World> {
        if let Some(branch) = self.branch(line) {
            self.notes.push(format!(
                "line {line}: the case takes its arm {branch}, as --branch {line}={branch} says"
            ));
            return match branch.parse::<usize>().ok().and_then(|n| arms.get(n - 1)) {
                Some((_, body)) => self.list(body, vec![w]),
                None if branch == "else" => vec![w],
                None => {
                    self.problems.push(format!(
                        "line {line}: --branch {line}={branch}: 1 to {} (the arms of the case on line {line}), or else for none",
                        arms.len()
                    ));
                    vec![w]
                }
            };
        }
        let value = self.joined(&mut w, &subject.parts, line);
        let condition = format!("case {}", subject.raw);
        let mut out = Vec::new();
        // The readings still looking for their arm, each with whether it passed one by on an
        // undecided pattern.
        let mut live = vec![(w, false)];
        for (k, (patterns, body)) in arms.iter().enumerate() {
            let mut next = Vec::new();
            for (mut w, passed) in live {
                // Whether an arm's patterns match: decided, or not where a value is unknown.
                let mut status = Some(false);
                for p in patterns {
                    let pattern = self.pattern(&mut w, p);
                    match (value.known, pattern) {
                        (true, Some(p)) if arith::glob(&p, &value.text) => {
                            status = Some(true);
                            break;
                        }
                        (true, Some(_)) => {}
                        _ => status = None,
                    }
                }
                match status {
                    Some(true) => {
                        if passed {
                            w.choices.push(Choice {
                                line,
                                condition: condition.clone(),
                                taken: (k + 1).to_string(),
                            });
                        }
                        out.extend(self.list(body, vec![w]))
                    }
                    Some(false) => next.push((w, passed)),
                    None if self.may_fork(line) => {
                        let mut taken = w.clone();
                        taken.choices.push(Choice {
                            line,
                            condition: condition.clone(),
                            taken: (k + 1).to_string(),
                        });
                        out.extend(self.list(body, vec![taken]));
                        next.push((w, true));
                    }
                    None => out.extend(self.list(body, vec![w])),
                }
            }
            live = next;
        }
        // Past every arm: no pattern matched.
        for (mut w, passed) in live {
            if passed {
                w.choices.push(Choice {
                    line,
                    condition: condition.clone(),
                    taken: "else".into(),
                });
            }
            out.push(w);
        }
        out
    }

    /// A pattern's text (quoted parts escaped), or `None` when not known.
    fn pattern(&mut self, w: &mut World, word: &Word) -> Option<String> {
        let mut out = String::new();
        for part in &word.parts {
            match part {
                Part::Lit(t, false) => out.push_str(t),
                Part::Lit(t, true) => out.extend(t.chars().flat_map(|c| ['\\', c])),
                p => {
                    let f = self.joined(w, std::slice::from_ref(p), word.line);
                    if !f.known {
                        return None;
                    }
                    if p.quoted() {
                        out.extend(f.text.chars().flat_map(|c| ['\\', c]));
                    } else {
                        out.push_str(&f.text);
                    }
                }
            }
        }
        Some(out)
    }

    /// A condition list: all but the last run, the last's status.
    fn conditions(&mut self, nodes: &[Node], w: World) -> Vec<(World, Option<bool>)> {
        let Some((last, before)) = nodes.split_last() else {
            return vec![(w, Some(true))];
        };
        let worlds = self.list(before, vec![w]);
        let mut out = Vec::new();
        for w in worlds {
            out.extend(self.condition(last, w));
        }
        out
    }

    /// Runs `node` as a condition: the readings after it, each with its status (`None` where
    /// the script's values do not decide it). A command other than a test is taken to
    /// succeed.
    fn condition(&mut self, node: &Node, mut w: World) -> Vec<(World, Option<bool>)> {
        match node {
            Node::Test(words, line) => {
                let status = self.test(&mut w, words, true, *line);
                vec![(w, status)]
            }
            Node::Arith(expr, line) => {
                let status = self.arith(&mut w, expr, *line).map(|v| v != 0);
                vec![(w, status)]
            }
            Node::Not(inner) => self
                .condition(inner, w)
                .into_iter()
                .map(|(w, s)| (w, s.map(|b| !b)))
                .collect(),
            Node::AndOr(first, rest) => {
                let mut states = self.condition(first, w);
                for (and, next) in rest {
                    let mut after = Vec::new();
                    for (w, status) in states {
                        match (status, and) {
                            (Some(true), true) | (Some(false), false) => {
                                after.extend(self.condition(next, w))
                            }
                            (Some(s), _) => after.push((w, Some(s))),
                            (None, _) => {
                                // Undecided: a pure test combines; a command forks.
                                if matches!(next, Node::Test(..) | Node::Arith(..)) {
                                    let mut probe = w.clone();
                                    let s = self.condition(next, probe.clone()).pop().and_then(
                                        |(p, s)| {
                                            probe = p;
                                            s
                                        },
                                    );
                                    let combined = match (s, and) {
                                        (Some(false), true) => Some(false),
                                        (Some(true), false) => Some(true),
                                        _ => None,
                                    };
                                    after.push((probe, combined));
                                } else if let Some(branch) = self.branch(line_of(next)) {
                                    // --branch LINE=then runs it, else passes it by.
                                    if branch == "else" {
                                        after.push((w, Some(!*and)));
                                    } else {
                                        after.extend(self.condition(next, w));
                                    }
                                } else if self.may_fork(line_of(next)) {
                                    let line = line_of(next);
                                    let condition = describe(std::slice::from_ref(first));
                                    let mut runs = w.clone();
                                    runs.choices.push(Choice {
                                        line,
                                        condition: condition.clone(),
                                        taken: "then".into(),
                                    });
                                    after.extend(self.condition(next, runs));
                                    let mut skips = w;
                                    skips.choices.push(Choice {
                                        line,
                                        condition,
                                        taken: "else".into(),
                                    });
                                    after.push((skips, Some(!*and)));
                                } else {
                                    after.extend(self.condition(next, w));
                                }
                            }
                        }
                    }
                    states = after;
                }
                states
            }
            Node::Simple {
                assigns,
                words,
                line,
            } if !words.is_empty() => {
                let head = words[0].plain().unwrap_or("");
                match head {
                    "[" | "test" => {
                        let mut ws = words[1..].to_vec();
                        if head == "[" && ws.last().and_then(Word::plain) == Some("]") {
                            ws.pop();
                        }
                        let status = self.test(&mut w, &ws, false, *line);
                        vec![(w, status)]
                    }
                    "true" | ":" => vec![(w, Some(true))],
                    "false" => vec![(w, Some(false))],
                    _ => self
                        .simple(assigns, words, *line, w)
                        .into_iter()
                        .map(|w| (w, Some(true)))
                        .collect(),
                }
            }
            _ => self
                .node(node, w)
                .into_iter()
                .map(|w| (w, Some(true)))
                .collect(),
        }
    }

    fn arith(&mut self, w: &mut World, expr: &str, line: usize) -> Option<i64> {
        // `$X` and `${…}` inside put in first, as bash does.
        let parts = lex::operand(expr, true).ok()?;
        let text = self.joined(w, &parts, line);
        if !text.known {
            return None;
        }
        arith::eval(
            &text.text,
            &mut ArithVars {
                pinned: &self.pinned,
                w,
                line,
            },
        )
    }

    /// A test's status (`[[ … ]]` when `double`, else `[ … ]`), `None` when not decided.
    fn test(&mut self, w: &mut World, words: &[Word], double: bool, line: usize) -> Option<bool> {
        // Each word one value (`[[` does not split; `[` splits, rarely what a script means).
        let mut vals: Vec<(Field, Option<String>)> = Vec::new();
        for word in words {
            if double {
                let f = self.joined(w, &word.parts, line);
                let pattern = self.pattern(w, word);
                vals.push((f, pattern));
            } else {
                for f in self.expand(w, &word.parts, line) {
                    vals.push((f, None));
                }
            }
        }
        let mut t = TestEval {
            vals,
            at: 0,
            double,
            depth: 0,
        };
        let v = t.joined(self, w, line, true);
        if t.at != t.vals.len() {
            return None;
        }
        v
    }

    /// A simple command run: its assignments set, its words handed over.
    fn simple(
        &mut self,
        assigns: &[Assign],
        words: &[Word],
        line: usize,
        mut w: World,
    ) -> Vec<World> {
        if words.is_empty() {
            for a in assigns {
                self.assign(&mut w, a, line);
            }
            return vec![w];
        }
        let mut fields = Vec::new();
        for word in words {
            fields.extend(self.expand(&mut w, &word.parts, word.line));
        }
        let Some(head) = fields.first().cloned() else {
            for a in assigns {
                self.assign(&mut w, a, line);
            }
            return vec![w];
        };
        let name = head.text.rsplit('/').next().unwrap_or("").to_string();
        if let Some(body) = w.functions.get(&head.text).cloned() {
            if w.depth >= 16 {
                self.problems.push(format!(
                    "line {line}: {} calling itself more than 16 deep: calls at most 16 deep",
                    head.text
                ));
                return vec![w];
            }
            let saved = std::mem::replace(&mut w.positional, fields[1..].to_vec());
            w.depth += 1;
            w.frames.push(Vec::new());
            let mut worlds = self.node(&body, w);
            for w in &mut worlds {
                w.positional = saved.clone();
                w.depth -= 1;
                w.returning = false;
                // Its locals give back what they hid.
                for (name, old) in w.frames.pop().unwrap_or_default().into_iter().rev() {
                    match old {
                        Some(v) => w.vars.insert(name, v),
                        None => w.vars.remove(&name),
                    };
                }
            }
            return worlds;
        }
        match name.as_str() {
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                // In a function, `local` (and `declare` without -g) hides the name until the
                // function returns.
                let scoped = !w.frames.is_empty()
                    && (name == "local"
                        || (matches!(name.as_str(), "declare" | "typeset")
                            && !fields.iter().any(|f| f.text.starts_with("-g"))));
                if scoped {
                    let names = assigns
                        .iter()
                        .map(|a| a.name.split('[').next().unwrap_or("").to_string())
                        .chain(
                            fields[1..]
                                .iter()
                                .filter(|f| lex::variable(&f.text))
                                .map(|f| f.text.clone()),
                        );
                    for n in names.collect::<Vec<_>>() {
                        let old = w.vars.get(&n).cloned();
                        let frame = w.frames.last_mut().expect("a frame");
                        if !frame.iter().any(|(f, _)| *f == n) {
                            frame.push((n.clone(), old));
                        }
                        if !assigns.iter().any(|a| a.name.split('[').next() == Some(&n)) {
                            w.vars.remove(&n);
                        }
                    }
                }
                for a in assigns {
                    self.assign(&mut w, a, line);
                }
                vec![w]
            }
            "return" => {
                if w.frames.is_empty() {
                    // Outside a function (a sourced script's end): the script ends.
                    w.exit = Some(true);
                } else {
                    w.returning = true;
                }
                vec![w]
            }
            "let" => {
                for f in &fields[1..] {
                    if f.known {
                        self.arith(&mut w, &f.text, line);
                    }
                }
                vec![w]
            }
            "unset" => {
                for f in &fields[1..] {
                    if !f.text.starts_with('-') {
                        w.vars.remove(&f.text);
                    }
                }
                vec![w]
            }
            "exit" => {
                let ok = fields.get(1).is_none_or(|f| f.known && f.text == "0");
                w.exit = Some(ok);
                vec![w]
            }
            "shift" => {
                let n = fields
                    .get(1)
                    .and_then(|f| f.text.parse::<usize>().ok())
                    .unwrap_or(1);
                let n = n.min(w.positional.len());
                w.positional.drain(..n);
                vec![w]
            }
            "set" => {
                if let Some(i) = fields.iter().position(|f| f.text == "--") {
                    w.positional = fields[i + 1..].to_vec();
                }
                vec![w]
            }
            "source" | "." => {
                self.notes.push(format!(
                    "line {line}: {} {} is not read (the reader reads one file): what it sets is not graded",
                    name,
                    fields.get(1).map_or("", |f| f.text.as_str())
                ));
                vec![w]
            }
            "eval" => {
                let joined = fields[1..]
                    .iter()
                    .map(|f| f.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                self.inner(&joined, line, w)
            }
            n if INERT.contains(&n) => vec![w],
            _ => {
                // `bash -c "…"` (after srun and the like): the text read as a script.
                let shell = fields.iter().position(|f| {
                    matches!(
                        f.text.rsplit('/').next(),
                        Some("bash" | "sh" | "zsh" | "dash")
                    )
                });
                let inner = shell.and_then(|i| {
                    let flag = fields.get(i + 1)?;
                    (flag.text == "-c").then_some(i)
                });
                let end = inner.unwrap_or(fields.len());
                let group = w.group;
                for f in &fields[..end] {
                    w.args.push(Arg {
                        text: f.text.clone(),
                        group,
                        known: f.known,
                        line: f.line,
                    });
                }
                w.group += 1;
                // A command's output inside it keeps its text as written, which reads again
                // as that command: unknown where it stands, the rest read.
                match inner.and_then(|i| fields.get(i + 2)) {
                    Some(f) => {
                        let text = f.text.clone();
                        self.inner(&text, line, w)
                    }
                    None => vec![w],
                }
            }
        }
    }

    /// Text a command runs as a script (`bash -c`, `eval`), read in place.
    fn inner(&mut self, text: &str, line: usize, w: World) -> Vec<World> {
        let parsed = Lexer::new(text)
            .run()
            .and_then(|l| Parser::new(l.tokens).script());
        match parsed {
            Ok(nodes) if w.depth < 16 => {
                let mut w = w;
                w.depth += 1;
                let (before, chosen) = (w.args.len(), w.choices.len());
                let mut worlds = self.list(&nodes, vec![w]);
                for w in &mut worlds {
                    w.depth -= 1;
                    // The text's words and conditions are the outer line's.
                    for a in w.args.iter_mut().skip(before) {
                        a.line = line;
                    }
                    for c in w.choices.iter_mut().skip(chosen) {
                        c.line = line;
                    }
                }
                worlds
            }
            Ok(_) => vec![w],
            Err(e) => {
                self.problems.push(format!(
                    "line {line}: the script text a command runs: text bash would read ({e})"
                ));
                vec![w]
            }
        }
    }

    fn assign(&mut self, w: &mut World, a: &Assign, line: usize) {
        let (base, index) = match a.name.split_once('[') {
            Some((b, i)) => (b.to_string(), Some(i.trim_end_matches(']').to_string())),
            None => (a.name.clone(), None),
        };
        if self.pinned.contains_key(&base) {
            return;
        }
        match &a.value {
            Value::Scalar(parts) => {
                let value = self.joined(w, parts, line);
                match index {
                    Some(i) => {
                        let i = self
                            .arith(w, &i, line)
                            .and_then(|i| usize::try_from(i).ok());
                        let items = match w.vars.remove(&base) {
                            Some(Var::Arr(items)) => items,
                            Some(Var::Str(f)) => vec![f],
                            None => Vec::new(),
                        };
                        let mut items = items;
                        if let Some(i) = i.filter(|&i| i < 4096) {
                            if items.len() <= i {
                                items.resize(i + 1, Field::known(""));
                            }
                            items[i] = value;
                        }
                        if !w.arrays.contains(&base) {
                            w.arrays.push(base.clone());
                        }
                        w.vars.insert(base, Var::Arr(items));
                    }
                    None => {
                        let v = match (a.append, w.vars.remove(&base)) {
                            (true, Some(Var::Str(old))) => Var::Str(Field {
                                text: old.text + &value.text,
                                known: old.known && value.known,
                                line: old.line,
                            }),
                            (true, Some(Var::Arr(mut items))) => {
                                match items.first_mut() {
                                    Some(first) => {
                                        first.text.push_str(&value.text);
                                        first.known &= value.known;
                                    }
                                    None => items.push(value),
                                }
                                Var::Arr(items)
                            }
                            _ => Var::Str(value),
                        };
                        w.vars.insert(base, v);
                    }
                }
            }
            Value::Array(words) => {
                let mut items = Vec::new();
                for word in words {
                    items.extend(self.expand(w, &word.parts, word.line));
                }
                let items = match (a.append, w.vars.remove(&base)) {
                    (true, Some(Var::Arr(mut old))) => {
                        old.extend(items);
                        old
                    }
                    (true, Some(Var::Str(old))) => std::iter::once(old).chain(items).collect(),
                    _ => items,
                };
                if !w.arrays.contains(&base) {
                    w.arrays.push(base.clone());
                }
                w.vars.insert(base, Var::Arr(items));
            }
        }
    }

    /// The value of `name` (with `[index]`), as bash looks it up.
    fn lookup(&mut self, w: &mut World, name: &str, index: Option<&str>, line: usize) -> Expanded {
        if let Some(v) = self.pinned.get(name) {
            return Expanded::One(Field::known(v.clone()));
        }
        match name {
            "@" => return Expanded::Many(w.positional.clone()),
            "*" => return Expanded::Joined(w.positional.clone()),
            "#" => return Expanded::One(Field::known(w.positional.len().to_string())),
            "0" => return Expanded::One(Field::known("script")),
            "?" => return Expanded::One(Field::known("0")),
            "$" | "!" | "-" => return Expanded::One(Field::unknown(format!("${name}"))),
            _ => {}
        }
        if let Ok(n) = name.parse::<usize>() {
            return match w.positional.get(n.wrapping_sub(1)) {
                Some(f) => Expanded::One(f.clone()),
                None => Expanded::Unset,
            };
        }
        match (w.vars.get(name), index) {
            (None, _) => Expanded::Unset,
            (Some(Var::Arr(items)), Some(every @ ("@" | "*"))) => {
                w.referenced.insert(name.to_string());
                if every == "@" {
                    Expanded::Many(items.clone())
                } else {
                    Expanded::Joined(items.clone())
                }
            }
            (Some(Var::Str(f)), Some("@" | "*")) => Expanded::Many(vec![f.clone()]),
            (Some(var), Some(i)) => {
                let var = var.clone();
                let len = match &var {
                    Var::Arr(items) => items.len() as i64,
                    Var::Str(_) => 1,
                };
                // A negative index counts from the end.
                let i = self
                    .arith(w, i, line)
                    .map(|i| if i < 0 { len + i } else { i })
                    .and_then(|i| usize::try_from(i).ok());
                match (var, i) {
                    (Var::Arr(items), Some(i)) => {
                        items.get(i).cloned().map_or(Expanded::Unset, Expanded::One)
                    }
                    (Var::Str(f), Some(0)) => Expanded::One(f),
                    (_, Some(_)) => Expanded::Unset,
                    (_, None) => Expanded::One(Field::unknown(format!("${{{name}[…]}}"))),
                }
            }
            (Some(Var::Str(f)), None) => Expanded::One(f.clone()),
            (Some(Var::Arr(items)), None) => {
                w.referenced.insert(name.to_string());
                items
                    .first()
                    .cloned()
                    .map_or(Expanded::Unset, Expanded::One)
            }
        }
    }

    /// `${expr}` (or `$name`) expanded, expansions inside it at most [`MAX_NESTING`] deep.
    fn param(&mut self, w: &mut World, expr: &str, line: usize) -> Expanded {
        if self.nesting >= MAX_NESTING {
            return Expanded::One(Field::unknown(format!("${{{expr}}}")));
        }
        self.nesting += 1;
        let v = self.param_at(w, expr, line);
        self.nesting -= 1;
        v
    }

    fn param_at(&mut self, w: &mut World, expr: &str, line: usize) -> Expanded {
        let unknown = || Expanded::One(Field::unknown(format!("${{{expr}}}")));
        // ${#NAME}, ${#NAME[@]}: lengths.
        if let Some(rest) = expr.strip_prefix('#').filter(|r| !r.is_empty()) {
            let (name, index) = split_name(rest);
            if name.len() != rest.len() - index.map_or(0, |i| i.len() + 2) {
                return unknown();
            }
            return match self.lookup(w, name, index, line) {
                Expanded::Many(items) | Expanded::Joined(items) => {
                    Expanded::One(Field::known(items.len().to_string()))
                }
                Expanded::One(f) if f.known => {
                    Expanded::One(Field::known(f.text.chars().count().to_string()))
                }
                Expanded::One(_) => unknown(),
                Expanded::Unset => Expanded::One(Field::known("0")),
            };
        }
        let (name, index) = split_name(expr);
        if name.is_empty() {
            return unknown();
        }
        let consumed = name.len() + index.map_or(0, |i| i.len() + 2);
        let op = &expr[consumed..];
        let value = self.lookup(w, name, index, line);
        let is_null = match &value {
            Expanded::Unset => true,
            Expanded::One(f) => f.known && f.text.is_empty(),
            Expanded::Many(items) | Expanded::Joined(items) => items.is_empty(),
        };
        let is_unset = matches!(value, Expanded::Unset);
        let operand = |reader: &mut Self, w: &mut World, text: &str| -> Field {
            match lex::operand(text, false) {
                Ok(parts) => reader.joined(w, &parts, line),
                Err(_) => Field::unknown(text),
            }
        };
        let (kind, rest) = if let Some(r) = op.strip_prefix(':') {
            match r.chars().next() {
                Some(c @ ('-' | '=' | '+' | '?')) => (format!(":{c}"), &r[1..]),
                _ => (":".to_string(), r),
            }
        } else {
            match op.chars().next() {
                None => (String::new(), ""),
                Some(c @ ('-' | '=' | '+' | '?')) => (c.to_string(), &op[1..]),
                Some('#') if op.starts_with("##") => ("##".into(), &op[2..]),
                Some('%') if op.starts_with("%%") => ("%%".into(), &op[2..]),
                Some('/') if op.starts_with("//") => ("//".into(), &op[2..]),
                Some('^') if op.starts_with("^^") => ("^^".into(), &op[2..]),
                Some(',') if op.starts_with(",,") => (",,".into(), &op[2..]),
                Some(c @ ('#' | '%' | '/' | '^' | ',')) => (c.to_string(), &op[1..]),
                Some(_) => return unknown(),
            }
        };
        match kind.as_str() {
            "" => {
                if is_unset && !matches!(name, "@" | "*") {
                    self.unset.entry(name.to_string()).or_insert(line);
                }
                value
            }
            ":-" | "-" => {
                if (kind == ":-" && is_null) || is_unset {
                    Expanded::One(operand(self, w, rest))
                } else {
                    value
                }
            }
            ":=" | "=" => {
                if (kind == ":=" && is_null) || is_unset {
                    let f = operand(self, w, rest);
                    if !self.pinned.contains_key(name) && lex::variable(name) {
                        w.vars.insert(name.to_string(), Var::Str(f.clone()));
                    }
                    Expanded::One(f)
                } else {
                    value
                }
            }
            ":+" | "+" => {
                if (kind == ":+" && is_null) || is_unset {
                    Expanded::One(Field::known(""))
                } else {
                    Expanded::One(operand(self, w, rest))
                }
            }
            ":?" | "?" => {
                if (kind == ":?" && is_null) || is_unset {
                    self.notes.push(format!(
                        "line {line}: ${{{expr}}} stops the script where {name} is not set; read as empty"
                    ));
                    Expanded::One(Field::known(""))
                } else {
                    value
                }
            }
            _ => {
                let f = match value {
                    Expanded::One(f) => f,
                    Expanded::Unset => Field::known(""),
                    Expanded::Many(_) | Expanded::Joined(_) => return unknown(),
                };
                if !f.known {
                    return unknown();
                }
                let text = f.text;
                let out = match kind.as_str() {
                    "^^" => text.to_uppercase(),
                    ",," => text.to_lowercase(),
                    "#" | "##" | "%" | "%%" => {
                        let pattern = operand(self, w, rest);
                        if !pattern.known {
                            return unknown();
                        }
                        strip(&text, &pattern.text, &kind)
                    }
                    "/" | "//" => {
                        let (pat, rep) = rest.split_once('/').unwrap_or((rest, ""));
                        let (pat, rep) = (operand(self, w, pat), operand(self, w, rep));
                        if !pat.known || !rep.known || pat.text.contains(['*', '?', '[']) {
                            return unknown();
                        }
                        if pat.text.is_empty() {
                            text
                        } else if kind == "//" {
                            text.replace(&pat.text, &rep.text)
                        } else {
                            text.replacen(&pat.text, &rep.text, 1)
                        }
                    }
                    ":" => {
                        let (off, len) = rest.split_once(':').unwrap_or((rest, ""));
                        let chars: Vec<char> = text.chars().collect();
                        let Some(off) = self.arith(w, off, line) else {
                            return unknown();
                        };
                        let start = if off < 0 {
                            chars.len().saturating_sub(off.unsigned_abs() as usize)
                        } else {
                            (off as usize).min(chars.len())
                        };
                        let end = if len.trim().is_empty() {
                            chars.len()
                        } else {
                            match self.arith(w, len, line) {
                                Some(l) if l >= 0 => (start + l as usize).min(chars.len()),
                                Some(l) => chars.len().saturating_sub(l.unsigned_abs() as usize),
                                None => return unknown(),
                            }
                        };
                        chars[start..end.max(start)].iter().collect()
                    }
                    _ => return unknown(),
                };
                Expanded::One(Field::known(out))
            }
        }
    }

    /// The words `parts` expand into: unquoted expansions split at blanks, `"${A[@]}"` one
    /// word an item, a word of nothing but unquoted empty expansions dropped.
    fn expand(&mut self, w: &mut World, parts: &[Part], line: usize) -> Vec<Field> {
        let mut out: Vec<Field> = Vec::new();
        let mut cur: Option<Field> = None;
        // A word takes the line of what starts it: where a variable's or an item's text is
        // written, else the word's own.
        fn add(cur: &mut Option<Field>, text: &str, known: bool, line: usize) {
            let f = cur.get_or_insert_with(|| Field {
                line,
                ..Field::known("")
            });
            f.text.push_str(text);
            f.known &= known;
        }
        // Unquoted text split at blanks into the words being built.
        fn split(out: &mut Vec<Field>, cur: &mut Option<Field>, f: &Field) {
            let line = f.line;
            let add =
                |cur: &mut Option<Field>, text: &str, known: bool| add(cur, text, known, line);
            let text = &f.text;
            if text.is_empty() {
                return;
            }
            if text.starts_with(char::is_whitespace) {
                if let Some(c) = cur.take() {
                    out.push(c);
                }
            }
            // A value holding a command's output splits at the blanks outside it; the words
            // that hold it are unknown.
            let words = if f.known {
                text.split_whitespace().map(|w| (w, true)).collect()
            } else {
                split_unknown(text)
            };
            let mut words = words.into_iter().peekable();
            while let Some((word, known)) = words.next() {
                add(cur, word, known);
                if words.peek().is_some() {
                    out.push(cur.take().expect("a word"));
                }
            }
            if text.ends_with(char::is_whitespace) {
                if let Some(c) = cur.take() {
                    out.push(c);
                }
            }
        }
        let at = |f: &Field| if f.line == 0 { line } else { f.line };
        for part in parts {
            match part {
                Part::Lit(text, _) => add(&mut cur, text, true, line),
                Part::Param(expr, quoted) => match (self.param(w, expr, line), quoted) {
                    (Expanded::Joined(items), true) => {
                        let known = items.iter().all(|f| f.known);
                        let text: Vec<String> = items.into_iter().map(|f| f.text).collect();
                        add(&mut cur, &text.join(" "), known, line)
                    }
                    (Expanded::Unset, true) => add(&mut cur, "", true, line),
                    (Expanded::Unset, false) => {}
                    (Expanded::One(f), true) => add(&mut cur, &f.text, f.known, at(&f)),
                    (Expanded::One(f), false) => {
                        let f = Field { line: at(&f), ..f };
                        split(&mut out, &mut cur, &f)
                    }
                    (Expanded::Many(items), true) => {
                        let n = items.len();
                        for (k, f) in items.into_iter().enumerate() {
                            add(&mut cur, &f.text, f.known, at(&f));
                            if k + 1 < n {
                                out.push(cur.take().expect("a word"));
                            }
                        }
                    }
                    // Unquoted, each item splits, and the items stay apart.
                    (Expanded::Joined(items) | Expanded::Many(items), false) => {
                        let n = items.len();
                        for (k, f) in items.into_iter().enumerate() {
                            let f = Field { line: at(&f), ..f };
                            split(&mut out, &mut cur, &f);
                            if k + 1 < n {
                                if let Some(c) = cur.take() {
                                    out.push(c);
                                }
                            }
                        }
                    }
                },
                Part::Command(text, _) => add(&mut cur, text, false, line),
                Part::Arith(expr, _) => match self.arith(w, expr, line) {
                    Some(v) => add(&mut cur, &v.to_string(), true, line),
                    None => add(&mut cur, &format!("$(({expr}))"), false, line),
                },
            }
        }
        if let Some(c) = cur {
            out.push(c);
        }
        out
    }

    /// `parts` expanded as one word, not split (an assignment's value, a test's operand).
    fn joined(&mut self, w: &mut World, parts: &[Part], line: usize) -> Field {
        let quoted: Vec<Part> = parts
            .iter()
            .map(|p| match p {
                Part::Lit(t, _) => Part::Lit(t.clone(), true),
                Part::Param(e, _) => Part::Param(e.clone(), true),
                Part::Command(t, _) => Part::Command(t.clone(), true),
                Part::Arith(e, _) => Part::Arith(e.clone(), true),
            })
            .collect();
        let fields = self.expand(w, &quoted, line);
        let known = fields.iter().all(|f| f.known);
        Field {
            line,
            text: fields
                .into_iter()
                .map(|f| f.text)
                .collect::<Vec<_>>()
                .join(" "),
            known,
        }
    }
}

/// Text that holds a command's output (`$(…)`, backquotes, an unknown `${…}`, kept as
/// written) split at the blanks outside those: each word, and whether none is in it.
fn split_unknown(text: &str) -> Vec<(&str, bool)> {
    let mut out = Vec::new();
    let (mut depth, mut tick, mut start, mut known) = (0usize, false, None, true);
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'$' && matches!(b.get(i + 1), Some(b'(' | b'{')) {
            depth += 1;
            known = false;
            start.get_or_insert(i);
            i += 2;
            continue;
        }
        match c {
            b'`' => {
                tick = !tick;
                known = false;
            }
            b'(' | b'{' if depth > 0 => depth += 1,
            b')' | b'}' if depth > 0 => depth -= 1,
            c if c.is_ascii_whitespace() && depth == 0 && !tick => {
                if let Some(s) = start.take() {
                    out.push((&text[s..i], known));
                }
                known = true;
            }
            _ => {}
        }
        if !c.is_ascii_whitespace() || depth > 0 || tick {
            start.get_or_insert(i);
        }
        i += 1;
    }
    if let Some(s) = start {
        out.push((&text[s..], known));
    }
    out
}

fn line_of(node: &Node) -> usize {
    match node {
        Node::Simple { line, .. }
        | Node::Test(_, line)
        | Node::Arith(_, line)
        | Node::If { line, .. }
        | Node::Case { line, .. }
        | Node::For { line, .. }
        | Node::Loop { line, .. } => *line,
        Node::Not(n) => line_of(n),
        Node::AndOr(n, _) => line_of(n),
        Node::Pipeline(ns) | Node::Group(ns, _) => ns.first().map_or(0, line_of),
        Node::Function(_, n) => line_of(n),
    }
}

/// The script's variables as arithmetic reads and sets them.
struct ArithVars<'a> {
    pinned: &'a HashMap<String, String>,
    w: &'a mut World,
    line: usize,
}

impl arith::Vars for ArithVars<'_> {
    fn get(&mut self, name: &str) -> Option<String> {
        if let Some(v) = self.pinned.get(name) {
            return Some(v.clone());
        }
        match self.w.vars.get(name) {
            Some(Var::Str(f)) => f.known.then(|| f.text.clone()),
            Some(Var::Arr(items)) => items
                .first()
                .map_or(Some(String::new()), |f| f.known.then(|| f.text.clone())),
            None => Some(String::new()),
        }
    }

    fn set(&mut self, name: &str, value: i64) {
        if !self.pinned.contains_key(name) {
            let field = Field {
                line: self.line,
                ..Field::known(value.to_string())
            };
            self.w.vars.insert(name.to_string(), Var::Str(field));
        }
    }
}

/// A parameter's name (a variable, a number or a special character) and its `[index]`.
fn split_name(expr: &str) -> (&str, Option<&str>) {
    let special = expr
        .chars()
        .next()
        .filter(|c| "@*#?$!-".contains(*c))
        .map(|c| &expr[..c.len_utf8()]);
    let name = special.unwrap_or_else(|| {
        let end = if expr.starts_with(|c: char| c.is_ascii_digit()) {
            expr.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(expr.len())
        } else {
            expr.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(expr.len())
        };
        &expr[..end]
    });
    let rest = &expr[name.len()..];
    if let Some(inner) = rest.strip_prefix('[') {
        if let Some(end) = inner.find(']') {
            return (name, Some(&inner[..end]));
        }
    }
    (name, None)
}

/// `${X#pat}` and its kin: the shortest (`#`, `%`) or longest (`##`, `%%`) match of the
/// pattern removed from the front (`#`) or the back (`%`).
fn strip(text: &str, pattern: &str, kind: &str) -> String {
    let cuts: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(text.len()))
        .collect();
    match kind {
        "#" => cuts.iter().find(|&&i| arith::glob(pattern, &text[..i])),
        "##" => cuts
            .iter()
            .rev()
            .find(|&&i| arith::glob(pattern, &text[..i])),
        "%" => cuts
            .iter()
            .rev()
            .find(|&&i| arith::glob(pattern, &text[i..])),
        _ => cuts.iter().find(|&&i| arith::glob(pattern, &text[i..])),
    }
    .map_or_else(
        || text.to_string(),
        |&i| {
            if kind.starts_with('#') {
                text[i..].to_string()
            } else {
                text[..i].to_string()
            }
        },
    )
}

/// A test's expression over its values.
struct TestEval {
    vals: Vec<(Field, Option<String>)>,
    at: usize,
    double: bool,
    /// `!` and parentheses open, at most [`MAX_NESTING`].
    depth: usize,
}

impl TestEval {
    fn word(&self, k: usize) -> Option<&str> {
        self.vals.get(self.at + k).map(|(f, _)| f.text.as_str())
    }

    /// Operands joined by `||` (`-o` in `[ ]`) when `or`, else by `&&` (`-a`), in
    /// three-valued logic: a decided side that settles it settles it.
    fn joined(&mut self, r: &mut Reader, w: &mut World, line: usize, or: bool) -> Option<bool> {
        let op = match (or, self.double) {
            (true, true) => "||",
            (true, false) => "-o",
            (false, true) => "&&",
            (false, false) => "-a",
        };
        let operand = |t: &mut Self, r: &mut Reader, w: &mut World| {
            if or {
                t.joined(r, w, line, false)
            } else {
                t.not(r, w, line)
            }
        };
        let mut v = operand(self, r, w);
        while self.word(0) == Some(op) {
            self.at += 1;
            let b = operand(self, r, w);
            v = match (v, b) {
                (Some(x), _) | (_, Some(x)) if x == or => Some(or),
                (Some(_), Some(_)) => Some(!or),
                _ => None,
            };
        }
        v
    }

    fn not(&mut self, r: &mut Reader, w: &mut World, line: usize) -> Option<bool> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            self.at = self.vals.len();
            return None;
        }
        let v = if self.word(0) == Some("!") && self.vals.len() > self.at + 1 {
            self.at += 1;
            self.not(r, w, line).map(|b| !b)
        } else {
            self.primary(r, w, line)
        };
        self.depth -= 1;
        v
    }

    fn primary(&mut self, r: &mut Reader, w: &mut World, line: usize) -> Option<bool> {
        if self.word(0) == Some("(") {
            self.at += 1;
            let v = self.joined(r, w, line, true);
            if self.word(0) == Some(")") {
                self.at += 1;
            }
            return v;
        }
        const BINARY: [&str; 13] = [
            "=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "=~", "-ef",
        ];
        if let Some(op) = self.word(1).filter(|op| BINARY.contains(op)) {
            let op = op.to_string();
            if self.at + 2 >= self.vals.len() {
                self.at = self.vals.len();
                return None;
            }
            let (a, _) = self.vals[self.at].clone();
            let (b, pattern) = self.vals[self.at + 2].clone();
            self.at += 3;
            if !a.known || !b.known {
                return None;
            }
            let number = |f: &Field, r: &mut Reader, w: &mut World| -> Option<i64> {
                if self.double {
                    r.arith(w, &f.text, line)
                } else {
                    f.text.trim().parse().ok()
                }
            };
            return match op.as_str() {
                "=" | "==" | "!=" => {
                    let eq = match (&pattern, self.double) {
                        (Some(p), true) => arith::glob(p, &a.text),
                        _ => a.text == b.text,
                    };
                    Some(eq == (op != "!="))
                }
                "<" => Some(a.text < b.text),
                ">" => Some(a.text > b.text),
                "=~" | "-ef" => None,
                _ => {
                    let (x, y) = (number(&a, r, w)?, number(&b, r, w)?);
                    Some(match op.as_str() {
                        "-eq" => x == y,
                        "-ne" => x != y,
                        "-lt" => x < y,
                        "-le" => x <= y,
                        "-gt" => x > y,
                        _ => x >= y,
                    })
                }
            };
        }
        let first = self.word(0).map(str::to_string)?;
        if first.len() == 2 && first.starts_with('-') && self.vals.len() > self.at + 1 {
            let (arg, _) = self.vals[self.at + 1].clone();
            self.at += 2;
            return match first.as_str() {
                "-z" => arg.known.then_some(arg.text.is_empty()),
                "-n" => arg.known.then_some(!arg.text.is_empty()),
                "-v" => Some(r.pinned.contains_key(&arg.text) || w.vars.contains_key(&arg.text)),
                // Files, terminals, options: not the script's values.
                _ => None,
            };
        }
        let (f, _) = self.vals[self.at].clone();
        self.at += 1;
        f.known.then_some(!f.text.is_empty())
    }
}

#[cfg(test)]
mod tests;
