//! The pages users read agree with the code: the README's features table lists exactly the
//! features `runtime/Cargo.toml` declares (whose `##` comments are the features' documentation on
//! docs.rs), and the README stays a page read in five minutes.

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
