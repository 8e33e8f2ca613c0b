//! Numbers as people read them: thousands separators, GB, tokens in T or B.
//! Used by the text report and by the reasons and fixes a plan carries.

/// An integer with thousands separators: `2048` → `2,048`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A fraction as a percentage to a tenth: `0.444` → `44.4 %`.
pub fn percent(x: f64) -> String {
    format!("{} %", fixed(100.0 * x, 1))
}

/// A number with `decimals` decimals and thousands separators: `1139.59` → `1,139.6`.
pub fn fixed(x: f64, decimals: usize) -> String {
    if !x.is_finite() || x.abs() >= 1e15 {
        return format!("{x:.3e}");
    }
    let text = format!("{:.*}", decimals, x.abs());
    let sign = if x < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    format!("{sign}{}", group_whole(&text))
}

/// `digits` (an unsigned decimal) with thousands separators in its whole part.
fn group_whole(digits: &str) -> String {
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    let int = int.parse::<u64>().map_or(int.to_string(), thousands);
    match frac {
        Some(f) => format!("{int}.{f}"),
        None => int,
    }
}

/// An amount of money, in no named currency: whole units with thousands separators from 1,000
/// up (`3686400` → `3,686,400`), cents from 0.01 (`2.5` → `2.50`), and below a cent as
/// [`general`] writes it (`0.004`), so no amount given prints as zero.
pub fn money(x: f64) -> String {
    if x.abs() >= 1_000.0 {
        fixed(x, 0)
    } else if x.abs() >= 0.01 || x == 0.0 {
        fixed(x, 2)
    } else {
        general(x)
    }
}

/// `x` rounded to `digits` significant figures.
fn round_significant(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // Through the decimal text, so 10^12 stays 10^12 rather than 999,999,999,999.99.
    let text = format!("{:.*e}", (digits - 1).max(0) as usize, x);
    text.parse().unwrap_or(x)
}

/// `text` without trailing zeros after a decimal point.
fn trim_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// A count of tokens or parameters in T (10^12), B (10^9) or M (10^6), to four significant
/// figures with trailing zeros dropped: `4.96e12` → `4.96 T`, `8.19e11` → `819 B`; from
/// 10^16 up in scientific notation (`4.41e19`).
pub fn count(x: f64) -> String {
    let r = round_significant(x, 4);
    if r.abs() >= 1e16 {
        return format!("{r:.3e}");
    }
    let (value, unit) = if r.abs() >= 1e12 {
        (r / 1e12, "T")
    } else if r.abs() >= 1e9 {
        (r / 1e9, "B")
    } else if r.abs() >= 1e6 {
        (r / 1e6, "M")
    } else {
        return fixed(x, 0);
    };
    let int_digits = (value.abs().log10().floor() as i32 + 1).clamp(1, 4) as usize;
    format!("{} {unit}", trim_zeros(&fixed(value, 4 - int_digits)))
}

/// A number as a person writes it: up to six significant figures with trailing zeros
/// dropped (`0.4`, `989`, `1.955`), and scientific notation outside 10^-4 to 10^15.
pub fn general(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return x.to_string();
    }
    if !(1e-4..1e15).contains(&x.abs()) {
        return format!("{x:e}");
    }
    let r = round_significant(x, 6);
    let decimals = (5 - r.abs().log10().floor() as i32).max(0) as usize;
    trim_zeros(&format!("{r:.decimals$}")).to_string()
}

/// [`general`] with thousands separators in its whole part, for quantities a person reads in
/// a report (`2250` TFLOP/s → `2,250`, `1000` W → `1,000`, `1979.5` → `1,979.5`); formula
/// constants and values a launcher or a flag reads back keep [`general`]'s digits.
pub fn grouped(x: f64) -> String {
    let text = general(x);
    if !x.is_finite() || !(1e3..1e15).contains(&x.abs()) {
        return text;
    }
    match text.strip_prefix('-') {
        Some(rest) => format!("-{}", group_whole(rest)),
        None => group_whole(&text),
    }
}

/// A number exactly as it was given (Rust's shortest round-trip form), in scientific notation
/// outside 10^-4 to 10^15: for error messages, which must show the value the user typed.
pub fn exact(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e15).contains(&x.abs()) {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

/// `n` and the noun, plural unless `n` is 1: `1 plan`, `158 plans`.
pub fn plural(n: u64, noun: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{} {noun}{s}", thousands(n))
}

/// A number in scientific notation with three significant figures: `2.1e24` → `2.10e24`.
pub fn sci(x: f64) -> String {
    format!("{x:.2e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_whole_units_from_a_thousand_up() {
        assert_eq!(money(3_686_400.4), "3,686,400");
        assert_eq!(money(2.5), "2.50");
        assert_eq!(money(999.994), "999.99");
        assert_eq!(money(0.004), "0.004");
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(2048), "2,048");
        assert_eq!(thousands(70_553_706_496), "70,553,706,496");
    }

    #[test]
    fn fixed_rounds_and_separates() {
        assert_eq!(fixed(1139.5967, 1), "1,139.6");
        assert_eq!(fixed(-1067.6, 1), "-1,067.6");
        assert_eq!(fixed(-0.01, 1), "0.0");
        assert_eq!(fixed(72.0, 0), "72");
        assert_eq!(fixed(1e300, 1), "1.000e300");
    }

    #[test]
    fn counts_use_t_b_and_m() {
        assert_eq!(count(4.96e12), "4.96 T");
        assert_eq!(count(8.19e11), "819 B");
        assert_eq!(count(8.193e11), "819.3 B");
        assert_eq!(count(70_553_706_496.0), "70.55 B");
        assert_eq!(count(15e12), "15 T");
        assert_eq!(count(12.35e12), "12.35 T");
        assert_eq!(count(5e6), "5 M");
        assert_eq!(count(1234.0), "1,234");
        assert_eq!(count(999_999_999_999.0), "1 T");
        assert_eq!(count(1e12), "1 T");
        assert_eq!(count(4.405e19), "4.405e19");
    }

    #[test]
    fn grouped_numbers_have_separators_in_their_whole_part() {
        assert_eq!(grouped(2250.0), "2,250");
        assert_eq!(grouped(1000.0), "1,000");
        assert_eq!(grouped(1979.5), "1,979.5");
        assert_eq!(grouped(989.0), "989");
        assert_eq!(grouped(-12345.6), "-12,345.6");
        assert_eq!(grouped(0.4), "0.4");
    }

    #[test]
    fn general_numbers_read_as_written() {
        assert_eq!(general(0.4), "0.4");
        assert_eq!(general(989.0), "989");
        assert_eq!(general(1.955), "1.955");
        assert_eq!(general(40.0), "40");
        assert_eq!(general(1e-300), "1e-300");
        assert_eq!(general(1e308), "1e308");
        assert_eq!(general(f64::NAN), "NaN");
        assert_eq!(general(-0.4), "-0.4");
    }

    #[test]
    fn plurals_agree() {
        assert_eq!(plural(1, "plan"), "1 plan");
        assert_eq!(plural(1580, "plan"), "1,580 plans");
    }

    #[test]
    fn sci_has_three_figures() {
        assert_eq!(sci(2.1000093696e24), "2.10e24");
    }
}
