//! Constant bit vectors of any width: the values of literals and register reset values.
//!
//! A [`Bits`] is a little-endian vector of 64-bit words, always masked to its width, so two
//! equal values compare equal and hash the same.

use std::fmt;

/// A constant of `width` bits (1 or more), stored little-endian in 64-bit words.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Bits {
    width: u32,
    words: Vec<u64>,
}

fn word_count(width: u32) -> usize {
    width.div_ceil(64) as usize
}

impl Bits {
    /// All-zero constant of `width` bits.
    pub fn zero(width: u32) -> Bits {
        Bits {
            width,
            words: vec![0; word_count(width)],
        }
    }

    /// All-ones constant of `width` bits.
    pub fn ones(width: u32) -> Bits {
        let mut b = Bits {
            width,
            words: vec![u64::MAX; word_count(width)],
        };
        b.mask();
        b
    }

    /// `value` as an unsigned constant of `width` bits, or `None` if it does not fit.
    pub fn from_u64(value: u64, width: u32) -> Option<Bits> {
        if width < 64 && value >> width != 0 {
            return None;
        }
        let mut b = Bits::zero(width);
        b.words[0] = value;
        Some(b)
    }

    /// `value` as a constant of `width` bits: two's complement when `signed`, so a negative
    /// value is sign-extended. `None` if the value does not fit the range of that type.
    pub fn from_i128(value: i128, width: u32, signed: bool) -> Option<Bits> {
        let fits = if signed {
            if width >= 128 {
                true
            } else {
                let min = -(1i128 << (width - 1));
                let max = (1i128 << (width - 1)) - 1;
                (min..=max).contains(&value)
            }
        } else if value < 0 {
            false
        } else {
            width >= 127 || value >> width == 0
        };
        if !fits {
            return None;
        }
        let fill = if value < 0 { u64::MAX } else { 0 };
        let mut b = Bits {
            width,
            words: vec![fill; word_count(width)],
        };
        b.words[0] = value as u64;
        if b.words.len() > 1 {
            b.words[1] = (value >> 64) as u64;
        }
        b.mask();
        Some(b)
    }

    /// A constant from little-endian 64-bit words; bits above `width` must be zero.
    pub fn from_words(words: &[u64], width: u32) -> Option<Bits> {
        let mut b = Bits::zero(width);
        for (i, &w) in words.iter().enumerate() {
            if i < b.words.len() {
                b.words[i] = w;
            } else if w != 0 {
                return None;
            }
        }
        let before = b.words.clone();
        b.mask();
        (b.words == before).then_some(b)
    }

    fn mask(&mut self) {
        let rem = self.width % 64;
        if rem != 0 {
            let last = self.words.len() - 1;
            self.words[last] &= (1u64 << rem) - 1;
        }
    }

