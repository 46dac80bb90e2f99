//! Choosing a [`Requant`] for a real multiplier.
//!
//! A quantized layer computes an int32 accumulator `acc` per output element and must output
//! `round(acc * M[c]) + zero_point` (clamped), where the real multiplier
//! `M[c] = s_x * s_w[c] / s_y` (input, weight and output scales) is typically 1e-4..1e-1.
//! The accelerator can only run [`Requant`]'s integer steps:
//!
//! ```text
//! v = acc >> pre                       (arithmetic shift: floor division by 2^pre)
//! v = v * mul[c]                       (int32, mul is an i16 immediate)
//! v = (v + 2^(shift-1)) >> shift       (round half up)
//! ```
//!
//! so `M[c]` is replaced by `M'[c] = mul[c] / 2^e` with `e = pre + shift`.
//!
//! # Derivation
//!
//! Write `acc = 2^pre * a + f` with `0 <= f < 2^pre`. The accelerator computes the real
//! number `a * mul / 2^shift = (acc - f) * M'` before rounding, so its deviation from the
//! exact `acc * M` is
//!
//! ```text
//! acc * (M' - M) - f * M'    with |.| <= R * |M' - M| / M  +  (2^pre - 1) * M'
//! ```
//!
//! where `R` bounds `|acc * M|` over the accumulators whose result is not clamped anyway
//! (`R = 128 + |zero_point| + 1`: beyond it both sides saturate). The first term is the
//! multiplier's relative precision (about `2^-15` when `mul` uses its 15 bits), the second the
//! bits the pre-shift drops (tiny, because `M` is small). If the deviation is below 1 LSB,
//! the result differs from the exactly rounded one by at most 1 (whatever the tie rule), and
//! only for accumulators whose real result lies within the deviation of a rounding boundary.
//!
//! Constraints: `1 <= mul <= 32767`; `shift <= 16` (30 with a clamp, below); and no int32
//! overflow for any accumulator the layer can produce. The worst case is computed per output channel from the
//! actual integer weights and bias and the input's known range
//! (`acc in [bias + sum min(w*x_lo, w*x_hi), bias + sum max(w*x_lo, w*x_hi)]`, see
//! [`conv_acc_ranges`]); the check is that `floor(acc / 2^pre) * mul + 2^(shift-1)` stays in
//! int32 at both ends of that range (the expression is monotonic in `acc`). Since
//! `floor(acc/2^pre) * mul ≈ acc * M * 2^shift`, overflow forces a smaller `shift` (fewer
//! multiplier bits); `pre` only trades multiplier bits against the dropped low bits.
//!
//! With an accumulator clamp ([`choose_requant_clamped`], [`Requant::acc_clamp`]) the
//! overflow check covers only the clamped range, the accumulators beyond which every output
//! saturates, so `pre` can stay 0 and `mul` keep its 15 bits, with `shift` up to 30.
//!
//! The bound `R` is per channel: `|acc * M[c]|` cannot exceed `max(|lo|, |hi|) * M[c]` over the
//! channel's reachable accumulators either, so a channel with a small multiplier and a small
//! reachable output range tolerates a coarse `mul[c]` (few bits at the shared shift).
//!
//! # Channels with a constant output
//!
//! A channel whose multiplier is so small that its output is the same for every reachable
//! accumulator ([`constant_output`]: an output channel whose weights onnxruntime quantized
//! with a scale of 1e-20, "dead" after training) outputs that constant whatever its
//! multiplier, so it takes no part in choosing `(pre, shift)`; instead its weights become 0
//! and its accumulator the constant bias that the chosen requantization maps to exactly that
//! output ([`choose_requant_with_constants`], verified with [`Requant::apply`]). Otherwise
//! one multiplier of 1e-20 next to 0.1 leaves no shift that fits both in 15 bits.
//!
//! [`choose_requant`] tries every `(pre, shift)` in `0..=23 x 0..=16` and keeps the one with
//! the smallest deviation bound (ties: smaller `pre`). With [`MulRounding::Up`] (post-training
//! quantization, where the weight scales are ours to choose) `mul = ceil(M * 2^e)` and the
//! caller widens each channel's weight scale to make `M'` exact, so the multiplier term
//! becomes a (tiny) loss of weight resolution instead of an error.

