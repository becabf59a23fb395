//! A `#[model]` struct's plan: walks the fields in declaration order from the model input, each
//! `layers![..]` field through [`infer_list`], each nested model through the shapes its callback
//! reported, to every field's shapes and layers and the model's totals.

use std::collections::HashMap;

use syn::Error;

use super::plan::{FieldBody, FieldPlan, Plan, Stop};
use super::walk::{check_call, infer_list, Ctx, Producer};
use crate::parse::model::{Field, FieldKind, ModelArgs, NestedInfo};
use crate::spec::{fmt_shape, Shape};

/// Walks the fields in declaration order from the model input.
pub fn plan(
    item: &syn::ItemStruct,
    args: &ModelArgs,
    fields: &[Field],
    known: &HashMap<String, NestedInfo>,
) -> std::result::Result<Plan, Stop> {
    let Some((input, _)) = &args.input else {
        let e = Error::new_spanned(
            &item.ident,
            format!(
                "#[model] needs the per-sample input shape (batch axis excluded)\nhint: write e.g. `#[model(input = [1, 28, 28])]` above `struct {}`",
                item.ident
            ),
        );
        return Err(Stop { error: Some(e), done: Vec::new(), next_input: None });
    };
    let mut ctx =
        Ctx::new(fields.iter().map(|f| (f.name.to_string(), matches!(f.kind, FieldKind::Layers(_)))).collect());
    let mut prod = Producer::input("the model input", input.clone());
    let mut plans: Vec<FieldPlan> = Vec::new();
    let (mut trainable, mut buffers, mut indices) = (0u128, 0u128, false);
    for (i, f) in fields.iter().enumerate() {
        let stop = |error: Option<Error>, plans: &[FieldPlan], at: &Shape| Stop {
            error,
            done: plans.iter().map(|p| (p.input.clone(), p.output.clone())).collect(),
            next_input: Some(at.clone()),
        };
        if let Some((shape, tokens)) = &f.input {
            if !args.custom {
                let e = Error::new_spanned(
                    tokens,
                    format!("`#[input]` on field `{}` only applies with `#[model(forward = custom)]`; the generated forward runs the fields in order", f.name),
                );
                return Err(stop(Some(e), &plans, &prod.shape));
            }
            prod = Producer::input(format!("the input of `{}`", f.name), shape.clone());
        }
        let field_input = prod.shape.clone();
        ctx.field = f.name.to_string();
        let from_model_input = i == 0 && f.input.is_none();
        let body = match plan_field(f, prod.clone(), known, &mut ctx) {
            Ok((body, next)) => {
                prod = next;
                body
            }
            Err(error) => {
                let error = with_later_fields(error, &fields[i + 1..]);
                return Err(stop(error, &plans, &field_input));
            }
        };
        let (t, b) = match &body {
            FieldBody::Layers(outs) => outs
                .iter()
                .fold((0u128, 0u128), |(t, b), o| (t.saturating_add(o.trainable), b.saturating_add(o.buffers))),
            FieldBody::Nested { info, .. } => (info.trainable, info.buffers),
        };
        indices |= from_model_input
            && match (&body, &f.kind) {
                (FieldBody::Nested { info, .. }, _) => info.indices,
                (_, FieldKind::Layers(layers)) => layers.first().is_some_and(|l| l.name == "Embedding"),
                _ => false,
            };
        trainable = trainable.saturating_add(t);
        buffers = buffers.saturating_add(b);
        if prod.shape.is_empty() || prod.shape.len() > 4 {
            let e = Error::new_spanned(
                &f.ty_tokens,
                format!(
                    "field `{}` produces {} of rank {}, but typed tensors have rank 1 to 4\nhint: Flatten or Reshape inside the field",
                    f.name,
                    fmt_shape(&prod.shape),
                    prod.shape.len()
                ),
            );
            return Err(stop(Some(e), &plans, &field_input));
        }
        plans.push(FieldPlan { input: field_input, output: prod.shape.clone(), body });
    }
    let done: Vec<(Shape, Shape)> = plans.iter().map(|p| (p.input.clone(), p.output.clone())).collect();
    let fail = |e: Error| Stop { error: Some(e), done: done.clone(), next_input: None };
    if trainable.saturating_add(buffers) > u64::MAX as u128 / 4 {
        return Err(fail(Error::new_spanned(&item.ident, "the model's parameter count overflows")));
    }
    let output = match &args.output {
        Some((declared, tokens)) => {
            if !args.custom && *declared != prod.shape {
                return Err(fail(Error::new_spanned(
                    tokens,
                    format!(
                        "#[model(output = {})] does not match the layers: {}\nhint: the output is inferred; remove `output` or fix the layers",
                        fmt_shape(declared),
                        prod.got()
                    ),
                )));
            }
            declared.clone()
        }
        None if args.custom => {
            return Err(fail(Error::new_spanned(
                &item.ident,
                "`forward = custom` needs the output shape: `#[model(input = [..], output = [..], forward = custom)]`",
            )));
        }
        None => prod.shape.clone(),
    };
    Ok(Plan {
        input: input.clone(),
        output,
        fields: plans,
        trainable,
        buffers,
        indices,
        tied: ctx.tied,
        attention_layers: ctx.attention_layers,
    })
}

