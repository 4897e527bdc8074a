package easymaker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/runbook/runbook/internal/cloud/retry"
	"github.com/runbook/runbook/internal/fault"
)

// ResourceURI returns the apigwResourceUri under which the stage serves
// modelID (Endpoint().predict takes a model ID).
func (s *EndpointStage) ResourceURI(modelID string) (string, bool) {
	for _, m := range s.EndpointModelList {
		if m.ModelID == modelID {
			return m.APIGWResourceURI, true
		}
	}
	return "", false
}

// StageURL returns the absolute URL of a stage's apigwStageUrl: the
// service hands it out with or without a scheme; without one it is https.
func StageURL(apigwStageURL string) string {
	u := strings.TrimRight(strings.TrimSpace(apigwStageURL), "/")
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		u = "https://" + strings.TrimLeft(u, "/")
	}
	return u
}

// Predict sends body (any JSON value; json.RawMessage and []byte go as
// they are) to POST {apigwStageUrl}{resourceURI} without an auth header
// and returns the model server's raw JSON answer. Inference has no side
// effect, so 413, 429, 503 and network errors are retried like a GET.
func (c *Client) Predict(ctx context.Context, stage *EndpointStage, resourceURI string, body any) (json.RawMessage, error) {
	if stage == nil || strings.TrimSpace(stage.APIGWStageURL) == "" {
		return nil, fault.Errorf(fault.Invalid, "easymaker: predict: the stage has no apigwStageUrl (is it ACTIVE?)")
	}
	if resourceURI == "" {
		return nil, fault.Errorf(fault.Invalid, "easymaker: predict: no resource URI")
	}
	if !strings.HasPrefix(resourceURI, "/") {
		resourceURI = "/" + resourceURI
	}
	var payload []byte
	switch b := body.(type) {
	case json.RawMessage:
		payload = b
	case []byte:
		payload = b
	default:
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: "easymaker: predict: encoding the body", Err: err}
		}
	}
	target := StageURL(stage.APIGWStageURL) + resourceURI
	op := "POST " + target
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
		if err != nil {
			return nil, &fault.Error{Code: fault.Invalid, Message: "easymaker: predict: " + target, Err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := c.cfg.HTTPClient.Do(req)
		var raw []byte
		if err == nil {
			raw, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
			resp.Body.Close()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("easymaker: predict: %w", ctx.Err())
			}
			if attempt < c.cfg.MaxAttempts {
				if err := c.cfg.Sleep(ctx, retry.Backoff(attempt, baseBackoff, maxBackoff)); err != nil {
					return nil, fmt.Errorf("easymaker: predict: %w", err)
				}
				continue
			}
			return nil, &fault.Error{Code: fault.Unavailable, Message: "easymaker: " + op + attemptsNote(attempt), Err: err}
		}
		if resp.StatusCode/100 == 2 {
			if !json.Valid(raw) {
				return nil, &fault.Error{Code: fault.Failed, Message: "easymaker: predict: the model server answered something that is not JSON: " + snippet(raw)}
			}
			return json.RawMessage(raw), nil
		}
		ae := parseAPIError(op, resp.StatusCode, raw)
		ae.RetryAfter = retry.After(resp.Header.Get("Retry-After"), c.cfg.Now())
		switch resp.StatusCode {
		case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable:
			if attempt < c.cfg.MaxAttempts {
				wait := retry.Backoff(attempt, baseBackoff, maxBackoff)
				if ae.RetryAfter > 0 {
					wait = min(ae.RetryAfter, maxRetryAfter)
				}
				if err := c.cfg.Sleep(ctx, wait); err != nil {
					return nil, fmt.Errorf("easymaker: predict: %w", err)
				}
				continue
			}
		}
		return nil, ae.stepsError()
	}
}
