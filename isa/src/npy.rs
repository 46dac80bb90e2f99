//! A minimal reader and writer for NumPy's `.npy` format (versions 1.0, 2.0 and 3.0), for the
//! plain little-endian integer and float arrays the toolkit exchanges with the host.
//!
//! A file is the magic `\x93NUMPY`, a major and minor version byte, the header length (a
//! little-endian `u16` in version 1.0, `u32` in 2.0 and 3.0), the header (a Python dict literal
//! with exactly the keys `descr`, `fortran_order` and `shape`, padded with spaces and ended by
//! a newline) and then the raw data. Only C-order arrays of the types in [`Elem`] are
//! supported; everything else is refused with an error that says what was found.
//!
//! [`encode`] writes version 1.0 (2.0 only if the header would not fit) exactly as NumPy's
//! `np.save` does, including the spare header space NumPy leaves for growing the first axis,
//! so that the data starts at a multiple of 64 bytes.

use std::fmt;
use std::path::Path;

use crate::program::DType;

/// Element types this module reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    F32,
    F64,
}

impl Elem {
    pub const ALL: [Elem; 9] = [
        Elem::I8,
        Elem::U8,
        Elem::I16,
        Elem::U16,
        Elem::I32,
        Elem::U32,
        Elem::I64,
        Elem::F32,
        Elem::F64,
    ];

    /// The `descr` NumPy writes for this type.
    pub fn descr(self) -> &'static str {
        match self {
            Elem::I8 => "|i1",
            Elem::U8 => "|u1",
            Elem::I16 => "<i2",
            Elem::U16 => "<u2",
            Elem::I32 => "<i4",
            Elem::U32 => "<u4",
            Elem::I64 => "<i8",
            Elem::F32 => "<f4",
            Elem::F64 => "<f8",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Elem::I8 | Elem::U8 => 1,
            Elem::I16 | Elem::U16 => 2,
            Elem::I32 | Elem::U32 | Elem::F32 => 4,
            Elem::I64 | Elem::F64 => 8,
        }
    }

    /// NumPy's name for the type (`int8`, `float32`, ...), for messages.
    pub fn numpy_name(self) -> &'static str {
        match self {
            Elem::I8 => "int8",
            Elem::U8 => "uint8",
            Elem::I16 => "int16",
            Elem::U16 => "uint16",
            Elem::I32 => "int32",
            Elem::U32 => "uint32",
            Elem::I64 => "int64",
            Elem::F32 => "float32",
            Elem::F64 => "float64",
        }
    }

    /// The program element type with the same representation, if there is one.
    pub fn to_dtype(self) -> Option<DType> {
        match self {
            Elem::I8 => Some(DType::I8),
            Elem::U8 => Some(DType::U8),
            Elem::I16 => Some(DType::I16),
            Elem::I32 => Some(DType::I32),
            Elem::U32 => Some(DType::U32),
            Elem::U16 | Elem::I64 | Elem::F32 | Elem::F64 => None,
        }
    }

    /// Parses a `descr`: `<` (little-endian) or, for one-byte types, `|`, `<`, `>` or `=`
    /// followed by the kind and size.
    fn from_descr(descr: &str) -> Result<Elem, NpyError> {
        let unsupported = || NpyError::UnsupportedDescr {
            descr: descr.to_string(),
        };
        let mut chars = descr.chars();
        let order = chars.next().ok_or_else(unsupported)?;
        let rest = chars.as_str();
        let elem = Elem::ALL
            .into_iter()
            .find(|e| &e.descr()[1..] == rest)
            .ok_or_else(unsupported)?;
        match (order, elem.size()) {
            ('<', _) | ('|' | '>' | '=', 1) => Ok(elem),
            ('>', _) => Err(NpyError::BigEndian {
                descr: descr.to_string(),
            }),
            _ => Err(unsupported()),
        }
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ('{}')", self.numpy_name(), self.descr())
    }
}

/// The `.npy` element type that holds a program element type (`uop` words are `uint32`).
pub fn elem_of(dtype: DType) -> Elem {
    match dtype {
        DType::I8 => Elem::I8,
        DType::U8 => Elem::U8,
        DType::I16 => Elem::I16,
        DType::I32 => Elem::I32,
        DType::U32 | DType::Uop => Elem::U32,
    }
}

