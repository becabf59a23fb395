//! Learning curves as SVG (plotters, SVG backend only; with the `plot` feature).

#[cfg(feature = "plot")]
use plotters::prelude::*;

use super::History;
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

#[cfg(feature = "plot")]
fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::invalid("History::plot", e.to_string())
}

#[cfg(feature = "plot")]
/// One panel: every series named in `names` that the history has, against 1-based epochs.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    history: &History,
    title: &str,
    names: &[&str],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let series: Vec<(&str, Vec<(f32, f32)>)> = names
        .iter()
        .filter_map(|&n| history.get(n).map(|v| (n, v)))
        .map(|(n, v)| {
            (n, v.iter().enumerate().filter(|(_, y)| y.is_finite()).map(|(i, &y)| (i as f32 + 1.0, y)).collect())
        })
        .collect();
    let ys = series.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.05).max(1e-3);
    let epochs = history.epochs().max(2) as f32;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(52)
        .build_cartesian_2d(1f32..epochs, (lo - pad)..(hi + pad))
        .map_err(plot_error)?;
    chart.configure_mesh().light_line_style(WHITE).x_desc("epoch").draw().map_err(plot_error)?;
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
            .position(if title == "loss" { SeriesLabelPosition::UpperRight } else { SeriesLabelPosition::LowerRight })
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
    }
}
