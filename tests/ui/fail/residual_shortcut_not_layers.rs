// `shortcut` takes a layer or layers in parentheses, after a comma; an empty list is not the
// identity.
use rumus::prelude::*;

#[model(input = [16])]
pub struct Numbers {
    body: layers![Residual(Linear(16), shortcut = (Linear(16), 2))],
}

#[model(input = [16])]
pub struct Empty {
    body: layers![Residual(Linear(16), shortcut = ())],
}

#[model(input = [16])]
pub struct Positional {
    body: layers![Residual(Linear(32), Relu, (Linear(32), Relu))],
}

#[model(input = [16])]
pub struct Semicolon {
    body: layers![Residual(Linear(16), Relu; shortcut = Linear(16))],
}

fn main() {}
