//! The interval log (`.hlog`): one compressed histogram per consumer, measurement and
//! interval, streamed as the run goes so that a crash still leaves the data so far.
//! Readable by HdrHistogram's HistogramLogProcessor and HistogramLogAnalyzer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

pub struct HlogWriter {
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
}

impl HlogWriter {
    /// Writes the log header. `start_unix_ns` is the base time interval stamps count from.
    /// `tags` says what the tags name (a second comment line).
    pub fn new(file: File, start_unix_ns: u64, comment: &str, tags: &str) -> std::io::Result<Self> {
        let mut w = HlogWriter {
            out: BufWriter::new(file),
            serializer: V2DeflateSerializer::new(),
        };
        let start = UNIX_EPOCH + Duration::from_nanos(start_unix_ns);
        IntervalLogWriterBuilder::new()
            .add_comment(comment)
            .add_comment(tags)
            .with_start_time(start)
            .with_base_time(start)
            .begin_log_with(&mut w.out, &mut w.serializer)?;
        w.out.flush()?;
        Ok(w)
    }

    /// Appends one interval; `offset_ns` counts from the base time.
    pub fn write(
        &mut self,
        tag: &str,
        h: &Histogram<u64>,
        offset_ns: u64,
        length_ns: u64,
    ) -> std::io::Result<()> {
        // A builder with no comments or times writes no header: it only lends the writer.
        let mut log =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.out, &mut self.serializer)?;
        log.write_histogram(
            h,
            Duration::from_nanos(offset_ns),
            Duration::from_nanos(length_ns),
            Tag::new(tag),
        )
        .map_err(|e| std::io::Error::other(e.to_string()))
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
