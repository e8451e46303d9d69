//! perf script reader: any text gives a sample set or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use proftrust_formats::segments::NoSegments;
use proftrust_formats::NoSymbols;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = proftrust_formats::sniff(data);
        let _ = proftrust_formats::read_perf_script(text, &NoSymbols, &NoSegments);
    }
});
