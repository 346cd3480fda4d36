//! Every IRQ with a handler and its affinity, and irqbalance's state.

use super::cpulist::{parse_cpulist, parse_hex_mask};
use super::{read_capped, read_list, read_text, read_trimmed};
use crate::model::Cpu;
use crate::system::config::{IrqConfig, Irqbalance, Root};

/// `/proc/interrupts` grows with CPUs × IRQs: thousands of both stay far below this.
const MAX_INTERRUPTS_BYTES: u64 = 64 << 20;

pub(super) fn read(root: &Root) -> Vec<IrqConfig> {
    let Some(text) = read_capped(&root.path("/proc/interrupts"), MAX_INTERRUPTS_BYTES) else {
        return Vec::new();
    };
    parse_interrupts(&text)
        .into_iter()
        .map(|(irq, name)| {
            let dir = format!("/proc/irq/{irq}");
            IrqConfig {
                irq,
                name,
                affinity: read_list(root, &format!("{dir}/smp_affinity_list")).unwrap_or_default(),
                effective: read_list(root, &format!("{dir}/effective_affinity_list")),
                managed: read_text(root, &format!("/sys/kernel/debug/irq/irqs/{irq}"))
                    .map(|t| t.contains("AFFINITY_MANAGED")),
            }
        })
        .collect()
}

/// The numbered lines of `/proc/interrupts` as `(irq, actions)`. A line is the number, one
/// count per CPU, the chip's columns (`IO-APIC   5-edge`, `PCI-MSIX-0000:00:01.0   3-edge`,
/// `GICv3  27 Level`), then two spaces and the action names joined by `, `: the name is the
/// text after the last run of two spaces.
pub(crate) fn parse_interrupts(text: &str) -> Vec<(u32, String)> {
    let mut lines = text.lines();
    let cpus = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|w| w.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    lines
        .filter_map(|line| {
            let (number, rest) = line.trim_start().split_once(':')?;
            let irq = number.parse().ok()?;
            let mut rest = rest;
            for _ in 0..cpus {
                let trimmed = rest.trim_start();
                let end = trimmed
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(trimmed.len());
                rest = &trimmed[end..];
            }
            let name = match rest.trim_end().rfind("  ") {
                Some(i) => rest[i..].trim(),
                None => rest.trim(),
            };
            Some((irq, name.to_string()))
        })
        .collect()
}

pub(super) fn irqbalance(root: &Root) -> Irqbalance {
    Irqbalance {
        running: process_running(root, "irqbalance"),
        banned: ["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"]
            .iter()
            .find_map(|f| banned(&read_text(root, f)?)),
    }
}

/// `IRQBALANCE_BANNED_CPULIST=` (preferred, as irqbalance does) or the hex
/// `IRQBALANCE_BANNED_CPUS=`, quoted or not; comments skipped.
pub(crate) fn banned(text: &str) -> Option<Vec<Cpu>> {
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let l = l.trim().strip_prefix("export ").unwrap_or(l.trim());
            let v = l.strip_prefix(key)?.strip_prefix('=')?;
            Some(v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        })
    };
    match value("IRQBALANCE_BANNED_CPULIST") {
        Some(list) => parse_cpulist(&list, None),
        None => parse_hex_mask(&value("IRQBALANCE_BANNED_CPUS")?),
    }
}

/// A process whose `comm` is `name`.
fn process_running(root: &Root, name: &str) -> bool {
    let Ok(dir) = std::fs::read_dir(root.path("/proc")) else {
        return false;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .any(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            read_trimmed(root, &format!("/proc/{pid}/comm")).as_deref() == Some(name)
        })
}
