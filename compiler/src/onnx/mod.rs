//! ONNX loading: `.onnx` model files and `.pb` tensor files decoded into the protobuf messages
//! of [`proto`], and constant tensors converted to the graph IR's [`Tensor`].
//!
//! # Why `prost` with hand-declared messages
//!
//! An ONNX file is a protobuf `ModelProto`. The compiler decodes it with
//! [`prost`](https://docs.rs/prost) 0.14, using message structs declared by hand in
//! [`proto`] with `#[derive(prost::Message)]` and the field numbers of the official
//! `onnx.proto`. There is no `protoc`, no build script and no vendored `.proto` file: the
//! schema subset the compiler needs (model, graph, node, attribute, tensor, value info and
//! type, opset import; about 200 lines) is ordinary Rust code, reviewed like the rest, and
//! fields the compiler does not read are simply omitted (protobuf decoders skip unknown
//! fields, so a newer exporter adding fields never breaks loading). The run-time cost is
//! `prost` and `bytes`, both already small, widely used crates.
//!
//! The alternatives, measured on the project's 2-core machine:
//!
//! - **`tract-onnx`** (a complete ONNX inference engine) loads every model we tried and is
//!   bit-exact with onnxruntime on integer graphs, but brings 109 crates and takes
//!   **8 min 45 s** for a clean release build (23 min on a loaded machine). CI clones fresh, so
//!   every run would pay it; and the compiler needs its own IR anyway (shapes, quantization
//!   parameters, lowering to accelerator layers), so tract's graph would only be translated.
//!   It stays useful as an *external* golden reference, not as a dependency.
//! - **`prost-build` + `protox`** on the official `onnx.proto`: full fidelity, but 59 crates
//!   and a build script for the same handful of messages.
//! - **`onnx-rs`** (0 dependencies, 7 s build) parses our models, but is a very young,
//!   single-author crate: the format parser is the compiler's foundation, and a dependency
//!   there should be either mature or our own. The hand-declared messages are the latter at
//!   a cost of one reviewed file.
//!
//! # Robustness
//!
//! Loading never panics on bad input: truncated files, random bytes and protobuf that is not
//! a model come back as an [`OnnxError`] naming the file and what is wrong ("not an ONNX model:
//! ...", "unsupported opset ...", "tensor 'w' has 12 elements but 3 values", ...). `prost`
//! bounds message nesting (recursion limit 100) and checks every length against the buffer.

pub mod contrib;
pub mod forms;
pub mod import;
pub mod lowbit;
pub mod ops;
pub mod proto;
pub mod unsupported;

use std::fmt;
use std::path::Path;

use ndarray::{ArrayD, IxDyn};
use prost::Message;

use crate::graph::{DType, Tensor};
use proto::{data_type, ModelProto, TensorProto};

/// The lowest and highest version of the default (`ai.onnx`) operator set the importer
/// accepts. Attribute-to-input migrations inside this range (Clip's bounds, Reshape's shape,
/// Squeeze's axes, Softmax's axis semantics, ...) are handled per op.
pub const MIN_OPSET: i64 = 7;
/// Opsets 24 and 25 only add element types to the operators the importer takes (int2/uint2 in
/// QuantizeLinear/DequantizeLinear among them; Cast's new `round_mode` concerns float8e8m0,
/// which the IR does not have), so their semantics are those of opset 23.
pub const MAX_OPSET: i64 = 25;

/// Why an ONNX file could not be read: the file and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxError {
    /// The file (or `<memory>` for bytes not read from a file).
    pub file: String,
    pub message: String,
}

impl fmt::Display for OnnxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

impl std::error::Error for OnnxError {}

impl OnnxError {
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> OnnxError {
        OnnxError {
            file: file.into(),
            message: message.into(),
        }
    }
}

/// Reads and decodes a `.onnx` file, checking that it is a model the compiler can import
/// (has a graph, imports a supported version of the default operator set, keeps its data
/// in the file).
pub fn load_model(path: &Path) -> Result<ModelProto, OnnxError> {
    let file = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| OnnxError::new(&file, format!("cannot read: {e}")))?;
    decode_model(&bytes, &file)
}

/// Decodes and checks a model from bytes; `file` names them in errors.
pub fn decode_model(bytes: &[u8], file: &str) -> Result<ModelProto, OnnxError> {
    let err = |m: String| OnnxError::new(file, m);
    if bytes.is_empty() {
        return Err(err("not an ONNX model: the file is empty".into()));
    }
    let model = ModelProto::decode(bytes)
        .map_err(|e| err(format!("not an ONNX model (protobuf decoding failed: {e})")))?;
    if model.ir_version <= 0 {
        return Err(err(
            "not an ONNX model: no IR version (the bytes decode as protobuf but not as a ModelProto)"
                .into(),
        ));
    }
    let Some(graph) = &model.graph else {
        return Err(err("not an ONNX model: it has no graph".into()));
    };
    let opset = default_opset(&model).ok_or_else(|| {
        err("the model imports no version of the default ONNX operator set (ai.onnx)".into())
    })?;
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(err(format!(
            "unsupported opset: the model uses ai.onnx opset {opset}, the importer supports {MIN_OPSET} to {MAX_OPSET}"
        )));
    }
    if !model.functions.is_empty() {
        return Err(err(format!(
            "the model defines {} local function(s); model-local functions are not supported",
            model.functions.len()
        )));
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(err("sparse initializers are not supported".into()));
    }
    Ok(model)
}

