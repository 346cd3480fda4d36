//! Rendering and writing a run's results: the seed's histogram blocks, the stall summary,
//! the run file (JSON), `.hgrm` percentile distributions and the `.hlog` interval log.

pub mod advice;
pub mod build;
pub mod chart;
pub mod compare;
pub mod culprit;
pub mod export;
pub mod files;
pub mod hgrm;
pub mod hlog;
pub mod metrics;
pub mod perfetto;
pub mod runfile;
pub mod seed;
pub mod stalls;
pub mod text;
pub mod watch;
pub use crate::units;
