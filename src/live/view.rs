//! Rendering the live model with ratatui. A full layout when the terminal is large enough, a
//! readable minimal one when it is not.

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, List, ListItem, Paragraph, Row, Sparkline, Table,
};
use ratatui::Frame;

use super::model::{ConsumerView, CulpritRow, LiveModel};
use crate::model::Tone;
use crate::summary::PERCENTILES;
use crate::units::fmt_ns;
use crate::units::format_list;

/// Below this the minimal layout is used.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

pub fn draw(f: &mut Frame, m: &LiveModel) {
    draw_paced(f, m, &mut || {});
}

/// `draw`, with `pace` called between two pieces (the header, each consumer's table and
/// chart, the culprits, the feed, the footer): each is a piece of its own for the pacer of a
/// collector that shares a measured CPU.
pub fn draw_paced(f: &mut Frame, m: &LiveModel, pace: &mut dyn FnMut()) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        draw_minimal(f, m, area);
        return;
    }
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(if m.note.is_some() { 3 } else { 2 }),
            Constraint::Length(9),
            Constraint::Min(6),
            Constraint::Length(FEED_ROWS + 2),
            Constraint::Length(1),
        ])
        .split(area);
    f.render_widget(header(m), rows[0]);
    pace();
    draw_consumers(f, m, rows[1], pace);
    pace();
    draw_culprits(f, m, rows[2], pace);
    pace();
    f.render_widget(feed(m, rows[3].height.saturating_sub(2) as usize), rows[3]);
    pace();
    f.render_widget(footer(m), rows[4]);
    if m.help {
        draw_help(f, area);
    }
}

fn header(m: &LiveModel) -> Paragraph<'static> {
    let lost_style = if m.lost > 0 {
        Style::default()
            .fg(Color::White)
            .bg(Color::Red)
            .add_modifier(Modifier::BOLD)
    } else {
        Style::default()
    };
    let title = if m.watch {
        format!("jitterscope watch {}", m.target)
    } else {
        format!("jitterscope '{}'", m.label)
    };
    let mut first = vec![
        Span::styled(title, Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(if m.watch {
            format!(
                "  {} thread{}  {:.1}s  interruptions seen {}  ",
                m.consumers.len(),
                if m.consumers.len() == 1 { "" } else { "s" },
                m.elapsed_ns as f64 / 1e9,
                m.stalls
            )
        } else {
            format!(
                "  producer CPU {} → consumer CPU {}  {:.1}s / {:.0}s  {:.1}k msg/s  stalls {}{}  ",
                m.producer_cpu,
                format_list(&m.consumer_cpus),
                m.elapsed_ns as f64 / 1e9,
                m.planned_ns as f64 / 1e9,
                m.messages_per_s / 1e3,
                m.stalls,
                m.awaiting_text()
            )
        }),
        Span::styled(format!("lost {}", m.lost), lost_style),
    ];
    if m.paused {
        first.push(Span::styled(
            "  PAUSED",
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        ));
    }
    let bpf = match (m.probes, m.bpf_cost) {
        (false, _) => "no kernel probes (stalls are not attributed)".to_string(),
        (true, Some((ns, share))) => format!(
            "BPF probes {ns:.0} ns/event, {:.3}% of a CPU",
            share * 100.0
        ),
        (true, None) => "BPF probes attached".to_string(),
    };
    let mut lines = vec![
        Line::from(first),
        Line::from(format!("kernel {}  {bpf}", m.kernel)),
    ];
    if let Some(n) = &m.note {
        lines.push(Line::styled(n.clone(), Style::default().fg(Color::Yellow)));
    }
    Paragraph::new(lines)
}

fn draw_consumers(f: &mut Frame, m: &LiveModel, area: Rect, pace: &mut dyn FnMut()) {
    if m.consumers.is_empty() {
        return;
    }
    // A watch may have many threads: the first four fit.
    let shown = m.consumers.len().min(4);
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints(vec![Constraint::Ratio(1, shown as u32); shown])
        .split(area);
    for (c, &col) in m.consumers.iter().zip(cols.iter()) {
        let halves = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Length(36), Constraint::Min(10)])
            .split(col);
        f.render_widget(percentiles(c, m.watch), halves[0]);
        pace();
        f.render_widget(chart(c, halves[1].width, m.watch), halves[1]);
        pace();
    }
}