/// An array read from or to be written to a `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Array {
    pub elem: Elem,
    pub shape: Vec<usize>,
    /// Little-endian elements in C (row-major) order; `product(shape) * elem.size()` bytes.
    pub data: Vec<u8>,
}

impl Array {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a `.npy` file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file: it does not start with the magic bytes \"\\x93NUMPY\"")]
    BadMagic,
    #[error("truncated .npy file: {0}")]
    Truncated(String),
    #[error(".npy format version {major}.{minor} is not supported (only 1.0, 2.0 and 3.0 are)")]
    UnsupportedVersion { major: u8, minor: u8 },
    #[error("malformed .npy header: {problem} (header: {header})")]
    Header { problem: String, header: String },
    #[error(
        "big-endian arrays are not supported (descr '{descr}'); convert with \
         arr.astype(arr.dtype.newbyteorder('<')) before saving"
    )]
    BigEndian { descr: String },
    #[error(
        "unsupported element type descr {descr}; supported: int8 ('|i1'), uint8 ('|u1'), \
         int16 ('<i2'), uint16 ('<u2'), int32 ('<i4'), uint32 ('<u4'), int64 ('<i8'), \
         float32 ('<f4'), float64 ('<f8')"
    )]
    UnsupportedDescr { descr: String },
    #[error("Fortran-order arrays are not supported; save np.ascontiguousarray(arr) instead")]
    FortranOrder,
    #[error("shape {shape:?} has too many elements")]
    ShapeOverflow { shape: Vec<usize> },
    #[error("data is {actual} bytes but shape {shape:?} of {elem} needs {expected} bytes")]
    DataLength {
        elem: Elem,
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    File {
        path: String,
        #[source]
        source: Box<NpyError>,
    },
}

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Data starts at a multiple of this many bytes (NumPy's `ARRAY_ALIGN`).
const ALIGN: usize = 64;
/// Spare header room NumPy leaves for the growth axis (`GROWTH_AXIS_MAX_DIGITS`).
const GROWTH_DIGITS: usize = 21;

fn bytes_for(elem: Elem, shape: &[usize]) -> Result<usize, NpyError> {
    shape
        .iter()
        .try_fold(elem.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| NpyError::ShapeOverflow {
            shape: shape.to_vec(),
        })
}

/// Decodes a `.npy` file held in memory.
pub fn decode(bytes: &[u8]) -> Result<Array, NpyError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(v) => (v[0], v[1]),
        None => {
            return Err(NpyError::Truncated(
                "the file ends inside the version bytes".into(),
            ))
        }
    };
    let len_bytes = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => return Err(NpyError::UnsupportedVersion { major, minor }),
    };
    let len_field = bytes
        .get(8..8 + len_bytes)
        .ok_or_else(|| NpyError::Truncated("the file ends inside the header length".into()))?;
    let header_len = len_field
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    let start = 8 + len_bytes;
    let header_bytes = start
        .checked_add(header_len)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(|| {
            NpyError::Truncated(format!(
                "the header is {header_len} bytes but only {} follow the header length",
                bytes.len() - start
            ))
        })?;
    // Versions 1.0 and 2.0 are latin-1, 3.0 is UTF-8; every valid header is ASCII.
    let header: String = if major == 3 {
        String::from_utf8_lossy(header_bytes).into_owned()
    } else {
        header_bytes.iter().map(|&b| char::from(b)).collect()
    };
    let (descr, fortran, shape) = parse_header(&header).map_err(|problem| NpyError::Header {
        problem,
        header: header.trim_end().to_string(),
    })?;
    let elem = Elem::from_descr(&descr)?;
    if fortran {
        return Err(NpyError::FortranOrder);
    }
    let expected = bytes_for(elem, &shape)?;
    let data = &bytes[start + header_len..];
    if data.len() != expected {
        return Err(NpyError::DataLength {
            elem,
            shape,
            expected,
            actual: data.len(),
        });
    }
    Ok(Array {
        elem,
        shape,
        data: data.to_vec(),
    })
}

