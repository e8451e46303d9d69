//! perf.data reader: any bytes give a sample set or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use proftrust_formats::segments::NoSegments;

fuzz_target!(|data: &[u8]| {
    let _ = proftrust_formats::read_perf_data_with(
        data,
        std::path::Path::new("fuzz.data"),
        &Default::default(),
        &NoSegments,
    );
});
