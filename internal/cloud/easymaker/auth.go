package easymaker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runbook/runbook/internal/fault"
)

func (c *Client) usesToken() bool { return c.cfg.SecretKey == "" }

func (c *Client) dropToken() {
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	c.token, c.tokenExp = "", time.Time{}
}

// bearer returns the cached bearer token, getting a new one when there is
// none or it expires within tokenMargin: POST TokenURL with Basic auth of
// the access key pair and form grant_type=client_credentials.
func (c *Client) bearer(ctx context.Context) (string, error) {
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	if c.token != "" && c.cfg.Now().Add(tokenMargin).Before(c.tokenExp) {
		return c.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.TokenURL, strings.NewReader(form))
	if err != nil {
		return "", &fault.Error{Code: fault.Invalid, Message: "easymaker: token_url " + c.cfg.TokenURL, Err: err}
	}
	req.SetBasicAuth(c.cfg.AccessKeyID, c.cfg.AccessKeySecret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", &fault.Error{Code: fault.Unavailable, Message: "easymaker: getting a token", Err: err}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		ae := parseAPIError("POST "+c.cfg.TokenURL, resp.StatusCode, raw)
		se := ae.stepsError()
		se.Message = "easymaker: getting a token with the access key pair"
		return "", se
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" {
		return "", &fault.Error{Code: fault.Internal, Message: "easymaker: the token answer has no access_token", Err: err}
	}
	if tok.ExpiresIn <= 0 {
		tok.ExpiresIn = 3600
	}
	c.token, c.tokenExp = tok.AccessToken, c.cfg.Now().Add(time.Duration(tok.ExpiresIn)*time.Second)
	return c.token, nil
}
