//! Learning curves and confusion matrices as SVG (plotters, SVG backend only; with the `plot`
//! feature).

#[cfg(feature = "plot")]
use plotters::prelude::*;

use super::{ConfusionMatrix, History};
use crate::{Error, Result};

/// What `History::plot` says when plotters was left out of the build.
#[cfg(not(feature = "plot"))]
pub(crate) const WITHOUT_PLOT: &str = "rumus was built without the `plot` feature (enable it in Cargo.toml, \
     or keep the default features; History::to_json writes the same curves as data)";

/// Without the `plot` feature: an error naming it.
#[cfg(not(feature = "plot"))]
pub(crate) fn render_svg(_history: &History) -> Result<String> {
    Err(Error::invalid("History::plot", WITHOUT_PLOT))
}

/// Without the `plot` feature: an error naming it.
#[cfg(not(feature = "plot"))]
pub(crate) fn render_metric_svg(_history: &History, _name: &str) -> Result<String> {
    Err(Error::invalid("History::plot_metric", WITHOUT_PLOT))
}

/// Without the `plot` feature: an error naming it.
#[cfg(not(feature = "plot"))]
pub(crate) fn render_confusion_svg(_matrix: &ConfusionMatrix) -> Result<String> {
    Err(Error::invalid("ConfusionMatrix::to_svg", WITHOUT_PLOT))
}

#[cfg(feature = "plot")]
fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::invalid("plot", e.to_string())
}

#[cfg(feature = "plot")]
/// One panel: every series named in `names` that the history has, against 1-based epochs on
/// an axis of whole epochs; the y axis is titled `title`.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    history: &History,
    title: &str,
    names: &[&str],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let series: Vec<(&str, Vec<(u32, f32)>)> = names
        .iter()
        .filter_map(|&n| history.get(n).map(|v| (n, v)))
        .map(|(n, v)| {
            let points = v.iter().enumerate().filter(|(_, y)| y.is_finite()).map(|(i, &y)| (i as u32 + 1, y));
            (n, points.collect())
        })
        .collect();
    let ys = series.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.05).max(hi.abs().max(lo.abs()) * 1e-3).max(f32::MIN_POSITIVE);
    let epochs = history.epochs().max(2) as u32;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(72)
        .build_cartesian_2d(1u32..epochs, (lo - pad)..(hi + pad))
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_labels(epochs.min(12) as usize)
        .x_label_formatter(&|e| e.to_string())
        .y_label_formatter(&|y| super::significant::significant(*y))
        .x_desc("epoch")
        .y_desc(title)
        .draw()
        .map_err(plot_error)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
            .map_err(plot_error)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            // Losses fall and accuracies rise: keep the legend off the curves' end.
            .position(if title.contains("loss") || title.contains("mae") {
                SeriesLabelPosition::UpperRight
            } else {
                SeriesLabelPosition::LowerRight
            })
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
    }
    Ok(())
}

#[cfg(feature = "plot")]
/// The SVG text of `history`'s learning curves.
pub(crate) fn render_svg(history: &History) -> Result<String> {
    let has_accuracy = history.get("accuracy").is_some();
    let mut svg = String::new();
    {
        let width = if has_accuracy { 1000 } else { 520 };
        let root = SVGBackend::with_string(&mut svg, (width, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        if has_accuracy {
            let (left, right) = root.split_horizontally(width / 2);
            panel(&left, history, "loss", &["loss", "val_loss"])?;
            panel(&right, history, "accuracy", &["accuracy", "val_accuracy"])?;
        } else {
            panel(&root, history, "loss", &["loss", "val_loss"])?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

#[cfg(feature = "plot")]
/// The SVG text of one metric's curve and its `val_` curve.
pub(crate) fn render_metric_svg(history: &History, name: &str) -> Result<String> {
    let validation = format!("val_{name}");
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (560, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        panel(&root, history, name, &[name, &validation])?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

#[cfg(feature = "plot")]
/// The SVG text of a confusion matrix: a heat map (darker is more of the target's row), each
/// cell with its count, targets down and predictions across.
pub(crate) fn render_confusion_svg(matrix: &ConfusionMatrix) -> Result<String> {
    let classes = matrix.classes().max(1) as u32;
    let labels = matrix.labels().to_vec();
    // Cells wide enough for the longest label under each column (about 7 pixels a character).
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as u32;
    let cell = (7 * longest + 10).max(36);
    let (width, height) = ((classes * cell).clamp(240, 2400), (classes * 36).clamp(240, 1600));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width + 20 + cell, height + 100)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let label = |c: &u32| labels.get(*c as usize).cloned().unwrap_or_default();
        let mut chart = ChartBuilder::on(&root)
            .caption("confusion matrix", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(cell + 8)
            .build_cartesian_2d((0u32..classes - 1).into_segmented(), (0u32..classes - 1).into_segmented())
            .map_err(plot_error)?;
        // Rows are drawn top to bottom: target 0 at the top, as the printed table.
        let row = |t: u32| classes - 1 - t;
        let column_label = |s: &SegmentValue<u32>| match s {
            SegmentValue::CenterOf(c) if *c < classes => label(c),
            _ => String::new(),
        };
        let row_label = |s: &SegmentValue<u32>| match s {
            SegmentValue::CenterOf(c) if *c < classes => label(&row(*c)),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(classes.min(40) as usize)
            .y_labels(classes.min(40) as usize)
            .x_label_formatter(&column_label)
            .y_label_formatter(&row_label)
            .x_desc("predicted")
            .y_desc("true")
            .draw()
            .map_err(plot_error)?;
        let counts = matrix.class_counts();
        chart
            .draw_series((0..classes).flat_map(|t| (0..classes).map(move |p| (t, p))).map(|(t, p)| {
                let n = matrix.get(t as usize, p as usize);
                let support = counts.actual().get(t as usize).copied().unwrap_or(0).max(1);
                let shade = n as f64 / support as f64;
                let level = (255.0 * (1.0 - 0.85 * shade)) as u8;
                Rectangle::new(
                    [
                        (SegmentValue::Exact(p), SegmentValue::Exact(row(t))),
                        (SegmentValue::Exact(p + 1), SegmentValue::Exact(row(t) + 1)),
                    ],
                    RGBColor(level, level, 255).filled(),
                )
            }))
            .map_err(plot_error)?;
        if classes <= 40 {
            chart
                .draw_series((0..classes).flat_map(|t| (0..classes).map(move |p| (t, p))).map(|(t, p)| {
                    Text::new(
                        matrix.get(t as usize, p as usize).to_string(),
                        (SegmentValue::CenterOf(p), SegmentValue::CenterOf(row(t))),
                        ("sans-serif", 13).into_font().color(&BLACK),
                    )
                }))
                .map_err(plot_error)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

#[cfg(all(test, not(feature = "plot")))]
mod tests {
    use super::*;

    #[test]
    fn plotting_is_an_error_naming_the_feature_and_writes_nothing() {
        let mut history = History::new();
        history.push(&crate::train::Logs::default(), 1.0);
        let path = std::env::temp_dir().join(format!("rumus-noplot-{}.svg", std::process::id()));
        let err = history.plot(&path).unwrap_err();
        assert!(matches!(&err, Error::InvalidArgument { op: "History::plot", .. }), "{err}");
        assert!(err.to_string().contains("without the `plot` feature"), "{err}");
        assert!(!path.exists());
        let matrix = ConfusionMatrix::new(1, vec![1]).unwrap();
        assert!(matrix.to_svg(&path).unwrap_err().to_string().contains("without the `plot` feature"));
        assert!(!path.exists());
    }
}
