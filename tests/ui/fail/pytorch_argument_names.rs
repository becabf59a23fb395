// PyTorch's and Keras's argument names get a did-you-mean (each a mistake of its own).
use rumus::prelude::*;

#[model(input = [1, 8, 8])]
pub struct Net {
    features: layers![Conv2d(4, kernel_size = 3), MaxPool2d(pool_size = 2), Flatten],
    head: layers![Linear(out_features = 10), Dropout(rate = 0.5)],
}

#[model(input = [16])]
pub struct Seq {
    body: layers![Embedding(num_embeddings = 100, embedding_dim = 8), MultiHeadAttention(num_heads = 2)],
}

#[model(input = [8])]
pub struct Keras {
    body: layers![Dense(10), Dropout(p = 0.1, p = 0.2)],
}

fn main() {}
