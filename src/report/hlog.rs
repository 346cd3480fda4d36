//! The interval log (`.hlog`): one compressed histogram per consumer, measurement and
//! interval, streamed as the run goes so that a crash still leaves the data so far.
//! Readable by HdrHistogram's HistogramLogProcessor and HistogramLogAnalyzer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, UNIX_EPOCH};

use flate2::{Compress, Compression, FlushCompress, Status};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::{Counter, Histogram};

use crate::platform::pace::Pacer;

pub struct HlogWriter {
    out: BufWriter<File>,
    enc: Encoder,
}

/// The V2 compressed encoding HdrHistogram's readers expect (cookie, length, zlib stream of
/// the V2 encoding), in two steps with one compressor kept for the whole log at the fastest
/// level. The crate's own serializer builds a new compressor (a few hundred KiB to allocate
/// and clear) at the default level for every histogram: the largest single piece of work the
/// collector did each second, on a CPU it may share with the workload.
struct Encoder {
    v2: V2Serializer,
    raw: Vec<u8>,
    out: Vec<u8>,
    z: Compress,
}

/// `V2_COMPRESSED_COOKIE` of the V2 format (base cookie 0x1c849304 with the word size bit).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

impl Encoder {
    fn new() -> Encoder {
        Encoder {
            v2: V2Serializer::new(),
            raw: Vec::new(),
            out: Vec::new(),
            z: Compress::new(Compression::fast(), true),
        }
    }

    /// Step one: the V2 encoding of `h` into `raw`.
    fn encode<T: Counter>(&mut self, h: &Histogram<T>) -> std::io::Result<()> {
        self.raw.clear();
        self.v2
            .serialize(h, &mut self.raw)
            .map(|_| ())
            .map_err(|e| std::io::Error::other(format!("V2 encoding: {e}")))
    }

    /// Step two: `raw` compressed into `out`, behind the cookie and the length.
    fn compress(&mut self) -> std::io::Result<()> {
        self.out.clear();
        self.out
            .extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        self.out.extend_from_slice(&[0; 4]);
        self.z.reset();
        loop {
            self.out.reserve(self.raw.len() / 2 + 64);
            let read = self.z.total_in() as usize;
            let status = self
                .z
                .compress_vec(&self.raw[read..], &mut self.out, FlushCompress::Finish)
                .map_err(std::io::Error::other)?;
            if status == Status::StreamEnd {
                break;
            }
        }
        let len = (self.out.len() - 8) as u32;
        self.out[4..8].copy_from_slice(&len.to_be_bytes());
        Ok(())
    }
}

/// Hands the interval log writer a histogram encoded beforehand.
struct Encoded<'a>(&'a [u8]);

impl Serializer for Encoded<'_> {
    type SerializeError = std::io::Error;

    fn serialize<T: Counter, W: Write>(
        &mut self,
        _h: &Histogram<T>,
        writer: &mut W,
    ) -> std::io::Result<usize> {
        writer.write_all(self.0)?;
        Ok(self.0.len())
    }
}

impl HlogWriter {
    /// Writes the log header. `start_unix_ns` is the base time interval stamps count from.
    /// `tags` says what the tags name (a second comment line).
    pub fn new(file: File, start_unix_ns: u64, comment: &str, tags: &str) -> std::io::Result<Self> {
        let mut w = HlogWriter {
            out: BufWriter::new(file),
            enc: Encoder::new(),
        };
        let start = UNIX_EPOCH + Duration::from_nanos(start_unix_ns);
        IntervalLogWriterBuilder::new()
            .add_comment(comment)
            .add_comment(tags)
            .with_start_time(start)
            .with_base_time(start)
            .begin_log_with(&mut w.out, &mut Encoded(&[]))?;
        w.out.flush()?;
        Ok(w)
    }

    /// Appends one interval; `offset_ns` counts from the base time. The work comes in three
    /// steps with a look at `pacer` between them.
    pub fn write(
        &mut self,
        tag: &str,
        h: &Histogram<u64>,
        offset_ns: u64,
        length_ns: u64,
        pacer: &mut Pacer,
    ) -> std::io::Result<()> {
        self.enc.encode(h)?;
        pacer.between();
        self.enc.compress()?;
        pacer.between();
        // A builder with no comments or times writes no header: it only lends the writer.
        let mut encoded = Encoded(&self.enc.out);
        let mut log =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.out, &mut encoded)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

    fn histogram(seed: u64) -> Histogram<u64> {
        let mut h = crate::workload::histograms::new_histogram();
        let mut x = seed;
        for _ in 0..5_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            h.record(200 + (x >> 40) % 2_000_000).unwrap();
        }
        h
    }

    #[test]
    fn the_kept_compressor_encodes_what_readers_decode_and_the_crate_would_write() {
        let mut enc = Encoder::new();
        for seed in 1..4 {
            let h = histogram(seed);
            enc.encode(&h).unwrap();
            enc.compress().unwrap();
            let back: Histogram<u64> = Deserializer::new()
                .deserialize(&mut std::io::Cursor::new(&enc.out))
                .unwrap();
            assert_eq!(back, h, "seed {seed}");
            // The crate's own encoding of the same histogram decodes to the same.
            let mut theirs = Vec::new();
            V2DeflateSerializer::new()
                .serialize(&h, &mut theirs)
                .unwrap();
            let other: Histogram<u64> = Deserializer::new()
                .deserialize(&mut std::io::Cursor::new(&theirs))
                .unwrap();
            assert_eq!(back, other);
            assert_eq!(enc.out[..4], theirs[..4], "same cookie");
        }
    }
}
