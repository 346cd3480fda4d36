//! The boot command line's isolation parameters.

use super::cpulist::parse_cpulist;
use crate::model::Cpu;
use crate::system::config::{BootParams, Isolcpus};

/// Parameters kept in `others` as written: each changes what an isolated CPU does (its tick,
/// idle, frequency, watchdogs, clocksource, mitigations' costs).
pub(crate) const OTHER_PARAMS: &[&str] = &[
    "nohz",
    "idle",
    "intel_idle.max_cstate",
    "processor.max_cstate",
    "intel_pstate",
    "skew_tick",
    "rcu_nocb_poll",
    "nosoftlockup",
    "nowatchdog",
    "nmi_watchdog",
    "tsc",
    "mitigations",
];

/// The isolcpus flags the kernel accepts before the list.
const ISOLCPUS_FLAGS: &[&str] = &["domain", "managed_irq", "nohz"];

/// Parses `cmdline` (up to a lone `--`, after which the words go to init). `last` is the last
/// CPU, for `N`. A parameter given twice keeps its last value.
pub(crate) fn parse(cmdline: &str, last: Option<Cpu>) -> BootParams {
    let mut boot = BootParams::default();
    for word in words(cmdline).take_while(|w| w != "--") {
        let (name, value) = match word.split_once('=') {
            Some((n, v)) => (n.to_string(), v.trim_matches('"').to_string()),
            None => (word.clone(), String::new()),
        };
        let list = |v: &str| parse_cpulist(v, last);
        let parsed = match name.as_str() {
            "isolcpus" => isolcpus(&value, last).map(|i| boot.isolcpus = Some(i)),
            "nohz_full" => list(&value).map(|c| boot.nohz_full = Some(c)),
            // `rcu_nocbs` alone or empty: offloading enabled, no CPU offloaded at boot;
            // `all`: every CPU.
            "rcu_nocbs" if value == "all" => {
                boot.rcu_nocbs = Some(last.map(|l| (0..=l).collect()).unwrap_or_default());
                Some(())
            }
            "rcu_nocbs" => list(&value).map(|c| boot.rcu_nocbs = Some(c)),
            "irqaffinity" => list(&value).map(|c| boot.irqaffinity = Some(c)),
            n if OTHER_PARAMS.contains(&n) => {
                boot.others.retain(|(o, _)| o != n);
                boot.others.push((name.clone(), value.clone()));
                Some(())
            }
            _ => Some(()),
        };
        if parsed.is_none() {
            boot.unparsed.retain(|(o, _)| *o != name);
            boot.unparsed.push((name, value));
        }
    }
    boot
}

/// `isolcpus=[flag,]…list`; no flag given means `domain`.
fn isolcpus(value: &str, last: Option<Cpu>) -> Option<Isolcpus> {
    let mut flags = Vec::new();
    let mut rest = value;
    while let Some((head, tail)) = rest.split_once(',') {
        if !head.starts_with(|c: char| c.is_ascii_alphabetic()) || head == "N" {
            break;
        }
        if !ISOLCPUS_FLAGS.contains(&head) {
            return None;
        }
        flags.push(head.to_string());
        rest = tail;
    }
    if flags.is_empty() {
        flags.push("domain".to_string());
    }
    Some(Isolcpus {
        flags,
        cpus: parse_cpulist(rest, last)?,
    })
}

/// The command line's words; a double-quoted value keeps its spaces (`a="b c"`).
fn words(cmdline: &str) -> impl Iterator<Item = String> + '_ {
    let mut chars = cmdline.chars().peekable();
    std::iter::from_fn(move || {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut word = String::new();
        let mut quoted = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() && !quoted {
                break;
            }
            if c == '"' {
                quoted = !quoted;
            }
            word.push(c);
            chars.next();
        }
        (!word.is_empty()).then_some(word)
    })
}
