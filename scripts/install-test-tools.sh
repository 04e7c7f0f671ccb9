#!/bin/sh
# Installs the Debian packages that some tests need, when their commands are
# missing: prometheus (prometheus, promtool), docker-compose (a Compose file
# parser; no container engine is needed), systemd (systemd-analyze),
# openmpi (openmpi-bin + libopenmpi-dev: mpirun, mpicc), mpich (mpich +
# libmpich-dev: mpichversion), munge (munged, libmunge), slurm (slurm-wlm:
# the Slurm 22.05 the Slurm-compatibility tests compare against), chromium
# (headless browser tests), snakemake, protoc (protobuf-compiler).
# Needs root and apt-get; otherwise it says so and exits 1, and the tests
# that need the tool skip with that message.
#   scripts/install-test-tools.sh prometheus docker-compose systemd
set -eu
need=""
for pkg in "$@"; do
	case "$pkg" in
	prometheus) cmd=promtool; debs=prometheus ;;
	docker-compose) cmd=docker-compose; debs=docker-compose ;;
	systemd) cmd=systemd-analyze; debs=systemd ;;
	openmpi) cmd=ompi_info; debs="openmpi-bin libopenmpi-dev" ;;
	mpich) cmd=mpichversion; debs="mpich libmpich-dev" ;;
	munge) cmd=munged; debs="munge libmunge-dev" ;;
	slurm) cmd=slurmctld; debs="slurm-wlm" ;;
	chromium) cmd=chromium; debs=chromium ;;
	snakemake) cmd=snakemake; debs=snakemake ;;
	protoc) cmd=protoc; debs=protobuf-compiler ;;
	*) echo "install-test-tools: unknown package $pkg (allowed: prometheus, docker-compose, systemd, openmpi, mpich, munge, slurm, chromium, snakemake, protoc)" >&2; exit 2 ;;
	esac
	command -v "$cmd" >/dev/null 2>&1 || need="$need $debs"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "install-test-tools: need root to apt-get install$need" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-test-tools: no apt-get to install$need" >&2
	exit 1
fi
# One installer at a time (test binaries of several packages may call this).
exec 9>"${TMPDIR:-/tmp}/lattice-install-test-tools.lock"
command -v flock >/dev/null 2>&1 && flock 9
export DEBIAN_FRONTEND=noninteractive
apt() { apt-get -q -y -o DPkg::Lock::Timeout=300 "$@"; }
# shellcheck disable=SC2086
apt install --no-install-recommends $need >/dev/null 2>&1 || { apt update >/dev/null && apt install --no-install-recommends $need; }