/// The version of the default operator set (`""` or `"ai.onnx"`) the model imports.
pub fn default_opset(model: &ModelProto) -> Option<i64> {
    model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
}

/// Reads a serialized `TensorProto` (ONNX test data `input_0.pb`, `output_0.pb`, ...).
pub fn load_tensor_pb(path: &Path) -> Result<(String, Tensor), OnnxError> {
    let file = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| OnnxError::new(&file, format!("cannot read: {e}")))?;
    let t = TensorProto::decode(bytes.as_slice()).map_err(|e| {
        OnnxError::new(
            &file,
            format!("not a TensorProto (protobuf decoding failed: {e})"),
        )
    })?;
    let v = tensor_from_proto(&t).map_err(|m| OnnxError::new(&file, m))?;
    Ok((t.name.clone(), v))
}

fn check_len(name: &str, n: usize, found: usize, what: &str) -> Result<(), String> {
    if n == found {
        Ok(())
    } else {
        Err(format!(
            "tensor '{name}' has {n} elements but {found} {what}"
        ))
    }
}

fn from_raw<T, const W: usize>(
    name: &str,
    raw: &[u8],
    n: usize,
    f: impl Fn([u8; W]) -> T,
) -> Result<Vec<T>, String> {
    if raw.len() != n * W {
        return Err(format!(
            "tensor '{name}' has {n} elements of {W} bytes but {} bytes of raw data",
            raw.len()
        ));
    }
    Ok(raw
        .chunks_exact(W)
        .map(|c| f(c.try_into().expect("chunk of W bytes")))
        .collect())
}

/// The IR's type for the values of an ONNX element type, or its ONNX name if the IR has none.
/// Bools (masks, comparison results) are held as uint8 0/1, their own encoding, which `Where`
/// and `Cast` read back (see `vta_runtime::ops::compare`); int4/int2 values are held in int8
/// and uint4/uint2 in uint8 (a value's meaning does not depend on its storage; only a
/// QuantizeLinear to such a type saturates differently, which [`lowbit`] makes explicit);
/// [`OnnxDType::from_onnx`] is the strict mapping, for types an operator declares (a
/// quantized type is never bool, a Cast to int4 is refused).
pub fn ir_dtype(code: i32) -> Result<DType, String> {
    match code {
        data_type::BOOL => Ok(DType::U8),
        _ => match data_type::sub_byte(code) {
            Some((true, _)) => Ok(DType::I8),
            Some((false, _)) => Ok(DType::U8),
            None => DType::from_onnx(code),
        },
    }
}

/// Unpacks `n` sub-byte elements of `bits` bits (first element in the lowest bits of the first
/// byte, as ONNX stores int4/int2 in `raw_data` and, one packed byte per entry, in
/// `int32_data`), sign-extending when `signed`.
fn unpack_sub_byte(
    name: &str,
    bytes: &[u8],
    n: usize,
    signed: bool,
    bits: u32,
) -> Result<Vec<i32>, String> {
    let per_byte = (8 / bits) as usize;
    let want = n.div_ceil(per_byte);
    if bytes.len() != want {
        return Err(format!(
            "tensor '{name}' has {n} elements of {bits} bits ({want} packed bytes) but {} bytes \
             of data",
            bytes.len()
        ));
    }
    let mask = (1u32 << bits) - 1;
    Ok((0..n)
        .map(|i| {
            let v = (u32::from(bytes[i / per_byte]) >> ((i % per_byte) as u32 * bits)) & mask;
            if signed && v >> (bits - 1) == 1 {
                v as i32 - (1 << bits)
            } else {
                v as i32
            }
        })
        .collect())
}

