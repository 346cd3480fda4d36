//! The kernel's two ways of writing a set of CPUs: the list (`0-3,8`, with the `a-b:used/group`
//! stride and `N` for the last CPU, as `bitmap_parselist` reads it) and the hex mask with comma-
//! separated 32-bit words (`00000000,00000003`).

use crate::model::Cpu;

/// Above the kernel's largest NR_CPUS (8192), with room: a list naming a CPU beyond it is not
/// a CPU list (and would build a huge vector).
const MAX_CPU: Cpu = 1 << 16;

/// A kernel CPU list, sorted and without duplicates; `last` resolves `N` (None: `N` does not
/// parse). Empty text is the empty list. None when the kernel would reject the text.
pub(crate) fn parse_cpulist(text: &str, last: Option<Cpu>) -> Option<Vec<Cpu>> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Some(cpus);
    }
    for group in text.split(',') {
        let (range, stride) = match group.split_once(':') {
            Some((range, stride)) => (range, Some(stride)),
            None => (group, None),
        };
        let number = |s: &str| -> Option<Cpu> {
            match s.trim() {
                "N" => last,
                s if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                    s.parse().ok().filter(|&n| n <= MAX_CPU)
                }
                _ => None,
            }
        };
        let (start, end) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(range)?, number(range)?),
        };
        let (used, len) = match stride {
            Some(s) => {
                let (used, len) = s.split_once('/')?;
                (number(used)?, number(len)?)
            }
            None => (1, 1),
        };
        if start > end || len == 0 || used > len {
            return None;
        }
        let mut first = start;
        while first <= end {
            cpus.extend((first..first + used).take_while(|&c| c <= end));
            first += len;
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The kernel's hex cpumask (`f`, `00000000,00000003`): bit n set means CPU n. None when a
/// character is not a hex digit or comma, or the mask is empty.
pub(crate) fn parse_hex_mask(text: &str) -> Option<Vec<Cpu>> {
    let digits: Vec<u32> = text
        .trim()
        .trim_start_matches("0x")
        .chars()
        .filter(|&c| c != ',')
        .map(|c| c.to_digit(16))
        .collect::<Option<_>>()?;
    if digits.is_empty() || digits.len() as u64 * 4 > u64::from(MAX_CPU) {
        return None;
    }
    let mut cpus = Vec::new();
    for (nibble, digit) in digits.iter().rev().enumerate() {
        for bit in 0..4 {
            if digit & (1 << bit) != 0 {
                cpus.push(nibble as Cpu * 4 + bit);
            }
        }
    }
    Some(cpus)
}
