#!/bin/sh
# Regenerates api/lattice/v1/*.pb.go, the REST gateway of the same protos
# (api/lattice/v1/gateway/*.pb.gw.go, routes in api/lattice/v1/gateway/rest.yaml)
# and its OpenAPI document (api/lattice/v1/gateway/openapi.json). Needs protoc
# (Debian: protobuf-compiler) and installs the pinned Go plugins into
# $(go env GOPATH)/bin if missing. The routes come from the gRPC API
# Configuration file, so no .proto imports google/api/*.proto.
set -eu
cd "$(dirname "$0")/.."
GOBIN="$(go env GOPATH)/bin"
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.0
GRPC_GATEWAY_VERSION=v2.33.0
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
[ -x "$GOBIN/protoc-gen-go" ] || go install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION
[ -x "$GOBIN/protoc-gen-go-grpc" ] || go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION
[ -x "$GOBIN/protoc-gen-grpc-gateway" ] || go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$GRPC_GATEWAY_VERSION
[ -x "$GOBIN/protoc-gen-openapiv2" ] || go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$GRPC_GATEWAY_VERSION
PATH="$GOBIN:$PATH" protoc -I api \
	--go_out=api --go_opt=paths=source_relative \
	--go-grpc_out=api --go-grpc_opt=paths=source_relative \
	api/lattice/v1/*.proto

# The gateway: a package of its own (standalone), so that latticectl, which
# imports api/lattice/v1, does not link the HTTP gateway.
GW=api/lattice/v1/gateway
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PATH="$GOBIN:$PATH" protoc -I api \
	--grpc-gateway_out="$TMP" \
	--grpc-gateway_opt=paths=source_relative,standalone=true,grpc_api_configuration=$GW/rest.yaml \
	--openapiv2_out="$TMP" \
	--openapiv2_opt=grpc_api_configuration=$GW/rest.yaml,openapi_configuration=$GW/openapi.yaml,allow_merge=true,merge_file_name=openapi,json_names_for_fields=false,disable_default_errors=false \
	api/lattice/v1/*.proto
rm -f $GW/*.pb.gw.go
for f in "$TMP"/lattice/v1/*.pb.gw.go; do
	sed -e 's/^package latticev1$/package gateway/' -e 's/^Package latticev1 is a reverse proxy\.$/Package gateway is a reverse proxy./' "$f" >"$GW/$(basename "$f")"
done
cp "$TMP/openapi.swagger.json" $GW/openapi.json
