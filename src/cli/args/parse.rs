//! The values the flags of several files take: whole numbers (in scientific notation too), GPU
//! presets, precisions, ZeRO stages and stacks, each read with the one-line error clap shows
//! beside the flag, and on or off.

use clap::ValueEnum;

use crate::brief::gpu::Gpu;
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::error::Error;
use crate::model::layout::ZeroStage;

/// A whole number, written plainly (`2048`) or in scientific notation (`15e12`, `4.96e12`).
pub(super) fn parse_whole(text: &str) -> std::result::Result<u64, String> {
    if let Ok(n) = text.parse::<u64>() {
        return Ok(n);
    }
    // Written out in digits and still no u64: too large for any count, whatever the flag.
    let digits = text.strip_prefix('+').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("at most {} (2^64 − 1)", u64::MAX));
    }
    let x: f64 = text
        .parse()
        .map_err(|_| "expected a whole number such as 2048 or 15e12".to_string())?;
    if !x.is_finite() || x < 0.0 {
        return Err("expected a whole number ≥ 0".into());
    }
    if x.fract() != 0.0 {
        return Err("expected a whole number, not a fraction".into());
    }
    // Above 2^53 a double cannot hold every whole number: such a value must be written out.
    if x >= 9_007_199_254_740_992.0 {
        return Err("above 2^53 write the number out in full digits, not as 1.2e19".into());
    }
    Ok(x as u64)
}

/// A GPU preset.
pub(super) fn parse_gpu(text: &str) -> std::result::Result<Gpu, String> {
    Gpu::named(text).map_err(|e| match e {
        Error::Invalid { expected, .. } => format!("expected {expected}"),
        other => other.to_string(),
    })
}

/// A ZeRO stage.
pub(super) fn parse_precision(text: &str) -> std::result::Result<Precision, String> {
    text.parse::<Precision>().map_err(|e| {
        let line = e.to_string();
        line.split_once(": ")
            .map_or(line.clone(), |(_, rule)| rule.to_string())
    })
}

pub(super) fn parse_zero(text: &str) -> std::result::Result<ZeroStage, String> {
    let n: u8 = text
        .parse()
        .map_err(|_| "expected a ZeRO stage: 0, 1, 2 or 3".to_string())?;
    ZeroStage::new(n).map_err(|_| "expected a ZeRO stage: 0, 1, 2 or 3".to_string())
}

/// `--stack`: the names of [`Stack::ALL`], listed in `--help` and in clap's error.
pub(super) fn stack_parser() -> impl clap::builder::TypedValueParser<Value = Stack> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Stack::ALL.map(Stack::name)).map(|name| {
        name.parse::<Stack>()
            .expect("a possible value is a stack's name")
    })
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_take_scientific_notation() {
        assert_eq!(parse_whole("15e12"), Ok(15_000_000_000_000));
        assert_eq!(parse_whole("4.96e12"), Ok(4_960_000_000_000));
        assert_eq!(parse_whole("2048"), Ok(2048));
        assert!(parse_whole("1.5").is_err());
        assert!(parse_whole("-3").is_err());
        assert!(parse_whole("NaN").is_err());
        assert!(parse_whole("1e30").is_err());
        assert!(parse_whole("1.0000000000000001e19").is_err());
        assert_eq!(
            parse_whole("10000000000000000001"),
            Ok(10_000_000_000_000_000_001)
        );
        assert!(parse_whole("eight").is_err());
    }
}
