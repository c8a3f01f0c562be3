#!/usr/bin/env python3
"""Compile cost of the DSL: `cargo check` time of a crate declaring 100 callbacks with stoker's
attributes against one declaring the same 100 callbacks by hand (`impl Callback<M>`), with the
dependencies already built. Each crate is re-checked after touching its source, alternately,
`ROUNDS` times; medians.

usage: python3 bench/tools/compile_cost.py [rounds]   (from the repository root)
"""
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
N = 100


def dsl_callback(i):
    kind = i % 4
    if kind == 0:
        return f"""#[callback(on = trigger_step, every_k_steps = 10)]
pub fn periodic{i}(ctx: &mut Context<'_, impl Module>) {{
    std::hint::black_box(ctx.global_step());
}}
"""
    if kind == 1:
        return f"""#[callback(on = after_step)]
#[fetch("loss")]
pub fn watch{i}(loss: f32) {{
    std::hint::black_box(loss);
}}
"""
    if kind == 2:
        return f"""#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Count{i} {{
    epochs: u64,
}}

#[callback(state)]
impl Count{i} {{
    #[on(trigger_epoch)]
    fn count(&mut self) {{
        self.epochs += 1;
    }}
}}
"""
    return f"""#[callback(on = before_epoch)]
pub fn start{i}() {{}}
"""


def hand_callback(i):
    kind = i % 4
    if kind == 0:
        return f"""#[derive(Default)]
pub struct Periodic{i};

impl<M: Module> Callback<M> for Periodic{i} {{
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {{
        if ctx.global_step() % 10 == 0 {{
            std::hint::black_box(ctx.global_step());
        }}
        Ok(())
    }}
}}
"""
    if kind == 1:
        return f"""#[derive(Default)]
pub struct Watch{i};

static WATCH{i}: [Fetch; 1] = [Fetch::host("loss")];

impl<M> Callback<M> for Watch{i} {{
    fn fetches(&self) -> &[Fetch] {{
        &WATCH{i}
    }}
    fn after_step(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> burn_stoker::Result<()> {{
        std::hint::black_box(values.get::<f32>("loss")?);
        Ok(())
    }}
}}
"""
    if kind == 2:
        return f"""#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Count{i} {{
    epochs: u64,
}}

impl<M> Callback<M> for Count{i} {{
    fn save_state(&self) -> burn_stoker::Result<Option<serde_json::Value>> {{
        serde_json::to_value(self).map(Some).map_err(burn_stoker::Error::msg)
    }}
    fn load_state(&mut self, state: serde_json::Value) -> burn_stoker::Result<()> {{
        *self = serde_json::from_value(state).map_err(burn_stoker::Error::msg)?;
        Ok(())
    }}
    fn trigger_epoch(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {{
        self.epochs += 1;
        Ok(())
    }}
}}
"""
    return f"""#[derive(Default)]
pub struct Start{i};

impl<M> Callback<M> for Start{i} {{
    fn before_epoch(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {{
        Ok(())
    }}
}}
"""


def write_crate(base, name, body):
    crate = base / name
    (crate / "src").mkdir(parents=True, exist_ok=True)
    (crate / "Cargo.toml").write_text(f"""[package]
name = "{name}"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
stoker = {{ path = "{ROOT / 'runtime'}" }}
burn = {{ version = "=0.22.1", default-features = false, features = ["std", "optim", "autodiff", "dataset"] }}
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"
""")
    header = "#![allow(dead_code)]\nuse burn::module::Module;\nuse burn_stoker::prelude::*;\n\n"
    (crate / "src" / "lib.rs").write_text(header + "\n".join(body))
    return crate


def check(crate, env):
    os.utime(crate / "src" / "lib.rs")
    start = time.perf_counter()
    subprocess.run(["cargo", "check", "-q", "--manifest-path", str(crate / "Cargo.toml")], env=env, check=True)
    return time.perf_counter() - start


def main():
    base = pathlib.Path(tempfile.mkdtemp(prefix="stoker-compile-cost-"))
    (base / "Cargo.toml").write_text('[workspace]\nresolver = "3"\nmembers = ["dsl100", "hand100"]\n')
    dsl = write_crate(base, "dsl100", [dsl_callback(i) for i in range(N)])
    hand = write_crate(base, "hand100", [hand_callback(i) for i in range(N)])
    lock = ROOT / "Cargo.lock"
    if lock.exists():
        (base / "Cargo.lock").write_text(lock.read_text())
    env = dict(os.environ, CARGO_TARGET_DIR=str(base / "target"))
    print(f"building the dependencies in check mode under {base} (once)...", flush=True)
    check(dsl, env)
    check(hand, env)
    times = {"dsl": [], "hand": []}
    for _ in range(ROUNDS):
        times["dsl"].append(check(dsl, env))
        times["hand"].append(check(hand, env))
    d, h = statistics.median(times["dsl"]), statistics.median(times["hand"])
    lines = {name: (base / name / "src/lib.rs").read_text().count("\n") for name in ("dsl100", "hand100")}
    print(f"cargo check of {N} callbacks, dependencies built, {ROUNDS} rounds, medians:")
    print(f"  declared with the DSL   {d:6.2f} s  ({lines['dsl100']} lines)")
    print(f"  written by hand         {h:6.2f} s  ({lines['hand100']} lines)")
    print(f"  DSL / hand              {d / h:6.2f}")


if __name__ == "__main__":
    main()
