//! perf.data streaming counter: any bytes give counts or an error, never a panic; when both
//! it and the full reader accept a file, they agree on the samples per event and the lost
//! count (where the addresses land may differ only for files whose timestamps are corrupt).
#![no_main]
use libfuzzer_sys::fuzz_target;
use proftrust_formats::segments::NoSegments;
use proftrust_formats::{count_perf_data, read_perf_data_with, SampleCounts};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let p = Path::new("fuzz.data");
    let opts = Default::default();
    let fast = count_perf_data(data, p, &opts, &NoSegments);
    let full = read_perf_data_with(data, p, &opts, &NoSegments);
    if let (Ok((fast, _)), Ok((full, _))) = (fast, full) {
        let full = SampleCounts::from_samples(&full);
        assert_eq!(fast.per_event(), full.per_event());
        assert_eq!(fast.lost, full.lost);
    }
});
