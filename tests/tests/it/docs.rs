//! The pages users read agree with the code: the README's features table lists exactly the
//! features `runtime/Cargo.toml` declares (whose `##` comments are the features' documentation on
//! docs.rs, the one description: the examples' features forward to them), the test command is
//! written once (`.ci/run`), and the README stays a page read in five minutes.

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// burn-stoker's features, as `runtime/Cargo.toml` declares them, but `default` and `gpu` (what
/// every GPU backend turns on, not one to ask for).
fn cargo_features() -> BTreeSet<String> {
    let manifest = read("runtime/Cargo.toml");
    let section = manifest.split("\n[features]\n").nth(1).expect("a [features] section");
    let section = section.split("\n[").next().unwrap();
    section
        .lines()
        .filter(|line| !line.starts_with('#') && line.contains(" = "))
        .map(|line| line.split(" = ").next().unwrap().trim().to_string())
        .filter(|name| name != "default" && name != "gpu")
        .collect()
}

/// The features the README's table names: the backticked names of its first column.
fn readme_features() -> BTreeSet<String> {
    let readme = read("README.md");
    let table = readme.split("| feature | what it turns on | default |").nth(1).expect("the features table");
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .flat_map(|line| {
            let first = line.split('|').nth(1).unwrap_or_default();
            first.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_readme_features_table_lists_exactly_the_crates_features() {
    let (cargo, readme) = (cargo_features(), readme_features());
    assert!(cargo.contains("flex") && cargo.contains("mlflow"), "{cargo:?}");
    let missing: Vec<_> = cargo.difference(&readme).collect();
    let unknown: Vec<_> = readme.difference(&cargo).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "README's features table: missing {missing:?}, not features of burn-stoker {unknown:?}"
    );
}

#[test]
fn every_feature_is_documented_in_cargo_toml() {
    let manifest = read("runtime/Cargo.toml");
    let section = manifest.split("\n[features]\n").nth(1).unwrap().split("\n[").next().unwrap();
    let mut documented = false;
    for line in section.lines() {
        if line.starts_with("## ") {
            documented = true;
        } else if line.contains(" = ") && !line.starts_with('#') {
            let name = line.split(" = ").next().unwrap();
            assert!(documented || name == "default", "feature `{name}` has no `##` comment above it");
            documented = false;
        }
    }
}

#[test]
fn the_readme_is_short_and_dated_nowhere() {
    let readme = read("README.md");
    assert!(readme.lines().count() <= 200, "README.md has {} lines", readme.lines().count());
    for (number, line) in readme.lines().enumerate() {
        let dated = line.as_bytes().windows(7).any(|w| {
            w[..4].iter().all(u8::is_ascii_digit) && w[4] == b'-' && w[5..].iter().all(u8::is_ascii_digit)
        });
        assert!(!dated, "README.md:{}: a date: {line}", number + 1);
        assert!(!line.to_lowercase().contains("issue "), "README.md:{}: an issue: {line}", number + 1);
    }
}

/// The examples' features each turn on burn-stoker's feature of the same name, described in
/// `runtime/Cargo.toml` (what examples/Cargo.toml says it points to).
#[test]
fn the_examples_features_are_burn_stokers() {
    let manifest = read("examples/Cargo.toml");
    let section = manifest.split("\n[features]\n").nth(1).unwrap().split("\n[").next().unwrap();
    let cargo = cargo_features();
    let mut seen = 0;
    for line in section.lines().filter(|line| !line.starts_with('#') && line.contains(" = ")) {
        let (name, value) = line.split_once(" = ").unwrap();
        if name == "default" {
            continue;
        }
        seen += 1;
        assert!(cargo.contains(name), "examples/Cargo.toml: `{name}` is not a feature of burn-stoker");
        let forwarded = format!("\"burn-stoker/{name}\"");
        assert!(value.contains(&forwarded), "examples/Cargo.toml: `{name}` does not turn on {forwarded}");
    }
    assert!(seen >= 8, "examples/Cargo.toml: {seen} features read");
}

/// The cargo commands of `.ci/run`, each on one line (continuations joined), without the
/// variables set before them.
fn ci_commands() -> Vec<String> {
    let script = read(".ci/run").replace("\\\n", " ");
    script.lines().map(without_assignments).filter(|line| line.starts_with("cargo ")).collect()
}

/// A shell line without the `NAME=value` / `NAME="a value"` assignments it starts with, its
/// blanks folded.
fn without_assignments(line: &str) -> String {
    let mut rest = line.trim_start();
    while let Some((name, value)) = rest.split_once('=')
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        rest = match value.strip_prefix('"') {
            Some(quoted) => quoted.split_once('"').map_or("", |(_, after)| after),
            None => value.split_once(' ').map_or("", |(_, after)| after),
        }
        .trim_start();
    }
    rest.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The pages a user or a contributor reads.
fn pages() -> Vec<String> {
    let mut pages: Vec<String> =
        ["README.md", "CONTRIBUTING.md", "ARCHITECTURE.md", "BENCHMARKS.md"].map(String::from).to_vec();
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../book/src");
    for entry in std::fs::read_dir(&book).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            pages.push(format!("book/src/{name}"));
        }
    }
    pages
}

