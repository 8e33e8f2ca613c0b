use super::*;

/// The first reading's words, each with whether its value is the script's.
fn words(s: &Script) -> Vec<(&str, bool)> {
    s.args()
        .iter()
        .map(|a| (a.text.as_str(), a.known))
        .collect()
}

fn args(text: &str) -> Vec<String> {
    read(text)
        .unwrap()
        .args()
        .iter()
        .map(|a| a.text.clone())
        .collect()
}

fn refusal(text: &str) -> String {
    let e = read(text).unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

fn readings(text: &str, given: &Given) -> Vec<Vec<String>> {
    read_with(text, given)
        .unwrap()
        .readings
        .iter()
        .map(|r| r.args.iter().map(|a| a.text.clone()).collect())
        .collect()
}

#[test]
fn words_split_as_bash_splits_them() {
    let s = read("A=(\n  --x 1 # one\n  --y \"a b\" \\\n --z='q'\n)\n").unwrap();
    let words: Vec<&str> = s.args().iter().map(|a| a.text.as_str()).collect();
    assert_eq!(words, ["--x", "1", "--y", "a b", "--z=q"]);
    assert_eq!(s.comments, [" one"]);
    // An array is one group, each command another.
    assert!(s.args().iter().all(|a| a.group == s.args()[0].group));
    let s = read("a --x\nb --y").unwrap();
    assert_ne!(s.args()[1].group, s.args()[3].group);
    assert_eq!(s.args()[3].line, 2);
    assert!(refusal("--x \"open").contains("quote"));
    assert!(refusal("if true; then\n  run --x\n").contains("without its fi"));
}

#[test]
fn variables_and_their_defaults_are_bash_s() {
    assert_eq!(
        args("TP=${TP:-2}\nARGS=(--tensor-model-parallel-size $TP)\n"),
        ["--tensor-model-parallel-size", "2"]
    );
    assert_eq!(args("run ${PP-8} ${PP:-4}"), ["run", "8", "4"]);
    assert_eq!(args("PP=\nrun ${PP-8} ${PP:-4}"), ["run", "4"]);
    assert_eq!(args("TP=4\nrun $TP-x x${TP}y"), ["run", "4-x", "x4y"]);
    assert_eq!(
        args("export N=4\ntorchrun --nnodes=$N"),
        ["torchrun", "--nnodes=4"]
    );
    // An unquoted expansion splits into words, a quoted one is one word.
    assert_eq!(
        args("PAR=\"--tp 4 --pp 2\"\nrun $PAR \"$PAR\""),
        ["run", "--tp", "4", "--pp", "2", "--tp 4 --pp 2"]
    );
    // Arithmetic is worked out; a command's output is unknown, kept as written.
    let s =
        read("G=8\nN=$(scontrol show hostnames | wc -l)\nrun --nnodes $N $((G * 2)) $((N * 2))")
            .unwrap();
    let got = words(&s);
    assert_eq!(
        got,
        [
            ("run", true),
            ("--nnodes", true),
            ("$(scontrol show hostnames | wc -l)", false),
            ("16", true),
            ("$((N * 2))", false)
        ]
    );
    // Operators on values.
    assert_eq!(
        args(
            "M=llama3-8b.yaml\nrun ${M%.yaml} ${M#*-} ${#M} ${M^^} ${M/8b/70b} ${X:+set} ${M:+set}"
        ),
        [
            "run",
            "llama3-8b",
            "8b.yaml",
            "14",
            "LLAMA3-8B.YAML",
            "llama3-70b.yaml",
            "set"
        ]
    );
    assert_eq!(args("run ${X:=5} $X"), ["run", "5", "5"]);
}

#[test]
fn arrays_are_expanded_where_used_item_by_item() {
    // NVIDIA's pattern: items written as one quoted string each, expanded unquoted.
    let text = "A=(\"--fp8-format hybrid\" --bf16)\nA+=(\"--split '99,1,0'\")\nB=(--x)\nB+=(\"${A[@]}\")\ntorchrun pretrain_gpt.py ${B[@]} \"${A[@]}\"\n";
    assert_eq!(
        args(text),
        [
            "torchrun",
            "pretrain_gpt.py",
            "--x",
            "--fp8-format",
            "hybrid",
            "--bf16",
            "--split",
            "'99,1,0'",
            "--fp8-format hybrid",
            "--bf16",
            "--split '99,1,0'"
        ]
    );
    assert_eq!(
        args("A=(a b c)\nrun ${#A[@]} ${A[1]} $A"),
        ["run", "3", "b", "a"]
    );
    // An array no command expands is read where it is written (the export's array).
    assert_eq!(args("A=(--x 1)\necho done"), ["--x", "1"]);
    assert_eq!(args("S=abc\nS+=def\nrun $S"), ["run", "abcdef"]);
}

#[test]
fn a_variable_the_file_does_not_set_is_empty_and_said() {
    let s = read("torchrun pretrain_gpt.py $EXTRA_ARGS \"$@\" --x \"$Y\"").unwrap();
    let words: Vec<&str> = s.args().iter().map(|a| a.text.as_str()).collect();
    assert_eq!(words, ["torchrun", "pretrain_gpt.py", "--x", ""]);
    assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
    assert!(
        s.notes[0].contains("$EXTRA_ARGS (line 1), $Y (line 1)"),
        "{}",
        s.notes[0]
    );
    // --set gives it, and the script's own arguments by number.
    let given = Given {
        vars: vec![("Y".into(), "7".into()), ("1".into(), "fp8".into())],
        branches: vec![],
    };
    assert_eq!(
        readings("D=${1:-bf16}\nY=3\nrun --x $Y --d $D", &given),
        [["run", "--x", "7", "--d", "fp8"]]
    );
}

#[test]
fn conditions_the_script_decides_are_decided() {
    let text = "DTYPE=\"fp8\"\nARGS=()\nif [[ \"$DTYPE\" == \"fp8\" ]]; then\n  ARGS+=(--fp8-format hybrid)\nelif [ \"$DTYPE\" = bf16 ]; then\n  ARGS+=(--bf16)\nelse\n  ARGS+=(--fp16)\nfi\nrun ${ARGS[@]}\n";
    assert_eq!(args(text), ["run", "--fp8-format", "hybrid"]);
    assert_eq!(
        args(&text.replace("DTYPE=\"fp8\"", "DTYPE=bf16")),
        ["run", "--bf16"]
    );
    assert_eq!(
        args(&text.replace("DTYPE=\"fp8\"", "DTYPE=fp16")),
        ["run", "--fp16"]
    );
    // Numbers, patterns, -z and -n, && and ||, !, (( )).
    for (cond, taken) in [
        ("[ $N -gt 1 ]", true),
        ("[[ $N -le 1 ]]", false),
        ("(( N * 2 == 4 ))", true),
        ("[[ $M == llama* ]]", true),
        ("[[ $M == \"llama*\" ]]", false),
        ("[ -z \"$UNSET\" ]", true),
        ("[ -n \"$M\" ] && [ $N = 2 ]", true),
        ("[[ $N == 3 || $M != x ]]", true),
        ("! [ $N -eq 2 ]", false),
        ("test \"$M\" != llama3", true),
    ] {
        let text = format!("N=2\nM=llama3-8b\nif {cond}; then run --a; else run --b; fi\n");
        let want = if taken { "--a" } else { "--b" };
        assert_eq!(args(&text), ["run", want], "{cond}");
    }
    // case, by pattern.
    let text = "case \"$SIZE\" in\n  8b|8B) L=32 ;;\n  70b) L=80 ;;\n  *) L=0 ;;\nesac\nrun --num-layers $L\n";
    assert_eq!(
        args(&format!("SIZE=70b\n{text}")),
        ["run", "--num-layers", "80"]
    );
    assert_eq!(
        args(&format!("SIZE=8B\n{text}")),
        ["run", "--num-layers", "32"]
    );
    // && and || after a test: the command runs where the test says.
    assert_eq!(args("[ -z \"$TP\" ] && TP=8\nrun $TP"), ["run", "8"]);
    assert_eq!(args("TP=2\n[ -z \"$TP\" ] && TP=8\nrun $TP"), ["run", "2"]);
}

#[test]
fn a_condition_the_script_does_not_decide_gives_each_reading() {
    let text = "if [ -f /etc/cluster ]; then\n  TP=8\nelse\n  TP=4\nfi\nrun --tp $TP\n";
    let s = read(text).unwrap();
    assert_eq!(s.readings.len(), 2);
    assert_eq!(s.readings[0].args[2].text, "8");
    assert_eq!(s.readings[1].args[2].text, "4");
    assert_eq!(
        s.readings[0].choices,
        [Choice {
            line: 1,
            condition: "[ -f /etc/cluster ]".into(),
            taken: "then".into()
        }]
    );
    assert_eq!(s.readings[1].choices[0].taken, "else");
    // --branch decides it.
    let given = Given {
        vars: vec![],
        branches: vec![(1, "else".into())],
    };
    assert_eq!(readings(text, &given), [["run", "--tp", "4"]]);
    // A branch that fails the script is not the one that launches.
    let text = "if [ ! -f pretrain_gpt.py ]; then\n  echo missing\n  exit 1\nfi\ntorchrun pretrain_gpt.py --x\n";
    assert_eq!(
        readings(text, &Given::default()),
        [["torchrun", "pretrain_gpt.py", "--x"]]
    );
    // Readings alike in their words are one.
    let text = "if command -v nvidia-smi; then echo yes; fi\nrun --x\n";
    assert_eq!(readings(text, &Given::default()), [["run", "--x"]]);
    // A command's output in a test is not known.
    let text = "if [ \"$(hostname)\" = a ]; then run --a; else run --b; fi\n";
    assert_eq!(read(text).unwrap().readings.len(), 2);
}

#[test]
fn functions_loops_and_inner_scripts_are_followed() {
    assert_eq!(
        args("setup() {\n  TP=$1\n}\nsetup 4\nrun --tp $TP"),
        ["run", "--tp", "4"]
    );
    assert_eq!(
        args("function f { A+=(--$1); }\nA=()\nf x\nf y\nrun ${A[@]}"),
        ["run", "--x", "--y"]
    );
    assert_eq!(
        args("A=()\nfor o in a b; do\n  A+=(--$o)\ndone\nrun ${A[@]}"),
        ["run", "--a", "--b"]
    );
    let s = read("while true; do\n  run --x\ndone\n").unwrap();
    assert!(
        s.problems[0].contains("while loop holding options"),
        "{:?}",
        s.problems
    );
    // srun's text for bash -c read as a script; an inert command hands over nothing.
    assert_eq!(
        args("CMD=\"torchrun --nnodes 2 pretrain_gpt.py --x 1\"\necho $CMD\nsrun --nodes 2 bash -c \"$CMD\""),
        ["srun", "--nodes", "2", "torchrun", "--nnodes", "2", "pretrain_gpt.py", "--x", "1"]
    );
    // #SBATCH counts, as Slurm's variables.
    let s = read("#SBATCH --nodes=4\n#SBATCH --gpus-per-node=8\ntorchrun --nnodes $SLURM_NNODES --nproc_per_node $SLURM_GPUS_PER_NODE a.py").unwrap();
    let words: Vec<&str> = s.args().iter().map(|a| a.text.as_str()).collect();
    assert_eq!(
        words,
        [
            "sbatch",
            "--nodes=4",
            "--gpus-per-node=8",
            "torchrun",
            "--nnodes",
            "4",
            "--nproc_per_node",
            "8",
            "a.py"
        ]
    );
    // Here-documents are skipped, redirections are no words.
    assert_eq!(
        args("cat <<EOF > ds.json\n{\"x\": --num-layers}\nEOF\nrun --x 1 > log 2>&1"),
        ["run", "--x", "1"]
    );
}

#[test]
fn reserved_words_as_values_and_in_arrays_are_words() {
    assert_eq!(
        args("A=(if fi)\nrun --x done ${A[@]}"),
        ["run", "--x", "done", "if", "fi"]
    );
    assert_eq!(
        args("cd /x && torchrun a.py --x 1 >log 2>&1"),
        ["torchrun", "a.py", "--x", "1"]
    );
}

#[test]
fn text_that_is_no_script_is_refused_by_line() {
    for (script, named) in [
        ("if [ x ]; then\n  run\n", "if without its fi (line 1)"),
        ("run )\n", ") out of place (line 1)"),
        ("case $X in\n a) run;;\n", "(line 1)"),
        ("A=(--x\n", "( of an array"),
    ] {
        let e = refusal(script);
        assert!(e.contains(named), "{script:?}: {e}");
    }
}

#[test]
fn arithmetic_sets_what_it_assigns() {
    assert_eq!(
        args("MBS=2\n(( GBS = MBS * 8 ))\nlet TP=4 'PP = TP / 2'\nN=1\n((N++))\nX=$((Y=3))\nrun $GBS $TP $PP $N $X $Y"),
        ["run", "16", "4", "2", "2", "3", "3"]
    );
    // Only the side taken is worked out.
    assert_eq!(
        args("B=2\nrun $(( B > 2 ? 8 / (B - 2) : 1 ))"),
        ["run", "1"]
    );
    assert_eq!(
        args("B=2\nif (( B == 2 || 1 / 0 )); then run --a; fi"),
        ["run", "--a"]
    );
}

#[test]
fn functions_subshells_and_pipelines_keep_their_variables() {
    let text = "setup() {\n  local TP=2\n  PP=4\n}\nTP=8\nsetup\n( TP=4 )\necho x | { CP=5; }\nadd() {\n  [[ $1 == skip ]] && return\n  OPTS=--use-flash-attn\n}\nadd skip\nrun --tp $TP --pp $PP --cp ${CP:-1} $OPTS";
    assert_eq!(args(text), ["run", "--tp", "8", "--pp", "4", "--cp", "1"]);
    // The script's own arguments are not a function's.
    let given = Given {
        vars: vec![("1".into(), "fp8".into())],
        branches: vec![],
    };
    assert_eq!(
        readings(
            "run_it() {\n  run --tp \"$1\" --d \"$D\"\n}\nD=$1\nrun_it 4",
            &given
        ),
        [["run", "--tp", "4", "--d", "fp8"]]
    );
}

#[test]
fn words_holding_a_command_s_output_split_where_bash_splits_them() {
    let s = read("EXTRA=\"--bf16 --log-dir $(date +%s) --use-flash-attn\"\nrun $EXTRA \"$EXTRA\"")
        .unwrap();
    let got = words(&s);
    assert_eq!(
        got,
        [
            ("run", true),
            ("--bf16", true),
            ("--log-dir", true),
            ("$(date +%s)", false),
            ("--use-flash-attn", true),
            ("--bf16 --log-dir $(date +%s) --use-flash-attn", false)
        ]
    );
    // "$*" and "${A[*]}" are one word; "${A[@]}" one an item; ${A[-1]} the last.
    assert_eq!(
        args("A=(--x 1)\nbash -c \"run ${A[*]}\"\nrun \"${A[*]}\" \"${A[@]}\" ${A[-1]}"),
        ["run", "--x", "1", "run", "--x 1", "--x", "1", "1"]
    );
    assert_eq!(
        args("V=10\nif [[ \"$V\" < \"2\" ]]; then run --a; fi"),
        ["run", "--a"]
    );
}

#[test]
fn each_reading_names_the_branch_that_gives_it() {
    let text = "if [ -f /a ]; then\n  TP=2\nelif [ \"$MODE\" = big ]; then\n  TP=4\nelse\n  TP=1\nfi\nrun --tp $TP\n";
    let s = read(text).unwrap();
    let taken: Vec<(&str, &str)> = s
        .readings
        .iter()
        .map(|r| (r.args[2].text.as_str(), r.choices[0].taken.as_str()))
        .collect();
    // $MODE is unset: the elif is decided (false), so the second reading is the else's.
    assert_eq!(taken, [("2", "then"), ("1", "else")]);
    for (branch, tp) in [("then", "2"), ("2", "4"), ("else", "1")] {
        let given = Given {
            vars: vec![],
            branches: vec![(1, branch.into())],
        };
        assert_eq!(readings(text, &given), [["run", "--tp", tp]], "{branch}");
    }
    // A case pattern the reader cannot know forks; && and || take --branch too.
    let text = "case $(hostname) in\n  a*) TP=8 ;;\nesac\nrun --tp ${TP:-1}\n";
    assert_eq!(read(text).unwrap().readings.len(), 2);
    let text = "[ -f /big ] && TP=8\nrun --tp ${TP:-1}\n";
    assert_eq!(read(text).unwrap().readings.len(), 2);
    let given = Given {
        vars: vec![],
        branches: vec![(1, "then".into())],
    };
    assert_eq!(readings(text, &given), [["run", "--tp", "8"]]);
    // A --branch that names no condition the script reaches is said.
    let given = Given {
        vars: vec![],
        branches: vec![(9, "then".into())],
    };
    let s = read_with(text, &given).unwrap();
    assert!(
        s.problems[0].starts_with("line 9: --branch 9=then"),
        "{:?}",
        s.problems
    );
}

#[test]
fn hostile_scripts_are_bounded_not_a_crash() {
    // Nesting past the bound is refused; recursion and loops stop at the work bound.
    let deep = format!(
        "{}run{}",
        "if true; then ".repeat(3000),
        "; fi".repeat(3000)
    );
    assert!(refusal(&deep).contains("nested more than 64 deep"));
    let deep = format!("run $(({}1{}))", "(".repeat(10_000), ")".repeat(10_000));
    assert_eq!(
        args(&deep),
        [
            "run",
            &format!("$(({}1{}))", "(".repeat(10_000), ")".repeat(10_000))
        ]
    );
    let deep = format!("run {}x{}", "${Y:-".repeat(10_000), "}".repeat(10_000));
    assert_eq!(read(&deep).unwrap().args().len(), 2);
    let s = read("f() {\n  f\n  f\n  f\n}\nf\nrun --x").unwrap();
    assert!(s.problems.len() <= 4, "{:?}", s.problems);
    let s = read("for a in $(seq 1 64); do for b in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64; do for c in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64; do for d in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64; do X=1; done; done; done; done\nrun --x").unwrap();
    assert!(
        s.problems[0].contains("more than 200000 commands run"),
        "{:?}",
        s.problems
    );
}
