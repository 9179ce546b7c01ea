#!/usr/bin/env bash
# Fails when gen/ is not what proto/generate.sh makes of proto/: regenerates
# into a temporary directory and diffs. The protoc version that protoc-gen-go
# writes into each header is ignored, so that a machine whose protoc differs
# only in version passes; the hand-written doc.go files are not generated.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
./proto/generate.sh "$tmp"
if ! diff -r -u -x doc.go -I '^// 	protoc  ' "$tmp" gen; then
  echo "gen/ is out of date with proto/: run proto/generate.sh and commit the result" >&2
  exit 1
fi
echo "gen/ is up to date with proto/"