/// The test command is `bash .ci/run`, in the README and in CONTRIBUTING.md, and its commands
/// are written only there: no page repeats one of them, and CONTRIBUTING.md's list of what it
/// runs names its stages, in order.
#[test]
fn the_test_command_is_written_once() {
    for page in ["README.md", "CONTRIBUTING.md"] {
        assert!(
            read(page).contains("```sh\nbash .ci/run\n```"),
            "{page}: the test command is `bash .ci/run`"
        );
    }
    let commands = ci_commands();
    assert!(
        commands.iter().any(|c| c.starts_with("cargo test --release --workspace")),
        "the commands read in .ci/run: {commands:?}"
    );
    for page in pages() {
        let text = read(&page).split_whitespace().collect::<Vec<_>>().join(" ");
        for command in &commands {
            assert!(!text.contains(command.as_str()), "{page} repeats a command of .ci/run: {command}");
        }
    }
    let script = read(".ci/run");
    let stages: Vec<&str> = script
        .lines()
        .filter_map(|line| line.strip_prefix("stage \"")?.strip_suffix('"'))
        .filter(|stage| !["installing what the tests need", "done"].contains(stage))
        .collect();
    let contributing = read("CONTRIBUTING.md");
    let list = contributing.split("these stages, each announced").nth(1).expect("CONTRIBUTING.md's list");
    let listed: Vec<&str> = list
        .lines()
        .take_while(|line| !line.starts_with("The commands themselves"))
        .filter_map(|line| line.split_once(". **")?.1.split_once("**"))
        .map(|(stage, _)| stage)
        .collect();
    assert_eq!(listed, stages, "CONTRIBUTING.md's list of what .ci/run runs, then .ci/run's stages");
}

