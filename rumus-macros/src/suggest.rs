//! "Did you mean" suggestions by edit distance.

/// Levenshtein distance, case-insensitive so `Conv2D` finds `Conv2d`.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest candidate, if it is close enough to be a plausible typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1) + 1;
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_close_names() {
        assert_eq!(did_you_mean("Conv2D", ["Linear", "Conv2d"]), Some("Conv2d"));
        assert_eq!(did_you_mean("Lineer", ["Linear", "Conv2d"]), Some("Linear"));
        assert_eq!(did_you_mean("kernal", ["kernel", "stride"]), Some("kernel"));
        assert_eq!(did_you_mean("Transformer", ["Linear", "Relu"]), None);
    }
}
