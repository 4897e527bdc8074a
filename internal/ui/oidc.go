package ui

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// OIDCLogin configures "Sign in with SSO": the authorization-code flow with
// PKCE, state and nonce against the issuer's discovery document.
type OIDCLogin struct {
	Issuer   string
	ClientID string
	// ClientSecret is sent to the token endpoint when set (a confidential
	// client); empty: a public client, PKCE only.
	ClientSecret string
	// RedirectURL is the callback the issuer sends the browser back to
	// (registered with the issuer). Empty: /login/oidc/callback of the
	// host the browser asked for.
	RedirectURL string
	// SignIn verifies an ID token as the API verifies an OIDC bearer
	// (signature, issuer, audience, expiry), checks that its nonce claim
	// is nonce, and returns who it is and the session source to keep.
	SignIn func(ctx context.Context, idToken, nonce string) (Identity, Source, error)
	// HTTPClient reaches the issuer (default: 10 s timeout).
	HTTPClient *http.Client

	mu        sync.Mutex
	endpoints *oidcEndpoints
}

// oidcCookie carries a sign-in in progress from /login/oidc to its
// callback. It is SameSite=Lax: the callback is a navigation from the
// issuer's site.
const oidcCookie = "runbook_oidc"

// oidcFlow is the content of oidcCookie.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"next"`
}

type oidcEndpoints struct {
	Auth  string `json:"authorization_endpoint"`
	Token string `json:"token_endpoint"`
}

func (o *OIDCLogin) client() *http.Client {
	if o.HTTPClient != nil {
		return o.HTTPClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// discover returns the issuer's endpoints, fetched once.
func (o *OIDCLogin) discover(ctx context.Context) (*oidcEndpoints, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.endpoints != nil {
		return o.endpoints, nil
	}
	u := strings.TrimSuffix(o.Issuer, "/") + "/.well-known/openid-configuration"
	var ep oidcEndpoints
	if err := o.getJSON(ctx, http.MethodGet, u, nil, &ep); err != nil {
		return nil, fmt.Errorf("oidc discovery of %s: %w", o.Issuer, err)
	}
	if ep.Auth == "" || ep.Token == "" {
		return nil, fmt.Errorf("oidc discovery of %s names no authorization_endpoint or token_endpoint", o.Issuer)
	}
	o.endpoints = &ep
	return o.endpoints, nil
}

// getJSON sends a request (a form when form is not nil) and decodes a 200
// answer.
func (o *OIDCLogin) getJSON(ctx context.Context, method, u string, form url.Values, out any) error {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("%s answered %d %s", u, resp.StatusCode, e.Error)
	}
	return json.Unmarshal(b, out)
}

// redirectURL is the callback URL of this request's host.
func (o *OIDCLogin) redirectURL(r *http.Request) string {
	if o.RedirectURL != "" {
		return o.RedirectURL
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/login/oidc/callback"
}

func pkceChallenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// oidcStart sends the browser to the issuer.
func (u *UI) oidcStart(w http.ResponseWriter, r *http.Request) {
	o := u.o.OIDC
	next := safeNext(r.URL.Query().Get("next"))
	ep, err := o.discover(r.Context())
	if err != nil {
		u.log.Error("ui sso sign-in: the issuer cannot be reached", "err", err)
		u.showLogin(w, r, http.StatusServiceUnavailable, loginData{Next: next, Error: "The identity provider cannot be reached now; try again."})
		return
	}
	f := oidcFlow{State: randomToken(), Nonce: randomToken(), Verifier: randomToken(), Next: next}
	raw, _ := json.Marshal(f)
	setOIDCCookie(w, r, base64.RawURLEncoding.EncodeToString(raw), 600)
	q := url.Values{"response_type": {"code"}, "client_id": {o.ClientID}, "redirect_uri": {o.redirectURL(r)},
		"scope": {"openid profile email"}, "state": {f.State}, "nonce": {f.Nonce},
		"code_challenge": {pkceChallenge(f.Verifier)}, "code_challenge_method": {"S256"}}
	sep := "?"
	if strings.Contains(ep.Auth, "?") {
		sep = "&"
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, ep.Auth+sep+q.Encode(), http.StatusFound)
}

func setOIDCCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: value, Path: "/login/oidc", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure})
}

