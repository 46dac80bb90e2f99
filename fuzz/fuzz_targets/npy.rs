//! The `.npy` reader (`isa::npy::decode`). An array that decodes must encode to a file that
//! decodes to the same array.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = isa::npy::decode(data) {
        let again = isa::npy::decode(&isa::npy::encode(a.elem, &a.shape, &a.data))
            .expect("an encoded array decodes");
        assert_eq!(
            (again.elem, &again.shape, &again.data),
            (a.elem, &a.shape, &a.data)
        );
    }
});
