//! proftrust's own sample and exact files: any bytes give a value or an error, never a
//! panic; what reads back writes back to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use proftrust_formats::native;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = native::read_samples(data) {
        let mut out = Vec::new();
        native::write_samples(&mut out, &s).expect("write to Vec");
        assert_eq!(native::read_samples(&out).expect("re-read"), s);
    }
    if let Ok(e) = native::read_exact(data) {
        let mut out = Vec::new();
        native::write_exact(&mut out, &e).expect("write to Vec");
        assert_eq!(native::read_exact(&out).expect("re-read"), e);
    }
});
