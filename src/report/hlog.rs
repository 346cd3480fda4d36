//! The interval log (`.hlog`): one compressed histogram per consumer, measurement and
//! interval, streamed as the run goes so that a crash still leaves the data so far.
//! Readable by HdrHistogram's HistogramLogProcessor and HistogramLogAnalyzer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, UNIX_EPOCH};

use flate2::{Compress, Compression, FlushCompress, Status};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::Serializer;
use hdrhistogram::{Counter, Histogram};

use crate::platform::pace::Pacer;
use crate::summary::{read_buckets, Buckets};

pub struct HlogWriter {
    out: BufWriter<File>,
    /// One interval's line, made in memory before it goes to `out` in steps.
    line: Vec<u8>,
    enc: Encoder,
    /// The recorded buckets of the histogram `write` is given (kept between intervals).
    buckets: Buckets,
}

/// The V2 compressed encoding HdrHistogram's readers expect (cookie, length, zlib stream of
/// the V2 encoding), in steps, with one compressor kept for the whole log at the fastest
/// level (or the zlib stream in stored blocks, see `compress`). The crate's own serializers build a new compressor (a few hundred KiB to allocate
/// and clear) at the default level for every histogram, and encode into a buffer of 9 bytes
/// per bucket up to the largest value, zeroed first (some 100 KiB for a run's histogram, all
/// cold after a second's sleep): the largest single pieces of work the collector did each
/// second, on a CPU it may share with the workload. This encoder writes the same bytes from
/// the recorded buckets only, looking at the pacer as it goes.
struct Encoder {
    raw: Vec<u8>,
    out: Vec<u8>,
    z: Compress,
}

/// The cookies of the V2 format (base cookies with the word size bit).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// Cookie, payload length, normalizing index offset, significant digits, lowest and highest
/// trackable values, integer-to-double ratio.
const V2_HEADER_LEN: usize = 40;
/// Making one interval's line in one go, with room for cold caches after a sleep (the crate's
/// writer: base64 of the encoded histogram, into memory; a few µs warm for a 14 KiB line).
const LINE_NS: u64 = 20_000;
/// The line goes to the file this many bytes at a time, a look at the pacer between: made and
/// written in one piece (the file's write when the buffer filled among it), a line is a
/// slice longer than the pacer's.
const LINE_STEP: usize = 2048;

/// Where a value's bucket is in a histogram's counts array (HdrHistogram's layout: buckets
/// of `2^sub_bucket_count_magnitude` sub-buckets, each after the first sharing its lower half
/// with the one before). The crate keeps this private; the layout is the format's.
struct Layout {
    unit_magnitude: u32,
    sub_half_magnitude: u32,
    sub_half_count: u64,
    sub_mask: u64,
    leading_zero_base: u32,
}

impl Layout {
    fn of<T: Counter>(h: &Histogram<T>) -> Layout {
        let unit_magnitude = 63 - h.low().max(1).leading_zeros();
        let largest = 2 * 10u64.pow(u32::from(h.sigfig()));
        // ceil(log2(largest))
        let sub_magnitude = 64 - (largest - 1).leading_zeros();
        let sub_half_magnitude = sub_magnitude.saturating_sub(1);
        Layout {
            unit_magnitude,
            sub_half_magnitude,
            sub_half_count: 1 << sub_half_magnitude,
            sub_mask: ((1u64 << sub_magnitude) - 1) << unit_magnitude,
            leading_zero_base: 64 - unit_magnitude - sub_magnitude,
        }
    }

    fn index(&self, value: u64) -> u64 {
        let bucket = self.leading_zero_base - (value | self.sub_mask).leading_zeros();
        let sub = value >> (bucket + self.unit_magnitude);
        (u64::from(bucket + 1) << self.sub_half_magnitude) + sub - self.sub_half_count
    }
}

