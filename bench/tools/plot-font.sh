#!/bin/bash
# Regenerates runtime/fonts/DejaVuSans-plots.ttf, the font of Recorder's plots: DejaVu Sans 2.37
# (as the npm package dejavu-fonts-ttf ships the upstream release) cut to printable ASCII, Latin-1,
# the minus sign and the ellipsis, without hinting (the plots' rasterizer, ab_glyph, ignores it) and
# without the OpenType layout tables (ab_glyph reads only the legacy `kern` table, kept), with
# fontTools' subsetter. Its licence, the upstream LICENSE, is runtime/fonts/LICENSE-DejaVu.
#
# Needs npm and python3 -m venv; downloads the npm package and fontTools into a scratch folder.
# The output is the same bytes for the same fontTools (4.68.0 made the committed file).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent dejavu-fonts-ttf@2.37.3 >/dev/null && tar xzf dejavu-fonts-ttf-2.37.3.tgz)
src="$work/package/ttf/DejaVuSans.ttf"
echo "7da195a74c55bef988d0d48f9508bd5d849425c1770dba5d7bfc6ce9ed848954  $src" | sha256sum -c --quiet
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet fonttools==4.68.0
"$work/venv/bin/pyftsubset" "$src" \
    --unicodes="U+0020-007E,U+00A0-00FF,U+2212,U+2026" \
    --no-hinting --layout-features='' --legacy-kern --name-IDs='*' \
    --drop-tables+=GPOS,GSUB,GDEF,MATH,FFTM \
    --output-file=runtime/fonts/DejaVuSans-plots.ttf
cp "$work/package/LICENSE" runtime/fonts/LICENSE-DejaVu
ls -l runtime/fonts/DejaVuSans-plots.ttf
