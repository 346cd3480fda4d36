//! Human-readable nanosecond amounts: `812ns`, `12.4µs`, `3.21ms`, `1.500s`.

pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.3}s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_ns;

    #[test]
    fn picks_the_unit() {
        assert_eq!(fmt_ns(812), "812ns");
        assert_eq!(fmt_ns(12_400), "12.4µs");
        assert_eq!(fmt_ns(3_210_000), "3.21ms");
        assert_eq!(fmt_ns(1_500_000_000), "1.500s");
    }
}
