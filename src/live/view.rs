//! Rendering the live model with ratatui. A full layout when the terminal is large enough, a
//! readable minimal one when it is not.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Direction, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Sparkline, Widget};
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
    let mut drawn = Drawn::default();
    let mut pace = || {};
    draw_paced(
        area,
        &mut Canvas::new(f.buffer_mut(), None, &mut drawn, &mut pace),
        m,
    );
}

/// What each piece of the screen was drawn from in the frame before, by its area; and what
/// of the frame just drawn can differ from the one before.
#[derive(Debug, Default)]
pub struct Drawn {
    before: HashMap<Rect, u64>,
    now: HashMap<Rect, u64>,
    /// The frame's areas that can differ from the frame before: the pieces drawn (not
    /// copied), and those of the frame before that this one has not (blank now).
    pub fresh: Vec<Rect>,
    /// Something was drawn over the pieces (the help, the minimal layout): any cell can
    /// differ, in this frame and in the next.
    pub overdrawn: bool,
}

/// Where a frame is drawn, a piece at a time: a line of text, a band of a block's border, a
/// row of a table, a band of the chart's columns. `pace` is called before each piece (each
/// is a piece of its own for the pacer of a collector that shares a measured CPU). A piece
/// drawn from what it was drawn from in the frame before, over the same area, is copied
/// from that frame's buffer (`previous`) rather than drawn again: copying a cell is a
/// fraction of drawing it (a cell's text is measured and cut into graphemes), and from one
/// second to the next most of the screen stays as it was.
pub struct Canvas<'a> {
    buf: &'a mut Buffer,
    previous: Option<&'a Buffer>,
    drawn: &'a mut Drawn,
    pace: &'a mut dyn FnMut(),
}

impl<'a> Canvas<'a> {
    pub fn new(
        buf: &'a mut Buffer,
        previous: Option<&'a Buffer>,
        drawn: &'a mut Drawn,
        pace: &'a mut dyn FnMut(),
    ) -> Self {
        // A buffer of another size holds nothing to copy.
        let previous = previous.filter(|p| p.area == buf.area);
        if previous.is_none() {
            drawn.before.clear();
        }
        drawn.now.clear();
        drawn.fresh.clear();
        Canvas {
            buf,
            previous,
            drawn,
            pace,
        }
    }

    /// One piece over `area`, drawn from `key`: copied from the frame before if it was drawn
    /// there from the same, else drawn by `draw`. The frame's buffer is blank where nothing
    /// was drawn yet, and a piece writes only inside its area (no two pieces share a cell,
    /// except a block's band and what is inside its border: `border_piece`).
    fn piece(&mut self, key: u64, area: Rect, draw: impl FnOnce(&mut Buffer)) {
        self.copied_or_drawn(key, area, None, draw);
    }

    /// A band of a block's border over `area`, of the block over `block`: copied, only the
    /// border's cells are (what is inside is other pieces').
    fn border_piece(&mut self, key: u64, area: Rect, block: Rect, draw: impl FnOnce(&mut Buffer)) {
        self.copied_or_drawn(key, area, Some(block), draw);
    }

    fn copied_or_drawn(
        &mut self,
        key: u64,
        area: Rect,
        block: Option<Rect>,
        draw: impl FnOnce(&mut Buffer),
    ) {
        // The first piece too: what the frame did before it (the terminal's size, the
        // layout, the header's text) is cold work of its own.
        (self.pace)();
        let area = area.intersection(self.buf.area);
        match self.previous {
            Some(previous) if self.drawn.before.get(&area) == Some(&key) => {
                for y in area.top()..area.bottom() {
                    match block {
                        Some(b) if y != b.top() && y + 1 != b.bottom() => {
                            copy(previous, self.buf, Rect::new(area.x, y, 1, 1));
                            copy(previous, self.buf, Rect::new(area.right() - 1, y, 1, 1));
                        }
                        _ => copy(previous, self.buf, Rect::new(area.x, y, area.width, 1)),
                    }
                }
            }
            _ => {
                draw(self.buf);
                match block {
                    // A band of a border: only its border's cells are its own.
                    Some(b) => self.drawn.fresh.extend(border_cells(area, b)),
                    None => self.drawn.fresh.push(area),
                }
            }
        }
        self.drawn.now.insert(area, key);
    }

