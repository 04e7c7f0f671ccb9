#!/bin/sh
# Installs the Debian packages that some tests need, when their commands are
# missing: prometheus (prometheus, promtool), docker-compose (a Compose file
# parser; no container engine is needed), systemd (systemd-analyze).
# Needs root and apt-get; otherwise it says so and exits 1, and the tests
# that need the tool skip with that message.
#   scripts/install-test-tools.sh prometheus docker-compose systemd
set -eu
need=""
for pkg in "$@"; do
	case "$pkg" in
	prometheus) cmd=promtool ;;
	docker-compose) cmd=docker-compose ;;
	systemd) cmd=systemd-analyze ;;
	*) echo "install-test-tools: unknown package $pkg (allowed: prometheus, docker-compose, systemd)" >&2; exit 2 ;;
	esac
	command -v "$cmd" >/dev/null 2>&1 || need="$need $pkg"
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