fn percentiles(c: &ConsumerView, watch: bool) -> Table<'static> {
    let keys = ["50", "90", "99", "99.9", "99.99"];
    let mut rows: Vec<Row> = keys
        .iter()
        .map(|k| {
            let label = PERCENTILES.iter().find(|p| p.0 == *k).map_or(*k, |p| p.1);
            let get = |s: &Option<crate::summary::Summary>| {
                s.as_ref()
                    .and_then(|s| s.percentile(k))
                    .map(fmt_ns)
                    .unwrap_or_else(|| "–".into())
            };
            Row::new(vec![
                Cell::from(label.to_string()),
                Cell::from(get(&c.interval)),
                Cell::from(get(&c.total)),
            ])
        })
        .collect();
    let max = |s: &Option<crate::summary::Summary>| {
        s.as_ref()
            .map(|s| fmt_ns(s.max))
            .unwrap_or_else(|| "–".into())
    };
    // The interval's largest transit: from its percentiles, or the chart's latest before
    // they come.
    let interval_max = (c.interval.as_ref().map(|s| s.max))
        .or(c.max_history.back().copied())
        .map_or_else(|| "–".into(), fmt_ns);
    rows.push(Row::new(vec![
        Cell::from("max"),
        Cell::from(interval_max),
        Cell::from(max(&c.total)),
    ]));
    Table::new(
        rows,
        [
            Constraint::Length(9),
            Constraint::Length(11),
            Constraint::Length(11),
        ],
    )
    .header(
        Row::new(vec![
            if watch { "interrupt" } else { "transit" },
            "last 1s",
            "since start",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title(format!("{} (CPU {})", c.name, c.cpu)),
    )
}

/// Maximum transit per interval on a log scale: 1 ns → 0, 10 s → 1000.
fn chart(c: &ConsumerView, width: u16, watch: bool) -> Sparkline<'static> {
    let n = width.saturating_sub(2) as usize;
    let data: Vec<u64> = c
        .max_history
        .iter()
        .rev()
        .take(n)
        .rev()
        .map(|&v| ((v.max(1) as f64).log10() * 100.0) as u64)
        .collect();
    let worst = c.max_history.iter().copied().max().unwrap_or(0);
    Sparkline::default()
        .block(Block::default().borders(Borders::ALL).title(format!(
            "max {} per second, log scale (worst {})",
            if watch { "interruption" } else { "transit" },
            fmt_ns(worst)
        )))
        .data(data)
        .max(1000)
        .style(Style::default().fg(Color::Cyan))
}

/// Culprit rows drawn as one table, at most: the table is drawn in slices of this many rows
/// (the same columns), each a piece of its own for the pacer.
const CULPRIT_ROWS_PER_PIECE: usize = 6;

const CULPRIT_WIDTHS: [Constraint; 8] = [
    Constraint::Length(11),
    Constraint::Length(8),
    Constraint::Min(24),
    Constraint::Length(7),
    Constraint::Length(9),
    Constraint::Length(9),
    Constraint::Length(9),
    Constraint::Length(5),
];

/// The culprits' block, its header and its rows, a slice of rows at a time.
fn draw_culprits(f: &mut Frame, m: &LiveModel, area: Rect, pace: &mut dyn FnMut()) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(culprits_title(m));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height == 0 {
        return;
    }
    let header = Row::new(vec![
        "class", "how", "culprit", "count", "total", "max", "last", "share",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    f.render_widget(
        Table::new(Vec::<Row>::new(), CULPRIT_WIDTHS).header(header),
        Rect { height: 1, ..inner },
    );
    let shown = inner.height.saturating_sub(1) as usize;
    let sorted = m.sorted_culprits();
    for (n, slice) in sorted
        .chunks(CULPRIT_ROWS_PER_PIECE)
        .take(shown.div_ceil(CULPRIT_ROWS_PER_PIECE))
        .enumerate()
    {
        pace();
        let first = n * CULPRIT_ROWS_PER_PIECE;
        let rows: Vec<Row> = slice
            .iter()
            .take(shown - first)
            .map(|c| culprit_row(c))
            .collect();
        let height = rows.len() as u16;
        let at = Rect {
            y: inner.y + 1 + first as u16,
            height,
            ..inner
        };
        f.render_widget(Table::new(rows, CULPRIT_WIDTHS), at);
    }
}

fn culprit_row(c: &CulpritRow) -> Row<'static> {
    let what = if c.detail.is_empty() {
        c.name.clone()
    } else {
        format!("{} {}", c.name, c.detail)
    };
    let style = match c.class.info().tone {
        Tone::Alarm => Style::default().fg(Color::Red),
        Tone::Faint => Style::default().fg(Color::DarkGray),
        Tone::Normal => Style::default(),
    };
    Row::new(vec![
        Cell::from(c.class.as_str()),
        Cell::from(c.how()),
        Cell::from(what),
        Cell::from(c.count.to_string()),
        Cell::from(fmt_ns(c.total_ns)),
        Cell::from(fmt_ns(c.max_ns)),
        Cell::from(format!("+{:.1}s", c.last_seen_ns as f64 / 1e9)),
        Cell::from(format!("{:.0}%", c.share * 100.0)),
    ])
    .style(style)
}

