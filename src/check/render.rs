//! A check's report in words: the terminal's (colour when a terminal) and its Markdown twin.
//! Per CPU, one line per promise (verdict, what was seen, how it is known), then for each
//! promise that did not hold: why, what the configuration says, the culprits seen, the fixes,
//! and what would remain.

use std::fmt::Write;

use super::judge::{per_second, Finding, How, Verdict};
use super::kube::owner_words;
use super::CheckReport;
use crate::report::text::Paint;
use crate::units::{fmt_ns, format_list};

/// Culprits listed under a promise that did not hold.
const SHOWN: usize = 5;

fn head(r: &CheckReport) -> String {
    let mut s = format!(
        "jitterscope check: CPU {} for {}, held by {}; kernel {}{}",
        format_list(&r.cpus),
        fmt_ns(r.duration_ns),
        r.held_by,
        r.kernel,
        if r.config.virtual_machine {
            ", a virtual machine"
        } else {
            ""
        }
    );
    if !r.siblings.is_empty() {
        let _ = write!(s, "; SMT siblings {} watched too", format_list(&r.siblings));
    }
    s
}

/// `12/s, 1.1ms/s` for what a finding saw.
fn seen_rate(r: &CheckReport, f: &Finding) -> String {
    if f.verdict == Verdict::CannotTell {
        return "—".into();
    }
    let secs = (r.duration_ns as f64 / 1e9).max(1e-9);
    match (f.count, f.how) {
        (0, _) => "none".into(),
        (n, How::Counted) if f.time_ns == 0 => format!("{}/s", per_second(n as f64 / secs)),
        (n, _) => format!(
            "{}/s, {}/s",
            per_second(n as f64 / secs),
            fmt_ns((f.time_ns as f64 / secs) as u64)
        ),
    }
}

fn how_word(f: &Finding) -> &'static str {
    match f.how {
        How::Measured => "measured",
        How::Counted => "counted",
        How::None => "",
    }
}

