//! Rendering the live model with ratatui. A full layout when the terminal is large enough, a
//! readable minimal one when it is not.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Sparkline, Table, Widget};
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
    let area = f.area();
    draw_paced(area, f.buffer_mut(), m, &mut || {});
}

/// `draw` into `buf` over `area`, with `pace` called between two pieces, each a line or two
/// of the screen (a header line, a block's border, two rows of a table, a band of the
/// chart's columns): each is a piece of its own for the pacer of a collector that shares a
/// measured CPU, and the pieces together draw what the widgets drawn whole would.
pub fn draw_paced(area: Rect, buf: &mut Buffer, m: &LiveModel, pace: &mut dyn FnMut()) {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        draw_minimal(buf, m, area);
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
    draw_lines(buf, header(m), rows[0], pace);
    pace();
    draw_consumers(buf, m, rows[1], pace);
    pace();
    draw_culprits(buf, m, rows[2], pace);
    pace();
    draw_feed(buf, m, rows[3], pace);
    pace();
    footer(m).render(rows[4], buf);
    if m.help {
        draw_help(buf, area);
    }
}

/// Lines, one to a row of `area` and a piece each (a `Paragraph` of them, drawn a line at a
/// time).
fn draw_lines(buf: &mut Buffer, lines: Vec<Line<'static>>, area: Rect, pace: &mut dyn FnMut()) {
    for (n, line) in lines.into_iter().take(area.height as usize).enumerate() {
        if n > 0 {
            pace();
        }
        Paragraph::new(line).render(row_of(area, n), buf);
    }
}

/// Row `n` of `area`, one high.
fn row_of(area: Rect, n: usize) -> Rect {
    Rect {
        y: area.y + n as u16,
        height: 1,
        ..area
    }
}

fn header(m: &LiveModel) -> Vec<Line<'static>> {
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
    lines
}

fn draw_consumers(buf: &mut Buffer, m: &LiveModel, area: Rect, pace: &mut dyn FnMut()) {
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
        draw_percentiles(buf, c, m.watch, halves[0], pace);
        pace();
        draw_chart(buf, c, m.watch, halves[1], pace);
        pace();
    }
}

/// Rows of a table drawn in one piece, at most: a table is drawn in slices of this many rows
/// (the same columns, so the slices line up), each a piece of its own for the pacer.
const TABLE_ROWS_PER_PIECE: usize = 1;

/// A bordered table: the block, the header, then its rows `TABLE_ROWS_PER_PIECE` at a time,
/// `pace` called between two pieces.
fn draw_table(
    buf: &mut Buffer,
    title: String,
    header: Row<'static>,
    rows: &mut dyn Iterator<Item = Row<'static>>,
    widths: &[Constraint],
    area: Rect,
    pace: &mut dyn FnMut(),
) {
    let inner = draw_block(buf, title, area, pace);
    if inner.height == 0 {
        return;
    }
    pace();
    Table::new(Vec::<Row>::new(), widths.iter().copied())
        .header(header)
        .render(row_of(inner, 0), buf);
    let shown = inner.height.saturating_sub(1) as usize;
    let mut rows = rows.take(shown).peekable();
    let mut first = 0;
    while rows.peek().is_some() {
        pace();
        // The rows are made as they are drawn: only a piece's rows in a piece.
        let slice: Vec<Row> = rows.by_ref().take(TABLE_ROWS_PER_PIECE).collect();
        let at = Rect {
            y: inner.y + 1 + first as u16,
            height: slice.len() as u16,
            ..inner
        };
        first += slice.len();
        Table::new(slice, widths.iter().copied()).render(at, buf);
    }
}

/// Rows of a block's border drawn in one piece, at most.
const BLOCK_ROWS_PER_PIECE: u16 = 8;

/// A bordered block titled `title` over `area`, in bands of `BLOCK_ROWS_PER_PIECE` rows (the
/// first with the top border and the title, the last with the bottom border: together the
/// block drawn whole), `pace` called between two. Returns the area inside the border.
fn draw_block(buf: &mut Buffer, title: String, area: Rect, pace: &mut dyn FnMut()) -> Rect {
    let inner = Block::default().borders(Borders::ALL).inner(area);
    let mut title = Some(title);
    let mut top = 0;
    while top < area.height {
        if top > 0 {
            pace();
        }
        let height = BLOCK_ROWS_PER_PIECE.min(area.height - top);
        let mut borders = Borders::LEFT | Borders::RIGHT;
        if top == 0 {
            borders |= Borders::TOP;
        }
        if top + height == area.height {
            borders |= Borders::BOTTOM;
        }
        let mut band = Block::default().borders(borders);
        if let Some(t) = title.take() {
            band = band.title(t);
        }
        let at = Rect {
            y: area.y + top,
            height,
            ..area
        };
        band.render(at, buf);
        top += height;
    }
    inner
}

