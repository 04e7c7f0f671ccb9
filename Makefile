.PHONY: build test proto lint bench

# grpcnotrace and urfave_cli_no_docs leave out of every binary what none
# uses (gRPC's x/net/trace and html/template; urfave/cli's man and markdown
# generation): each latticectl run starts faster (docs/scale.md).
TAGS ?= grpcnotrace,urfave_cli_no_docs

# bin/slurm/ holds Slurm's command names (sbatch, squeue, ...) as links to
# latticectl: put it first on PATH (docs/slurm-commands.md).
SLURM_COMMANDS = sbatch squeue scancel sacct sinfo scontrol sacctmgr sprio sshare srun salloc

build:
	go build -tags $(TAGS) -o bin/ ./cmd/...
	mkdir -p bin/slurm
	for c in $(SLURM_COMMANDS); do ln -sfn ../latticectl bin/slurm/$$c; done

test:
	go test ./...

proto:
	./scripts/genproto.sh

lint:
	gofmt -l . | (! grep .)
	go vet ./...

bench:
	go test -run '^$$' -bench . -benchmem ./solver/ ./quorum/
