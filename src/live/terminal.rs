//! The terminal while the live view runs: raw mode and the alternate screen, restored by a
//! guard on every way out (normal end, error, panic; signals end the run loop, whose guard
//! then drops). Keys map to actions.

use std::cell::RefCell;
use std::io::{Stdout, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use ratatui::backend::IntoCrossterm;
use ratatui::buffer::{Buffer, Cell};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::style::{
    Attribute, SetAttribute, SetBackgroundColor, SetForegroundColor, SetUnderlineColor,
};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, size as terminal_size, Clear, ClearType,
    EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute, queue};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};

use super::model::{ConsumerView, CulpritRow, LiveModel};
use super::view::{self, Canvas, Drawn};
use crate::model::CulpritClass;
use crate::platform::pace::Pacer;

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    TogglePause,
    NextSort,
    Reset,
    ToggleHelp,
}

pub fn action_of(code: KeyCode, modifiers: KeyModifiers) -> Option<Action> {
    match code {
        KeyCode::Char('q') | KeyCode::Esc => Some(Action::Quit),
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Some(Action::Quit),
        KeyCode::Char('p') | KeyCode::Char(' ') => Some(Action::TogglePause),
        KeyCode::Char('s') => Some(Action::NextSort),
        KeyCode::Char('r') => Some(Action::Reset),
        KeyCode::Char('?') | KeyCode::Char('h') => Some(Action::ToggleHelp),
        _ => None,
    }
}

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The terminal's input while the view is up (standard input, or `/dev/tty` opened for it
/// when that is not the terminal), else -1: a key is looked for with one `poll(2)` on it.
/// Crossterm's own poll takes its reader's lock, reads and parses what came: tens of µs at
/// each look, cold, on a CPU the workload shares. Crossterm reads the input only in
/// `LiveTerminal::actions`, which takes all it holds, so what it has not taken is still
/// waiting on the descriptor.
static INPUT_FD: AtomicI32 = AtomicI32::new(-1);

/// The descriptor crossterm reads keys from, as it chooses it; -1 if none.
fn open_input() -> i32 {
    // SAFETY: isatty and open take a descriptor and a NUL-terminated path; the descriptor
    // opened is owned by INPUT_FD and closed by `restore`.
    unsafe {
        if libc::isatty(libc::STDIN_FILENO) == 1 {
            return libc::STDIN_FILENO;
        }
        libc::open(c"/dev/tty".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC)
    }
}

