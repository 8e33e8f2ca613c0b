#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| trainplan_fuzz::runs_json(data));