/// The test functions of this binary (`tests/tests/it/*.rs`, and the files of a module's folder
/// such as `it/mlflow/`) and the runtime's own tests beside the code they test (`runtime/src`,
/// such as a writer's sink, private to its file): every `fn` after a `#[test]`.
fn test_functions() -> BTreeSet<String> {
    fn collect(dir: &Path, names: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                collect(&path, names);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for after in text.split("#[test]").skip(1) {
                let name = after.split("fn ").nth(1).and_then(|rest| rest.split('(').next());
                names.extend(name.map(|n| n.trim().to_string()));
            }
        }
    }
    let mut names = BTreeSet::new();
    collect(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it"), &mut names);
    collect(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/src"), &mut names);
    names
}

/// The backticked names of tests in `text`: snake-case names of six words or more, with their
/// module path (`it::stop::name`) or alone, given without the path.
fn named_tests(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|code| code.rsplit("::").next().unwrap_or(code))
        .filter(|name| {
            name.matches('_').count() >= 5
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect()
}

/// The catalogue's pages, one per library ("Coming from tensorpack", "... neon", ...).
const CATALOGUE: [&str; 5] = [
    "book/src/coming-from-tensorpack.md",
    "book/src/coming-from-neon.md",
    "book/src/coming-from-fastai.md",
    "book/src/coming-from-keras.md",
    "book/src/coming-from-lightning.md",
];

/// The catalogue's rows (the "Coming from" pages of each library) and the
/// counters' table ("Events and the lifecycle") name the tests that show a verdict: every
/// backticked name of a test there (a snake-case name of six words or more, with its module
/// path or alone) is a test function of this binary, so a renamed or removed test fails here.
#[test]
fn the_tests_the_guide_names_exist() {
    let tests = test_functions();
    for page in CATALOGUE.into_iter().chain(["book/src/events-and-lifecycle.md"]) {
        let text = read(page);
        let named = named_tests(&text);
        assert!(!named.is_empty(), "{page} names no test");
        for name in named {
            assert!(
                tests.contains(name),
                "{page} names the test `{name}`, which neither tests/tests/it nor runtime/src has"
            );
        }
    }
}

/// The catalogue says "same" only where a test shows it: every row of its tables whose verdict
/// (the last column) says "same", in whole or in part, names a test (which the test above checks
/// exists); a row that differs says how, and one that names no test must not say "same".
#[test]
fn every_row_the_catalogue_calls_the_same_names_a_test() {
    let mut rows = 0;
    for page in CATALOGUE {
        let text = read(page);
        for (number, line) in text.lines().enumerate() {
            let Some(row) = line.strip_prefix("| ").and_then(|row| row.strip_suffix(" |")) else { continue };
            let (Some((item, _)), Some((_, verdict))) = (row.split_once(" | "), row.rsplit_once(" | "))
            else {
                continue;
            };
            if verdict == "verdict" {
                continue;
            }
            rows += 1;
            let same = verdict
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|word| word.eq_ignore_ascii_case("same"));
            assert!(
                !same || !named_tests(line).is_empty(),
                "{page}:{}: the verdict on {item} says \"same\" and the row names no test",
                number + 1
            );
        }
    }
    assert!(rows >= 150, "{rows} rows read in the catalogue's tables");
}

/// The fenced blocks of `text` whose info string's first word is `language` (`rust,no_run` is
/// `rust`), in order, each without its fences.
fn fenced_blocks<'a>(text: &'a str, language: &str) -> Vec<&'a str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some((info, body)) = after.split_once('\n') else { break };
        let Some(end) = body.find("\n```") else { break };
        if info.trim().split(',').next() == Some(language) {
            blocks.push(&body[..end + 1]);
        }
        rest = &body[end + 4..];
    }
    blocks
}

/// CI builds and runs the README's example and the quick start's program in a crate outside the
/// workspace (`.ci/outside-crate`, written by its `sync.py`): its programs are the pages' Rust
/// blocks as they are, which hide no line from the reader (a copy would lack it), and its
/// dependencies are the README's install block, but that burn-stoker is this clone's by path.
#[test]
fn the_crate_outside_the_workspace_is_the_readme_and_the_quick_start_as_written() {
    let copies = [
        ("README.md", ".ci/outside-crate/src/main.rs"),
        ("book/src/quick-start.md", ".ci/outside-crate/src/bin/quick_start.rs"),
    ];
    for (page, copy) in copies {
        let text = read(page);
        let block =
            *fenced_blocks(&text, "rust").first().unwrap_or_else(|| panic!("{page} has no Rust block"));
        assert!(block.contains("fn main()"), "{page}'s first Rust block is not a program");
        assert!(
            !block.lines().any(|line| line == "#" || line.starts_with("# ")),
            "{page}'s first Rust block hides lines from the reader"
        );
        assert!(
            read(copy) == block,
            "{copy} differs from {page}'s Rust block: run python3 .ci/outside-crate/sync.py"
        );
    }
    let readme = read("README.md");
    let install = readme.split("\n## Install\n").nth(1).expect("the README's Install section");
    let install = install.split("\n## ").next().unwrap();
    let toml = fenced_blocks(install, "toml");
    assert_eq!(toml.len(), 1, "the README's Install section has one toml block");
    let manifest = read(".ci/outside-crate/Cargo.toml");
    let dependencies =
        manifest.split("\n[dependencies]\n").nth(1).expect("[dependencies] in the outside crate");
    let mut lines =
        toml[0].strip_prefix("[dependencies]\n").expect("the install block's [dependencies]").lines();
    assert!(lines.next().is_some_and(|line| line.starts_with("burn-stoker = ")), "{}", toml[0]);
    // The [dependencies] table alone: up to the blank line before the next table.
    let mut theirs = dependencies.split("\n\n").next().unwrap().lines();
    assert_eq!(theirs.next(), Some(r#"burn-stoker = { path = "../../runtime" }"#));
    assert_eq!(
        lines.collect::<Vec<_>>(),
        theirs.collect::<Vec<_>>(),
        "the README's install block, then the outside crate's"
    );
}
