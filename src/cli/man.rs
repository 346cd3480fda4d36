//! The man pages, generated from the same clap definitions as `--help`: `jitterscope.1` and
//! one `jitterscope-<command>.1` per visible subcommand (`scripts/man.sh` writes them into
//! `docs/man/`; `tests/man.rs` checks the committed ones are current).

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use super::Cli;

/// Writes every page into `dir` (which must exist); hidden commands get none.
pub fn write_pages(dir: &Path) -> Result<()> {
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))
}
