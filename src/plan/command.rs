//! The `check` command line that grades a listed plan again as the search graded it: the
//! search's own flags that `check` shares (the brief's, the memory and time models'), the
//! plan's model, its tokens, its layout and its whole training step.
//!
//! `check` and `search` share the brief's flags and the models' settings by name
//! (`--gpu`, `--stack`, `--calibration`, …), so those go across as the user gave them; what
//! the search chose from lists (`--recompute none,selective,full`, `--cp 1,2`, …) is written
//! as the one value the plan has. The round trip is tested: every listed plan of a set of
//! searches, its command run, gives back the plan's memory, days and loss
//! (`tests/commands.rs`).

use std::collections::BTreeMap;

use crate::brief::Brief;
use crate::plan::Plan;

/// The flags a search passes on to the `check` of each plan it lists.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckCommand {
    /// The search's brief flags, which `check` takes as they are, each a flag and its value
    /// (`--gpu b200`, `--max-days 21`).
    pub brief: Vec<Vec<String>>,
    /// The search's flags of the memory and time models, which `check` takes as they are,
    /// each a flag and its value, none for a switch (`--detailed`, `--stack torchtitan`).
    pub settings: Vec<Vec<String>>,
    /// Each listed shape's model flags, by its name (`--model llama3-70b`,
    /// `--model-config PATH`, or an ad-hoc shape's dimensions), or why `check` has none for it
    /// (a config's biases or blocks without its file, two shapes of one name).
    pub models: BTreeMap<String, std::result::Result<Vec<String>, String>>,
    /// Whether the text report lists each plan's command (`--show-commands`); the JSON
    /// always gives them.
    pub show: bool,
}

impl CheckCommand {
    /// The arguments of `trainplan check` (without those two words) that grade `p` as the
    /// search did on `brief`; `Err` with the reason where `check` cannot express it.
    pub fn args(&self, p: &Plan, brief: &Brief) -> std::result::Result<Vec<String>, String> {
        let mut out = self.model(p)?;
        // The step's sequence length where the search tried several (--seq-lens).
        let seq_len = p.step.map(|s| s.seq_len).filter(|&s| s != brief.seq_len);
        for flag in self.brief.iter().chain(&self.settings) {
            if seq_len.is_some() && flag[0] == "--seq-len" {
                continue;
            }
            out.extend(flag.iter().cloned());
        }
        if let Some(s) = seq_len {
            push(&mut out, "--seq-len", s);
        }
        layout_args(p, &mut out);
        if let Some(s) = &p.step {
            push(&mut out, "--micro-batch", s.micro_batch);
            push(&mut out, "--recompute", s.recompute.name());
            if p.layout.tp > 1 {
                push(&mut out, "--sequence-parallel", on_off(s.sequence_parallel));
                push(&mut out, "--tp-comm-overlap", on_off(s.tp_comm_overlap));
            }
            push(&mut out, "--schedule", s.schedule);
            push(&mut out, "--global-batch-tokens", s.global_batch_tokens);
            push(&mut out, "--precision", s.precision);
        }
        Ok(out)
    }

    /// The arguments of `trainplan check` that grade a plate plan `p` as the search's
    /// *runnable* grade does ([`crate::plan::runnable`]): under the detailed models at their
    /// defaults (the default stack, `check`'s default step), so with the brief's flags alone
    /// and `--detailed`.
    pub fn detailed_args(&self, p: &Plan) -> std::result::Result<Vec<String>, String> {
        let mut out = self.model(p)?;
        for flag in &self.brief {
            out.extend(flag.iter().cloned());
        }
        layout_args(p, &mut out);
        out.push("--detailed".into());
        Ok(out)
    }

    /// The model's flags and the tokens.
    fn model(&self, p: &Plan) -> std::result::Result<Vec<String>, String> {
        let mut out = match self.models.get(&p.model) {
            Some(Ok(flags)) => flags.clone(),
            Some(Err(why)) => return Err(why.clone()),
            None => vec!["--model".into(), p.model.clone()],
        };
        push(&mut out, "--tokens", tokens_text(p.tokens));
        Ok(out)
    }
}

/// The layout's flags: TP, PP and ZeRO always, the others where they are not their defaults.
fn layout_args(p: &Plan, out: &mut Vec<String>) {
    let l = &p.layout;
    push(out, "--tp", l.tp);
    push(out, "--pp", l.pp);
    if l.cp > 1 {
        push(out, "--cp", l.cp);
    }
    push(out, "--zero", l.zero);
    if l.replicate > 1 {
        push(out, "--replicate", l.replicate);
    }
    if l.ep > 1 {
        push(out, "--ep", l.ep);
    }
    if p.active_params.is_some() && l.etp != l.tp {
        push(out, "--etp", l.etp);
    }
}

fn push(out: &mut Vec<String>, flag: &str, value: impl std::fmt::Display) {
    out.push(flag.to_string());
    out.push(value.to_string());
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// A whole token count as typed: `4.96e12` where the count is that exactly, else its digits
/// (and its digits from 2^53 up, where `--tokens` takes no exponent: a double cannot hold
/// every whole number there).
pub fn tokens_text(tokens: u64) -> String {
    let digits = tokens.to_string();
    let trimmed = digits.trim_end_matches('0');
    let zeros = digits.len() - trimmed.len();
    if tokens == 0 || zeros < 3 || tokens >= 1 << 53 {
        return digits;
    }
    let exponent = digits.len() - 1;
    let (head, tail) = trimmed.split_at(1);
    if tail.is_empty() {
        format!("{head}e{exponent}")
    } else {
        format!("{head}.{tail}e{exponent}")
    }
}

/// `args` as one shell line after `trainplan check`, each word quoted where the shell would
/// split or expand it.
pub fn line(args: &[String]) -> String {
    let mut out = String::from("trainplan check");
    for a in args {
        out.push(' ');
        out.push_str(&quoted(a));
    }
    out
}

/// `word` as the shell reads it back: as it is when it is plain, else in single quotes.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,:/=+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_are_written_as_they_would_be_typed() {
        assert_eq!(tokens_text(4_960_000_000_000), "4.96e12");
        assert_eq!(tokens_text(15_000_000_000_000), "1.5e13");
        assert_eq!(tokens_text(1_000_000_000_000), "1e12");
        assert_eq!(tokens_text(1_733_123_456_789), "1733123456789");
        assert_eq!(tokens_text(4_500), "4500");
        assert_eq!(tokens_text(45_000), "4.5e4");
        assert_eq!(tokens_text(450), "450");
        assert_eq!(tokens_text(0), "0");
        assert_eq!(tokens_text(10_000_000_000_000_000), "10000000000000000");
    }

    #[test]
    fn words_the_shell_would_split_are_quoted() {
        let args: Vec<String> = [
            "--model-config",
            "my models/a.json",
            "--tp",
            "8",
            "--x",
            "it's",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            line(&args),
            r"trainplan check --model-config 'my models/a.json' --tp 8 --x 'it'\''s'"
        );
    }
}
