//! A launch script's words, as bash would hand them to its commands — for the plain scripts
//! launchers are written as, and nothing more: this is no shell.
//!
//! What is read: `#` comments, `\` continuations and escapes, single and double quotes,
//! commands ended by a line break, `;`, `&`, `|`, `&&` or `||`, assignments (`NAME=value`,
//! also after `export`, `declare`, `readonly`, `local`), arrays (`NAME=( … )`, read where they
//! are written), and a word that is a whole variable reference (`$NAME`, `${NAME}`,
//! `${NAME:-default}`, `${NAME-default}`, `"${NAME[@]}"`, and after `--option=`) put in as bash
//! puts it in: split into words when unquoted, one word when quoted, nothing (said in a note)
//! when the file does not set it. A reference inside a larger word, a command substitution
//! (`$(…)`, `` `…` ``) or arithmetic is kept as written; the reader refuses it where it reads
//! the value.
//!
//! What is refused, by name and line, because reading past it would take the file for what it
//! is not: `if`, `case`, loops and other compound commands (their assignments may not run),
//! functions (their body may never be called), subshells and other parentheses, here-documents
//! (their text is no option), appends (`NAME+=`, whose base the reader may not have), and an
//! assignment that runs on a condition (`… && NAME=value`).

use std::collections::{HashMap, HashSet};

use crate::error::{Error, Result};

/// Words that open or close a compound command, or define a function, where a command starts.
const RESERVED: [&str; 19] = [
    "if", "then", "elif", "else", "fi", "case", "esac", "for", "select", "while", "until", "do",
    "done", "function", "{", "}", "[[", "]]", "coproc",
];

/// Builtins whose words are assignments (`export TP=4`).
const ASSIGNING: [&str; 5] = ["export", "declare", "typeset", "readonly", "local"];

/// A word of the script as the shell splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    /// Nothing in it quoted or escaped: an expansion in it is split into words.
    bare: bool,
    /// A `$` or a backquote in it that bash would expand (outside single quotes, not escaped).
    dollar: bool,
    /// An assignment, `NAME=value`, where the shell takes it as one.
    assignment: bool,
    /// The line it starts on.
    line: usize,
}

/// What the script is made of, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(Word),
    /// `NAME=(`: the array's words follow until [`Token::Close`].
    Open(String),
    Close,
    /// A command ends.
    End,
}

/// An argument the script hands a command (or an array holds), with the command (or array) it
/// belongs to: an option's value is the next word of the same one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// The word.
    pub text: String,
    /// Which command or array, counted from 0 in the order they are written.
    pub group: usize,
}

/// The script's arguments, its comments' text, and notes on what was read as bash reads it
/// but may not be what runs (a variable the file does not set, read as empty).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// The words, expanded.
    pub args: Vec<Arg>,
    /// The comments' text, `#` left out.
    pub comments: Vec<String>,
    /// One line each, for the user.
    pub notes: Vec<String>,
}

/// The error for a construct the reader does not follow.
fn refused(what: &str, line: usize, why: &str) -> Error {
    Error::invalid(
        "megatron arguments",
        format!("{} (line {line})", what.escape_debug()),
        format!("{why} (the reader does not run the script: write the options out plainly)"),
    )
}

fn unclosed(quote: &str, line: usize) -> Error {
    Error::invalid(
        "megatron arguments",
        format!("a {quote} opened on line {line}"),
        "closed quotes",
    )
}

/// Whether `name` is a shell variable's name.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// `NAME` and whether it appends, when `word` starts an assignment (`NAME=…`, `NAME+=…`).
fn assignment(word: &str) -> Option<(&str, bool)> {
    let (name, _) = word.split_once('=')?;
    match name.strip_suffix('+') {
        Some(base) if plain(base) => Some((base, true)),
        _ if plain(name) => Some((name, false)),
        _ => None,
    }
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
    tokens: Vec<Token>,
    comments: Vec<String>,
    word: String,
    in_word: bool,
    bare: bool,
    dollar: bool,
    word_line: usize,
    in_array: bool,
    /// The next word starts a command.
    command_start: bool,
    /// The command's words may be assignments (at its start, or after `export` and the like).
    assigning: bool,
    /// The command runs on a condition (after `&&` or `||`).
    conditional: bool,
}