use crate::qlayer::Requant;

/// How the multiplier is rounded to an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MulRounding {
    /// `mul = round(M * 2^e)`: `M` is fixed (imported quantized models).
    Nearest,
    /// `mul = ceil(M * 2^e)`: the caller adjusts the weight scale so that `M' = mul / 2^e`
    /// exactly (post-training quantization).
    Up,
}

/// Inclusive range of a channel's int32 accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccRange {
    pub lo: i64,
    pub hi: i64,
}

/// A chosen requantization and its accuracy.
#[derive(Debug, Clone, PartialEq)]
pub struct RequantChoice {
    pub requant: Requant,
    /// `mul[c] / 2^(pre + shift)` per channel.
    pub effective: Vec<f64>,
    /// Largest `|M' - M| / M` over the channels.
    pub mul_rel_error: f64,
    /// Largest `(2^pre - 1) * M'` (output LSBs lost to the pre-shift).
    pub trunc_error: f64,
    /// Bound on the deviation (in output LSBs) from `acc * M` before rounding, for outputs
    /// that are not clamped: `R * mul_rel_error + trunc_error` (for [`MulRounding::Up`],
    /// only `trunc_error`, since the multiplier is exact after the weight-scale adjustment).
    pub deviation: f64,
}

/// Chooses `pre_shift`, `mul` and `shift` for the real multipliers `m` (one, or one per
/// output channel) and the per-channel accumulator ranges (one, or one per channel), with the
/// output `zero_point` and clamp `[lo, hi]`. With `pow2_only` every `mul` must be a power of
/// two (a configuration whose ALU has no multiplier realizes it as a shift).
pub fn choose_requant(
    m: &[f64],
    ranges: &[AccRange],
    rounding: MulRounding,
    pow2_only: bool,
    zero_point: i8,
    lo: i8,
    hi: i8,
) -> Result<RequantChoice, String> {
    choose(
        m,
        ranges,
        &[],
        rounding,
        pow2_only,
        zero_point,
        lo,
        hi,
        false,
    )
    .map(|(c, _)| c)
}

/// [`choose_requant`] with an accumulator clamp ([`Requant::acc_clamp`]): the pre-shifted
/// accumulator is clamped to `±B`, the smallest bound beyond which every output saturates
/// (`B * mul[c] / 2^shift >= 131 + |zero_point|` for every channel), so the overflow check
/// covers only `[-B, B]` instead of the worst-case accumulator, and the multiplier keeps all
/// its bits without a pre-shift (`shift` up to 30: the rounding constant then comes from a
/// splat row). The clamp is left out when the accumulator range lies within `±B` anyway.
pub fn choose_requant_clamped(
    m: &[f64],
    ranges: &[AccRange],
    rounding: MulRounding,
    pow2_only: bool,
    zero_point: i8,
    lo: i8,
    hi: i8,
) -> Result<RequantChoice, String> {
    choose(
        m,
        ranges,
        &[],
        rounding,
        pow2_only,
        zero_point,
        lo,
        hi,
        true,
    )
    .map(|(c, _)| c)
}

/// A channel whose weights are replaced by zeros and whose bias by `acc`, which the chosen
/// requantization maps to the channel's constant output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantChannel {
    pub channel: usize,
    pub acc: i32,
}

/// [`choose_requant`] (or, with `clamp`, [`choose_requant_clamped`]) with
/// [`MulRounding::Nearest`] for a layer whose channels `c` with `constants[c] = Some(k)`
/// output `k` for every reachable accumulator (see [`constant_output`]): those channels are
/// left out of the choice, and each gets a multiplier and an accumulator value that the
/// chosen `(pre, shift)` requantizes to `k` exactly. The caller zeroes their weights and
/// sets their bias to [`ConstantChannel::acc`].
#[allow(clippy::too_many_arguments)]
pub fn choose_requant_with_constants(
    m: &[f64],
    ranges: &[AccRange],
    constants: &[Option<i8>],
    pow2_only: bool,
    zero_point: i8,
    lo: i8,
    hi: i8,
    clamp: bool,
) -> Result<(RequantChoice, Vec<ConstantChannel>), String> {
    choose(
        m,
        ranges,
        constants,
        MulRounding::Nearest,
        pow2_only,
        zero_point,
        lo,
        hi,
        clamp,
    )
}

