//! Token streams → a small AST of layer calls and argument values, keeping the tokens of every
//! piece so errors can be spanned on exactly what the user wrote.
//!
//! The layer DSL is parsed by hand over `proc_macro2` token trees rather than with syn's expression
//! grammar: the DSL (`Linear(400 => 120)`, `padding = same`) is not Rust expression syntax, and a
//! hand parser makes every malformed input an error instead of a surprise.

pub mod model;

use std::fmt;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::Error;

pub type Result<T> = std::result::Result<T, Error>;

/// One layer as written: `Conv2d(6, kernel = 5)` or `Relu`.
#[derive(Clone, Debug)]
pub struct LayerCall {
    pub name: syn::Ident,
    pub args: Vec<Arg>,
    /// The tokens as written, so errors can span the whole call.
    pub tokens: TokenStream,
}

/// `value` or `name = value`.
#[derive(Clone, Debug)]
pub struct Arg {
    pub name: Option<syn::Ident>,
    pub value: Value,
    pub tokens: TokenStream,
}

#[derive(Clone, Debug)]
pub struct Value {
    pub kind: ValueKind,
    pub tokens: TokenStream,
}

#[derive(Clone, Debug)]
pub enum ValueKind {
    Int(i128),
    Float(f64),
    Bool(bool),
    /// A bare word such as `same` (or a layer without arguments inside `Residual`).
    Word(syn::Ident),
    /// `(a, b)`
    Tuple(Vec<Value>),
    /// `[a, b]`
    List(Vec<Value>),
    /// `in => out`
    Arrow(Box<Value>, Box<Value>),
    /// `Name(args)` (layers nested in `Residual`).
    Call(LayerCall),
    /// `field.index`: a layer of the model (`tie = embed.0`).
    Ref(syn::Ident, i128),
}

/// Splits a token stream at top-level commas. A trailing comma is allowed; an empty piece in the
/// middle (`a,,b`) is reported.
pub fn split_commas(tokens: TokenStream) -> Result<Vec<TokenStream>> {
    let mut pieces = Vec::new();
    let mut current = TokenStream::new();
    for tt in tokens {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                if current.is_empty() {
                    return Err(Error::new(p.span(), "unexpected `,`: an item is missing before it"));
                }
                pieces.push(std::mem::take(&mut current));
            }
            _ => current.extend(std::iter::once(tt)),
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    Ok(pieces)
}

/// Nesting deeper than this (`Residual(Residual(...))`, `((((1))))`) is reported rather than
/// recursed into, so no input can exhaust the compiler's stack.
const MAX_DEPTH: usize = 32;

fn check_depth(depth: usize, tokens: &TokenStream) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::new_spanned(tokens, format!("nested more than {MAX_DEPTH} levels deep")));
    }
    Ok(())
}

/// Parses `A, B(args), ...` (the inside of `layers![...]` or of `Residual(...)`).
pub fn parse_layer_list(tokens: TokenStream) -> Result<Vec<LayerCall>> {
    split_commas(tokens)?.into_iter().map(|t| layer_at(t, 0)).collect()
}

/// Parses one `Name` or `Name(args)`.
fn layer_at(tokens: TokenStream, depth: usize) -> Result<LayerCall> {
    check_depth(depth, &tokens)?;
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let name = match trees.first() {
        Some(TokenTree::Ident(id)) => id.clone(),
        _ => {
            return Err(Error::new_spanned(
                &tokens,
                "expected a layer such as `Linear(10)`, `Relu` or `Conv2d(16, kernel = 3)`",
            ))
        }
    };
    let args = match trees.get(1) {
        None => Vec::new(),
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => {
            split_commas(g.stream())?.into_iter().map(|t| arg_at(t, depth + 1)).collect::<Result<_>>()?
        }
        // `nn.Linear(..)` or `nn::Linear(..)`: a module path in front of the layer.
        Some(TokenTree::Punct(p)) if p.as_char() == '.' || p.as_char() == ':' => {
            let rest: Vec<String> = trees[1..].iter().map(|t| t.to_string()).collect();
            return Err(Error::new_spanned(
                &tokens,
                format!(
                    "layers are written by their name alone, without a module path: `{name}{}` is not a layer\nhint: write the layer's name, e.g. `Linear(10)` for PyTorch's `nn.Linear(..)`",
                    rest.join("")
                ),
            ));
        }
        Some(other) => {
            return Err(Error::new(
                other.span(),
                format!("expected `(` or `,` after layer `{name}`; layer arguments go in parentheses"),
            ))
        }
    };
    if let Some(extra) = trees.get(2) {
        return Err(Error::new(extra.span(), format!("unexpected tokens after `{name}(...)`; missing a `,`?")));
    }
    Ok(LayerCall { name, args, tokens })
}

