// A model with 10 logits per position cannot be fitted on targets over a vocabulary of 12.
use rumus::prelude::*;

#[model(input = [8])]
pub struct Lm {
    body: layers![Embedding(10, 4), PositionalEmbedding(8), TransformerBlock(2), Linear(10)],
}

/// Next-token targets: `[batch, 8]` class ids below 12.
struct Tokens;

impl Dataset for Tokens {
    type Sample = Shape1<8>;
    type Target = SeqClass<8, 12>;
    fn len(&self) -> usize {
        1
    }
    fn get_batch(&self, _indices: &[usize], _device: &Device) -> Result<(Tensor<Shape1<8>>, RawTensor)> {
        Err(Error::Data("not read by this test".into()))
    }
}

fn main() -> Result<()> {
    let mut lm = Lm::new(&Device::cpu(), 0)?;
    lm.fit(&Tokens, Fit::epochs(1))?;
    Ok(())
}
