package easymaker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runbook/runbook/internal/fault"
)

func TestConfigFromReadsTheConnection(t *testing.T) {
	tests := []struct {
		name    string
		conn    map[string]any
		want    Config
		wantErr string
	}{
		{"a secret key with defaults", map[string]any{"appkey": "ak", "secret_key": "sk"},
			Config{Region: "kr1", AppKey: "ak", SecretKey: "sk", TokenURL: DefaultTokenURL}, ""},
		{"an access key pair and a base URL", map[string]any{"appkey": "ak", "access_key_id": "id", "access_key_secret": "s",
			"base_url": "http://127.0.0.1:1/easymaker", "token_url": "http://127.0.0.1:1/easymaker/oauth2/token/create", "region": "kr2"},
			Config{BaseURL: "http://127.0.0.1:1/easymaker", Region: "kr2", AppKey: "ak", AccessKeyID: "id", AccessKeySecret: "s",
				TokenURL: "http://127.0.0.1:1/easymaker/oauth2/token/create"}, ""},
		{"no appkey is refused", map[string]any{"secret_key": "sk"}, Config{}, "appkey is required"},
		{"no credentials are refused", map[string]any{"appkey": "ak"}, Config{}, "give secret_key, or access_key_id and access_key_secret"},
		{"half a key pair is refused", map[string]any{"appkey": "ak", "access_key_id": "id"}, Config{}, "go together"},
		{"a non-string is refused", map[string]any{"appkey": 3}, Config{}, "appkey must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ConfigFrom(tt.conn)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, fault.Invalid, fault.CodeOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNewDefaultsToTheRegionHost(t *testing.T) {
	c, err := New(Config{AppKey: "ak", SecretKey: "sk", Region: "kr2"})
	require.NoError(t, err)
	assert.Equal(t, "https://kr2-easymaker.api.nhncloudservice.com", c.BaseURL())
	_, err = New(Config{AppKey: "ak", SecretKey: "sk", BaseURL: "ftp://x"})
	require.Error(t, err)
}

func TestStatusDoneFollowsTheSDKRule(t *testing.T) {
	tests := []struct {
		code         string
		done, failed bool
	}{
		{"COMPLETE", true, false}, {"ACTIVE", true, false}, {"ENABLED", true, false},
		{"RUNNING", false, false}, {"CREATE_IN_PROGRESS", false, false}, {"COMPLETE_IN_PROGRESS", false, false},
		{"DEPLOY_IN_PROGRESS", false, false},
		{"FAIL_TRAIN", true, true}, {"FAIL_TRAIN_IN_PROGRESS", true, true}, {"CREATE_FAILED", true, true},
		{"STOP_IN_PROGRESS", true, true}, {"STOPPED", true, true}, {"FAIL_BATCH_INFERENCE", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			done, failed := StatusDone(tt.code)
			assert.Equal(t, tt.done, done)
			assert.Equal(t, tt.failed, failed)
		})
	}
}

func TestStageURLAddsASchemeOnlyWhenMissing(t *testing.T) {
	assert.Equal(t, "https://abc.apigw.example/stage", StageURL("abc.apigw.example/stage/"))
	assert.Equal(t, "http://127.0.0.1:8/easymaker/_stage/x", StageURL("http://127.0.0.1:8/easymaker/_stage/x"))
}
