#![cfg_attr(feature = "libfuzzer", no_main)]

#[cfg(feature = "libfuzzer")]
libfuzzer_sys::fuzz_target!(|data: &[u8]| trainplan_fuzz::brief_toml(data));

#[cfg(feature = "afl")]
fn main() {
    afl::fuzz!(|data: &[u8]| trainplan_fuzz::brief_toml(data));
}
