//! Issue #30's callback and output items: callbacks lent to `fit` (`&mut`) and read afterwards;
//! monitored metrics and file-name templates checked when `fit` starts, before any file is
//! written; folders of checkpoints created; plots of any metric.

use crate::common;

use common::{regression_data, scratch, weights, LinReg};
use rumus::prelude::*;
use rumus::train::{Callback, Logs, TrainContext};

fn quiet(epochs: usize) -> Fit<'static> {
    Fit::epochs(epochs).batch_size(16).no_shuffle().optimizer(Sgd::new(0.05)).verbose(Verbosity::Quiet)
}

/// Counts the epochs it saw.
#[derive(Default)]
struct Counter {
    epochs: usize,
    names: Vec<String>,
}

impl Callback for Counter {
    fn check(&self, ctx: &TrainContext<'_>) -> Result<()> {
        assert!(ctx.metric_names().contains(&"loss".to_string()));
        Ok(())
    }
    fn on_epoch_end(&mut self, _epoch: usize, logs: &Logs, ctx: &mut TrainContext<'_>) -> Result<()> {
        self.epochs += 1;
        self.names = logs.names().map(str::to_string).collect();
        assert_eq!(ctx.metric_names(), self.names.as_slice(), "the announced names are the logged ones");
        Ok(())
    }
}

#[test]
fn callbacks_lent_to_fit_can_be_read_afterwards() -> Result<()> {
    let dir = scratch("lent_callbacks");
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    let mut stopper = EarlyStopping::new("val_loss").patience(1);
    let mut checkpoint = ModelCheckpoint::new(dir.join("e{epoch}.safetensors").to_string_lossy())?;
    let mut counter = Counter::default();
    model.fit(
        &data,
        quiet(3)
            .metrics([Metric::Mae])
            .validation_split(0.25)
            .callback(&mut stopper)
            .callback(&mut checkpoint)
            .callback(&mut counter)
            .callback(TerminateOnNaN::new()),
    )?;
    assert_eq!(counter.epochs, 3);
    assert_eq!(counter.names, ["loss", "mae", "val_loss", "val_mae", "lr"]);
    assert_eq!(stopper.best_epoch(), Some(2), "the loss falls every epoch");
    assert_eq!(checkpoint.saved().len(), 3);
    assert!(checkpoint.saved().iter().all(|p| p.exists()));
    Ok(())
}

#[test]
fn a_monitored_metric_the_fit_does_not_log_is_an_error_before_any_file_is_written() -> Result<()> {
    let dir = scratch("typo_at_start");
    let data = regression_data(32, 3)?;
    let mut model = LinReg::new(4)?;
    let before = weights(&model);
    let csv = dir.join("log.csv");
    let checkpoints = dir.join("ckpt/e{epoch}.safetensors").to_string_lossy().into_owned();
    let cases: Vec<(Box<dyn Callback>, &str)> = vec![
        (Box::new(EarlyStopping::new("val_los")), "EarlyStopping"),
        (Box::new(EarlyStopping::new("mae")), "EarlyStopping"),
        (Box::new(ReduceLROnPlateau::new("los")), "ReduceLROnPlateau"),
        (Box::new(ModelCheckpoint::new(&checkpoints)?.monitor("val_f1").save_best_only(true)), "ModelCheckpoint"),
        (Box::new(ModelCheckpoint::new(dir.join("{val_mae:.3}.st").to_string_lossy())?), "ModelCheckpoint"),
    ];
    for (bad, who) in cases {
        // The CsvLogger comes first: it would create its file in on_train_begin.
        let fit = quiet(2).validation_split(0.25).callback(CsvLogger::new(&csv)).callback(bad);
        let msg = model.fit(&data, fit).unwrap_err().to_string();
        assert!(msg.contains(who) && msg.contains("does not log") && msg.contains("loss, val_loss, lr"), "{msg}");
        assert!(!csv.exists() && !dir.join("ckpt").exists(), "{msg}: a file was written before the check");
    }
    // Without validation data a val_ metric says how to get one.
    let msg = model.fit(&data, quiet(1).callback(EarlyStopping::new("val_loss"))).unwrap_err().to_string();
    assert!(msg.contains("validation"), "{msg}");
    assert_eq!(weights(&model), before, "a rejected fit must not train");
    Ok(())
}

#[test]
fn model_checkpoint_creates_missing_folders_and_fills_new_metrics() -> Result<()> {
    let dir = scratch("checkpoint_folders");
    let data = regression_data(32, 3)?;
    let mut model = LinReg::new(4)?;
    let template = dir.join("runs/a/{epoch}/m-{val_mae:.3}.safetensors").to_string_lossy().into_owned();
    let mut checkpoint = ModelCheckpoint::new(&template)?;
    model.fit(&data, quiet(2).metrics([Metric::Mae]).validation_split(0.25).callback(&mut checkpoint))?;
    assert_eq!(checkpoint.saved().len(), 2);
    for path in checkpoint.saved() {
        assert!(path.exists(), "{path:?}");
        assert!(path.to_string_lossy().contains("/m-"), "{path:?}");
    }
    Ok(())
}

#[test]
fn any_metric_plots_against_whole_epochs_and_an_unknown_name_is_an_error() -> Result<()> {
    let dir = scratch("plot_metric");
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    let history = model.fit(&data, quiet(3).metrics([Metric::Mae]).validation_split(0.25))?;
    let path = dir.join("mae.svg");
    history.plot_metric("mae", &path)?;
    let texts = svg_texts(&std::fs::read_to_string(&path).unwrap());
    for title in ["epoch", "mae", "val_mae", "1", "2", "3"] {
        assert!(texts.iter().any(|t| t == title), "axis titles, legend and epoch ticks: {texts:?}");
    }
    // Ticks are whole epochs, the values' ticks four significant digits.
    assert!(!texts.iter().any(|t| ["1.0", "1.5", "2.0", "2.5"].contains(&t.as_str())), "{texts:?}");
    let err = history.plot_metric("f1", dir.join("f1.svg")).unwrap_err().to_string();
    assert!(err.contains("no metric `f1`") && err.contains("mae"), "{err}");
    assert!(!dir.join("f1.svg").exists());
    history.plot(dir.join("curves.svg"))?;
    Ok(())
}

/// The contents of an SVG's `<text>` elements, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string()))
        .collect()
}

#[test]
fn the_progress_line_prints_significant_digits() -> Result<()> {
    let mut logs = Logs::new();
    logs.insert("loss", 1.2345e-5);
    logs.insert("accuracy", 0.97234);
    logs.insert("lr", 0.001);
    assert_eq!(logs.to_string(), " - loss: 1.234e-05 - accuracy: 0.9723");
    Ok(())
}
