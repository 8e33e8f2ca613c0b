//! Bash's arithmetic (`$((…))`, `((…))`, `[[ a -lt b ]]`) on 64-bit integers, and its
//! patterns (`case`, `[[ a == b* ]]`, `${X%.*}`).

/// The value of `expr`, its variables read by `var` (a name's text, itself an expression;
/// unset is 0), or `None` where a value is unknown or the expression is not one the reader
/// follows (assignments, a division by zero, an overflow).
pub fn eval(expr: &str, var: &mut dyn FnMut(&str) -> Option<String>) -> Option<i64> {
    let tokens = tokenize(expr)?;
    let mut p = Eval {
        tokens,
        at: 0,
        var,
        depth: 0,
    };
    let v = p.ternary()?;
    (p.at == p.tokens.len()).then_some(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Name(String),
    Op(&'static str),
}

const OPS: [&str; 30] = [
    "**", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=", "++", "--", "+",
    "-", "*", "/", "%", "<", ">", "&", "|", "^", "!", "~", "?", ":", "=",
];

fn tokenize(expr: &str) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    let s = expr.as_bytes();
    let mut i = 0;
    while i < s.len() {
        let c = s[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' || c == ')' {
            out.push(Tok::Op(if c == '(' { "(" } else { ")" }));
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < s.len() && (s[i] as char).is_ascii_alphanumeric() {
                i += 1;
            }
            out.push(Tok::Num(number(&expr[start..i])?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && ((s[i] as char).is_ascii_alphanumeric() || s[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Name(expr[start..i].to_string()));
        } else {
            let op = OPS.iter().find(|op| expr[i..].starts_with(**op))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Some(out)
}

/// A literal: decimal, `0x` hexadecimal, or `0` octal.
fn number(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()
    } else if text.len() > 1 && text.starts_with('0') {
        i64::from_str_radix(&text[1..], 8).ok()
    } else {
        text.parse().ok()
    }
}

struct Eval<'a> {
    tokens: Vec<Tok>,
    at: usize,
    var: &'a mut dyn FnMut(&str) -> Option<String>,
    depth: usize,
}

impl Eval<'_> {
    fn eat(&mut self, op: &str) -> bool {
        if self.tokens.get(self.at)
            == Some(&Tok::Op(match op {
                "(" => "(",
                ")" => ")",
                "?" => "?",
                ":" => ":",
                _ => return false,
            }))
        {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn ternary(&mut self) -> Option<i64> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.ternary()?;
            if !self.eat(":") {
                return None;
            }
            let b = self.ternary()?;
            return Some(if c != 0 { a } else { b });
        }
        Some(c)
    }

    /// Binary operators by C's precedence, loosest first.
    fn binary(&mut self, level: usize) -> Option<i64> {
        const LEVELS: [&[&str]; 10] = [
            &["||"],
            &["&&"],
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<", ">", "<=", ">="],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.power();
        }
        let mut left = self.binary(level + 1)?;
        while let Some(Tok::Op(op)) = self.tokens.get(self.at) {
            let op = *op;
            if !LEVELS[level].contains(&op) {
                break;
            }
            self.at += 1;
            let right = self.binary(level + 1)?;
            left = match op {
                "||" => i64::from(left != 0 || right != 0),
                "&&" => i64::from(left != 0 && right != 0),
                "|" => left | right,
                "^" => left ^ right,
                "&" => left & right,
                "==" => i64::from(left == right),
                "!=" => i64::from(left != right),
                "<" => i64::from(left < right),
                ">" => i64::from(left > right),
                "<=" => i64::from(left <= right),
                ">=" => i64::from(left >= right),
                "<<" => left.checked_shl(u32::try_from(right).ok()?)?,
                ">>" => left.checked_shr(u32::try_from(right).ok()?)?,
                "+" => left.checked_add(right)?,
                "-" => left.checked_sub(right)?,
                "*" => left.checked_mul(right)?,
                "/" => left.checked_div(right)?,
                _ => left.checked_rem(right)?,
            };
        }
        Some(left)
    }

    fn power(&mut self) -> Option<i64> {
        let base = self.unary()?;
        if self.tokens.get(self.at) == Some(&Tok::Op("**")) {
            self.at += 1;
            let exp = self.power()?;
            return base.checked_pow(u32::try_from(exp).ok()?);
        }
        Some(base)
    }

    fn unary(&mut self) -> Option<i64> {
        let tok = self.tokens.get(self.at)?.clone();
        self.at += 1;
        match tok {
            Tok::Num(n) => Some(n),
            Tok::Name(name) => {
                if matches!(self.tokens.get(self.at), Some(Tok::Op(op)) if op.ends_with('=') && !["==", "!=", "<=", ">="].contains(op) || *op == "++" || *op == "--")
                {
                    // An assignment inside arithmetic: not followed.
                    return None;
                }
                let text = (self.var)(&name)?;
                if text.trim().is_empty() {
                    return Some(0);
                }
                if self.depth > 8 {
                    return None;
                }
                let mut inner = Eval {
                    tokens: tokenize(&text)?,
                    at: 0,
                    var: self.var,
                    depth: self.depth + 1,
                };
                let v = inner.ternary()?;
                (inner.at == inner.tokens.len()).then_some(v)
            }
            Tok::Op("(") => {
                let v = self.ternary()?;
                self.eat(")").then_some(v)
            }
            Tok::Op("-") => self.unary()?.checked_neg(),
            Tok::Op("+") => self.unary(),
            Tok::Op("!") => Some(i64::from(self.unary()? == 0)),
            Tok::Op("~") => Some(!self.unary()?),
            _ => None,
        }
    }
}

/// Whether `text` matches the shell pattern `pattern` (`*`, `?`, `[…]`, `\` escapes).
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // matches[j]: whether p[..i] matches t[..j], row by row.
    let mut row = vec![false; t.len() + 1];
    row[0] = true;
    let mut i = 0;
    while i < p.len() {
        let mut next = vec![false; t.len() + 1];
        let (width, class): (usize, Option<(Vec<char>, bool)>) = match p[i] {
            '[' => match p[i + 1..].iter().skip(1).position(|&c| c == ']') {
                Some(end) => {
                    let body: Vec<char> = p[i + 1..i + 2 + end].to_vec();
                    let (negate, body) = match body.first() {
                        Some('!' | '^') => (true, body[1..].to_vec()),
                        _ => (false, body),
                    };
                    (end + 3, Some((body, negate)))
                }
                None => (1, None),
            },
            '\\' if i + 1 < p.len() => (2, None),
            _ => (1, None),
        };
        let c = if p[i] == '\\' && width == 2 {
            p[i + 1]
        } else {
            p[i]
        };
        if p[i] == '*' {
            let mut any = false;
            for j in 0..=t.len() {
                any |= row[j];
                next[j] = any;
            }
        } else {
            for j in 0..t.len() {
                if !row[j] {
                    continue;
                }
                let ok = match &class {
                    Some((body, negate)) => in_class(body, t[j]) != *negate,
                    None if p[i] == '?' => true,
                    None => t[j] == c,
                };
                if ok {
                    next[j + 1] = true;
                }
            }
        }
        row = next;
        i += width;
    }
    row[t.len()]
}

fn in_class(body: &[char], c: char) -> bool {
    let mut k = 0;
    while k < body.len() {
        if k + 2 < body.len() && body[k + 1] == '-' {
            if body[k] <= c && c <= body[k + 2] {
                return true;
            }
            k += 3;
        } else {
            if body[k] == c {
                return true;
            }
            k += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calc(expr: &str) -> Option<i64> {
        eval(expr, &mut |name| match name {
            "GPUS_PER_NODE" => Some("8".into()),
            "NUM_NODES" => Some("2".into()),
            "TWICE" => Some("NUM_NODES * 2".into()),
            _ => None,
        })
    }

    #[test]
    fn arithmetic_is_bash_s() {
        assert_eq!(
            calc("$GPUS_PER_NODE*$NUM_NODES".replace('$', "").as_str()),
            Some(16)
        );
        assert_eq!(calc("1 + 2 * 3"), Some(7));
        assert_eq!(calc("(1 + 2) * 3"), Some(9));
        assert_eq!(calc("2 ** 3 ** 2"), Some(512));
        assert_eq!(calc("1 << 4 | 1"), Some(17));
        assert_eq!(calc("7 / 2 + 7 % 2"), Some(4));
        assert_eq!(calc("NUM_NODES > 1 ? 4 : 1"), Some(4));
        assert_eq!(calc("TWICE + 1"), Some(5));
        assert_eq!(calc("0x10 + 010"), Some(24));
        assert_eq!(calc("-3 + !0"), Some(-2));
        // What is not known, or not arithmetic the reader follows, is no value.
        assert_eq!(calc("UNKNOWN + 1"), None);
        assert_eq!(calc("1 / 0"), None);
        assert_eq!(calc("X = 3"), None);
        assert_eq!(calc("1 +"), None);
    }

    #[test]
    fn patterns_are_bash_s() {
        assert!(glob("*.py", "pretrain_gpt.py"));
        assert!(!glob("*.py", "pretrain_gpt.sh"));
        assert!(glob("fp8", "fp8"));
        assert!(glob("fp?", "fp4"));
        assert!(glob("[bf]p16", "fp16"));
        assert!(!glob("[!bf]p16", "fp16"));
        assert!(glob("*", ""));
        assert!(glob("a\\*", "a*"));
        assert!(!glob("a\\*", "ab"));
        assert!(glob("llama*8b", "llama3-8b"));
    }
}
