#!/usr/bin/env bash
# Generates the Go code of proto/delayq/v1/delayq.proto into gen/ (or into
# the directory given as $1, which .ci/check-proto diffs against gen/).
# Needs protoc (Debian's protobuf-compiler) and the well-known types
# (libprotobuf-dev: google/protobuf/field_mask.proto); the plugins are built from the
# versions go.mod pins (google.golang.org/protobuf, connectrpc.com/connect),
# so generated code and runtime always agree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-gen}"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
go build -o "$bin/protoc-gen-connect-go" connectrpc.com/connect/cmd/protoc-gen-connect-go
mkdir -p "$out"
PATH="$bin:$PATH" protoc -I proto \
  --go_out="$out" --go_opt=paths=source_relative \
  --connect-go_out="$out" --connect-go_opt=paths=source_relative \
  delayq/v1/delayq.proto