/// Reads a `.npy` file; errors name the path.
pub fn read_file(path: &Path) -> Result<Array, NpyError> {
    let bytes = std::fs::read(path).map_err(|source| NpyError::Io {
        path: path.display().to_string(),
        source,
    })?;
    decode(&bytes).map_err(|e| NpyError::File {
        path: path.display().to_string(),
        source: Box::new(e),
    })
}

/// Encodes an array as NumPy's `np.save` would. `data` must hold
/// `product(shape) * elem.size()` bytes (the caller's invariant; it is written as given).
pub fn encode(elem: Elem, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape_repr = match shape {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_repr}, }}",
        elem.descr()
    );
    if let Some(first) = shape.first() {
        let digits = first.to_string().len();
        dict.push_str(&" ".repeat(GROWTH_DIGITS.saturating_sub(digits)));
    }
    // Version 1.0 if the header length fits its u16, else 2.0.
    let (version, len_bytes) = if dict.len() + 1 + ALIGN <= usize::from(u16::MAX) {
        (1u8, 2)
    } else {
        (2u8, 4)
    };
    let unpadded = MAGIC.len() + 2 + len_bytes + dict.len() + 1;
    // As NumPy: 1..=64 spaces, so an already aligned header still gets a full block.
    let pad = ALIGN - unpadded % ALIGN;
    let header_len = dict.len() + pad + 1;
    let mut out = Vec::with_capacity(unpadded + pad + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if len_bytes == 2 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + pad, b' ');
    out.push(b'\n');
    out.extend_from_slice(data);
    out
}