impl Lexer<'_> {
    fn next(&mut self) -> Option<char> {
        let c = self.chars.next();
        if c == Some('\n') {
            self.line += 1;
        }
        c
    }

    fn start(&mut self) {
        if !self.in_word {
            self.in_word = true;
            self.word_line = self.line;
        }
    }

    /// The word read so far, ended.
    fn finish(&mut self) -> Result<()> {
        if !self.in_word {
            return Ok(());
        }
        let text = std::mem::take(&mut self.word);
        let mut word = Word {
            assignment: false,
            text,
            bare: self.bare,
            dollar: self.dollar,
            line: self.word_line,
        };
        (self.in_word, self.bare, self.dollar) = (false, true, false);
        if !self.in_array {
            if self.command_start && word.bare && RESERVED.contains(&word.text.as_str()) {
                return Err(refused(
                    &word.text,
                    word.line,
                    "commands outside if, case, loops and functions, whose options and assignments may not run as written",
                ));
            }
            match assignment(&word.text) {
                Some((_, true)) if self.assigning => return Err(refused(
                    &word.text,
                    word.line,
                    "assignments, not an append (NAME+=), which adds to what the reader may not have",
                )),
                Some(_) if self.assigning => {
                    if self.conditional {
                        return Err(refused(
                            &word.text,
                            word.line,
                            "assignments that always run, not one after && or ||",
                        ));
                    }
                    word.assignment = true;
                }
                _ if self.command_start && ASSIGNING.contains(&word.text.as_str()) => {}
                _ if self.assigning && word.text.starts_with('-') && !self.command_start => {}
                _ => self.assigning = false,
            }
            self.command_start = false;
        }
        self.tokens.push(Token::Word(word));
        Ok(())
    }

    /// A command ends.
    fn end(&mut self, conditional: bool) -> Result<()> {
        self.finish()?;
        if !self.in_array {
            self.tokens.push(Token::End);
            self.command_start = true;
            self.assigning = true;
            self.conditional = conditional;
        }
        Ok(())
    }

    /// Reads up to the `close` matching an `open` already read (nesting, quotes and escapes
    /// inside) into the word, as written: a substitution or a `${…}`.
    fn balanced(&mut self, open: char, close: char) -> Result<()> {
        let line = self.line;
        let mut depth = 1;
        while depth > 0 {
            let c = self
                .next()
                .ok_or_else(|| unclosed(&format!("{open} …"), line))?;
            self.word.push(c);
            match c {
                '\\' => {
                    if let Some(n) = self.next() {
                        self.word.push(n);
                    }
                }
                '\'' | '"' | '`' => loop {
                    let n = self
                        .next()
                        .ok_or_else(|| unclosed(&format!("{c} quote"), line))?;
                    self.word.push(n);
                    if n == c {
                        break;
                    }
                    if n == '\\' && c != '\'' {
                        if let Some(m) = self.next() {
                            self.word.push(m);
                        }
                    }
                },
                c if c == open => depth += 1,
                c if c == close => depth -= 1,
                _ => {}
            }
        }
        Ok(())
    }

    /// After a `$` already in the word: a `$(…)` or `${…}` whole into it.
    fn after_dollar(&mut self) -> Result<()> {
        self.dollar = true;
        match self.chars.peek() {
            Some('(') => {
                self.next();
                self.word.push('(');
                self.balanced('(', ')')
            }
            Some('{') => {
                self.next();
                self.word.push('{');
                self.balanced('{', '}')
            }
            _ => Ok(()),
        }
    }

    fn backquote(&mut self) -> Result<()> {
        let line = self.line;
        self.dollar = true;
        self.word.push('`');
        loop {
            let c = self.next().ok_or_else(|| unclosed("backquote", line))?;
            self.word.push(c);
            match c {
                '`' => return Ok(()),
                '\\' => {
                    if let Some(n) = self.next() {
                        self.word.push(n);
                    }
                }
                _ => {}
            }
        }
    }

    fn run(&mut self) -> Result<()> {
        while let Some(c) = self.next() {
            match c {
                '\\' => match self.next() {
                    Some('\n') => {}
                    Some(n) => {
                        self.start();
                        self.bare = false;
                        self.word.push(n);
                    }
                    None => {}
                },
                '\'' => {
                    self.start();
                    self.bare = false;
                    let line = self.line;
                    loop {
                        match self.next() {
                            Some('\'') => break,
                            Some(n) => self.word.push(n),
                            None => return Err(unclosed("' quote", line)),
                        }
                    }
                }
                '"' => {
                    self.start();
                    self.bare = false;
                    let line = self.line;
                    loop {
                        match self.next() {
                            Some('"') => break,
                            Some('\\') => match self.next() {
                                Some(n @ ('"' | '\\' | '$' | '`')) => self.word.push(n),
                                Some('\n') => {}
                                Some(n) => {
                                    self.word.push('\\');
                                    self.word.push(n);
                                }
                                None => return Err(unclosed("\" quote", line)),
                            },
                            Some('$') => {
                                self.word.push('$');
                                self.after_dollar()?;
                            }
                            Some('`') => self.backquote()?,
                            Some(n) => self.word.push(n),
                            None => return Err(unclosed("\" quote", line)),
                        }
                    }
                }
                '$' => {
                    self.start();
                    self.word.push('$');
                    self.after_dollar()?;
                }
                '`' => {
                    self.start();
                    self.backquote()?;
                }
                '#' if !self.in_word => {
                    let mut comment = String::new();
                    while let Some(&n) = self.chars.peek() {
                        if n == '\n' {
                            break;
                        }
                        comment.push(n);
                        self.chars.next();
                    }
                    self.comments.push(comment);
                }
                '\n' | ';' => {
                    if c == ';' && self.chars.peek() == Some(&';') {
                        return Err(refused(";;", self.line, "commands outside a case"));
                    }
                    self.end(false)?;
                }
                '&' => {
                    if self.in_word && self.word.ends_with(['>', '<']) {
                        // A redirection's `>&2`.
                        self.word.push('&');
                    } else if self.chars.peek() == Some(&'>') {
                        self.start();
                        self.word.push('&');
                    } else if self.chars.peek() == Some(&'&') {
                        self.next();
                        self.end(true)?;
                    } else {
                        self.end(false)?;
                    }
                }
                '|' => {
                    let conditional = self.chars.peek() == Some(&'|');
                    if conditional {
                        self.next();
                    }
                    self.end(conditional)?;
                }
                '<' if self.chars.peek() == Some(&'<') => {
                    return Err(refused(
                        "<<",
                        self.line,
                        "no here-document, whose text would be read as options",
                    ))
                }
                '(' => {
                    let array = match assignment(&self.word) {
                        Some((name, append)) if self.in_word && self.word.ends_with('=') => {
                            Some((name.to_string(), append))
                        }
                        _ => None,
                    };
                    match array {
                        Some((name, append)) if self.assigning && !self.in_array => {
                            if append {
                                return Err(refused(
                                    &format!("{}(", self.word),
                                    self.line,
                                    "arrays, not an append (NAME+=(…)), which adds to what the reader may not have",
                                ));
                            }
                            if self.conditional {
                                return Err(refused(
                                    &format!("{}(", self.word),
                                    self.line,
                                    "assignments that always run, not one after && or ||",
                                ));
                            }
                            self.word.clear();
                            self.in_word = false;
                            (self.bare, self.dollar) = (true, false);
                            self.tokens.push(Token::Open(name));
                            self.in_array = true;
                        }
                        _ => {
                            return Err(refused(
                                &format!("{}(", self.word),
                                self.line,
                                "commands and arrays (NAME=( … )), not a function, a subshell or another parenthesis, which may not run as written",
                            ))
                        }
                    }
                }
                ')' => {
                    if !self.in_array {
                        return Err(refused(
                            &format!("{})", self.word),
                            self.line,
                            "commands and arrays (NAME=( … )), whose parentheses match: this one closes none",
                        ));
                    }
                    self.finish()?;
                    self.tokens.push(Token::Close);
                    self.in_array = false;
                    self.command_start = false;
                    self.assigning = true;
                }
                c if c.is_whitespace() => self.finish()?,
                c => {
                    self.start();
                    self.word.push(c);
                }
            }
        }
        self.finish()?;
        if self.in_array {
            return Err(unclosed("( of an array", self.line));
        }
        Ok(())
    }
}

