//! The terminal while the live view runs: raw mode and the alternate screen, restored by a
//! guard on every way out (normal end, error, panic; signals end the run loop, whose guard
//! then drops). Keys map to actions.

use std::cell::RefCell;
use std::io::{Stdout, Write};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute};
use ratatui::layout::{Position, Size};
use ratatui::Terminal;

use super::model::LiveModel;
use super::view;
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

fn restore() {
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

/// What the view draws, held in memory (ratatui's backend writes here) until the frame is
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
/// of cells, each some tens of ns of escape codes.
const CELLS_PER_PIECE: usize = 64;

/// The collector's pacer, lent to the view for a frame (the render and the backend both
/// consult it).
type Lent = Rc<RefCell<Option<Pacer>>>;

/// crossterm's backend, with a frame's changed cells drawn a piece at a time and the lent
/// pacer consulted between two pieces.
struct PacedBackend {
    inner: CrosstermBackend<Held>,
    pacer: Lent,
}

impl Backend for PacedBackend {
    type Error = std::io::Error;

    fn draw<'a, I>(&mut self, content: I) -> std::io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let mut content = content.peekable();
        while content.peek().is_some() {
            self.inner.draw(content.by_ref().take(CELLS_PER_PIECE))?;
            between(&self.pacer);
        }
        Ok(())
    }

    fn hide_cursor(&mut self) -> std::io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> std::io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> std::io::Result<Position> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> std::io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> std::io::Result<()> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> std::io::Result<()> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> std::io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> std::io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

/// Consults the lent pacer, if one is lent.
fn between(lent: &Lent) {
    if let Some(p) = lent.borrow_mut().as_mut() {
        p.between();
    }
}

pub struct LiveTerminal {
    terminal: Terminal<PacedBackend>,
    held: Held,
    lent: Lent,
    out: Stdout,
}

impl LiveTerminal {
    /// Takes over the terminal; a panic hook puts it back before the panic message prints.
    pub fn enter() -> std::io::Result<LiveTerminal> {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            hook(info);
        }));
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e);
        }
        let held = Held::default();
        let lent = Lent::default();
        let backend = PacedBackend {
            inner: CrosstermBackend::new(held.clone()),
            pacer: lent.clone(),
        };
        let terminal = match Terminal::new(backend) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        Ok(LiveTerminal {
            terminal,
            held,
            lent,
            out,
        })
    }

    /// Renders the frame a widget at a time, draws the cells that changed a piece at a time
    /// (`PacedBackend`), then writes it to the terminal in pieces of `PIECE_BYTES`: `pacer`
    /// is consulted between any two.
    pub fn draw(&mut self, m: &LiveModel, pacer: &mut Pacer) -> std::io::Result<()> {
        // Lent for the frame, then given back (also when the frame failed).
        *self.lent.borrow_mut() = Some(std::mem::replace(pacer, Pacer::new(false)));
        let lent = self.lent.clone();
        // `draw` redraws cleanly after a resize: ratatui re-reads the size every frame.
        let drawn = self
            .terminal
            .draw(|f| view::draw_paced(f, m, &mut || between(&lent)));
        if let Some(given_back) = self.lent.borrow_mut().take() {
            *pacer = given_back;
        }
        drawn?;
        let frame = std::mem::take(&mut *self.held.0.borrow_mut());
        let written = write_in_pieces(&mut self.out, &frame, pacer);
        // The same allocation for the next frame.
        let mut kept = frame;
        kept.clear();
        *self.held.0.borrow_mut() = kept;
        written
    }

    /// Keys pressed since the last call (no waiting).
    pub fn actions(&mut self) -> std::io::Result<Vec<Action>> {
        let mut out = Vec::new();
        while event::poll(Duration::ZERO)? {
            match event::read()? {
                Event::Key(k) if k.kind == KeyEventKind::Press => {
                    if let Some(a) = action_of(k.code, k.modifiers) {
                        out.push(a);
                    }
                }
                Event::Resize(..) => {
                    let _ = self.terminal.autoresize();
                }
                _ => {}
            }
        }
        Ok(out)
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