    /// Between two steps of work that are not pieces (a table's rows made, a layout solved):
    /// a look at the pacer, as before a piece.
    fn step(&mut self) {
        (self.pace)();
    }

    /// The frame is drawn: what it was drawn from is what the next one compares with, unless
    /// something was drawn over the pieces (the help).
    fn done(&mut self, overdrawn: bool) {
        let drawn = &mut *self.drawn;
        // Pieces of the frame before over areas this one has not drawn: blank now.
        let gone = drawn.before.keys().filter(|a| !drawn.now.contains_key(a));
        drawn.fresh.extend(gone);
        // Swapped, so that both maps keep their room (`new` clears `now`).
        std::mem::swap(&mut drawn.before, &mut drawn.now);
        if overdrawn {
            drawn.before.clear();
        }
        drawn.overdrawn = overdrawn;
    }
}

/// The cells of a block's border (`block`) in its band `area`: the block's top and bottom
/// rows where the band has them, the left and right columns of the rows between.
fn border_cells(area: Rect, block: Rect) -> impl Iterator<Item = Rect> {
    let row = move |y: u16| Rect {
        y,
        height: 1,
        ..area
    };
    let top = (area.top() == block.top()).then(|| row(area.top()));
    let bottom = (area.bottom() == block.bottom() && (top.is_none() || area.height > 1))
        .then(|| row(area.bottom() - 1));
    let inner_top = area.top() + u16::from(top.is_some());
    let inner_bottom = area.bottom() - u16::from(bottom.is_some());
    let sides = (inner_top < inner_bottom).then(|| {
        let height = inner_bottom - inner_top;
        [
            Rect::new(area.left(), inner_top, 1, height),
            Rect::new(area.right().saturating_sub(1), inner_top, 1, height),
        ]
    });
    top.into_iter()
        .chain(bottom)
        .chain(sides.into_iter().flatten())
}

/// What a piece is drawn from, as `Canvas::piece` compares it.
fn key(what: &impl Hash) -> u64 {
    let mut h = PieceHasher(0);
    what.hash(&mut h);
    h.finish()
}

/// A multiply-rotate hash of a word at a time (the rustc compiler's "Fx" hash): pieces are
/// compared with the frame before, not guarded against chosen inputs, and std's SipHash
/// costs several times more per word (in a profile of the live view, hashing the pieces
/// stood beside drawing them).
struct PieceHasher(u64);

impl Hasher for PieceHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in words.by_ref() {
            self.add(u64::from_le_bytes(w.try_into().unwrap_or_default()));
        }
        for &b in words.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
}

impl PieceHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// `area`'s cells of `from` into `to` (buffers of one size).
fn copy(from: &Buffer, to: &mut Buffer, area: Rect) {
    for y in area.top()..area.bottom() {
        let start = to.index_of(area.x, y);
        let end = start + area.width as usize;
        to.content[start..end].clone_from_slice(&from.content[start..end]);
    }
}

/// `m` drawn on `c` over `area`, a piece at a time (`Canvas`): together the pieces draw what
/// the widgets drawn whole would.
pub fn draw_paced(area: Rect, c: &mut Canvas, m: &LiveModel) {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        draw_minimal(c.buf, m, area);
        c.done(true);
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
    c.step();
    draw_lines(c, header(m), rows[0]);
    draw_consumers(c, m, rows[1]);
    draw_culprits(c, m, rows[2]);
    draw_feed(c, m, rows[3]);
    let footer = footer(m);
    c.piece(key(&footer), rows[4], |buf| footer.render(rows[4], buf));
    if m.help {
        draw_help(c.buf, area);
    }
    c.done(m.help);
}

/// Lines, one to a row of `area` and a piece each (drawn as lines, not as a `Paragraph`: a
/// paragraph's line truncator is more code to find cold at the first piece of each frame).
fn draw_lines(c: &mut Canvas, lines: Vec<Line<'static>>, area: Rect) {
    for (n, line) in lines.into_iter().take(area.height as usize).enumerate() {
        let at = row_of(area, n);
        c.piece(key(&line), at, |buf| put_line(&line, at, buf));
    }
}

