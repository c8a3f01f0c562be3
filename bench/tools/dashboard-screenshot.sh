#!/usr/bin/env bash
# The guide's screenshot of the dashboard: the digits example with `--dashboard` in tmux at 120x40
# columns and rows, the screen read while it trains (once it shows epoch 20), then `q` pressed and
# the screen read again after the program has exited. Writes the first capture to
# book/src/dashboard-screen.txt (the dashboard chapter includes it) and prints both, with the
# terminal's modes (alternate screen on, cursor shown) at each moment.
#
# Usage: bash bench/tools/dashboard-screenshot.sh [OUT]     (OUT: book/src/dashboard-screen.txt)
# Needs tmux and the example built (`cargo build --release -p stoker-examples --bin digits`; the
# environment variable DIGITS names another binary).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-book/src/dashboard-screen.txt}
digits=${DIGITS:-${CARGO_TARGET_DIR:-target}/release/digits}
[ -x "$digits" ] || { echo "$digits not found: cargo build --release -p stoker-examples --bin digits" >&2; exit 1; }
command -v tmux >/dev/null || { echo "tmux is needed (apt-get install tmux)" >&2; exit 1; }

socket="stoker-screenshot-$$"
log_dir=$(mktemp -d)
cleanup() { tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$log_dir"; }
trap cleanup EXIT
t() { tmux -L "$socket" "$@"; }

t new-session -d -x 120 -y 40 sh -c \
    "'$digits' --log-dir '$log_dir' --epochs 1000 --dashboard; echo \"digits exited with \$?\"; sleep 600"
# Wait (2 minutes at most) for the screen to match a pattern.
wait_for() {
    for _ in $(seq 1200); do
        if t capture-pane -p -J | grep -qE "$1"; then return 0; fi
        sleep 0.1
    done
    echo "no /$1/ on the screen after 2 minutes:" >&2
    t capture-pane -p -J >&2
    exit 1
}
wait_for ' epoch ([2-9][0-9]|[1-9][0-9][0-9])/1000 '
before=$(t capture-pane -p -J)
before_modes=$(t display -p '#{alternate_on} #{cursor_flag}')
printf '%s\n' "$before" >"$out"
t send-keys q
wait_for 'digits exited with'
after=$(t capture-pane -p -J)
after_modes=$(t display -p '#{alternate_on} #{cursor_flag}')

echo "== while training (alternate_on cursor_flag: $before_modes); written to $out"
printf '%s\n' "$before"
echo "== after q, the program exited (alternate_on cursor_flag: $after_modes)"
printf '%s\n' "$after"