/// Whether input waits on the terminal (crossterm's poll when there is no descriptor).
fn input_waiting() -> bool {
    let fd = INPUT_FD.load(Ordering::Acquire);
    if fd < 0 {
        return event::poll(Duration::ZERO).unwrap_or(false);
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, valid for the call, which does not wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

/// Whether a key (or another terminal event) waits to be read, without waiting for one.
pub fn key_waiting() -> bool {
    ACTIVE.load(Ordering::SeqCst) && input_waiting()
}

fn restore() {
    let fd = INPUT_FD.swap(-1, Ordering::AcqRel);
    if fd > libc::STDIN_FILENO {
        // SAFETY: opened by `open_input`, no longer polled (swapped out above).
        unsafe { libc::close(fd) };
    }
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let mut out = std::io::stdout();
        let _ = execute!(out, LeaveAlternateScreen, cursor::Show);
        let _ = out.flush();
    }
}

/// Bytes written to the terminal in pieces of at most this many, the collector's pacer
/// consulted between two: a frame of a large terminal is tens of KiB, and each write wakes the
/// terminal's reader (which may run on a measured CPU).
const PIECE_BYTES: usize = 2048;

/// What the view draws, held in memory (the screen's cells are encoded here) until the frame is
/// written out in pieces.
#[derive(Clone, Default)]
struct Held(Rc<RefCell<Vec<u8>>>);

impl Write for Held {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Changed cells drawn in one piece, at most: a full frame of a large terminal is thousands
/// of cells, each a few ns of copying (`encode`).
const CELLS_PER_PIECE: usize = 64;

/// The style a cell is drawn in: colours (foreground, background, underline) and modifiers.
type CellStyle = (Color, Color, Color, Modifier);

/// The terminal's own style: what a reset leaves, and what `CrosstermBackend::draw` assumes
/// at the start of its cells.
const PLAIN: CellStyle = (Color::Reset, Color::Reset, Color::Reset, Modifier::empty());

/// `cells` (in screen order) as the terminal's escape codes, into `out` (emptied first):
/// what `CrosstermBackend::draw` writes them as on screen — the cursor moved where a run of
/// adjacent cells breaks, the style set where it changes, the terminal's style again at the
/// end. Its draw formats every cell's text through `Print`, which in a profile of the live
/// view cost as much as drawing the frame; here a cell's text is copied, and a style is set
/// from a reset, its parts each a code of crossterm's.
fn encode<'a>(
    cells: impl Iterator<Item = (u16, u16, &'a Cell)>,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    out.clear();
    let (mut last, mut style) = (None, PLAIN);
    for (x, y, cell) in cells {
        if !matches!(last, Some((lx, ly)) if x == lx + 1 && y == ly) {
            queue!(out, cursor::MoveTo(x, y))?;
        }
        last = Some((x, y));
        let wanted = (cell.fg, cell.bg, cell.underline_color, cell.modifier);
        if wanted != style {
            set_style(out, wanted)?;
            style = wanted;
        }
        out.extend_from_slice(cell.symbol().as_bytes());
    }
    if style != PLAIN {
        queue!(out, SetAttribute(Attribute::Reset))?;
    }
    Ok(())
}

/// The codes that take the terminal from any style to `style`: a reset, then each part that
/// is not the terminal's own.
fn set_style(out: &mut Vec<u8>, (fg, bg, underline, modifier): CellStyle) -> std::io::Result<()> {
    queue!(out, SetAttribute(Attribute::Reset))?;
    let attributes = [
        (Modifier::BOLD, Attribute::Bold),
        (Modifier::DIM, Attribute::Dim),
        (Modifier::ITALIC, Attribute::Italic),
        (Modifier::UNDERLINED, Attribute::Underlined),
        (Modifier::SLOW_BLINK, Attribute::SlowBlink),
        (Modifier::RAPID_BLINK, Attribute::RapidBlink),
        (Modifier::REVERSED, Attribute::Reverse),
        (Modifier::HIDDEN, Attribute::Hidden),
        (Modifier::CROSSED_OUT, Attribute::CrossedOut),
    ];
    for (m, a) in attributes {
        if modifier.contains(m) {
            queue!(out, SetAttribute(a))?;
        }
    }
    if fg != Color::Reset {
        queue!(out, SetForegroundColor(fg.into_crossterm()))?;
    }
    if bg != Color::Reset {
        queue!(out, SetBackgroundColor(bg.into_crossterm()))?;
    }
    if underline != Color::Reset {
        queue!(out, SetUnderlineColor(underline.into_crossterm()))?;
    }
    Ok(())
}

/// Rows of a buffer cleared in one piece, at most (a 160-column row is 160 cells to reset).
const ROWS_PER_RESET: usize = 4;

/// What ratatui's `Terminal::draw` does, a piece at a time: the frame is rendered into one of
/// two buffers (the view, a line or two a piece), the cells that changed since the last
/// frame (looked for only where the view drew anew: `changed_in`) are encoded a piece at a
/// time, the buffers are swapped and the next one cleared a few
/// rows at a time, each piece of its own for `pace`. The bytes go to `out`.
struct Screen<W: Write> {
    out: W,
    buffers: [Buffer; 2],
    current: usize,
    /// What the pieces of the last frame were drawn from.
    drawn: Drawn,
    /// The frame before was drawn over (the help): this one is compared whole.
    whole_next: bool,
    /// A piece of changed cells as escape codes (`encode`), kept for its room.
    encoded: Vec<u8>,
}

impl<W: Write> Screen<W> {
    fn new(out: W) -> Self {
        Screen {
            out,
            buffers: [Buffer::empty(Rect::ZERO), Buffer::empty(Rect::ZERO)],
            current: 0,
            drawn: Drawn::default(),
            whole_next: false,
            encoded: Vec::new(),
        }
    }

    /// One frame of `m` over `area` (the terminal's size: when it changed, the screen is
    /// cleared and drawn whole).
    fn frame(&mut self, area: Rect, m: &LiveModel, pace: &mut dyn FnMut()) -> std::io::Result<()> {
        if self.buffers[self.current].area != area {
            self.buffers = [Buffer::empty(area), Buffer::empty(area)];
            self.drawn = Drawn::default();
            queue!(self.out, Clear(ClearType::All))?;
        }
        let [first, second] = &mut self.buffers;
        let (buffer, previous) = match self.current {
            0 => (first, &*second),
            _ => (second, &*first),
        };
        view::draw_paced(
            area,
            &mut Canvas::new(buffer, Some(previous), &mut self.drawn, pace),
            m,
        );
        pace();
        let (previous, current) = match self.current {
            0 => (&self.buffers[1], &self.buffers[0]),
            _ => (&self.buffers[0], &self.buffers[1]),
        };
        let whole = std::mem::replace(&mut self.whole_next, self.drawn.overdrawn);
        match (!whole && !self.drawn.overdrawn)
            .then(|| changed_in(previous, current, &self.drawn.fresh, pace))
            .flatten()
        {
            Some(changed) => {
                for cells in changed.chunks(CELLS_PER_PIECE) {
                    encode(cells.iter().copied(), &mut self.encoded)?;
                    self.out.write_all(&self.encoded)?;
                    pace();
                }
            }
            None => {
                let mut changed = previous.diff_iter(current).peekable();
                while changed.peek().is_some() {
                    encode(changed.by_ref().take(CELLS_PER_PIECE), &mut self.encoded)?;
                    self.out.write_all(&self.encoded)?;
                    pace();
                }
            }
        }
        self.current = 1 - self.current;
        let next = &mut self.buffers[self.current];
        let width = next.area.width as usize;
        for rows in next.content.chunks_mut(ROWS_PER_RESET * width.max(1)) {
            rows.iter_mut().for_each(Cell::reset);
            pace();
        }
        self.out.flush()
    }
}

/// The cells of `areas` that differ between two frames, in screen order (a cell once,
/// whatever areas it is in): the pieces copied from the frame before are left out of the
/// comparison, which a frame's own diff (`Buffer::diff_iter`) walks whole, every cell each
/// turn. The areas' rows are put in screen order and joined where they overlap, and the
/// cells compared along them: sorting the changed cells instead (thousands when the chart
/// and the feed move) took longer than comparing them. None where either frame has a wide
/// character there: a wide character covers the cell after it, which only the whole diff
/// accounts for.
fn changed_in<'a>(
    previous: &'a Buffer,
    current: &'a Buffer,
    areas: &[Rect],
    pace: &mut dyn FnMut(),
) -> Option<Vec<(u16, u16, &'a Cell)>> {
    use unicode_width::UnicodeWidthStr;
    let wide = |c: &Cell| c.symbol().len() > 1 && c.symbol().width() > 1;
    // (y, x, end x) of each row of each area.
    let mut spans: Vec<(u16, u16, u16)> = areas
        .iter()
        .map(|a| a.intersection(current.area))
        .filter(|a| !a.is_empty())
        .flat_map(|a| (a.top()..a.bottom()).map(move |y| (y, a.left(), a.right())))
        .collect();
    spans.sort_unstable();
    let mut changed = Vec::new();
    let mut spans = spans.into_iter().peekable();
    while let Some((y, x, mut end)) = spans.next() {
        while let Some((_, _, e)) = spans.next_if(|&(ny, nx, _)| ny == y && nx <= end) {
            end = end.max(e);
        }
        // The row's cells as slices: indexing cell by cell checked and computed each one's
        // place, a third of the comparison's time in a profile.
        let start = current.index_of(x, y);
        let row = start..start + usize::from(end - x);
        let cells = previous.content[row.clone()]
            .iter()
            .zip(&current.content[row]);
        for (x, (was, is)) in (x..).zip(cells) {
            if was != is {
                if wide(was) || wide(is) {
                    return None;
                }
                changed.push((x, y, is));
            }
        }
        pace();
    }
    Some(changed)
}

pub struct LiveTerminal {
    screen: Screen<Held>,
    held: Held,
    out: Stdout,
}

impl LiveTerminal {
    /// Takes over the terminal; a panic hook puts it back before the panic message prints.
    /// Before anything is measured, the code and memory of a frame are touched once here
    /// rather than in the run's first frame (a page fault or a first run of a widget's code
    /// is hundreds of µs): a model with a row of each kind is drawn off the screen, then an
    /// empty one on it twice (each of the screen's two buffers).
    pub fn enter() -> std::io::Result<LiveTerminal> {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            hook(info);
        }));
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        INPUT_FD.store(open_input(), Ordering::Release);
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e);
        }
        let held = Held::default();
        let mut terminal = LiveTerminal {
            screen: Screen::new(held.clone()),
            held,
            out,
        };
        let area = match terminal_size() {
            Ok((width, height)) => Rect::new(0, 0, width, height),
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        let (mut drawn, mut pace) = (Drawn::default(), || {});
        let mut scratch = Buffer::empty(area);
        let mut canvas = Canvas::new(&mut scratch, None, &mut drawn, &mut pace);
        view::draw_paced(area, &mut canvas, &warm_up_model());
        let empty = LiveModel::default();
        for _ in 0..2 {
            if let Err(e) = terminal.draw(&empty, &mut Pacer::new(false)) {
                restore();
                return Err(e);
            }
        }
        Ok(terminal)
    }

    /// Renders the frame a line or two at a time, draws the cells that changed a piece at a
    /// time (`Screen`), then writes it to the terminal in pieces of `PIECE_BYTES`: `pacer` is
    /// consulted between any two.
    pub fn draw(&mut self, m: &LiveModel, pacer: &mut Pacer) -> std::io::Result<()> {
        let (width, height) = terminal_size()?;
        let area = Rect::new(0, 0, width, height);
        self.screen.frame(area, m, &mut || {
            pacer.between();
        })?;
        let frame = std::mem::take(&mut *self.held.0.borrow_mut());
        let written = write_in_pieces(&mut self.out, &frame, pacer);
        // The same allocation for the next frame.
        let mut kept = frame;
        kept.clear();
        *self.held.0.borrow_mut() = kept;
        written
    }

    /// Keys pressed since the last call (no waiting). A resize is seen by the next frame.
    pub fn actions(&mut self) -> std::io::Result<Vec<Action>> {
        let mut out = Vec::new();
        if !input_waiting() {
            return Ok(out);
        }
        while event::poll(Duration::ZERO)? {
            if let Event::Key(k) = event::read()? {
                if k.kind == KeyEventKind::Press {
                    out.extend(action_of(k.code, k.modifiers));
                }
            }
        }
        Ok(out)
    }
}

