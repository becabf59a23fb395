//! The Keras-style `summary()` table, rendered at expansion time into a string literal.

use crate::analyse::{FieldBody, Plan};
use crate::parse::model::Field;
use crate::spec::fmt_shape;

/// `61706` → `61,706`.
pub fn thousands(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn render(name: &str, fields: &[Field], plan: &Plan) -> String {
    let mut rows: Vec<(String, String, String)> = vec![("input (Input)".into(), fmt_shape(&plan.input), "0".into())];
    for (f, p) in fields.iter().zip(&plan.fields) {
        match &p.body {
            FieldBody::Layers(outs) => {
                for (i, o) in outs.iter().enumerate() {
                    let params = o.trainable.saturating_add(o.buffers);
                    let kind = match o.tied_to() {
                        Some(source) => format!("{}, weight of {source}", o.type_name),
                        None => o.type_name.to_string(),
                    };
                    rows.push((format!("{}.{i} ({kind})", f.name), fmt_shape(&o.output), thousands(params)));
                }
            }
            FieldBody::Nested { info, .. } => {
                let params = info.trainable.saturating_add(info.buffers);
                rows.push((format!("{} ({})", f.name, info.type_name), fmt_shape(&p.output), thousands(params)));
            }
        }
    }
    let header = ("Layer (type)".to_string(), "Output Shape".to_string(), "Param #".to_string());
    let w0 = rows.iter().chain([&header]).map(|r| r.0.len()).max().unwrap_or(0) + 4;
    let w1 = rows.iter().chain([&header]).map(|r| r.1.len()).max().unwrap_or(0) + 4;
    let w2 = rows.iter().chain([&header]).map(|r| r.2.len()).max().unwrap_or(0);
    let width = w0 + w1 + w2 + 1;
    let line = |c: char| c.to_string().repeat(width);
    let row = |r: &(String, String, String)| format!(" {:<w0$}{:<w1$}{:>w2$}", r.0, r.1, r.2);
    let mut s = format!("Model: \"{name}\"\n{}\n{}\n{}\n", line('_'), row(&header), line('='));
    for r in &rows {
        s.push_str(&row(r));
        s.push('\n');
    }
    let total = plan.trainable.saturating_add(plan.buffers);
    s.push_str(&format!(
        "{}\nTotal params: {}\nTrainable params: {}\nNon-trainable params: {}\n{}\nShapes are per sample; the batch axis is not shown.\n",
        line('='),
        thousands(total),
        thousands(plan.trainable),
        thousands(plan.buffers),
        line('_')
    ));
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_separators() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(61_706), "61,706");
        assert_eq!(super::thousands(1_234_567), "1,234,567");
    }
}
