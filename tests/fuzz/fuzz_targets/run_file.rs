//! The run-file reader and everything that renders what it returns: any bytes given to
//! `jitterscope report` or `compare` must end in a run file or an error, never a panic.
#![no_main]

use jitterscope::report::runfile::RunFile;
use jitterscope::report::{compare, export};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let run = match RunFile::from_json("fuzz.json", &text) {
        Ok(run) => run,
        Err(e) => {
            assert!(e
                .to_string()
                .starts_with("cannot read run file fuzz.json: "));
            return;
        }
    };
    for exporter in export::all() {
        let out = exporter.render(&run);
        if exporter.name() == "json" {
            // What the JSON export writes must read back as the same run.
            let again = RunFile::from_json("fuzz.json", &out).expect("the JSON export reads back");
            assert_eq!(again, run);
        }
    }
    let runs = [
        ("a.json".to_string(), run.clone()),
        ("b.json".to_string(), run),
    ];
    compare::render(&runs);
    compare::chart(&runs);
});
