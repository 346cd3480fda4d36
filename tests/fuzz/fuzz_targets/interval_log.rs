//! The interval log (`.hlog`) as HdrHistogram's readers take it: jitterscope writes it and
//! does not read it back, so this fuzzes the reader its users open it with (the
//! hdrhistogram crate's interval-log iterator and V2 deserializer): any bytes end in
//! histograms or errors, never a panic.
#![no_main]

use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(data).take(10_000) {
        let Ok(LogEntry::Interval(h)) = entry else {
            continue;
        };
        let Ok(bytes) = base64_decode(h.encoded_histogram()) else {
            continue;
        };
        let _ = deserializer.deserialize::<u64, _>(&mut &bytes[..]);
    }
});

/// Standard base64, padding optional; an error on any other byte.
fn base64_decode(text: &str) -> Result<Vec<u8>, ()> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for b in text.bytes().take_while(|&b| b != b'=') {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(()),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Ok(out)
}
