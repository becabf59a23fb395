//! Property test: the macro never panics. Feeds mutated versions of a corpus of models (deleted,
//! duplicated, swapped and replaced tokens, random numbers, truncation) through the full
//! expansion, which must return tokens — a spanned `compile_error!` or code — every time.

use proc_macro2::{Delimiter, Group, Literal, Punct, Spacing, TokenStream, TokenTree};

use crate::generate;

const CORPUS: &[(&str, &str)] = &[
    (
        "input = [1, 28, 28]",
        "pub struct LeNet { features: layers![Conv2d(6, kernel = 5, padding = 2), Relu, MaxPool2d(2), Conv2d(16, kernel = 5), Relu, MaxPool2d(2)], head: layers![Flatten, Linear(120), Relu, Linear(84), Relu, Linear(10)] }",
    ),
    ("input = [784]", "struct Mlp { body: layers![Linear(784 => 300), Relu, Dropout(0.2), Linear(100), Relu, Linear(10), LogSoftmax] }"),
    (
        "input = [3, 32, 32]",
        "struct Res { stem: layers![Conv2d(3 => 16, kernel = (3, 3), stride = 1, padding = same, bias = false), BatchNorm2d(16, eps = 1e-5, momentum = 0.1), GroupNorm(4), InstanceNorm2d(affine = true), Relu, Residual(Conv2d(16, kernel = 3, padding = 1), Relu), AvgPool2d(2, stride = 2), AdaptiveAvgPool2d(1, 1), Flatten, Linear(10)] }",
    ),
    (
        "input = [16], output = [16, 32], forward = custom",
        "struct Lm { #[input = [16]] emb: layers![Embedding(100, 32), MultiHeadAttention(4), LayerNorm(32, eps = 1e-6), RmsNorm(eps = 1e-5), Gelu, GeluTanh, Silu, Sigmoid, Tanh, LeakyRelu(0.1), Softmax(axis = -1)], other: Inner }",
    ),
    (
        "input = [32]",
        "pub struct Gpt { embed: layers![Embedding(84, 64, std = 0.02), PositionalEmbedding(32), Dropout(0.2)], blocks: layers![Repeat(3, TransformerBlock(4, dropout = 0.2), CausalSelfAttention(2, bias = false))], head: layers![LayerNorm, MultiHeadAttention(4, causal = true), Linear(84, bias = false, tie = embed.0)] }",
    ),
    ("input = [2, 8]", "struct R { a: layers![Reshape(4, -1), Flatten, BatchNorm1d, Linear(16 => 4, bias = false)], b: layers![MaxPool2d((2, 1), padding = (0, 0), dilation = 1)] }"),
    (
        "input = [1, 8, 8]",
        "struct Ae { enc: layers![Conv2d(4, kernel = 3, stride = 2, padding = 1), GlobalMaxPool, Reshape(4, 1, 1), ConvTranspose2d(4 => 2, kernel = (3, 3), stride = 2, padding = 1, output_padding = 1, bias = false), Upsample(2, mode = bilinear), GlobalAvgPool], seq: layers![Reshape(1, 2), Conv1d(4, kernel = 1, padding = same), MaxPool1d(1, dilation = 1), AvgPool1d(1, stride = 1, padding = 0)] }",
    ),
    (
        "input = [4, 9, 9]",
        "struct Down { block: layers![Residual(Conv2d(8, 3, stride = 2, padding = 1, bias = false), BatchNorm2d, Relu, Conv2d(8, 3, padding = 1, bias = false), BatchNorm2d, shortcut = (Conv2d(8, 1, stride = 2, bias = false), BatchNorm2d)), Relu, Flatten, Residual(Linear(16), shortcut = Linear(16))] }",
    ),
    (
        "input = [28, 28]",
        "struct Rnn { body: layers![Lstm(32, layers = 2, bidirectional = true, dropout = 0.1), Gru(16, return_sequences = false), Linear(10)] }",
    ),
];

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn random_token(rng: &mut Rng) -> TokenTree {
    match rng.below(10) {
        0 => TokenTree::Literal(Literal::i64_unsuffixed(rng.next() as i64 % 100_000 - 50_000)),
        1 => TokenTree::Literal(Literal::u64_unsuffixed(rng.next())),
        2 => TokenTree::Literal(Literal::u64_unsuffixed(0)),
        3 => TokenTree::Literal(Literal::f64_unsuffixed((rng.below(1000) as f64) / 7.0)),
        4 => TokenTree::Literal(Literal::string("x")),
        5 => TokenTree::Punct(Punct::new([',', '=', '-', '>', ':', '#', '!', ';'][rng.below(8)], Spacing::Alone)),
        6 => TokenTree::Punct(Punct::new('=', Spacing::Joint)),
        7 => TokenTree::Group(Group::new(
            [Delimiter::Parenthesis, Delimiter::Bracket, Delimiter::Brace, Delimiter::None][rng.below(4)],
            TokenStream::new(),
        )),
        _ => {
            let words = [
                "Linear",
                "Conv2d",
                "same",
                "kernel",
                "padding",
                "true",
                "layers",
                "struct",
                "input",
                "Residual",
                "shortcut",
                "groups",
                "x",
                "in",
                "Repeat",
                "tie",
                "embed",
                "TransformerBlock",
                "ConvTranspose2d",
                "Conv1d",
                "Upsample",
                "output_padding",
            ];
            TokenTree::Ident(proc_macro2::Ident::new(words[rng.below(words.len())], proc_macro2::Span::call_site()))
        }
    }
}