/// `line` over `area`, as `Line::render` draws it. A line of characters that are each one
/// cell and one grapheme (`one_cell`), left-aligned, is written cell by cell: ratatui cuts
/// the text into graphemes and measures each, most of the cost of a frame in a profile of
/// the live view, for what is nearly always ASCII, `µ` and `→`.
fn put_line(line: &Line, area: Rect, buf: &mut Buffer) {
    let chars = || line.spans.iter().flat_map(|s| s.content.chars());
    let left = matches!(
        line.alignment,
        None | Some(ratatui::layout::Alignment::Left)
    );
    if !left || !chars().all(one_cell) {
        line.render(area, buf);
        return;
    }
    let area = area.intersection(buf.area);
    if area.is_empty() || chars().next().is_none() {
        return;
    }
    let (mut at, end) = style_row(buf, area, line.style);
    for span in &line.spans {
        for ch in span.content.chars() {
            if at > end {
                return;
            }
            buf.content[at].set_char(ch).set_style(span.style);
            at += 1;
        }
    }
}

/// `style` over the first row of `area` (not empty, inside `buf`), as `Buffer::set_style`
/// sets it (the default style sets nothing); returns where the row's cells begin and end
/// in `buf.content`.
fn style_row(buf: &mut Buffer, area: Rect, style: Style) -> (usize, usize) {
    let (first, last) = (
        buf.index_of(area.x, area.y),
        buf.index_of(area.right() - 1, area.y),
    );
    if style != Style::default() {
        buf.content[first..=last].iter_mut().for_each(|c| {
            c.set_style(style);
        });
    }
    (first, last)
}

/// A character that is a grapheme of its own, one cell wide, whatever follows it: printable
/// ASCII, and the Latin letters, general punctuation and arrows the view's text uses (`µ`,
/// `–`, `→`) — none of them a mark or joiner that combines with a neighbour.
fn one_cell(ch: char) -> bool {
    use unicode_width::UnicodeWidthChar;
    match ch {
        ' '..='~' => true,
        '\u{a1}'..='\u{2ff}' | '\u{2010}'..='\u{2027}' | '\u{2190}'..='\u{21ff}' => {
            ch.width() == Some(1)
        }
        _ => false,
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

fn draw_consumers(c: &mut Canvas, m: &LiveModel, area: Rect) {
    if m.consumers.is_empty() {
        return;
    }
    // A watch may have many threads: the first four fit.
    let shown = m.consumers.len().min(4);
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints(vec![Constraint::Ratio(1, shown as u32); shown])
        .split(area);
    for (consumer, &col) in m.consumers.iter().zip(cols.iter()) {
        c.step();
        let halves = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Length(36), Constraint::Min(10)])
            .split(col);
        c.step();
        draw_percentiles(c, consumer, m.watch, halves[0]);
        draw_chart(c, consumer, m.watch, halves[1]);
    }
}

/// A table's row: its cells' text, one to a column, over the row's style.
#[derive(Debug, Clone, Hash)]
struct TableRow {
    cells: Vec<Line<'static>>,
    style: Style,
}

impl TableRow {
    fn new<T: Into<Line<'static>>>(cells: impl IntoIterator<Item = T>) -> Self {
        TableRow {
            cells: cells.into_iter().map(Into::into).collect(),
            style: Style::default(),
        }
    }

    fn style(self, style: Style) -> Self {
        TableRow { style, ..self }
    }

    /// The row over `at` (one line high), its cells in `columns` (x from `at`'s left).
    fn render(&self, at: Rect, columns: &[Rect], buf: &mut Buffer) {
        let at = at.intersection(buf.area);
        if at.is_empty() {
            return;
        }
        style_row(buf, at, self.style);
        for (cell, column) in self.cells.iter().zip(columns) {
            let cell_at = Rect::new(at.x + column.x, at.y, column.width, 1).intersection(at);
            put_line(cell, cell_at, buf);
        }
    }
}

/// Where the columns of a table `width` wide lie, from its left: as ratatui's `Table` lays
/// them out (from the start, a space between two). Laid out over one area whatever row is
/// drawn, the layout is the layout cache's after the first frame: a `Table` drawn over each
/// row's own area solves its constraints for every row position it has not seen (over 100 µs
/// a row, `scripts/bench.sh`'s longest own slice under tmux).
fn columns(widths: &[Constraint], width: u16) -> std::rc::Rc<[Rect]> {
    Layout::horizontal(widths.iter().copied())
        .flex(Flex::Start)
        .spacing(1)
        .split(Rect::new(0, 0, width, 1))
}

