//! The `perf script` parser (`verify --perf-script`) and what is made of its events: any
//! bytes must end in events or a parse error, never a panic.
#![no_main]

use jitterscope::verify::perf;
use jitterscope::verify::wakeups::PerfWakeups;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(events) = perf::parse(&text) else {
        return;
    };
    for tid in [0, 10, 4121] {
        PerfWakeups::from_events(&events, tid, 0, u64::MAX);
        PerfWakeups::from_events(&events, tid, 100_000_000_000, 100_002_000_000);
    }
});