/// Mutates one token somewhere in the tree (recursing into groups).
fn mutate(tokens: TokenStream, rng: &mut Rng, depth: usize) -> TokenStream {
    let mut trees: Vec<TokenTree> = tokens.into_iter().collect();
    if trees.is_empty() {
        return TokenStream::from(random_token(rng));
    }
    let i = rng.below(trees.len());
    let descend = depth < 4 && rng.below(3) != 0;
    match (&trees[i], descend) {
        (TokenTree::Group(g), true) => {
            let mut ng = Group::new(g.delimiter(), mutate(g.stream(), rng, depth + 1));
            ng.set_span(g.span());
            trees[i] = TokenTree::Group(ng);
        }
        _ => match rng.below(6) {
            0 => {
                trees.remove(i);
            }
            1 => {
                let t = trees[i].clone();
                trees.insert(i, t);
            }
            2 => {
                let j = rng.below(trees.len());
                trees.swap(i, j);
            }
            3 => trees[i] = random_token(rng),
            4 => trees.insert(i, random_token(rng)),
            _ => trees.truncate(i),
        },
    }
    trees.into_iter().collect()
}

#[test]
fn mutated_models_never_panic() {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut runs = 0;
    let mut errors = 0;
    for round in 0..400 {
        let (attr, item) = CORPUS[round % CORPUS.len()];
        let (mut attr, mut item): (TokenStream, TokenStream) = (attr.parse().unwrap(), item.parse().unwrap());
        // 1 to 3 stacked mutations, mostly in the struct.
        for _ in 0..=rng.below(3) {
            if rng.below(5) == 0 {
                attr = mutate(attr, &mut rng, 0);
            } else {
                item = mutate(item, &mut rng, 0);
            }
        }
        let out = generate::model(attr.clone(), item.clone()).to_string();
        // Also drive the nested-model re-entry with the same pieces.
        let resumed = generate::resume(
            format!("[{attr}] [other {{ input = [16, 32], output = [16, 32], trainable = 3, buffers = 0, name = Inner }}] {item}")
                .parse()
                .unwrap_or_default(),
        );
        assert!(!out.is_empty() && !resumed.is_empty());
        errors += usize::from(out.contains("compile_error"));
        runs += 1;
    }
    assert_eq!(runs, 400);
    // Most mutations break something; the point is that each one is reported, not panicked on.
    assert!(errors > 100, "only {errors} of {runs} mutations produced errors");
}

#[test]
fn random_token_soup_never_panics() {
    let mut rng = Rng(42);
    for _ in 0..300 {
        let n = rng.below(30);
        let soup: TokenStream = (0..n).map(|_| random_token(&mut rng)).collect();
        let _ = generate::model(soup.clone(), soup.clone());
        let _ = generate::resume(soup.clone());
        let _ = crate::parse::parse_layer_list(soup.clone());
        let item: TokenStream = format!("struct S {{ a: layers![{soup}] }}").parse().unwrap_or_default();
        let _ = generate::model("input = [3, 8, 8]".parse().unwrap(), item);
    }
}

#[test]
fn corpus_expands_cleanly() {
    for (attr, item) in CORPUS[..3].iter().chain(&CORPUS[4..5]).chain(&CORPUS[6..]) {
        let out = generate::model(attr.parse().unwrap(), item.parse().unwrap()).to_string();
        assert!(!out.contains("compile_error"), "{out}");
    }
}

/// The spans of every `compile_error!` in `tokens` (searching inside groups too).
fn error_spans(tokens: TokenStream, out: &mut Vec<proc_macro2::Span>) {
    for t in tokens {
        match t {
            TokenTree::Ident(i) if i == "compile_error" => out.push(i.span()),
            TokenTree::Group(g) => error_spans(g.stream(), out),
            _ => {}
        }
    }
}

/// Every malformed model of at least 50 mutations compiles to a `compile_error!` spanned on a
/// token of the input (the proc-macro panics are ruled out by `mutated_models_never_panic`).
#[test]
fn every_error_of_a_mutated_model_points_into_the_source() {
    let mut rng = Rng(0xC0FF_EE00_5EED_0007);
    let (mut errors, mut at_end, mut call_site) = (0, 0, Vec::new());
    for round in 0..200 {
        let (attr, item) = CORPUS[round % CORPUS.len()];
        let (mut attr, mut item): (TokenStream, TokenStream) = (attr.parse().unwrap(), item.parse().unwrap());
        for _ in 0..=rng.below(2) {
            if rng.below(5) == 0 {
                attr = mutate(attr, &mut rng, 0);
            } else {
                item = mutate(item, &mut rng, 0);
            }
        }
        // Re-parse the mutated text so that inserted tokens have source locations too.
        let (Ok(attr), Ok(item)) = (attr.to_string().parse::<TokenStream>(), item.to_string().parse::<TokenStream>())
        else {
            continue;
        };
        let out = generate::model(attr.clone(), item.clone());
        let mut spans = Vec::new();
        error_spans(out.clone(), &mut spans);
        if spans.is_empty() {
            continue;
        }
        errors += 1;
        // The first error must point at source text: a token of the attribute or the struct.
        // The one exception is an item cut short at its top level (`struct Mlp` and nothing
        // after): syn reports the end of input at the call site, which rustc shows on the
        // `#[model]` attribute (and rustc never hands such an item to an attribute anyway).
        if spans[0].source_text().is_none() {
            let text = out.to_string();
            if text.contains("unexpected end of input") {
                at_end += 1;
            } else {
                call_site.push(format!("#[model({attr})] {item}\n   -> {text}"));
            }
        }
    }
    println!("{errors} mutations gave errors; {at_end} at the end of a truncated item");
    assert!(errors - at_end >= 50, "only {errors} mutations produced errors");
    assert!(call_site.is_empty(), "errors without a source span:\n{}", call_site.join("\n"));
}
