//! The rule that turns the plays' markdown into plain text.
//!
//! The plays come as one markdown file each: ATX headings for the title, acts and scenes
//! (`# Hamlet`, `## ACT I`, `### SCENE I. Elsinore. ...`), the speaker in bold on its own line
//! (`**BERNARDO**`), stage directions in emphasis (`_Enter Ghost_`, some `*Exeunt.*`), verse
//! lines ending in markdown's two-space hard break, and backslash escapes (`\[Aside]`, `\--`).
//! The text keeps every word and drops the markup, line by line:
//!
//! 1. Line endings `\r\n` and `\r` become `\n`.
//! 2. Trailing whitespace is removed (the hard-break spaces).
//! 3. A heading's leading `#`s (one to six) and the spaces after them are removed.
//! 4. A backslash before an ASCII punctuation character is removed and that character kept
//!    (markdown's escape); every other `*` and `_` is removed (emphasis and bold markers: the
//!    plays hold no literal ones).
//! 5. Trailing whitespace is removed again.
//!
//! Then runs of blank lines become one blank line, and blank lines at the start and end of a
//! play are dropped. [`join_plays`] joins plays with one blank line between them and ends the
//! text with one `\n`.

/// The most `#`s an ATX heading marker has.
const MAX_HEADING_LEVEL: usize = 6;

/// One play's markdown as plain text, by the rule in this module's documentation; no leading or
/// trailing newline. Deterministic: the same markdown always gives the same text.
pub fn markdown_to_text(markdown: &str) -> String {
    let normalised = markdown.replace("\r\n", "\n").replace('\r', "\n");
    let mut lines: Vec<String> = Vec::new();
    for line in normalised.split('\n') {
        let text = plain_line(line);
        let blank = text.is_empty();
        if blank && lines.last().is_none_or(|previous| previous.is_empty()) {
            continue;
        }
        lines.push(text);
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

/// Plays, each already plain text, as one corpus: separated by one blank line, ending with `\n`.
/// Empty plays are skipped.
pub fn join_plays<S: AsRef<str>>(plays: &[S]) -> String {
    let parts: Vec<&str> = plays.iter().map(|p| p.as_ref()).filter(|p| !p.is_empty()).collect();
    let mut text = parts.join("\n\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text
}

/// Steps 2 to 5 of the rule for one line.
fn plain_line(line: &str) -> String {
    let line = strip_heading(line.trim_end());
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|n| n.is_ascii_punctuation()) => {
                if let Some(escaped) = chars.next() {
                    out.push(escaped);
                }
            }
            '*' | '_' => {}
            _ => out.push(c),
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// `line` without an ATX heading marker: one to six `#`s followed by spaces or the line's end.
fn strip_heading(line: &str) -> &str {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if hashes == 0 || hashes > MAX_HEADING_LEVEL {
        return line;
    }
    let rest = &line[hashes..];
    if rest.is_empty() || rest.starts_with(' ') {
        rest.trim_start_matches(' ')
    } else {
        line
    }
}
