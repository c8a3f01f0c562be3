//! The set-up the README describes: CI (`.ci/run`) runs exactly the README's test command, both
//! install the Python packages the tests need in a virtual environment (Debian's system Python
//! refuses `pip install`, PEP 668) whose `bin/` comes first on PATH, and what the examples write
//! is ignored by git.

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{ROOT}/{path}: {e}"))
}

/// The README's one-line test command (the line of "Set up" that starts with `apt-get update`).
fn readme_command() -> String {
    read("README.md")
        .lines()
        .find(|l| l.starts_with("apt-get update &&"))
        .expect("README.md's \"Set up\" has a line starting with `apt-get update &&`")
        .to_string()
}

#[test]
fn setup_ci_runs_the_readme_test_command() {
    let readme = readme_command();
    let ci = read(".ci/run");
    let ci_command = ci.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(ci_command.starts_with("cargo test"), ".ci/run's last line is the test command: {ci_command}");
    assert!(
        readme.ends_with(ci_command),
        "README.md's command\n{readme}\ndoes not end with .ci/run's\n{ci_command}"
    );
}

#[test]
fn setup_python_packages_go_into_a_virtual_environment_first_on_path() {
    let venv = "python3 -m venv \"$HOME/.cache/stoker-venv\"";
    let path = "export PATH=\"$HOME/.cache/stoker-venv/bin:$PATH\"";
    let pip = "python3 -m pip install";
    for (name, text) in [("README.md", readme_command()), (".ci/run", read(".ci/run"))] {
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{name} lacks `{s}`"));
        assert!(at(venv) < at(path) && at(path) < at(pip), "{name}: the venv, then PATH, then pip install");
        assert!(text.contains("python3-venv"), "{name} installs Debian's python3-venv (ensurepip)");
    }
}

#[test]
fn setup_train_log_is_ignored_by_git() {
    assert!(read(".gitignore").lines().any(|l| l.trim() == "train_log/"), ".gitignore lists train_log/");
}

/// Every `--features crate/feature` in the README names a feature that crate's manifest declares
/// , and the GPU feature has one spelling (it had two: `burn-stoker/wgpu` and `stoker-examples/wgpu`).
#[test]
fn setup_readme_feature_spellings_name_real_features() {
    let manifests = [
        ("burn-stoker", "runtime"),
        ("stoker-examples", "examples"),
        ("stoker-tests", "tests"),
        ("stoker-bench", "bench"),
    ];
    let readme = read("README.md");
    let mut seen = 0;
    for spec in readme.split("--features ").skip(1) {
        let list = spec.split(|c: char| c.is_whitespace() || c == '`').next().unwrap();
        for feature in list.split(',').filter(|f| f.contains('/')) {
            let (krate, name) = feature.split_once('/').unwrap();
            let dir = manifests
                .iter()
                .find(|(k, _)| *k == krate)
                .unwrap_or_else(|| panic!("README.md: `--features {feature}`: no workspace crate `{krate}`"))
                .1;
            let manifest = read(&format!("{dir}/Cargo.toml"));
            let features = manifest.split("[features]").nth(1).expect("a [features] table");
            let features = features.split("\n[").next().unwrap();
            assert!(
                features.lines().any(|l| l.split('=').next().unwrap().trim() == name),
                "README.md: `--features {feature}`: {dir}/Cargo.toml declares no feature `{name}`"
            );
            seen += 1;
        }
    }
    assert!(seen >= 3, "README.md's crate/feature spellings were found ({seen})");
    let mut wgpu: Vec<&str> = readme
        .split(|c: char| c.is_whitespace() || c == '`' || c == ',')
        .filter(|w| w.ends_with("/wgpu"))
        .collect();
    wgpu.sort();
    wgpu.dedup();
    assert_eq!(wgpu, ["stoker-examples/wgpu"], "README.md spells the GPU feature one way");
}