/// The output of a channel with real multiplier `m` if it is the same for every accumulator
/// in `range`, both as the exact real `clamp(round(acc * m) + zero_point, lo, hi)` and as
/// ONNX computes it with the f32 multiplier `m_onnx` (`round_half_even(f32(acc) * m_onnx)`,
/// as `QLinearConv` does); `None` when either varies over the range or they differ. Both
/// are monotonic in `acc`, so the two ends of the range decide.
pub fn constant_output(
    range: AccRange,
    m: f64,
    m_onnx: f32,
    zero_point: i8,
    lo: i8,
    hi: i8,
) -> Option<i8> {
    let i32_range = i64::from(i32::MIN)..=i64::from(i32::MAX);
    if !(i32_range.contains(&range.lo) && i32_range.contains(&range.hi)) || range.lo > range.hi {
        return None;
    }
    let (zp, lo, hi) = (f64::from(zero_point), f64::from(lo), f64::from(hi));
    let real = |a: i64| (((a as f64) * m).round_ties_even() + zp).clamp(lo, hi);
    let onnx =
        |a: i64| (f64::from(((a as i32) as f32 * m_onnx).round_ties_even()) + zp).clamp(lo, hi);
    let v = real(range.lo);
    (real(range.hi) == v && onnx(range.lo) == v && onnx(range.hi) == v).then_some(v as i8)
}

/// A multiplier and accumulator that `r` (its `mul` ignored) requantizes to `k`: the
/// accumulator `t * 2^shift / mul` (`t = k - zero_point`) shifted up by `pre_shift`, with
/// `mul` a power of two (exact) or, with an ALU multiplier, 32767 (the smallest accumulator,
/// which an accumulator clamp keeps). Checked with [`Requant::apply`] and for int32 overflow.
fn realize_constant(r: &Requant, k: i8, pow2_only: bool) -> Option<(i64, i32)> {
    let t = i64::from(k) - i64::from(r.zero_point);
    let s = u32::from(r.shift);
    let mut candidates: Vec<(i64, i64)> = (0..=s.min(14))
        .rev()
        .map(|a| (1i64 << a, t << (s - a)))
        .collect();
    if !pow2_only && s >= 15 {
        let mu = 32767i64;
        candidates.push((mu, ((t << s) as f64 / mu as f64).round() as i64));
    }
    let rnd = if s > 0 { 1i64 << (s - 1) } else { 0 };
    let i32_range = i64::from(i32::MIN)..=i64::from(i32::MAX);
    candidates.into_iter().find_map(|(mu, v)| {
        let acc = v.checked_shl(u32::from(r.pre_shift))?;
        let clamped = r
            .acc_clamp
            .map_or(v, |(a, b)| v.clamp(i64::from(a), i64::from(b)));
        let fits = i32_range.contains(&acc) && i32_range.contains(&(clamped * mu + rnd));
        let acc = i32::try_from(acc).ok()?;
        let one = Requant {
            mul: vec![mu as i16],
            ..r.clone()
        };
        (fits && (acc >> r.pre_shift) == v as i32 && one.apply(acc, 0) == k).then_some((mu, acc))
    })
}

