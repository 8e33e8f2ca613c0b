//! A launch script's text split into words and operators, as bash's tokenizer splits it:
//! quotes, escapes, `\` continuations, comments, expansions kept whole for later
//! ([`Part`]), redirections, here-documents (their text skipped) and arrays' parentheses.

use crate::error::{Error, Result};

/// A piece of a word: quoted or not, which decides whether its expansion is split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Text as written, quotes removed.
    Lit(String, bool),
    /// `$NAME` or `${…}`: what is inside the braces (or the name).
    Param(String, bool),
    /// `$(…)` or a backquoted command, as written: never run.
    Command(String, bool),
    /// `$((…))`: the expression inside.
    Arith(String, bool),
}

impl Part {
    /// Whether the part was quoted (or escaped).
    pub fn quoted(&self) -> bool {
        match self {
            Part::Lit(_, q) | Part::Param(_, q) | Part::Command(_, q) | Part::Arith(_, q) => *q,
        }
    }
}

/// A word of the script, in parts, with its text as written and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub parts: Vec<Part>,
    pub raw: String,
    pub line: usize,
}

impl Word {
    /// The word's text when it is one unquoted literal (a reserved word, an operator of a
    /// test): `if`, `]]`.
    pub fn plain(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Lit(text, false)] => Some(text),
            _ => None,
        }
    }

    /// `NAME` (with its `[index]` when written) and whether it appends, and the value's parts,
    /// when the word is an assignment (`NAME=…`, `NAME+=…`, `NAME[i]=…`).
    pub fn assignment(&self) -> Option<(String, bool, Vec<Part>)> {
        let Some(Part::Lit(first, false)) = self.parts.first() else {
            return None;
        };
        let (name, rest) = first.split_once('=')?;
        let (name, append) = match name.strip_suffix('+') {
            Some(n) => (n, true),
            None => (name, false),
        };
        let base = name.split_once('[').map_or(name, |(b, _)| b);
        if !variable(base) || (name != base && !name.ends_with(']')) {
            return None;
        }
        let mut parts = Vec::with_capacity(self.parts.len());
        if !rest.is_empty() {
            parts.push(Part::Lit(rest.to_string(), false));
        }
        parts.extend(self.parts[1..].iter().cloned());
        Some((name.to_string(), append, parts))
    }
}