/// A whole-word reference: the name (`@` for the script's arguments), whether it is an
/// array's every element (`${NAME[@]}`), and its default (`${NAME:-d}`).
fn reference(word: &str) -> Option<(&str, bool, Option<&str>)> {
    let inner = match word.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        Some(inner) => inner,
        None => {
            let name = word.strip_prefix('$')?;
            return (plain(name) || matches!(name, "@" | "*" | "#") || name.parse::<u8>().is_ok())
                .then_some((name, false, None));
        }
    };
    if let Some(name) = inner
        .strip_suffix("[@]")
        .or_else(|| inner.strip_suffix("[*]"))
    {
        return plain(name).then_some((name, true, None));
    }
    let (name, default) = match inner.split_once(":-").or_else(|| inner.split_once('-')) {
        Some((n, d)) => (n, Some(d)),
        None => (inner, None),
    };
    let positional = matches!(name, "@" | "*" | "#") || name.parse::<u8>().is_ok();
    (plain(name) || positional).then_some((name, false, default))
}

/// What a script sets as it runs, in order.
#[derive(Default)]
struct Vars {
    strings: HashMap<String, String>,
    arrays: HashSet<String>,
    /// Names already said to be unset, so each is said once.
    said: HashSet<String>,
}

impl Vars {
    /// The words `word` expands into, and a note for a name the file does not set.
    fn expand(&mut self, word: &Word, notes: &mut Vec<String>) -> Vec<String> {
        if !word.dollar {
            return vec![word.text.clone()];
        }
        // `--option=$X`: the value a whole reference.
        if let Some((option, value)) = word.text.split_once('=') {
            if option.starts_with("--") && reference(value).is_some() {
                let value = Word {
                    text: value.to_string(),
                    bare: false,
                    ..word.clone()
                };
                let expanded = self.expand(&value, notes);
                return vec![format!("{option}={}", expanded.join(" "))];
            }
        }
        let Some((name, every, default)) = reference(&word.text) else {
            return vec![word.text.clone()];
        };
        let value = if every || self.arrays.contains(name) {
            // An array's words are read where it is written.
            if every && !self.arrays.contains(name) {
                self.unset(name, &word.text, word.line, notes);
            }
            return Vec::new();
        } else if matches!(name, "@" | "*") {
            // The script's arguments: none that the file holds.
            self.unset(name, &word.text, word.line, notes);
            return Vec::new();
        } else if let Some(v) = self.strings.get(name) {
            v.clone()
        } else if let Some(d) = default {
            d.to_string()
        } else {
            self.unset(name, &word.text, word.line, notes);
            return if word.bare {
                Vec::new()
            } else {
                vec![String::new()]
            };
        };
        // Split as bash splits an unquoted expansion; a value the reader does not know (it
        // holds a command or another reference) stays one word, to be refused where read.
        if word.bare && !value.contains(['$', '`']) {
            value.split_whitespace().map(str::to_string).collect()
        } else {
            vec![value]
        }
    }