/// Converts a `TensorProto` (raw little-endian data or the typed fields) to a [`Tensor`].
/// Refuses external data, chunked tensors and element types the IR does not compute with,
/// naming the tensor.
pub fn tensor_from_proto(t: &TensorProto) -> Result<Tensor, String> {
    let name = if t.name.is_empty() {
        "<unnamed>"
    } else {
        t.name.as_str()
    };
    if t.data_location == 1 || !t.external_data.is_empty() {
        return Err(format!(
            "tensor '{name}' keeps its data in an external file (external data is not supported; \
             save the model with all tensors inside the .onnx file)"
        ));
    }
    if t.segment.is_some() {
        return Err(format!(
            "tensor '{name}' is chunked (segment); not supported"
        ));
    }
    let mut shape = Vec::with_capacity(t.dims.len());
    let mut n: usize = 1;
    for &d in &t.dims {
        let d = usize::try_from(d)
            .map_err(|_| format!("tensor '{name}' has negative dimension {d}"))?;
        n = n
            .checked_mul(d)
            .filter(|&n| n <= 1 << 31)
            .ok_or_else(|| format!("tensor '{name}' is too large ({:?})", t.dims))?;
        shape.push(d);
    }
    let raw = !t.raw_data.is_empty();
    let dtype = ir_dtype(t.data_type).map_err(|ty| {
        format!("tensor '{name}' has element type {ty}, which the compiler does not support")
    })?;
    let s = IxDyn(&shape);
    let mk = |e: ndarray::ShapeError| format!("tensor '{name}': {e}");
    if let Some((signed, bits)) = data_type::sub_byte(t.data_type) {
        let packed: Vec<u8> = if raw {
            t.raw_data.clone()
        } else {
            t.int32_data
                .iter()
                .map(|&b| {
                    u8::try_from(b).map_err(|_| {
                        format!(
                            "tensor '{name}' has int32_data value {b}, not a packed byte of \
                             {bits}-bit elements"
                        )
                    })
                })
                .collect::<Result<_, _>>()?
        };
        let v = unpack_sub_byte(name, &packed, n, signed, bits)?;
        return Ok(if signed {
            Tensor::I8(ArrayD::from_shape_vec(s, v.iter().map(|&x| x as i8).collect()).map_err(mk)?)
        } else {
            Tensor::U8(ArrayD::from_shape_vec(s, v.iter().map(|&x| x as u8).collect()).map_err(mk)?)
        });
    }
    Ok(match dtype {
        DType::F32 => {
            let v = if raw {
                from_raw(name, &t.raw_data, n, f32::from_le_bytes)?
            } else {
                check_len(name, n, t.float_data.len(), "float_data values")?;
                t.float_data.clone()
            };
            Tensor::F32(ArrayD::from_shape_vec(s, v).map_err(mk)?)
        }
        DType::I8 | DType::U8 | DType::I32 => {
            let v: Vec<i32> = if raw {
                match dtype {
                    DType::I8 => {
                        from_raw(name, &t.raw_data, n, |b: [u8; 1]| i32::from(b[0] as i8))?
                    }
                    DType::U8 => from_raw(name, &t.raw_data, n, |b: [u8; 1]| i32::from(b[0]))?,
                    _ => from_raw(name, &t.raw_data, n, i32::from_le_bytes)?,
                }
            } else {
                check_len(name, n, t.int32_data.len(), "int32_data values")?;
                t.int32_data.clone()
            };
            match dtype {
                DType::I8 => Tensor::I8(
                    ArrayD::from_shape_vec(s, v.iter().map(|&x| x as i8).collect()).map_err(mk)?,
                ),
                DType::U8 => Tensor::U8(
                    ArrayD::from_shape_vec(s, v.iter().map(|&x| x as u8).collect()).map_err(mk)?,
                ),
                _ => Tensor::I32(ArrayD::from_shape_vec(s, v).map_err(mk)?),
            }
        }
        DType::I64 => {
            let v = if raw {
                from_raw(name, &t.raw_data, n, i64::from_le_bytes)?
            } else {
                check_len(name, n, t.int64_data.len(), "int64_data values")?;
                t.int64_data.clone()
            };
            Tensor::I64(ArrayD::from_shape_vec(s, v).map_err(mk)?)
        }
    })
}

/// Converts a [`Tensor`] to a `TensorProto` with raw data (for writing test data).
pub fn tensor_to_proto(name: &str, t: &Tensor) -> TensorProto {
    let mut raw = Vec::new();
    match t {
        Tensor::F32(a) => a
            .iter()
            .for_each(|v| raw.extend_from_slice(&v.to_le_bytes())),
        Tensor::I8(a) => a.iter().for_each(|v| raw.push(*v as u8)),
        Tensor::U8(a) => raw.extend(a.iter()),
        Tensor::I32(a) => a
            .iter()
            .for_each(|v| raw.extend_from_slice(&v.to_le_bytes())),
        Tensor::I64(a) => a
            .iter()
            .for_each(|v| raw.extend_from_slice(&v.to_le_bytes())),
    }
    TensorProto {
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: t.dtype().onnx_code(),
        name: name.to_string(),
        raw_data: raw,
        ..Default::default()
    }
}

/// ONNX's data type codes of the IR's element types.
pub trait OnnxDType: Sized {
    /// The ONNX `TensorProto.DataType` code.
    fn onnx_code(self) -> i32;
    /// The type of an ONNX data type code, or its ONNX name if the IR has no such type.
    fn from_onnx(code: i32) -> Result<Self, String>;
}

impl OnnxDType for DType {
    fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => data_type::FLOAT,
            DType::I8 => data_type::INT8,
            DType::U8 => data_type::UINT8,
            DType::I32 => data_type::INT32,
            DType::I64 => data_type::INT64,
        }
    }

    fn from_onnx(code: i32) -> Result<DType, String> {
        Ok(match code {
            data_type::FLOAT => DType::F32,
            data_type::INT8 => DType::I8,
            data_type::UINT8 => DType::U8,
            data_type::INT32 => DType::I32,
            data_type::INT64 => DType::I64,
            other => return Err(data_type::name(other)),
        })
    }
}
