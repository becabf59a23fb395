//! Nested `#[model]`s reached through modules and crates run the model they name: the nested
//! field is built from its derived seed, its forward is the nested model's own, and parameter
//! counts and names include it. (Compile-time behaviour: tests/ui/pass/nested_through_modules.rs,
//! nested_from_another_crate.rs and the tests/ui/fail/nested_*_mismatch.rs cases.)

use rumus::prelude::*;

mod blocks {
    use rumus::prelude::*;

    #[model(input = [1, 8, 8])]
    pub struct Local {
        pub conv: layers![Conv2d(2, kernel = 3), Relu, MaxPool2d(2), Flatten],
    }
}

mod models {
    use rumus::prelude::*;
    // Imported: the bare name reaches the macro of the same name.
    use super::blocks::Local;
    use rumus_test_models::Backbone;

    #[model(input = [1, 8, 8])]
    pub struct ThroughUse {
        pub local: Local,
        pub head: layers![Linear(3)],
    }

    #[model(input = [1, 8, 8])]
    pub struct FromOtherCrate {
        pub backbone: Backbone,
        pub head: layers![Linear(3)],
    }

    #[model(input = [16])]
    pub struct Tokens {
        pub embed: rumus_test_models::TokenEmbedder,
        pub head: layers![Flatten, Linear(2)],
    }
}

fn assert_same(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.to_bits(), y.to_bits(), "{a:?} != {b:?}");
    }
}

#[test]
fn imported_nested_model_runs_as_built_on_its_own() -> Result<()> {
    let device = Device::cpu();
    let outer = models::ThroughUse::new(&device, 7)?;
    // The nested field is the first seeded item: seed index 0.
    let alone = blocks::Local::new(&device, rumus::__private::derive_seed(7, 0))?;
    let x = Tensor::<Shape3<1, 8, 8>>::randn(3, 5, &device)?;
    let (got, want): (Tensor<Shape1<18>>, Tensor<Shape1<18>>) = (outer.forward_local(&x)?, alone.forward(&x)?);
    assert_same(&got.to_vec()?, &want.to_vec()?);
    let y: Tensor<Shape1<3>> = outer.forward(&x)?;
    assert_eq!(y.shape(), &[3, 3]);
    assert_eq!(models::ThroughUse::TRAINABLE_PARAMS, blocks::Local::TRAINABLE_PARAMS + 18 * 3 + 3);
    assert_eq!(rumus::nn::count_trainable(&outer), models::ThroughUse::TRAINABLE_PARAMS);
    Ok(())
}

#[test]
fn model_from_another_crate_nests_with_its_shapes_counts_and_names() -> Result<()> {
    let device = Device::cpu();
    let outer = models::FromOtherCrate::new(&device, 11)?;
    let alone = rumus_test_models::vision::Backbone::new(&device, rumus::__private::derive_seed(11, 0))?;
    let x = Tensor::<Shape3<1, 8, 8>>::randn(2, 9, &device)?;
    assert_same(&outer.forward_backbone(&x)?.to_vec()?, &alone.forward(&x)?.to_vec()?);
    assert_eq!(models::FromOtherCrate::INPUT, rumus_test_models::Backbone::INPUT);
    assert_eq!(models::FromOtherCrate::TRAINABLE_PARAMS, 2 * 9 + 2 + 18 * 3 + 3);
    let names: Vec<String> = outer.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["backbone.conv.0.weight", "backbone.conv.0.bias", "head.0.weight", "head.0.bias"]);
    Ok(())
}

#[test]
fn embedding_model_from_another_crate_reads_the_outer_input_indices() -> Result<()> {
    let device = Device::cpu();
    let model = models::Tokens::new(&device, 1)?;
    let ids: Vec<u32> = (0..32).map(|i| i % 50).collect();
    let x = Tensor::<Shape1<16>>::from_raw(RawTensor::from_indices(&ids, &[2, 16], &device)?)?;
    let y: Tensor<Shape1<2>> = model.forward(&x)?;
    assert_eq!(y.shape(), &[2, 2]);
    assert_eq!(models::Tokens::TRAINABLE_PARAMS, 50 * 4 + 64 * 2 + 2);
    Ok(())
}
