// Package web is the dashboard's static assets (plain HTML, CSS and
// JavaScript, no build step), embedded in the binary: nothing is fetched
// from the internet at run time. rpc/rest serves them under /ui/ and the
// pages read the REST API under /api/v1/ with the browser's session cookie.
// The package holds no logic of its own and imports nothing of Lattice.
package web
