//! Every file format a run can be exported to, behind one trait, so `run` and `report`
//! share the list and a new format is one impl.

use super::runfile::RunFile;
use super::{perfetto, text};

pub trait Exporter {
    /// The `--format` name.
    fn name(&self) -> &'static str;
    /// The file name suffix after the run's stem.
    fn suffix(&self) -> &'static str;
    fn render(&self, run: &RunFile) -> String;
    /// Whether it shows jitterscope's own cost (`overhead`): rendered after the cost of the
    /// files that do not is taken (see `Overhead::files_cpu_ns`).
    fn shows_overhead(&self) -> bool {
        false
    }
}

pub struct Json;
pub struct Markdown;
pub struct Text;
pub struct Svg;
pub struct Perfetto;

impl Exporter for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn suffix(&self) -> &'static str {
        ".json"
    }
    fn render(&self, run: &RunFile) -> String {
        run.to_json()
    }
    fn shows_overhead(&self) -> bool {
        true
    }
}

impl Exporter for Markdown {
    fn name(&self) -> &'static str {
        "markdown"
    }
    fn suffix(&self) -> &'static str {
        ".md"
    }
    fn render(&self, run: &RunFile) -> String {
        text::render_markdown(run)
    }
    fn shows_overhead(&self) -> bool {
        true
    }
}

impl Exporter for Text {
    fn name(&self) -> &'static str {
        "text"
    }
    fn suffix(&self) -> &'static str {
        ".txt"
    }
    fn render(&self, run: &RunFile) -> String {
        text::render(run, false)
    }
    fn shows_overhead(&self) -> bool {
        true
    }
}

impl Exporter for Svg {
    fn name(&self) -> &'static str {
        "svg"
    }
    fn suffix(&self) -> &'static str {
        ".svg"
    }
    fn render(&self, run: &RunFile) -> String {
        super::chart::run_chart(run)
    }
}

impl Exporter for Perfetto {
    fn name(&self) -> &'static str {
        "perfetto"
    }
    fn suffix(&self) -> &'static str {
        ".trace.json"
    }
    fn render(&self, run: &RunFile) -> String {
        perfetto::render(run)
    }
}

/// The files every run writes, in this order: those that show jitterscope's own cost after
/// those that do not, the run file last (its presence means the others are complete).
pub fn run_files() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(Svg),
        Box::new(Perfetto),
        Box::new(Markdown),
        Box::new(Json),
    ]
}

/// Every format `report --format` accepts.
pub fn all() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(Text),
        Box::new(Markdown),
        Box::new(Json),
        Box::new(Svg),
        Box::new(Perfetto),
    ]
}

pub fn by_name(name: &str) -> Option<Box<dyn Exporter>> {
    all().into_iter().find(|e| e.name() == name)
}
