//! callgrind reader and conversion: any text gives a profile or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use proftrust_formats::callgrind::{parse, ExactOptions};
use proftrust_formats::NoSymbols;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(p) = parse(text) {
            let _ = p.totals();
            let _ = p.stated_totals();
            let _ = p.function_totals();
            let _ = p.to_exact(&ExactOptions::default(), &NoSymbols);
        }
    }
});