// errSSO is what a refused SSO sign-in shows; the log says why.
var errSSO = errors.New("the sign-in with SSO failed or expired; try again")

// oidcCallback takes the issuer's answer: the state must be the one this
// browser was sent with, the code is exchanged with its PKCE verifier,
// and the ID token must verify with the flow's nonce.
func (u *UI) oidcCallback(w http.ResponseWriter, r *http.Request) {
	o := u.o.OIDC
	setOIDCCookie(w, r, "", -1)
	f, err := u.oidcCheckState(r)
	if err != nil {
		u.log.Info("ui sso sign-in refused", "err", err)
		u.showLogin(w, r, http.StatusForbidden, loginData{Next: f.Next, Error: errSSO.Error()})
		return
	}
	ident, src, err := u.oidcExchange(r, o, f)
	if err != nil {
		u.log.Info("ui sso sign-in refused", "err", err)
		u.showLogin(w, r, http.StatusUnauthorized, loginData{Next: f.Next, Error: errSSO.Error()})
		return
	}
	id, err := u.sessions.create(r.Context(), src, ident)
	if err != nil {
		u.log.Error("ui sso sign-in: the session cannot be stored", "err", err)
		u.showLogin(w, r, http.StatusServiceUnavailable, loginData{Next: f.Next, Error: "The session cannot be stored now; try again."})
		return
	}
	setCookie(w, r, sessionCookie, id, 0)
	// A page of this site goes on to next: a redirect would carry on the
	// issuer's cross-site navigation, with which the browser does not send
	// the SameSite=Strict session cookie.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	next := html.EscapeString(f.Next)
	_, _ = fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s"><title>Signed in</title><p>Signed in. <a href="%s">Continue</a>.</p>`, next, next)
}

// oidcCheckState reads the flow of the browser's cookie and checks the
// callback's state against it.
func (u *UI) oidcCheckState(r *http.Request) (oidcFlow, error) {
	f := oidcFlow{Next: "/runs"}
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		return f, errors.New("no sign-in in progress (the cookie is missing or expired)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || json.Unmarshal(raw, &f) != nil {
		return oidcFlow{Next: "/runs"}, errors.New("the sign-in cookie is malformed")
	}
	f.Next = safeNext(f.Next)
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return f, fmt.Errorf("the issuer answered error %q", e)
	}
	if !equalToken(q.Get("state"), f.State) {
		return f, errors.New("the state does not match the sign-in's")
	}
	if q.Get("code") == "" {
		return f, errors.New("the issuer sent no code")
	}
	return f, nil
}

// oidcExchange trades the code for an ID token and signs it in.
func (u *UI) oidcExchange(r *http.Request, o *OIDCLogin, f oidcFlow) (Identity, Source, error) {
	ep, err := o.discover(r.Context())
	if err != nil {
		return Identity{}, Source{}, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {r.URL.Query().Get("code")},
		"redirect_uri": {o.redirectURL(r)}, "client_id": {o.ClientID}, "code_verifier": {f.Verifier}}
	if o.ClientSecret != "" {
		form.Set("client_secret", o.ClientSecret)
	}
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if err := o.getJSON(r.Context(), http.MethodPost, ep.Token, form, &tok); err != nil {
		return Identity{}, Source{}, fmt.Errorf("token exchange: %w", err)
	}
	if tok.IDToken == "" {
		return Identity{}, Source{}, errors.New("the token endpoint sent no id_token")
	}
	return o.SignIn(r.Context(), tok.IDToken, f.Nonce)
}
