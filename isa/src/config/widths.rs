//! Width variants of a preset, for exploring precision from the command line: `i4w4` is the
//! `default` preset with 4-bit inputs and weights, `small:i8w2a16` the `small` preset with
//! 8-bit inputs, 2-bit weights and 16-bit accumulators. The INP, WGT and ACC scratchpads keep
//! their depth in elements (their bytes scale with the lanes), so every tiling that fits the
//! preset fits the variant.

use super::*;

impl HwConfig {
    /// `self` with `inp`-, `wgt`- and `acc`-bit lanes (2, 4, 8 or 16; accumulators 16 or
    /// 32) and scratchpads of as many elements; fails when the result is not a valid config.
    pub fn with_widths(&self, inp: u32, wgt: u32, acc: u32) -> Result<HwConfig, String> {
        let log = |what: &str, bits: u32, allowed: &[u32]| {
            if allowed.contains(&bits) {
                Ok(bits.ilog2())
            } else {
                Err(format!(
                    "{what} of {bits} bits: use {}",
                    allowed
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        };
        let (li, lw, la) = (
            log("inputs", inp, &[2, 4, 8, 16])?,
            log("weights", wgt, &[2, 4, 8, 16])?,
            log("accumulators", acc, &[16, 32])?,
        );
        let resize = |size: u32, old: u32, new: u32| {
            (size + new).checked_sub(old).ok_or_else(|| {
                format!(
                    "a scratchpad of 2^{size} bytes cannot shrink by 2^{}",
                    old - new
                )
            })
        };
        let mut cfg = self.clone();
        cfg.log_inp_buff_size = resize(cfg.log_inp_buff_size, cfg.log_inp_width, li)?;
        cfg.log_wgt_buff_size = resize(cfg.log_wgt_buff_size, cfg.log_wgt_width, lw)?;
        cfg.log_acc_buff_size = resize(cfg.log_acc_buff_size, cfg.log_acc_width, la)?;
        (cfg.log_inp_width, cfg.log_wgt_width, cfg.log_acc_width) = (li, lw, la);
        cfg.validate()?;
        Ok(cfg)
    }

    /// The config `spec` names when it has the form `[PRESET:]i<bits>w<bits>[a<bits>]`
    /// (accumulators keep the preset's width unless given); `None` for any other spec.
    pub(super) fn width_variant(spec: &str) -> Option<Result<HwConfig, ConfigError>> {
        let (preset, widths) = spec.rsplit_once(':').unwrap_or(("default", spec));
        let rest = widths.strip_prefix('i')?;
        let (inp, rest) = rest.split_once('w')?;
        let (wgt, acc) = match rest.split_once('a') {
            Some((w, a)) => (w, Some(a)),
            None => (rest, None),
        };
        let number = |s: &str| s.parse::<u32>().ok().filter(|_| !s.is_empty());
        let (inp, wgt) = (number(inp)?, number(wgt)?);
        let acc = match acc {
            Some(a) => Some(number(a)?),
            None => None,
        };
        let invalid = |problem: String| ConfigError::Invalid {
            origin: format!("'{spec}'"),
            problem,
        };
        Some(HwConfig::preset(preset).and_then(|base| {
            let acc = acc.unwrap_or(base.acc_width());
            base.with_widths(inp, wgt, acc).map_err(invalid)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_variants_keep_the_scratchpads_depth() {
        let base = HwConfig::default();
        let v = HwConfig::load("i4w4").unwrap();
        assert_eq!((v.inp_width(), v.wgt_width(), v.acc_width()), (4, 4, 32));
        assert_eq!(v.log_inp_buff_size, base.log_inp_buff_size - 1);
        assert_eq!(v.log_wgt_buff_size, base.log_wgt_buff_size - 1);
        assert_eq!(v.log_acc_buff_size, base.log_acc_buff_size);
        let s = HwConfig::load("small:i8w2a16").unwrap();
        let small = HwConfig::preset("small").unwrap();
        assert_eq!((s.inp_width(), s.wgt_width(), s.acc_width()), (8, 2, 16));
        assert_eq!(s.log_acc_buff_size, small.log_acc_buff_size - 1);
        assert_eq!(s.batch(), small.batch());
    }

    #[test]
    fn bad_width_variants_say_what_is_wrong() {
        let e = HwConfig::load("i3w4").unwrap_err().to_string();
        assert!(
            e.contains("'i3w4'") && e.contains("inputs of 3 bits: use 2, 4, 8, 16"),
            "{e}"
        );
        let e = HwConfig::load("i8w8a8").unwrap_err().to_string();
        assert!(e.contains("accumulators of 8 bits: use 16, 32"), "{e}");
        let e = HwConfig::load("huge:i4w4").unwrap_err().to_string();
        assert!(e.contains("'huge'"), "{e}");
        // Not of the form: an unknown preset as before.
        let e = HwConfig::load("i4x4").unwrap_err().to_string();
        assert!(e.contains("neither a config file nor a preset"), "{e}");
    }
}
