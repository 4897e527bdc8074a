package easymaker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/runbook/runbook/internal/cloud/httpcall"
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
// effect, so 413, 429, 5xx and network errors are retried like a GET
// (Client.predictPolicy).
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
	var out json.RawMessage
	_, err := httpcall.Do(ctx, c.predictPolicy, httpcall.Call{
		Op: "easymaker: predict: " + target,
		Request: func(ctx context.Context) (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
			if err != nil {
				return nil, &fault.Error{Code: fault.Invalid, Message: "easymaker: predict: " + target, Err: err}
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			return req, nil
		},
		Read: func(resp *http.Response) error {
			defer resp.Body.Close()
			raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
			switch {
			case err != nil:
				return &fault.Error{Code: fault.Unavailable, Message: "easymaker: " + op + ": reading the answer", Err: err}
			case !json.Valid(raw):
				return &fault.Error{Code: fault.Failed, Message: "easymaker: predict: the model server answered something that is not JSON: " + snippet(raw)}
			}
			out = raw
			return nil
		},
		Failed: c.failed(op),
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
