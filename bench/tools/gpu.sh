#!/bin/bash
# The GPU measurements of issue 17, in one call on a lent machine with an NVIDIA GPU (no network,
# no Rust toolchain there): the binaries are built on the developer's machine and travel xz-compressed
# in `.dev/` (ignored by git), with the Vulkan loader's Debian packages in `.gl/`.
#
#   .dev/compare.xz       `compare` as the workspace builds it (wgpu with fusion and autotune)
#   .dev/wgpu-test.xz     the test binary of examples/tests/it/wgpu.rs (blocking reads counted)
#   .dev/compare-cuda.xz  `compare` built with `stoker-examples/cuda` (optional)
#
# Each: `strip` the binary, then `xz -6` it to .dev/NAME.xz (the tree that travels is limited to
# 64 MiB). The CUDA one, on a machine that cannot download cubecl-cuda's LLVM bundle (burn 0.22.1
# compiles CUDA kernels through LLVM by default): in a scratch worktree, add
# `cubecl-cuda = { version = "0.11.3", default-features = false, features = ["cpp", "std"] }`
# (kernels through NVRTC) to bench/Cargo.toml's dependencies; build with `DOCS_RS=1` (skips the
# download) and `CUDARC_CUDA_VERSION=13000` (the device's CUDA; no nvcc here):
#   cargo build --release -p stoker-bench --features stoker-examples/cuda --bin compare
# The link fails on the LLVM functions, which the `cpp` path never calls: collect them with
#   cargo rustc ... --bin compare -- -C link-arg=-Wl,--error-limit=0 2>&1 | grep -o "undefined symbol: [^ ]*"
# compile a C file defining each as a function that aborts, and link it in with
#   cargo rustc ... --bin compare -- -C link-arg=/path/llvm_stubs.o
# A benchmark build: the README's "Benchmarks" says what was measured with it.
#
# Writes every log under $OUT (or ./gpu-out) and prints a summary last. Each part has its own
# time limit, so that one hang leaves the others' results.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT" /tmp/bin
exec > >(tee "$OUT/gpu.log") 2>&1
start=$SECONDS
stamp() { echo "== [$((SECONDS - start)) s] $*"; }

stamp setup
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if ! ls /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json >/dev/null 2>&1 &&
    [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
for b in compare wgpu-test compare-cuda; do
    [ -f ".dev/$b.xz" ] && python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" ".dev/$b.xz" "/tmp/bin/$b" && chmod +x "/tmp/bin/$b"
done
ls -la /tmp/bin
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
nproc; grep -m1 "model name" /proc/cpuinfo
# The GPU's utilization every second, to tell the GPU from a software fallback.
nvidia-smi dmon -s u -d 1 >"$OUT/dmon.log" 2>&1 &

# CUDA: NVRTC and its headers, wherever this image keeps them.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(python3 -c "import nvidia,os; print(' '.join(os.path.join(p,'cu13','lib') for p in nvidia.__path__))" 2>/dev/null); do
    ls "$d"/libnvrtc.so* >/dev/null 2>&1 && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
[ -d /usr/local/cuda ] && export CUDA_PATH=/usr/local/cuda CUDA_HOME=/usr/local/cuda
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

# The hand loop's steps/s on a device, to size the runs: `steps` such that one run takes ~`secs`.
steps_for() { # device model secs binary min
    local rate
    rate=$(timeout 60 /tmp/bin/"$4" --device "$1" --hand "$2" "$5" 3 2>&1 | tee -a "$OUT/calibrate.log" |
        sed -n 's/.*: \([0-9.]*\) steps\/s.*/\1/p')
    python3 -c "import sys; r=float(sys.argv[1] or 0); print(max(int(sys.argv[3]), int(r*float(sys.argv[2]))))" "${rate:-0}" "$3" "$5"
}

measure() { # binary device tag; CASES_<tag>, ROUNDS_<tag>="mlp conv" (0 skips a model)
    local bin=$1 dev=$2 tag=$3 cases_var="CASES_$3" rounds_var="ROUNDS_$3" mlp_rounds conv_rounds
    local cases=${!cases_var:-cdeghi}
    read -r mlp_rounds conv_rounds <<<"${!rounds_var:-9 7}"
    [ -x "/tmp/bin/$bin" ] || { echo "no $bin"; return; }
    stamp "$tag: calibrate"
    local mlp conv
    # STEPS_<tag>="mlp conv" skips the calibration.
    local given="STEPS_$tag"
    read -r mlp conv <<<"${!given:-}"
    [ -n "${mlp:-}" ] || mlp=$(steps_for "$dev" mlp 0.6 "$bin" 300)
    [ -n "${conv:-}" ] || conv=$(steps_for "$dev" conv 0.6 "$bin" 50)
    echo "$tag: mlp $mlp steps, conv $conv steps per run"
    stamp "$tag: MLP, cases $cases"
    [ "$mlp_rounds" = 0 ] || timeout 120 /tmp/bin/"$bin" --device "$dev" --every-step --cases "$cases" "$mlp_rounds" "$mlp" 0 >"$OUT/$tag-mlp.log" 2>"$OUT/$tag-mlp.err"
    echo "exit $?"; sed -n '/^MLP/,$p' "$OUT/$tag-mlp.log"; sort "$OUT/$tag-mlp.err" | uniq -c | head -24
    stamp "$tag: ConvNet, cases $cases"
    [ "$conv_rounds" = 0 ] || timeout 100 /tmp/bin/"$bin" --device "$dev" --every-step --cases "$cases" "$conv_rounds" 0 "$conv" >"$OUT/$tag-conv.log" 2>"$OUT/$tag-conv.err"
    echo "exit $?"; sed -n '/^ConvNet/,$p' "$OUT/$tag-conv.log"; sort "$OUT/$tag-conv.err" | uniq -c | head -24
    stamp "$tag: validation"
    timeout 60 /tmp/bin/"$bin" --device "$dev" --validation 9 5 2>&1 | tee "$OUT/$tag-valid.log" | tail -8
}

PARTS=${PARTS:-test wgpu cuda}
if [[ $PARTS == *test* && -x /tmp/bin/wgpu-test ]]; then
    stamp "wgpu test: blocking reads"
    timeout 90 /tmp/bin/wgpu-test --test-threads 1 --nocapture on_wgpu_a_deferred 2>&1 | tee "$OUT/wgpu-test.log" | grep -v "^$" | tail -15
fi
for part in $PARTS; do
    case $part in
        wgpu) measure compare wgpu wgpu ;;
        cuda) measure compare-cuda cuda cuda ;;
    esac
done
stamp done
kill %1 2>/dev/null
echo "GPU utilization (dmon), percent of samples above 0:"
awk '$1 !~ /#/ && $2+0 > 0 {n++} $1 !~ /#/ {t++} END {print n "/" t}' "$OUT/dmon.log"
