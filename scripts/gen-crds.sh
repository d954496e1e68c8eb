#!/usr/bin/env bash
# Generate deploy/crds/*.yaml from the pydantic models (teapot_lb.model.crd).
# --check: generate into a temporary directory and fail, showing the diff, if the committed
# YAML differs from what the models produce (CI runs this through scripts/check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
out=deploy/crds

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PYTHONPATH=src "$python" -m teapot_lb.model.crd "$tmp" >/dev/null

if [ "${1:-}" = "--check" ]; then
  if diff -ru "$out" "$tmp" >"$tmp.diff" 2>&1; then
    echo "deploy/crds matches the models"
    rm -f "$tmp.diff"
    exit 0
  fi
  cat "$tmp.diff"
  rm -f "$tmp.diff"
  echo "deploy/crds is out of date with the models: run scripts/gen-crds.sh and commit" >&2
  exit 1
fi

mkdir -p "$out"
rm -f "$out"/*.yaml
cp "$tmp"/*.yaml "$out"/
ls "$out"/*.yaml
