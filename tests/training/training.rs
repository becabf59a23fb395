//! End-to-end training: real MNIST improvement, callbacks (EarlyStopping, ModelCheckpoint,
//! TerminateOnNaN, LearningRateScheduler), schedules, validation and History output.

use crate::common;

use common::{mnist, regression_data, scratch, weights, LinReg, SmallMlp};
use rumus::optim::schedule::OneCycle;
use rumus::prelude::*;
use rumus::train::{LearningRateScheduler, Mode};

#[test]
fn fit_on_2000_mnist_images_raises_accuracy_from_chance_to_above_82_percent() -> Result<()> {
    let (train, test) = mnist();
    let (train, test) = (train.take(2000)?, test.take(1000)?);
    let mut model = SmallMlp::new(128, 7)?;
    let before = model.evaluate(&test)?;
    let history = model.fit(
        &train,
        Fit::epochs(5).batch_size(32).optimizer(Adam::new(1e-3)).validation(&test).verbose(Verbosity::Quiet),
    )?;
    let after = model.evaluate(&test)?;
    println!("accuracy on 1,000 test images: {:.3} before, {:.3} after", before.accuracy, after.accuracy);
    // An untrained 10-class model is near chance; five epochs on 2,000 images reach 0.867 here; 0.82 leaves room.
    assert!(before.accuracy < 0.3, "untrained accuracy {}", before.accuracy);
    assert!(after.accuracy > 0.82, "trained accuracy {}", after.accuracy);
    assert!(after.accuracy > before.accuracy + 0.5);
    assert!(after.loss < before.loss / 3.0);
    assert_eq!(after.samples, 1000);
    assert_eq!(history.epochs(), 5);
    let loss = history.get("loss").unwrap();
    assert!(loss[4] < loss[0], "training loss should fall: {loss:?}");
    // The validation metrics of the last epoch are the evaluation of the final model.
    assert!((history.last("val_accuracy").unwrap() - after.accuracy).abs() < 1e-6);
    assert!((history.last("val_loss").unwrap() - after.loss).abs() < 1e-4);
    Ok(())
}

#[test]
fn training_is_reproducible_with_a_seed_and_prefetch_changes_nothing() -> Result<()> {
    let (train, _) = mnist();
    let train = train.take(512)?;
    let run = |prefetch: bool| -> Result<Vec<(String, Vec<f32>)>> {
        let mut model = SmallMlp::new(16, 3)?;
        model
            .fit(&train, Fit::epochs(2).batch_size(64).shuffle_seed(11).prefetch(prefetch).verbose(Verbosity::Quiet))?;
        Ok(weights(&model))
    };
    assert_eq!(run(true)?, run(false)?);
    Ok(())
}

#[test]
fn top_k_accuracy_and_validation_split_are_reported() -> Result<()> {
    let (train, _) = mnist();
    let train = train.take(600)?;
    let mut model = SmallMlp::new(16, 5)?;
    let history =
        model.fit(&train, Fit::epochs(1).batch_size(50).validation_split(0.25).top_k(3).verbose(Verbosity::Quiet))?;
    let names: Vec<&str> = history.names().collect();
    assert_eq!(names, ["loss", "accuracy", "top3_accuracy", "val_loss", "val_accuracy", "val_top3_accuracy", "lr"]);
    assert!(history.last("top3_accuracy").unwrap() >= history.last("accuracy").unwrap());
    assert!(history.last("val_top3_accuracy").unwrap() >= history.last("val_accuracy").unwrap());
    Ok(())
}

#[test]
fn regression_uses_mse_by_default_and_converges() -> Result<()> {
    let data = regression_data(256, 1)?;
    let mut model = LinReg::new(2)?;
    let history =
        model.fit(&data, Fit::epochs(30).batch_size(32).optimizer(Sgd::new(0.05)).verbose(Verbosity::Quiet))?;
    let loss = history.get("loss").unwrap();
    assert!(loss[29] < 1e-4 && loss[0] > 1.0, "MSE went {} -> {}", loss[0], loss[29]);
    assert!(history.get("accuracy").is_none());
    let w = model.fc.weight.to_vec()?;
    for (got, want) in w.iter().zip([1.0, -2.0, 0.5, 3.0]) {
        assert!((got - want).abs() < 1e-2, "weights {w:?}");
    }
    Ok(())
}

