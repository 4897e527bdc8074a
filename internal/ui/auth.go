package ui

import (
	"errors"
	"net/http"
	"strings"
)

// loginData is the login page's.
type loginData struct {
	Next  string
	Name  string
	Error string
	// LoginCSRF is the login form's token, also in the login cookie.
	LoginCSRF string
	// SSO offers "Sign in with SSO" (OIDC is configured).
	SSO bool
}

// maxNameLen bounds the name given at login.
const maxNameLen = 64

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if u.current(r) != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	u.showLogin(w, r, http.StatusOK, loginData{Next: next})
}

// showLogin renders the login form with a fresh login CSRF token.
func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, d loginData) {
	d.LoginCSRF = randomToken()
	d.SSO = u.o.OIDC != nil
	setCookie(w, r, loginCookie, d.LoginCSRF, 3600)
	w.Header().Set("Cache-Control", "no-store")
	u.render(w, r, status, "login", &view{Title: "Sign in", Data: d})
}

// login checks the token with Options.Identify and starts a session.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	d := loginData{Next: safeNext(r.PostFormValue("next")), Name: strings.TrimSpace(r.PostFormValue("name"))}
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameOrigin(r) || !equalToken(r.PostFormValue("csrf"), c.Value) {
		d.Error = "The sign-in form expired or came from another site. Try again."
		u.showLogin(w, r, http.StatusForbidden, d)
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if len(d.Name) > maxNameLen {
		d.Error = "The name is longer than 64 characters."
		u.showLogin(w, r, http.StatusBadRequest, d)
		return
	}
	if token == "" {
		d.Error = "Enter an API token."
		u.showLogin(w, r, http.StatusBadRequest, d)
		return
	}
	ident, err := u.o.Identify(r.Context(), token)
	if err != nil {
		d.Error = err.Error()
		status := http.StatusUnauthorized
		if !errors.Is(err, ErrBadToken) {
			status = http.StatusServiceUnavailable
		}
		u.log.Info("ui sign-in refused", "err", err)
		u.showLogin(w, r, status, d)
		return
	}
	id, err := u.sessions.create(r.Context(), Source{Kind: SourceToken, TokenHash: keyOf(token), Name: d.Name}, ident)
	if err != nil {
		u.log.Error("ui sign-in: the session cannot be stored", "err", err)
		d.Error = "The session cannot be stored now; try again."
		u.showLogin(w, r, http.StatusServiceUnavailable, d)
		return
	}
	setCookie(w, r, sessionCookie, id, 0)
	setCookie(w, r, loginCookie, "", -1)
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		u.sessions.remove(r.Context(), c.Value)
	}
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
