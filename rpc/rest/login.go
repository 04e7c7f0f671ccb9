package rest

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// The dashboard's login, the Jupyter way: `latticectl dashboard` asks its
// member (DashboardService.CreateLogin) for a one-time code and opens
// /ui/login?code=CODE; that request spends the code, sets an HttpOnly
// session cookie and redirects to /ui/, so the code stays neither in the
// address bar nor in the history. A token pasted on the login page takes the
// same path: the member makes a code for the token's identity and spends it
// at once.

// loginPage spends a code, or shows the page where a token can be pasted.
func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	if code == "" {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/login.html"
		h.assets.ServeHTTP(w, r2)
		return
	}
	h.startSession(w, r, code)
}

// loginToken logs in with a pasted token.
func (h *handler) loginToken(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "login refused: the form was posted from another site", http.StatusForbidden)
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" || len(tok) > 4096 || strings.ContainsAny(tok, "\r\n") {
		http.Redirect(w, r, "/ui/login?error="+url.QueryEscape("paste a token (latticed token create makes one)"), http.StatusSeeOther)
		return
	}
	ctx := metadata.AppendToOutgoingContext(r.Context(), "authorization", "Bearer "+tok)
	login, err := h.dash.CreateLogin(ctx, &latticev1.CreateDashboardLoginRequest{})
	if err != nil {
		h.cfg.Logger.Info("dashboard login refused", "err", err)
		http.Redirect(w, r, "/ui/login?error="+url.QueryEscape("that token was refused"), http.StatusSeeOther)
		return
	}
	h.startSession(w, r, login.Code)
}

func (h *handler) startSession(w http.ResponseWriter, r *http.Request, code string) {
	session, expires, ok := h.cfg.Sessions.Exchange(code)
	if !ok {
		http.Redirect(w, r, "/ui/login?error="+url.QueryEscape("that login link was used already or has expired; run latticectl dashboard again"), http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: session, Path: "/", Expires: expires,
		HttpOnly: true, Secure: h.cfg.Secure, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "logout refused: the form was posted from another site", http.StatusForbidden)
		return
	}
	if c, err := r.Cookie(CookieName); err == nil {
		h.cfg.Sessions.End(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", Expires: time.Unix(0, 0), MaxAge: -1,
		HttpOnly: true, Secure: h.cfg.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// sameOrigin refuses a form another site's page posted (a browser names
// the page's origin; other clients send none).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}