    /// Width in bits.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Little-endian 64-bit words (bits above the width are zero).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The value of bit `i`.
    pub fn bit(&self, i: u32) -> bool {
        self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    fn set_bit(&mut self, i: u32, v: bool) {
        let w = &mut self.words[(i / 64) as usize];
        if v {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// Bits `lo .. lo + width`.
    pub fn slice(&self, lo: u32, width: u32) -> Bits {
        let mut b = Bits::zero(width);
        for i in 0..width {
            b.set_bit(i, self.bit(lo + i));
        }
        b
    }

    /// Concatenation, most significant part first (as in Verilog).
    pub fn concat(parts: &[&Bits]) -> Bits {
        let width = parts.iter().map(|p| p.width).sum();
        let mut b = Bits::zero(width);
        let mut pos = width;
        for p in parts {
            pos -= p.width;
            for i in 0..p.width {
                b.set_bit(pos + i, p.bit(i));
            }
        }
        b
    }

    /// True if every bit is zero.
    pub fn is_zero(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// True if every bit is one.
    pub fn is_ones(&self) -> bool {
        *self == Bits::ones(self.width)
    }

    /// The value if it fits in 64 bits.
    pub fn to_u64(&self) -> Option<u64> {
        self.words[1..]
            .iter()
            .all(|&w| w == 0)
            .then_some(self.words[0])
    }

    /// Verilog literal: `1'b0`, `8'd5` for small values, `8'hff` and `32'h0000_1000` otherwise.
    pub fn verilog(&self) -> String {
        if self.width == 1 {
            return format!("1'b{}", self.words[0]);
        }
        if let Some(v) = self.to_u64() {
            // All-ones masks read better in hex.
            if v < 1024 && !(self.width >= 4 && self.is_ones()) {
                return format!("{}'d{}", self.width, v);
            }
        }
        let digits = self.width.div_ceil(4);
        let mut s = String::new();
        for d in (0..digits).rev() {
            let lo = d * 4;
            let w = 4.min(self.width - lo);
            let nibble = self.slice(lo, w).words[0];
            s.push(char::from_digit(nibble as u32, 16).unwrap());
            if d % 4 == 0 && d != 0 {
                s.push('_');
            }
        }
        format!("{}'h{}", self.width, s)
    }
}

/// Arithmetic on constants (used to fold operations whose operands are all constant). All
/// operations wrap to the width of the result, like the hardware.
impl Bits {
    fn from_vec(mut words: Vec<u64>, width: u32) -> Bits {
        words.resize(word_count(width), 0);
        let mut b = Bits { width, words };
        b.mask();
        b
    }

    /// This value zero- or sign-extended (or truncated) to `width` bits.
    pub fn resized(&self, width: u32, signed: bool) -> Bits {
        let mut b = Bits::zero(width);
        for i in 0..width {
            let v = if i < self.width {
                self.bit(i)
            } else {
                signed && self.bit(self.width - 1)
            };
            b.set_bit(i, v);
        }
        b
    }

    /// Bitwise NOT.
    pub fn not(&self) -> Bits {
        Bits::from_vec(self.words.iter().map(|w| !w).collect(), self.width)
    }

    /// Bitwise AND, OR or XOR of equal-width values (`op` is `&`, `|` or `^`).
    pub fn bitwise(&self, other: &Bits, op: char) -> Bits {
        let words = self
            .words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| match op {
                '&' => a & b,
                '|' => a | b,
                _ => a ^ b,
            })
            .collect();
        Bits::from_vec(words, self.width)
    }

    /// Wrapping sum of equal-width values.
    pub fn add(&self, other: &Bits) -> Bits {
        let mut carry = 0u128;
        let words = self
            .words
            .iter()
            .zip(&other.words)
            .map(|(&a, &b)| {
                let s = a as u128 + b as u128 + carry;
                carry = s >> 64;
                s as u64
            })
            .collect();
        Bits::from_vec(words, self.width)
    }

    /// Wrapping two's complement negation.
    pub fn neg(&self) -> Bits {
        self.not()
            .add(&Bits::from_u64(1, self.width).unwrap_or_else(|| Bits::ones(1)))
    }

    /// Wrapping difference of equal-width values.
    pub fn sub(&self, other: &Bits) -> Bits {
        self.add(&other.neg())
    }

    /// The full product (`self.width() + other.width()` bits), signed or unsigned.
    pub fn mul(&self, other: &Bits, signed: bool) -> Bits {
        let w = self.width + other.width;
        let (a, b) = (self.resized(w, signed), other.resized(w, signed));
        let n = a.words.len();
        let mut out = vec![0u64; n];
        for i in 0..n {
            let mut carry = 0u128;
            for j in 0..n - i {
                let cur = out[i + j] as u128 + a.words[i] as u128 * b.words[j] as u128 + carry;
                out[i + j] = cur as u64;
                carry = cur >> 64;
            }
        }
        Bits::from_vec(out, w)
    }

    /// Compares equal-width values.
    pub fn cmp_to(&self, other: &Bits, signed: bool) -> std::cmp::Ordering {
        if signed {
            let (sa, sb) = (self.bit(self.width - 1), other.bit(other.width - 1));
            if sa != sb {
                return if sa {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Greater
                };
            }
        }
        self.words.iter().rev().cmp(other.words.iter().rev())
    }

    /// Shift left by `k` (keeps the width).
    pub fn shl(&self, k: u64) -> Bits {
        let mut b = Bits::zero(self.width);
        for i in 0..self.width {
            if (i as u64) >= k {
                b.set_bit(i, self.bit(i - k as u32));
            }
        }
        b
    }

    /// Shift right by `k`, filling with the sign bit when `arithmetic`.
    pub fn shr(&self, k: u64, arithmetic: bool) -> Bits {
        let fill = arithmetic && self.bit(self.width - 1);
        let mut b = Bits::zero(self.width);
        for i in 0..self.width {
            let src = i as u64 + k;
            b.set_bit(
                i,
                if src < self.width as u64 {
                    self.bit(src as u32)
                } else {
                    fill
                },
            );
        }
        b
    }

    /// The value as an unsigned shift amount (saturating).
    pub fn to_amount(&self) -> u64 {
        self.to_u64().unwrap_or(u64::MAX)
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }
}

impl fmt::Debug for Bits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.verilog())
    }
}

