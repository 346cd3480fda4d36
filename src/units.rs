//! How figures read, for every layer: nanosecond amounts (`812ns`, `12.4µs`, `3.21ms`,
//! `1.500s`) and CPU lists (`0-2,5`, the kernel's hex cpumask).

use crate::model::Cpu;

pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.3}s", ns as f64 / 1e9),
    }
}

/// Prints a CPU list compactly, collapsing runs: `[0,1,2,5]` → `0-2,5`.
pub fn format_list(cpus: &[Cpu]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// `0,2` → `5`: the kernel's hex cpumask.
pub fn cpumask_hex(cpus: &[Cpu]) -> String {
    let words = cpus.iter().map(|&c| c as usize / 32 + 1).max().unwrap_or(1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c as usize / 32] |= 1 << (c % 32);
    }
    let s: Vec<String> = w.iter().rev().map(|x| format!("{x:08x}")).collect();
    let joined = s.join(",");
    let t = joined.trim_start_matches(['0', ',']);
    if t.is_empty() {
        "0".into()
    } else {
        t.into()
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
