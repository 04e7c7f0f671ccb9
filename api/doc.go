// Package api holds Lattice's protobuf definitions (api/lattice/v1/*.proto)
// and the Go code generated from them (package latticev1). The generated
// files are committed; `make proto` (or `go generate ./api/...`) regenerates
// them with Debian's protobuf-compiler and the pinned Go plugins.
package api

//go:generate sh ../scripts/genproto.sh
