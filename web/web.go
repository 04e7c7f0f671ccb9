package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Assets is the dashboard's files (index.html, login.html, app.js, app.css).
var Assets, _ = fs.Sub(static, "static")

// Handler serves the assets; paths are relative to the dashboard's root
// (/ is index.html). Pages are never cached, so an upgrade shows at once.
func Handler() http.Handler {
	files := http.FileServerFS(Assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
