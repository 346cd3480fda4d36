//! The live view: a model of what the run shows right now (updated by the session from the
//! pipeline) and its two renderings — a ratatui terminal UI, or one plain line per second when
//! stdout is not a terminal. The model knows nothing of the terminal, so rendering is tested
//! against ratatui's TestBackend.

pub mod frontend;
pub mod model;
pub mod terminal;
pub mod view;

pub use model::{CulpritRow, LiveModel, SortKey};