fn culprits_title(m: &LiveModel) -> String {
    if let Some(total) = m.kernel_total_ns {
        let unseen = match m.kernel_unseen {
            0 => String::new(),
            n => format!(", {n} task runs without a closing switch left out"),
        };
        format!(
            "kernel time on the measured CPUs by {} ({} so far{unseen}; stalls decided at the end)",
            m.sort.label(),
            fmt_ns(total)
        )
    } else if m.probes {
        format!("culprits by {} (share of stall time)", m.sort.label())
    } else {
        "culprits: none without kernel probes".to_string()
    }
}

/// Lines of the spike feed in the full layout (inside its border).
pub const FEED_ROWS: u16 = 5;

fn feed(m: &LiveModel, rows: usize) -> List<'static> {
    let items: Vec<ListItem> = m
        .feed
        .iter()
        .rev()
        .take(rows)
        .map(|l| ListItem::new(l.clone()))
        .collect();
    let title = match m.at_end && m.kernel_total_ns.is_some() {
        true => "latest spikes, by the kernel's time in each one's window (their culprits are decided at the end)",
        false => "latest spikes",
    };
    List::new(items).block(Block::default().borders(Borders::ALL).title(title))
}

fn footer(m: &LiveModel) -> Paragraph<'static> {
    Paragraph::new(format!(
        "q quit  p {}  s sort ({})  r reset interval stats  ? help",
        if m.paused { "resume" } else { "pause" },
        m.sort.label()
    ))
    .style(Style::default().add_modifier(Modifier::REVERSED))
}

fn draw_help(f: &mut Frame, area: Rect) {
    let w = area.width.min(64);
    let h = area.height.min(12);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let text = vec![
        Line::from("q, Esc, Ctrl-C  end the run: report and files are written"),
        Line::from("p               pause / resume the display (measuring goes on)"),
        Line::from("s               sort culprits: total, count, max, last seen"),
        Line::from("r               reset the since-start percentiles"),
        Line::from("?               this help"),
        Line::from(""),
        Line::from("A stall is a gap in a spinning thread's loop; culprits are"),
        Line::from("the kernel activity that overlapped it on the same CPU."),
    ];
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(text).block(Block::default().borders(Borders::ALL).title("help")),
        r,
    );
}

/// Small terminals: one line per fact.
fn draw_minimal(f: &mut Frame, m: &LiveModel, area: Rect) {
    let first = if m.watch {
        format!(
            "watch {} {:.0}s interruptions seen {}",
            m.target,
            m.elapsed_ns as f64 / 1e9,
            m.stalls
        )
    } else {
        format!(
            "{:.0}/{:.0}s {:.0}k msg/s stalls {}{}",
            m.elapsed_ns as f64 / 1e9,
            m.planned_ns as f64 / 1e9,
            m.messages_per_s / 1e3,
            m.stalls,
            m.awaiting_text()
        )
    };
    let mut lines = vec![Line::from(first)];
    if m.lost > 0 {
        lines.push(Line::styled(
            format!("LOST {}", m.lost),
            Style::default().fg(Color::White).bg(Color::Red),
        ));
    }
    for c in &m.consumers {
        if let Some(s) = &c.interval {
            lines.push(Line::from(format!(
                "{} p99 {} max {}",
                c.name,
                fmt_ns(s.percentile("99").unwrap_or(0)),
                fmt_ns(s.max)
            )));
        }
    }
    for c in m
        .sorted_culprits()
        .into_iter()
        .take(area.height.saturating_sub(lines.len() as u16 + 1) as usize)
    {
        // The name last: a narrow terminal cuts it, never the marker or the time.
        lines.push(Line::from(format!(
            "{} {} {} {}",
            c.class,
            c.how(),
            fmt_ns(c.total_ns),
            c.name
        )));
    }
    lines.push(Line::from("q quit"));
    f.render_widget(Paragraph::new(lines), area);
}
