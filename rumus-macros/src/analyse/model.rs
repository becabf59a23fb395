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
    for i in 0..fields.len() {
        let (field, next) = plan_one(args, fields, i, prod, known, &mut ctx).map_err(|(error, at)| Stop {
            error,
            done: done(&plans),
            next_input: Some(at),
        })?;
        plans.push(field);
        prod = next;
    }
    let (trainable, buffers) = counts(&plans);
    let fail = |e: Error| Stop { error: Some(e), done: done(&plans), next_input: None };
    if trainable.saturating_add(buffers) > u64::MAX as u128 / 4 {
        return Err(fail(Error::new_spanned(&item.ident, "the model's parameter count overflows")));
    }
    let output = output(item, args, &prod).map_err(fail)?;
    Ok(Plan {
        input: input.clone(),
        output,
        indices: reads_indices(fields, &plans),
        fields: plans,
        trainable,
        buffers,
        tied: ctx.tied,
        attention_layers: ctx.attention_layers,
    })
}

/// `(input, output)` of each planned field.
fn done(plans: &[FieldPlan]) -> Vec<(Shape, Shape)> {
    plans.iter().map(|p| (p.input.clone(), p.output.clone())).collect()
}

/// Field `i` from `prod` (or from its `#[input]`): its plan and what the next field receives, or
/// the error (`None`: a nested model's own) and the shape the field received.
fn plan_one(
    args: &ModelArgs,
    fields: &[Field],
    i: usize,
    mut prod: Producer,
    known: &HashMap<String, NestedInfo>,
    ctx: &mut Ctx,
) -> std::result::Result<(FieldPlan, Producer), (Option<Error>, Shape)> {
    let f = &fields[i];
    if let Some((shape, tokens)) = &f.input {
        if !args.custom {
            let e = Error::new_spanned(
                tokens,
                format!("`#[input]` on field `{}` only applies with `#[model(forward = custom)]`; the generated forward runs the fields in order", f.name),
            );
            return Err((Some(e), prod.shape));
        }
        prod = Producer::input(format!("the input of `{}`", f.name), shape.clone());
    }
    let field_input = prod.shape.clone();
    ctx.field = f.name.to_string();
    let (body, next) = match plan_field(f, prod, known, ctx) {
        Ok(planned) => planned,
        Err(error) => return Err((with_later_fields(error, &fields[i + 1..]), field_input)),
    };
    if next.shape.is_empty() || next.shape.len() > 4 {
        let e = Error::new_spanned(
            &f.ty_tokens,
            format!(
                "field `{}` produces {} of rank {}, but typed tensors have rank 1 to 4\nhint: Flatten or Reshape inside the field",
                f.name,
                fmt_shape(&next.shape),
                next.shape.len()
            ),
        );
        return Err((Some(e), field_input));
    }
    Ok((FieldPlan { input: field_input, output: next.shape.clone(), body }, next))
}

/// Trainable scalars and buffers of the planned fields.
fn counts(plans: &[FieldPlan]) -> (u128, u128) {
    plans.iter().fold((0u128, 0u128), |(t, b), p| {
        let (ft, fb) = match &p.body {
            FieldBody::Layers(layers) => layers
                .iter()
                .fold((0u128, 0u128), |(t, b), l| (t.saturating_add(l.trainable), b.saturating_add(l.buffers))),
            FieldBody::Nested { info, .. } => (info.trainable, info.buffers),
        };
        (t.saturating_add(ft), b.saturating_add(fb))
    })
}

/// The model reads token indices: its first field takes the model input straight into an
/// Embedding, or is a nested model that does.
fn reads_indices(fields: &[Field], plans: &[FieldPlan]) -> bool {
    match (fields.first(), plans.first()) {
        (Some(f), Some(p)) if f.input.is_none() => match (&p.body, &f.kind) {
            (FieldBody::Nested { info, .. }, _) => info.indices,
            (_, FieldKind::Layers(layers)) => layers.first().is_some_and(|l| l.name == "Embedding"),
            _ => false,
        },
        _ => false,
    }
}

/// The model's output: inferred, or declared (and then checked unless the forward is custom).
fn output(item: &syn::ItemStruct, args: &ModelArgs, prod: &Producer) -> std::result::Result<Shape, Error> {
    match &args.output {
        Some((declared, tokens)) => {
            if !args.custom && *declared != prod.shape {
                return Err(Error::new_spanned(
                    tokens,
                    format!(
                        "#[model(output = {})] does not match the layers: {}\nhint: the output is inferred; remove `output` or fix the layers",
                        fmt_shape(declared),
                        prod.got()
                    ),
                ));
            }
            Ok(declared.clone())
        }
        None if args.custom => Err(Error::new_spanned(
            &item.ident,
            "`forward = custom` needs the output shape: `#[model(input = [..], output = [..], forward = custom)]`",
        )),
        None => Ok(prod.shape.clone()),
    }
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