fn lost_line(r: &CheckReport) -> Option<String> {
    let lost: u64 = r.lost.iter().map(|l| l.1).sum();
    (lost > 0).then(|| {
        format!(
            "{lost} kernel records were lost (a record ring was full: {}): what they held is not in the rows above; raise --ringbuf-size",
            r.lost
                .iter()
                .map(|(c, n)| format!("CPU {c} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

fn ending(r: &CheckReport) -> String {
    let mut failed: Vec<String> = r
        .failed()
        .map(|f| format!("{} on CPU {}", f.promise.title(), f.cpu))
        .collect();
    if let Some(k) = &r.kubernetes {
        for o in &k.owners {
            if let (Some(uid), Some(c)) = (&o.pod_uid, &o.container) {
                if k.breaches.iter().any(|b| b.cpu == o.cpu) {
                    let who = owner_words(o.pod.as_deref(), uid, c);
                    failed.push(format!("{who}'s exclusive CPU {}", o.cpu));
                }
            }
        }
    }
    if failed.is_empty() {
        "Every promise that could be told held.".into()
    } else {
        format!(
            "{} did not hold: {}.",
            if failed.len() == 1 {
                "1 promise"
            } else {
                "These promises"
            },
            failed.join("; ")
        )
    }
}

/// The Kubernetes block: the checkpoint read, who owns each checked CPU and, for each
/// container's exclusive CPU, what ran there from outside its pod (largest time first).
fn kube_lines(r: &CheckReport) -> Vec<String> {
    let Some(k) = &r.kubernetes else {
        return Vec::new();
    };
    let mut v = vec![format!(
        "Kubernetes: the kubelet's CPU manager, policy {} ({}); default set {}",
        k.policy,
        k.state_file,
        if k.default_cpus.is_empty() {
            "empty".to_string()
        } else {
            format_list(&k.default_cpus)
        }
    )];
    if let Some(n) = &k.note {
        v.push(format!("  {n}"));
    }
    for o in &k.owners {
        let (Some(uid), Some(container)) = (&o.pod_uid, &o.container) else {
            v.push(format!("  CPU {}: no container's own (shared)", o.cpu));
            continue;
        };
        let who = owner_words(o.pod.as_deref(), uid, container);
        let breaches: Vec<_> = k.breaches.iter().filter(|b| b.cpu == o.cpu).collect();
        let own: u64 = k
            .own
            .iter()
            .filter(|b| b.cpu == o.cpu)
            .map(|b| b.time_ns)
            .sum();
        let own = if own > 0 {
            format!("; its own tasks ran {}", fmt_ns(own))
        } else {
            String::new()
        };
        if breaches.is_empty() {
            v.push(format!(
                "  CPU {}: exclusive to {who} — held: nothing from outside the pod ran there{own}",
                o.cpu
            ));
            continue;
        }
        v.push(format!(
            "  CPU {}: exclusive to {who} — BROKEN by {} from outside the pod{own}:",
            o.cpu,
            if breaches.len() == 1 {
                "1 culprit".to_string()
            } else {
                format!("{} culprits", breaches.len())
            }
        ));
        for b in breaches.iter().take(SHOWN) {
            v.push(format!(
                "    {} — {} ({}), {} {}×, longest {}",
                b.name,
                b.by.words(),
                b.detail,
                fmt_ns(b.time_ns),
                b.count,
                fmt_ns(b.longest_ns)
            ));
        }
        if breaches.len() > SHOWN {
            v.push(format!(
                "    … {} more (--format json lists them)",
                breaches.len() - SHOWN
            ));
        }
    }
    v
}

/// The terminal report.
pub fn text(r: &CheckReport, colour: bool) -> String {
    let p = Paint(colour);
    let mut s = format!("{}\n", head(r));
    let kube = kube_lines(r);
    if !kube.is_empty() {
        let _ = writeln!(s, "\n{}", kube.join("\n"));
    }
    for &cpu in &r.cpus {
        let _ = writeln!(s, "\n{}", p.bold(&format!("CPU {cpu}")));
        let _ = writeln!(
            s,
            "  {:<36} {:<15} {:<22} how",
            "promise", "verdict", "seen"
        );
        for f in r.findings.iter().filter(|f| f.cpu == cpu) {
            let verdict = format!("{:<15}", f.verdict.word());
            let verdict = match f.verdict {
                Verdict::Broken | Verdict::NotConfigured => p.warn(&verdict),
                _ => verdict,
            };
            let _ = writeln!(
                s,
                "  {:<36} {verdict} {:<22} {}",
                f.promise.title(),
                seen_rate(r, f),
                how_word(f)
            );
        }
        for f in r.findings.iter().filter(|f| f.cpu == cpu && f.count > 0) {
            let _ = writeln!(
                s,
                "\n  {} — {}: {}",
                p.bold(f.promise.title()),
                f.verdict.word(),
                f.why
            );
            for c in &f.settings {
                let _ = writeln!(s, "    configured: {c}");
            }
            for c in f.seen.iter().take(SHOWN) {
                let name = if c.detail.is_empty() {
                    c.name.clone()
                } else {
                    format!("{} {}", c.name, c.detail)
                };
                let time = if c.time_ns > 0 {
                    format!(", {} (longest {})", fmt_ns(c.time_ns), fmt_ns(c.longest_ns))
                } else {
                    String::new()
                };
                let _ = writeln!(s, "    seen: {name} {}×{time}", c.count);
                for from in &c.from {
                    let _ = writeln!(s, "          {from}");
                }
            }
            if f.seen.len() > SHOWN {
                let _ = writeln!(
                    s,
                    "    seen: … {} more (--format json lists them)",
                    f.seen.len() - SHOWN
                );
            }
            for x in &f.fixes {
                let _ = writeln!(s, "    fix: {x}");
            }
            for x in &f.remains {
                let _ = writeln!(s, "    remains: {x}");
            }
        }
        for f in r
            .findings
            .iter()
            .filter(|f| f.cpu == cpu && f.verdict == Verdict::CannotTell)
        {
            let _ = writeln!(s, "\n  {} — cannot tell: {}", f.promise.title(), f.why);
        }
    }
    if let Some(l) = lost_line(r) {
        let _ = writeln!(s, "\n{l}");
    }
    let _ = writeln!(s, "\n{}", ending(r));
    s
}

/// The Markdown twin of `text`.
pub fn markdown(r: &CheckReport) -> String {
    let mut s = format!("# {}\n", head(r));
    let kube = kube_lines(r);
    if let Some((first, rest)) = kube.split_first() {
        let _ = writeln!(s, "\n## {first}\n");
        for l in rest {
            let depth = l.len() - l.trim_start().len();
            let _ = writeln!(
                s,
                "{}- {}",
                " ".repeat(depth.saturating_sub(2)),
                cell(l.trim_start())
            );
        }
    }
    for &cpu in &r.cpus {
        let _ = writeln!(s, "\n## CPU {cpu}\n");
        let _ = writeln!(s, "| promise | verdict | seen | how | why |");
        let _ = writeln!(s, "|---|---|---|---|---|");
        for f in r.findings.iter().filter(|f| f.cpu == cpu) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                f.promise.title(),
                f.verdict.word(),
                seen_rate(r, f),
                how_word(f),
                cell(&f.why)
            );
        }
        for f in r.findings.iter().filter(|f| f.cpu == cpu && f.count > 0) {
            let _ = writeln!(s, "\n### {} — {}\n", f.promise.title(), f.verdict.word());
            for c in &f.settings {
                let _ = writeln!(s, "- configured: {}", cell(c));
            }
            for c in f.seen.iter().take(SHOWN) {
                let _ = writeln!(
                    s,
                    "- seen: `{}` {} {}×, {}{}",
                    c.name,
                    cell(&c.detail),
                    c.count,
                    fmt_ns(c.time_ns),
                    if c.from.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", cell(&c.from.join("; ")))
                    }
                );
            }
            for x in &f.fixes {
                let _ = writeln!(s, "- fix: {}", cell(x));
            }
            for x in &f.remains {
                let _ = writeln!(s, "- remains: {}", cell(x));
            }
        }
    }
    if let Some(l) = lost_line(r) {
        let _ = writeln!(s, "\n{l}");
    }
    let _ = writeln!(s, "\n{}", ending(r));
    s
}

/// Text safe in a Markdown table cell.
fn cell(t: &str) -> String {
    t.replace('|', "\\|").replace('\n', " ")
}
