// A #[model] trains, evaluates, predicts and round-trips a checkpoint through the `Model` trait
// methods in the prelude.
use rumus::prelude::*;

#[model(input = [2])]
pub struct Tiny {
    body: layers![Linear(16), Relu, Linear(2)],
}

fn main() -> rumus::Result<()> {
    // Two separable classes: the sign of x0 + x1.
    let (mut data, mut labels) = (Vec::new(), Vec::new());
    for i in 0..256u32 {
        let (a, b) = (((i * 37) % 97) as f32 / 48.0 - 1.0, ((i * 53) % 89) as f32 / 44.0 - 1.0);
        data.extend([a, b]);
        labels.push(u32::from(a + b > 0.0));
    }
    let train = ClassDataset::<Shape1<2>, 2>::new(data, labels)?;
    let device = Device::cpu();
    let mut model = Tiny::new(&device, 1)?;
    let history =
        model.fit(&train, Fit::epochs(30).batch_size(32).optimizer(Adam::new(1e-2)).verbose(Verbosity::Quiet))?;
    assert_eq!(history.epochs(), 30);
    let eval = model.evaluate(&train)?;
    assert!(eval.accuracy > 0.9, "accuracy {}", eval.accuracy);

    let x = Tensor::<Shape1<2>>::from_vec(vec![1.0, 1.0, -1.0, -1.0], &device)?;
    let logits: Tensor<Shape1<2>> = model.predict(&x)?;
    let v = logits.to_vec()?;
    assert!(v[1] > v[0] && v[2] > v[3], "{v:?}");

    let path = std::env::temp_dir().join(format!("rumus-macros-tiny-{}.safetensors", std::process::id()));
    model.save(&path)?;
    let mut other = Tiny::new(&device, 2)?;
    other.load(&path)?;
    assert_eq!(other.predict(&x)?.to_vec()?, v);
    std::fs::remove_file(&path).ok();
    Ok(())
}