const PERCENTILE_WIDTHS: [Constraint; 3] = [
    Constraint::Length(9),
    Constraint::Length(11),
    Constraint::Length(11),
];

fn draw_percentiles(
    buf: &mut Buffer,
    c: &ConsumerView,
    watch: bool,
    area: Rect,
    pace: &mut dyn FnMut(),
) {
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
    let header = Row::new(vec![
        if watch { "interrupt" } else { "transit" },
        "last 1s",
        "since start",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let title = format!("{} (CPU {})", c.name, c.cpu);
    draw_table(
        buf,
        title,
        header,
        &mut rows.into_iter(),
        &PERCENTILE_WIDTHS,
        area,
        pace,
    );
}

/// Columns of the chart drawn in one piece, at most (each column a bar over the chart's
/// height).
const CHART_COLUMNS_PER_PIECE: usize = 24;

/// Maximum transit per interval on a log scale (1 ns → 0, 10 s → 1000), in bands of
/// `CHART_COLUMNS_PER_PIECE` columns: the scale is fixed, so each band's bars are those of
/// the whole chart.
fn draw_chart(buf: &mut Buffer, c: &ConsumerView, watch: bool, area: Rect, pace: &mut dyn FnMut()) {
    let n = area.width.saturating_sub(2) as usize;
    let data: Vec<u64> = c
        .max_history
        .iter()
        .rev()
        .take(n)
        .rev()
        .map(|&v| ((v.max(1) as f64).log10() * 100.0) as u64)
        .collect();
    let worst = c.max_history.iter().copied().max().unwrap_or(0);
    let title = format!(
        "max {} per second, log scale (worst {})",
        if watch { "interruption" } else { "transit" },
        fmt_ns(worst)
    );
    let inner = draw_block(buf, title, area, pace);
    let mut x = 0;
    while x < inner.width as usize {
        pace();
        let width = CHART_COLUMNS_PER_PIECE.min(inner.width as usize - x);
        let band = Rect {
            x: inner.x + x as u16,
            width: width as u16,
            ..inner
        };
        let bars = data.get(x..data.len().min(x + width)).unwrap_or(&[]);
        Sparkline::default()
            .data(bars)
            .max(1000)
            .style(Style::default().fg(Color::Cyan))
            .render(band, buf);
        x += width;
    }
}

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
fn draw_culprits(buf: &mut Buffer, m: &LiveModel, area: Rect, pace: &mut dyn FnMut()) {
    let header = Row::new(vec![
        "class", "how", "culprit", "count", "total", "max", "last", "share",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let sorted = m.sorted_culprits();
    draw_table(
        buf,
        culprits_title(m),
        header,
        &mut sorted.into_iter().map(culprit_row),
        &CULPRIT_WIDTHS,
        area,
        pace,
    );
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

/// The latest spikes, the newest first, a line a piece.
fn draw_feed(buf: &mut Buffer, m: &LiveModel, area: Rect, pace: &mut dyn FnMut()) {
    let title = match m.at_end && m.kernel_total_ns.is_some() {
        true => "latest spikes, by the kernel's time in each one's window (their culprits are decided at the end)",
        false => "latest spikes",
    };
    let inner = draw_block(buf, title.to_string(), area, pace);
    let lines = (m.feed.iter().rev().take(inner.height as usize))
        .map(|l| Line::from(l.clone()))
        .collect();
    pace();
    draw_lines(buf, lines, inner, pace);
}

fn footer(m: &LiveModel) -> Paragraph<'static> {
    Paragraph::new(format!(
        "q quit  p {}  s sort ({})  r reset interval stats  ? help",
        if m.paused { "resume" } else { "pause" },
        m.sort.label()
    ))
    .style(Style::default().add_modifier(Modifier::REVERSED))
}

fn draw_help(buf: &mut Buffer, area: Rect) {
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
    Clear.render(r, buf);
    Paragraph::new(text)
        .block(Block::default().borders(Borders::ALL).title("help"))
        .render(r, buf);
}

/// Small terminals: one line per fact.
fn draw_minimal(buf: &mut Buffer, m: &LiveModel, area: Rect) {
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
    Paragraph::new(lines).render(area, buf);
}