#[allow(clippy::too_many_arguments)]
fn choose(
    m: &[f64],
    ranges: &[AccRange],
    constants: &[Option<i8>],
    rounding: MulRounding,
    pow2_only: bool,
    zero_point: i8,
    lo: i8,
    hi: i8,
    clamp: bool,
) -> Result<(RequantChoice, Vec<ConstantChannel>), String> {
    if m.is_empty() || ranges.is_empty() {
        return Err("no multiplier".into());
    }
    if let Some(bad) = m.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(format!(
            "requantization multiplier {bad} is not a positive number"
        ));
    }
    let r = 129.0 + f64::from(zero_point).abs();
    let channels = m.len().max(ranges.len()).max(constants.len());
    let per = |n: usize, c: usize| if n == 1 { 0 } else { c };
    let m_of = |c: usize| m[per(m.len(), c)];
    let range_of = |c: usize| ranges[per(ranges.len(), c)];
    let constant_of = |c: usize| constants.get(c).copied().flatten();
    // One multiplier for all channels when the real multiplier is shared and no channel is
    // constant; otherwise one per channel.
    let per_channel = m.len() > 1 || constants.iter().any(Option::is_some);
    let live: Vec<usize> = (0..channels)
        .filter(|&c| constant_of(c).is_none())
        .collect();
    // The largest |acc * M| that matters per channel (see the module documentation).
    let reach = |c: usize| match rounding {
        MulRounding::Nearest => {
            let rg = range_of(c);
            let a = rg.lo.unsigned_abs().max(rg.hi.unsigned_abs()) as f64;
            (a * m_of(c)).min(r)
        }
        MulRounding::Up => r,
    };
    let mut best: Option<(f64, RequantChoice, Vec<ConstantChannel>)> = None;
    let mut why = String::from("no shift combination fits");
    let max_shift = if clamp { 30 } else { 16 };
    for pre in 0u8..=23 {
        for shift in (0u8..=max_shift).rev() {
            let e = i32::from(pre) + i32::from(shift);
            let scale = 2f64.powi(e);
            let mut muls = vec![0i64; if per_channel { channels } else { 1 }];
            let mut ok = true;
            for (c, slot) in muls.iter_mut().enumerate() {
                if constant_of(c).is_some() {
                    continue;
                }
                let mc = m_of(c);
                let x = mc * scale;
                let mut mu = match rounding {
                    MulRounding::Nearest => x.round(),
                    MulRounding::Up => x.ceil(),
                };
                if pow2_only {
                    match rounding {
                        MulRounding::Up => mu = (mu.max(1.0) as u64).next_power_of_two() as f64,
                        MulRounding::Nearest => {
                            if mu != x || !(mu as u64).is_power_of_two() {
                                ok = false;
                                why = format!("multiplier {mc} is not a power of two (the config has no ALU multiplier)");
                                break;
                            }
                        }
                    }
                }
                if !(1.0..=32767.0).contains(&mu) {
                    ok = false;
                    break;
                }
                *slot = mu as i64;
            }
            if !ok {
                continue;
            }
            let mul_of = |c: usize| muls[per(muls.len(), c)];
            // The clamp bound: beyond it every channel's output saturates.
            let bound = live
                .iter()
                .map(|&c| {
                    let mu = mul_of(c);
                    (((131 + i64::from(zero_point).abs()) << shift) + mu - 1) / mu
                })
                .max()
                .unwrap_or(0);
            let needed = clamp
                && live.iter().any(|&c| {
                    let rg = range_of(c);
                    (rg.lo >> pre) < -bound || (rg.hi >> pre) > bound
                });
            if needed && bound > i64::from(i32::MAX) {
                continue;
            }
            let clamped = |a: i64| if needed { a.clamp(-bound, bound) } else { a };
            // Overflow check at both ends of every channel's accumulator range.
            let rnd = if shift > 0 { 1i64 << (shift - 1) } else { 0 };
            let fits = live.iter().all(|&c| {
                let mu = mul_of(c);
                let rg = range_of(c);
                [clamped(rg.lo >> pre), clamped(rg.hi >> pre)]
                    .iter()
                    .all(|&a| {
                        let v = a * mu + rnd;
                        a * mu >= i64::from(i32::MIN) && v <= i64::from(i32::MAX)
                    })
                    && rg.lo >= i64::from(i32::MIN)
                    && rg.hi <= i64::from(i32::MAX)
            });
            if !fits {
                why = "the worst-case accumulator would overflow int32 even with the smallest multiplier".into();
                continue;
            }
            let mut requant = Requant {
                pre_shift: pre,
                acc_clamp: needed.then_some((-bound as i32, bound as i32)),
                mul: vec![],
                shift,
                zero_point,
                lo,
                hi,
            };
            let mut constant_channels = Vec::new();
            // (A constant channel makes the multipliers per channel: `muls` has one each.)
            for (c, slot) in muls.iter_mut().enumerate() {
                let Some(k) = constant_of(c) else { continue };
                match realize_constant(&requant, k, pow2_only) {
                    Some((mu, acc)) => {
                        *slot = mu;
                        constant_channels.push(ConstantChannel { channel: c, acc });
                    }
                    None => {
                        ok = false;
                        why = format!(
                            "channel {c}'s constant output {k} is out of reach with shift {shift}"
                        );
                        break;
                    }
                }
            }
            if !ok {
                continue;
            }
            let effective: Vec<f64> = muls.iter().map(|&mu| mu as f64 / scale).collect();
            let rel = |c: usize| (effective[per(effective.len(), c)] - m_of(c)).abs() / m_of(c);
            let mul_rel_error = live.iter().map(|&c| rel(c)).fold(0.0, f64::max);
            let pre_loss = f64::from((1u32 << pre) - 1);
            let trunc_error = live
                .iter()
                .map(|&c| pre_loss * effective[per(effective.len(), c)])
                .fold(0.0, f64::max);
            let cost = live.iter().map(|&c| reach(c) * rel(c)).fold(0.0, f64::max) + trunc_error;
            let deviation = match rounding {
                MulRounding::Nearest => cost,
                MulRounding::Up => trunc_error,
            };
            if best.as_ref().is_none_or(|(c, _, _)| cost < *c) {
                requant.mul = if muls.iter().all(|&v| v == muls[0]) {
                    vec![muls[0] as i16]
                } else {
                    muls.iter().map(|&v| v as i16).collect()
                };
                best = Some((
                    cost,
                    RequantChoice {
                        requant,
                        effective,
                        mul_rel_error,
                        trunc_error,
                        deviation,
                    },
                    constant_channels,
                ));
            }
        }
    }
    best.map(|(_, c, k)| (c, k)).ok_or_else(|| {
        let (mn, mx) = live
            .iter()
            .map(|&c| m_of(c))
            .fold((f64::INFINITY, 0f64), |(a, b), v| (a.min(v), b.max(v)));
        let dead = channels - live.len();
        let except = if dead > 0 {
            format!(" ({dead} channel(s) with a constant output left out)")
        } else {
            String::new()
        };
        format!("no requantization fits multiplier(s) {mn:.3e}..{mx:.3e}{except}: {why}")
    })
}

