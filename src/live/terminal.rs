//! The terminal while the live view runs: raw mode and the alternate screen, restored by a
//! guard on every way out (normal end, error, panic; signals end the run loop, whose guard
//! then drops). Keys map to actions.

use std::io::{Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute};
use ratatui::Terminal;

use super::model::LiveModel;
use super::view;

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

pub struct LiveTerminal {
    terminal: Terminal<CrosstermBackend<Stdout>>,
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
        let terminal = match Terminal::new(CrosstermBackend::new(out)) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e);
            }
        };
        Ok(LiveTerminal { terminal })
    }

    pub fn draw(&mut self, m: &LiveModel) -> std::io::Result<()> {
        // `draw` redraws cleanly after a resize: ratatui re-reads the size every frame.
        self.terminal.draw(|f| view::draw(f, m)).map(|_| ())
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

impl Drop for LiveTerminal {
    fn drop(&mut self) {
        restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