/// A bordered table: the block, the header, then its rows, a row a piece.
fn draw_table(
    c: &mut Canvas,
    title: String,
    header: TableRow,
    rows: &mut dyn Iterator<Item = TableRow>,
    widths: &[Constraint],
    area: Rect,
) {
    let inner = draw_block(c, title, area);
    if inner.height == 0 {
        return;
    }
    let columns = columns(widths, inner.width);
    let at = row_of(inner, 0);
    c.piece(key(&(&header, widths)), at, |buf| {
        header.render(at, &columns, buf)
    });
    let shown = inner.height.saturating_sub(1) as usize;
    // The rows are made as they are drawn: only a piece's row in a piece.
    for (n, row) in rows.take(shown).enumerate() {
        let at = row_of(inner, n + 1);
        c.piece(key(&(&row, widths)), at, |buf| {
            row.render(at, &columns, buf)
        });
    }
}

/// Rows of a block's border drawn in one piece, at most.
const BLOCK_ROWS_PER_PIECE: u16 = 8;

/// A bordered block titled `title` over `area`: its top row with the title, then bands of
/// `BLOCK_ROWS_PER_PIECE` rows, the last with the bottom border (together the block drawn
/// whole). A title that changes (a count, the worst so far) redraws its row alone: the
/// bands below are copied from the frame before. Returns the area inside the border.
fn draw_block(c: &mut Canvas, title: String, area: Rect) -> Rect {
    let inner = Block::default().borders(Borders::ALL).inner(area);
    let mut title = Some(title);
    let mut top = 0;
    while top < area.height {
        let height = match top {
            0 => 1,
            _ => BLOCK_ROWS_PER_PIECE.min(area.height - top),
        };
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
        c.border_piece(key(&band), at, area, |buf| band.render(at, buf));
        top += height;
    }
    inner
}

const PERCENTILE_WIDTHS: [Constraint; 3] = [
    Constraint::Length(9),
    Constraint::Length(11),
    Constraint::Length(11),
];

