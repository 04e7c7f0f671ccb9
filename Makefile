.PHONY: build test proto lint bench

# grpcnotrace and urfave_cli_no_docs leave out of every binary what none
# uses (gRPC's x/net/trace and html/template; urfave/cli's man and markdown
# generation): each latticectl run starts faster (docs/scale.md).
TAGS ?= grpcnotrace,urfave_cli_no_docs

# bin/slurm/ holds Slurm's command names (sbatch, squeue, ...) as links to
# latticectl: put it first on PATH (docs/slurm-commands.md).
SLURM_COMMANDS = sbatch squeue scancel sacct sinfo scontrol sacctmgr sprio sshare srun salloc

# latticectl is built static (CGO_ENABLED=0): a cgo build is dynamically
# linked, and the loader and libc's start-up add ~6 ms of CPU, a fifth, to
# every call (docs/ARCHITECTURE.md, "latticectl start-up"). The daemons keep
# cgo: they look users up through the system's NSS (LDAP, SSSD).
build:
	go build -tags $(TAGS) -o bin/ ./cmd/...
	CGO_ENABLED=0 go build -tags $(TAGS) -o bin/ ./cmd/latticectl
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
	go test -run '^$$' -bench CallCPU -benchtime 30x ./cli/
