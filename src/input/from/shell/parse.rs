//! A launch script's tokens put together as bash's grammar puts them: lists of and-or lists
//! of pipelines of commands, simple (assignments and words) or compound (`if`, `case`, `for`,
//! `while`, `{ … }`, `( … )`, `[[ … ]]`, `(( … ))`, a function's definition).

use std::rc::Rc;

use super::lex::{Part, Token, Word};
use crate::error::{Error, Result};

/// An assignment's value.
#[derive(Debug, Clone)]
pub enum Value {
    Scalar(Vec<Part>),
    Array(Vec<Word>),
}

/// `NAME=value`, `NAME+=value`, `NAME=( … )`, `NAME[i]=value`.
#[derive(Debug, Clone)]
pub struct Assign {
    pub name: String,
    pub append: bool,
    pub value: Value,
}

/// A command of the script.
#[derive(Debug, Clone)]
pub enum Node {
    /// Assignments and words (a command when there are words).
    Simple {
        assigns: Vec<Assign>,
        words: Vec<Word>,
        line: usize,
    },
    /// `[[ … ]]`: its words, operators among them.
    Test(Vec<Word>, usize),
    /// `(( … ))`.
    Arith(String, usize),
    /// `if`: each condition with its branch, and the `else` branch.
    If {
        arms: Vec<(Vec<Node>, Vec<Node>)>,
        otherwise: Option<Vec<Node>>,
        line: usize,
    },
    /// `case WORD in PATTERNS) … ;; esac`.
    Case {
        subject: Word,
        arms: Vec<(Vec<Word>, Vec<Node>)>,
        line: usize,
    },
    /// `for NAME in WORDS; do … done` (all the script's arguments without `in`).
    For {
        name: String,
        items: Option<Vec<Word>>,
        body: Vec<Node>,
        line: usize,
    },
    /// A loop the reader does not run: `while`, `until`, `for ((…))`.
    Loop {
        kind: &'static str,
        body: Vec<Node>,
        line: usize,
    },
    /// `{ … }`, or a subshell `( … )` (true), whose variables are its own.
    Group(Vec<Node>, bool),
    /// A function's definition.
    Function(String, Rc<Node>),
    /// A pipeline, then others after `&&` (true) or `||` (false).
    AndOr(Box<Node>, Vec<(bool, Node)>),
    /// `! pipeline`.
    Not(Box<Node>),
    /// `a | b`: each runs.
    Pipeline(Vec<Node>),
}

fn syntax(what: &str, line: usize) -> Error {
    Error::invalid(
        "--from script",
        format!("{what} (line {line})"),
        "a script bash would run (the reader follows bash's grammar)",
    )
}

pub struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// Compound commands open around the cursor.
    depth: usize,
}

/// Compound commands nested at most: deeper is refused, so no input runs the stack out.
const MAX_DEPTH: usize = 64;

