#!/bin/sh
# Regenerates api/lattice/v1/*.pb.go. Needs protoc (Debian: protobuf-compiler)
# and installs the pinned Go plugins into $(go env GOPATH)/bin if missing.
set -eu
cd "$(dirname "$0")/.."
GOBIN="$(go env GOPATH)/bin"
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.0
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
[ -x "$GOBIN/protoc-gen-go" ] || go install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION
[ -x "$GOBIN/protoc-gen-go-grpc" ] || go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION
PATH="$GOBIN:$PATH" protoc -I api \
	--go_out=api --go_opt=paths=source_relative \
	--go-grpc_out=api --go-grpc_opt=paths=source_relative \
	api/lattice/v1/*.proto
