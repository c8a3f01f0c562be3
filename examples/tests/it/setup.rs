//! The set-up the README describes: its test command is `.ci/run` itself (one source: CI runs
//! what a newcomer runs), which installs what the tests need, the Python packages in a virtual
//! environment (Debian's system Python refuses `pip install`, PEP 668) whose `bin/` comes first
//! on PATH; what the examples write is ignored by git.

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{ROOT}/{path}: {e}"))
}

/// The README's "Set up": its two commands, each alone on a line of a `sh` block.
#[test]
fn setup_readme_commands_are_cargo_run_and_ci_run() {
    let readme = read("README.md");
    let setup = readme.split("## Set up").nth(1).expect("README.md has a \"Set up\" section");
    let setup = setup.split("\n## ").next().unwrap();
    let commands: Vec<&str> =
        setup.split("```sh\n").skip(1).map(|block| block.split("```").next().unwrap().trim()).collect();
    assert_eq!(commands, ["cargo run --release", "bash .ci/run"], "README.md's set-up commands");
    let ci = read(".ci/run");
    for install in
        ["apt-get install", "mesa-vulkan-drivers", "libopenmpi-dev", "cargo install --locked mdbook"]
    {
        assert!(ci.contains(install), ".ci/run installs what the tests need: no `{install}`");
    }
    assert!(ci.contains("cargo test --release --workspace"), ".ci/run runs the workspace's tests");
}

#[test]
fn setup_python_packages_go_into_a_virtual_environment_first_on_path() {
    let venv = "python3 -m venv \"$HOME/.cache/stoker-venv\"";
    let path = "export PATH=\"$HOME/.cache/stoker-venv/bin:$PATH\"";
    let pip = "python3 -m pip install";
    let text = read(".ci/run");
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!(".ci/run lacks `{s}`"));
    assert!(at(venv) < at(path) && at(path) < at(pip), ".ci/run: the venv, then PATH, then pip install");
    assert!(text.contains("python3-venv"), ".ci/run installs Debian's python3-venv (ensurepip)");
}

#[test]
fn setup_train_log_is_ignored_by_git() {
    assert!(read(".gitignore").lines().any(|l| l.trim() == "train_log/"), ".gitignore lists train_log/");
}

/// Every `--features crate/feature` in the README and the guide names a feature that crate's
/// manifest declares, and the example's GPU feature has one spelling in the README
/// (`stoker-examples/wgpu`).
#[test]
fn setup_readme_feature_spellings_name_real_features() {
    let manifests = [
        ("burn-stoker", "runtime"),
        ("stoker-examples", "examples"),
        ("stoker-tests", "tests"),
        ("stoker-bench", "bench"),
    ];
    let readme = read("README.md");
    let mut pages = readme.clone();
    for entry in std::fs::read_dir(format!("{ROOT}/book/src")).expect("book/src") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    let mut seen = 0;
    for spec in pages.split("--features ").skip(1) {
        let list = spec.split(|c: char| c.is_whitespace() || c == '`').next().unwrap();
        for feature in list.split(',').filter(|f| f.contains('/')) {
            let (krate, name) = feature.split_once('/').unwrap();
            let dir = manifests
                .iter()
                .find(|(k, _)| *k == krate)
                .unwrap_or_else(|| panic!("`--features {feature}`: no workspace crate `{krate}`"))
                .1;
            let manifest = read(&format!("{dir}/Cargo.toml"));
            let features = manifest.split("[features]").nth(1).expect("a [features] table");
            let features = features.split("\n[").next().unwrap();
            assert!(
                features.lines().any(|l| l.split('=').next().unwrap().trim() == name),
                "`--features {feature}`: {dir}/Cargo.toml declares no feature `{name}`"
            );
            seen += 1;
        }
    }
    assert!(seen >= 3, "the README's and the guide's crate/feature spellings were found ({seen})");
    let mut wgpu: Vec<&str> = readme
        .split(|c: char| c.is_whitespace() || c == '`' || c == ',')
        .filter(|w| w.ends_with("/wgpu"))
        .collect();
    wgpu.sort();
    wgpu.dedup();
    assert_eq!(wgpu, ["stoker-examples/wgpu"], "README.md spells the GPU feature one way");
}
