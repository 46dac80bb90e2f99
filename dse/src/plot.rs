//! The Pareto plot: latency against LUTs, DSPs and block RAM, one panel each, as an SVG a
//! browser opens. Configs that fit are blue, the others grey; each panel's front among the
//! configs that fit (the configs no other fitting one beats on both axes) is the red
//! staircase; the best config that fits is ringed and named; a dashed line marks the part's
//! capacity. Text is left to the viewer's fonts (SVG `<text>`), so drawing needs no font
//! files.

use plotters::prelude::*;

use crate::explore::{Exploration, Point};
use crate::pareto::staircase;
use crate::resources::Resources;
use crate::Error;

/// One panel's resource axis.
struct Axis {
    name: &'static str,
    value: fn(&Resources) -> f64,
}

const AXES: [Axis; 3] = [
    Axis {
        name: "LUTs",
        value: |r| r.luts as f64,
    },
    Axis {
        name: "DSPs",
        value: |r| r.dsps as f64,
    },
    Axis {
        name: "BRAM36 tiles",
        value: |r| r.bram36,
    },
];

const FIT: RGBColor = RGBColor(31, 119, 180);
const MISFIT: RGBColor = RGBColor(160, 160, 160);
const FRONT: RGBColor = RGBColor(214, 39, 40);

/// The plot of `x` as SVG text.
pub fn svg(x: &Exploration) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1500, 560)).into_drawing_area();
        draw(&root, x).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Writes the plot of `x` to `path`.
pub fn write(x: &Exploration, path: &std::path::Path) -> Result<(), Error> {
    let err = |message: String| Error::Plot {
        path: path.display().to_string(),
        message,
    };
    let text = svg(x).map_err(err)?;
    std::fs::write(path, text).map_err(|e| err(e.to_string()))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult =
    Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

fn draw(root: &Area, x: &Exploration) -> DrawResult {
    root.fill(&WHITE)?;
    let shown: Vec<&Point> = x
        .points
        .iter()
        .filter(|p| p.resources().is_some() && p.latency_ms().is_some())
        .collect();
    let hidden = x.points.len() - shown.len();
    let title = format!(
        "{} on {}: accelerator latency vs resources, {} configs{}{}",
        x.network,
        x.target.name,
        shown.len(),
        if hidden > 0 {
            format!(" ({hidden} not shown: not synthesized or not measured)")
        } else {
            String::new()
        },
        x.eval
            .as_ref()
            .map_or_else(String::new, |set| format!("; labels: top-1 on the {set}"))
    );
    let (head, body) = root.split_vertically(44);
    head.draw(&Text::new(
        title,
        (20, 14),
        ("sans-serif", 20).into_font().color(&BLACK),
    ))?;
    let best = x.best().map(|p| p.config.config_string());
    for (area, axis) in body.split_evenly((1, 3)).iter().zip(&AXES) {
        panel(area, x, &shown, axis, best.as_deref())?;
    }
    Ok(())
}

fn panel(
    area: &Area,
    x: &Exploration,
    shown: &[&Point],
    axis: &Axis,
    best: Option<&str>,
) -> DrawResult {
    let xy = |p: &Point| -> (f64, f64) {
        (
            (axis.value)(p.resources().expect("shown points have resources")),
            p.latency_ms().expect("shown points have a latency"),
        )
    };
    let capacity = (axis.value)(&x.target.capacity);
    let x_max = shown
        .iter()
        .map(|p| xy(p).0)
        .fold(capacity, f64::max)
        .max(1.0)
        * 1.08;
    let y_max = shown.iter().map(|p| xy(p).1).fold(0.0, f64::max).max(1e-3) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("latency vs {}", axis.name), ("sans-serif", 17))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc(axis.name)
        .y_desc("latency per inference (ms)")
        .x_labels(6)
        .y_labels(8)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    chart
        .draw_series(DashedLineSeries::new(
            [(capacity, 0.0), (capacity, y_max)],
            6,
            4,
            BLACK.mix(0.6).stroke_width(1),
        ))?
        .label(format!("{} capacity", x.target.name))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.mix(0.6)));

    let (fit, misfit): (Vec<&Point>, Vec<&Point>) = shown.iter().partition(|p| p.fits());
    chart
        .draw_series(
            misfit
                .iter()
                .map(|p| Circle::new(xy(p), 4, MISFIT.stroke_width(1))),
        )?
        .label("does not fit")
        .legend(|c| Circle::new(c, 4, MISFIT.stroke_width(1)));
    chart
        .draw_series(fit.iter().map(|p| Circle::new(xy(p), 4, FIT.filled())))?
        .label("fits")
        .legend(|c| Circle::new(c, 4, FIT.filled()));
    // With an evaluation set, each config that fits carries its top-1 accuracy.
    chart.draw_series(fit.iter().filter_map(|p| {
        let a = p.accuracy()?;
        Some(
            EmptyElement::at(xy(p))
                + Text::new(
                    format!("{:.1}%", 100.0 * a),
                    (6, 2),
                    ("sans-serif", 11).into_font().color(&BLACK),
                ),
        )
    }))?;

    let coords: Vec<(f64, f64)> = fit.iter().map(|p| xy(p)).collect();
    let stair: Vec<(f64, f64)> = staircase(&coords).into_iter().map(|i| coords[i]).collect();
    let mut steps = Vec::new();
    for (i, &(px, py)) in stair.iter().enumerate() {
        if i > 0 {
            steps.push((px, stair[i - 1].1));
        }
        steps.push((px, py));
    }
    chart
        .draw_series(LineSeries::new(steps, FRONT.stroke_width(2)))?
        .label("Pareto front (configs that fit)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], FRONT.stroke_width(2)));
    chart.draw_series(stair.iter().map(|&c| Circle::new(c, 5, FRONT.filled())))?;

    if let Some(p) = fit
        .iter()
        .find(|p| Some(p.config.config_string().as_str()) == best)
    {
        let c = xy(p);
        chart.draw_series([Circle::new(c, 9, BLACK.stroke_width(2))])?;
        // The name goes right of the point, or left of it in the panel's right half.
        let right_half = c.0 > x_max / 2.0;
        let style = ("sans-serif", 13).into_font().color(&BLACK).pos(
            plotters::style::text_anchor::Pos::new(
                if right_half {
                    plotters::style::text_anchor::HPos::Right
                } else {
                    plotters::style::text_anchor::HPos::Left
                },
                plotters::style::text_anchor::VPos::Bottom,
            ),
        );
        let dx = if right_half { -12 } else { 12 };
        chart.draw_series([EmptyElement::at(c)
            + Text::new(
                format!("best: {}", p.config.config_string()),
                (dx, -10),
                style,
            )])?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 12))
        .draw()?;
    Ok(())
}
