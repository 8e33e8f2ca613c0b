//! Bash's arithmetic (`$((…))`, `((…))`, `[[ a -lt b ]]`) on 64-bit integers, and its
//! patterns (`case`, `[[ a == b* ]]`, `${X%.*}`).

/// How arithmetic reaches the script's variables: `get` a name's text (itself an
/// expression; empty or unset is 0), `None` where unknown; `set` a name to a value.
pub trait Vars {
    fn get(&mut self, name: &str) -> Option<String>;
    fn set(&mut self, name: &str, value: i64);
}

/// The value of `expr`, as bash works it out on 64-bit integers: C's operators and
/// precedence, `?:`, `&&` and `||` evaluating only the side they need, assignments (`=`,
/// `+=` and the like, `++`, `--`) made through `vars`; `None` where a value is unknown or the
/// expression is not arithmetic (a division by zero, an overflow, a syntax error).
pub fn eval(expr: &str, vars: &mut dyn Vars) -> Option<i64> {
    eval_at(expr, vars, 0)
}

/// Nesting at most: deeper expressions (and variables naming variables) are not followed.
const DEPTH: usize = 64;

fn eval_at(expr: &str, vars: &mut dyn Vars, depth: usize) -> Option<i64> {
    if depth > DEPTH {
        return None;
    }
    let tokens = tokenize(expr)?;
    let mut p = Eval {
        tokens,
        at: 0,
        vars,
        depth,
        nesting: 0,
    };
    let mut v = p.assignment(true)?;
    // The comma operator: the last value.
    while p.eat(",") {
        v = p.assignment(true)?;
    }
    (p.at == p.tokens.len()).then_some(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Name(String),
    Op(&'static str),
}

/// Operators, longest first.
const OPS: [&str; 39] = [
    "<<=", ">>=", "**", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=",
    "%=", "&=", "|=", "^=", "++", "--", "+", "-", "*", "/", "%", "<", ">", "&", "|", "^", "!", "~",
    "?", ":", "=", "(", ")", ",",
];

fn tokenize(expr: &str) -> Option<Vec<Tok>> {
    let mut out = Vec::new();
    let s = expr.as_bytes();
    let mut i = 0;
    while i < s.len() {
        let c = s[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'#') {
                i += 1;
            }
            out.push(Tok::Num(number(&expr[start..i])?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
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

/// A literal: decimal, `0x` hexadecimal, `0` octal, or `BASE#digits`.
fn number(text: &str) -> Option<i64> {
    if let Some((base, digits)) = text.split_once('#') {
        let base: u32 = base.parse().ok().filter(|b| (2..=36).contains(b))?;
        return i64::from_str_radix(digits, base).ok();
    }
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
    vars: &'a mut dyn Vars,
    depth: usize,
    /// Parentheses and operators open: bounded, so no input runs the stack out.
    nesting: usize,
}

/// The binary operators by C's precedence, loosest first (`&&` and `||` apart).
const LEVELS: [&[&str]; 8] = [
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

impl Eval<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// Enters a nested rule; `None` past the bound.
    fn enter(&mut self) -> Option<()> {
        self.nesting += 1;
        (self.nesting <= 256).then_some(())
    }

    /// The variable `name`'s value (`live`: where not, 0 and nothing read).
    fn read(&mut self, name: &str, live: bool) -> Option<i64> {
        if !live {
            return Some(0);
        }
        let text = self.vars.get(name)?;
        if text.trim().is_empty() {
            return Some(0);
        }
        eval_at(&text, self.vars, self.depth + 1)
    }

    /// `NAME op= value`, or the conditional expression; `live` is false on the side `?:`,
    /// `&&` or `||` does not take, where nothing is read, set or refused.
    fn assignment(&mut self, live: bool) -> Option<i64> {
        self.enter()?;
        if let (Some(Tok::Name(name)), Some(Tok::Op(op))) = (
            self.tokens.get(self.at).cloned(),
            self.tokens.get(self.at + 1).cloned(),
        ) {
            if op.ends_with('=') && !["==", "!=", "<=", ">="].contains(&op) {
                self.at += 2;
                let rhs = self.assignment(live)?;
                let value = if op == "=" {
                    rhs
                } else {
                    let old = self.read(&name, live)?;
                    apply(&op[..op.len() - 1], old, rhs, live)?
                };
                if live {
                    self.vars.set(&name, value);
                }
                self.nesting -= 1;
                return Some(value);
            }
        }
        let v = self.ternary(live);
        self.nesting -= 1;
        v
    }

    fn ternary(&mut self, live: bool) -> Option<i64> {
        let c = self.or(live)?;
        if self.eat("?") {
            let a = self.assignment(live && c != 0)?;
            if !self.eat(":") {
                return None;
            }
            let b = self.assignment(live && c == 0)?;
            return Some(if c != 0 { a } else { b });
        }
        Some(c)
    }

    fn or(&mut self, live: bool) -> Option<i64> {
        let mut v = self.and(live)?;
        while self.eat("||") {
            let rhs = self.and(live && v == 0)?;
            v = i64::from(v != 0 || rhs != 0);
        }
        Some(v)
    }

    fn and(&mut self, live: bool) -> Option<i64> {
        let mut v = self.binary(0, live)?;
        while self.eat("&&") {
            let rhs = self.binary(0, live && v != 0)?;
            v = i64::from(v != 0 && rhs != 0);
        }
        Some(v)
    }

    fn binary(&mut self, level: usize, live: bool) -> Option<i64> {
        if level == LEVELS.len() {
            return self.power(live);
        }
        let mut left = self.binary(level + 1, live)?;
        while let Some(Tok::Op(op)) = self.peek() {
            let op = *op;
            if !LEVELS[level].contains(&op) {
                break;
            }
            self.at += 1;
            let right = self.binary(level + 1, live)?;
            left = apply(op, left, right, live)?;
        }
        Some(left)
    }

    fn power(&mut self, live: bool) -> Option<i64> {
        let base = self.unary(live)?;
        if self.eat("**") {
            self.enter()?;
            let exp = self.power(live)?;
            self.nesting -= 1;
            return apply("**", base, exp, live);
        }
        Some(base)
    }

    fn unary(&mut self, live: bool) -> Option<i64> {
        self.enter()?;
        let tok = self.peek()?.clone();
        self.at += 1;
        let v = match tok {
            Tok::Num(n) => Some(n),
            Tok::Name(name) => {
                // NAME++ and NAME--: the old value, the variable stepped.
                let step = match self.peek() {
                    Some(Tok::Op("++")) => Some(1),
                    Some(Tok::Op("--")) => Some(-1),
                    _ => None,
                };
                let v = self.read(&name, live)?;
                if let Some(step) = step {
                    self.at += 1;
                    if live {
                        self.vars.set(&name, v.checked_add(step)?);
                    }
                }
                Some(v)
            }
            Tok::Op(op @ ("++" | "--")) => match self.peek().cloned() {
                Some(Tok::Name(name)) => {
                    self.at += 1;
                    let v = self.read(&name, live)?;
                    let v = if op == "++" {
                        v.checked_add(1)?
                    } else {
                        v.checked_sub(1)?
                    };
                    if live {
                        self.vars.set(&name, v);
                    }
                    Some(v)
                }
                _ => None,
            },
            Tok::Op("(") => {
                let mut v = self.assignment(live)?;
                while self.eat(",") {
                    v = self.assignment(live)?;
                }
                self.eat(")").then_some(v)
            }
            Tok::Op("-") => {
                let v = self.unary(live)?;
                if live {
                    v.checked_neg()
                } else {
                    Some(0)
                }
            }
            Tok::Op("+") => self.unary(live),
            Tok::Op("!") => Some(i64::from(self.unary(live)? == 0)),
            Tok::Op("~") => Some(!self.unary(live)?),
            _ => None,
        };
        self.nesting -= 1;
        v
    }
}

/// `left op right`, `None` where bash would fail (division by zero, a negative exponent) or
/// the value leaves 64 bits; on the side not taken (`live` false), 0.
fn apply(op: &str, left: i64, right: i64, live: bool) -> Option<i64> {
    if !live {
        return Some(0);
    }
    Some(match op {
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
        "%" => left.checked_rem(right)?,
        "**" => left.checked_pow(u32::try_from(right).ok()?)?,
        _ => return None,
    })
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

    struct Map(std::collections::HashMap<String, String>);

    impl Vars for Map {
        fn get(&mut self, name: &str) -> Option<String> {
            match name {
                "UNKNOWN" => None,
                _ => Some(self.0.get(name).cloned().unwrap_or_default()),
            }
        }
        fn set(&mut self, name: &str, value: i64) {
            self.0.insert(name.to_string(), value.to_string());
        }
    }

    fn vars() -> Map {
        Map([
            ("GPUS_PER_NODE", "8"),
            ("NUM_NODES", "2"),
            ("TWICE", "NUM_NODES * 2"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect())
    }

    fn calc(expr: &str) -> Option<i64> {
        eval(expr, &mut vars())
    }

    #[test]
    fn arithmetic_is_bash_s() {
        assert_eq!(calc("GPUS_PER_NODE*NUM_NODES"), Some(16));
        assert_eq!(calc("1 + 2 * 3"), Some(7));
        assert_eq!(calc("(1 + 2) * 3"), Some(9));
        assert_eq!(calc("2 ** 3 ** 2"), Some(512));
        assert_eq!(calc("1 << 4 | 1"), Some(17));
        assert_eq!(calc("7 / 2 + 7 % 2"), Some(4));
        assert_eq!(calc("NUM_NODES > 1 ? 4 : 1"), Some(4));
        assert_eq!(calc("TWICE + 1"), Some(5));
        assert_eq!(calc("0x10 + 010 + 2#11"), Some(27));
        assert_eq!(calc("-3 + !0"), Some(-2));
        assert_eq!(calc("UNSET + 1"), Some(1));
        // Only the side taken is worked out, as in C.
        assert_eq!(calc("NUM_NODES > 2 ? 8 / (NUM_NODES - 2) : 1"), Some(1));
        assert_eq!(calc("NUM_NODES == 2 || 1 / 0"), Some(1));
        assert_eq!(calc("0 && UNKNOWN"), Some(0));
        // What is not known, or not arithmetic, is no value.
        assert_eq!(calc("UNKNOWN + 1"), None);
        assert_eq!(calc("1 / 0"), None);
        assert_eq!(calc("1 +"), None);
        assert_eq!(calc(&"(".repeat(10_000)), None);
    }

    #[test]
    fn assignments_set_the_variables() {
        let mut v = vars();
        assert_eq!(eval("GBS = GPUS_PER_NODE * 8", &mut v), Some(64));
        assert_eq!(v.0["GBS"], "64");
        assert_eq!(eval("GBS += 1, GBS++", &mut v), Some(65));
        assert_eq!(v.0["GBS"], "66");
        assert_eq!(eval("--GBS", &mut v), Some(65));
        assert_eq!(eval("X = Y = 3", &mut v), Some(3));
        assert_eq!((v.0["X"].as_str(), v.0["Y"].as_str()), ("3", "3"));
        // Not on the side not taken.
        assert_eq!(eval("0 && (Z = 1)", &mut v), Some(0));
        assert!(!v.0.contains_key("Z"));
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