/// Plans one field from `prod`; `Err(None)` when it is a nested model with its own error.
fn plan_field(
    f: &Field,
    prod: Producer,
    known: &HashMap<String, NestedInfo>,
    ctx: &mut Ctx,
) -> std::result::Result<(FieldBody, Producer), Option<Error>> {
    match &f.kind {
        FieldKind::Layers(layers) => {
            let (outs, last) = infer_list(layers, prod, ctx)?;
            Ok((FieldBody::Layers(outs), last))
        }
        FieldKind::Nested(path) => {
            let Some(info) = known.get(&f.name.to_string()) else {
                return Err(Some(Error::new_spanned(
                    path,
                    "nested model information is missing (bug in rumus-macros)",
                )));
            };
            if info.poisoned {
                return Err(None);
            }
            if info.input != prod.shape {
                return Err(Some(Error::new_spanned(
                    &f.ty_tokens,
                    format!(
                        "{} expects input {}, but {}\nhint: the nested model's #[model(input = ..)] must equal the shape at field `{}`",
                        info.type_name,
                        fmt_shape(&info.input),
                        prod.got(),
                        f.name
                    ),
                )));
            }
            if info.indices && !prod.indices {
                return Err(Some(Error::new_spanned(
                    &f.ty_tokens,
                    format!(
                        "{} starts with an Embedding, which reads token indices, but {}, which are not indices\nhint: put `{}` first, on the model input, or start it with a layer that takes features",
                        info.type_name,
                        prod.got(),
                        f.name
                    ),
                )));
            }
            let next = Producer::output(info.type_name.clone(), info.output.clone(), None);
            Ok((FieldBody::Nested { path: path.clone(), info: info.clone(), seed: ctx.seed() }, next))
        }
    }
}

/// Adds to `e` the shape-independent errors (unknown layers and arguments) of `fields`, so one
/// build reports them all.
fn with_later_fields(mut e: Option<Error>, fields: &[Field]) -> Option<Error> {
    for f in fields {
        if let FieldKind::Layers(layers) = &f.kind {
            for call in layers {
                if let Err(more) = check_call(call) {
                    match &mut e {
                        Some(all) => all.combine(more),
                        None => e = Some(more),
                    }
                }
            }
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::model::{parse_args, parse_fields, parse_known};

    fn plan_of(attr: &str, item: &str, known: &str) -> std::result::Result<Plan, Stop> {
        let item: syn::ItemStruct = syn::parse_str(item).unwrap();
        let args = parse_args(attr.parse().unwrap()).unwrap();
        let fields = parse_fields(&item).unwrap();
        plan(&item, &args, &fields, &parse_known(known.parse().unwrap()).unwrap())
    }

    fn error_of(attr: &str, item: &str, known: &str) -> String {
        plan_of(attr, item, known).err().and_then(|s| s.error).expect("an error").to_string()
    }

    #[test]
    fn a_model_reads_indices_when_its_input_goes_into_an_embedding() {
        let p = plan_of("input = [16]", "struct T { e: layers![Embedding(10, 4)] }", "").unwrap();
        assert!(p.indices);
        let p = plan_of("input = [16]", "struct T { e: layers![Linear(4)] }", "").unwrap();
        assert!(!p.indices);
        // Through a nested model that itself reads indices.
        let known = "t { input = [16], output = [16, 4], trainable = 40, buffers = 0, name = Tok, indices = true }";
        let p = plan_of("input = [16]", "struct O { t: Tok, h: layers![Flatten, Linear(2)] }", known).unwrap();
        assert!(p.indices);
    }

    #[test]
    fn an_index_reading_nested_model_after_a_layer_is_an_error() {
        let known = "t { input = [16], output = [16, 4], trainable = 40, buffers = 0, name = Tok, indices = true }";
        let m = error_of("input = [4]", "struct O { a: layers![Linear(16)], t: Tok }", known);
        assert!(m.starts_with("Tok starts with an Embedding, which reads token indices, but Linear(4 => 16)"), "{m}");
        // With a custom forward, a field's `#[input]` may take indices.
        let ok = plan_of(
            "input = [4], output = [16, 4], forward = custom",
            "struct O { a: layers![Linear(16)], #[input = [16]] t: Tok }",
            known,
        );
        assert!(ok.is_ok());
    }

    #[test]
    fn a_poisoned_nested_model_stops_the_plan_without_an_error_but_keeps_earlier_fields() {
        let stop = plan_of(
            "input = [8]",
            "struct O { a: layers![Linear(6)], i: Inner, b: layers![Linear(2)] }",
            "i { poisoned = true, name = Inner }",
        )
        .err()
        .unwrap();
        assert!(stop.error.is_none());
        assert_eq!(stop.done, vec![(vec![8], vec![6])]);
        assert_eq!(stop.next_input, Some(vec![6]));
        // A shape-independent mistake after it is still reported.
        let m = error_of(
            "input = [8]",
            "struct O { i: Inner, b: layers![Lineer(2)] }",
            "i { poisoned = true, name = Inner }",
        );
        assert!(m.starts_with("unknown layer `Lineer`"), "{m}");
    }
}