/// SGD with lr 1.5 on this regression overshoots (the MSE Hessian's largest eigenvalue is
/// about 2, so the top direction grows by |1 - 1.5·2| = 2 per step): the loss rises every epoch.
fn diverging_fit() -> Fit<'static> {
    Fit::epochs(8).batch_size(16).no_shuffle().optimizer(Sgd::new(1.5)).verbose(Verbosity::Quiet)
}

#[test]
fn early_stopping_stops_after_patience_and_restores_the_best_weights() -> Result<()> {
    let dir = scratch("early_stopping");
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    let template = dir.join("ep-{epoch:02}.safetensors").to_string_lossy().into_owned();
    let history = model.fit(
        &data,
        diverging_fit()
            .callback(ModelCheckpoint::new(template)?)
            .callback(EarlyStopping::new("loss").patience(2).restore_best_weights(true)),
    )?;
    let loss = history.get("loss").unwrap();
    assert!(loss.windows(2).all(|w| w[1] > w[0]), "the loss should rise every epoch: {loss:?}");
    // Best is epoch 1; epochs 2 and 3 do not improve; patience 2 stops after epoch 3.
    assert_eq!(history.epochs(), 3, "{loss:?}");
    assert!(history.stop_reason().unwrap().contains("EarlyStopping"));
    let mut best = LinReg::new(99)?;
    best.load(dir.join("ep-01.safetensors"))?;
    assert_eq!(weights(&model), weights(&best), "the weights of epoch 1 should be restored");
    Ok(())
}

#[test]
fn early_stopping_on_a_missing_metric_names_the_available_ones() -> Result<()> {
    let data = regression_data(32, 3)?;
    let mut model = LinReg::new(4)?;
    let err = model
        .fit(&data, Fit::epochs(2).callback(EarlyStopping::new("val_loss")).verbose(Verbosity::Quiet))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("val_loss") && msg.contains("loss, lr") && msg.contains("validation"), "{msg}");
    Ok(())
}

#[test]
fn reduce_lr_on_plateau_cuts_the_rate_after_patience_and_stops_at_min_lr() -> Result<()> {
    let data = regression_data(64, 3)?;
    // The loss rises every epoch at lr 1.5: epoch 0 is the best, epochs 1 and 2 do not improve,
    // so patience 2 halves the rate at the end of epoch 2 (logged from epoch 3 on).
    let mut model = LinReg::new(4)?;
    let history = model.fit(&data, diverging_fit().callback(ReduceLROnPlateau::new("loss").factor(0.5).patience(2)))?;
    let lr = history.get("lr").unwrap();
    assert_eq!(&lr[..4], &[1.5, 1.5, 1.5, 0.75], "{lr:?}");
    // min_lr bounds every reduction: 1.5 · 0.1 would be 0.15, clamped to 1.0, then left there.
    let mut model = LinReg::new(4)?;
    let plateau = ReduceLROnPlateau::new("loss").factor(0.1).patience(1).min_lr(1.0);
    let history = model.fit(&data, diverging_fit().callback(plateau))?;
    let lr = history.get("lr").unwrap();
    assert_eq!(lr[0], 1.5, "{lr:?}");
    assert!(lr.iter().all(|&r| r >= 1.0), "{lr:?}");
    assert!(lr.contains(&1.0), "{lr:?}");
    Ok(())
}

#[test]
fn reduce_lr_on_plateau_rejects_bad_settings_and_unknown_metrics_when_fit_starts() -> Result<()> {
    let data = regression_data(32, 3)?;
    let mut model = LinReg::new(4)?;
    for (plateau, want) in [
        (ReduceLROnPlateau::new("loss").factor(1.0), "factor 1"),
        (ReduceLROnPlateau::new("loss").factor(0.0), "factor 0"),
        (ReduceLROnPlateau::new("loss").min_lr(-1.0), "min_lr -1"),
        (ReduceLROnPlateau::new("val_loss"), "val_loss"),
    ] {
        let before = weights(&model);
        let err = model.fit(&data, Fit::epochs(2).callback(plateau).verbose(Verbosity::Quiet)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("ReduceLROnPlateau") && msg.contains(want), "{msg}");
        if want != "val_loss" {
            assert_eq!(weights(&model), before, "a rejected setting must not train: {msg}");
        }
    }
    Ok(())
}