impl Parser {
    pub fn new(tokens: Vec<Token>) -> Parser {
        Parser {
            tokens,
            at: 0,
            depth: 0,
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn line(&self) -> usize {
        match self
            .tokens
            .get(self.at.min(self.tokens.len().saturating_sub(1)))
        {
            Some(Token::Word(w)) => w.line,
            Some(
                Token::Op(_, l)
                | Token::Newline(l)
                | Token::Array(_, _, l)
                | Token::Redirect(_, l)
                | Token::Arith(_, l),
            ) => *l,
            _ => 0,
        }
    }

    /// The plain word at the cursor, if the next token is one.
    fn keyword(&self) -> Option<&str> {
        match self.peek() {
            Some(Token::Word(w)) => w.plain(),
            _ => None,
        }
    }

    fn expect(&mut self, word: &str, opened: &str, line: usize) -> Result<()> {
        self.skip_newlines();
        if self.keyword() == Some(word) {
            self.at += 1;
            Ok(())
        } else {
            Err(syntax(&format!("{opened} without its {word}"), line))
        }
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Some(Token::Newline(_))) {
            self.at += 1;
        }
    }

    /// The whole script.
    pub fn script(mut self) -> Result<Vec<Node>> {
        let nodes = self.list(&[])?;
        match self.peek() {
            None => Ok(nodes),
            Some(Token::Word(w)) => Err(syntax(&format!("{} out of place", w.raw), w.line)),
            Some(Token::Op(op, line)) => Err(syntax(&format!("{op} out of place"), *line)),
            Some(_) => Err(syntax("a token out of place", self.line())),
        }
    }

    /// Commands up to one of the reserved words `until` (at a command's start), a `)`, a
    /// `;;` or the end.
    fn list(&mut self, until: &[&str]) -> Result<Vec<Node>> {
        let mut nodes = Vec::new();
        loop {
            while matches!(
                self.peek(),
                Some(Token::Newline(_) | Token::Op(";" | "&", _))
            ) {
                self.at += 1;
            }
            match self.peek() {
                None | Some(Token::Op(")" | ";;", _)) => break,
                Some(Token::Word(w)) if w.plain().is_some_and(|p| until.contains(&p)) => break,
                _ => nodes.push(self.and_or()?),
            }
        }
        Ok(nodes)
    }

    fn and_or(&mut self) -> Result<Node> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        while let Some(Token::Op(op @ ("&&" | "||"), _)) = self.peek() {
            let and = *op == "&&";
            self.at += 1;
            self.skip_newlines();
            rest.push((and, self.pipeline()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Node::AndOr(Box::new(first), rest)
        })
    }

    fn pipeline(&mut self) -> Result<Node> {
        let not = self.keyword() == Some("!");
        if not {
            self.at += 1;
        }
        let mut commands = vec![self.command()?];
        while let Some(Token::Op("|", _)) = self.peek() {
            self.at += 1;
            self.skip_newlines();
            commands.push(self.command()?);
        }
        let node = if commands.len() == 1 {
            commands.pop().expect("one command")
        } else {
            Node::Pipeline(commands)
        };
        Ok(if not { Node::Not(Box::new(node)) } else { node })
    }

    /// Redirections after a compound command, passed over.
    fn redirections(&mut self) {
        while let Some(Token::Redirect(..)) = self.peek() {
            self.at += 1;
            if let Some(Token::Word(_)) = self.peek() {
                self.at += 1;
            }
        }
    }

    fn command(&mut self) -> Result<Node> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(syntax(
                &format!("commands nested more than {MAX_DEPTH} deep"),
                self.line(),
            ));
        }
        let node = self.compound();
        self.depth -= 1;
        node
    }

    fn compound(&mut self) -> Result<Node> {
        let line = self.line();
        let node = match self.peek() {
            Some(Token::Op("(", _)) => {
                self.at += 1;
                let body = self.list(&[])?;
                match self.peek() {
                    Some(Token::Op(")", _)) => self.at += 1,
                    _ => return Err(syntax("a ( without its )", line)),
                }
                Node::Group(body, true)
            }
            Some(Token::Arith(expr, line)) => {
                let node = Node::Arith(expr.clone(), *line);
                self.at += 1;
                node
            }
            Some(Token::Word(w)) => match w.plain() {
                Some("if") => self.if_()?,
                Some("case") => self.case()?,
                Some("for") => self.for_()?,
                Some(kind @ ("while" | "until")) => {
                    let kind = if kind == "while" { "while" } else { "until" };
                    self.at += 1;
                    self.list(&["do"])?;
                    let body = self.do_done(kind, line)?;
                    Node::Loop { kind, body, line }
                }
                Some("{") => {
                    self.at += 1;
                    let body = self.list(&["}"])?;
                    self.expect("}", "{", line)?;
                    Node::Group(body, false)
                }
                Some("[[") => {
                    self.at += 1;
                    let mut words = Vec::new();
                    loop {
                        match self.tokens.get(self.at) {
                            Some(Token::Word(w)) if w.plain() == Some("]]") => {
                                self.at += 1;
                                break;
                            }
                            Some(Token::Word(w)) => words.push(w.clone()),
                            Some(Token::Op(op, l)) => words.push(Word {
                                parts: vec![Part::Lit(op.to_string(), false)],
                                raw: op.to_string(),
                                line: *l,
                            }),
                            // `<` and `>` compare strings inside `[[ ]]`.
                            Some(Token::Redirect(op, l)) => words.push(Word {
                                parts: vec![Part::Lit(op.clone(), false)],
                                raw: op.clone(),
                                line: *l,
                            }),
                            _ => return Err(syntax("[[ without its ]]", line)),
                        }
                        self.at += 1;
                    }
                    Node::Test(words, line)
                }
                Some("function") => {
                    self.at += 1;
                    let name = match self.peek() {
                        Some(Token::Word(w)) => w.plain().unwrap_or(&w.raw).to_string(),
                        _ => return Err(syntax("function without a name", line)),
                    };
                    self.at += 1;
                    if let Some(Token::Op("(", _)) = self.peek() {
                        self.at += 1;
                        if !matches!(self.peek(), Some(Token::Op(")", _))) {
                            return Err(syntax("function name( without )", line));
                        }
                        self.at += 1;
                    }
                    self.skip_newlines();
                    Node::Function(name, Rc::new(self.command()?))
                }
                _ if matches!(self.tokens.get(self.at + 1), Some(Token::Op("(", _)))
                    && matches!(self.tokens.get(self.at + 2), Some(Token::Op(")", _))) =>
                {
                    let name = w.plain().unwrap_or(&w.raw).to_string();
                    self.at += 3;
                    self.skip_newlines();
                    Node::Function(name, Rc::new(self.command()?))
                }
                _ => return self.simple(),
            },
            Some(Token::Array(..) | Token::Redirect(..)) => return self.simple(),
            Some(Token::Op(op, line)) => return Err(syntax(&format!("{op} out of place"), *line)),
            Some(Token::Newline(_)) | None => return Err(syntax("a command missing", line)),
            Some(Token::Close) => return Err(syntax(") out of place", line)),
        };
        self.redirections();
        Ok(node)
    }

    fn simple(&mut self) -> Result<Node> {
        let line = self.line();
        let mut assigns = Vec::new();
        let mut words: Vec<Word> = Vec::new();
        loop {
            // Assignments lead a command, and follow `export` and its like.
            let assigning = words.is_empty()
                || matches!(
                    words[0].plain(),
                    Some("export" | "declare" | "typeset" | "local" | "readonly")
                );
            match self.peek().cloned() {
                Some(Token::Word(w)) => {
                    self.at += 1;
                    match w.assignment() {
                        Some((name, append, parts)) if assigning => assigns.push(Assign {
                            name,
                            append,
                            value: Value::Scalar(parts),
                        }),
                        _ => words.push(w),
                    }
                }
                Some(Token::Array(name, append, l)) => {
                    self.at += 1;
                    let mut items = Vec::new();
                    loop {
                        match self.peek().cloned() {
                            Some(Token::Word(w)) => items.push(w),
                            Some(Token::Close) => break,
                            _ => return Err(syntax("an array's ( without its )", l)),
                        }
                        self.at += 1;
                    }
                    self.at += 1;
                    if assigning {
                        assigns.push(Assign {
                            name,
                            append,
                            value: Value::Array(items),
                        });
                    } else {
                        return Err(syntax(&format!("{name}=( as an argument"), l));
                    }
                }
                Some(Token::Redirect(..)) => {
                    self.at += 1;
                    if let Some(Token::Word(_)) = self.peek() {
                        self.at += 1;
                    }
                }
                _ => break,
            }
        }
        Ok(Node::Simple {
            assigns,
            words,
            line,
        })
    }

    /// A loop's `do … done`, its body.
    fn do_done(&mut self, kind: &str, line: usize) -> Result<Vec<Node>> {
        self.expect("do", kind, line)?;
        let body = self.list(&["done"])?;
        self.expect("done", kind, line)?;
        Ok(body)
    }

    fn if_(&mut self) -> Result<Node> {
        let line = self.line();
        self.at += 1;
        let mut arms = Vec::new();
        let mut otherwise = None;
        loop {
            let cond = self.list(&["then"])?;
            self.expect("then", "if", line)?;
            let body = self.list(&["elif", "else", "fi"])?;
            arms.push((cond, body));
            match self.keyword() {
                Some("elif") => self.at += 1,
                Some("else") => {
                    self.at += 1;
                    otherwise = Some(self.list(&["fi"])?);
                    self.expect("fi", "if", line)?;
                    break;
                }
                _ => {
                    self.expect("fi", "if", line)?;
                    break;
                }
            }
        }
        Ok(Node::If {
            arms,
            otherwise,
            line,
        })
    }

    fn case(&mut self) -> Result<Node> {
        let line = self.line();
        self.at += 1;
        let subject = match self.peek() {
            Some(Token::Word(w)) => w.clone(),
            _ => return Err(syntax("case without a word", line)),
        };
        self.at += 1;
        self.skip_newlines();
        if self.keyword() != Some("in") {
            return Err(syntax("case without in", line));
        }
        self.at += 1;
        let mut arms = Vec::new();
        loop {
            self.skip_newlines();
            if self.peek().is_none() {
                return Err(syntax("case without its esac", line));
            }
            if self.keyword() == Some("esac") {
                self.at += 1;
                break;
            }
            if let Some(Token::Op("(", _)) = self.peek() {
                self.at += 1;
            }
            let mut patterns = Vec::new();
            loop {
                match self.peek() {
                    Some(Token::Word(w)) => patterns.push(w.clone()),
                    _ => return Err(syntax("a case pattern missing", self.line())),
                }
                self.at += 1;
                match self.peek() {
                    Some(Token::Op("|", _)) => self.at += 1,
                    Some(Token::Op(")", _)) => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(syntax("a case pattern without )", self.line())),
                }
            }
            let body = self.list(&["esac"])?;
            if let Some(Token::Op(";;", _)) = self.peek() {
                self.at += 1;
            }
            arms.push((patterns, body));
        }
        Ok(Node::Case {
            subject,
            arms,
            line,
        })
    }

    fn for_(&mut self) -> Result<Node> {
        let line = self.line();
        self.at += 1;
        if let Some(Token::Arith(..)) = self.peek() {
            self.at += 1;
            self.list(&["do"])?;
            let body = self.do_done("for", line)?;
            return Ok(Node::Loop {
                kind: "for ((…))",
                body,
                line,
            });
        }
        let name = match self.keyword() {
            Some(n) if super::lex::variable(n) => n.to_string(),
            _ => return Err(syntax("for without a variable", line)),
        };
        self.at += 1;
        self.skip_newlines();
        let items = if self.keyword() == Some("in") {
            self.at += 1;
            let mut items = Vec::new();
            while let Some(Token::Word(w)) = self.peek() {
                if w.plain() == Some("do") {
                    break;
                }
                items.push(w.clone());
                self.at += 1;
            }
            Some(items)
        } else {
            None
        };
        while matches!(self.peek(), Some(Token::Newline(_) | Token::Op(";", _))) {
            self.at += 1;
        }
        let body = self.do_done("for", line)?;
        Ok(Node::For {
            name,
            items,
            body,
            line,
        })
    }
}