fn draw_percentiles(canvas: &mut Canvas, c: &ConsumerView, watch: bool, area: Rect) {
    let keys = ["50", "90", "99", "99.9", "99.99"];
    let mut rows: Vec<TableRow> = keys
        .iter()
        .map(|k| {
            let label = PERCENTILES.iter().find(|p| p.0 == *k).map_or(*k, |p| p.1);
            let get = |s: &Option<crate::summary::Summary>| {
                s.as_ref()
                    .and_then(|s| s.percentile(k))
                    .map(fmt_ns)
                    .unwrap_or_else(|| "–".into())
            };
            TableRow::new([label.to_string(), get(&c.interval), get(&c.total)])
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
    rows.push(TableRow::new([
        "max".to_string(),
        interval_max,
        max(&c.total),
    ]));
    let header = TableRow::new([
        if watch { "interrupt" } else { "transit" },
        "last 1s",
        "since start",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let title = format!("{} (CPU {})", c.name, c.cpu);
    // Thirteen cells' text made: a step of its own, cold at the turn after a long sleep.
    canvas.step();
    draw_table(
        canvas,
        title,
        header,
        &mut rows.into_iter(),
        &PERCENTILE_WIDTHS,
        area,
    );
}

/// Columns of the chart drawn in one piece, at most (each column a bar over the chart's
/// height).
const CHART_COLUMNS_PER_PIECE: usize = 24;

/// Maximum transit per interval on a log scale (1 ns → 0, 10 s → 1000), in bands of
/// `CHART_COLUMNS_PER_PIECE` columns: the scale is fixed, so each band's bars are those of
/// the whole chart.
fn draw_chart(canvas: &mut Canvas, c: &ConsumerView, watch: bool, area: Rect) {
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
    let inner = draw_block(canvas, title, area);
    let mut x = 0;
    while x < inner.width as usize {
        let width = CHART_COLUMNS_PER_PIECE.min(inner.width as usize - x);
        let band = Rect {
            x: inner.x + x as u16,
            width: width as u16,
            ..inner
        };
        let bars = data.get(x..data.len().min(x + width)).unwrap_or(&[]);
        canvas.piece(key(&bars), band, |buf| {
            Sparkline::default()
                .data(bars)
                .max(1000)
                .style(Style::default().fg(Color::Cyan))
                .render(band, buf)
        });
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
fn draw_culprits(c: &mut Canvas, m: &LiveModel, area: Rect) {
    let header = TableRow::new([
        "class", "how", "culprit", "count", "total", "max", "last", "share",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let sorted = m.sorted_culprits();
    draw_table(
        c,
        culprits_title(m),
        header,
        &mut sorted.into_iter().map(culprit_row),
        &CULPRIT_WIDTHS,
        area,
    );
}

fn culprit_row(c: &CulpritRow) -> TableRow {
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
    TableRow::new([
        Line::from(c.class.as_str()),
        Line::from(c.how()),
        Line::from(what),
        Line::from(c.count.to_string()),
        Line::from(fmt_ns(c.total_ns)),
        Line::from(fmt_ns(c.max_ns)),
        Line::from(format!("+{:.1}s", c.last_seen_ns as f64 / 1e9)),
        Line::from(format!("{:.0}%", c.share * 100.0)),
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
fn draw_feed(c: &mut Canvas, m: &LiveModel, area: Rect) {
    let title = match m.at_end && m.kernel_total_ns.is_some() {
        true => "latest spikes, by the kernel's time in each one's window (their culprits are decided at the end)",
        false => "latest spikes",
    };
    let inner = draw_block(c, title.to_string(), area);
    let lines = (m.feed.iter().rev().take(inner.height as usize))
        .map(|l| Line::from(l.clone()))
        .collect();
    draw_lines(c, lines, inner);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A line written cell by cell (`put_line`) leaves the cells `Line::render` leaves, over
    /// cells already written, cut at the area's end; lines it cannot write that way are
    /// rendered by ratatui.
    #[test]
    fn a_line_put_cell_by_cell_is_the_line_rendered() {
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let red = Style::default().fg(Color::Red);
        let lines = [
            Line::from("plain ascii"),
            Line::from(vec![
                Span::styled("CPU 1 → 3", bold),
                Span::raw("  12.5µs – +4.0s"),
            ]),
            Line::styled("a line style under its spans", red),
            Line::from(vec![
                Span::styled("cut", red),
                Span::raw(" at the end of its area, far past it"),
            ]),
            Line::from(""),
            // Not one cell each: a wide character, a combining mark.
            Line::from("漢字 wide"),
            Line::from("e\u{301} combined"),
            Line::from("right").alignment(ratatui::layout::Alignment::Right),
        ];
        let area = Rect::new(0, 0, 30, 3);
        for line in &lines {
            for at in [
                Rect::new(2, 1, 20, 1),
                Rect::new(25, 2, 10, 1),
                Rect::new(0, 0, 0, 1),
            ] {
                let mut theirs = Buffer::empty(area);
                theirs.set_string(0, 1, "x".repeat(30), Style::default().fg(Color::Blue));
                let mut ours = theirs.clone();
                line.render(at, &mut theirs);
                put_line(line, at, &mut ours);
                assert_eq!(ours, theirs, "{line:?} over {at:?}");
            }
        }
        assert!("CPU 1 → 3 12.5µs – +4.0s".chars().all(one_cell));
        assert!(!"漢".chars().all(one_cell) && !"e\u{301}".chars().all(one_cell));
    }

    #[test]
    fn a_border_bands_own_cells_are_its_borders() {
        let block = Rect::new(2, 10, 20, 12);
        let cells = |band: Rect| border_cells(band, block).collect::<Vec<_>>();
        // The first band: the top row, then the sides of the rows under it.
        assert_eq!(
            cells(Rect::new(2, 10, 20, 8)),
            [
                Rect::new(2, 10, 20, 1),
                Rect::new(2, 11, 1, 7),
                Rect::new(21, 11, 1, 7)
            ]
        );
        // The last band: the bottom row, the sides of the rows above it.
        assert_eq!(
            cells(Rect::new(2, 18, 20, 4)),
            [
                Rect::new(2, 21, 20, 1),
                Rect::new(2, 18, 1, 3),
                Rect::new(21, 18, 1, 3)
            ]
        );
        // A block in one band of two rows: its top and bottom rows, no sides.
        let flat = Rect::new(0, 0, 5, 2);
        assert_eq!(
            border_cells(flat, flat).collect::<Vec<_>>(),
            [Rect::new(0, 0, 5, 1), Rect::new(0, 1, 5, 1)]
        );
    }
}