#[test]
fn csv_logger_streams_one_row_per_epoch_into_a_new_folder_and_appends_on_resume() -> Result<()> {
    let dir = scratch("csv_logger");
    let path = dir.join("runs/deeper/log.csv");
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    let fit = || Fit::epochs(3).batch_size(16).no_shuffle().optimizer(Sgd::new(0.05)).verbose(Verbosity::Quiet);
    let history = model.fit(&data, fit().callback(CsvLogger::new(&path)))?;
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "epoch,loss,lr", "{text}");
    assert_eq!(lines.len(), 4, "{text}");
    let loss = history.get("loss").unwrap();
    for (epoch, line) in lines[1..].iter().enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells[0], epoch.to_string(), "{text}");
        assert_eq!(cells[1].parse::<f32>().unwrap(), loss[epoch], "{text}");
        assert_eq!(cells[2].parse::<f32>().unwrap(), 0.05, "{text}");
    }
    // A resumed run appends rows without a second header; a fresh logger replaces the file.
    model.fit(&data, fit().callback(CsvLogger::new(&path).append(true)))?;
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 7, "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("epoch")).count(), 1, "{text}");
    model.fit(&data, fit().callback(CsvLogger::new(&path)))?;
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4);
    // A folder that cannot be made is an I/O error naming the path, before any training.
    let blocker = dir.join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let before = weights(&model);
    let err = model.fit(&data, fit().callback(CsvLogger::new(blocker.join("log.csv")))).unwrap_err();
    assert!(matches!(err, Error::Io { .. }) && err.to_string().contains("file"), "{err}");
    assert_eq!(weights(&model), before);
    Ok(())
}

#[test]
fn model_checkpoint_with_save_best_only_writes_only_on_improvement() -> Result<()> {
    let dir = scratch("checkpoint_best_only");
    let data = regression_data(64, 3)?;
    let template = dir.join("best-{epoch:02}-{loss:.3}.safetensors").to_string_lossy().into_owned();
    let mut model = LinReg::new(4)?;
    model.fit(
        &data,
        diverging_fit().callback(ModelCheckpoint::new(template.clone())?.monitor("loss").save_best_only(true)),
    )?;
    let files: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(files.len(), 1, "only the first (best) epoch should be saved: {files:?}");
    assert!(files[0].starts_with("best-01-") && files[0].ends_with(".safetensors"), "{files:?}");

    // A converging run improves every epoch, so every epoch is saved.
    let dir = scratch("checkpoint_improving");
    let template = dir.join("e{epoch}.safetensors").to_string_lossy().into_owned();
    let mut model = LinReg::new(4)?;
    model.fit(
        &data,
        Fit::epochs(4)
            .batch_size(16)
            .optimizer(Sgd::new(0.05))
            .verbose(Verbosity::Quiet)
            .callback(ModelCheckpoint::new(template)?.monitor("loss").mode(Mode::Min).save_best_only(true)),
    )?;
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    assert_eq!(files, ["e1.safetensors", "e2.safetensors", "e3.safetensors", "e4.safetensors"]);
    Ok(())
}

#[test]
fn a_nan_loss_ends_fit_with_an_error_and_restores_the_last_good_weights() -> Result<()> {
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    // Two sane epochs, then a learning rate that overflows the weights to inf/NaN.
    model.fit(&data, Fit::epochs(2).batch_size(16).optimizer(Sgd::new(0.01)).verbose(Verbosity::Quiet))?;
    let good = weights(&model);
    let err = model
        .fit(
            &data,
            Fit::epochs(3)
                .batch_size(16)
                .optimizer(Sgd::new(1e30))
                .verbose(Verbosity::Quiet)
                .callback(TerminateOnNaN::new()),
        )
        .unwrap_err();
    assert!(matches!(err, Error::Training(_)), "{err}");
    assert!(err.to_string().contains("restored"), "{err}");
    assert_eq!(weights(&model), good, "weights must be those of the start of the failing epoch");
    assert!(good.iter().all(|(_, v)| v.iter().all(|x| x.is_finite())));
    Ok(())
}