/// A number as V2 writes it: zig-zag, then LEB128 with at most 9 bytes (the 9th carries the
/// top 8 bits whole).
fn put_varint(out: &mut Vec<u8>, n: i64) {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    for _ in 0..8 {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Encoder {
    fn new() -> Encoder {
        Encoder {
            raw: Vec::new(),
            out: Vec::new(),
            z: Compress::new(Compression::fast(), true),
        }
    }

    /// Step one: the V2 encoding of `h` into `raw`, from its recorded buckets (`buckets`,
    /// read beforehand): a run of empty buckets is written as its negated length, a single
    /// one as 0, up to the bucket of the largest value.
    fn encode(&mut self, h: &Histogram<u64>, buckets: &[(u64, u64)]) -> std::io::Result<()> {
        let raw = &mut self.raw;
        raw.clear();
        raw.extend_from_slice(&V2_COOKIE.to_be_bytes());
        raw.extend_from_slice(&[0; 8]); // payload length, normalizing index offset
        raw.extend_from_slice(&u32::from(h.sigfig()).to_be_bytes());
        raw.extend_from_slice(&h.low().to_be_bytes());
        raw.extend_from_slice(&h.high().to_be_bytes());
        raw.extend_from_slice(&1.0f64.to_be_bytes());
        let layout = Layout::of(h);
        let (mut next, mut too_large) = (0u64, false);
        for &(value, count) in buckets {
            let index = layout.index(value);
            match index.saturating_sub(next) {
                0 => {}
                1 => put_varint(raw, 0),
                gap => put_varint(raw, -(gap as i64)),
            }
            let count = i64::try_from(count).unwrap_or_else(|_| {
                too_large = true;
                0
            });
            put_varint(raw, count);
            next = index + 1;
        }
        if too_large {
            return Err(std::io::Error::other(
                "V2 encoding: a count does not fit in 63 bits",
            ));
        }
        if next == 0 {
            // Nothing recorded: the bucket of the largest value (0) is written, empty.
            put_varint(raw, 0);
        }
        let len = (raw.len() - V2_HEADER_LEN) as u32;
        raw[4..8].copy_from_slice(&len.to_be_bytes());
        Ok(())
    }

    /// Step two: `raw` as a zlib stream into `out`, behind the cookie and the length:
    /// compressed, or (`store`) in stored blocks — twice the bytes, but none of the
    /// compressor's work (resetting it alone clears some 100 KiB of tables, cold).
    fn compress(&mut self, store: bool) -> std::io::Result<()> {
        self.out.clear();
        self.out
            .extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        self.out.extend_from_slice(&[0; 4]);
        if store {
            zlib_stored(&self.raw, &mut self.out);
            let len = (self.out.len() - 8) as u32;
            self.out[4..8].copy_from_slice(&len.to_be_bytes());
            return Ok(());
        }
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

/// `data` as a zlib stream of stored (uncompressed) deflate blocks (RFC 1950/1951): the
/// header, blocks of at most 65,535 bytes each with its length and the length's complement,
/// the Adler-32 of the data.
fn zlib_stored(data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(u16::MAX as usize).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let len = chunk.len() as u16;
        out.push(u8::from(last));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        // 5552 bytes keep the sums below 2^32 before the modulo (zlib's NMAX).
        for &byte in block {
            a += u32::from(byte);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
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
            line: Vec::new(),
            enc: Encoder::new(),
            buckets: Buckets::new(),
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

    /// Appends one interval; `offset_ns` counts from the base time. The work comes in steps
    /// with a look at `pacer` between them. When the pacer is on (the collector shares a
    /// measured CPU) the histogram is stored, not compressed (`Encoder::compress`).
    pub fn write(
        &mut self,
        tag: &str,
        h: &Histogram<u64>,
        offset_ns: u64,
        length_ns: u64,
        pacer: &mut Pacer,
    ) -> std::io::Result<()> {
        let mut buckets = std::mem::take(&mut self.buckets);
        read_buckets(
            h,
            &mut || {
                pacer.between();
            },
            &mut buckets,
        );
        let written = self.write_buckets(tag, h, &buckets, offset_ns, length_ns, pacer);
        self.buckets = buckets;
        written
    }

    /// `write`, from the recorded buckets of `h` read beforehand (`summary::read_buckets`).
    pub fn write_buckets(
        &mut self,
        tag: &str,
        h: &Histogram<u64>,
        buckets: &[(u64, u64)],
        offset_ns: u64,
        length_ns: u64,
        pacer: &mut Pacer,
    ) -> std::io::Result<()> {
        self.enc.encode(h, buckets)?;
        pacer.between();
        self.enc.compress(pacer.enabled())?;
        pacer.between();
        // A builder with no comments or times writes no header: it only lends the writer.
        pacer.before(LINE_NS);
        self.line.clear();
        let mut encoded = Encoded(&self.enc.out);
        let mut log =
            IntervalLogWriterBuilder::new().begin_log_with(&mut self.line, &mut encoded)?;
        log.write_histogram(
            h,
            Duration::from_nanos(offset_ns),
            Duration::from_nanos(length_ns),
            Tag::new(tag),
        )
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        for step in self.line.chunks(LINE_STEP) {
            pacer.between();
            self.out.write_all(step)?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer, V2Serializer};

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
            encode(&mut enc, &h);
            enc.compress(false).unwrap();
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

    /// The V2 bytes of the crate's own serializer, for comparison.
    fn theirs(h: &Histogram<u64>) -> Vec<u8> {
        let mut v = Vec::new();
        V2Serializer::new().serialize(h, &mut v).unwrap();
        v
    }

    #[test]
    fn our_v2_encoding_is_byte_for_byte_the_crates() {
        let mut cases: Vec<Histogram<u64>> = (1..6).map(histogram).collect();
        let empty = crate::workload::histograms::new_histogram();
        cases.push(empty.clone());
        // Single values at bucket edges, the first sub-buckets, the top of the range, gaps
        // of exactly one empty bucket, and counts that take every varint length.
        for values in [
            vec![0u64],
            vec![1],
            vec![2047, 2048, 2049, 4095, 4096, 4097],
            vec![1, 3, 5, 7],
            vec![crate::workload::histograms::HIGHEST_NS],
        ] {
            let mut h = empty.clone();
            for v in values {
                h.record(v).unwrap();
            }
            cases.push(h);
        }
        let mut h = empty.clone();
        for (i, n) in [1u64, 200, 70_000, 1 << 30, 1 << 50, 1 << 57]
            .iter()
            .enumerate()
        {
            h.record_n(1000 * (i as u64 + 1), *n).unwrap();
        }
        cases.push(h);
        // Other layouts: a coarser precision and a lowest value above 1.
        let mut h = Histogram::<u64>::new_with_bounds(1000, 10_000_000_000, 2).unwrap();
        for v in [1000u64, 1500, 999_999, 5_000_000_000] {
            h.record(v).unwrap();
        }
        cases.push(h);
        let mut enc = Encoder::new();
        for (n, h) in cases.iter().enumerate() {
            encode(&mut enc, h);
            assert_eq!(enc.raw, theirs(h), "case {n}");
        }
    }

    /// The V2 encoding of `h` from its buckets, read unpaced.
    fn encode(enc: &mut Encoder, h: &Histogram<u64>) {
        let mut buckets = Buckets::new();
        read_buckets(h, &mut || {}, &mut buckets);
        enc.encode(h, &buckets).unwrap();
    }

    #[test]
    fn a_paced_write_reads_the_buckets_in_steps_and_writes_the_same() {
        // A slice of 0 ns: every look at the pacer pauses (1 µs here).
        let mut pacer = Pacer::with(true, 0, std::time::Duration::from_micros(1));
        let mut h = crate::workload::histograms::new_histogram();
        for v in 0..3000u64 {
            h.record(10 + v * 37).unwrap();
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut w = HlogWriter::new(file.reopen().unwrap(), 0, "test", "tags").unwrap();
        let header = std::fs::read(file.path()).unwrap();
        w.write("t", &h, 0, 1, &mut pacer).unwrap();
        assert_eq!(w.enc.raw, theirs(&h));
        // The walk's spans, then one look after the encoding, one after the zlib stream, one
        // before the line is made and one before each step of it goes to the file.
        let spans = crate::summary::spans_walked(&h);
        let steps = w.line.len().div_ceil(LINE_STEP);
        assert!(steps > 1, "a line of {} bytes", w.line.len());
        assert_eq!(pacer.pauses as usize, spans + 3 + steps, "{spans} spans");
        // The line went to the file whole, after the header, as the crate's writer makes it.
        w.flush().unwrap();
        let mut line = Vec::new();
        IntervalLogWriterBuilder::new()
            .begin_log_with(&mut line, &mut Encoded(&w.enc.out))
            .unwrap()
            .write_histogram(&h, Duration::ZERO, Duration::from_nanos(1), Tag::new("t"))
            .unwrap();
        assert_eq!(std::fs::read(file.path()).unwrap(), [header, line].concat());
    }

    #[test]
    fn stored_blocks_are_a_zlib_stream_readers_decode() {
        use std::io::Read;
        for len in [0usize, 1, 447, 5552, 5553, 65_535, 65_536, 200_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut out = Vec::new();
            zlib_stored(&data, &mut out);
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&out[..])
                .read_to_end(&mut back)
                .unwrap_or_else(|e| panic!("{len} bytes: {e}"));
            assert_eq!(back, data, "{len} bytes");
        }
        // A whole interval, stored: HdrHistogram's deserializer reads it back.
        let mut enc = Encoder::new();
        let h = histogram(9);
        encode(&mut enc, &h);
        enc.compress(true).unwrap();
        let back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut std::io::Cursor::new(&enc.out))
            .unwrap();
        assert_eq!(back, h);
    }
}
