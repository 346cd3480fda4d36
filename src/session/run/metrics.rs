//! A run's metrics file: each consumer's transit series beside the attribution's, and
//! jitterscope's own CPU time.

use super::super::prepare::Prepared;
use super::Recorder;
use crate::model::Nanos;
use crate::report::build::consumer_key;
use crate::report::metrics::{ConsumerSeries, Exposure};

impl Recorder {
    /// Rewrites the metrics file from the totals, the attribution and jitterscope's own CPU
    /// time (the process's less the workload's, at the latest sample).
    pub(super) fn rewrite_metrics(&mut self, p: &Prepared, now: Nanos) -> Result<(), String> {
        let Some(file) = &mut self.metrics else {
            return Ok(());
        };
        let empty = Default::default();
        let e = Exposure {
            now_ns: now,
            elapsed_ns: now.saturating_sub(p.record_from),
            cpus: &p.measured,
            theft: self.attr.theft.as_ref().unwrap_or(&empty),
            steal_ns: &self.attr.steal_seen,
            lost: &self.attr.lost_per_cpu,
            own_cpu_ns: self
                .cpu_last
                .map_or(0, |c| c.process_ns.saturating_sub(c.workload_ns)),
            consumers: self
                .totals
                .iter()
                .zip(&p.cfg.consumer_cpus)
                .enumerate()
                .map(|(i, (t, &cpu))| ConsumerSeries {
                    consumer: consumer_key(i),
                    cpu,
                    transit: &t.transit,
                })
                .collect(),
            threads: Vec::new(),
        };
        file.write(&e)
    }
}