impl fmt::Display for Bits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.verilog())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(Bits::from_u64(5, 8).unwrap().verilog(), "8'd5");
        assert_eq!(Bits::from_u64(1, 1).unwrap().verilog(), "1'b1");
        assert_eq!(
            Bits::from_u64(0x1000, 32).unwrap().verilog(),
            "32'h0000_1000"
        );
        assert_eq!(Bits::from_u64(0xabc, 12).unwrap().verilog(), "12'habc");
        assert_eq!(Bits::from_u64(0x2bc, 10).unwrap().verilog(), "10'd700");
        assert_eq!(Bits::from_u64(0x3bc, 10).unwrap().verilog(), "10'd956");
        assert_eq!(Bits::from_u64(0x12345, 17).unwrap().verilog(), "17'h1_2345");
        assert!(Bits::from_u64(256, 8).is_none());
        assert_eq!(Bits::from_i128(-1, 8, true).unwrap().verilog(), "8'hff");
        assert!(Bits::from_i128(-129, 8, true).is_none());
        assert!(Bits::from_i128(128, 8, true).is_none());
        assert!(Bits::from_i128(-1, 8, false).is_none());
        assert_eq!(
            Bits::from_i128(-2, 130, true).unwrap().words(),
            &[u64::MAX - 1, u64::MAX, 3]
        );
        assert_eq!(Bits::ones(70).words(), &[u64::MAX, 0x3f]);
    }

    #[test]
    fn arithmetic() {
        let b = |v: i128, w: u32| Bits::from_i128(v, w, v < 0).unwrap();
        assert_eq!(b(200, 8).add(&b(100, 8)), b(44, 8));
        assert_eq!(b(10, 5).neg(), b(22, 5));
        assert_eq!(b(3, 8).sub(&b(5, 8)), b(254, 8));
        assert_eq!(b(-3, 4).mul(&b(5, 4), true), b(-15, 8));
        assert_eq!(b(13, 4).mul(&b(5, 4), false), b(65, 8));
        let big = Bits::ones(130);
        assert_eq!(
            big.mul(&big, false).slice(0, 130),
            Bits::from_u64(1, 130).unwrap()
        );
        assert_eq!(big.add(&Bits::from_u64(1, 130).unwrap()), Bits::zero(130));
        assert_eq!(b(-1, 8).cmp_to(&b(1, 8), true), std::cmp::Ordering::Less);
        assert_eq!(
            b(255, 8).cmp_to(&b(1, 8), false),
            std::cmp::Ordering::Greater
        );
        assert_eq!(b(0b1001, 4).shl(1), b(0b0010, 4));
        assert_eq!(b(-8, 4).shr(2, true), b(-2, 4));
        assert_eq!(b(8, 4).shr(2, false), b(2, 4));
        assert_eq!(b(5, 3).resized(6, true), b(-3, 6));
    }

    #[test]
    fn slice_concat() {
        let a = Bits::from_u64(0xab, 8).unwrap();
        let b = Bits::from_u64(0xc, 4).unwrap();
        let c = Bits::concat(&[&a, &b]);
        assert_eq!(c.to_u64(), Some(0xabc));
        assert_eq!(c.slice(4, 8).to_u64(), Some(0xab));
        assert_eq!(c.slice(0, 8).to_u64(), Some(0xbc));
        assert!(Bits::from_words(&[1, 1], 64).is_none());
        assert!(Bits::from_words(&[1, 1], 65).is_some());
    }
}
