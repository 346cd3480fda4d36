//! Attribution: stalls × interruption records → verdicts, and the run-wide ranking (its
//! advice is worded in `report::advice`). Pure: no BPF, no terminal, no files, no clock —
//! tested with replayed fixtures, and a recorded run can be re-analysed without root.

pub mod book;
pub mod chunked;
pub mod engine;
pub mod nesting;
pub mod preview;
pub mod ranking;
pub mod recent;
pub mod run;
pub mod tally;
pub mod theft;
pub mod throughput;
pub mod watch;

pub use engine::{Engine, EngineConfig, Share, SpikeVerdict, Verdict};
pub use ranking::{CpuTheft, ProcessTheft, Processes, RankedCulprit, Ranking};
