//! `Resize` and the older `Upsample` from the attributes of an ONNX node; the op itself is
//! `vta_runtime::ops::resize`.

pub use vta_runtime::ops::resize::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Resize {
    fn parse(ctx: &ParseCtx) -> Result<Resize, String> {
        let upsample = ctx.node.op_type == "Upsample";
        let mode = match ctx.string("mode")?.as_deref().unwrap_or("nearest") {
            "nearest" => ResizeMode::Nearest,
            "linear" | "bilinear" => ResizeMode::Linear,
            "cubic" => ResizeMode::Cubic,
            other => return Err(format!("unknown mode '{other}'")),
        };
        if upsample {
            // Upsample: x_original = x / scale, nearest cells by floor.
            let source = if ctx.opset < 9 {
                SizeSource::Attribute(
                    ctx.floats("scales")?
                        .ok_or("attribute 'scales' is required")?,
                )
            } else {
                SizeSource::ScalesInput
            };
            return Ok(Resize {
                mode,
                coord: CoordMode::Asymmetric,
                nearest: NearestMode::Floor,
                source,
                axes: None,
                policy: AspectPolicy::Stretch,
                cubic: Cubic::default(),
                extrapolation: 0.0,
                antialias: false,
            });
        }
        let (coord_default, source) = if ctx.opset < 11 {
            ("asymmetric", SizeSource::ScalesInput)
        } else {
            ("half_pixel", SizeSource::ScalesOrSizes)
        };
        let coord = match ctx
            .string("coordinate_transformation_mode")?
            .as_deref()
            .unwrap_or(coord_default)
        {
            "half_pixel" => CoordMode::HalfPixel,
            "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
            "align_corners" => CoordMode::AlignCorners,
            "asymmetric" => CoordMode::Asymmetric,
            "tf_half_pixel_for_nn" => CoordMode::TfHalfPixelForNn,
            "half_pixel_symmetric" => CoordMode::HalfPixelSymmetric,
            "tf_crop_and_resize" => CoordMode::TfCropAndResize,
            other => return Err(format!("unknown coordinate_transformation_mode '{other}'")),
        };
        let nearest_default = if ctx.opset < 11 {
            "floor"
        } else {
            "round_prefer_floor"
        };
        let nearest = match ctx
            .string("nearest_mode")?
            .as_deref()
            .unwrap_or(nearest_default)
        {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            other => return Err(format!("unknown nearest_mode '{other}'")),
        };
        let policy = match ctx.string("keep_aspect_ratio_policy")?.as_deref() {
            None | Some("stretch") => AspectPolicy::Stretch,
            Some("not_larger") => AspectPolicy::NotLarger,
            Some("not_smaller") => AspectPolicy::NotSmaller,
            Some(other) => return Err(format!("unknown keep_aspect_ratio_policy '{other}'")),
        };
        Ok(Resize {
            mode,
            coord,
            nearest,
            source,
            axes: ctx.ints("axes")?,
            policy,
            cubic: Cubic {
                a: ctx.float("cubic_coeff_a", -0.75)?,
                exclude_outside: ctx.int("exclude_outside", 0)? != 0,
            },
            extrapolation: ctx.float("extrapolation_value", 0.0)?,
            antialias: ctx.int("antialias", 0)? != 0,
        })
    }
}