/// A model with one of each row the view draws (a consumer, a culprit, a spike), for
/// `LiveTerminal::enter` to draw off the screen.
fn warm_up_model() -> LiveModel {
    LiveModel {
        consumers: vec![ConsumerView {
            max_history: [1_000, 100_000].into_iter().collect(),
            ..ConsumerView::default()
        }],
        culprits: vec![CulpritRow {
            class: CulpritClass::Kworker,
            inferred: false,
            name: String::new(),
            detail: String::new(),
            count: 1,
            total_ns: 1_000,
            max_ns: 1_000,
            last_seen_ns: 0,
            share: 1.0,
        }],
        feed: [String::new()].into_iter().collect(),
        probes: true,
        ..LiveModel::default()
    }
}

/// `bytes` to `out`, a write and a flush a piece, `pacer` consulted after each.
fn write_in_pieces(out: &mut dyn Write, bytes: &[u8], pacer: &mut Pacer) -> std::io::Result<()> {
    for piece in bytes.chunks(PIECE_BYTES) {
        pacer.between();
        out.write_all(piece)?;
        out.flush()?;
    }
    Ok(())
}

impl Drop for LiveTerminal {
    fn drop(&mut self) {
        restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that keeps each write apart.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_frame_is_written_in_pieces_the_pacer_sees_between() {
        let frame: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut out = Writes::default();
        // A pacer with no slice at all pauses at every look.
        let mut pacer = Pacer::with(true, 0, std::time::Duration::ZERO);
        pacer.begin();
        write_in_pieces(&mut out, &frame, &mut pacer).unwrap();
        let sizes: Vec<usize> = out.0.iter().map(Vec::len).collect();
        assert_eq!(sizes, [PIECE_BYTES, PIECE_BYTES, 5000 - 2 * PIECE_BYTES]);
        assert_eq!(out.0.concat(), frame, "every byte, in order");
        assert_eq!(pacer.pauses, 3, "the pacer is looked at before each piece");
        let mut none = Writes::default();
        write_in_pieces(&mut none, &[], &mut pacer).unwrap();
        assert!(none.0.is_empty());
    }

    /// A model with `n` culprits and a consumer whose chart grows with `n`.
    fn model(n: usize) -> LiveModel {
        let mut m = warm_up_model();
        m.label = format!("frame {n}");
        m.culprits = (0..n)
            .map(|i| CulpritRow {
                name: format!("kworker/{i}:1"),
                count: i as u64,
                // Rows of each tone: red, grey and plain.
                class: [
                    CulpritClass::SelfNoise,
                    CulpritClass::Kworker,
                    CulpritClass::Task,
                ][i % 3],
                ..m.culprits[0].clone()
            })
            .collect();
        // Lost records: white on red, bold.
        m.lost = n as u64 % 2;
        m.consumers[0].max_history = (1..=n as u64 * 7).map(|v| v * 1_000).collect();
        m.feed = (0..n).map(|i| format!("spike {i}")).collect();
        m
    }

    /// `m` drawn whole by the view.
    fn drawn_whole(m: &LiveModel, area: Rect) -> Buffer {
        let mut buf = Buffer::empty(area);
        let (mut drawn, mut pace) = (Drawn::default(), || {});
        view::draw_paced(
            area,
            &mut Canvas::new(&mut buf, None, &mut drawn, &mut pace),
            m,
        );
        buf
    }

    /// A buffer's text, row by row.
    fn text(buf: &Buffer) -> Vec<String> {
        let area = buf.area;
        (0..area.height)
            .map(|y| (0..area.width).map(|x| buf[(x, y)].symbol()).collect())
            .collect()
    }

    /// A colour as a terminal reads the code crossterm writes for it (`38;5;N`: index N).
    fn on_terminal(c: Color) -> vt100::Color {
        use ratatui::crossterm::style::Colored;
        match c {
            Color::Reset => vt100::Color::Default,
            c => {
                let code = Colored::ForegroundColor(c.into_crossterm()).to_string();
                let index = code.rsplit(';').next().and_then(|n| n.parse().ok());
                vt100::Color::Idx(index.expect("an indexed colour"))
            }
        }
    }

    /// A cell's style as a terminal shows it: bold, reversed, foreground, background.
    type Shown = (bool, bool, vt100::Color, vt100::Color);

    fn styles(buf: &Buffer) -> Vec<Shown> {
        buf.content
            .iter()
            .map(|c| {
                let m = c.modifier;
                let bold = m.contains(Modifier::BOLD);
                let reversed = m.contains(Modifier::REVERSED);
                (bold, reversed, on_terminal(c.fg), on_terminal(c.bg))
            })
            .collect()
    }

    /// Frames drawn in pieces, one after the other, leave on a terminal what the last frame
    /// drawn whole shows: the changed cells of each frame are all written, the pieces copied
    /// from the frame before are those it drew from the same (rows kept, rows gone, the help
    /// drawn over everything and taken away), and the buffer cleared in pieces holds nothing
    /// of the frame before the last.
    #[test]
    fn frames_drawn_in_pieces_leave_the_last_frame_on_the_terminal() {
        let area = Rect::new(0, 0, 160, 48);
        let held = Held::default();
        let mut screen = Screen::new(held.clone());
        let mut pieces = 0;
        let frames = [
            (12, false),
            (3, false),
            (20, true),
            (20, false),
            (0, false),
            (0, true),
            (0, false),
            (7, true),
            (7, false),
        ];
        for (n, help) in frames {
            let mut m = model(n);
            m.help = help;
            screen.frame(area, &m, &mut || pieces += 1).unwrap();
        }
        let size = |n: u16| std::num::NonZeroU16::new(n).unwrap();
        let mut terminal = vt100::Parser::new(size(area.height), size(area.width), 0);
        terminal.process(&held.0.borrow());
        let screen = terminal.screen();
        let shown: Vec<String> = (screen.rows(0, area.width))
            .map(|r| format!("{r:<width$}", width = area.width as usize))
            .collect();
        let last = drawn_whole(&model(7), area);
        assert_eq!(shown, text(&last));
        let shown_styles: Vec<Shown> = (0..area.height)
            .flat_map(|y| (0..area.width).map(move |x| (x, y)))
            .map(|(x, y)| {
                let c = screen.cell(y, x).expect("a cell of the screen");
                (c.bold(), c.inverse(), c.fgcolor(), c.bgcolor())
            })
            .collect();
        let wanted = styles(&last);
        assert_eq!(shown_styles, wanted, "every cell's style");
        for style in [(true, false), (false, true)] {
            assert!(
                wanted.iter().any(|s| (s.0, s.1) == style),
                "{style:?} drawn"
            );
        }
        assert!(
            wanted.iter().any(|s| s.3 != vt100::Color::Default),
            "a background"
        );
        assert!(
            wanted
                .iter()
                .filter(|s| s.2 != vt100::Color::Default)
                .count()
                > 100
        );
        // Each frame: header, table and chart bands, cell pieces, reset bands.
        assert!(pieces > 9 * 20, "{pieces} pieces in nine frames");
    }

    #[test]
    fn keys_map_to_actions() {
        assert_eq!(
            action_of(KeyCode::Char('q'), KeyModifiers::NONE),
            Some(Action::Quit)
        );
        assert_eq!(
            action_of(KeyCode::Esc, KeyModifiers::NONE),
            Some(Action::Quit)
        );
        assert_eq!(
            action_of(KeyCode::Char('c'), KeyModifiers::CONTROL),
            Some(Action::Quit)
        );
        assert_eq!(action_of(KeyCode::Char('c'), KeyModifiers::NONE), None);
        assert_eq!(
            action_of(KeyCode::Char('s'), KeyModifiers::NONE),
            Some(Action::NextSort)
        );
        assert_eq!(
            action_of(KeyCode::Char('p'), KeyModifiers::NONE),
            Some(Action::TogglePause)
        );
    }
}