/// Parses `value` or `name = value`.
pub fn parse_arg(tokens: TokenStream) -> Result<Arg> {
    arg_at(tokens, 0)
}

fn arg_at(tokens: TokenStream, depth: usize) -> Result<Arg> {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    if let (Some(TokenTree::Ident(id)), Some(TokenTree::Punct(eq))) = (trees.first(), trees.get(1)) {
        // `name = value`, but not `name => value`.
        if eq.as_char() == '=' && eq.spacing() == Spacing::Alone {
            let rest: TokenStream = trees[2..].iter().cloned().collect();
            if rest.is_empty() {
                return Err(Error::new(eq.span(), format!("argument `{id}` has no value after `=`")));
            }
            return Ok(Arg { name: Some(id.clone()), value: value_at(rest, depth)?, tokens });
        }
    }
    Ok(Arg { name: None, value: value_at(tokens.clone(), depth)?, tokens })
}

/// Parses a value: a number, `true`/`false`, a word, `(a, b)`, `[a, b]`, `a => b` or `Name(..)`.
pub fn parse_value(tokens: TokenStream) -> Result<Value> {
    value_at(tokens, 0)
}

fn value_at(tokens: TokenStream, depth: usize) -> Result<Value> {
    check_depth(depth, &tokens)?;
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    // `in => out`: find a top-level `=>`.
    for i in 0..trees.len().saturating_sub(1) {
        if let (TokenTree::Punct(a), TokenTree::Punct(b)) = (&trees[i], &trees[i + 1]) {
            if a.as_char() == '=' && a.spacing() == Spacing::Joint && b.as_char() == '>' {
                let lhs: TokenStream = trees[..i].iter().cloned().collect();
                let rhs: TokenStream = trees[i + 2..].iter().cloned().collect();
                if lhs.is_empty() || rhs.is_empty() {
                    return Err(Error::new_spanned(&tokens, "`=>` needs a value on both sides, e.g. `400 => 120`"));
                }
                let kind = ValueKind::Arrow(Box::new(value_at(lhs, depth + 1)?), Box::new(value_at(rhs, depth + 1)?));
                return Ok(Value { kind, tokens });
            }
        }
    }
    let kind = match trees.as_slice() {
        [TokenTree::Literal(lit)] => parse_literal(lit, false)?,
        [TokenTree::Punct(minus), TokenTree::Literal(lit)] if minus.as_char() == '-' => parse_literal(lit, true)?,
        [TokenTree::Ident(id)] if id == "true" => ValueKind::Bool(true),
        [TokenTree::Ident(id)] if id == "false" => ValueKind::Bool(false),
        [TokenTree::Ident(id)] => ValueKind::Word(id.clone()),
        [TokenTree::Ident(field), TokenTree::Punct(dot), TokenTree::Literal(lit)] if dot.as_char() == '.' => {
            match parse_literal(lit, false)? {
                ValueKind::Int(index) => ValueKind::Ref(field.clone(), index),
                _ => {
                    return Err(Error::new_spanned(
                        &tokens,
                        format!("expected a layer `field.index` such as `{field}.0`, got `{}`", tokens),
                    ))
                }
            }
        }
        [TokenTree::Ident(_), TokenTree::Group(g)] if g.delimiter() == Delimiter::Parenthesis => {
            ValueKind::Call(layer_at(tokens.clone(), depth + 1)?)
        }
        [TokenTree::Group(g)] if g.delimiter() == Delimiter::Parenthesis => ValueKind::Tuple(
            split_commas(g.stream())?.into_iter().map(|t| value_at(t, depth + 1)).collect::<Result<_>>()?,
        ),
        [TokenTree::Group(g)] if g.delimiter() == Delimiter::Bracket => ValueKind::List(
            split_commas(g.stream())?.into_iter().map(|t| value_at(t, depth + 1)).collect::<Result<_>>()?,
        ),
        // Tokens from macro_rules can arrive wrapped in invisible groups.
        [TokenTree::Group(g)] if g.delimiter() == Delimiter::None => return value_at(g.stream(), depth + 1),
        // `Residual(a, b; shortcut = (..))`: a separator from another language.
        _ if trees.iter().any(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';')) => {
            let semi = trees.iter().find(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';'));
            let span = semi.map_or_else(proc_macro2::Span::call_site, |t| t.span());
            return Err(Error::new(
                span,
                "unexpected `;`: arguments are separated by `,`\nhint: a Residual's shortcut follows its layers after a comma, e.g. `Residual(Linear(8), Relu, shortcut = Linear(8))`",
            ));
        }
        _ => {
            return Err(Error::new_spanned(
                &tokens,
                "expected a number, `true`/`false`, a word such as `same`, a pair `(a, b)` or `in => out`",
            ))
        }
    };
    Ok(Value { kind, tokens })
}