/// Whether `name` is a shell variable's name.
pub fn variable(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

/// A token of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Word(Word),
    /// `;`, `&`, `&&`, `||`, `|`, `;;`, `(`, `)`.
    Op(&'static str, usize),
    /// A line ends.
    Newline(usize),
    /// `NAME=(` or `NAME+=(`: an array's words follow up to [`Token::Close`].
    Array(String, bool, usize),
    Close,
    /// A redirection's operator (`>`, `2>&`, `<`, …): the next word is its target, not an
    /// argument (inside `[[ ]]`, `<` and `>` compare strings).
    Redirect(String, usize),
    /// `((…))`: an arithmetic command.
    Arith(String, usize),
}

/// The error for text the reader cannot split.
pub fn unclosed(what: &str, line: usize) -> Error {
    Error::invalid(
        "--from script",
        format!("a {what} opened on line {line}"),
        "closed quotes and parentheses (the script as bash would read it)",
    )
}

pub struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    /// The length of the character last read.
    last: usize,
    pub line: usize,
    pub tokens: Vec<Token>,
    pub comments: Vec<String>,
    /// Here-documents' delimiters waiting for the line to end, with whether tabs are stripped.
    heredocs: Vec<(String, bool)>,
    /// The next word is a here-document's delimiter.
    delimiter: Option<bool>,
    /// Lines of here-documents skipped, for a note.
    pub skipped: Vec<usize>,
    /// Inside an array's parentheses.
    array: bool,
    // The word being read.
    parts: Vec<Part>,
    in_word: bool,
    start: usize,
    /// Where the word read so far ends.
    end: usize,
    word_line: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Lexer<'a> {
        Lexer {
            src,
            pos: 0,
            last: 0,
            line: 1,
            tokens: Vec::new(),
            comments: Vec::new(),
            heredocs: Vec::new(),
            delimiter: None,
            skipped: Vec::new(),
            array: false,
            parts: Vec::new(),
            in_word: false,
            start: 0,
            end: 0,
            word_line: 1,
        }
    }

    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        self.last = c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// A word starts with the character just read, if none is being read.
    fn begin(&mut self) {
        if !self.in_word {
            self.in_word = true;
            self.start = self.pos - self.last;
            self.word_line = self.line;
        }
    }

    /// Adds literal text to the word, merged with a literal of the same quoting before it.
    fn lit(&mut self, text: &str, quoted: bool) {
        if let Some(Part::Lit(t, q)) = self.parts.last_mut() {
            if *q == quoted {
                t.push_str(text);
                return;
            }
        }
        self.parts.push(Part::Lit(text.to_string(), quoted));
    }

    /// Ends the word being read.
    fn finish(&mut self) {
        if !self.in_word {
            return;
        }
        self.in_word = false;
        let word = Word {
            parts: std::mem::take(&mut self.parts),
            raw: self.src[self.start..self.end.max(self.start)].to_string(),
            line: self.word_line,
        };
        if let Some(strip) = self.delimiter.take() {
            let text: String = word
                .parts
                .iter()
                .map(|p| match p {
                    Part::Lit(t, _) => t.clone(),
                    _ => String::new(),
                })
                .collect();
            self.heredocs.push((text, strip));
            return;
        }
        self.tokens.push(Token::Word(word));
    }

    /// Reads up to the `close` that matches an `open` already read, nesting and quotes
    /// inside; returns what is between.
    fn balanced(&mut self, open: char, close: char) -> Result<String> {
        let line = self.line;
        let from = self.pos;
        let mut depth = 1;
        loop {
            let c = self
                .bump()
                .ok_or_else(|| unclosed(&format!("{open}"), line))?;
            match c {
                '\\' => {
                    self.bump();
                }
                '\'' | '"' | '`' => loop {
                    let n = self.bump().ok_or_else(|| unclosed(&format!("{c}"), line))?;
                    if n == c {
                        break;
                    }
                    if n == '\\' && c != '\'' {
                        self.bump();
                    }
                },
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.src[from..self.pos - c.len_utf8()].to_string());
                    }
                }
                _ => {}
            }
        }
    }

    /// After a `$`: the expansion it starts, or a literal `$`.
    fn dollar(&mut self, quoted: bool) -> Result<()> {
        match self.peek() {
            Some('(') => {
                self.bump();
                let inner = self.balanced('(', ')')?;
                let part = match inner.strip_prefix('(').and_then(|i| i.strip_suffix(')')) {
                    Some(expr) => Part::Arith(expr.to_string(), quoted),
                    None => Part::Command(format!("$({inner})"), quoted),
                };
                self.parts.push(part);
            }
            Some('{') => {
                self.bump();
                let inner = self.balanced('{', '}')?;
                self.parts.push(Part::Param(inner, quoted));
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let from = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.bump();
                }
                let name = self.src[from..self.pos].to_string();
                self.parts.push(Part::Param(name, quoted));
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.bump();
                self.parts.push(Part::Param(c.to_string(), quoted));
            }
            Some('\'') if !quoted => {
                // $'…': ANSI-C quoting, its common escapes.
                self.bump();
                let line = self.line;
                let mut text = String::new();
                loop {
                    match self.bump() {
                        Some('\'') => break,
                        Some('\\') => match self.bump() {
                            Some('n') => text.push('\n'),
                            Some('t') => text.push('\t'),
                            Some(c) => text.push(c),
                            None => return Err(unclosed("$' quote", line)),
                        },
                        Some(c) => text.push(c),
                        None => return Err(unclosed("$' quote", line)),
                    }
                }
                self.lit(&text, true);
            }
            _ => self.lit("$", quoted),
        }
        Ok(())
    }

    fn backquote(&mut self, quoted: bool) -> Result<()> {
        let line = self.line;
        let from = self.pos;
        loop {
            match self.bump() {
                Some('`') => break,
                Some('\\') => {
                    self.bump();
                }
                Some(_) => {}
                None => return Err(unclosed("backquote", line)),
            }
        }
        let text = format!("`{}", &self.src[from..self.pos]);
        self.parts.push(Part::Command(text, quoted));
        Ok(())
    }

    fn double_quote(&mut self) -> Result<()> {
        let line = self.line;
        loop {
            match self.bump() {
                Some('"') => return Ok(()),
                Some('\\') => match self.bump() {
                    Some(n @ ('"' | '\\' | '$' | '`')) => self.lit(&n.to_string(), true),
                    Some('\n') => {}
                    Some(n) => self.lit(&format!("\\{n}"), true),
                    None => return Err(unclosed("\" quote", line)),
                },
                Some('$') => self.dollar(true)?,
                Some('`') => self.backquote(true)?,
                Some(n) => self.lit(&n.to_string(), true),
                None => return Err(unclosed("\" quote", line)),
            }
        }
    }

    /// The lines of the here-documents opened on the line that just ended, skipped.
    fn skip_heredocs(&mut self) {
        for (delimiter, strip) in std::mem::take(&mut self.heredocs) {
            self.skipped.push(self.line);
            while self.pos < self.src.len() {
                let rest = &self.src[self.pos..];
                let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
                let line = rest[..end].trim_end_matches(['\n', '\r']);
                let line = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                let done = line == delimiter;
                self.pos += end;
                self.line += 1;
                if done {
                    break;
                }
            }
        }
    }

    fn op(&mut self, op: &'static str) {
        self.finish();
        self.tokens.push(Token::Op(op, self.line));
    }

    /// A redirection operator starting with `c` (`>` or `<`, already read).
    fn redirect(&mut self, c: char) -> Result<()> {
        // A file descriptor's number before it (`2>`) belongs to the operator.
        if self.in_word
            && matches!(self.parts.as_slice(), [Part::Lit(t, false)] if t.chars().all(|c| c.is_ascii_digit()))
        {
            self.parts.clear();
            self.in_word = false;
        }
        if self.peek() == Some('(') {
            // Process substitution: a command's text, never run.
            self.begin();
            self.bump();
            let inner = self.balanced('(', ')')?;
            self.parts
                .push(Part::Command(format!("{c}({inner})"), false));
            return Ok(());
        }
        self.finish();
        let mut op = c.to_string();
        if c == '<' && self.peek() == Some('<') {
            self.bump();
            if self.peek() == Some('<') {
                // A here-string: its word follows.
                self.bump();
            } else {
                let strip = self.peek() == Some('-');
                if strip {
                    self.bump();
                }
                self.delimiter = Some(strip);
                return Ok(());
            }
        } else if let Some(n @ ('>' | '&' | '|')) = self.peek() {
            self.bump();
            op.push(n);
        }
        self.tokens.push(Token::Redirect(op, self.line));
        Ok(())
    }

    pub fn run(mut self) -> Result<Lexer<'a>> {
        loop {
            self.end = self.pos;
            let Some(c) = self.bump() else { break };
            match c {
                '\\' => match self.peek() {
                    Some('\n') => {
                        self.bump();
                    }
                    Some(_) => {
                        self.begin();
                        let n = self.bump().expect("a character");
                        self.lit(&n.to_string(), true);
                    }
                    None => {}
                },
                '\'' => {
                    self.begin();
                    let line = self.line;
                    let from = self.pos;
                    loop {
                        match self.bump() {
                            Some('\'') => break,
                            Some(_) => {}
                            None => return Err(unclosed("' quote", line)),
                        }
                    }
                    let text = self.src[from..self.pos - 1].to_string();
                    self.lit(&text, true);
                }
                '"' => {
                    self.begin();
                    let before = self.parts.clone();
                    self.double_quote()?;
                    if self.parts == before {
                        // An empty "" is still a word.
                        self.parts.push(Part::Lit(String::new(), true));
                    }
                }
                '$' => {
                    self.begin();
                    self.dollar(false)?;
                }
                '`' => {
                    self.begin();
                    self.backquote(false)?;
                }
                '#' if !self.in_word => {
                    let from = self.pos;
                    while self.peek().is_some_and(|n| n != '\n') {
                        self.bump();
                    }
                    self.comments.push(self.src[from..self.pos].to_string());
                }
                '\n' => {
                    self.finish();
                    if !self.array {
                        self.tokens.push(Token::Newline(self.line - 1));
                    }
                    self.skip_heredocs();
                }
                ';' if !self.array => {
                    if self.peek() == Some(';') {
                        self.bump();
                        if self.peek() == Some('&') {
                            self.bump();
                        }
                        self.op(";;");
                    } else if self.peek() == Some('&') {
                        self.bump();
                        self.op(";;");
                    } else {
                        self.op(";");
                    }
                }
                '&' if !self.array => {
                    if self.peek() == Some('&') {
                        self.bump();
                        self.op("&&");
                    } else if self.peek() == Some('>') {
                        self.finish();
                        self.bump();
                        if self.peek() == Some('>') {
                            self.bump();
                        }
                        self.tokens.push(Token::Redirect("&>".into(), self.line));
                    } else {
                        self.op("&");
                    }
                }
                '|' if !self.array => {
                    if self.peek() == Some('|') {
                        self.bump();
                        self.op("||");
                    } else {
                        if self.peek() == Some('&') {
                            self.bump();
                        }
                        self.op("|");
                    }
                }
                '>' | '<' if !self.array => self.redirect(c)?,
                '(' => {
                    let array = match self.parts.as_slice() {
                        [Part::Lit(t, false)] if self.in_word && t.ends_with('=') => {
                            let name = &t[..t.len() - 1];
                            let (name, append) = match name.strip_suffix('+') {
                                Some(n) => (n, true),
                                None => (name, false),
                            };
                            variable(name).then(|| (name.to_string(), append))
                        }
                        _ => None,
                    };
                    if let (Some((name, append)), false) = (array, self.array) {
                        self.parts.clear();
                        self.in_word = false;
                        self.tokens.push(Token::Array(name, append, self.line));
                        self.array = true;
                    } else if self.array {
                        self.begin();
                        self.lit("(", false);
                    } else if !self.in_word && self.peek() == Some('(') {
                        self.bump();
                        let line = self.line;
                        let inner = self.balanced('(', ')')?;
                        if self.bump() != Some(')') {
                            return Err(unclosed("((", line));
                        }
                        self.tokens.push(Token::Arith(inner, line));
                    } else {
                        self.op("(");
                    }
                }
                ')' => {
                    if self.array {
                        self.finish();
                        self.tokens.push(Token::Close);
                        self.array = false;
                    } else {
                        self.op(")");
                    }
                }
                c if c.is_whitespace() => self.finish(),
                c => {
                    self.begin();
                    let mut buf = [0; 4];
                    self.lit(c.encode_utf8(&mut buf), false);
                }
            }
        }
        self.end = self.pos;
        self.finish();
        if self.array {
            return Err(unclosed("( of an array", self.line));
        }
        self.tokens.push(Token::Newline(self.line));
        Ok(self)
    }
}

/// The parts of `text` read as the inside of double quotes but with its own quotes honoured
/// (an operand of `${X:-…}`), every part counted as `quoted`.
pub fn operand(text: &str, quoted: bool) -> Result<Vec<Part>> {
    let mut lexer = Lexer::new(text);
    while let Some(c) = lexer.bump() {
        match c {
            '\\' => {
                if let Some(n) = lexer.bump() {
                    lexer.lit(&n.to_string(), true);
                }
            }
            '\'' if !quoted => {
                let from = lexer.pos;
                while lexer.peek().is_some_and(|c| c != '\'') {
                    lexer.bump();
                }
                let t = lexer.src[from..lexer.pos].to_string();
                lexer.bump();
                lexer.lit(&t, true);
            }
            '"' => {
                lexer.lit("", true);
                lexer.double_quote()?;
            }
            '$' => lexer.dollar(quoted)?,
            '`' => lexer.backquote(quoted)?,
            c => {
                let mut buf = [0; 4];
                lexer.lit(c.encode_utf8(&mut buf), quoted);
            }
        }
    }
    Ok(lexer.parts)
}