/// Per-output-channel accumulator ranges of a convolution or dense layer with int8-domain
/// weights `w` (`[O, ...]`, flattened per channel), `bias`, and inputs in `[x_lo, x_hi]`.
pub fn conv_acc_ranges(
    w: &[i32],
    out_channels: usize,
    bias: &[i64],
    x_lo: i32,
    x_hi: i32,
) -> Vec<AccRange> {
    let per = w.len().checked_div(out_channels).unwrap_or(0);
    (0..out_channels)
        .map(|o| {
            let (mut lo, mut hi) = (bias[o], bias[o]);
            for &wv in &w[o * per..(o + 1) * per] {
                let a = i64::from(wv) * i64::from(x_lo);
                let b = i64::from(wv) * i64::from(x_hi);
                // Saturating: a range past i64 is as unrepresentable as one past i32.
                lo = lo.saturating_add(a.min(b));
                hi = hi.saturating_add(a.max(b));
            }
            AccRange { lo, hi }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_power_of_two_multiplier() {
        let c = choose_requant(
            &[0.25],
            &[AccRange {
                lo: -1000,
                hi: 1000,
            }],
            MulRounding::Nearest,
            false,
            0,
            -128,
            127,
        )
        .unwrap();
        assert_eq!(c.mul_rel_error, 0.0);
        assert_eq!(c.requant.pre_shift, 0);
        assert_eq!(c.deviation, 0.0);
        for acc in -1000..1000 {
            let want = ((acc as f64) * 0.25 + 0.5).floor().clamp(-128.0, 127.0) as i8;
            assert_eq!(c.requant.apply(acc, 0), want, "acc {acc}");
        }
    }

    #[test]
    fn small_multiplier_is_precise_and_never_overflows() {
        let m = [0.00123, 0.0031, 0.00077];
        let rg = [AccRange {
            lo: -3_000_000,
            hi: 2_500_000,
        }; 3];
        let c = choose_requant(&m, &rg, MulRounding::Nearest, false, 0, -128, 127).unwrap();
        assert!(c.deviation < 0.2, "{c:?}");
        assert!(c.requant.shift <= 16);
        for (ch, &mc) in m.iter().enumerate() {
            for acc in (-3_000_000..2_500_000).step_by(997) {
                let exact = (acc as f64 * mc).round().clamp(-128.0, 127.0) as i32;
                let got = i32::from(c.requant.apply(acc, ch));
                assert!(
                    (got - exact).abs() <= 1,
                    "ch {ch} acc {acc}: {got} vs {exact}"
                );
                // No wrap-around: compute without wrapping and compare.
                let v = i64::from(acc >> c.requant.pre_shift) * i64::from(c.requant.mul_of(ch));
                assert!(v + (1 << 15) < i64::from(i32::MAX) && v > i64::from(i32::MIN));
            }
        }
    }

    #[test]
    fn large_accumulators_force_a_smaller_shift() {
        let c = choose_requant(
            &[0.5],
            &[AccRange {
                lo: -(1 << 30),
                hi: 1 << 30,
            }],
            MulRounding::Nearest,
            false,
            0,
            -128,
            127,
        )
        .unwrap();
        let r = &c.requant;
        let v = i64::from((1i32 << 30) >> r.pre_shift) * i64::from(r.mul[0]);
        assert!(v + (1i64 << r.shift.saturating_sub(1)) <= i64::from(i32::MAX));
    }

    #[test]
    fn an_accumulator_clamp_keeps_the_multiplier_precise_and_saturates_exactly() {
        // A 3x3x16 convolution's worst-case accumulator with uint8-range inputs.
        let m = [0.0183, 0.0071];
        let rg = [AccRange {
            lo: -4_700_000,
            hi: 4_700_000,
        }; 2];
        let plain = choose_requant(&m, &rg, MulRounding::Nearest, false, -5, -128, 127).unwrap();
        let c =
            choose_requant_clamped(&m, &rg, MulRounding::Nearest, false, -5, -128, 127).unwrap();
        assert!(c.requant.acc_clamp.is_some(), "{c:?}");
        assert!(c.deviation * 4.0 < plain.deviation, "{c:?} vs {plain:?}");
        for (ch, &mc) in m.iter().enumerate() {
            for acc in (-4_700_000..4_700_000).step_by(611) {
                let exact = ((acc as f64 * mc).round() - 5.0).clamp(-128.0, 127.0) as i32;
                let got = i32::from(c.requant.apply(acc, ch));
                assert!(
                    (got - exact).abs() <= 1,
                    "ch {ch} acc {acc}: {got} vs {exact}"
                );
            }
            // The clamp's bound saturates, and nothing inside it overflows.
            let (lo, hi) = c.requant.acc_clamp.unwrap();
            assert_eq!(c.requant.apply(hi, ch), 127);
            assert_eq!(c.requant.apply(lo, ch), -128);
            let v = i64::from(hi) * i64::from(c.requant.mul_of(ch));
            assert!(v + (1 << (c.requant.shift - 1)) <= i64::from(i32::MAX));
        }
        // A range within the bound needs no clamp.
        let small = [AccRange { lo: -100, hi: 100 }];
        let c = choose_requant_clamped(&[0.01], &small, MulRounding::Nearest, false, 0, -128, 127)
            .unwrap();
        assert_eq!(c.requant.acc_clamp, None);
    }

    /// ONNX's output for accumulator `acc` with the f32 multiplier `m` (as `QLinearConv`).
    fn onnx(acc: i64, m: f32, zp: i8, lo: i8, hi: i8) -> i8 {
        ((acc as i32 as f32 * m).round_ties_even() + f32::from(zp))
            .clamp(f32::from(lo), f32::from(hi)) as i8
    }

    /// A dense layer over 8 inputs in `[-128, 127]` with one dead output channel (weights
    /// quantized with scale 1e-20 next to 0.1, as onnxruntime writes a channel that training
    /// killed) and one with a constant output that is not the zero point (a large bias).
    #[test]
    fn dead_channels_are_left_out_and_output_their_constant_exactly() {
        let (x_lo, x_hi) = (-128, 127);
        let w: Vec<i32> = vec![
            12, -127, 40, 3, 99, -7, 0, 64, // live
            127, 127, -127, 127, -127, 127, 127, 127, // dead: tiny scale
            -5, 17, 127, -88, 2, 6, -1, 0, // live
            127, -127, 127, -127, 127, -127, 127, -127, // constant: bias dominates
        ];
        let bias: Vec<i64> = vec![300, 1_000_000, -45, 900_000_000];
        let scales_f32: [f32; 4] = [0.002_1, 1.3e-20, 0.000_77, 1.1e-8];
        let (sx, sy) = (0.031_f32, 0.094_f32);
        let m_onnx: Vec<f32> = scales_f32.iter().map(|&s| sx * s / sy).collect();
        let m: Vec<f64> = scales_f32
            .iter()
            .map(|&s| f64::from(sx) * f64::from(s) / f64::from(sy))
            .collect();
        let (zp, lo, hi) = (-7i8, -128i8, 127i8);
        let ranges = conv_acc_ranges(&w, 4, &bias, x_lo, x_hi);
        let constants: Vec<Option<i8>> = (0..4)
            .map(|c| constant_output(ranges[c], m[c], m_onnx[c], zp, lo, hi))
            .collect();
        assert_eq!(constants[0], None);
        assert_eq!(
            constants[1],
            Some(zp),
            "a dead channel outputs its zero point"
        );
        assert_eq!(constants[2], None);
        let k = constants[3].expect("the bias decides channel 3");
        assert_ne!(k, zp);
        // The multipliers span 1e-22..1e-3: no shared shift fits them all.
        let err = choose_requant_clamped(&m, &ranges, MulRounding::Nearest, false, zp, lo, hi)
            .unwrap_err();
        assert!(err.contains("no requantization fits"), "{err}");
        for clamp in [false, true] {
            let (c, dead) =
                choose_requant_with_constants(&m, &ranges, &constants, false, zp, lo, hi, clamp)
                    .unwrap();
            assert_eq!(
                dead.iter().map(|d| d.channel).collect::<Vec<_>>(),
                vec![1, 3]
            );
            assert!(c.deviation < 0.5, "{c:?}");
            // The layer as the accelerator runs it: dead channels' weights zeroed, their
            // bias replaced.
            let (mut w2, mut b2) = (w.clone(), bias.clone());
            for d in &dead {
                w2[d.channel * 8..(d.channel + 1) * 8].fill(0);
                b2[d.channel] = i64::from(d.acc);
            }
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            for sample in 0..2000 {
                let x: Vec<i64> = (0..8)
                    .map(|i| match sample {
                        0 => i64::from(if w[i] > 0 { x_lo } else { x_hi }),
                        1 => i64::from(if w[i] > 0 { x_hi } else { x_lo }),
                        _ => {
                            // xorshift64: deterministic inputs
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            (state % 256) as i64 - 128
                        }
                    })
                    .collect();
                for ch in 0..4 {
                    let acc = |w: &[i32], b: &[i64]| {
                        (0..8).map(|i| i64::from(w[ch * 8 + i]) * x[i]).sum::<i64>() + b[ch]
                    };
                    let want = onnx(acc(&w, &bias), m_onnx[ch], zp, lo, hi);
                    let got = c.requant.apply(acc(&w2, &b2) as i32, ch);
                    if constants[ch].is_some() {
                        assert_eq!(got, want, "constant channel {ch}, sample {sample}");
                    } else {
                        assert!((i32::from(got) - i32::from(want)).abs() <= 1, "ch {ch}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_constant_far_from_the_zero_point_is_reached_at_any_shift() {
        for (zp, k) in [(0i8, 127i8), (-128, 127), (127, -128), (5, 6), (-3, -3)] {
            for pre in [0u8, 4] {
                for shift in 0u8..=30 {
                    for acc_clamp in [None, Some((-(131 << 14), 131 << 14))] {
                        let r = Requant {
                            pre_shift: pre,
                            acc_clamp,
                            mul: vec![],
                            shift,
                            zero_point: zp,
                            lo: -128,
                            hi: 127,
                        };
                        let t = (i64::from(k) - i64::from(zp)).abs();
                        match realize_constant(&r, k, false) {
                            Some((mu, acc)) => {
                                let r = Requant {
                                    mul: vec![mu as i16],
                                    ..r
                                };
                                assert_eq!(r.apply(acc, 0), k);
                            }
                            // Only when |k - zp| * 2^shift leaves no room in int32.
                            None => assert!(
                                t << shift >= 1 << 30,
                                "zp {zp} k {k} pre {pre} shift {shift} clamp {acc_clamp:?}"
                            ),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_small_channel_that_is_not_constant_is_kept_and_bounded_by_its_own_range() {
        // Channel 1 outputs -2..2: not constant.
        let m = [0.01, 2e-6];
        let rg = [
            AccRange {
                lo: -20_000,
                hi: 20_000,
            },
            AccRange {
                lo: -1_000_000,
                hi: 1_000_000,
            },
        ];
        assert_eq!(
            constant_output(rg[1], m[1], m[1] as f32, 0, -128, 127),
            None
        );
        let (c, dead) =
            choose_requant_with_constants(&m, &rg, &[None, None], false, 0, -128, 127, false)
                .unwrap();
        assert!(dead.is_empty());
        // At the shift channel 0 needs, channel 1's multiplier has ~2 bits: far beyond 1 LSB
        // with the global bound (129 x its relative error), within it over its own range.
        assert!(c.mul_rel_error * 129.0 > 1.0, "{c:?}");
        assert!(c.deviation < 0.99, "{c:?}");
        for (ch, (&mc, r)) in m.iter().zip(&rg).enumerate() {
            for acc in (r.lo..=r.hi).step_by(97) {
                let exact = ((acc as f64 * mc).round_ties_even() as i32).clamp(-128, 127);
                let got = i32::from(c.requant.apply(acc as i32, ch));
                assert!(
                    (got - exact).abs() <= 1,
                    "ch {ch} acc {acc}: {got} vs {exact}"
                );
            }
        }
        // Smaller still, its multiplier rounds to 0 at any shift channel 0 allows: refused.
        let m = [0.05, 3e-7];
        let rg = [
            rg[0],
            AccRange {
                lo: -3_000_000,
                hi: 3_000_000,
            },
        ];
        assert_eq!(
            constant_output(rg[1], m[1], m[1] as f32, 0, -128, 127),
            None
        );
        let err = choose_requant_with_constants(&m, &rg, &[None, None], false, 0, -128, 127, true)
            .unwrap_err();
        assert!(
            err.starts_with("no requantization fits multiplier(s) 3.000e-7..5.000e-2"),
            "{err}"
        );
    }

    #[test]
    fn an_output_near_a_rounding_boundary_is_not_constant() {
        // 1.5 +- 1e-6: exact real ties at the top of the range round up, f32 may not.
        let m = 1e-9;
        let r = AccRange {
            lo: 1_499_999_000,
            hi: 1_500_000_000,
        };
        assert_eq!(constant_output(r, m, m as f32, 0, -128, 127), None);
        let r = AccRange {
            lo: 1_000_000_000,
            hi: 1_400_000_000,
        };
        assert_eq!(constant_output(r, m, m as f32, 0, -128, 127), Some(1));
        // Clamped to the Relu's lower bound over the whole range: constant too.
        let r = AccRange {
            lo: -2_000_000_000,
            hi: 400_000_000,
        };
        assert_eq!(constant_output(r, m, m as f32, -3, -3, 127), Some(-3));
        // A range beyond int32 is not something an accumulator holds.
        let r = AccRange { lo: 0, hi: 1 << 33 };
        assert_eq!(constant_output(r, 1e-12, 1e-12, 0, -128, 127), None);
    }

    #[test]
    fn pow2_only_accepts_only_powers_of_two() {
        let rg = [AccRange { lo: -100, hi: 100 }];
        assert!(choose_requant(&[0.125], &rg, MulRounding::Nearest, true, 0, -128, 127).is_ok());
        assert!(choose_requant(&[0.3], &rg, MulRounding::Nearest, true, 0, -128, 127).is_err());
        let up = choose_requant(&[0.3], &rg, MulRounding::Up, true, 0, -128, 127).unwrap();
        assert!(up.requant.mul.iter().all(|&m| (m as u16).is_power_of_two()));
    }
}
