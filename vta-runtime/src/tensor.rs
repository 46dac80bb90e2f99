//! Element types, static shapes ("facts") and tensor values of the graph IR.

use std::fmt;

use ndarray::{ArrayD, IxDyn};

/// Element types the graph IR computes with.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    I8,
    U8,
    I32,
    I64,
}

impl DType {
    /// ONNX's name (`float`, `int8`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::I64 => "int64",
        }
    }

    pub fn is_float(self) -> bool {
        self == DType::F32
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is statically known about a tensor: its element type and its (fully static) shape.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fact {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl Fact {
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>) -> Fact {
        Fact {
            dtype,
            shape: shape.into(),
        }
    }

    /// The shape as accelerator programs see it, NCHW: rank 2 to 4, missing trailing
    /// dimensions 1.
    pub fn nchw(&self) -> Result<[usize; 4], String> {
        let s = &self.shape;
        if !(2..=4).contains(&s.len()) {
            return Err(format!("a rank-{} tensor {self}", s.len()));
        }
        let mut v = [1; 4];
        v[..s.len()].copy_from_slice(s);
        Ok(v)
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:?}", self.dtype, self.shape)
    }
}

/// A tensor value.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub enum Tensor {
    F32(ArrayD<f32>),
    I8(ArrayD<i8>),
    U8(ArrayD<u8>),
    I32(ArrayD<i32>),
    I64(ArrayD<i64>),
}

/// Applies an expression to the array inside any tensor variant.
macro_rules! dispatch {
    ($t:expr, $a:ident => $e:expr) => {
        match $t {
            Tensor::F32($a) => $e,
            Tensor::I8($a) => $e,
            Tensor::U8($a) => $e,
            Tensor::I32($a) => $e,
            Tensor::I64($a) => $e,
        }
    };
}

/// Applies an array-to-array expression to any tensor variant, keeping the variant.
macro_rules! map_same {
    ($t:expr, $a:ident => $e:expr) => {
        match $t {
            Tensor::F32($a) => Tensor::F32($e),
            Tensor::I8($a) => Tensor::I8($e),
            Tensor::U8($a) => Tensor::U8($e),
            Tensor::I32($a) => Tensor::I32($e),
            Tensor::I64($a) => Tensor::I64($e),
        }
    };
}
pub(crate) use map_same;