/// Writes an array to a `.npy` file; `data` must match `shape` (checked).
pub fn write_file(path: &Path, elem: Elem, shape: &[usize], data: &[u8]) -> Result<(), NpyError> {
    let expected = bytes_for(elem, shape)?;
    if data.len() != expected {
        return Err(NpyError::DataLength {
            elem,
            shape: shape.to_vec(),
            expected,
            actual: data.len(),
        });
    }
    std::fs::write(path, encode(elem, shape, data)).map_err(|source| NpyError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// A value of the header's Python literal subset.
#[derive(Debug, Clone, PartialEq)]
enum Py {
    Str(String),
    Bool(bool),
    Int(u128),
    None,
    Tuple(Vec<Py>),
    List(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

impl Py {
    fn describe(&self) -> String {
        match self {
            Py::Str(s) => format!("'{s}'"),
            Py::Bool(b) => if *b { "True" } else { "False" }.into(),
            Py::Int(i) => i.to_string(),
            Py::None => "None".into(),
            Py::Tuple(_) => "a tuple".into(),
            Py::List(_) => "a list".into(),
            Py::Dict(_) => "a dict".into(),
        }
    }
}

/// Parses the header dict and returns (descr, fortran order, shape).
fn parse_header(header: &str) -> Result<(String, bool, Vec<usize>), String> {
    let mut p = PyParser {
        s: header.as_bytes(),
        pos: 0,
    };
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != p.s.len() {
        return Err(format!(
            "unexpected text after the header dict at byte {}",
            p.pos
        ));
    }
    let Py::Dict(items) = value else {
        return Err(format!("the header is {}, not a dict", value.describe()));
    };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in items {
        let key = match k {
            Py::Str(s) => s,
            other => return Err(format!("header key {} is not a string", other.describe())),
        };
        let slot = match key.as_str() {
            "descr" => &mut descr,
            "fortran_order" => &mut fortran,
            "shape" => &mut shape,
            _ => return Err(format!("unexpected key '{key}'")),
        };
        if slot.replace(v).is_some() {
            return Err(format!("key '{key}' appears twice"));
        }
    }
    let descr = match descr {
        Some(Py::Str(s)) => s,
        Some(Py::List(_)) => {
            return Err("structured dtypes (a list descr) are not supported".into())
        }
        Some(other) => return Err(format!("descr is {}, not a string", other.describe())),
        None => return Err("missing key 'descr'".into()),
    };
    let fortran = match fortran {
        Some(Py::Bool(b)) => b,
        Some(other) => {
            return Err(format!(
                "fortran_order is {}, not True or False",
                other.describe()
            ))
        }
        None => return Err("missing key 'fortran_order'".into()),
    };
    let shape = match shape {
        Some(Py::Tuple(dims)) => dims
            .into_iter()
            .map(|d| match d {
                Py::Int(n) => usize::try_from(n).map_err(|_| format!("dimension {n} is too large")),
                other => Err(format!(
                    "shape dimension {} is not an integer",
                    other.describe()
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => return Err(format!("shape is {}, not a tuple", other.describe())),
        None => return Err("missing key 'shape'".into()),
    };
    Ok((descr, fortran, shape))
}

struct PyParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl PyParser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Py, String> {
        if depth > 16 {
            return Err("the header nests too deeply".into());
        }
        let at = self.pos;
        match self.peek() {
            None => Err("the header ends where a value was expected".into()),
            Some(q @ (b'\'' | b'"')) => {
                self.pos += 1;
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos] != q {
                    if self.s[self.pos] == b'\\' {
                        return Err("escapes in header strings are not supported".into());
                    }
                    self.pos += 1;
                }
                if self.pos == self.s.len() {
                    return Err(format!("unterminated string starting at byte {at}"));
                }
                let text = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                self.pos += 1;
                Ok(Py::Str(text))
            }
            Some(b'(') => self.seq(b')', depth).map(Py::Tuple),
            Some(b'[') => self.seq(b']', depth).map(Py::List),
            Some(b'{') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(Py::Dict(items));
                    }
                    let k = self.value(depth + 1)?;
                    if self.peek() != Some(b':') {
                        return Err(format!("expected ':' at byte {}", self.pos));
                    }
                    self.pos += 1;
                    let v = self.value(depth + 1)?;
                    items.push((k, v));
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.pos)),
                    }
                }
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                let n = digits
                    .parse::<u128>()
                    .map_err(|_| format!("integer {digits} is too large"))?;
                // Python 2 wrote long integers with an L suffix.
                if matches!(self.s.get(self.pos), Some(b'L' | b'l')) {
                    self.pos += 1;
                }
                Ok(Py::Int(n))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self.pos < self.s.len() && self.s[self.pos].is_ascii_alphanumeric() {
                    self.pos += 1;
                }
                match &self.s[start..self.pos] {
                    b"True" => Ok(Py::Bool(true)),
                    b"False" => Ok(Py::Bool(false)),
                    b"None" => Ok(Py::None),
                    w => Err(format!(
                        "unexpected word '{}' at byte {start}",
                        String::from_utf8_lossy(w)
                    )),
                }
            }
            Some(c) => Err(format!(
                "unexpected character '{}' at byte {}",
                char::from(c).escape_default(),
                self.pos
            )),
        }
    }

    fn seq(&mut self, close: u8, depth: usize) -> Result<Vec<Py>, String> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {}
                _ => {
                    return Err(format!(
                        "expected ',' or '{}' at byte {}",
                        char::from(close),
                        self.pos
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `np.save(f, np.array([[1, -2, 3], [4, 5, -6]], dtype=np.int8))` with NumPy 2.4.
    const NP_I8_2X3: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '|i1', 'fortran_order': False, 'shape': (2, 3), }                                                          \n\x01\xfe\x03\x04\x05\xfa";
    /// `np.array([1, 2, 65535], dtype='<u2')`.
    const NP_U2_3: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }                                                            \n\x01\x00\x02\x00\xff\xff";
    /// `np.array(7, dtype='<i4')`, a 0-d array.
    const NP_I4_SCALAR: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'shape': (), }                                                              \n\x07\x00\x00\x00";
    /// `np.array([1.5, -2.0], dtype='<f4')`.
    const NP_F4_2: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }                                                            \n\x00\x00\xc0?\x00\x00\x00\xc0";
    /// `np.zeros((0, 3), dtype='<i8')`.
    const NP_I8_EMPTY: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (0, 3), }                                                          \n";
    /// `np.array([1, 2], dtype='>i4')`.
    const NP_BIG_ENDIAN: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }                                                            \n\x00\x00\x00\x01\x00\x00\x00\x02";
    /// `np.asfortranarray(np.array([[1, 2], [3, 4]], dtype='<i2'))`.
    const NP_FORTRAN: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2), }                                                           \n\x01\x00\x03\x00\x02\x00\x04\x00";

    #[test]
    fn reads_numpy_files() {
        let a = decode(NP_I8_2X3).unwrap();
        assert_eq!(a.elem, Elem::I8);
        assert_eq!(a.shape, [2, 3]);
        assert_eq!(a.data, [1, 0xfe, 3, 4, 5, 0xfa]);
        assert_eq!(a.elem.to_dtype(), Some(DType::I8));

        let a = decode(NP_U2_3).unwrap();
        assert_eq!((a.elem, a.shape.as_slice()), (Elem::U16, &[3][..]));
        assert_eq!(a.elem.to_dtype(), None);

        let a = decode(NP_I4_SCALAR).unwrap();
        assert_eq!((a.elem, a.shape.len(), a.len()), (Elem::I32, 0, 1));
        assert_eq!(a.data, 7i32.to_le_bytes());

        let a = decode(NP_F4_2).unwrap();
        assert_eq!(a.elem, Elem::F32);
        assert_eq!(a.data[..4], 1.5f32.to_le_bytes());

        let a = decode(NP_I8_EMPTY).unwrap();
        assert_eq!((a.elem, a.shape.as_slice()), (Elem::I64, &[0, 3][..]));
        assert!(a.is_empty() && a.data.is_empty());
    }

    #[test]
    fn writes_exactly_what_numpy_writes() {
        for bytes in [NP_I8_2X3, NP_U2_3, NP_I4_SCALAR, NP_F4_2, NP_I8_EMPTY] {
            let a = decode(bytes).unwrap();
            assert_eq!(encode(a.elem, &a.shape, &a.data), bytes);
        }
    }

    #[test]
    fn data_is_aligned_and_round_trips_for_every_type_and_rank() {
        for elem in Elem::ALL {
            for shape in [
                vec![],
                vec![5],
                vec![3, 1],
                vec![2, 0, 4],
                vec![1; 9],
                vec![123_456_789_012, 0],
            ] {
                let n: usize = shape.iter().product();
                let data: Vec<u8> = (0..n * elem.size()).map(|i| i as u8).collect();
                let bytes = encode(elem, &shape, &data);
                assert_eq!((bytes.len() - data.len()) % 64, 0, "{elem} {shape:?}");
                let a = decode(&bytes).unwrap();
                assert_eq!((a.elem, a.shape, a.data), (elem, shape, data));
            }
        }
    }

    #[test]
    fn reads_versions_2_and_3_and_other_spellings() {
        let header = "{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<i2\"}\n";
        for major in [2u8, 3] {
            let mut b = b"\x93NUMPY".to_vec();
            b.extend([major, 0]);
            b.extend((header.len() as u32).to_le_bytes());
            b.extend(header.as_bytes());
            b.extend([1, 0, 0xff, 0xff]);
            let a = decode(&b).unwrap();
            assert_eq!((a.elem, a.shape.as_slice()), (Elem::I16, &[2][..]));
        }
        // Python 2 long integers, and a byte-order-free one-byte type.
        let header = "{'descr': '<u1', 'fortran_order': False, 'shape': (2L, 1L), }\n";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend((header.len() as u16).to_le_bytes());
        b.extend(header.as_bytes());
        b.extend([9, 8]);
        assert_eq!(decode(&b).unwrap().elem, Elem::U8);
    }

    fn with_header(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        let h = format!("{dict}\n");
        b.extend((h.len() as u16).to_le_bytes());
        b.extend(h.as_bytes());
        b.extend(data);
        b
    }

    fn err(bytes: &[u8]) -> String {
        decode(bytes).unwrap_err().to_string()
    }

    #[test]
    fn refuses_bad_input_with_clear_messages() {
        assert!(err(b"PK\x03\x04 a zip file").contains("magic"));
        assert!(err(b"").contains("magic"));
        assert!(err(b"\x93NUMPY").contains("truncated"));
        assert!(err(b"\x93NUMPY\x04\x00\x10\x00").contains("version 4.0 is not supported"));
        assert!(err(b"\x93NUMPY\x01\x00\x10").contains("truncated"));
        assert!(err(b"\x93NUMPY\x01\x00\xff\x00{'descr'").contains("truncated"));

        let msg = err(NP_BIG_ENDIAN);
        assert!(msg.contains("big-endian") && msg.contains(">i4"), "{msg}");
        let msg = err(NP_FORTRAN);
        assert!(msg.contains("Fortran"), "{msg}");
        let msg = err(&with_header(
            "{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }",
            &[0; 16],
        ));
        assert!(msg.contains("unsupported element type descr <c16"), "{msg}");
        let msg = err(&with_header(
            "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }",
            &[0],
        ));
        assert!(msg.contains("|b1"), "{msg}");
        let msg = err(&with_header(
            "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }",
            &[0; 4],
        ));
        assert!(msg.contains("structured"), "{msg}");
        let msg = err(&with_header("{'descr': '<i4', 'shape': (1,), }", &[0; 4]));
        assert!(msg.contains("missing key 'fortran_order'"), "{msg}");
        let msg = err(&with_header(
            "{'descr': '<i4', 'fortran_order': False, 'shape': [1], }",
            &[0; 4],
        ));
        assert!(msg.contains("shape is a list"), "{msg}");
        let msg = err(&with_header(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            &[0; 4],
        ));
        assert!(msg.contains("unexpected key 'x'"), "{msg}");
        let msg = err(&with_header("{'descr': '<i4', 'fortran_order': Fals", &[]));
        assert!(msg.contains("malformed .npy header"), "{msg}");
        let msg = err(&with_header(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
            &[],
        ));
        assert!(msg.contains("too"), "{msg}");
        let msg = err(&with_header(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            &[],
        ));
        assert!(msg.contains("too many elements"), "{msg}");

        let mut short = NP_I8_2X3.to_vec();
        short.pop();
        let msg = err(&short);
        assert!(
            msg.contains("data is 5 bytes") && msg.contains("needs 6"),
            "{msg}"
        );
        let mut long = NP_I8_2X3.to_vec();
        long.push(0);
        assert!(err(&long).contains("data is 7 bytes"));
    }

    #[test]
    fn truncations_and_garbage_never_panic() {
        for n in 0..NP_I8_2X3.len() {
            assert!(decode(&NP_I8_2X3[..n]).is_err());
        }
        let mut b = NP_U2_3.to_vec();
        for i in 8..b.len() {
            for v in [0u8, b'(', b'\'', b'{', 0xff] {
                let old = b[i];
                b[i] = v;
                let _ = decode(&b);
                b[i] = old;
            }
        }
    }

    #[test]
    fn files_round_trip_and_errors_name_the_path() {
        let dir = std::env::temp_dir().join(format!("isa-npy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.npy");
        write_file(&path, Elem::I32, &[2], &[1, 0, 0, 0, 2, 0, 0, 0]).unwrap();
        let a = read_file(&path).unwrap();
        assert_eq!((a.elem, a.shape), (Elem::I32, vec![2]));

        let msg = write_file(&path, Elem::I32, &[2], &[0; 7])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("needs 8 bytes"), "{msg}");

        std::fs::write(&path, b"garbage").unwrap();
        let msg = read_file(&path).unwrap_err().to_string();
        assert!(msg.contains("a.npy") && msg.contains("magic"), "{msg}");
        let missing = dir.join("missing.npy");
        let msg = read_file(&missing).unwrap_err().to_string();
        assert!(msg.contains("missing.npy"), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dtype_mapping() {
        for d in DType::ALL {
            let e = elem_of(d);
            assert_eq!(e.size(), d.size());
            if d != DType::Uop {
                assert_eq!(e.to_dtype(), Some(d));
            }
        }
        assert_eq!(elem_of(DType::Uop), Elem::U32);
    }
}
