//! SVG percentile charts in the style of HdrHistogram's plots: the x axis is the percentile on
//! a log scale of 1/(1−p) (so 90%, 99%, 99.9% … are evenly spaced and the tail gets the room),
//! the y axis is latency on a log scale. Several series overlay (consumers, or runs in
//! `compare`).

use std::fmt::Write as _;

use super::runfile::RunFile;
use crate::units::fmt_ns;
use crate::units::format_list;

/// One curve: a name and (quantile, value ns) points in increasing quantile order.
pub struct Series<'a> {
    pub name: &'a str,
    pub points: &'a [(f64, u64)],
}

const W: f64 = 900.0;
const H: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
/// The deepest percentile on the axis: 99.9999% (1/(1−p) = 10^6).
const MAX_NINES: f64 = 6.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn x_of(q: f64) -> f64 {
    let nines = if q >= 1.0 {
        MAX_NINES
    } else {
        (-(1.0 - q).log10()).clamp(0.0, MAX_NINES)
    };
    LEFT + nines / MAX_NINES * (W - LEFT - RIGHT)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn percentile_chart(title: &str, series: &[Series]) -> String {
    let values = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1.max(1)));
    let (lo, hi) = values.fold((u64::MAX, 1u64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let lo_dec = if lo == u64::MAX {
        0
    } else {
        (lo as f64).log10().floor() as i32
    };
    let hi_dec = ((hi as f64).log10().ceil() as i32).max(lo_dec + 1);
    let y_of = |v: u64| {
        let l = (v.max(1) as f64).log10();
        TOP + (1.0 - (l - lo_dec as f64) / (hi_dec - lo_dec) as f64) * (H - TOP - BOTTOM)
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="25" font-size="16" text-anchor="middle">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        escape(title)
    );
    // Grid: one vertical line per nine, one horizontal per decade.
    for n in 0..=MAX_NINES as i32 {
        let q = 1.0 - 10f64.powi(-n);
        let x = x_of(q);
        let label = match n {
            0 => "0%".to_string(),
            _ => format!("{}%", trim_pct(q * 100.0)),
        };
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 18.0
        );
    }
    for d in lo_dec..=hi_dec {
        let y = y_of(10u64.saturating_pow(d as u32));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            fmt_ns(10u64.saturating_pow(d as u32))
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 15.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">latency</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0
    );
    for (i, series) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut path = String::new();
        for (j, &(q, v)) in series.points.iter().enumerate() {
            let _ = write!(
                path,
                "{}{:.1},{:.1}",
                if j == 0 { "M" } else { " L" },
                x_of(q),
                y_of(v)
            );
        }
        let _ = writeln!(
            s,
            r#"<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>"#
        );
        let ly = TOP + 20.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            W - RIGHT + 15.0,
            W - RIGHT + 35.0,
            W - RIGHT + 40.0,
            ly + 4.0,
            escape(series.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The run's percentile chart: transit and inter-message time of every consumer.
pub fn run_chart(run: &RunFile) -> String {
    let names: Vec<(String, &Vec<(f64, u64)>)> = run
        .histograms
        .iter()
        .flat_map(|h| {
            [
                (format!("{} transit", h.consumer), &h.transit.curve),
                (
                    format!("{} inter-message", h.consumer),
                    &h.inter_message.curve,
                ),
            ]
        })
        .collect();
    let series: Vec<Series> = names
        .iter()
        .map(|(n, c)| Series { name: n, points: c })
        .collect();
    percentile_chart(
        &format!(
            "jitterscope '{}' — CPUs {}",
            run.run.label,
            format_list(&run.run.cpus)
        ),
        &series,
    )
}

fn trim_pct(p: f64) -> String {
    let s = format!("{p:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_are_evenly_spaced() {
        let step = x_of(0.9) - x_of(0.0);
        assert!((x_of(0.99) - x_of(0.9) - step).abs() < 1e-6);
        assert!((x_of(1.0) - x_of(0.999999)).abs() < 1e-6);
    }

    #[test]
    fn draws_every_series_with_a_legend() {
        let a = [(0.0, 80), (0.5, 100), (0.99, 2_000), (1.0, 180_000)];
        let b = [(0.0, 60), (1.0, 900)];
        let svg = percentile_chart(
            "transit <1>",
            &[
                Series {
                    name: "accumulator",
                    points: &a,
                },
                Series {
                    name: "journaller",
                    points: &b,
                },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<path").count(), 2);
        assert!(svg.contains("transit &lt;1&gt;"));
        assert!(svg.contains(">99.9999%<"));
        assert!(svg.contains(">accumulator<"));
    }
}
