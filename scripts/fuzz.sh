#!/bin/sh
# Runs every fuzz target of a parser of user input for a bounded time each
# (default 20s; FUZZTIME=5m for a longer search). `go test` alone runs only
# their seed inputs. Fails on the first crash; Go saves the failing input
# under the package's testdata/fuzz/ for a regression test.
set -eu
cd "$(dirname "$0")/.."
t="${FUZZTIME:-20s}"
for spec in \
	"./model FuzzParseWalltime" "./model FuzzParseArraySpec" "./model FuzzParseNodeRange" \
	"./model FuzzParseDependencies" "./model FuzzCheckScript" "./model FuzzRequestLimits" \
	"./auth FuzzParseTokens" "./cli FuzzParseSbatch" "./dag FuzzParse" "./replay FuzzReadSWF" \
	"./quorum FuzzDecode"; do
	set -- $spec
	echo "== $2 ($1, $t)"
	go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$t"
done
