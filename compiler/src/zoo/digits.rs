//! A small real trained network, embedded: a CNN for scikit-learn's 8x8 handwritten digits
//! (made by `compiler/tests/data/make_models.py`: two convs with BatchNorm and ReLU, max pool,
//! a residual add, global average pool, a dense layer, softmax; 98% on its held-out digits),
//! with calibration samples, 100 held-out test digits, their labels, and the fp32 model's
//! outputs on them, so the toolkit can compile and check a real model with no files at hand.

/// The fp32 model (`tiny_cnn.onnx`), input `[1, 1, 8, 8]` float32, output 10 class scores.
pub const ONNX: &[u8] = include_bytes!("../../tests/data/tiny_cnn.onnx");
/// 32 calibration images, float32 `[32, 1, 8, 8]` (`.npy`).
pub const CALIBRATION_NPY: &[u8] = include_bytes!("../../tests/data/digits_calib.npy");
/// 100 held-out test images, float32 `[100, 1, 8, 8]` (`.npy`).
pub const TEST_NPY: &[u8] = include_bytes!("../../tests/data/digits_test.npy");
/// Their labels, int64 `[100]` (`.npy`).
pub const TEST_LABELS_NPY: &[u8] = include_bytes!("../../tests/data/digits_test_labels.npy");
/// The fp32 model's outputs on the test images, float32 `[100, 10]` (`.npy`).
pub const FP32_OUTPUT_NPY: &[u8] = include_bytes!("../../tests/data/tiny_cnn_out.npy");
