//! Finish, for every kind of session: the source's run file and its own files, every
//! exporter's file (written before anything is printed, the run file last), then the report,
//! the notes and where the files went.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use super::source::StoppedSource;
use super::Console;
use crate::report::files::OutputError;
use crate::report::runfile::RunFile;
use crate::report::{export, text};

/// Where a session's files went.
pub(super) struct Finished {
    pub run: RunFile,
    pub json_path: PathBuf,
    pub hgrm_paths: Vec<PathBuf>,
    pub hlog_path: PathBuf,
}

pub(super) fn finish(mut s: impl StoppedSource, out: &mut Console) -> Result<Finished> {
    let files_from = crate::system::cputime::process_cpu_ns();
    let words = s.words();
    // The files first: a report that cannot be printed (standard output gone) or a signal
    // arriving now must not cost the session its files. A file that cannot be written (full
    // disk) does not stop the report from being printed.
    let mut file_error: Option<OutputError> = None;
    let (mut run, hgrm_paths) = s.run_file(&mut file_error);
    let written = write_exports(&s, &mut run, files_from, &mut file_error);
    write!(out, "\n{}", text::render(&run, s.colour()))?;
    s.notes(out)?;
    let (hlog_path, hlog_error) = s.interval_log();
    if let Some(e) = hlog_error {
        writeln!(
            out,
            "WARNING: the interval log {} is incomplete: {e}",
            hlog_path.display()
        )?;
    }
    let (noun, verb) = (words.noun, words.verb);
    if let Some(e) = file_error {
        return Err(anyhow::Error::new(e).context(format!(
            "the {noun}'s files are incomplete (the report above is what was {verb})"
        )));
    }
    let (metrics, metrics_failed) = s.metrics();
    if let Some(why) = metrics_failed {
        anyhow::bail!("{why}; the metrics file was not rewritten at the end (the report above and the {noun}'s files are complete)");
    }
    let json_path = written.last().cloned().unwrap_or_default();
    writeln!(out, "\nrun file:     {}", json_path.display())?;
    for f in &written[..written.len().saturating_sub(1)] {
        writeln!(out, "              {}", f.display())?;
    }
    for f in &hgrm_paths {
        writeln!(out, "              {} (HdrHistogram, µs)", f.display())?;
    }
    writeln!(out, "              {} (interval log)", hlog_path.display())?;
    for line in metrics.iter().flat_map(|m| m.closing_lines()) {
        writeln!(out, "{line}")?;
    }
    Ok(Finished {
        run,
        json_path,
        hgrm_paths,
        hlog_path: hlog_path.to_path_buf(),
    })
}

/// Every exporter's file, the run file last (its presence says the others were written
/// before it); the first error is kept in `error`. Where the source's files are costed,
/// what they cost from `files_from` (the process's CPU time when they began) up to the first
/// file that shows it goes into the run's `overhead.files_cpu_ns`.
fn write_exports(
    s: &impl StoppedSource,
    run: &mut RunFile,
    files_from: u64,
    error: &mut Option<OutputError>,
) -> Vec<PathBuf> {
    let mut written = Vec::new();
    let mut costed = !s.files_costed();
    for e in export::run_files() {
        if e.shows_overhead() && !costed {
            costed = true;
            let ns = crate::system::cputime::process_cpu_ns().saturating_sub(files_from);
            if let Some(o) = run.overhead.as_mut() {
                o.files_cpu_ns = ns;
            }
        }
        match s.output().write(
            &format!("{}{}", s.stem(), e.suffix()),
            e.render(run).as_bytes(),
        ) {
            Ok(path) => written.push(path),
            Err(e) => {
                error.get_or_insert(e);
            }
        }
    }
    written
}
