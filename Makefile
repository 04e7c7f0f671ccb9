.PHONY: build test proto lint bench

# grpcnotrace and urfave_cli_no_docs leave out of every binary what none
# uses (gRPC's x/net/trace and html/template; urfave/cli's man and markdown
# generation): each latticectl run starts faster (docs/scale.md).
TAGS ?= grpcnotrace,urfave_cli_no_docs

build:
	go build -tags $(TAGS) -o bin/ ./cmd/...

test:
	go test ./...

proto:
	./scripts/genproto.sh

lint:
	gofmt -l . | (! grep .)
	go vet ./...

bench:
	go test -run '^$$' -bench . -benchmem ./solver/ ./quorum/
