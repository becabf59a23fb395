//! Runtime behaviour of `#[model]`-generated code.

use rumus::prelude::*;

#[model(input = [8])]
pub struct Mlp {
    body: layers![Linear(16), Relu, Linear(4)],
}

#[model(input = [4])]
struct Outer {
    inner_first: Mlp2,
    head: layers![Linear(3)],
}

#[model(input = [4])]
struct Mlp2 {
    body: layers![Linear(4 => 5), Tanh],
}

#[test]
fn mlp_runs() -> Result<()> {
    let d = Device::cpu();
    let m = Mlp::new(&d, 1)?;
    let x = Tensor::<Shape1<8>>::randn(2, 3, &d)?;
    let y = m.forward(&x)?;
    assert_eq!(y.shape(), &[2, 4]);
    println!("{}", Mlp::summary());
    let o = Outer::new(&d, 1)?;
    println!("{}", Outer::summary());
    let names: Vec<String> = o.named_parameters().into_iter().map(|(n, _)| n).collect();
    println!("{names:?}");
    Ok(())
}