impl Tensor {
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::I8(_) => DType::I8,
            Tensor::U8(_) => DType::U8,
            Tensor::I32(_) => DType::I32,
            Tensor::I64(_) => DType::I64,
        }
    }

    pub fn shape(&self) -> &[usize] {
        dispatch!(self, a => a.shape())
    }

    pub fn len(&self) -> usize {
        dispatch!(self, a => a.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn fact(&self) -> Fact {
        Fact::new(self.dtype(), self.shape())
    }

    /// A zero-filled tensor.
    pub fn zeros(fact: &Fact) -> Tensor {
        let s = IxDyn(&fact.shape);
        match fact.dtype {
            DType::F32 => Tensor::F32(ArrayD::zeros(s)),
            DType::I8 => Tensor::I8(ArrayD::zeros(s)),
            DType::U8 => Tensor::U8(ArrayD::zeros(s)),
            DType::I32 => Tensor::I32(ArrayD::zeros(s)),
            DType::I64 => Tensor::I64(ArrayD::zeros(s)),
        }
    }

    /// The same elements in another (row-major) shape with as many elements.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor, String> {
        if shape.iter().product::<usize>() != self.len() {
            return Err(format!(
                "cannot reshape {:?} ({} elements) to {:?}",
                self.shape(),
                self.len(),
                shape
            ));
        }
        Ok(map_same!(self, a => {
            let v: Vec<_> = a.iter().cloned().collect();
            ArrayD::from_shape_vec(IxDyn(shape), v).expect("element count checked")
        }))
    }

    /// Every element converted to f64 (exact for all the IR's types but large int64).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        dispatch!(self, a => a.iter().map(|&v| v as f64).collect())
    }

    /// Every element as i64 (floats truncated toward zero, as ONNX's Cast does).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        match self {
            Tensor::F32(a) => a.iter().map(|&v| v as i64).collect(),
            Tensor::I8(a) => a.iter().map(|&v| i64::from(v)).collect(),
            Tensor::U8(a) => a.iter().map(|&v| i64::from(v)).collect(),
            Tensor::I32(a) => a.iter().map(|&v| i64::from(v)).collect(),
            Tensor::I64(a) => a.iter().cloned().collect(),
        }
    }

    /// The values as f32, for float ops.
    pub fn as_f32(&self) -> Result<&ArrayD<f32>, String> {
        match self {
            Tensor::F32(a) => Ok(a),
            other => Err(format!("expected a float tensor, found {}", other.dtype())),
        }
    }

    /// Integer elements widened to i32 (for int8/uint8/int32 tensors).
    pub fn to_i32_array(&self) -> Result<ArrayD<i32>, String> {
        match self {
            Tensor::I8(a) => Ok(a.mapv(i32::from)),
            Tensor::U8(a) => Ok(a.mapv(i32::from)),
            Tensor::I32(a) => Ok(a.clone()),
            other => Err(format!(
                "expected an int8, uint8 or int32 tensor, found {}",
                other.dtype()
            )),
        }
    }

    /// A scalar or one-element tensor as f32.
    pub fn scalar_f32(&self) -> Result<f32, String> {
        if self.len() != 1 {
            return Err(format!("expected a scalar, found shape {:?}", self.shape()));
        }
        Ok(self.to_f64_vec()[0] as f32)
    }

    /// Element-wise conversion to another type with ONNX `Cast` semantics (float to integer
    /// truncates toward zero then wraps; integer to integer wraps).
    pub fn cast(&self, to: DType) -> Tensor {
        fn conv<T: Copy, U>(a: &ArrayD<T>, f: impl Fn(T) -> U) -> ArrayD<U> {
            a.mapv(f)
        }
        match (self, to) {
            (Tensor::F32(a), DType::F32) => Tensor::F32(a.clone()),
            (Tensor::F32(a), DType::I8) => Tensor::I8(conv(a, |v| v as i64 as i8)),
            (Tensor::F32(a), DType::U8) => Tensor::U8(conv(a, |v| v as i64 as u8)),
            (Tensor::F32(a), DType::I32) => Tensor::I32(conv(a, |v| v as i64 as i32)),
            (Tensor::F32(a), DType::I64) => Tensor::I64(conv(a, |v| v as i64)),
            (t, DType::F32) => {
                let s = t.shape().to_vec();
                let v: Vec<f32> = t.to_i64_vec().into_iter().map(|x| x as f32).collect();
                Tensor::F32(ArrayD::from_shape_vec(IxDyn(&s), v).expect("same shape"))
            }
            (t, to) => {
                let s = IxDyn(t.shape());
                let v = t.to_i64_vec();
                match to {
                    DType::I8 => Tensor::I8(
                        ArrayD::from_shape_vec(s, v.into_iter().map(|x| x as i8).collect())
                            .expect("same shape"),
                    ),
                    DType::U8 => Tensor::U8(
                        ArrayD::from_shape_vec(s, v.into_iter().map(|x| x as u8).collect())
                            .expect("same shape"),
                    ),
                    DType::I32 => Tensor::I32(
                        ArrayD::from_shape_vec(s, v.into_iter().map(|x| x as i32).collect())
                            .expect("same shape"),
                    ),
                    DType::I64 => Tensor::I64(ArrayD::from_shape_vec(s, v).expect("same shape")),
                    DType::F32 => unreachable!("handled above"),
                }
            }
        }
    }
}

impl From<ArrayD<f32>> for Tensor {
    fn from(a: ArrayD<f32>) -> Tensor {
        Tensor::F32(a)
    }
}
impl From<ArrayD<i8>> for Tensor {
    fn from(a: ArrayD<i8>) -> Tensor {
        Tensor::I8(a)
    }
}
impl From<ArrayD<u8>> for Tensor {
    fn from(a: ArrayD<u8>) -> Tensor {
        Tensor::U8(a)
    }
}
impl From<ArrayD<i32>> for Tensor {
    fn from(a: ArrayD<i32>) -> Tensor {
        Tensor::I32(a)
    }
}
impl From<ArrayD<i64>> for Tensor {
    fn from(a: ArrayD<i64>) -> Tensor {
        Tensor::I64(a)
    }
}