fn parse_literal(lit: &proc_macro2::Literal, negative: bool) -> Result<ValueKind> {
    let sign = if negative { -1 } else { 1 };
    match syn::Lit::new(lit.clone()) {
        syn::Lit::Int(i) => {
            let v: i128 = i.base10_parse().map_err(|_| Error::new(lit.span(), "integer literal is too large"))?;
            Ok(ValueKind::Int(sign * v))
        }
        syn::Lit::Float(f) => {
            let v: f64 = f.base10_parse().map_err(|_| Error::new(lit.span(), "invalid float literal"))?;
            Ok(ValueKind::Float(sign as f64 * v))
        }
        _ => Err(Error::new(
            lit.span(),
            format!("expected a number or a word here, not the literal {lit}\nhint: words such as `same` are written without quotes"),
        )),
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ValueKind::Int(v) => write!(f, "{v}"),
            ValueKind::Float(v) => write!(f, "{v:?}"),
            ValueKind::Bool(b) => write!(f, "{b}"),
            ValueKind::Word(w) => write!(f, "{w}"),
            ValueKind::Tuple(vs) => write!(f, "({})", join(vs)),
            ValueKind::List(vs) => write!(f, "[{}]", join(vs)),
            ValueKind::Arrow(a, b) => write!(f, "{a} => {b}"),
            ValueKind::Call(c) => write!(f, "{c}"),
            ValueKind::Ref(field, index) => write!(f, "{field}.{index}"),
        }
    }
}

fn join(vs: &[Value]) -> String {
    vs.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "{n} = {}", self.value),
            None => write!(f, "{}", self.value),
        }
    }
}

/// Writes the layer as the user did, normalised: `Conv2d(16, kernel = 5)`.
impl fmt::Display for LayerCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        if !self.args.is_empty() {
            let args: Vec<String> = self.args.iter().map(|a| a.to_string()).collect();
            write!(f, "({})", args.join(", "))?;
        }
        Ok(())
    }
}

impl ToTokens for LayerCall {
    fn to_tokens(&self, out: &mut TokenStream) {
        self.tokens.to_tokens(out)
    }
}

impl ToTokens for Arg {
    fn to_tokens(&self, out: &mut TokenStream) {
        self.tokens.to_tokens(out)
    }
}

impl ToTokens for Value {
    fn to_tokens(&self, out: &mut TokenStream) {
        self.tokens.to_tokens(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(src: &str) -> Vec<LayerCall> {
        parse_layer_list(src.parse().unwrap()).unwrap()
    }

    #[test]
    fn parses_calls_and_displays_them_normalised() {
        let l = layers(
            "Conv2d(6, kernel = 5, padding = same), Relu, Linear(400 => 120), Reshape(-1, 4), MaxPool2d((2, 3))",
        );
        let shown: Vec<String> = l.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            shown,
            [
                "Conv2d(6, kernel = 5, padding = same)",
                "Relu",
                "Linear(400 => 120)",
                "Reshape(-1, 4)",
                "MaxPool2d((2, 3))"
            ]
        );
    }

    #[test]
    fn parses_layer_references() {
        let l = layers("Linear(84, bias = false, tie = embed.0)");
        assert!(matches!(&l[0].args[2].value.kind, ValueKind::Ref(f, 0) if f == "embed"));
        assert_eq!(l[0].to_string(), "Linear(84, bias = false, tie = embed.0)");
        // `embed.0.1` lexes as `embed`, `.`, `0.1`: not a layer.
        assert!(parse_layer_list("Linear(8, tie = embed.0.1)".parse().unwrap()).is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!("Residual({}Relu{})", "Residual(".repeat(5000), ")".repeat(5000));
        assert!(parse_layer_list(deep.parse().unwrap()).is_err());
        let deep = format!("Reshape({}1{})", "(".repeat(5000), ")".repeat(5000));
        assert!(parse_layer_list(deep.parse().unwrap()).is_err());
    }

    #[test]
    fn a_semicolon_before_the_shortcut_is_explained() {
        let e = parse_layer_list("Residual(Linear(8), Relu; shortcut = Linear(8))".parse().unwrap()).unwrap_err();
        assert!(e.to_string().starts_with("unexpected `;`: arguments are separated by `,`"), "{e}");
    }

    #[test]
    fn rejects_malformed_pieces() {
        for bad in ["Linear(10) Relu", "1", "Linear(,)", "Conv2d(kernel = )", "Linear(=> 3)", "Foo[3]", "Linear(\"a\")"]
        {
            assert!(parse_layer_list(bad.parse().unwrap()).is_err(), "{bad} parsed");
        }
    }
}
