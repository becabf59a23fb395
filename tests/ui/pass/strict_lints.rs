//! Generated code is clean under strict lints: a private model, a public documented model
//! nesting it, a custom forward, and nothing unused.
#![deny(warnings, missing_docs, unused, nonstandard_style, rust_2018_idioms, unreachable_pub)]

use rumus::prelude::*;

#[model(input = [4])]
struct Private {
    body: layers![Linear(3), Relu],
}

/// A documented public model.
#[model(input = [4])]
pub struct Public {
    /// The private part.
    inner: Private,
    /// The head.
    pub head: layers![Linear(2), Softmax],
}

mod parts {
    use rumus::prelude::*;

    /// A model of another module, nested through `use`.
    #[model(input = [4])]
    pub(crate) struct Part {
        body: layers![Linear(4), Tanh],
    }
}

use parts::Part;

/// Nests a model imported with `use`.
#[model(input = [4])]
pub struct UsesPart {
    /// The imported model.
    part: Part,
}

/// Custom forward.
#[model(input = [4], output = [4], forward = custom)]
pub struct Custom {
    /// One block.
    block: layers![Linear(4), Tanh],
}

impl Custom {
    /// Skip connection around `block`.
    pub fn forward(&self, x: &Tensor<Shape1<4>>) -> rumus::Result<Tensor<Shape1<4>>> {
        self.forward_block(x)?.add(x)
    }
}

/// A small GPT: Repeat, a tied head and the attention depth.
#[model(input = [8])]
pub struct Gpt {
    /// Token and position embeddings.
    embed: layers![Embedding(12, 8, std = 0.02), PositionalEmbedding(8)],
    /// Two blocks.
    blocks: layers![Repeat(2, TransformerBlock(2))],
    /// Final norm and the tied head.
    head: layers![LayerNorm, Linear(12, bias = false, tie = embed.0)],
}

fn main() -> rumus::Result<()> {
    assert_eq!(Gpt::new(&Device::cpu(), 0)?.parameters().len(), 2 + 2 * 12 + 2);
    let device = Device::cpu();
    let x = Tensor::<Shape1<4>>::zeros(1, &device)?;
    assert_eq!(Public::new(&device, 0)?.forward(&x)?.shape(), &[1, 2]);
    assert_eq!(Custom::new(&device, 0)?.forward(&x)?.shape(), &[1, 4]);
    assert_eq!(UsesPart::new(&device, 0)?.forward(&x)?.shape(), &[1, 4]);
    Ok(())
}
