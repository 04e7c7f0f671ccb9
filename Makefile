.PHONY: build test proto lint bench

build:
	go build -o bin/ ./cmd/...

test:
	go test ./...

proto:
	./scripts/genproto.sh

lint:
	gofmt -l . | (! grep .)
	go vet ./...

bench:
	go test -run '^$$' -bench . -benchmem ./solver/ ./quorum/