#[test]
fn learning_rate_schedules_and_callbacks_set_the_rate() -> Result<()> {
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    let history = model.fit(
        &data,
        Fit::epochs(3)
            .batch_size(16)
            .optimizer(Sgd::new(0.1))
            .verbose(Verbosity::Quiet)
            .callback(LearningRateScheduler::new(|epoch, _lr| 0.01 / (epoch as f32 + 1.0))),
    )?;
    let lr = history.get("lr").unwrap();
    assert!((lr[0] - 0.01).abs() < 1e-9 && (lr[1] - 0.005).abs() < 1e-9 && (lr[2] - 0.01 / 3.0).abs() < 1e-9, "{lr:?}");

    // One-cycle over 3 epochs × 4 steps ends at max_lr / 25 / 1e4.
    let history = model.fit(
        &data,
        Fit::epochs(3).batch_size(16).optimizer(Sgd::new(0.1)).verbose(Verbosity::Quiet).schedule(OneCycle::new(0.02)),
    )?;
    let last = history.last("lr").unwrap();
    assert!((last - 0.02 / 25.0 / 1e4).abs() < 1e-9, "{last}");
    Ok(())
}

#[test]
fn clipping_keeps_a_huge_learning_rate_finite() -> Result<()> {
    let data = regression_data(64, 3)?;
    let mut model = LinReg::new(4)?;
    let history = model.fit(
        &data,
        Fit::epochs(2).batch_size(16).optimizer(Sgd::new(0.01)).clip_grad_norm(1e-3).verbose(Verbosity::Quiet),
    )?;
    // With every step's gradient cut to norm 1e-3, lr 0.01 moves each weight by at most 1e-5.
    assert!(history.get("loss").unwrap().iter().all(|l| l.is_finite()));
    Ok(())
}

#[test]
fn history_is_written_as_csv_json_and_svg() -> Result<()> {
    let dir = scratch("history_files");
    let (train, test) = mnist();
    let (train, test) = (train.take(256)?, test.take(128)?);
    let mut model = SmallMlp::new(16, 9)?;
    let history =
        model.fit(&train, Fit::epochs(2).batch_size(64).validation(&test).verbose(Verbosity::OneLinePerEpoch))?;
    history.to_csv(dir.join("h.csv"))?;
    history.to_json(dir.join("h.json"))?;
    history.plot(dir.join("curves.svg"))?;
    let csv = std::fs::read_to_string(dir.join("h.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "epoch,loss,accuracy,val_loss,val_accuracy,lr,seconds");
    assert_eq!(lines.len(), 3);
    assert!(lines[2].starts_with("2,"));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("h.json")).unwrap()).unwrap();
    assert_eq!(json["epochs"], 2);
    assert_eq!(json["history"]["val_accuracy"].as_array().unwrap().len(), 2);
    let svg = std::fs::read_to_string(dir.join("curves.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("val_accuracy") && svg.contains("<polyline"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    Ok(())
}

#[test]
fn bad_settings_are_errors() -> Result<()> {
    let data = regression_data(32, 3)?;
    let mut model = LinReg::new(4)?;
    let quiet = || Fit::epochs(1).verbose(Verbosity::Quiet);
    assert!(matches!(model.fit(&data, quiet().batch_size(0)), Err(Error::InvalidArgument { .. })));
    assert!(matches!(model.fit(&data, quiet().validation_split(1.5)), Err(Error::InvalidArgument { .. })));
    assert!(matches!(
        model.fit(&data, quiet().validation_split(0.5).validation(&data)),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(model.fit(&data, quiet().loss(Loss::cross_entropy())), Err(Error::InvalidArgument { .. })));
    assert!(matches!(model.fit(&data, quiet().batch_size(64).drop_last(true)), Err(Error::Data(_))));
    Ok(())
}

#[test]
fn predict_returns_typed_outputs_in_eval_mode() -> Result<()> {
    let model = LinReg::new(4)?;
    let x = Tensor::<Shape1<4>>::randn(5, 1, &Device::cpu())?;
    let y = model.predict(&x)?;
    assert_eq!(y.shape(), [5, 1]);
    assert!(!y.requires_grad());
    Ok(())
}