    fn unset(&mut self, name: &str, word: &str, line: usize, notes: &mut Vec<String>) {
        if !self.said.insert(name.to_string()) {
            return;
        }
        let what = if matches!(name, "@" | "*" | "#") || name.parse::<u8>().is_ok() {
            "the script's own arguments, which the file does not hold"
        } else {
            "not set in the file"
        };
        notes.push(format!(
            "{word} (line {line}) is {what}: read as empty, as bash reads an unset variable; options it holds where the script runs are not graded"
        ));
    }

    /// `NAME=value` set, its value a whole reference put in (not split, as bash does not).
    fn assign(&mut self, word: &Word, notes: &mut Vec<String>) {
        let (name, value) = word.text.split_once('=').expect("an assignment");
        let value = Word {
            text: value.to_string(),
            bare: false,
            ..word.clone()
        };
        let value = self.expand(&value, notes).join(" ");
        self.arrays.remove(name);
        self.strings.insert(name.to_string(), value);
    }
}

/// The script `text` read: its commands' and arrays' words expanded, its comments, and notes.
pub fn read(text: &str) -> Result<Script> {
    let mut lexer = Lexer {
        chars: text.chars().peekable(),
        line: 1,
        tokens: Vec::new(),
        comments: Vec::new(),
        word: String::new(),
        in_word: false,
        bare: true,
        dollar: false,
        word_line: 1,
        in_array: false,
        command_start: true,
        assigning: true,
        conditional: false,
    };
    lexer.run()?;
    let mut script = Script {
        comments: lexer.comments,
        ..Script::default()
    };
    let mut vars = Vars::default();
    let mut group = 0;
    for token in lexer.tokens {
        match token {
            Token::Word(w) if w.assignment => vars.assign(&w, &mut script.notes),
            Token::Word(w) => {
                if w.text.chars().any(char::is_control) {
                    return Err(Error::invalid(
                        "megatron arguments",
                        w.text.escape_debug(),
                        "words without line breaks or control characters",
                    ));
                }
                for text in vars.expand(&w, &mut script.notes) {
                    script.args.push(Arg { text, group });
                }
            }
            Token::Open(name) => {
                vars.strings.remove(&name);
                vars.arrays.insert(name);
                group += 1;
            }
            Token::Close | Token::End => group += 1,
        }
    }
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        read(text)
            .unwrap()
            .args
            .into_iter()
            .map(|a| a.text)
            .collect()
    }

    fn refusal(text: &str) -> String {
        let e = read(text).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn words_split_as_bash_splits_them() {
        let s = read("A=(\n  --x 1 # one\n  --y \"a b\" \\\n --z='q'\n)\n").unwrap();
        let words: Vec<&str> = s.args.iter().map(|a| a.text.as_str()).collect();
        assert_eq!(words, ["--x", "1", "--y", "a b", "--z=q"]);
        assert_eq!(s.comments, [" one"]);
        // An array is one group, each command another.
        assert!(s.args.iter().all(|a| a.group == s.args[0].group));
        let s = read("a --x\nb --y").unwrap();
        assert_ne!(s.args[1].group, s.args[3].group);
        assert!(refusal("--x \"open").contains("quote"));
    }

    #[test]
    fn variables_and_their_defaults_are_bash_s() {
        assert_eq!(
            args("TP=${TP:-2}\nARGS=(--tensor-model-parallel-size $TP)\n"),
            ["--tensor-model-parallel-size", "2"]
        );
        assert_eq!(args("echo ${PP-8} ${PP:-4}"), ["echo", "8", "4"]);
        // A bare reference takes no default: `$TP-x` is no variable of the script's.
        assert_eq!(args("TP=4\necho $TP-x"), ["echo", "$TP-x"]);
        assert_eq!(
            args("export N=4\ntorchrun --nnodes=$N"),
            ["export", "torchrun", "--nnodes=4"]
        );
        // An unquoted expansion splits into words, a quoted one is one word.
        assert_eq!(
            args("PAR=\"--tp 4 --pp 2\"\nrun $PAR \"$PAR\""),
            ["run", "--tp", "4", "--pp", "2", "--tp 4 --pp 2"]
        );
        // A reference inside a word, a command or arithmetic is kept as written.
        assert_eq!(
            args("N=$(scontrol show hostnames | wc -l)\nrun --nnodes $N x${N}y $((1 << 2))"),
            [
                "run",
                "--nnodes",
                "$(scontrol show hostnames | wc -l)",
                "x${N}y",
                "$((1 << 2))"
            ]
        );
    }

    #[test]
    fn a_variable_the_file_does_not_set_is_empty_and_said() {
        let s = read("torchrun pretrain_gpt.py $EXTRA_ARGS \"$@\" --x \"$Y\"").unwrap();
        let words: Vec<&str> = s.args.iter().map(|a| a.text.as_str()).collect();
        assert_eq!(words, ["torchrun", "pretrain_gpt.py", "--x", ""]);
        assert_eq!(s.notes.len(), 3, "{:?}", s.notes);
        assert!(s.notes[0].starts_with("$EXTRA_ARGS (line 1) is not set in the file"));
        assert!(s.notes[1].contains("the script's own arguments"));
    }

    #[test]
    fn what_the_reader_does_not_follow_is_refused_by_name_and_line() {
        for (script, named) in [
            ("if [ -n \"$X\" ]; then\n  TP=8\nfi\n", "= if (line 1)"),
            ("setup() {\n TP=8\n}\n", "= setup( (line 1)"),
            ("function setup {\n TP=8\n}\n", "= function (line 1)"),
            ("ARGS=(--x 1)\nARGS+=(--y 2)\n", "= ARGS+=( (line 2)"),
            ("X=1\nX+=2\n", "= X+=2 (line 2)"),
            ("cat <<EOF\n--num-layers 4\nEOF\n", "= << (line 1)"),
            ("[ -z \"$TP\" ] && TP=8\n", "= TP=8 (line 1)"),
            ("(cd x; run)\n", "= ( (line 1)"),
            ("for x in 1 2; do\n echo\ndone\n", "= for (line 1)"),
            ("case $X in\n a) TP=1;;\nesac\n", "= case (line 1)"),
        ] {
            let e = refusal(script);
            assert!(e.contains(named), "{script:?}: {e}");
        }
        // The same words as values or inside an array are words.
        assert_eq!(
            args("A=(if fi)\nrun --x done"),
            ["if", "fi", "run", "--x", "done"]
        );
        // A redirection is no background job, and && between commands is allowed.
        assert_eq!(
            args("cd /x && torchrun a.py --x 1 >log 2>&1"),
            ["cd", "/x", "torchrun", "a.py", "--x", "1", ">log", "2>&1"]
        );
    }
}
