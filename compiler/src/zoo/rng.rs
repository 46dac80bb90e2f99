//! Uniform and normal draws from the toolkit's seeded generator ([`isa::rng::Rng`]):
//! deterministic on every platform, so a seed names one set of weights.

/// [`isa::rng::Rng`] with Box-Muller normals.
#[derive(Debug, Clone)]
pub struct Rng {
    bits: isa::rng::Rng,
    /// The second value of the last Box-Muller pair.
    spare: Option<f32>,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng {
            bits: isa::rng::Rng::new(seed),
            spare: None,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.bits.next_u64()
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit() as f32
    }

    /// Standard normal (Box-Muller, computed in f64).
    pub fn normal(&mut self) -> f32 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        let r = (-2.0 * u1.ln()).sqrt();
        let t = std::f64::consts::TAU * u2;
        self.spare = Some((r * t.sin()) as f32);
        (r * t.cos()) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normals_have_unit_variance_and_are_reproducible() {
        let mut a = Rng::new(7);
        let v: Vec<f32> = (0..20000).map(|_| a.normal()).collect();
        let mean = v.iter().sum::<f32>() / v.len() as f32;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / v.len() as f32;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "{mean} {var}"
        );
        let mut b = Rng::new(7);
        assert!(v.iter().take(100).all(|&x| x == b.normal()));
    }
}
